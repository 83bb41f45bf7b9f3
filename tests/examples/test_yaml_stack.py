"""``examples/yaml-stack``: the team stack in Pulumi YAML, through the component package.

No Pulumi CLI here, so the program is checked the way the YAML runtime would read it: its ``aks-gpu`` resources
against the package schema (types, declared inputs, required ones), every ``${...}`` against the names the
program declares; then it is evaluated against a real plan of the platform's ``prod`` stack, its component
constructed the way a YAML stack constructs it (camelCase inputs, a ``providers`` list), and its Job judged by the
platform's admission policy and compared with the Python example's."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from aks_gpu.admission.evaluate import evaluate
from aks_gpu.admission.policy import render_policy
from aks_gpu.mock_engine import PlanResult
from aks_gpu.naming import PACKAGE_NAME
from aks_gpu.package import PUBLIC_COMPONENTS, PackageProvider, component_schema
from tests.conftest import PROJECT_DIR, MockHarness, stack_model
from tests.examples.test_team_stack import manifest, pod_spec, prod_outputs, restricted_prod, team_plan

YAML_DIR = PROJECT_DIR / "examples" / "yaml-stack"
PACKAGE_PREFIX = f"{PACKAGE_NAME}:"
LOCAL_TYPE = f"#/types/{PACKAGE_NAME}:"
KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
# Pulumi YAML's built-in variable: https://www.pulumi.com/docs/iac/languages-sdks/yaml/yaml-language-reference/
BUILTINS = frozenset({"pulumi"})


@functools.cache
def program() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((YAML_DIR / "Pulumi.yaml").read_text(encoding="utf-8"))
    return loaded


@functools.cache
def schema() -> dict[str, Any]:
    return component_schema()


def package_resources() -> dict[str, dict[str, Any]]:
    return {name: r for name, r in program()["resources"].items() if str(r["type"]).startswith(PACKAGE_PREFIX)}


# ---------------------------------------------------------------- Pulumi YAML expressions (property access only)

# ${root}, ${root.foo}, ${root["foo"]}, ${root[0]} and chains of them; `$${` is a literal `${`.
# https://www.pulumi.com/docs/iac/languages-sdks/yaml/yaml-language-reference/#property-access
_ROOT = re.compile(r"[A-Za-z_][\w-]*")
_STEP = re.compile(r'\.(?P<name>[A-Za-z_][\w-]*)|\["(?P<key>(?:[^"\\]|\\.)*)"\]|\[(?P<index>\d+)\]')
_INTERPOLATION = re.compile(r"(?<!\$)\$\{([^}]*)\}")


def references(value: Any) -> Iterator[str]:
    """The property accesses inside ``${...}`` anywhere in ``value``, keys included."""
    if isinstance(value, str):
        yield from _INTERPOLATION.findall(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from references(key)
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


def root_of(access: str) -> str:
    found = _ROOT.match(access)
    assert found is not None, f"not a property access: ${{{access}}}"
    return found.group()


class Scope(Mapping[str, Any]):
    """The program's one namespace of config, variables and resources; variables are evaluated on first use."""

    def __init__(self, config: Mapping[str, Any], variables: Mapping[str, Any]) -> None:
        self.known: dict[str, Any] = dict(config)
        self.variables = dict(variables)

    def __getitem__(self, name: str) -> Any:
        if name not in self.known and name in self.variables:
            self.known[name] = resolve(self.variables[name], self)
        return self.known[name]

    def __iter__(self) -> Iterator[str]:
        return iter({*self.known, *self.variables})

    def __len__(self) -> int:
        return len({*self.known, *self.variables})


def access(expression: str, scope: Mapping[str, Any]) -> Any:
    value = scope[root_of(expression)]
    rest, position = expression[len(root_of(expression)) :], 0
    while position < len(rest):
        step = _STEP.match(rest, position)
        assert step is not None, f"not a property access: ${{{expression}}}"
        value = value[step["name"] or step["key"] if step["index"] is None else int(step["index"])]
        position = step.end()
    return value


