"""Kueue objects (kueue.x-k8s.io/v1beta2) as an API server returns them, for the queueing checks' tests and the example
snapshots: ClusterQueues of the platform's shape (components/aks_gpu/kube/kueue.py: one per workload namespace, the
cohort its workload type) with a status, and Workloads admitted or waiting. Field names: sigs.k8s.io/kueue@v0.17.0
apis/kueue/v1beta2/clusterqueue_types.go and workload_types.go."""

from __future__ import annotations

from typing import Any

API_VERSION = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
# What Kueue's scheduler writes into a Workload that does not fit (pkg/scheduler/flavorassigner: "couldn't assign
# flavors to pod set ...").
NO_FLAVOR = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor train, 8 more needed"


def cluster_queue(
    name: str,
    cohort: str,
    nominal: int,
    reserved: int,
    *,
    flavor: str = "train",
    borrowing_limit: int | None = None,
    lending_limit: int | None = None,
    pending: int = 0,
) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": GPU, "nominalQuota": str(nominal)}
    if borrowing_limit is not None:
        gpu["borrowingLimit"] = str(borrowing_limit)
    if lending_limit is not None:
        gpu["lendingLimit"] = str(lending_limit)
    usage = [
        {"name": GPU, "total": str(reserved), "borrowed": str(max(reserved - nominal, 0))},
        {"name": "cpu", "total": "0", "borrowed": "0"},
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"cq-{name}"},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": [GPU, "cpu"],
                    "flavors": [{"name": flavor, "resources": [gpu, {"name": "cpu", "nominalQuota": "96"}]}],
                }
            ],
        },
        "status": {
            "admittedWorkloads": 1 if reserved else 0,
            "reservingWorkloads": 1 if reserved else 0,
            "pendingWorkloads": pending,
            "flavorsReservation": [{"name": flavor, "resources": usage}],
            "flavorsUsage": [{"name": flavor, "resources": usage}],
            "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads"}],
        },
    }


def workload(namespace: str, name: str, gpus_per_pod: int, pods: int, *, admitted_to: str | None = None) -> dict[str, Any]:
    condition = (
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": f"Quota reserved in ClusterQueue {admitted_to}",
        }
        if admitted_to
        else {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": NO_FLAVOR}
    )
    status: dict[str, Any] = {"conditions": [condition]}
    if admitted_to:
        status["admission"] = {
            "clusterQueue": admitted_to,
            "podSetAssignments": [
                {"name": "main", "flavors": {GPU: "train"}, "resourceUsage": {GPU: str(gpus_per_pod * pods)}, "count": pods}
            ],
        }
    container = {
        "name": "trainer",
        "image": "trainer:1",
        "resources": {"requests": {GPU: str(gpus_per_pod)}, "limits": {GPU: str(gpus_per_pod)}},
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "uid": f"wl-{namespace}-{name}"},
        "spec": {
            "queueName": "default",
            "podSets": [{"name": "main", "count": pods, "template": {"spec": {"containers": [container]}}}],
        },
        "status": status,
    }
