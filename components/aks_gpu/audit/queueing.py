"""The queueing practice: Kueue's ClusterQueues and Workloads (kueue.x-k8s.io/v1beta2), as ``clusterqueues.json`` and
``workloads.json`` hold them. Workloads that wait for quota and why (``queue-workload-pending``), the GPUs a
ClusterQueue borrows from its cohort and who lends them (``queue-gpus-borrowed``), and a ClusterQueue whose nominal
GPUs sit unreserved while another of its cohort borrows or waits (``queue-nominal-idle``). Pure.

Field names are those of sigs.k8s.io/kueue@v0.17.0 ``apis/kueue/v1beta2``: ``clusterqueue_types.go`` (spec.cohortName,
spec.resourceGroups[].flavors[].resources[] name / nominalQuota / borrowingLimit / lendingLimit, status.flavorsReservation
and status.flavorsUsage [].name / resources[] name / total / borrowed) and ``workload_types.go`` (spec.podSets[] count /
template, status.conditions of types QuotaReserved and Finished, status.admission.clusterQueue). A ClusterQueue's GPUs
are those of its flavors' resources that are GPU resources (``inventory.is_gpu_resource``, plus the stack's).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from aks_gpu.admission.quantity import Quantity
from aks_gpu.audit.judging import Run, absent_file, count_shown, listed_names
from aks_gpu.audit.registry import checks_of
from aks_gpu.audit.report import QueueSummary
from aks_gpu.cluster.inventory import is_gpu_resource
from aks_gpu.cluster.snapshot import CLUSTER_QUEUES_FILE, WORKLOADS_FILE, ClusterSnapshot, SnapshotError
from aks_gpu.naming import NAMESPACE_NAME_LABEL

PRACTICE = "queueing"
PENDING, BORROWED, IDLE = "queue-workload-pending", "queue-gpus-borrowed", "queue-nominal-idle"
QUOTA_RESERVED, FINISHED = "QuotaReserved", "Finished"


@dataclass(frozen=True)
class FlavorGpus:
    """One GPU resource of one flavor of a ClusterQueue: its quota (spec) and what it has reserved (status)."""

    flavor: str
    resource: str
    nominal: Fraction
    borrowing_limit: Fraction | None  # None: no limit but what the cohort lends
    lending_limit: Fraction | None  # None: all of its nominal quota
    reserved: Fraction = Fraction(0)
    borrowed: Fraction = Fraction(0)

    @property
    def idle(self) -> Fraction:
        return max(self.nominal - self.reserved, Fraction(0))

    @property
    def lendable(self) -> Fraction:
        return self.idle if self.lending_limit is None else min(self.idle, self.lending_limit)

    def where(self) -> str:
        return f"{self.resource} on flavor {self.flavor}"


@dataclass
class Queue:
    name: str
    cohort: str | None
    # The namespace its namespaceSelector names by kubernetes.io/metadata.name, as the platform's queues select theirs.
    namespaces: frozenset[str]
    gpus: dict[tuple[str, str], FlavorGpus] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)  # namespace/name of its waiting Workloads


def _quantity(value: Any, file: str, where: str) -> Fraction:
    try:
        return Quantity.parse(str(value)).value
    except ValueError as error:
        raise SnapshotError(f"{file}: {where} is not a Kubernetes quantity: {error}") from None


def _dicts(value: Any) -> Iterable[Mapping[str, Any]]:
    return (entry for entry in value or () if isinstance(entry, Mapping))


def read_queues(items: Sequence[Mapping[str, Any]], extra: Iterable[str] = ()) -> dict[str, Queue]:
    """The ClusterQueues' GPU quotas and reservations, by name."""
    extra = frozenset(extra)
    queues: dict[str, Queue] = {}
    for item in items:
        name = str(item["metadata"]["name"])
        spec, status = item.get("spec") or {}, item.get("status") or {}
        selector = (spec.get("namespaceSelector") or {}).get("matchLabels") or {}
        own = selector.get(NAMESPACE_NAME_LABEL)
        queue = Queue(name, spec.get("cohortName") or None, frozenset({own}) if isinstance(own, str) else frozenset())
        for group in _dicts(spec.get("resourceGroups")):
            for flavor in _dicts(group.get("flavors")):
                for resource in _dicts(flavor.get("resources")):
                    resource_name = str(resource.get("name"))
                    if not is_gpu_resource(resource_name, extra):
                        continue
                    where = f"ClusterQueue {name} flavor {flavor.get('name')} {resource_name}"
                    limits = {
                        key: _quantity(resource[key], CLUSTER_QUEUES_FILE, f"{where} {key}")
                        if resource.get(key) is not None
                        else None
                        for key in ("borrowingLimit", "lendingLimit")
                    }
                    key_ = (str(flavor.get("name")), resource_name)
                    queue.gpus[key_] = FlavorGpus(
                        key_[0],
                        resource_name,
                        _quantity(resource.get("nominalQuota") or "0", CLUSTER_QUEUES_FILE, f"{where} nominalQuota"),
                        limits["borrowingLimit"],
                        limits["lendingLimit"],
                    )
        # Reserved quota (admitted, or holding quota until its admission checks pass): what lending and borrowing count.
        for used in _dicts(status.get("flavorsReservation") or status.get("flavorsUsage")):
            for resource in _dicts(used.get("resources")):
                key_ = (str(used.get("name")), str(resource.get("name")))
                if key_ not in queue.gpus:
                    continue
                where = f"ClusterQueue {name} status flavor {key_[0]} {key_[1]}"
                total = _quantity(resource.get("total") or "0", CLUSTER_QUEUES_FILE, f"{where} total")
                borrowed = _quantity(resource.get("borrowed") or "0", CLUSTER_QUEUES_FILE, f"{where} borrowed")
                quota = queue.gpus[key_]
                queue.gpus[key_] = replace(quota, reserved=total, borrowed=max(borrowed, total - quota.nominal, Fraction(0)))
        queues[name] = queue
    return queues


