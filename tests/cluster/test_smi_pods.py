"""Where `aksgpu audit collect` runs the SMI command with no stack: the pods the vendors' manifests label, in
components/aks_gpu/data/smi_pods.yaml, kept in step with the labels aks-gpu's own DaemonSets and the GPU Operator use."""

from __future__ import annotations

import copy
from typing import Any

from aks_gpu.cluster.smi_pods import known_smi_pods, plan_known_execs
from aks_gpu.resolved.targets import (
    AMD_SMI_CONTAINER,
    AMD_SMI_NAME,
    NVIDIA_PLUGIN_CONTAINER,
    NVIDIA_PLUGIN_NAME,
    OPERATOR_NVIDIA_PLUGIN_CONTAINER,
    OPERATOR_NVIDIA_PLUGIN_LABELS,
    app_labels,
)
from tests.audit.clusters import TRAIN_0, clean_snapshot, find_node


def test_the_known_pods_include_aks_gpus_own_and_the_gpu_operators() -> None:
    known = {(tuple(sorted(pod.labels.items())), pod.container) for pod in known_smi_pods()}
    assert (tuple(sorted(app_labels(NVIDIA_PLUGIN_NAME).items())), NVIDIA_PLUGIN_CONTAINER) in known
    assert (tuple(sorted(OPERATOR_NVIDIA_PLUGIN_LABELS.items())), OPERATOR_NVIDIA_PLUGIN_CONTAINER) in known
    assert (tuple(sorted(app_labels(AMD_SMI_NAME).items())), AMD_SMI_CONTAINER) in known
    assert all(pod.source for pod in known_smi_pods())


def _plugin_pod(snapshot: Any, node: str) -> dict[str, Any]:
    return next(
        p for p in snapshot.pods if p["spec"].get("nodeName") == node and "controller-revision-hash" in p["metadata"]["labels"]
    )


def test_a_not_ready_node_and_a_pending_pod_are_skipped_with_the_reason() -> None:
    snapshot = clean_snapshot()
    gpu = [node for node in snapshot.nodes if "aks-gpu/pool" in node["metadata"]["labels"]]
    ready = next(c for c in find_node(snapshot, TRAIN_0)["status"]["conditions"] if c["type"] == "Ready")
    ready.update(status="False", reason="KubeletNotReady", message="PLEG is not healthy")
    jobs, skipped = plan_known_execs(gpu, snapshot.pods)
    assert TRAIN_0 in skipped and skipped[TRAIN_0].startswith("node NotReady")
    assert {job.node for job in jobs} == {node["metadata"]["name"] for node in gpu} - {TRAIN_0}
    assert all(job.command == ("nvidia-smi", "-q", "-x") and job.container == NVIDIA_PLUGIN_CONTAINER for job in jobs)

    other = next(job.node for job in jobs)
    pending = copy.deepcopy(snapshot.pods)
    pod = _plugin_pod(type(snapshot)(**{**snapshot.__dict__, "pods": pending}), other)
    pod["status"] = {
        "phase": "Pending",
        "containerStatuses": [{"name": "x", "state": {"waiting": {"reason": "ImagePullBackOff"}}}],
    }
    _, skipped = plan_known_execs(gpu, pending)
    assert "is Pending (ImagePullBackOff)" in skipped[other]
