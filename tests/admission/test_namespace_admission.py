"""After the policies: the stack's GPU quota and the namespace's Pod Security level, as the cluster applies them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aks_gpu.admission.namespace_admission import NamespaceFacts, pod_usage, quota_refusal
from aks_gpu.cli import main
from aks_gpu.kube.workload_manifests import namespace_facts
from tests.conftest import stack_model

# A namespace served by MIG pools under the mixed strategy: its quota is on the MIG slice, whole GPUs capped at 0.
MIG_NAMESPACE = NamespaceFacts(
    name="inference",
    pod_security="baseline",
    gpu_quota={"requests.nvidia.com/gpu": "0", "requests.nvidia.com/mig-1g.10gb": "7"},
    exposes="nvidia.com/mig-1g.10gb",
)


def gpu_pod(resource: str, count: int, kind: str = "Pod") -> dict[str, object]:
    spec = {"containers": [{"name": "vllm", "resources": {"limits": {resource: count}}}]}
    if kind == "Pod":
        return {"kind": "Pod", "metadata": {"name": "vllm"}, "spec": spec}
    return {"kind": kind, "metadata": {"name": "vllm"}, "spec": {"template": {"spec": spec}}}


def test_whole_gpus_in_a_mig_namespace_are_refused_naming_what_its_pools_expose() -> None:
    refusal = quota_refusal(gpu_pod("nvidia.com/gpu", 1), MIG_NAMESPACE)
    assert refusal == (
        'pods "vllm" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: '
        "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=0; namespace inference's pools expose "
        "nvidia.com/mig-1g.10gb: ask for that resource instead"
    )
    # A Deployment is created; the pods it creates are what the quota refuses.
    assert quota_refusal(gpu_pod("nvidia.com/gpu", 1, "Deployment"), MIG_NAMESPACE).startswith(  # type: ignore[union-attr]
        "the pods it creates would be refused: exceeded quota: gpu-quota"
    )
    assert quota_refusal(gpu_pod("nvidia.com/mig-1g.10gb", 7), MIG_NAMESPACE) is None
    assert quota_refusal(gpu_pod("nvidia.com/mig-1g.10gb", 8), MIG_NAMESPACE) is not None


def test_a_pod_is_charged_as_the_quota_evaluator_charges_it() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
            {"name": "b", "resources": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}},
        ],
        "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
    }
    assert pod_usage(spec) == {"nvidia.com/gpu": 4}


def test_the_stacks_namespaces_carry_their_quota_and_level() -> None:
    facts = namespace_facts(stack_model("prod"))
    training = facts["gpu-training"]
    assert training.gpu_quota == {"requests.nvidia.com/gpu": "32"} and training.exposes == "nvidia.com/gpu"
    assert training.pod_security in {"baseline", "restricted"}


JOB_WITH_IPC_LOCK = """\
apiVersion: batch/v1
kind: Job
metadata: {name: rdma, namespace: gpu-training}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
        - {name: c, image: x, securityContext: {capabilities: {add: [IPC_LOCK]}}, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: v1
kind: Pod
metadata: {name: greedy, namespace: gpu-training}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 33}}}]
"""


def test_the_check_applies_pod_security_and_the_quota(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if namespace_facts(stack_model("prod"))["gpu-training"].pod_security != "baseline":
        pytest.skip("gpu-training does not enforce baseline in the prod stack")
    objects = tmp_path / "objects.yaml"
    objects.write_text(JOB_WITH_IPC_LOCK)
    assert main(["admission", "check", "--stack", "prod", "--json", str(objects)]) == 1
    job, pod = json.loads(capsys.readouterr().out)
    assert job["message"].startswith('the pods it creates would be refused: violates PodSecurity "baseline:latest"')
    assert "c adds IPC_LOCK" in job["message"]
    assert pod["message"].startswith(
        'pods "greedy" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=33'
    )
    assert "Pod Security restricted" not in " ".join(pod["notEvaluated"])
    assert "ResourceQuota usage by other pods (the namespace is taken as empty)" in pod["notEvaluated"]
