"""What every practice's checks share: the run that collects their findings, gaps and what they judged, and how
their messages name commands, lists of names and counts. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from aks_gpu.audit.registry import Severity, health_remedy
from aks_gpu.audit.report import AuditFinding, Gap
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.cluster.inventory import whole
from aks_gpu.cluster.snapshot import ClusterSnapshot

SHOWN = 3  # names listed in a message before "+N more"


@dataclass
class Run:
    """What the checks of one audit add up: findings and gaps in the order they are found, and the ids judged."""

    findings: list[AuditFinding] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)

    def add(
        self,
        id_: str,
        severity: Severity,
        found: str,
        remedy: str,
        node: str | None = None,
        namespace: str | None = None,
        pod: str | None = None,
    ) -> None:
        """A finding whose message is what was found, then what to do (``remedy``: an imperative sentence)."""
        self.findings.append(AuditFinding(id_, severity, node, namespace, pod, f"{found}. {remedy}", found, remedy))

    def add_health(self, id_: str, severity: Severity, message: str, node: str) -> None:
        """A GPU health finding: its message (the SMI or Node Problem Detector finding) already says what to do for
        the GPU; the remedy is what to do with the node, from the registry."""
        remedy = health_remedy(node, severity)
        self.findings.append(AuditFinding(id_, severity, node, None, None, message, message, remedy))

    def gap(self, practice: str, ids: Sequence[str], reason: str, count: int | None = None) -> None:
        self.gaps.append(Gap(practice, tuple(ids), reason, count))


class Commands:
    """The commands messages suggest, with the stack's names where there is one."""

    def __init__(self, stack: StackExpectations | None) -> None:
        self.group = (stack.resource_group if stack else None) or "<resource-group>"
        self.cluster = (stack.cluster if stack else None) or "<cluster>"

    def nodepool(self, action: str, pool: str, flags: str = "") -> str:
        return f"`az aks nodepool {action} --resource-group {self.group} --cluster-name {self.cluster} --name {pool}{flags}`"


def listed_names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" +{len(names) - SHOWN} more" if len(names) > SHOWN else "")


def count_shown(value: Fraction) -> str:
    return str(whole(value))


def requests_shown(requests: Mapping[str, Fraction]) -> str:
    return ", ".join(f"{name} x {count_shown(value)}" for name, value in requests.items())


def absent_file(snapshot: ClusterSnapshot, file: str, consequence: str) -> str:
    """Why a gap: the optional ``file`` is not in the snapshot (with the collector's reason, where it gave one)."""
    why = snapshot.not_collected.get(file)
    return f"{file} is not in the snapshot{f' ({why})' if why else ''}: {consequence}"
