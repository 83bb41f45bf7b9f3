"""The rendered ValidatingAdmissionPolicy and binding: what a cluster of each stack gets."""

from __future__ import annotations

import re
from typing import Any

import pytest
from kubernetes.client.models import V1ValidatingAdmissionPolicy, V1ValidatingAdmissionPolicyBinding

from components.admission.evaluate import compile_bindings
from components.admission.policy import BINDING_NAME, POLICY_NAME, gpu_resource_names, pools_by_type, render_policy
from components.config import ConfigError, validate_config
from components.model import PlatformModel, resolve
from tests.conftest import STACK_NAMES, minimal_raw, raw_stack, stack_model

# CEL words Kubernetes reserves: a field with one of these names must be written __name__, so a plain `.name`
# selection of one would not compile on a real API server. https://kubernetes.io/docs/reference/using-api/cel/#escaping
CEL_RESERVED = ("as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
                "package", "namespace", "return", "var", "void", "while")  # fmt: skip
# Functions and macros of standard CEL, cel-go's string extension and the Kubernetes quantity library.
KUBERNETES_CEL_CALLS = {"has", "size", "string", "all", "exists", "filter", "map", "startsWith", "join", "quantity", "compareTo"}


def model_with(**admission: Any) -> PlatformModel:
    raw = raw_stack("prod")
    raw["aks-gpu:admission"] = {**raw.get("aks-gpu:admission", {}), **admission}
    return resolve(validate_config(raw, "test").config)


def expressions(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    found = [c["expression"] for c in spec["matchConditions"]] + [v["expression"] for v in spec["variables"]]
    for validation in spec["validations"]:
        found += [validation["expression"], validation["messageExpression"]]
    return found


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_gets_the_named_policy_and_binding(stack: str) -> None:
    policy, binding = render_policy(stack_model(stack))
    assert (policy["kind"], policy["metadata"]["name"]) == ("ValidatingAdmissionPolicy", POLICY_NAME)
    assert (binding["kind"], binding["metadata"]["name"]) == ("ValidatingAdmissionPolicyBinding", BINDING_NAME)
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert binding["spec"]["policyName"] == "aks-gpu-gpu-placement"
    assert policy["spec"]["failurePolicy"] == "Fail"


def test_prod_denies_and_dev_warns_and_audits() -> None:
    assert render_policy(stack_model("prod"))[1]["spec"]["validationActions"] == ["Deny"]
    assert render_policy(stack_model("dev"))[1]["spec"]["validationActions"] == ["Warn", "Audit"]


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_manifests_fit_the_kubernetes_schema(stack: str) -> None:
    # The client's pydantic models forbid unknown fields and check types and required fields.
    policy, binding = render_policy(stack_model(stack))
    parsed = V1ValidatingAdmissionPolicy.model_validate(policy)
    V1ValidatingAdmissionPolicyBinding.model_validate(binding)
    spec = parsed.spec
    assert spec is not None and spec.match_constraints is not None
    # Enumerations the schema types as plain strings.
    # https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/validating-admission-policy-v1/
    assert spec.failure_policy in {"Fail", "Ignore"}
    assert spec.match_constraints.match_policy in {"Exact", "Equivalent"}
    for rule in spec.match_constraints.resource_rules or []:
        assert set(rule.operations or []) <= {"CREATE", "UPDATE", "DELETE", "CONNECT", "*"}
        assert rule.scope in {"Cluster", "Namespaced", "*"}
    assert set(binding["spec"]["validationActions"]) <= {"Deny", "Warn", "Audit"}
    for validation in spec.validations or []:
        assert validation.reason in {"Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"}
    names = [v.name for v in spec.variables or []]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in names)


def test_matches_pods_and_every_workload_template_on_create_and_update() -> None:
    rules = render_policy(stack_model("prod"))[0]["spec"]["matchConstraints"]["resourceRules"]
    matched = {(group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]}
    assert matched == {
        ("", "pods"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
    }
    assert all(rule["operations"] == ["CREATE", "UPDATE"] and rule["apiVersions"] == ["v1"] for rule in rules)


def test_exempt_namespaces_are_left_out_by_the_namespace_selector() -> None:
    default = render_policy(stack_model("prod"))[0]["spec"]["matchConstraints"]["namespaceSelector"]
    assert default == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "gpu-resources", "gpu-operator", "monitoring"],
            }
        ]
    }
    custom = render_policy(model_with(exemptNamespaces=["kube-system", "ray-system"]))[0]
    assert custom["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "ray-system",
    ]
    assert render_policy(model_with(exemptNamespaces=[]))[0]["spec"]["matchConstraints"]["namespaceSelector"] == {}


def test_gpu_resource_names_come_from_the_pools() -> None:
    raw = minimal_raw(
        **{
            "aks-gpu:gpuPools": [
                {"name": "infer", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "inference",
                 "migProfile": "MIG1g"},
            ],
            "aks-gpu:workloads": [{"name": "team-a", "type": "inference", "gpuQuota": 7}],
            "aks-gpu:devicePlugin": {"migStrategy": "mixed"},
        }
    )  # fmt: skip
    model = resolve(validate_config(raw, "test").config)
    names = gpu_resource_names(model)
    assert names == ("amd.com/gpu", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb")
    variables = {v["name"]: v["expression"] for v in render_policy(model)[0]["spec"]["variables"]}
    assert variables["gpuResourceNames"] == "['amd.com/gpu', 'nvidia.com/gpu', 'nvidia.com/mig-1g.10gb']"


def test_pools_by_type_follow_the_model() -> None:
    assert pools_by_type(stack_model("prod")) == {"inference": ("infer",), "training": ("train",)}


def test_workload_namespace_rule_only_when_configured() -> None:
    plain = render_policy(stack_model("prod"))[0]["spec"]
    restricted = render_policy(model_with(restrictToWorkloadNamespaces=True))[0]["spec"]
    assert len(restricted["validations"]) == len(plain["validations"]) + 2
    added = {v["name"]: v["expression"] for v in restricted["variables"]}
    assert added["poolsByType"] == "{'inference': ['infer'], 'training': ['train']}"
    assert not any("workloadType" in v["expression"] for v in plain["validations"])


def test_disabled_admission_renders_nothing() -> None:
    assert render_policy(model_with(enabled=False)) == []


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_expressions_stay_within_kubernetes_cel(stack: str) -> None:
    policy = render_policy(model_with(restrictToWorkloadNamespaces=True) if stack == "prod" else stack_model(stack))[0]
    compile_bindings(render_policy(stack_model(stack)))  # every expression parses
    for expression in expressions(policy):
        without_strings = re.sub(r"'(?:[^'\\]|\\.)*'", "''", expression)
        calls = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", without_strings))
        assert calls <= KUBERNETES_CEL_CALLS, f"not a Kubernetes CEL function: {calls - KUBERNETES_CEL_CALLS}"
        reserved = re.findall(rf"\.({'|'.join(CEL_RESERVED)})\b", without_strings)
        assert not reserved, f"field selection of a reserved CEL word {reserved} in {expression}"
        assert "?." not in without_strings and ".orValue" not in without_strings  # no optional types needed


def test_an_action_listed_twice_is_a_config_error() -> None:
    raw = minimal_raw(**{"aks-gpu:admission": {"validationActions": ["Warn", "Audit", "Warn"]}})
    with pytest.raises(ConfigError) as error:
        validate_config(raw, "test")
    [problem] = error.value.problems
    assert problem.path == "aks-gpu:admission.validationActions"
    assert "listed more than once: Warn" in problem.message
