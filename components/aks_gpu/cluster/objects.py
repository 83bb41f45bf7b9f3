"""What the validation reads of a node or a pod, read once for the live probe and the checks alike. Pure: the objects
as ``kubectl get -o json`` prints them (core/v1 Node and Pod, https://kubernetes.io/docs/reference/kubernetes-api/),
already held to their shapes by ``snapshot.shape_problem``.

- ``NodeStatus``: a node's name, its Ready condition (and why it is not Ready), cordon, allocatable resources and
  its AKS Node Problem Detector GPU conditions;
- ``pod_problem``: why a pod is not Running and ready; ``exec_problem``: why an exec into it cannot work;
- ``PluginPods``: the device plugin pods of each target, by node, in the order the checks judge them and the probe
  execs into them: a Running and ready one first (a rollout may leave an old one beside it), each by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aks_gpu.gpu.health import GpuCondition, read_gpu_conditions
from aks_gpu.naming import INSTANCE_TYPE_LABEL


def node_name(item: Mapping[str, Any]) -> str:
    return str((item.get("metadata") or {}).get("name") or "")


def pod_name(item: Mapping[str, Any]) -> str:
    return str((item.get("metadata") or {}).get("name") or "")


@dataclass(frozen=True)
class NodeStatus:
    name: str
    ready: bool
    not_ready: str  # why the node is not Ready ("Ready is False (KubeletNotReady: ...)"); "" when it is
    cordoned: bool
    allocatable: Mapping[str, Any]
    gpu_conditions: tuple[GpuCondition, ...] = ()
    instance_type: str | None = None  # the node's node.kubernetes.io/instance-type label: its VM size

    @classmethod
    def read(cls, item: Mapping[str, Any]) -> NodeStatus:
        status = item.get("status") or {}
        conditions = status.get("conditions") or []
        ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
        if ready is None:
            is_ready, why = False, "the node reports no Ready condition"
        elif ready.get("status") == "True":
            is_ready, why = True, ""
        else:
            detail = ready.get("message") or ""
            why = f"Ready is {ready.get('status', 'Unknown')} ({ready.get('reason') or 'no reason given'}"
            why += f": {detail})" if detail else ")"
            is_ready = False
        return cls(
            name=node_name(item),
            ready=is_ready,
            not_ready=why,
            cordoned=bool((item.get("spec") or {}).get("unschedulable")),
            allocatable=status.get("allocatable") or {},
            gpu_conditions=read_gpu_conditions(item),
            instance_type=_instance_type(item),
        )


def _instance_type(item: Mapping[str, Any]) -> str | None:
    labels = (item.get("metadata") or {}).get("labels")
    size = labels.get(INSTANCE_TYPE_LABEL) if isinstance(labels, Mapping) else None
    return size if isinstance(size, str) and size.strip() else None


def is_ready(item: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    conditions = (item.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def pod_problem(item: Mapping[str, Any]) -> str | None:
    """Why a pod is not Running and ready (``terminating``, its phase, its containers' waiting and terminated reasons);
    None when it is."""
    status = item.get("status") or {}
    reasons: list[str] = []
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        state = container.get("state") or {}
        for kind in ("waiting", "terminated"):
            reason = (state.get(kind) or {}).get("reason")
            if reason and reason != "Completed":
                reasons.append(f"{container.get('name', '?')}: {reason}")
    detail = f" ({', '.join(reasons)})" if reasons else ""
    if (item.get("metadata") or {}).get("deletionTimestamp"):
        return f"terminating{detail}"
    phase = status.get("phase") or "Unknown"
    if phase != "Running":
        return f"{phase}{detail}"
    if not is_ready(item):
        return f"Running but not ready{detail or ' (its readiness probe fails)'}"
    return None


def exec_problem(item: Mapping[str, Any]) -> str | None:
    """Why an exec into this pod cannot work; None when its containers run (ready or not: the SMI command may still
    tell why it is not ready)."""
    metadata = item.get("metadata") or {}
    status = item.get("status") or {}
    name = f"{metadata.get('namespace')}/{metadata.get('name')}"
    if metadata.get("deletionTimestamp"):
        return f"device plugin pod {name} is terminating"
    phase = status.get("phase") or "Unknown"
    if phase == "Running":
        return None
    waiting = [
        str(s["state"]["waiting"].get("reason"))
        for s in status.get("containerStatuses") or []
        if (s.get("state") or {}).get("waiting")
    ]
    return f"device plugin pod {name} is {phase}" + (f" ({', '.join(waiting)})" if waiting else "")


class PodTarget(Protocol):
    """Where a pool's device plugin pods are: their namespace and the labels that select them."""

    @property
    def namespace(self) -> str: ...

    @property
    def pod_labels(self) -> Mapping[str, str]: ...


_TargetKey = tuple[str, tuple[tuple[str, str], ...]]


def _key(target: PodTarget) -> _TargetKey:
    return target.namespace, tuple(sorted(target.pod_labels.items()))


class PluginPods:
    """The device plugin pods of each target, by node name: built in one pass over all pods."""

    def __init__(self, pods: Iterable[Mapping[str, Any]], targets: Iterable[PodTarget]) -> None:
        self._by_target: dict[_TargetKey, dict[str, list[Mapping[str, Any]]]] = {}
        keys_by_namespace: dict[str, list[_TargetKey]] = {}
        for target in targets:
            key = _key(target)
            if key not in self._by_target:
                self._by_target[key] = {}
                keys_by_namespace.setdefault(target.namespace, []).append(key)
        for item in pods:
            metadata = item.get("metadata") or {}
            keys = keys_by_namespace.get(metadata.get("namespace") or "")
            node = (item.get("spec") or {}).get("nodeName")
            if not keys or not node:
                continue
            labels = metadata.get("labels") or {}
            for key in keys:
                if all(labels.get(name) == value for name, value in key[1]):
                    self._by_target[key].setdefault(node, []).append(item)

    def on(self, target: PodTarget, node: str) -> Sequence[Mapping[str, Any]]:
        """The target's pods on ``node``, the one to judge first: Running and ready ones before the rest, each by name."""
        found = self._by_target.get(_key(target), {}).get(node, [])
        return sorted(found, key=lambda item: (pod_problem(item) is not None, pod_name(item)))

    def best(self, target: PodTarget | None, node: str) -> Mapping[str, Any] | None:
        """The node's plugin pod: a ready one when there is one."""
        if target is None:
            return None
        found = self.on(target, node)
        return found[0] if found else None
