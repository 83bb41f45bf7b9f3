"""Active vendor diagnostics on one GPU node: the diagnostic Job, and what a node's verdict does to the node.

**The Job** (``diagnostic_job_manifest``): pinned to one node (its ``kubernetes.io/hostname``, inside its pool's node
selector), asking for *every* GPU the node advertises, so the scheduler never places it beside GPU work and nothing
else lands on the node's GPUs while it runs. It tolerates the pool's taints, the quarantine taint and the cordon's
(``node.kubernetes.io/unschedulable``): it must run on a quarantined, cordoned node, as that is when a node is proven
before it returns to service. The vendor tools run one after the other, each in its own container holding the GPUs
(init containers, so a fault in one still leaves the others' output; each prints its output and exits 0, the
readers of ``aks_gpu.gpu.diag`` judge it):

1. ``dcgm-diag``: ``dcgmi diag -r <level> -j`` in NVIDIA's DCGM image (level 1 after deploy, 2 or 3 on the schedule
   and before a node returns to service; https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html);
2. ``cuda-context``: CUDA samples' ``deviceQuery``, a context on every GPU;
3. ``nccl`` (multi-GPU sizes): ``all_reduce_perf -b 8 -e 16G -f 2 -g <gpus>``, up to the size the bus bandwidth
   figures are for (``components/aks_gpu/data/gpu_diagnostics.yaml``).

Their logs (``kubectl logs job/<name> -c <container>``) are what ``grade_node`` reads.

**The verdict's effect** (``node_action``): an unhealthy node is tainted ``aks-gpu/gpu-quarantine=diagnostic:NoSchedule``
and cordoned, for the quarantine engine and its drain; a node the diagnostic quarantined returns (taint removed,
uncordoned) only after a *passing* diagnostic; an inconclusive one changes nothing. Pure: dicts in, dicts out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aks_gpu.gpu.diag import Grade, combine, read_all_reduce, read_cuda_context, read_dcgm_diag
from aks_gpu.gpu.diag.expectations import bus_bandwidth_for, diagnostic_images
from aks_gpu.naming import (
    DIAGNOSTIC_LEVEL_LABEL,
    DIAGNOSTIC_TAINT_VALUE,
    GPU_NAMESPACE,
    HOSTNAME_LABEL,
    NAME_LABEL,
    POOL_LABEL,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    UNSCHEDULABLE_TAINT_KEY,
)
from aks_gpu.resolved.model import QUARANTINE_TOLERATION, ResolvedPool, Toleration

DIAG_APP = "gpu-diag"
Level = Literal[1, 2, 3]
# How long each level may take: DCGM's documentation gives level 1 seconds, level 2 about two minutes and level 3
# about 30 minutes on a node; the CUDA and NCCL checks add minutes.
DEADLINE_SECONDS: dict[int, int] = {1: 900, 2: 1800, 3: 3600}
TTL_SECONDS_AFTER_FINISHED = 3600
CONTAINERS = ("dcgm-diag", "cuda-context", "nccl")
NCCL_MAX_BYTES = "16G"
UNSCHEDULABLE_TOLERATION = Toleration(UNSCHEDULABLE_TAINT_KEY, "Exists", "NoSchedule")
Action = Literal["quarantine", "return", "none"]


def job_name(node: str) -> str:
    """``gpu-diag-<node>``, within the 63 characters a Job's name may have for its pods' ``job-name`` label."""
    name = f"{DIAG_APP}-{node}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:8]
    return f"{name[:54]}-{digest}"


def diagnostic_commands(pool: ResolvedPool, level: Level) -> dict[str, list[str]]:
    """Per container, the command it runs; ``nccl`` only on sizes with more than one GPU."""
    commands = {
        # nv-hostengine starts the host engine dcgmi talks to (it daemonizes); -j prints the JSON the reader reads.
        "dcgm-diag": ["sh", "-c", f"nv-hostengine; dcgmi diag -r {level} -j; exit 0"],
        "cuda-context": ["sh", "-c", "/cuda-samples/sample; exit 0"],
    }
    gpus = pool.gpus_per_node or 1
    if gpus > 1:
        commands["nccl"] = ["sh", "-c", f"all_reduce_perf -b 8 -e {NCCL_MAX_BYTES} -f 2 -g {gpus}; exit 0"]
    return commands


def diagnostic_job_manifest(pool: ResolvedPool, node: str, level: Level, namespace: str = GPU_NAMESPACE) -> dict[str, Any]:
    """The diagnostic Job for ``node`` of ``pool`` at ``level``. Refused (ValueError) for a pool whose GPU count per
    node is unknown (it could not ask for every GPU) or that is not NVIDIA (AMD's tools are not wired yet)."""
    if pool.vendor != "nvidia":
        raise ValueError(f"pool {pool.name}: the diagnostic Job runs NVIDIA's tools; {pool.vendor} is not supported yet")
    units = pool.resource.count_per_node
    if not units:
        raise ValueError(f"pool {pool.name}: its GPUs per node are unknown, so the Job cannot ask for all of them")
    images = diagnostic_images()
    role = {"dcgm-diag": "dcgm", "cuda-context": "cuda_context", "nccl": "nccl"}
    labels = {NAME_LABEL: DIAG_APP, POOL_LABEL: pool.name, DIAGNOSTIC_LEVEL_LABEL: str(level)}
    every_gpu = {pool.resource.name: str(units)}
    containers = [
        {
            "name": name,
            "image": images[role[name]].reference,
            "imagePullPolicy": "IfNotPresent",
            "command": command,
            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi", **every_gpu}},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
        for name, command in diagnostic_commands(pool, level).items()
    ]
    tolerations = [t.to_kube() for t in (*pool.tolerations, QUARANTINE_TOLERATION, UNSCHEDULABLE_TOLERATION)]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(node), "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": DEADLINE_SECONDS[level],
            "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {**pool.node_selector, HOSTNAME_LABEL: node},
                    "tolerations": tolerations,
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    # Every tool but the last runs as an init container: one after the other, each holding the GPUs.
                    "initContainers": containers[:-1],
                    "containers": containers[-1:],
                },
            },
        },
    }


