"""GPU queues on the real engines: `aksgpu local up --stack teams` runs Kueue (built by make tools from its Go module)
against the local control plane; the real scheduler binds the pods Kueue lets the Job controller create to kwok's
simulated nodes. The teams stack: research and vision (training, 16 GPUs nominal each, one cohort) on the train pool
(4 nodes x 8 H100 here), serving (inference, 3 GPUs) on the infer pool (4 nodes x 1 A100).

The tests run in order on one cluster, each leaving the state the next one starts from."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import LocalCluster, started, until

GPU = "nvidia.com/gpu"
POOL_LABEL = "kubernetes.azure.com/agentpool"
# A Job's pod in a workload namespace stays Running until it is deleted (the local cluster's kwok Stages,
# components/aks_gpu/local/stages.py), as a training run does on AKS: quota is held until the Job ends or is preempted.


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # Every node of every pool: the train pool's 4 nodes hold the cohort's 32 GPUs.
    yield from started(tmp_path_factory, "teams", nodes_per_pool=4)


def job(name: str, namespace: str, pods: int, gpus_each: int) -> str:
    """A plain batch/v1 Job as a team writes it: no queue label, no node selector, no toleration."""
    container = {"name": "main", "image": "busybox", "resources": {"limits": {GPU: str(gpus_each)}}}
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            },
        }
    )


def submit(cluster: LocalCluster, name: str, namespace: str, pods: int, gpus_each: int) -> float:
    done = cluster.kubectl("create", "-f", "-", stdin=job(name, namespace, pods, gpus_each))
    assert done.returncode == 0, done.stderr
    return time.monotonic()


def workload_of(cluster: LocalCluster, namespace: str, job_name: str) -> dict[str, Any] | None:
    for item in cluster.json("get", "-n", namespace, "workloads.kueue.x-k8s.io")["items"]:
        if any(owner.get("name") == job_name for owner in item["metadata"].get("ownerReferences", [])):
            return dict(item)
    return None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for found in ((obj or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return None


def admitted(cluster: LocalCluster, namespace: str, job_name: str) -> bool:
    found = condition(workload_of(cluster, namespace, job_name), "Admitted")
    return found is not None and found["status"] == "True"


def bound_pods(cluster: LocalCluster, namespace: str, job_name: str) -> list[dict[str, Any]]:
    pods = cluster.json("get", "-n", namespace, "pods", "-l", f"batch.kubernetes.io/job-name={job_name}")["items"]
    return [p for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]


def pods_of(cluster: LocalCluster, namespace: str, job_name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.json("get", "-n", namespace, "pods", "-l", f"batch.kubernetes.io/job-name={job_name}")[
        "items"
    ]
    return items


def pool_of(cluster: LocalCluster, node: str) -> str:
    return str(cluster.json("get", f"node/{node}")["metadata"]["labels"][POOL_LABEL])


def borrowed(cluster: LocalCluster, queue: str) -> int:
    usage = cluster.json("get", f"clusterqueues.kueue.x-k8s.io/{queue}").get("status", {}).get("flavorsUsage", [])
    return sum(
        int(resource.get("borrowed", "0")) for flavor in usage for resource in flavor["resources"] if resource["name"] == GPU
    )


def test_a_team_borrows_the_idle_gpus_of_the_other_training_team(teams: LocalCluster) -> None:
    # 3 x 8 = 24 GPUs: 8 more than research's 16, which vision's idle quota lends.
    start = submit(teams, "big", "research", pods=3, gpus_each=8)
    until("research/big admitted", lambda: admitted(teams, "research", "big"))
    to_admitted = time.monotonic() - start
    pods = until("research/big's 3 pods bound", lambda: (p := bound_pods(teams, "research", "big")) and len(p) == 3 and p)
    to_bound = time.monotonic() - start
    assert {pool_of(teams, p["spec"]["nodeName"]) for p in pods} == {"train"}
    # Admitted whole on the train flavor: 24 GPUs in a queue whose nominal quota is 16, i.e. 8 borrowed.
    [assignment] = (workload_of(teams, "research", "big") or {})["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"] == {GPU: "train", "cpu": "train", "memory": "train"}
    assert assignment["resourceUsage"][GPU] == "24"
    print(f"research/big: admitted {to_admitted:.1f}s, 3 pods bound {to_bound:.1f}s after submit")


def test_the_lender_takes_its_gpus_back_by_preemption(teams: LocalCluster) -> None:
    # vision asks its own 16: only 8 are free, the rest research borrowed; Kueue evicts research/big to reclaim them.
    submit(teams, "own", "vision", pods=2, gpus_each=8)
    until("vision/own admitted", lambda: admitted(teams, "vision", "own"))
    # research/big was preempted to reclaim them: Kueue records it on its Workload, which is no longer admitted.
    research = workload_of(teams, "research", "big")
    conditions = ((research or {}).get("status") or {}).get("conditions", [])
    seen = [(c["type"], c["status"], c.get("reason")) for c in conditions]
    assert ("Preempted", "True") in [(kind, status) for kind, status, _ in seen] or any(
        kind == "Evicted" and status == "True" and reason == "Preempted" for kind, status, reason in seen
    ), seen
    assert not admitted(teams, "research", "big")
    pods = until("vision/own's 2 pods bound", lambda: (p := bound_pods(teams, "vision", "own")) and len(p) == 2 and p)
    assert {pool_of(teams, p["spec"]["nodeName"]) for p in pods} == {"train"}
    teams.kubectl("delete", "-n", "research", "job/big", "--wait=true", timeout=120)


def test_a_job_larger_than_its_cohort_waits_suspended_and_starts_no_pod(teams: LocalCluster) -> None:
    # 5 x 8 = 40 GPUs: more than the whole training cohort (32). A static quota would refuse its pods one by one and
    # let the Job controller start the ones that fit; here the Job waits, suspended, with no pod at all.
    submit(teams, "huge", "research", pods=5, gpus_each=8)
    pending = until("research/huge's workload", lambda: workload_of(teams, "research", "huge"))
    time.sleep(5)
    pending = workload_of(teams, "research", "huge")
    reserved = condition(pending, "QuotaReserved")
    assert reserved is not None and reserved["status"] == "False", pending
    assert teams.json("get", "-n", "research", "job/huge")["spec"]["suspend"] is True
    assert pods_of(teams, "research", "huge") == []
    events = teams.json("get", "-n", "research", "events")["items"]
    assert not [e for e in events if "exceeded quota" in e.get("message", "")]
    teams.kubectl("delete", "-n", "research", "job/huge", "--wait=true", timeout=120)


def test_inference_over_its_quota_waits_and_never_lands_on_a_training_pool(teams: LocalCluster) -> None:
    # Training GPUs sit idle (vision uses 16 of 32), yet serving is a cohort of its own: its 4th GPU waits.
    submit(teams, "fits", "serving", pods=3, gpus_each=1)
    until("serving/fits admitted", lambda: admitted(teams, "serving", "fits"))
    pods = until("serving/fits's 3 pods bound", lambda: (p := bound_pods(teams, "serving", "fits")) and len(p) == 3 and p)
    assert {pool_of(teams, p["spec"]["nodeName"]) for p in pods} == {"infer"}
    submit(teams, "over", "serving", pods=1, gpus_each=1)
    until("serving/over's workload", lambda: workload_of(teams, "serving", "over"))
    time.sleep(5)
    assert not admitted(teams, "serving", "over")
    assert pods_of(teams, "serving", "over") == []
    assert borrowed(teams, "serving") == 0


def test_a_multi_pod_job_starts_all_its_pods_or_none(teams: LocalCluster) -> None:
    # vision holds 16; research may borrow up to 12 of vision's lendable quota, and 16 GPUs are free: a 3 x 8 Job of
    # research (24 > 16 + what is free to borrow) is admitted whole or not at all. It is not: no pod of it exists,
    # where the Job controller alone would have started two pods on the free GPUs.
    submit(teams, "gang", "research", pods=3, gpus_each=8)
    until("research/gang's workload", lambda: workload_of(teams, "research", "gang"))
    time.sleep(5)
    assert not admitted(teams, "research", "gang")
    assert pods_of(teams, "research", "gang") == []
    # vision finishes: the whole gang is admitted and all 3 pods start together.
    teams.kubectl("delete", "-n", "vision", "job/own", "--wait=true", timeout=120)
    until("research/gang admitted", lambda: admitted(teams, "research", "gang"))
    pods = until("research/gang's 3 pods bound", lambda: (p := bound_pods(teams, "research", "gang")) and len(p) == 3 and p)
    assert len(pods) == 3


def test_audit_says_why_a_job_larger_than_its_cohort_waits(teams: LocalCluster) -> None:
    # 5 x 8 = 40 GPUs in vision: more than the training cohort's 32, so Kueue never reserves quota for it, whatever
    # the other Jobs do. The live audit reads the Workload Kueue wrote and gives its reason.
    submit(teams, "toolarge", "vision", pods=5, gpus_each=8)
    waiting = until(
        "vision/toolarge's QuotaReserved False",
        lambda: (c := condition(workload_of(teams, "vision", "toolarge"), "QuotaReserved")) and c["status"] == "False" and c,
    )
    done = teams.aksgpu("audit", "--kubeconfig", str(teams.kubeconfig), "--json", timeout=180)
    report = json.loads(done.stdout)
    assert {"queue-workload-pending", "queue-gpus-borrowed", "queue-nominal-idle"} <= set(report["summary"]["checked"])
    pending = [f for f in report["findings"] if f["id"] == "queue-workload-pending" and f["namespace"] == "vision"]
    name = (workload_of(teams, "vision", "toolarge") or {})["metadata"]["name"]
    [finding] = [f for f in pending if f["message"].startswith(f"Workload {name} ")]
    assert "(40 nvidia.com/gpu; LocalQueue default, ClusterQueue vision)" in finding["message"]
    assert f"QuotaReserved False, {waiting['reason']}: {waiting['message']}" in finding["message"]
    teams.kubectl("delete", "-n", "vision", "job/toolarge", "--wait=true", timeout=120)