def _condition(item: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in _dicts((item.get("status") or {}).get("conditions")):
        if condition.get("type") == kind:
            return condition
    return None


def _gpus_asked(item: Mapping[str, Any], extra: frozenset[str]) -> dict[str, Fraction]:
    """The GPUs a Workload's pod sets ask for in all (count times each pod's container requests)."""
    asked: dict[str, Fraction] = defaultdict(Fraction)
    for pod_set in _dicts((item.get("spec") or {}).get("podSets")):
        count = pod_set.get("count")
        pods = Fraction(count if isinstance(count, int) else 1)
        pod_spec = ((pod_set.get("template") or {}).get("spec")) or {}
        for container in _dicts(pod_spec.get("containers")):
            requests = (container.get("resources") or {}).get("requests") or {}
            limits = (container.get("resources") or {}).get("limits") or {}
            for name, value in {**limits, **requests}.items():
                if is_gpu_resource(str(name), extra):
                    asked[str(name)] += pods * _quantity(value, WORKLOADS_FILE, f"Workload {item['metadata']['name']} {name}")
    return dict(asked)


def judge_queueing(run: Run, snapshot: ClusterSnapshot, extra: Iterable[str] = ()) -> tuple[QueueSummary, ...]:
    """The queueing findings, and each ClusterQueue's GPUs per flavor for the report's summary."""
    ids = [finding for check in checks_of(PRACTICE) for finding in check.finding_ids]
    if snapshot.clusterqueues is None:
        run.gap(PRACTICE, ids, absent_file(snapshot, CLUSTER_QUEUES_FILE, "Kueue's queues are not checked"))
        return ()
    extra = frozenset(extra)
    queues = read_queues(snapshot.clusterqueues, extra)
    run.checked.update((BORROWED, IDLE))
    if snapshot.workloads is None:
        run.gap(PRACTICE, [PENDING], absent_file(snapshot, WORKLOADS_FILE, "waiting Workloads are not checked"))
    else:
        run.checked.add(PENDING)
        _judge_pending(run, queues, snapshot.workloads, extra)
    cohorts: dict[str, list[Queue]] = defaultdict(list)
    for queue in queues.values():
        if queue.cohort:
            cohorts[queue.cohort].append(queue)
    for queue in sorted(queues.values(), key=lambda q: q.name):
        members = [other for other in cohorts.get(queue.cohort or "", ()) if other.name != queue.name]
        _judge_borrowed(run, queue, members)
        _judge_idle(run, queue, members)
    return tuple(
        QueueSummary(
            queue.name,
            queue.cohort,
            gpus.flavor,
            gpus.resource,
            gpus.nominal,
            gpus.reserved,
            gpus.borrowed,
            gpus.lendable,
            gpus.borrowing_limit,
            gpus.lending_limit,
            len(queue.pending),
        )
        for queue in sorted(queues.values(), key=lambda q: q.name)
        for _, gpus in sorted(queue.gpus.items())
    )


def _by_namespace(queues: Mapping[str, Queue]) -> dict[str, Queue]:
    return {namespace: queue for queue in queues.values() for namespace in queue.namespaces}


def _judge_pending(run: Run, queues: Mapping[str, Queue], workloads: Sequence[Mapping[str, Any]], extra: frozenset[str]) -> None:
    of_namespace = _by_namespace(queues)
    for item in workloads:
        finished = _condition(item, FINISHED)
        reserved = _condition(item, QUOTA_RESERVED)
        if (finished and finished.get("status") == "True") or (reserved and reserved.get("status") == "True"):
            continue
        metadata = item["metadata"]
        namespace, name = str(metadata.get("namespace") or ""), str(metadata["name"])
        queue = of_namespace.get(namespace)
        if queue is not None:
            queue.pending.append(f"{namespace}/{name}")
        asked = _gpus_asked(item, extra)
        gpus = ", ".join(f"{count_shown(value)} {resource}" for resource, value in sorted(asked.items())) or "no GPU"
        local = (item.get("spec") or {}).get("queueName")
        where = f"LocalQueue {local}" if local else "no LocalQueue"
        if queue is not None:
            where += f", ClusterQueue {queue.name}"
        if reserved is None:
            why = "Kueue has not judged it yet (no QuotaReserved condition)"
        else:
            reason, message = reserved.get("reason") or "no reason", reserved.get("message") or "no message"
            why = f"QuotaReserved {reserved.get('status')}, {reason}: {message}"
        run.add(
            PENDING,
            "warn",
            f"Workload {name} ({gpus}; {where}) waits for quota: {why}",
            "Lower the job's GPUs, or make room for it: raise the team's gpuQuota or borrowingLimit, or the other "
            "teams' lendingLimit; a job larger than its cohort can ever lend never starts",
            namespace=namespace or None,
        )


def _judge_borrowed(run: Run, queue: Queue, members: Sequence[Queue]) -> None:
    for key, gpus in sorted(queue.gpus.items()):
        if gpus.borrowed <= 0:
            continue
        limit = f"borrowingLimit {count_shown(gpus.borrowing_limit)}" if gpus.borrowing_limit is not None else "no borrowingLimit"
        lenders = [
            f"{other.name} ({count_shown(other.gpus[key].lendable)})"
            for other in members
            if key in other.gpus and other.gpus[key].lendable > 0
        ]
        lent = f"lent by the idle quota of {listed_names(lenders)}" if lenders else "the cohort has no idle quota left"
        run.add(
            BORROWED,
            "warn",
            f"ClusterQueue {queue.name} (cohort {queue.cohort}) borrows {count_shown(gpus.borrowed)} {gpus.where()}: "
            f"{count_shown(gpus.reserved)} reserved of {count_shown(gpus.nominal)} nominal, {limit}; {lent}",
            "Checkpoint its long jobs: the lenders reclaim their GPUs by preempting the borrower's workloads when they "
            "submit their own; a team that borrows all the time needs a larger gpuQuota",
            namespace=next(iter(sorted(queue.namespaces)), None),
        )


def _judge_idle(run: Run, queue: Queue, members: Sequence[Queue]) -> None:
    for key, gpus in sorted(queue.gpus.items()):
        if gpus.idle <= 0:
            continue
        wanting = [
            f"{other.name} borrows {count_shown(other.gpus[key].borrowed)}"
            for other in members
            if key in other.gpus and other.gpus[key].borrowed > 0
        ] + [f"{other.name} has {len(other.pending)} Workload(s) waiting" for other in members if other.pending]
        if not wanting:
            continue
        lends = (
            "lends all of it" if gpus.lending_limit is None else f"lends at most {count_shown(gpus.lending_limit)} (lendingLimit)"
        )
        run.add(
            IDLE,
            "warn",
            f"ClusterQueue {queue.name} (cohort {queue.cohort}) leaves {count_shown(gpus.idle)} of its "
            f"{count_shown(gpus.nominal)} nominal {gpus.where()} unreserved and {lends}, while {listed_names(wanting)}",
            "Lower its gpuQuota (and raise the other team's), or raise its lendingLimit so the teams of its type may "
            "borrow what it leaves idle",
            namespace=next(iter(sorted(queue.namespaces)), None),
        )