def grade_node(pool: ResolvedPool, outputs: Mapping[str, str], level: Level, vm_size: str | None = None) -> Grade:
    """The node's verdict from its containers' outputs (by container name): every tool the Job runs must have said
    something, or the node is inconclusive."""
    size = vm_size or (pool.vm_size.name if pool.vm_size else pool.config.vm_size)
    grades: list[Grade] = []
    for name in diagnostic_commands(pool, level):
        text = outputs.get(name)
        if text is None:
            grades.append(Grade(name, "inconclusive", "no output (the container did not run or its log is gone)"))
        elif name == "dcgm-diag":
            grades.append(read_dcgm_diag(text, level))
        elif name == "cuda-context":
            grades.append(read_cuda_context(text, pool.gpus_per_node))
        else:
            grades.append(read_all_reduce(text, bus_bandwidth_for(size)))
    return combine("node", grades)


@dataclass(frozen=True)
class NodeAction:
    action: Action
    reason: str
    patch: dict[str, Any] | None  # a strategic-merge patch of the Node (``kubectl patch node --type=strategic``)


def _taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(((node.get("spec") or {}).get("taints")) or [])


def _ours(taint: Mapping[str, Any]) -> bool:
    return taint.get("key") == QUARANTINE_TAINT_KEY and taint.get("value") == DIAGNOSTIC_TAINT_VALUE


def node_action(node: Mapping[str, Any], grade: Grade) -> NodeAction:
    """What the diagnostic schedule does to ``node`` (a Node object) after ``grade``."""
    taints = _taints(node)
    quarantined_by_us = any(_ours(t) for t in taints)
    if grade.state == "unhealthy":
        if quarantined_by_us and (node.get("spec") or {}).get("unschedulable"):
            return NodeAction("none", f"already quarantined: {grade.part}", None)
        taint = {"key": QUARANTINE_TAINT_KEY, "value": DIAGNOSTIC_TAINT_VALUE, "effect": QUARANTINE_TAINT_EFFECT}
        kept = [t for t in taints if not _ours(t)]
        return NodeAction("quarantine", str(grade), {"spec": {"unschedulable": True, "taints": [*kept, taint]}})
    if grade.state == "healthy" and quarantined_by_us:
        kept = [t for t in taints if not _ours(t)]
        # Uncordon only where no other quarantine (the engine's "fault") still holds the node.
        others = any(t.get("key") == QUARANTINE_TAINT_KEY for t in kept)
        spec: dict[str, Any] = {"taints": kept} if others else {"taints": kept, "unschedulable": False}
        return NodeAction(
            "return", "a passing diagnostic" + (" (another quarantine still holds it)" if others else ""), {"spec": spec}
        )
    return NodeAction("none", str(grade), None)
