"""After the policies: the stack's GPU quota and the namespace's Pod Security level, as the cluster applies them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aks_gpu.admission.namespace_admission import NamespaceFacts, canonical, pod_usage, quota_refusal
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
    usage = pod_usage(spec)
    assert usage["requests.nvidia.com/gpu"].value == 4 and usage["pods"].value == 1
    assert "nvidia.com/gpu" not in usage  # an extended resource is quota'd on requests.<name> only


# gpu-inference of the prod stack: its ResourceQuota and LimitRange as workload_manifests renders them.
INFERENCE = NamespaceFacts(
    name="gpu-inference",
    pod_security="baseline",
    gpu_quota={"requests.nvidia.com/gpu": "14"},
    exposes="nvidia.com/gpu",
    quota={"requests.nvidia.com/gpu": "14", "requests.cpu": "96", "requests.memory": "800Gi", "pods": "100"},
    default_requests={"cpu": "500m", "memory": "1Gi"},
)


def pod(*containers: dict[str, object], init: tuple[dict[str, object], ...] = (), kind: str = "Pod") -> dict[str, object]:
    spec: dict[str, object] = {"containers": list(containers), "initContainers": list(init)}
    if kind == "Pod":
        return {"kind": kind, "metadata": {"name": "vllm"}, "spec": spec}
    return {"kind": kind, "metadata": {"name": "vllm"}, "spec": {"replicas": 4, "template": {"spec": spec}}}


def container(name: str, requests: dict[str, object] | None = None, limits: dict[str, object] | None = None) -> dict[str, object]:
    return {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}


def test_a_pod_over_the_cpu_quota_is_refused_in_the_servers_words() -> None:
    refusal = quota_refusal(pod(container("a", {"cpu": 100}), container("b", {"cpu": "25"})), INFERENCE)
    assert refusal == (
        'pods "vllm" is forbidden: exceeded quota: gpu-quota, requested: requests.cpu=125, used: requests.cpu=0, '
        "limited: requests.cpu=96"
    )


def test_a_pod_over_the_memory_quota_is_refused_its_limit_counting_as_its_request() -> None:
    refusal = quota_refusal(pod(container("a", {"cpu": 8}, {"memory": "1124Gi"})), INFERENCE)
    assert refusal == (
        'pods "vllm" is forbidden: exceeded quota: gpu-quota, requested: requests.memory=1124Gi, used: '
        "requests.memory=0, limited: requests.memory=800Gi"
    )
    both = quota_refusal(pod(container("a", {"cpu": "96500m", "memory": "801Gi"})), INFERENCE)
    assert both is not None and "requested: requests.cpu=96500m,requests.memory=801Gi, used: requests.cpu=0," in both


@pytest.mark.parametrize("priority_class", ["system-node-critical", "system-cluster-critical"])
def test_a_pod_at_a_system_priority_class_is_refused_by_the_namespaces_priority_quota(priority_class: str) -> None:
    preempting = pod(container("a", {"cpu": 1}))
    preempting["spec"]["priorityClassName"] = priority_class  # type: ignore[index]
    assert quota_refusal(preempting, INFERENCE) == (
        'pods "vllm" is forbidden: exceeded quota: system-priority, requested: pods=1, used: pods=0, limited: pods=0'
    )
    preempting["spec"]["priorityClassName"] = "team-batch"  # type: ignore[index]
    assert quota_refusal(preempting, INFERENCE) is None


def test_a_pod_exactly_at_the_quota_is_admitted() -> None:
    # 95.5 CPUs stated plus the LimitRange's 500m for the container that states none: 96, the hard limit.
    at = pod(container("a", {"cpu": "95500m", "memory": "799Gi"}), container("b"))
    assert quota_refusal(at, INFERENCE) is None
    over = pod(container("a", {"cpu": "95500m", "memory": "799Gi"}), container("b"), container("c"))
    assert "requested: requests.cpu=96500m,requests.memory=801Gi" in str(quota_refusal(over, INFERENCE))


def test_init_containers_count_as_the_largest_not_the_sum() -> None:
    init = (container("i1", {"cpu": 90}), container("i2", {"cpu": 80}))
    assert quota_refusal(pod(container("a", {"cpu": 10}), init=init), INFERENCE) is None  # max(10, 90)
    refusal = quota_refusal(pod(container("a", {"cpu": 10}), init=(container("i", {"cpu": 97}),)), INFERENCE)
    assert "requested: requests.cpu=97," in str(refusal)
    # A sidecar (an init container restarting Always) runs beside the containers: it is summed.
    sidecar = {**container("s", {"cpu": 90}), "restartPolicy": "Always"}
    assert "requested: requests.cpu=100," in str(quota_refusal(pod(container("a", {"cpu": 10}), init=(sidecar,)), INFERENCE))


def test_the_pod_overhead_is_charged() -> None:
    obj = pod(container("a", {"cpu": 95}))
    obj["spec"]["overhead"] = {"cpu": "1500m"}  # type: ignore[index]
    assert "requested: requests.cpu=96500m," in str(quota_refusal(obj, INFERENCE))


def test_the_canonical_quantity_is_the_servers() -> None:
    assert [canonical(pod_usage({"containers": [container("a", {"memory": text})]})["requests.memory"]) for text in (
        "1024Mi", "1536Mi", "128974848", "1.5", "1000", "1500", "0.1m",
    )] == ["1Gi", "1536Mi", "128974848", "1500m", "1k", "1500", "100u"]


def test_a_quota_key_on_limits_wants_every_container_to_state_it() -> None:
    facts = NamespaceFacts("ns", "baseline", {}, "", quota={"limits.cpu": "10"})
    assert quota_refusal(pod(container("a", {"cpu": 1})), facts) == (
        'pods "vllm" is forbidden: failed quota: gpu-quota: must specify limits.cpu'
    )
    assert quota_refusal(pod(container("a", {"cpu": 1}, {"cpu": 10})), facts) is None
    assert "limits.cpu=11" in str(quota_refusal(pod(container("a", {"cpu": 1}, {"cpu": 11})), facts))


def test_keys_that_count_other_objects_are_listed_as_not_evaluated() -> None:
    from aks_gpu.admission.namespace_admission import not_evaluated

    facts = NamespaceFacts("ns", "baseline", {}, "", quota={"requests.cpu": "1", "requests.storage": "1Ti"})
    steps = not_evaluated(facts)
    assert "ResourceQuota's requests.storage (they count other objects than Pods)" in steps
    assert not any("cpu" in step for step in steps)


DEPLOYMENT_OF_FOUR = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: embed, namespace: gpu-inference}
spec:
  replicas: 4
  selector: {matchLabels: {app: embed}}
  template:
    metadata: {labels: {app: embed}}
    spec:
      containers:
        - name: embed
          image: mcr.microsoft.com/azuredocs/samples-tf-mnist-demo:gpu
          resources: {requests: {cpu: 80, memory: 100Gi}, limits: {nvidia.com/gpu: 1, memory: 100Gi}}
"""


