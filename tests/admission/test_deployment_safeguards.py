"""AKS Automatic's Deployment Safeguards (Enforce, with baseline Pod Security) over every workload the platform renders
on an Automatic stack: each one they would deny runs in a namespace the stack excludes from them, and the exclusion is
the stack's own DeploymentSafeguard resource."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aks_gpu.admission.deployment_safeguards import denials, pod_template
from aks_gpu.mock_engine import PlanResult
from tests.conftest import MockHarness, minimal_raw

SAFEGUARD = "azure-native:containerservice:DeploymentSafeguard"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def automatic_raw(remediation: bool) -> dict[str, Any]:
    raw = copy.deepcopy(minimal_raw())
    raw["aks-gpu:cluster"]["sku"] = "Automatic"
    raw["aks-gpu:gpuPools"].append(
        {"name": "infer", "vendor": "nvidia", "vmSize": "Standard_NC4as_T4_v3", "workload": "inference", "maxCount": 2}
    )
    raw["aks-gpu:workloads"].append({"name": "serving", "type": "inference", "gpuQuota": 2})
    if remediation:
        raw["aks-gpu:remediation"] = {"mode": "on", "datastore": "external-mongodb", "datastoreSecret": "nvsentinel-db"}
    return raw


def manifest(record: Any) -> dict[str, Any]:
    """The object a Kubernetes resource of the plan sends: its kind from the type token, its fields as registered."""
    kind = record.type.rsplit(":", 1)[-1]
    return {"kind": kind, **record.inputs}


def kubernetes_objects(result: PlanResult) -> list[dict[str, Any]]:
    return [manifest(r) for r in result.resources if r.custom and r.type.startswith("kubernetes:") and "metadata" in r.inputs]


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "remediation-on"])
def plan(request: pytest.FixtureRequest) -> PlanResult:
    return MockHarness().run_stack("test", automatic_raw(request.param))


def test_every_denied_platform_workload_runs_in_an_excluded_namespace(plan: PlanResult) -> None:
    [safeguard] = plan.by_type(SAFEGUARD)
    assert safeguard.inputs["level"] == "Enforce"
    excluded = set(safeguard.inputs["excludedNamespaces"])
    workloads = [obj for obj in kubernetes_objects(plan) if pod_template(obj) is not None or obj["kind"] == "StorageClass"]
    assert workloads
    denied = {
        f"{obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}": reasons
        for obj in workloads
        if (reasons := denials(obj))
    }
    outside = {name: reasons for name, reasons in denied.items() if name.split()[1].split("/")[0] not in excluded}
    assert outside == {}
    # The exclusion is needed: the device plugin's host access is what baseline Pod Security denies.
    assert any("hostPath volume" in " ".join(reasons) for reasons in denied.values())
    # Charts render out of sight: every release goes into an excluded namespace.
    assert {r.inputs["namespace"] for r in plan.by_type(HELM_RELEASE)} <= excluded


def test_no_exclusion_is_asked_for_that_nothing_needs(plan: PlanResult) -> None:
    [safeguard] = plan.by_type(SAFEGUARD)
    namespaces = {obj["metadata"].get("namespace") for obj in kubernetes_objects(plan) if denials(obj)}
    namespaces |= {r.inputs["namespace"] for r in plan.by_type(HELM_RELEASE)}
    assert set(safeguard.inputs["excludedNamespaces"]) == namespaces


def test_a_standard_stack_creates_no_safeguard(harness: MockHarness) -> None:
    assert not harness.run_stack("test", minimal_raw()).by_type(SAFEGUARD)


def deployment(**container: Any) -> dict[str, Any]:
    base = {
        "name": "app",
        "image": "example.azurecr.io/app:1.0",
        "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
    }
    spec = {"containers": [{**base, **container}]}
    return {"kind": "Deployment", "metadata": {"name": "app"}, "spec": {"template": {"metadata": {}, "spec": spec}}}


def test_a_compliant_deployment_passes() -> None:
    assert denials(deployment()) == []


@pytest.mark.parametrize(
    ("container", "reason"),
    [
        ({"image": "nginx"}, "image without a version tag"),
        ({"image": "nginx:latest"}, "image without a version tag"),
        ({"livenessProbe": None}, "no livenessProbe"),
        ({"securityContext": {"privileged": True}}, "privileged"),
        ({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}, "adds SYS_ADMIN"),
        ({"ports": [{"containerPort": 80, "hostPort": 80}]}, "host port"),
    ],
)
def test_what_the_safeguards_deny(container: dict[str, Any], reason: str) -> None:
    obj = deployment(**container)
    if container.get("livenessProbe", "") is None:
        del obj["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    assert any(reason in text for text in denials(obj))


def test_host_paths_and_aks_labels_are_denied() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["volumes"] = [{"name": "dev", "hostPath": {"path": "/dev"}}]
    obj["spec"]["template"]["metadata"]["labels"] = {"kubernetes.azure.com/mode": "user"}
    assert {"hostPath volume dev", "pod label kubernetes.azure.com/mode is reserved for AKS"} <= set(denials(obj))


def test_in_tree_storage_classes_are_denied() -> None:
    assert denials({"kind": "StorageClass", "metadata": {"name": "x"}, "provisioner": "kubernetes.io/azure-disk"})
    assert not denials({"kind": "StorageClass", "metadata": {"name": "x"}, "provisioner": "disk.csi.azure.com"})
