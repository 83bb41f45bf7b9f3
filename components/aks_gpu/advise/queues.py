"""Queue advice: a team (a workload namespace's Kueue ClusterQueue) whose nominal GPUs stayed partly unused through the
whole window while another team of its workload type (its cohort) borrowed above its own nominal quota. The idle
part is quota the team does not need: lower its ``gpuQuota`` by it (and give it to the borrower), or, where its
``lendingLimit`` holds it back, raise the limit so the others may borrow it. Pure.

Read from Kueue's gauges (``metrics.KUEUE_METRICS``: per ClusterQueue, flavor and resource, its usage by admitted
workloads and its nominal quota) and the stack's workloads (``Team``): each ClusterQueue is its namespace, each cohort
its workload type (``naming.cluster_queue_name``, ``naming.cohort_name``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aks_gpu.advise.metrics import KUEUE_NOMINAL_METRIC, KUEUE_USAGE_METRIC
from aks_gpu.advise.series import Series
from aks_gpu.cluster.inventory import is_gpu_resource
from aks_gpu.naming import cluster_queue_name

# The gauges' labels (pkg/metrics/metrics.go at v0.17.0).
QUEUE_LABEL, FLAVOR_LABEL, RESOURCE_LABEL = "cluster_queue", "flavor", "resource"


@dataclass(frozen=True)
class Team:
    """A workload of the stack, as the advice needs it: its namespace, type and queue settings."""

    namespace: str
    type: str
    gpu_quota: int
    lending_limit: int | None


@dataclass(frozen=True)
class Borrower:
    namespace: str
    peak_borrowed: float  # the most GPUs it used above its nominal quota at one time


@dataclass(frozen=True)
class QueueAdvice:
    namespace: str
    workload_type: str
    flavor: str
    resource: str
    nominal: float  # the flavor's nominal GPUs (the ClusterQueue's, as Kueue reports it)
    peak_used: float  # the most it used at one time through the window
    borrowers: tuple[Borrower, ...]
    gpu_quota: int
    lending_limit: int | None
    suggested_gpu_quota: int
    suggested_lending_limit: int | None  # None: its lendingLimit does not hold the idle GPUs back

    @property
    def idle(self) -> int:
        """The nominal GPUs it never used, whole."""
        return math.floor(self.nominal - self.peak_used)

    def text(self) -> str:
        borrowed = ", ".join(f"{b.namespace} borrowed up to {_count(b.peak_borrowed)}" for b in self.borrowers)
        lend = (
            f"; or raise its lendingLimit from {self.lending_limit} to {self.suggested_lending_limit} so they may borrow them"
            if self.suggested_lending_limit is not None
            else ""
        )
        return (
            f"{self.namespace} used at most {_count(self.peak_used)} of its {_count(self.nominal)} nominal {self.resource} "
            f"on flavor {self.flavor} through the window while {borrowed} (cohort {self.workload_type}): lower its gpuQuota "
            f"from {self.gpu_quota} to {self.suggested_gpu_quota} and give the borrower the rest{lend}"
        )


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _key(one: Series) -> tuple[str, str, str] | None:
    labels = one.labels
    queue, flavor, resource = labels.get(QUEUE_LABEL), labels.get(FLAVOR_LABEL), labels.get(RESOURCE_LABEL)
    if not queue or not flavor or not resource or not is_gpu_resource(resource):
        return None
    return queue, flavor, resource


def _peaks(series: Sequence[Series]) -> dict[tuple[str, str, str], float]:
    peaks: dict[tuple[str, str, str], float] = defaultdict(float)
    for one in series:
        key = _key(one)
        if key is not None and one.values:
            peaks[key] = max(peaks[key], max(one.values))
    return dict(peaks)


def _borrowed_peaks(usage: Sequence[Series], nominal: Mapping[tuple[str, str, str], float]) -> dict[tuple[str, str, str], float]:
    """The most each queue used above its nominal quota at one time."""
    borrowed: dict[tuple[str, str, str], float] = defaultdict(float)
    for one in usage:
        key = _key(one)
        if key is None or key not in nominal or not one.values:
            continue
        borrowed[key] = max(borrowed[key], max(one.values) - nominal[key])
    return {key: value for key, value in borrowed.items() if value > 0}


def queue_advice(series: Mapping[str, Sequence[Series]], teams: Sequence[Team]) -> tuple[QueueAdvice, ...]:
    """Each team of the stack whose nominal GPUs on a flavor idled through the window while another team of its type
    borrowed on that flavor. Queues the stack does not make (another namespace's) are not advised on."""
    usage = list(series.get(KUEUE_USAGE_METRIC) or ())
    # The nominal quota as Kueue reported it last (a stack change within the window: what holds now).
    nominal: dict[tuple[str, str, str], float] = {}
    for one in sorted(series.get(KUEUE_NOMINAL_METRIC) or (), key=lambda s: s.end):
        key = _key(one)
        if key is not None and one.values:
            nominal[key] = one.values[-1]
    used = _peaks(usage)
    seen = {key for one in usage if (key := _key(one)) is not None and one.values}
    borrowed = _borrowed_peaks(usage, nominal)
    by_queue = {cluster_queue_name(team.namespace): team for team in teams}
    advice: list[QueueAdvice] = []
    for key, quota in sorted(nominal.items()):
        queue, flavor, resource = key
        team = by_queue.get(queue)
        # Only a queue whose usage was reported through the window is judged: no series is no evidence of idling.
        if team is None or key not in seen or quota - used.get(key, 0.0) < 1:
            continue
        borrowers = tuple(
            Borrower(other.namespace, borrowed[(cluster_queue_name(other.namespace), flavor, resource)])
            for other in teams
            if other.type == team.type
            and other.namespace != team.namespace
            and (cluster_queue_name(other.namespace), flavor, resource) in borrowed
        )
        if not borrowers:
            continue
        idle = math.floor(quota - used.get(key, 0.0))
        held_back = team.lending_limit is not None and team.lending_limit < idle
        advice.append(
            QueueAdvice(
                namespace=team.namespace,
                workload_type=team.type,
                flavor=flavor,
                resource=resource,
                nominal=quota,
                peak_used=used.get(key, 0.0),
                borrowers=borrowers,
                gpu_quota=team.gpu_quota,
                lending_limit=team.lending_limit,
                suggested_gpu_quota=max(team.gpu_quota - idle, 0),
                suggested_lending_limit=idle if held_back else None,
            )
        )
    return tuple(advice)
