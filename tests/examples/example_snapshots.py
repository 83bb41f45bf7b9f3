"""The example snapshots of ``examples/snapshots/``: a healthy AKS GPU cluster and the same cluster with the faults
an audit exists for, so ``aksgpu audit --snapshot examples/snapshots/faulty`` shows what the tool is for with no
cluster at all. Regenerate them with ``PYTHONPATH=$PWD python -m tests.examples.example_snapshots``; the tests hold
the folders to what this writes.

Both are built from the audit tests' clean cluster (``tests.audit.clusters``: AKS GPU nodes as ``kubectl get -o
json`` prints them, the article's quota and deny-all policy, ``nvidia-smi -q -x`` made from real outputs). The faulty
one breaks, one each: an untainted GPU node with a web pod squatting on it, a node whose real ``nvidia-smi -q``
(tests/fixtures/health/31_..., gpud's testdata) shows all eight H100s in HW slowdown and power brake, an inference
node on a node image four months old that nobody uses, a training node whose Node Problem
Detector reports Xid errors and that AKS node auto-repair rebooted, a workload namespace with no GPU quota, and a
training job waiting in its Kueue queue.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from aks_gpu.cluster.inventory import NODE_IMAGE_LABEL
from aks_gpu.cluster.snapshot import ClusterSnapshot, write_snapshot
from tests.audit.clusters import (
    INFER_0,
    REBOOT_END,
    REBOOT_START,
    TRAIN_0,
    TRAIN_1,
    clean_snapshot,
    edited,
    find_node,
    gpu_nodes,
    node_event,
    npd_condition,
    workload_pod,
)
from tests.audit.queues import cluster_queue, workload
from tests.conftest import FIXTURES_DIR, PROJECT_DIR

EXAMPLES_DIR = PROJECT_DIR / "examples" / "snapshots"
TRAIN_2 = "aks-train-31415926-vmss000002"
REGION = "eastus"
CLUSTER = {"context": "contoso-gpu-prod", "server": "https://contoso-gpu-prod-4f7a2c1e.hcp.eastus.azmk8s.io:443"}
STALE_IMAGE = "AKSUbuntu-2204gen2containerd-202506.10.0"
TRAINING = "gpu-training"
HW_SLOWDOWN_SMI = FIXTURES_DIR / "health" / "31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt"


def healthy() -> ClusterSnapshot:
    snapshot = clean_snapshot({"train": 3, "infer": 1})
    for node in gpu_nodes(snapshot):
        node["metadata"]["labels"]["topology.kubernetes.io/region"] = REGION
    return replace(snapshot, cluster=dict(CLUSTER))


def faulty() -> ClusterSnapshot:
    snapshot = edited(healthy())
    # An untainted GPU node, and a web pod that landed there because nothing kept it off.
    find_node(snapshot, TRAIN_1)["spec"]["taints"] = []
    squatter = workload_pod("web", "frontend-7d9c8b6f5-q2w8r", TRAIN_1, {}, owner=("ReplicaSet", "frontend-7d9c8b6f5"))
    squatter["spec"]["containers"][0].update(name="frontend", image="contoso.azurecr.io/web/frontend:3.14.2")
    squatter["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "512Mi"}}
    del squatter["spec"]["tolerations"]
    squatter["spec"]["restartPolicy"] = "Always"
    snapshot.pods.append(squatter)
    # A real nvidia-smi -q of eight H100s all held in HW slowdown by the power brake.
    snapshot.smi[TRAIN_0] = HW_SLOWDOWN_SMI.read_text(encoding="utf-8")
    # The Node Problem Detector reports Xid errors on another training node.
    conditions = find_node(snapshot, TRAIN_2)["status"]["conditions"]
    conditions[:] = [c for c in conditions if c["type"] != "XIDErrors"]
    conditions.append(
        npd_condition("XIDErrors", "True", "XIDErrorsDetected", "Xid 79 (GPU has fallen off the bus) in the kernel log")
    )
    # The GPU hung that node: NotReady for five minutes, AKS node auto-repair rebooted it (its events on the Node).
    repairs = [
        node_event(TRAIN_2, "NodeRebootStart", REBOOT_START, "aks-auto-repair", "2025-10-20T07:31:00Z"),
        node_event(TRAIN_2, "NodeRebootEnd", REBOOT_END, "aks-auto-repair", "2025-10-20T07:36:40Z"),
    ]
    # The inference node: four months behind on its node image, and idle.
    find_node(snapshot, INFER_0)["metadata"]["labels"][NODE_IMAGE_LABEL] = STALE_IMAGE
    snapshot.pods[:] = [pod for pod in snapshot.pods if pod["metadata"]["namespace"] != "gpu-inference"]
    # The training namespace lost its GPU quota.
    quotas = [q for q in snapshot.resourcequotas or [] if q["metadata"]["namespace"] != "gpu-training"]
    # Kueue queues the training team's jobs: 24 of its 32 GPUs are reserved, and a 16-GPU job waits for 8 more.
    queue = cluster_queue(TRAINING, "training", 32, 24, pending=1)
    waiting = workload(TRAINING, "job-pretrain-7b-2f9c1", 8, 2)
    return replace(snapshot, resourcequotas=quotas, clusterqueues=[queue], workloads=[waiting], events=repairs)


def example_snapshots() -> dict[str, ClusterSnapshot]:
    return {"healthy": healthy(), "faulty": faulty()}


def write_examples(folder: Path = EXAMPLES_DIR) -> None:
    for name, snapshot in example_snapshots().items():
        write_snapshot(snapshot, folder / name)


if __name__ == "__main__":
    write_examples(Path(sys.argv[1]) if len(sys.argv) > 1 else EXAMPLES_DIR)
