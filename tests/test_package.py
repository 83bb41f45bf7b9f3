"""The component package: every public component passes Pulumi's schema inference, and the committed
schema (what `pulumi package add` builds other languages' SDKs from) is in step with the code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from components.cli import main
from components.package import PUBLIC_COMPONENTS, SCHEMA_FILE, component_schema, schema_text
from tests.conftest import PROJECT_DIR

EXPECTED = {
    "GpuCluster": ({"cluster", "location"}, {"kubeconfig", "clusterName", "resourceGroupName", "clusterId"}),
    "GpuNodePool": (
        {"pool", "resourceGroupName", "clusterName", "devicePlugin", "storage"},
        {"nodeSelector", "tolerations", "resourceName", "resourceCountPerNode"},
    ),
    "GpuDevicePlugin": ({"gpuPools", "devicePlugin", "validation", "kubeconfig"}, {"namespace", "targets"}),
    "GpuWorkloadNamespace": (
        {"workload", "resourceName", "nodeSelector", "tolerations", "otherGpuResources"},
        {"namespaceName", "podPlacement", "gpuQuota"},
    ),
    "GpuAdmissionPolicy": ({"gpuPools", "workloads", "admission"}, {"policyName", "validationActions"}),
    "NvmeCache": ({"gpuPools", "workloads", "storage", "resourceGroupName", "clusterName"}, {"storageClassName"}),
    "GpuValidation": ({"gpuPools", "validation"}, {"smokeJobs", "smokeDecisions"}),
    "GpuMonitoring": (
        {"gpuPools", "workloads", "monitoring", "resourceGroupName", "clusterName", "clusterId", "location"},
        {"workspaceId", "ruleGroupNames"},
    ),
    "GpuPlatform": (
        {"location", "cluster", "gpuPools", "workloads", "devicePlugin", "admission", "storage", "validation"},
        {"kubeconfig", "pools", "namespaces", "clusterName"},
    ),
}


def test_the_public_set_is_the_one_the_docs_promise() -> None:
    assert {c.__name__ for c in PUBLIC_COMPONENTS} == set(EXPECTED)


@pytest.mark.parametrize("component", sorted(EXPECTED))
def test_schema_inference_accepts_each_component_with_its_inputs_and_outputs(component: str) -> None:
    resource = component_schema()["resources"][f"aks-gpu:index:{component}"]
    inputs, outputs = EXPECTED[component]
    assert resource["isComponent"] is True
    assert inputs <= set(resource["inputProperties"]), set(resource["inputProperties"])
    assert outputs <= set(resource["properties"]), set(resource["properties"])


def test_spec_types_carry_the_stack_file_keys_in_camel_case() -> None:
    pool = component_schema()["types"]["aks-gpu:index:GpuPoolSpec"]
    assert {"name", "vendor", "vmSize", "migProfile", "minCount", "maxCount", "nvmeCache"} <= set(pool["properties"])
    assert set(pool["required"]) == {"name", "vendor", "vmSize", "workload"}


def test_committed_schema_is_in_step_with_the_code() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), "run `aksgpu schema --components > components/schema.json`"


def test_cli_prints_the_component_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--components"]) == 0
    assert capsys.readouterr().out == schema_text()


def test_the_plugin_entry_point_starts_from_its_own_folder() -> None:
    # Pulumi starts the package as a script in the components/ folder, not from the repository root; with no
    # engine address the provider stops at its own usage message, after every component has been imported.
    completed = subprocess.run(
        [sys.executable, "__main__.py"], cwd=PROJECT_DIR / "components", capture_output=True, text=True, check=False
    )
    assert "Traceback" not in completed.stderr, completed.stderr
    assert "engine" in completed.stderr and completed.returncode == 2
