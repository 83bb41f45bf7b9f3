"""Component args as other languages send them: property paths in camelCase, integers kept integers (gRPC
carries every number as a double), warnings logged once, outputs accepted where a field takes them and refused
with the path and why where the rules need plain values."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from aks_gpu.admission.component import GpuAdmissionPolicy
from aks_gpu.args import ArgsError, plain_numbers, property_path
from aks_gpu.config.models import PlatformConfig, StackConfig
from aks_gpu.kube.workload_namespace import GpuWorkloadNamespace
from aks_gpu.mock_engine import PlanResult
from aks_gpu.naming import PACKAGE_NAME
from aks_gpu.package import PUBLIC_COMPONENTS, PackageProvider
from tests.conftest import PROJECT_DIR, MockHarness, raw_stack

A100 = {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training", "maxCount": 2.0}
TEAM = {"name": "team-a", "type": "training", "gpu_quota": 4}
POOL = {"aks-gpu/pool": "gpu"}


def construct(harness: MockHarness, token: str, inputs: dict[str, Any]) -> PlanResult:
    """A component built by the package's provider from camelCase inputs, as the engine hands them over."""
    provider = PackageProvider(PUBLIC_COMPONENTS, PACKAGE_NAME)

    def program() -> None:
        provider.construct("c", f"{PACKAGE_NAME}:index:{token}", inputs, pulumi.ResourceOptions())

    return harness.run(program)


def refused(harness: MockHarness, token: str, inputs: dict[str, Any]) -> pulumi.InputPropertiesError:
    with pytest.raises(pulumi.InputPropertiesError) as caught:
        construct(harness, token, inputs)
    return caught.value


# ---------------------------------------------------------------- paths and numbers


@pytest.mark.parametrize(
    ("path", "root", "renames", "expected"),
    [
        ("aks-gpu:gpu_pools[1].mig_profile", PlatformConfig, None, "gpuPools[1].migProfile"),
        ("aks-gpu:gpuPools[0].minCount", PlatformConfig, {"gpuPools[0]": "pool"}, "pool.minCount"),
        ("aks-gpu:cluster.system_pool.vm_size", StackConfig, None, "cluster.systemPool.vmSize"),
        ("azure-native:location", StackConfig, None, "location"),
        # Keys of a map are data: left as written, dots and underscores included.
        ("aks-gpu:gpu_pools[0].labels.team_x.example.com/y", PlatformConfig, None, "gpuPools[0].labels.team_x.example.com/y"),
        # An unknown key as written, and nothing below it renamed.
        ("aks-gpu:workloads[0].quota_x.max_cpu", PlatformConfig, {"workloads[0]": "workload"}, "workload.quota_x.max_cpu"),
    ],
)
def test_problem_paths_become_camel_case_property_paths(path: str, root: Any, renames: Any, expected: str) -> None:
    assert property_path(path, root, renames) == expected


def test_integral_doubles_become_integers_and_others_stay() -> None:
    assert plain_numbers({"a": [8.0, 1.5, True, "8.0"], "b": -1.0}) == {"a": [8, 1.5, True, "8.0"], "b": -1}


def test_other_languages_get_property_errors_with_camel_case_paths_and_integers(harness: MockHarness) -> None:
    where = {"resourceGroupName": "rg", "clusterName": "aks"}
    error = refused(harness, "GpuNodePool", {"pool": {**A100, "minCount": 3.0, "maxPods": 5.0}, **where})
    assert not isinstance(error, pulumi.RunError)  # the provider's Construct would drop the property errors
    reason = "5 is not allowed: Input should be greater than or equal to 10"
    assert error.errors == [{"property_path": "pool.maxPods", "reason": reason}]
    error = refused(harness, "GpuNodePool", {"pool": {**A100, "minCount": 3.0}, **where})
    assert error.errors == [{"property_path": "pool.minCount", "reason": "3 is greater than maxCount 2"}]
    assert "Traceback" not in error.message and ".0" not in error.message
    team = {"workload": {**TEAM, "gpuQuota": -1.0}, "nodeSelector": {}, "tolerations": []}
    error = refused(harness, "GpuWorkloadNamespace", team)
    assert [e["property_path"] for e in error.errors or []] == ["workload.gpuQuota"]
    assert "-1 is not allowed" in error.message


def test_a_python_caller_gets_a_clean_run_error(harness: MockHarness) -> None:
    # RunError: the Python language host prints the message without a traceback.
    def program() -> None:
        with pytest.raises(pulumi.RunError) as caught:
            GpuAdmissionPolicy("p", {"gpu_pools": [{**A100, "max_pods": 5}]})  # type: ignore[typeddict-item]
        assert isinstance(caught.value, ArgsError) and isinstance(caught.value, pulumi.InputPropertiesError)
        assert str(caught.value).splitlines()[1].startswith("  gpuPools[0].maxPods: 5 is not allowed")

    harness.run(program)


# ---------------------------------------------------------------- warnings