def test_a_deployment_whose_one_pod_fits_is_admitted_and_its_replicas_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Quota admission judges each Pod as the ReplicaSet creates it: the Deployment is stored and its first three Pods
    # run (240 of gpu-inference's 288 CPUs), the fourth is refused (FailedCreate events). The server admits the object,
    # so does the check; what the replicas ask together is said among what it did not decide.
    objects = tmp_path / "objects.yaml"
    objects.write_text(DEPLOYMENT_OF_FOUR)
    main(["admission", "check", "--stack", "prod", "--json", str(objects)])
    (deployment,) = json.loads(capsys.readouterr().out)
    assert deployment["allowed"] is True, deployment["messages"]
    assert deployment["notEvaluated"][0] == (
        "ResourceQuota over all 4 Pods together (each is judged alone, as it is created; together they ask "
        "requests.cpu=320 of 288: the Pods created once the quota is used up would be refused)"
    )


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
    # As the server answers: the Job is created, with Pod Security's warning (the namespace warns at restricted,
    # which holds baseline), and the Pods its controller creates are refused (enforce judges Pods only).
    assert (job["decision"], job["allowed"]) == ("admitted", False)
    assert job["message"].startswith('the pods it creates would be refused: violates PodSecurity "baseline:latest"')
    assert "c adds IPC_LOCK" in job["message"]
    [warning] = job["warnings"]
    assert warning.startswith('would violate PodSecurity "restricted:latest": ') and "c adds IPC_LOCK" in warning
    assert pod["decision"] == "denied" and pod["warnings"] == []
    assert pod["message"].startswith(
        'pods "greedy" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=33'
    )
    assert "Pod Security restricted" not in " ".join(pod["notEvaluated"])
    assert "ResourceQuota usage by other pods (the namespace is taken as empty: used = 0)" in pod["notEvaluated"]


TWO_DEPLOYMENTS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: notebook, namespace: gpu-training}
spec:
  selector: {matchLabels: {app: n}}
  template:
    metadata: {labels: {app: n}}
    spec:
      containers:
        - {name: n, image: x, ports: [{containerPort: 8888, hostPort: 8888}], resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: pinned, namespace: gpu-training}
spec:
  selector: {matchLabels: {app: p}}
  template:
    metadata: {labels: {app: p}}
    spec:
      nodeName: aks-train-12345678-vmss000000
      containers: [{name: p, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
"""


def test_a_stored_object_whose_pods_are_refused_is_told_from_one_refused_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kubectl apply creates `notebook` (with Pod Security's warning) and its ReplicaSet's Pods are refused; `pinned`
    is refused itself by the placement policy, so nothing is stored."""
    objects = tmp_path / "deployments.yaml"
    objects.write_text(TWO_DEPLOYMENTS)
    assert main(["admission", "check", "--stack", "prod", "--json", str(objects)]) == 1
    notebook, pinned = json.loads(capsys.readouterr().out)
    assert (notebook["decision"], notebook["allowed"]) == ("admitted", False)
    assert notebook["message"].startswith("the pods it creates would be refused: violates PodSecurity")
    assert notebook["warnings"][0].startswith('would violate PodSecurity "restricted:latest": ')
    assert (pinned["decision"], pinned["allowed"]) == ("denied", False)
    assert pinned["message"].startswith('deployments.apps "pinned" is forbidden: ')
    assert pinned["warnings"] == []
    assert main(["admission", "check", "--stack", "prod", "--wide", str(objects)]) == 1
    output = " ".join(capsys.readouterr().out.split())
    assert "│ admitted, pods denied │" in output and "│ denied │" in output
    assert "0 admitted, 2 denied (1 of them admitted by the server, but their Pods would not run)" in output
