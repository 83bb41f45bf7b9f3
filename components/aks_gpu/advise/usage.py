"""What each workload used of its GPUs through the window: GPUs held, peak and p95 memory, p95 and peak activity, read
off the exporters' series (``advise.series``). Pure.

A series belongs to the pod its labels name (the exporters label a GPU's series with the pod that holds it); a GPU that
no pod held in the whole window is listed as not evaluated (the audit names idle nodes and their cost).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aks_gpu.advise.metrics import EXPORTED_PREFIX, EXPORTERS, POD_OWNER_METRIC, ExporterMetrics
from aks_gpu.advise.series import AdviceInputError, Series
from aks_gpu.catalog import Catalog, GpuModel
from aks_gpu.naming import Vendor

# The percentile the advice sizes for: a workload's usual busy peaks, not its one worst sample (the peak memory is
# sized for separately: memory that does not fit fails the workload, compute that does not fit only slows it).
PERCENTILE = 0.95
# Fewer samples than this (an hour at the exporters' usual 5-minute step) say too little about a workload to advise.
MIN_SAMPLES = 12
# The random suffixes Kubernetes gives the pods of a ReplicaSet, Job or DaemonSet, and a ReplicaSet's
# pod-template-hash: apimachinery's rand.String / SafeEncodeString alphabet (no vowels, no 0, 1 or 3).
# https://github.com/kubernetes/apimachinery/blob/master/pkg/util/rand/rand.go
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
_REPLICASET_POD = re.compile(rf"(?P<owner>.+)-{_SAFE}{{1,10}}-{_SAFE}{{5}}")
_GENERATED_POD = re.compile(rf"(?P<owner>.+)-{_SAFE}{{5}}")
_STATEFULSET_POD = re.compile(r"(?P<owner>.+)-\d+")
_REPLICASET = re.compile(rf"(?P<owner>.+)-{_SAFE}{{1,10}}")


@dataclass(frozen=True)
class Window:
    start: float  # Unix seconds of the first sample
    end: float  # and of the last
    series: int

    @property
    def days(self) -> float:
        return (self.end - self.start) / 86400


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


@dataclass(frozen=True)
class NotEvaluated:
    what: str  # "namespace/pod" or "host GPU"
    why: str


@dataclass(frozen=True)
class Usage:
    window: Window
    workloads: tuple[WorkloadUsage, ...]
    not_evaluated: tuple[NotEvaluated, ...]


@dataclass
class _Held:
    vendor: Vendor
    model: GpuModel
    gpus: set[tuple[str, str]] = field(default_factory=set)
    memory: list[float] = field(default_factory=list)
    activity: list[float] = field(default_factory=list)
    activity_peaks: list[float] = field(default_factory=list)
    activity_metric: str = ""
    mig_profile: str | None = None


def owner_of_pod(pod: str) -> str:
    """The name of the pod's owner as Kubernetes names pods: ``llm-7d9c5b6f4-x2k9p`` -> ``llm`` (a Deployment's
    ReplicaSet), ``job-abcde`` -> ``job``, ``db-0`` -> ``db`` (a StatefulSet); the pod itself otherwise."""
    for pattern in (_REPLICASET_POD, _GENERATED_POD, _STATEFULSET_POD):
        matched = pattern.fullmatch(pod)
        if matched:
            return matched["owner"]
    return pod


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
    unheld: dict[tuple[str, str], str],
) -> None:
    memory = series_by_metric.get(exporter.memory_used) or []
    activity_name, scale = next(((name, factor) for name, factor in exporter.activity if series_by_metric.get(name)), (None, 1.0))
    if not memory and activity_name is None:
        return
    if not memory or activity_name is None:
        missing = exporter.memory_used if not memory else " or ".join(name for name, _ in exporter.activity)
        raise AdviceInputError(f"no {missing} series: the advice needs memory and activity of the same GPUs")
    readings: list[tuple[str, Sequence[Series], float]] = [
        (exporter.memory_used, memory, 1.0),
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
            if not (namespace and pod):
                unheld.setdefault((host, gpu), model.key)
                continue
            entry = held.get((namespace, pod))
            if entry is None:
                entry = held[(namespace, pod)] = _Held(vendor=exporter.vendor, model=model)
            entry.gpus.add((host, gpu))
            if metric == activity_name:
                entry.activity.extend(value * factor for value in one.values)
                entry.activity_metric = metric
            elif metric == peak_name:
                entry.activity_peaks.extend(value * factor for value in one.values)
            else:
                entry.memory.extend(one.values)
            profile = _first(labels, exporter.mig_labels)
            if profile:
                entry.mig_profile = profile


def read_usage(
    series_by_metric: Mapping[str, Sequence[Series]],
    catalog: Catalog,
    exporters: Sequence[ExporterMetrics] = EXPORTERS,
    min_samples: int = MIN_SAMPLES,
) -> Usage:
    """Each workload's use of its GPUs through the window; ``AdviceInputError`` on input the advice cannot use (a
    series without the labels it needs, a GPU model the catalog does not know, an empty window). ``exporters``: the
    raw series (``EXPORTERS``), or their recorded daily summaries (``ExporterMetrics.summarised``), which give one
    sample a day and so need fewer (``min_samples``)."""
    all_series = [one for name, series in series_by_metric.items() if name != POD_OWNER_METRIC for one in series]
    sampled = [one for one in all_series if one.values]
    if not sampled:
        names = ", ".join(sorted(series_by_metric)) or "none"
        raise AdviceInputError(f"the window is empty: no samples in any series (metrics read: {names})")
    window = Window(start=min(one.start for one in sampled), end=max(one.end for one in sampled), series=len(all_series))
    held: dict[tuple[str, str], _Held] = {}
    unheld: dict[tuple[str, str], str] = {}
    for exporter in exporters:
        _read_exporter(exporter, series_by_metric, catalog, held, unheld)
    owners = pod_owners(series_by_metric.get(POD_OWNER_METRIC) or [])
    workloads: list[WorkloadUsage] = []
    not_evaluated: list[NotEvaluated] = []
    held_gpus = {gpu for entry in held.values() for gpu in entry.gpus}
    for (host, gpu), model_key in sorted(unheld.items()):
        if (host, gpu) not in held_gpus:
            not_evaluated.append(NotEvaluated(f"{host} GPU {gpu}", f"{model_key}: no pod held it in the window"))
    for (namespace, pod), entry in sorted(held.items()):
        name = f"{namespace}/{pod}"
        if len(entry.memory) < min_samples or len(entry.activity) < min_samples:
            count = min(len(entry.memory), len(entry.activity))
            not_evaluated.append(NotEvaluated(name, f"{count} samples of memory or activity; the advice needs {min_samples}"))
            continue
        memory, activity = sorted(entry.memory), sorted(entry.activity)
        kind, owner = owners.get((namespace, pod), (None, owner_of_pod(pod)))
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
                samples=min(len(memory), len(activity)),
                peak_memory_mib=memory[-1],
                p95_memory_mib=percentile(memory, PERCENTILE),
                p95_activity=percentile(activity, PERCENTILE),
                peak_activity=max(activity[-1], *entry.activity_peaks) if entry.activity_peaks else activity[-1],
                activity_metric=entry.activity_metric,
                mig_profile=entry.mig_profile,
            )
        )
    return Usage(window=window, workloads=tuple(workloads), not_evaluated=tuple(not_evaluated))
