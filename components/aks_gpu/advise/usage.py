"""What each workload used of its GPUs through the window: GPUs held, peak and p95 memory, p95 and peak activity, read
off the exporters' series (``advise.series``). Pure.

A series belongs to the pod its labels name (the exporters label a GPU's series with the pod that holds it); a GPU that
no pod held in the whole window is idle capacity. Samples no GPU can report (the exporters' sentinels, activity outside
0-1, memory above the GPU's total) are dropped and counted; a pod with too little history (``HistoryRule``) is not
evaluated.
"""

from __future__ import annotations

import bisect
import math
import re
from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

from aks_gpu.advise.metrics import (
    EXPORTED_PREFIX,
    EXPORTER_DAEMONSETS,
    EXPORTERS,
    LABELS_ONLY,
    POD_OWNER_METRIC,
    ExporterMetrics,
)
from aks_gpu.advise.series import AdviceInputError, Series
from aks_gpu.catalog import Catalog, GpuModel
from aks_gpu.naming import Vendor

# The percentile the advice sizes for: a workload's usual busy peaks, not its one worst sample (the peak memory is
# sized for separately: memory that does not fit fails the workload, compute that does not fit only slows it).
PERCENTILE = 0.95
# A serving workload is sized on its bursts: each hour's peak activity, and the 99th percentile of those peaks (the
# second busiest hour of a week, the busiest of a day): a burst that recurs (a daily rush hour) is held, one spike in a
# week is not. The p95 of point samples is no measure of a service's bursts: a 5-minute step shows one sample in ten
# or more and a burst shorter than 5% of the window falls under it. Ours; why in docs/advise.md.
BURST_PERCENTILE = 0.99
_HOUR = 3600
# A GPU whose activity never rose above 1% in the window did no work worth a GPU (released); a sample above it is the
# workload active (its duty cycle counts them).
IDLE_ACTIVITY = 0.01


@dataclass(frozen=True)
class HistoryRule:
    """How much of a pod's history the advice needs before it resizes it: its span (first sample to last, plus one
    step) at least ``min_span`` seconds, and samples for at least ``min_share`` of that span. Ours; why in
    docs/advise.md (a day holds a service's daily peak; half the span missing could hide the peak)."""

    min_span: float = 86_400.0
    min_share: float = 0.5


HISTORY = HistoryRule()
# Read through the recording rules' daily summaries (one sample a day, each a day's peak or p95), the first day may
# cover a part of a day: two days' summaries are the least that hold a whole day.
SUMMARY_HISTORY = HistoryRule(min_span=2 * 86_400.0)
# Samples no GPU can report, dropped and counted (``WorkloadUsage.dropped``): DCGM's blank values (dcgm_structs.h in
# NVIDIA/DCGM: DCGM_INT32_BLANK 0x7ffffff0 and the 15 codes after it, DCGM_INT64_BLANK 0x7ffffffffffffff0, DCGM_FP64_BLANK
# 2**47 and the codes after it) and 2**32 - 1 (4294967295: an unsigned 32-bit field the driver could not read).
_INT32_BLANK = 0x7FFFFFF0
_FP64_BLANK = 2.0**47
_UINT32_MAX = float(2**32 - 1)
# Why a sample was dropped (the keys of droppedSamples in the JSON).
SENTINEL = "sentinel"
ACTIVITY_OUT_OF_RANGE = "activityOutside0To1"
MEMORY_ABOVE_TOTAL = "memoryAboveTotal"
MEMORY_NEGATIVE = "memoryNegative"
# The catalog's memory_gib is the size as sold (80 for an 80 GB card); read as GiB it is at or above the total the
# driver reports (81,920 MiB on an A100 80GB, 81,559 on an H100 80GB HBM3, 143,771 on an H200), so only what no GPU of
# the model holds is dropped.
_MIB_PER_GIB = 1024
# The random suffixes Kubernetes gives the pods of a ReplicaSet, Job or DaemonSet: apimachinery's rand.String alphabet
# (no vowels, no 0, 1 or 3). https://github.com/kubernetes/apimachinery/blob/master/pkg/util/rand/rand.go
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
# A ReplicaSet's pod-template-hash is SafeEncodeString of a 32-bit FNV hash written in decimal
# (kubernetes pkg/controller/controller_utils.go ComputeHash): one character a decimal digit, each digit mapped to
# alphanums[digit's byte % 27], so only 4-9, b, c, d and f, 1 to 10 of them. Fewer than 6 digits is a hash under 100,000
# (one in 43,000): a shorter segment such as `42` or `7b` ends the owner's name (a Job `eval-run-42`, `finetune-7b`).
_HASH = "[4-9bcdf]{6,10}"
_REPLICASET_POD = re.compile(rf"(?P<owner>.+)-{_HASH}-{_SAFE}{{5}}")
_GENERATED_POD = re.compile(rf"(?P<owner>.+)-{_SAFE}{{5}}")
_STATEFULSET_POD = re.compile(r"(?P<owner>.+)-\d+")
_REPLICASET = re.compile(rf"(?P<owner>.+)-{_HASH}")
# kube_pod_owner's kinds whose pods are no GPU workload: a DaemonSet's pod on a GPU series is the exporter itself (or
# another per-node agent), scraped as the target.
_AGENT_KINDS = frozenset({"DaemonSet"})


