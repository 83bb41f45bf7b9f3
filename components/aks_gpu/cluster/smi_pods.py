"""Where the SMI command can run on a GPU node of a cluster aks-gpu did not build: the plugin and driver pods the
vendors' manifests label the same way everywhere (``components/aks_gpu/data/smi_pods.yaml``). Pure: objects in, exec plans
out. ``aksgpu audit collect`` uses it; with a stack, ``aks_gpu.resolved.targets`` knows the exact pods instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.cluster.objects import NodeStatus, exec_problem, pod_name, pod_problem
from aks_gpu.data_files import load_yaml
from aks_gpu.naming import Vendor
from aks_gpu.resolved.targets import smi_command

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "smi_pods.yaml"


@dataclass(frozen=True)
class KnownSmiPod:
    """Pods labelled ``labels`` (in any namespace) run ``vendor``'s agent, in which ``smi_command(vendor)`` runs."""

    agent: str
    vendor: Vendor
    labels: Mapping[str, str]
    container: str | None
    source: str

    def matches(self, pod: Mapping[str, Any]) -> bool:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return all(labels.get(key) == value for key, value in self.labels.items())

    @property
    def selector(self) -> str:
        return ",".join(f"{key}={value}" for key, value in sorted(self.labels.items()))


@dataclass(frozen=True)
class SmiExec:
    """One SMI command to run on ``node``: in ``namespace/pod`` (``container``; None: the pod's default)."""

    node: str
    namespace: str
    pod: str
    container: str | None
    command: tuple[str, ...]
    agent: str


@cache
def known_smi_pods() -> tuple[KnownSmiPod, ...]:
    document = load_yaml(DATA_FILE)
    return tuple(
        KnownSmiPod(
            agent=" ".join(str(entry["agent"]).split()),
            vendor=entry["vendor"],
            labels={str(k): str(v) for k, v in entry["labels"].items()},
            container=entry.get("container"),
            source=" ".join(str(entry["source"]).split()),
        )
        for entry in document["pods"]
    )


@cache
def managed_gpu_note() -> str:
    return " ".join(str(load_yaml(DATA_FILE)["managed_gpu_note"]).split())


def plan_known_execs(
    nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], known: Sequence[KnownSmiPod] | None = None
) -> tuple[list[SmiExec], dict[str, str]]:
    """Per GPU node in ``nodes``: the SMI exec to run (the first known agent with a pod there, a Running and ready
    pod first), or why there is none (NotReady, no known pod, none that an exec can reach)."""
    agents = tuple(known if known is not None else known_smi_pods())
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            by_node.setdefault(str(node), []).append(pod)
    jobs: list[SmiExec] = []
    skipped: dict[str, str] = {}
    for node in nodes:
        status = NodeStatus.read(node)
        if not status.ready:
            skipped[status.name] = f"node NotReady: {status.not_ready}"
            continue
        here = by_node.get(status.name, [])
        problems: list[str] = []
        for agent in agents:
            found = sorted((pod for pod in here if agent.matches(pod)), key=lambda p: (pod_problem(p) is not None, pod_name(p)))
            usable = [pod for pod in found if exec_problem(pod) is None]
            if usable:
                pod = usable[0]
                namespace = str((pod.get("metadata") or {}).get("namespace") or "")
                jobs.append(
                    SmiExec(status.name, namespace, pod_name(pod), agent.container, tuple(smi_command(agent.vendor)), agent.agent)
                )
                break
            if found:
                problems.append(str(exec_problem(found[0])))
        else:
            if problems:
                skipped[status.name] = "; ".join(problems)
            else:
                selectors = "; ".join(agent.selector for agent in agents)
                skipped[status.name] = (
                    f"no pod that can run the SMI command on this node (looked for {selectors}). {managed_gpu_note()}"
                )
    return jobs, skipped
