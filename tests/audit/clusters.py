"""Cluster states for the audit tests and benchmark, in the shapes ``kubectl get ... -o json`` prints.

``clean_snapshot()`` is the prod stack deployed as the article asks, every file of the snapshot present: AKS GPU
nodes (``tests.cluster.snapshots``: labels, the vendor taint, allocatable, a healthy ``nvidia-smi -q -x``) with
a recent node image and the Node Problem Detector GPU conditions False, a training or inference pod using every GPU
of each node, the workload namespaces with the stack's own quota and deny-all policy (``workload_manifests``) as the
API server returns them, and meta.json's collectedAt. Every finding is then made alone by one edit.
"""

from __future__ import annotations

import copy
import hashlib
import json
import zlib
from dataclasses import replace
from typing import Any

from aks_gpu.cluster.inventory import AKS_ACCELERATOR_LABEL, NODE_IMAGE_LABEL
from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.kube.workload_manifests import workload_manifests
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import plugin_targets
from tests.cluster.snapshots import healthy_snapshot
from tests.conftest import FIXTURES_DIR, stack_model

AUDIT_FIXTURES_DIR = FIXTURES_DIR / "audit"
PROD = stack_model("prod")
TARGETS = plugin_targets(PROD)
# An image built 14 days before the snapshot; the label as AKS writes it (see node_images._IMAGE_DATE).
COLLECTED_AT = "2025-10-20T08:00:00Z"
FRESH_IMAGE = "AKSUbuntu-2204gen2containerd-202510.06.0"
NPD_GPU_CONDITIONS = {
    # type -> (reason, message) when False, as AKS's Node Problem Detector reports a healthy GPU node
    "GPUMissing": ("NoGPUMissing", "Observed GPU count matches expected GPU count"),
    "XIDErrors": ("NoXIDErrors", "No XID errors present in kernel log"),
    "NVLinkStatusInactive": ("NVLinkStatusActive", "NVLink is active"),
}


def fixture(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((AUDIT_FIXTURES_DIR / name).read_text(encoding="utf-8"))
    return document


def uid(*parts: str) -> str:
    value = f"{zlib.crc32('/'.join(parts).encode()):08x}"
    return f"{value}-0000-4000-8000-{value}{value[:4]}"


def served(manifest: dict[str, Any]) -> dict[str, Any]:
    """A manifest as the API server returns it: uid, resourceVersion, creationTimestamp; a namespace's
    kubernetes.io/metadata.name label; a quota's status; empty rule lists left out (omitempty)."""
    item = copy.deepcopy(manifest)
    metadata = item["metadata"]
    metadata.update(
        uid=uid(item["kind"], metadata.get("namespace", ""), metadata["name"]),
        resourceVersion="48211",
        creationTimestamp="2025-09-02T10:14:07Z",
    )
    if item["kind"] == "Namespace":
        metadata["labels"]["kubernetes.io/metadata.name"] = metadata["name"]
        item["spec"] = {"finalizers": ["kubernetes"]}
        item["status"] = {"phase": "Active"}
    if item["kind"] == "ResourceQuota":
        hard = item["spec"]["hard"]
        item["status"] = {"hard": dict(hard), "used": {key: "0" for key in hard}}
    if item["kind"] == "NetworkPolicy":
        metadata["generation"] = 1
        for direction in ("ingress", "egress"):
            if item["spec"].get(direction) == []:
                del item["spec"][direction]
    return item


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return served({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}})


def npd_condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": "2025-10-20T07:58:12Z",
        "lastTransitionTime": "2025-10-01T03:57:41Z",
    }