@dataclass(frozen=True)
class Window:
    start: float  # Unix seconds of the first sample
    end: float  # and of the last
    series: int

    @property
    def days(self) -> float:
        return (self.end - self.start) / 86400


@dataclass(frozen=True)
class HeldGpu:
    """One GPU (or MIG instance) a pod held, from its first sample to its last (Unix seconds): what the pool changes
    count GPUs and nodes held at the same time by."""

    host: str
    gpu: str
    first: float
    last: float
    instance: str = ""  # the MIG instance on the GPU, where it is one


@dataclass(frozen=True)
class WorkloadUsage:
    namespace: str
    pod: str
    owner: str
    owner_kind: str | None  # None where the owner was read off the pod's name
    vendor: Vendor
    model: GpuModel
    hosts: tuple[str, ...]
    gpus: int
    samples: int
    peak_memory_mib: float
    p95_memory_mib: float
    p95_activity: float  # a share of time, 0-1
    peak_activity: float
    activity_metric: str
    mig_profile: str | None  # the MIG instance it already runs on, where it does
    span: float = 0.0  # seconds from its first sample to its last, plus a step
    share: float = 1.0  # of the span with samples (0-1)
    dropped: Mapping[str, int] = field(default_factory=dict)  # samples dropped, by reason
    kind: str | None = None  # the owner's kind: kube_pod_owner's, or Deployment where the name has a pod-template-hash
    burst_activity: float = 0.0  # the BURST_PERCENTILE of its hourly activity peaks
    duty_cycle: float = 1.0  # the share of its activity samples above IDLE_ACTIVITY
    active_hours: tuple[int, ...] = ()  # the hours of the day (UTC) it was active in on at least half the days seen
    first: float = 0.0  # its first sample (Unix seconds)
    last: float = 0.0  # and its last
    unlabelled: int = 0  # samples of its GPUs that had lost their pod labels, attributed to it (per GPU)
    held: tuple[HeldGpu, ...] = ()  # each GPU it held and when
    step: float = 0.0  # the query's step: a sample stands for the step after it


@dataclass(frozen=True)
class NotEvaluated:
    what: str  # "namespace/pod" or "host GPU"
    why: str


@dataclass(frozen=True)
class IdleGpu:
    """A GPU no pod held in the whole window: idle capacity."""

    host: str
    gpu: str
    model: GpuModel


@dataclass(frozen=True)
class Usage:
    window: Window
    workloads: tuple[WorkloadUsage, ...]
    not_evaluated: tuple[NotEvaluated, ...]
    idle: tuple[IdleGpu, ...] = ()
    busy_hosts: frozenset[str] = frozenset()  # the nodes where a pod held a GPU
    # (node, GPU) -> the (namespace, pod) of every pod that held the GPU (or an instance of it), evaluated or not: a GPU
    # or node a change can free is one only the change's pods held.
    holders: Mapping[tuple[str, str], frozenset[tuple[str, str]]] = field(default_factory=dict)


