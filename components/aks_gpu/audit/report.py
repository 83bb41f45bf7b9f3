"""The audit's results: each finding, each gap (what could not be judged, and why), the summaries per pool and per
namespace, the idle nodes, and the report that holds them, as ``aksgpu audit`` prints and writes them. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from aks_gpu.audit.registry import CHECK_BY_ID, PRACTICES, Practice, Severity, checks_of
from aks_gpu.cluster.inventory import whole


@dataclass(frozen=True)
class AuditFinding:
    """One finding. ``message`` is what the terminal and ``--json`` print: what was found and what to do. ``found``
    and ``remedy`` are its two halves for a reader who wants them apart (the HTML): ``remedy`` is an imperative a person
    can carry out, never a restatement of the problem. A health finding's ``found`` is the whole message (the SMI or
    Node Problem Detector finding, with its own advice for the GPU); its ``remedy`` is what to do with the node."""

    id: str
    severity: Severity
    node: str | None
    namespace: str | None
    pod: str | None
    message: str
    found: str
    remedy: str

    @property
    def practice(self) -> str:
        return CHECK_BY_ID[self.id].practice

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "node": self.node,
            "namespace": self.namespace,
            "pod": self.pod,
            "message": self.message,
        }


@dataclass(frozen=True)
class Gap:
    """What could not be judged: for ``ids`` (empty: the summary only), why, and on how many objects (None: all)."""

    practice: str
    ids: tuple[str, ...]
    reason: str
    count: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"practice": self.practice, "ids": list(self.ids), "reason": self.reason, "count": self.count}


@dataclass(frozen=True)
class PoolSummary:
    pool: str
    vendor: str | None
    gpu_nodes: int
    gpus_capacity: Fraction
    gpus_allocatable: Fraction
    gpus_requested: Fraction
    idle_nodes: int
    resources: Mapping[str, tuple[Fraction, Fraction]]  # resource -> (allocatable, requested)
    node_images: Mapping[str, int]
    # The GPU driver versions the nodes' SMI output shows (version -> nodes); nodes without readable output are not counted.
    driver_versions: Mapping[str, int] = field(default_factory=dict)
    expected_resource: str | None = None
    expected_per_node: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "vendor": self.vendor,
            "gpuNodes": self.gpu_nodes,
            "gpusCapacity": whole(self.gpus_capacity),
            "gpusAllocatable": whole(self.gpus_allocatable),
            "gpusRequested": whole(self.gpus_requested),
            "idleNodes": self.idle_nodes,
            "resources": {
                name: {"allocatable": whole(allocatable), "requested": whole(requested)}
                for name, (allocatable, requested) in self.resources.items()
            },
            "nodeImages": dict(self.node_images),
            "driverVersions": dict(self.driver_versions),
            "expectedResource": self.expected_resource,
            "expectedPerNode": self.expected_per_node,
        }


@dataclass(frozen=True)
class NamespaceSummary:
    namespace: str
    gpu_pods: int
    requests: Mapping[str, Fraction]
    quota: Mapping[str, str] | None  # GPU resource -> hard limit of an unscoped quota; None: quotas not read
    deny_all: bool | None  # None: network policies not read
    labels: Mapping[str, str] | None  # the workload and Pod Security labels; None: namespaces not read
    stack_workload: bool = False

    @property
    def gpus_requested(self) -> Fraction:
        return sum(self.requests.values(), Fraction(0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "gpuPods": self.gpu_pods,
            "gpusRequested": whole(self.gpus_requested),
            "requests": {name: whole(value) for name, value in self.requests.items()},
            "quota": dict(self.quota) if self.quota is not None else None,
            "denyAll": self.deny_all,
            "labels": dict(self.labels) if self.labels is not None else None,
            "stackWorkload": self.stack_workload,
        }


@dataclass(frozen=True)
class IdleNode:
    """A GPU node none of whose GPUs is requested, with what prices it: its VM size and region (node labels)."""

    node: str
    pool: str
    vm_size: str | None
    region: str | None
    gpus: Fraction

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "pool": self.pool, "vmSize": self.vm_size, "region": self.region, "gpus": whole(self.gpus)}


@dataclass(frozen=True)
class QueueSummary:
    """One GPU resource of one flavor of a Kueue ClusterQueue: its quota, what it has reserved, what of it is borrowed
    from its cohort, and what of its nominal quota it leaves for the others to borrow (unreserved, within its
    lendingLimit)."""

    cluster_queue: str
    cohort: str | None
    flavor: str
    resource: str
    nominal: Fraction
    reserved: Fraction
    borrowed: Fraction
    lendable: Fraction
    borrowing_limit: Fraction | None
    lending_limit: Fraction | None
    pending_workloads: int

    def to_dict(self) -> dict[str, Any]:
        def limit(value: Fraction | None) -> int | float | None:
            return None if value is None else whole(value)

        return {
            "clusterQueue": self.cluster_queue,
            "cohort": self.cohort,
            "flavor": self.flavor,
            "resource": self.resource,
            "nominal": whole(self.nominal),
            "reserved": whole(self.reserved),
            "borrowed": whole(self.borrowed),
            "lendable": whole(self.lendable),
            "borrowingLimit": limit(self.borrowing_limit),
            "lendingLimit": limit(self.lending_limit),
            "pendingWorkloads": self.pending_workloads,
        }


@dataclass(frozen=True)
class AutoRepairs:
    """AKS node auto-repair sequences in the window (``events.json``): on GPU nodes, and on the others, which the audit
    counts but does not judge."""

    gpu_nodes: int
    other_nodes: int

    def to_dict(self) -> dict[str, int]:
        return {"gpuNodes": self.gpu_nodes, "otherNodes": self.other_nodes}


@dataclass(frozen=True)
class AuditReport:
    findings: tuple[AuditFinding, ...]
    pools: tuple[PoolSummary, ...]
    namespaces: tuple[NamespaceSummary, ...]
    checked: tuple[str, ...]  # finding ids judged on at least part of the cluster, in registry order
    not_checked: tuple[Gap, ...]
    gpu_nodes: int
    collected_at: str | None
    stack: str | None = None
    cluster: Mapping[str, str] = field(default_factory=dict)  # the snapshot's "context" and "server", where known
    idle: tuple[IdleNode, ...] = ()  # the gpu-idle nodes
    queues: tuple[QueueSummary, ...] = ()  # Kueue's ClusterQueues, per flavor and GPU resource
    # AKS node auto-repair sequences in the window, on GPU nodes and the others; None: events.json not read.
    auto_repairs: AutoRepairs | None = None

    @property
    def failed(self) -> bool:
        return any(finding.severity == "fail" for finding in self.findings)

    def count(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity == severity)

    def summary(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "cluster": dict(self.cluster),
            "collectedAt": self.collected_at,
            "gpuNodes": self.gpu_nodes,
            "fail": self.count("fail"),
            "warn": self.count("warn"),
            "pools": [pool.to_dict() for pool in self.pools],
            "namespaces": [namespace.to_dict() for namespace in self.namespaces],
            "checked": list(self.checked),
            "notChecked": [gap.to_dict() for gap in self.not_checked],
            "idle": [node.to_dict() for node in self.idle],
            "queues": [queue.to_dict() for queue in self.queues],
            "autoRepairs": self.auto_repairs.to_dict() if self.auto_repairs is not None else None,
        }

    def to_dict(self) -> dict[str, Any]:
        """``{"findings": [{"id", "severity", "node", "namespace", "pod", "message"}], "summary": {...}}``."""
        return {"findings": [finding.to_dict() for finding in self.findings], "summary": self.summary()}


def practices_of(findings: Iterable[AuditFinding]) -> dict[str, list[AuditFinding]]:
    """Findings grouped by practice, in the registry's practice order (every practice present, maybe empty)."""
    grouped: dict[str, list[AuditFinding]] = {practice.id: [] for practice in PRACTICES}
    for finding in findings:
        grouped[finding.practice].append(finding)
    return grouped