def resolve(value: Any, scope: Mapping[str, Any]) -> Any:
    """A value with its expressions evaluated: a string that is one ``${...}`` is replaced by the value (a
    substitution), other strings are interpolated; map keys are expressions too."""
    if isinstance(value, str):
        whole = re.fullmatch(r"\$\{([^}]*)\}", value)
        if whole:
            return access(whole[1], scope)
        return _INTERPOLATION.sub(lambda m: str(access(m[1], scope)), value).replace("$${", "${")
    if isinstance(value, dict):
        return {resolve(key, scope): resolve(item, scope) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, scope) for item in value]
    return value


# ---------------------------------------------------------------- the program as the YAML runtime reads it


def test_the_package_is_this_repositorys_component_package() -> None:
    source = Path(program()["packages"][PACKAGE_NAME])
    assert not source.is_absolute()
    folder = (YAML_DIR / source).resolve()
    assert folder == PROJECT_DIR / "components"
    assert yaml.safe_load((folder / "PulumiPlugin.yaml").read_text(encoding="utf-8"))["runtime"]["name"] == "python"


def test_every_reference_names_config_a_variable_or_a_resource() -> None:
    declared = {*program()["config"], *program()["variables"], *program()["resources"], *BUILTINS}
    body = [program()["variables"], program()["resources"], program()["outputs"]]
    used = {root_of(ref) for ref in references(body)}
    assert used and used <= declared, f"undeclared: {sorted(used - declared)}"
    # Resource options reference resources, never plain values.
    for resource in program()["resources"].values():
        for option in ("provider", "dependsOn", "providers"):
            for ref in references(resource.get("options", {}).get(option, [])):
                assert root_of(ref) in program()["resources"]


def option_problems(resources: Mapping[str, Any]) -> Iterator[str]:
    """Resource options the YAML engine refuses (pulumi/pulumi-yaml pkg/pulumiyaml/run.go, 36f271cf):
    ``dependsOn`` and ``providers`` must be lists of resources ("resource option providers value must be a list
    of resources"; evaluateResourceListValuedOption), ``provider`` and ``parent`` one resource
    (evaluateResourceValuedOption); ``provider``/``providers`` entries must be provider resources."""

    def resource_of(value: Any) -> str | None:
        whole = re.fullmatch(r"\$\{([A-Za-z_][\w-]*)\}", value) if isinstance(value, str) else None
        return whole[1] if whole and whole[1] in resources else None

    for name, resource in resources.items():
        options = resource.get("options", {})
        for option in ("dependsOn", "providers"):
            if option not in options:
                continue
            if not isinstance(options[option], list):
                yield f"{name}.options.{option}: must be a list of resources"
                continue
            for item in options[option]:
                if resource_of(item) is None:
                    yield f"{name}.options.{option}: {item!r} is not a resource"
        for option in ("provider", "parent"):
            if option in options and resource_of(options[option]) is None:
                yield f"{name}.options.{option}: must be one resource"
        for item in [options.get("provider"), *(options.get("providers") or [])]:
            target = resource_of(item)
            if target is not None and not str(resources[target]["type"]).startswith("pulumi:providers:"):
                yield f"{name}.options: {item} is not a provider resource"


def test_resource_options_have_the_shapes_the_yaml_engine_accepts() -> None:
    assert list(option_problems(program()["resources"])) == []


def test_the_option_check_refuses_a_providers_map() -> None:
    # The shape this example had: a map of package to provider.
    resources = copy.deepcopy(program()["resources"])
    resources["team"]["options"]["providers"] = {"kubernetes": "${cluster}"}
    resources["train"]["options"]["dependsOn"] = "${team}"
    resources["train"]["options"]["provider"] = "${platform}"
    assert list(option_problems(resources)) == [
        "team.options.providers: must be a list of resources",
        "train.options.dependsOn: must be a list of resources",
        "train.options: ${platform} is not a provider resource",
    ]


def test_component_resources_exist_in_the_package_schema() -> None:
    used = {r["type"] for r in package_resources().values()}
    assert used == {"aks-gpu:index:GpuWorkloadNamespace"}
    assert used <= set(schema()["resources"])