@dataclass
class _Held:
    vendor: Vendor
    model: GpuModel
    gpus: set[tuple[str, str]] = field(default_factory=set)
    # Compact: a week of 1,000 GPUs is 4 million samples, 32 MiB as doubles, 128 MiB as Python floats in lists.
    memory: array[float] = field(default_factory=lambda: array("d"))
    activity: array[float] = field(default_factory=lambda: array("d"))
    activity_peaks: array[float] = field(default_factory=lambda: array("d"))
    activity_metric: str = ""
    mig_profile: str | None = None
    first: float = math.inf
    last: float = -math.inf
    step: float = 0.0
    dropped: Counter[str] = field(default_factory=Counter)
    hours: dict[int, float] = field(default_factory=dict)  # hour (Unix seconds // 3600) -> peak activity in it
    # Each GPU (or MIG instance) it held: its first and last labelled sample there.
    spans: dict[tuple[str, str, str], tuple[float, float]] = field(default_factory=dict)
    unlabelled: int = 0


@dataclass(frozen=True)
class _Unlabelled:
    """A series of a GPU without a workload's pod label (dcgm-exporter#342, #477 lose them), for attribution."""

    series: Series
    factor: float
    reading: Literal["memory", "activity", "peaks"]
    model: GpuModel


def owner_of_pod(pod: str) -> str:
    """The name of the pod's owner as Kubernetes names pods: ``llm-7d9c5b6f4-x2k9p`` -> ``llm`` (a Deployment's
    ReplicaSet), ``job-abcde`` -> ``job``, ``db-0`` -> ``db`` (a StatefulSet); the pod itself otherwise."""
    for pattern in (_REPLICASET_POD, _GENERATED_POD, _STATEFULSET_POD):
        matched = pattern.fullmatch(pod)
        if matched:
            return matched["owner"]
    return pod


def kind_of_pod(pod: str) -> str | None:
    """The owner's kind as far as the pod's name says it: a Deployment where it carries a ReplicaSet's
    pod-template-hash; None otherwise (``db-0`` is a StatefulSet's pod or a PyTorchJob's, ``job-abcde`` a Job's or a
    RayCluster's: only kube_pod_owner tells)."""
    return "Deployment" if _REPLICASET_POD.fullmatch(pod) else None


def pod_owners(series: Sequence[Series]) -> dict[tuple[str, str], tuple[str, str]]:
    """(namespace, pod) -> (owner kind, owner name) from kube-state-metrics' ``kube_pod_owner``; a ReplicaSet whose
    name carries a pod-template-hash is taken for its Deployment's."""
    owners: dict[tuple[str, str], tuple[str, str]] = {}
    for one in series:
        labels = one.labels
        namespace, pod, kind, name = (labels.get(key) for key in ("namespace", "pod", "owner_kind", "owner_name"))
        if not (namespace and pod and kind and name) or name == "<none>":
            continue
        if kind == "ReplicaSet" and (matched := _REPLICASET.fullmatch(name)):
            kind, name = "Deployment", matched["owner"]
        owners[(namespace, pod)] = (kind, name)
    return owners


def _is_agent(namespace: str, pod: str, owners: Mapping[tuple[str, str], tuple[str, str]]) -> bool:
    """Whether the pod is an exporter's (or another per-node agent's), not a workload: kube_pod_owner says a DaemonSet
    owns it, or, without kube_pod_owner, its name is a known exporter DaemonSet's."""
    kind, owner = owners.get((namespace, pod), (None, owner_of_pod(pod)))
    return kind in _AGENT_KINDS or (kind is None and owner in EXPORTER_DAEMONSETS)