def test_a_component_consumer_gets_the_rules_warnings_once(harness: MockHarness) -> None:
    spot = {**A100, "spot": True, "spotEvictionPolicy": "Deallocate", "maxCount": 1.0}
    inputs = {"gpuPools": [spot], "workloads": [{"name": "team-a", "type": "training", "gpuQuota": 1.0}]}
    provider = PackageProvider(PUBLIC_COMPONENTS, PACKAGE_NAME)

    def program() -> None:
        for name in ("a", "b"):  # a second component over the same pool says nothing new
            provider.construct(name, f"{PACKAGE_NAME}:index:GpuAdmissionPolicy", inputs, pulumi.ResourceOptions())

    warnings = harness.run(program).warnings
    message = "Deallocate keeps evicted GPU VMs counting against quota"
    assert warnings == [f"GpuAdmissionPolicy a: gpuPools[0].spotEvictionPolicy: {message}"]


def test_the_program_and_its_components_report_a_stack_warning_once(harness: MockHarness) -> None:
    # __main__.py logs the stack file's warnings; GpuPlatform and each child re-validate the same pool.
    raw = raw_stack("dev")
    raw["aks-gpu:gpuPools"] = [{**raw["aks-gpu:gpuPools"][0], "spotEvictionPolicy": "Deallocate"}]
    warnings = harness.run_stack("dev", raw).warnings
    message = "Deallocate keeps evicted GPU VMs counting against quota"
    assert [w for w in warnings if message in w] == [f"stacks/Pulumi.dev.yaml: aks-gpu:gpuPools[0].spotEvictionPolicy: {message}"]


# ---------------------------------------------------------------- outputs


def test_outputs_where_the_rules_need_plain_values_are_refused_with_the_path(harness: MockHarness) -> None:
    def program() -> None:
        workload = {"name": "team-a", "type": "training", "gpu_quota": pulumi.Output.from_input(2)}
        with pytest.raises(ArgsError) as caught:
            GpuAdmissionPolicy("p", {"gpu_pools": [A100], "workloads": [workload]})  # type: ignore[list-item]
        assert caught.value.errors == [
            {
                "property_path": "workloads[0].gpuQuota",
                "reason": "must be a plain value, not an output: the rules check it against the other settings first",
            }
        ]

    harness.run(program)


def namespace_run(harness: MockHarness, spec: dict[str, Any], late: tuple[str, ...] = ()) -> PlanResult:
    """The namespace for ``spec``, the fields in ``late`` handed over as outputs (made inside the program)."""

    def program() -> None:
        workload = {key: pulumi.Output.from_input(value) if key in late else value for key, value in spec.items()}
        team = GpuWorkloadNamespace(
            "team",
            {"workload": workload, "resource_name": "nvidia.com/gpu", "node_selector": POOL, "tolerations": []},  # type: ignore[typeddict-item]
            pulumi.ResourceOptions(provider=k8s.Provider("cluster", kubeconfig="{}")),
        )
        pulumi.export("namespace", team.namespace_name)
        pulumi.export("quota", team.gpu_quota)

    return harness.run(program)


def test_a_namespace_takes_its_name_type_and_quota_as_outputs(harness: MockHarness) -> None:
    spec = {**TEAM, "network": {"allow_same_namespace": True}, "role_bindings": [{"group_object_id": "0" * 36, "role": "view"}]}
    plain = namespace_run(harness, spec)
    late = namespace_run(harness, spec, late=("name", "type", "gpu_quota"))
    # The same objects, URNs and inputs: an output only delays the values.
    assert late.manifests() == plain.manifests()
    assert [r.urn for r in late.resources] == [r.urn for r in plain.resources]
    assert late.outputs == plain.outputs == {"namespace": "team-a", "quota": 4}
    assert late.manifests()["resourcequota-team-a-gpu-quota.yaml"]["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}


# In a child interpreter: a program that fails inside an apply leaves pending outputs (and asyncio's reports of
# them) behind, which must stay out of the other tests.
LATE_FAILURE = """
import json
from pulumi import RunError
from aks_gpu.args import ArgsError
from tests.conftest import PROJECT_DIR, MockHarness, raw_stack
from tests.test_args import TEAM, namespace_run
try:
    namespace_run(MockHarness(), {**TEAM, "name": "Team_A"}, late=("name",))
except ArgsError as error:
    print(json.dumps({"errors": error.errors, "is_run_error": isinstance(error, RunError)}))
"""


def test_a_bad_value_that_arrives_as_an_output_fails_cleanly_when_known() -> None:
    done = subprocess.run([sys.executable, "-c", LATE_FAILURE], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    reason = "'Team_A' is not allowed: must be a DNS label: lowercase letters, digits and '-', at most 63, alphanumeric"
    assert found == {"errors": [{"property_path": "workload.name", "reason": f"{reason} at both ends"}], "is_run_error": True}


def test_what_decides_the_namespaces_objects_must_be_plain(harness: MockHarness) -> None:
    def program() -> None:
        with pytest.raises(ArgsError) as caught:
            workload = {**TEAM, "pod_security": pulumi.Output.from_input("restricted")}
            GpuWorkloadNamespace("team", {"workload": workload, "node_selector": {}, "tolerations": []})  # type: ignore[typeddict-item]
        assert [e["property_path"] for e in caught.value.errors or []] == ["workload.podSecurity"]

    harness.run(program)
