"""GPUs through Dynamic Resource Allocation, which the stack does not serve: the claim policy on both engines, where
the real server cannot be asked (an API version it no longer serves by default), and the check's reading of a Pod's
claims (tests/admission/objects/dra.yaml holds the rest, decided by the real CEL environment too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from aks_gpu.admission.dra import gpu_asks, gpu_devices
from aks_gpu.admission.engine import ENGINE_NAMES, engine_named
from aks_gpu.admission.evaluate import evaluate
from aks_gpu.admission.policy import DRA_POLICY_NAME, render_policy, workload_namespaces
from tests.admission.test_cli import run
from tests.conftest import stack_model

# resource.k8s.io/v1beta1 puts the class on the request itself; a server serving it converts the request to v1 for a
# policy matching v1 (matchPolicy Equivalent), offline the policy reads both shapes.
V1BETA1 = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: double-gpu, namespace: gpu-training}
spec:
  spec:
    devices:
      requests:
        - {name: gpu, deviceClassName: gpu.nvidia.com, count: 2}
"""
ELSEWHERE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu, namespace: gpu-training}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
---
apiVersion: v1
kind: Pod
metadata: {name: other-namespace, namespace: gpu-inference}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
  containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]
"""


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_v1beta1_claim_template_is_refused_too(engine: str) -> None:
    model = stack_model("prod")
    [decision] = evaluate([yaml.safe_load(V1BETA1)], render_policy(model), workload_namespaces(model), engine_named(engine))
    assert not decision.allowed
    assert decision.message.startswith(
        f'resourceclaimtemplates.resource.k8s.io "double-gpu" is forbidden: ValidatingAdmissionPolicy '
        f"'{DRA_POLICY_NAME}' with binding '{DRA_POLICY_NAME}' denied request: ResourceClaimTemplate double-gpu asks "
        "for GPUs through Dynamic Resource Allocation (request gpu)"
    )
    assert "Ask for nvidia.com/gpu in the resources.limits of the container instead" in decision.message


def test_the_policy_and_the_check_read_one_list_of_gpu_classes_and_drivers() -> None:
    devices = gpu_devices()
    assert {"gpu.nvidia.com", "mig.nvidia.com", "gpu.amd.com"} <= set(devices.classes)
    assert devices.drivers == ("gpu.nvidia.com", "gpu.amd.com")
    policy = next(m for m in render_policy(stack_model("prod")) if m["metadata"]["name"] == DRA_POLICY_NAME)
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert all(f"'{name}'" in variables["gpuClasses"] for name in devices.classes)
    assert all(f"'{name}'" in variables["gpuDrivers"] for name in devices.drivers)
    claim = yaml.safe_load(V1BETA1)
    assert gpu_asks(claim) == ["request gpu: device class gpu.nvidia.com"]


def test_a_pod_claims_only_what_its_own_namespace_holds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A Pod's claims live in its namespace: a template of the same name elsewhere is not the one it gets."""
    manifest = tmp_path / "dra.yaml"
    manifest.write_text(ELSEWHERE)
    assert run(["admission", "check", "--stack", "prod", "--json", str(manifest)]) == 1
    _, pod = json.loads(capsys.readouterr().out)
    assert pod["allowed"] is True
    wanted = "whether the ResourceClaimTemplate gpu the pod claims asks for GPUs"
    assert any(step.startswith(wanted) for step in pod["notEvaluated"])