def _kept(values: Sequence[float], factor: float, limit: float, above: str, below: str, dropped: Counter[str]) -> Sequence[float]:
    """The values (times ``factor``) a GPU can report, from 0 to ``limit``; the others counted in ``dropped`` by reason."""
    if not values or (min(values) >= 0 and max(values) * factor <= limit):
        return values if factor == 1.0 else [value * factor for value in values]
    kept: list[float] = []
    for value in values:
        if _INT32_BLANK <= value < _INT32_BLANK + 16 or value == _UINT32_MAX or value >= _FP64_BLANK:
            dropped[SENTINEL] += 1
        elif value < 0:
            dropped[below] += 1
        elif value * factor > limit:
            dropped[above] += 1
        else:
            kept.append(value * factor)
    return kept


def _first(labels: Mapping[str, str], keys: Sequence[str]) -> str | None:
    return next((labels[key] for key in keys if labels.get(key)), None)


def _needed(metric: str, index: int, labels: Mapping[str, str], keys: Sequence[str], what: str) -> str:
    value = _first(labels, keys)
    if value is None:
        shown = ", ".join(sorted(labels)) or "none"
        raise AdviceInputError(f"{metric}: series {index} has no {what} label ({' or '.join(keys)}); its labels: {shown}")
    return value


def percentile(ordered: Sequence[float], share: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _read_exporter(
    exporter: ExporterMetrics,
    series_by_metric: Mapping[str, Sequence[Series]],
    catalog: Catalog,
    held: dict[tuple[str, str], _Held],
    unheld: dict[tuple[str, str], GpuModel],
    owners: Mapping[tuple[str, str], tuple[str, str]],
    unlabelled: dict[tuple[str, str, str], list[_Unlabelled]],
) -> None:
    memory = series_by_metric.get(exporter.memory_used) or []
    activity_name, scale = next(((name, factor) for name, factor in exporter.activity if series_by_metric.get(name)), (None, 1.0))
    if not memory and activity_name is None:
        return
    if not memory or activity_name is None:
        missing = exporter.memory_used if not memory else " or ".join(name for name, _ in exporter.activity)
        raise AdviceInputError(f"no {missing} series: the advice needs memory and activity of the same GPUs")
    memory_name = exporter.memory_used
    readings: list[tuple[str, Sequence[Series], float]] = [
        (memory_name, memory, 1.0),
        (activity_name, series_by_metric[activity_name], scale),
    ]
    peak_name = dict(exporter.activity_peaks).get(activity_name)
    if peak_name and series_by_metric.get(peak_name):
        readings.append((peak_name, series_by_metric[peak_name], scale))
    models: dict[str, GpuModel] = {}
    for metric, all_series, factor in readings:
        exported = any(EXPORTED_PREFIX + "pod" in one.labels for one in all_series)
        prefix = EXPORTED_PREFIX if exported else ""
        for index, one in enumerate(all_series):
            labels = one.labels
            product = _needed(metric, index, labels, exporter.model_labels, "GPU model")
            host = _needed(metric, index, labels, exporter.host_labels, "node")
            gpu = _needed(metric, index, labels, exporter.gpu_labels, "GPU")
            model = models.get(product)
            if model is None:
                model = catalog.model_named(product)
                if model is None:
                    raise AdviceInputError(
                        f"{metric}: GPU model {product!r} (on {host}) is not in the catalog's tables "
                        "(components/aks_gpu/data/gpu_catalog.yaml, product_names)"
                    )
                models[product] = model
            namespace, pod = labels.get(prefix + "namespace"), labels.get(prefix + "pod")
            where = (host, gpu, _first(labels, exporter.instance_labels) or "")
            reading: Literal["memory", "activity", "peaks"] = (
                "memory" if metric == memory_name else "activity" if metric == activity_name else "peaks"
            )
            if not (namespace and pod) or _is_agent(namespace, pod, owners):
                unheld.setdefault((host, gpu), model)
                if one.values:
                    unlabelled.setdefault(where, []).append(_Unlabelled(one, factor, reading, model))
                continue
            entry = held.get((namespace, pod))
            if entry is None:
                entry = held[(namespace, pod)] = _Held(vendor=exporter.vendor, model=model)
            entry.gpus.add((host, gpu))
            if one.values:
                entry.first, entry.last = min(entry.first, one.start), max(entry.last, one.end)
                first, last = entry.spans.get(where, (one.start, one.end))
                entry.spans[where] = (min(first, one.start), max(last, one.end))
            if one.step and (not entry.step or one.step < entry.step):
                entry.step = one.step
            if metric == memory_name:
                limit = model.memory_gib * _MIB_PER_GIB
                entry.memory.extend(_kept(one.values, 1.0, limit, MEMORY_ABOVE_TOTAL, MEMORY_NEGATIVE, entry.dropped))
            else:
                kept = _kept(one.values, factor, 1.0, ACTIVITY_OUT_OF_RANGE, ACTIVITY_OUT_OF_RANGE, entry.dropped)
                if metric == activity_name:
                    entry.activity.extend(kept)
                    entry.activity_metric = metric
                    _hourly_peaks(one, factor, entry.hours)
                else:
                    entry.activity_peaks.extend(kept)
            profile = _first(labels, exporter.mig_labels)
            if profile:
                entry.mig_profile = profile


def _hourly_peaks(one: Series, factor: float, hours: dict[int, float]) -> None:
    """Each hour's peak activity (a share of time) of the series into ``hours`` (the peak over the pod's GPUs); values
    no GPU can report left out. One slice of a run of samples an hour (a day's summary: one sample, its own hour)."""
    if not one.step or not one.values:
        return
    offset = 0
    for first, count in one.runs or ((one.start, len(one.values)),):
        run = one.values[offset : offset + count]
        offset += count
        # The run's hour boundaries: the first hour's samples, then one hour's (or one sample's) each.
        lead = min(count, max(1, math.ceil(((first // _HOUR + 1) * _HOUR - first) / one.step)))
        per = max(1, round(_HOUR / one.step))
        bounds = [0, *range(lead, count, per), count]
        if min(run) >= 0 and max(run) * factor <= 1.0:
            peaks = [max(run[start:end]) * factor for start, end in pairwise(bounds)]
        else:
            peaks = [
                max((value * factor for value in run[start:end] if 0 <= value * factor <= 1.0), default=-1.0)
                for start, end in pairwise(bounds)
            ]
        for start, peak in zip(bounds, peaks, strict=False):
            hour = int((first + start * one.step) // _HOUR)
            if peak > hours.get(hour, -1.0):
                hours[hour] = peak


def _active_hours(hours: Mapping[int, float]) -> tuple[int, ...]:
    """The hours of the day (UTC) whose peak was above IDLE_ACTIVITY on at least half the days they were seen."""
    seen, active = [0] * 24, [0] * 24
    for hour, peak in hours.items():
        seen[hour % 24] += 1
        if peak > IDLE_ACTIVITY:
            active[hour % 24] += 1
    return tuple(hour for hour in range(24) if active[hour] and 2 * active[hour] >= seen[hour])


def active_hours_text(hours: Sequence[int]) -> str:
    """``(9, 10, 11, 14)`` -> ``09-12, 14-15 UTC``: the active hours as ranges of the day."""
    ranges: list[list[int]] = []
    for hour in hours:
        if ranges and ranges[-1][1] == hour:
            ranges[-1][1] = hour + 1
        else:
            ranges.append([hour, hour + 1])
    return ", ".join(f"{start:02d}-{end:02d}" for start, end in ranges) + " UTC" if ranges else "no hour of the day"


def read_usage(
    series_by_metric: Mapping[str, Sequence[Series]],
    catalog: Catalog,
    exporters: Sequence[ExporterMetrics] = EXPORTERS,
    history: HistoryRule = HISTORY,
) -> Usage:
    """Each workload's use of its GPUs through the window; ``AdviceInputError`` on input the advice cannot use (a
    series without the labels it needs, a GPU model the catalog does not know, an empty window, no series of a
    workload's pod). ``exporters``: the raw series (``EXPORTERS``), or their recorded daily summaries
    (``ExporterMetrics.summarised``, read with ``SUMMARY_HISTORY``)."""
    all_series = [one for name, series in series_by_metric.items() if name not in LABELS_ONLY for one in series]
    sampled = [one for one in all_series if one.values]
    if not sampled:
        names = ", ".join(sorted(series_by_metric)) or "none"
        raise AdviceInputError(f"the window is empty: no samples in any series (metrics read: {names})")
    window = Window(start=min(one.start for one in sampled), end=max(one.end for one in sampled), series=len(all_series))
    window_step = min((one.step for one in sampled if one.step), default=0.0)
    owners = pod_owners(series_by_metric.get(POD_OWNER_METRIC) or [])
    held: dict[tuple[str, str], _Held] = {}
    unheld: dict[tuple[str, str], GpuModel] = {}
    unlabelled: dict[tuple[str, str, str], list[_Unlabelled]] = {}
    for exporter in exporters:
        _read_exporter(exporter, series_by_metric, catalog, held, unheld, owners, unlabelled)
    if not held:
        raise AdviceInputError(
            "no series carries a workload's pod label (namespace and pod, or exported_namespace and exported_pod): "
            "the exporter did not map GPUs to pods (its Kubernetes mode and the kubelet's pod-resources socket), or no "
            "pod held a GPU; the pod labels there name the exporter itself, not a workload"
        )
    workloads: list[WorkloadUsage] = []
    not_evaluated: list[NotEvaluated] = _attribute(unlabelled, held)
    held_gpus = {gpu for entry in held.values() for gpu in entry.gpus}
    idle = tuple(IdleGpu(host, gpu, model) for (host, gpu), model in sorted(unheld.items()) if (host, gpu) not in held_gpus)
    for (namespace, pod), entry in sorted(held.items()):
        name = f"{namespace}/{pod}"
        samples = min(len(entry.memory), len(entry.activity)) // max(1, len(entry.gpus))
        step = entry.step or window_step
        span = entry.last - entry.first + step if samples else 0.0
        share = min(1.0, samples * step / span) if span and step else 1.0
        if span < history.min_span or share < history.min_share or not samples:
            not_evaluated.append(NotEvaluated(name, _too_little(span, share, samples, history)))
            continue
        memory, activity = sorted(entry.memory), sorted(entry.activity)
        kind, owner = owners.get((namespace, pod), (None, owner_of_pod(pod)))
        peaks = sorted([*entry.hours.values(), *entry.activity_peaks]) or activity
        workloads.append(
            WorkloadUsage(
                namespace=namespace,
                pod=pod,
                owner=owner,
                owner_kind=kind,
                vendor=entry.vendor,
                model=entry.model,
                hosts=tuple(sorted({host for host, _ in entry.gpus})),
                gpus=len(entry.gpus),
                samples=samples,
                peak_memory_mib=memory[-1],
                p95_memory_mib=percentile(memory, PERCENTILE),
                p95_activity=percentile(activity, PERCENTILE),
                peak_activity=max(activity[-1], *entry.activity_peaks) if entry.activity_peaks else activity[-1],
                activity_metric=entry.activity_metric,
                mig_profile=entry.mig_profile,
                span=span,
                share=share,
                dropped=dict(sorted(entry.dropped.items())),
                kind=kind or kind_of_pod(pod),
                burst_activity=percentile(peaks, BURST_PERCENTILE),
                duty_cycle=(len(activity) - bisect.bisect_right(activity, IDLE_ACTIVITY)) / len(activity) if activity else 0.0,
                active_hours=_active_hours(entry.hours),
                first=entry.first,
                last=entry.last,
                unlabelled=entry.unlabelled // max(1, len(entry.gpus)),
                held=tuple(HeldGpu(*where[:2], first, last, where[2]) for where, (first, last) in sorted(entry.spans.items())),
                step=step,
            )
        )
    return Usage(
        window=window,
        workloads=tuple(workloads),
        not_evaluated=tuple(not_evaluated),
        idle=idle,
        busy_hosts=frozenset(host for host, _ in held_gpus),
        holders=_holders(held),
    )


def _attribute(
    unlabelled: Mapping[tuple[str, str, str], Sequence[_Unlabelled]], held: Mapping[tuple[str, str], _Held]
) -> list[NotEvaluated]:
    """Attribute the samples of a GPU that lost their pod labels to the pod that held the GPU then: the one pod whose
    labelled samples of that GPU (that MIG instance) come before and after them (a pod holds the GPUs it was given
    from its start to its end). Busy samples of a GPU no pod held then, as far as the labels show, are refused and
    counted (listed as not evaluated); idle ones are the GPU idle between pods."""
    holders: dict[tuple[str, str, str], list[tuple[float, float, _Held]]] = {}
    for entry in held.values():
        for where, (first, last) in entry.spans.items():
            holders.setdefault(where, []).append((first, last, entry))
    refused: list[NotEvaluated] = []
    for where, found in sorted(unlabelled.items()):
        spans = holders.get(where, [])
        if not spans:
            continue  # a GPU no pod held: idle capacity
        busy = 0
        for one in found:
            taken: dict[int, tuple[_Held, list[float], list[float]]] = {}
            for time, value in zip(one.series.times(), one.series.values, strict=False):
                owners = [entry for first, last, entry in spans if first <= time <= last]
                if len(owners) == 1:
                    _, times, values = taken.setdefault(id(owners[0]), (owners[0], [], []))
                    times.append(time)
                    values.append(value)
                elif one.reading == "activity" and IDLE_ACTIVITY < value * one.factor <= 1.0:
                    busy += 1
            for entry, times, values in taken.values():
                _add(entry, one, times, values)
        if busy:
            host, gpu, instance = where
            refused.append(
                NotEvaluated(
                    f"{host} {gpu}" + (f" instance {instance}" if instance else ""),
                    f"{busy} busy sample(s) without a pod label while no pod held it as far as the labels show "
                    "(the exporter lost them: dcgm-exporter#342, #477): not attributed to any workload",
                )
            )
    return refused


def _add(entry: _Held, one: _Unlabelled, times: Sequence[float], values: Sequence[float]) -> None:
    """Samples of ``entry``'s GPU that had lost their labels, read as its own."""
    if one.reading == "memory":
        limit = one.model.memory_gib * _MIB_PER_GIB
        entry.memory.extend(_kept(values, 1.0, limit, MEMORY_ABOVE_TOTAL, MEMORY_NEGATIVE, entry.dropped))
        return
    kept = _kept(values, one.factor, 1.0, ACTIVITY_OUT_OF_RANGE, ACTIVITY_OUT_OF_RANGE, entry.dropped)
    if one.reading == "peaks":
        entry.activity_peaks.extend(kept)
        return
    entry.activity.extend(kept)
    entry.unlabelled += len(values)
    for time, value in zip(times, values, strict=True):
        share = value * one.factor
        hour = int(time // _HOUR)
        if 0 <= share <= 1.0 and share > entry.hours.get(hour, -1.0):
            entry.hours[hour] = share


def _holders(held: Mapping[tuple[str, str], _Held]) -> dict[tuple[str, str], frozenset[tuple[str, str]]]:
    found: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for pod, entry in held.items():
        for gpu in entry.gpus:
            found.setdefault(gpu, set()).add(pod)
    return {gpu: frozenset(pods) for gpu, pods in found.items()}


def hours_text(seconds: float) -> str:
    """A span as a person reads it: ``1 h 40 min``, ``3 d 4 h``."""
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 24 * 60:
        return f"{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")
    hours = round(seconds / 3600)
    return f"{hours // 24} d" + (f" {hours % 24} h" if hours % 24 else "")


def _too_little(span: float, share: float, samples: int, history: HistoryRule) -> str:
    if not samples:
        return "no sample of memory and activity a GPU can report (all dropped)"
    if span < history.min_span:
        return (
            f"too little history: {hours_text(span)} observed ({samples} samples); "
            f"the advice needs {hours_text(history.min_span)}"
        )
    return (
        f"too little history: samples for {share:.0%} of the {hours_text(span)} observed; "
        f"the advice needs {history.min_share:.0%}"
    )