def undeclared_or_missing(value: Any, spec: Mapping[str, Any], path: str) -> Iterator[str]:
    """Keys of a literal object that its schema type does not declare, and required keys it lacks, recursively
    into nested literal objects and lists. Expressions (``${...}``) are taken on trust: only the runtime knows."""
    if not isinstance(value, dict):
        return
    declared: Mapping[str, Any] = spec.get("inputProperties", spec.get("properties", {}))
    required = spec.get("requiredInputs", spec.get("required", []))
    for key in sorted(set(required) - set(value)):
        yield f"{path}.{key}: required, missing"
    for key, item in value.items():
        if key not in declared:
            yield f"{path}.{key}: not an input (inputs: {', '.join(sorted(declared))})"
            continue
        prop = declared[key]
        if "items" in prop:  # a list: each literal element against the item type
            elements = [(e, f"{path}.{key}[{i}]") for i, e in enumerate(item)] if isinstance(item, list) else []
            ref = prop["items"].get("$ref", "")
        else:
            elements, ref = [(item, f"{path}.{key}")], prop.get("$ref", "")
        if ref.startswith(LOCAL_TYPE):
            for element, element_path in elements:
                yield from undeclared_or_missing(element, schema()["types"][ref.removeprefix("#/types/")], element_path)


def test_component_properties_are_declared_inputs_and_required_ones_are_there() -> None:
    for name, resource in package_resources().items():
        spec = schema()["resources"][resource["type"]]
        assert list(undeclared_or_missing(resource.get("properties", {}), spec, name)) == []


def test_the_schema_check_finds_misspelt_and_missing_keys() -> None:
    # The check above, on a copy of the namespace with a camelCase mistake and the quota left out.
    team = copy.deepcopy(program()["resources"]["team"]["properties"])
    team["workload"]["podsecurity"] = team["workload"].pop("podSecurity")
    del team["workload"]["gpuQuota"]
    team["node_selector"] = team.pop("nodeSelector")
    team["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effects": "NoSchedule"}]
    found = list(undeclared_or_missing(team, schema()["resources"]["aks-gpu:index:GpuWorkloadNamespace"], "team"))
    assert any(line.startswith("team.nodeSelector: required") for line in found)
    assert any(line.startswith("team.node_selector: not an input") for line in found)
    assert any(line.startswith("team.workload.gpuQuota: required") for line in found)
    assert any(line.startswith("team.workload.podsecurity: not an input") for line in found)
    assert any(line.startswith("team.tolerations[0].effect: required") for line in found)
    assert any(line.startswith("team.tolerations[0].effects: not an input") for line in found)


# ---------------------------------------------------------------- the program run against the platform's outputs


def construct_namespace(properties: Mapping[str, Any]) -> PlanResult:
    """The component as a YAML stack gets it: built by the package's provider from camelCase inputs, with the
    Kubernetes provider handed over in the ``providers`` list (the YAML engine passes it as
    ``pulumi.Providers(...)``, which the SDK files under the provider's package)."""
    provider = PackageProvider(PUBLIC_COMPONENTS, PACKAGE_NAME)
    [listed] = program()["resources"]["team"]["options"]["providers"]
    assert listed == "${cluster}"

    def program_() -> None:
        cluster = k8s.Provider("cluster", kubeconfig="{}")
        result = provider.construct(
            "team",
            "aks-gpu:index:GpuWorkloadNamespace",
            dict(properties),
            pulumi.ResourceOptions(providers=[cluster]),
        )
        pulumi.export("team", result.state)

    return MockHarness().run(program_, stack="dev")