def workload_pod(
    namespace_name: str,
    name: str,
    node: str | None,
    requests: dict[str, str],
    *,
    phase: str = "Running",
    owner: tuple[str, str] | None = None,
    init: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A pod of a Job (by default), requesting ``requests`` with equal limits, scheduled on ``node``."""
    owner_kind, owner_name = owner or ("Job", name.rsplit("-", 1)[0])
    container = {
        "name": "trainer",
        "image": "nvcr.io/nvidia/pytorch:24.09-py3",
        "resources": {"limits": dict(requests), "requests": {**requests, "cpu": "4", "memory": "16Gi"}},
    }
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace_name,
            "uid": uid("Pod", namespace_name, name),
            "labels": {"batch.kubernetes.io/job-name": owner_name} if owner_kind == "Job" else {"app": owner_name},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1" if owner_kind == "Job" else "apps/v1",
                    "kind": owner_kind,
                    "name": owner_name,
                    "uid": uid(owner_kind, namespace_name, owner_name),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [container],
            "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {"phase": phase, "qosClass": "Burstable"},
    }
    if init:
        pod["spec"]["initContainers"] = init
    if node is not None:
        pod["spec"]["nodeName"] = node
        pod["status"]["conditions"] = [
            {"type": "Ready", "status": "True" if phase == "Running" else "False"},
            {"type": "PodScheduled", "status": "True"},
        ]
    return pod


def gpu_nodes(snapshot: ClusterSnapshot) -> list[dict[str, Any]]:
    return [node for node in snapshot.nodes if POOL_LABEL in node["metadata"].get("labels", {})]


def find_node(snapshot: ClusterSnapshot, name: str) -> dict[str, Any]:
    return next(node for node in snapshot.nodes if node["metadata"]["name"] == name)


def namespace_of_pool(model: PlatformModel) -> dict[str, str]:
    """Each pool's workload namespace: the one whose workload type the pool serves (prod: train -> gpu-training,
    infer and inferfull -> gpu-inference)."""
    return {pool.name: workload.name for workload in model.workloads for pool in workload.pools}


def clean_snapshot(nodes: dict[str, int] | None = None, model: PlatformModel = PROD) -> ClusterSnapshot:
    """The prod stack as the article asks, ``nodes`` GPU nodes per pool (by default 2 train, 1 infer, and no
    inferfull node: that pool keeps minCount 0 and scales from zero only for whole-GPU inference)."""
    targets = plugin_targets(model)
    base = healthy_snapshot(model, targets, nodes or {"train": 2, "infer": 1})
    namespace_of = namespace_of_pool(model)
    pods = list(base.pods)
    for node in base.nodes:
        labels = node["metadata"]["labels"]
        pool = labels.get(POOL_LABEL)
        if pool is None:
            continue
        labels[NODE_IMAGE_LABEL] = FRESH_IMAGE
        labels[AKS_ACCELERATOR_LABEL] = "nvidia"
        node["status"]["conditions"] += [npd_condition(kind, "False", *texts) for kind, texts in NPD_GPU_CONDITIONS.items()]
        target = targets[pool]
        name = node["metadata"]["name"]
        pods.append(
            workload_pod(
                namespace_of[pool], f"{pool}-job-{name[-4:]}-x7k2p", name, {target.resource_name: str(target.count_per_node)}
            )
        )
    namespaces = [namespace("kube-system"), namespace("gpu-resources", {"app.kubernetes.io/part-of": "aks-gpu"})]
    quotas: list[dict[str, Any]] = []
    policies: list[dict[str, Any]] = []
    resources = sorted({pool.resource.name for pool in model.pools})
    for workload in model.workloads:
        others = [name for name in resources if name != workload.resource_name]
        for manifest in workload_manifests(workload.config, workload.resource_name, others, workload.kube_tolerations):
            kind = manifest["kind"]
            if kind == "Namespace":
                namespaces.append(served(manifest))
            elif kind == "ResourceQuota":
                quotas.append(served(manifest))
            elif kind == "NetworkPolicy":
                policies.append(served(manifest))
    return replace(
        base,
        pods=pods,
        namespaces=namespaces,
        resourcequotas=quotas,
        networkpolicies=policies,
        # A Standard cluster without node auto-provisioning: the collector reads no NodePool (the API answers 404).
        nodepools=[],
        # Nor Kueue: its API answers 404, and the collector writes no ClusterQueue and no Workload.
        clusterqueues=[],
        workloads=[],
        # No node auto-repair and no maintenance in AKS's hour of events: the collector keeps no Event.
        events=[],
        collected_at=COLLECTED_AT,
    )


def edited(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """A deep copy to break one thing in."""
    return copy.deepcopy(snapshot)


TRAIN_0 = "aks-train-31415926-vmss000000"
TRAIN_1 = "aks-train-31415926-vmss000001"
INFER_0 = "aks-infer-31415926-vmss000000"
CLEAN_NODES = (TRAIN_0, TRAIN_1, INFER_0)
SYSTEM_0 = "aks-system-27182818-vmss000000"
# AKS node auto-repair's reboot, as node-auto-repair.md:88-89 gives its events' messages.
REBOOT_START = "Node auto-repair is initiating a reboot action due to NotReady status persisting for more than five minutes."
REBOOT_END = "Reboot action from node auto-repair is completed."


def node_event(
    node: str,
    reason: str,
    message: str,
    source: str,
    at: str,
    *,
    count: int = 1,
    first: str | None = None,
    type_: str = "Warning",
) -> dict[str, Any]:
    """A core/v1 Event on ``node`` as `kubectl get events -o json` prints one a legacy recorder wrote (client-go's
    record, as the Node Problem Detector and, by its `--field-selector source=` recipe, AKS node auto-repair use): the
    fields of k8s.io/api v0.36.3 core/v1/types.go Event, in the default namespace where events on cluster-scoped objects
    go, repeats aggregated into ``count``."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{node}.{hashlib.sha256(f'{reason}{message}{at}'.encode()).hexdigest()[:16]}",
            "namespace": "default",
            "creationTimestamp": first or at,
            "resourceVersion": "48213",
            "uid": f"{hashlib.sha256(f'{node}{reason}{at}'.encode()).hexdigest()[:8]}-5d1c-4d0e-9b7a-3f1e2c4d5a6b",
        },
        "involvedObject": {"kind": "Node", "name": node, "uid": node, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "source": {"component": source, "host": node},
        "firstTimestamp": first or at,
        "lastTimestamp": at,
        "count": count,
        "type": type_,
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    }