Verdict = Literal["fail", "warn", "pass", "not checked"]


@dataclass(frozen=True)
class PracticeVerdict:
    """One practice's verdict: ``fail`` (a finding fails), ``warn`` (findings, none failing: the audit still passes),
    ``pass`` (judged, nothing found) or ``not checked`` (none of its findings could be judged). ``gaps`` counts what
    of it was not checked: a pass with gaps passed only in what was checked."""

    practice: Practice
    verdict: Verdict
    findings: int
    failing: int
    gaps: int


def practice_verdicts(report: AuditReport) -> tuple[PracticeVerdict, ...]:
    """Every practice of the registry, in its order, with its verdict over ``report``."""
    grouped = practices_of(report.findings)
    verdicts = []
    for practice in PRACTICES:
        findings = grouped[practice.id]
        failing = sum(1 for finding in findings if finding.severity == "fail")
        judged = any(finding in report.checked for check in checks_of(practice.id) for finding in check.finding_ids)
        verdict: Verdict = (
            "fail" if failing else "warn" if findings else "pass" if judged else "not checked"
        )
        gaps = sum(1 for gap in report.not_checked if gap.practice == practice.id)
        verdicts.append(PracticeVerdict(practice, verdict, len(findings), failing, gaps))
    return tuple(verdicts)