@functools.cache
def evaluated() -> tuple[dict[str, Any], PlanResult]:
    """Every resource's properties with expressions evaluated (the StackReference answered with the prod plan's
    outputs, the component with what it really registers), and the component's plan."""
    config = {key: decl.get("default") for key, decl in program()["config"].items()}
    config["platformStack"] = "org/aks-gpu/prod"
    scope = Scope(config, program()["variables"])
    resources = program()["resources"]
    scope.known["platform"] = {"name": config["platformStack"], "outputs": prod_outputs()}
    scope.known["cluster"] = resolve(resources["cluster"]["properties"], scope)
    team_properties = resolve(resources["team"]["properties"], scope)
    team = construct_namespace(team_properties)
    scope.known["team"] = team.outputs["team"]
    scope.known["train"] = resolve(resources["train"]["properties"], scope)
    properties = {name: scope[name] for name in ("cluster", "train")} | {"team": team_properties}
    properties["outputs"] = resolve(program()["outputs"], scope)
    return properties, team


def yaml_job() -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", **evaluated()[0]["train"]}


def test_the_namespace_is_fenced_and_its_objects_use_the_stacks_provider() -> None:
    _, team = evaluated()
    assert manifest(team, "ResourceQuota", "team-vision", "gpu-quota")["spec"]["hard"] == {"requests.nvidia.com/gpu": "16"}
    labels = manifest(team, "Namespace", "_", "team-vision")["metadata"]["labels"]
    assert labels["aks-gpu/workload"] == "training"
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert "networkpolicy-team-vision-deny-cross-namespace.yaml" in team.manifests()
    [cluster] = team.by_type(KUBERNETES_PROVIDER)
    objects = [r for r in team.resources if r.custom and r.type.startswith("kubernetes:")]
    assert objects and {r.options["provider"] for r in objects} == {f"{cluster.name}-id"}


def test_the_job_is_placed_from_the_platforms_train_pool() -> None:
    train = prod_outputs()["pools"]["train"]
    spec = pod_spec(yaml_job())
    assert spec["nodeSelector"] == train["nodeSelector"] == {"aks-gpu/pool": "train"}
    assert spec["tolerations"] == train["tolerations"]
    [container] = spec["containers"]
    assert container["resources"]["limits"] == container["resources"]["requests"] == {"nvidia.com/gpu": 8}
    assert evaluated()[0]["outputs"] == {"namespace": "team-vision", "jobName": "train"}
    assert evaluated()[0]["cluster"]["kubeconfig"] == prod_outputs()["kubeconfig"]
    # The provider is the cluster's for good: keyed by its ARM id, not by the kubeconfig's text.
    assert evaluated()[0]["cluster"]["clusterIdentifier"] == prod_outputs()["clusterId"]
    assert prod_outputs()["clusterId"].endswith("/providers/Microsoft.ContainerService/managedClusters/aks-gpu-prod")


def test_the_job_is_admitted_by_the_platforms_gpu_policy() -> None:
    _, team = evaluated()
    namespaces = {"team-vision": manifest(team, "Namespace", "_", "team-vision")}
    for model in (stack_model("prod"), restricted_prod()):
        [decision] = evaluate([yaml_job()], render_policy(model), namespaces)
        assert decision.actions == ("Deny",), decision.note
        assert decision.allowed, decision.messages


def test_the_yaml_job_is_the_python_examples_job() -> None:
    # The same Job in two languages; quantities are strings in Python and numbers in YAML.
    python_job = manifest(team_plan(), "Job", "team-vision", "train")
    yaml_spec, python_spec = copy.deepcopy(pod_spec(yaml_job())), copy.deepcopy(pod_spec(python_job))
    for spec in (yaml_spec, python_spec):
        for container in spec["containers"]:
            container["resources"] = {kind: {k: str(v) for k, v in q.items()} for kind, q in container["resources"].items()}
    assert yaml_spec == python_spec
    assert {k: v for k, v in yaml_job().items() if k != "spec"} == {k: v for k, v in python_job.items() if k != "spec"}
    assert {k: v for k, v in yaml_job()["spec"].items() if k != "template"} == {
        k: v for k, v in python_job["spec"].items() if k != "template"
    }


@pytest.mark.parametrize("expression", ['${platform.outputs["pools"]["gpu"]}', "${nope.value}"])
def test_the_evaluator_refuses_what_the_runtime_would(expression: str) -> None:
    scope = Scope({"platform": {"outputs": prod_outputs()}}, {})
    with pytest.raises(KeyError):
        resolve(expression, scope)
