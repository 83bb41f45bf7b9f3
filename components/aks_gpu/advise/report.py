"""The advice as machines read it (``aksgpu advise --json``; the audit's HTML takes the same rows). Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aks_gpu.advise.queues import QueueAdvice
from aks_gpu.advise.recommend import Advice, IdleCapacity, PoolChange, Recommendation, idle_capacity_text, pool_change_text


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, tz=UTC).isoformat().replace("+00:00", "Z")


def recommendation_row(one: Recommendation) -> dict[str, Any]:
    usage = one.usage
    return {
        "namespace": usage.namespace,
        "owner": usage.owner,
        "pod": usage.pod,
        "gpuModel": usage.model.key,
        "gpus": usage.gpus,
        "peakMemoryMiB": round(usage.peak_memory_mib),
        "p95MemoryMiB": round(usage.p95_memory_mib),
        "p95Activity": round(usage.p95_activity, 4),
        "recommend": one.recommend,
        "profile": one.profile,
        "monthlySaving": one.monthly_saving,
        "why": one.why,
        # Beyond the contract's keys: where the owner came from, the pool, the nodes and the activity metric read.
        "ownerKind": usage.owner_kind,
        "pool": one.pool,
        "nodes": list(usage.hosts),
        "activityMetric": usage.activity_metric,
        # Issue 42: how much history the advice read (samples a GPU, seconds from the first to the last, the share of
        # that span with samples) and the samples no GPU can report, dropped, by reason.
        "coverage": {"samples": usage.samples, "span": round(usage.span), "share": round(usage.share, 3)},
        "droppedSamples": dict(usage.dropped),
        # The owner's kind (kube_pod_owner's, or Deployment where the pod's name has a pod-template-hash; null where
        # neither says), how it was sized, its bursts (the 99th percentile of its hourly activity peaks), its duty
        # cycle (the share of its samples active) and the hours of the day (UTC) it was active.
        "kind": usage.kind,
        "sizedAs": one.sized_as,
        "burstActivity": round(usage.burst_activity, 4),
        "dutyCycle": round(usage.duty_cycle, 3),
        "activeHours": list(usage.active_hours),
        # Samples of its GPUs that had lost their pod labels (dcgm-exporter#342, #477), attributed to it.
        "unlabelledSamples": usage.unlabelled,
    }


def pool_change_row(change: PoolChange) -> dict[str, Any]:
    return {
        "pool": change.pool,
        "gpuModel": change.gpu_model,
        "recommend": change.recommend,
        "profile": change.profile,
        "migProfile": change.mig_value,
        "perGpu": change.per_gpu,
        "workloads": change.workloads,
        "gpusNow": change.gpus_now,
        "gpusAfter": change.gpus_after,
        "gpusFreed": change.gpus_freed,
        "nodesFreed": change.nodes_freed,
        "monthlySaving": change.monthly_saving,
        "priced": change.unpriced or True,
        "change": pool_change_text(change),
    }


def idle_capacity_row(idle: IdleCapacity) -> dict[str, Any]:
    return {
        "pool": idle.pool,
        "gpuModel": idle.gpu_model,
        "gpus": idle.gpus,
        "nodes": idle.nodes,
        "nodesSeen": idle.nodes_seen,
        "minCount": idle.min_count,
        "minCountAfter": idle.min_count_after,
        "nodesFreed": idle.nodes,
        "monthlySaving": idle.monthly_saving,
        "priced": idle.unpriced or True,
        "change": idle_capacity_text(idle),
    }


def queue_advice_row(one: QueueAdvice) -> dict[str, Any]:
    return {
        "namespace": one.namespace,
        "workloadType": one.workload_type,
        "flavor": one.flavor,
        "resource": one.resource,
        "nominalGpus": one.nominal,
        "peakUsedGpus": one.peak_used,
        "idleGpus": one.idle,
        "borrowers": [{"namespace": b.namespace, "peakBorrowedGpus": b.peak_borrowed} for b in one.borrowers],
        "gpuQuota": one.gpu_quota,
        "lendingLimit": one.lending_limit,
        "suggestedGpuQuota": one.suggested_gpu_quota,
        "suggestedLendingLimit": one.suggested_lending_limit,
        "why": one.text(),
    }


def advice_document(advice: Advice, currency: str) -> dict[str, Any]:
    window = advice.usage.window
    return {
        "recommendations": [recommendation_row(one) for one in advice.recommendations],
        "window": {
            "start": _iso(window.start),
            "end": _iso(window.end),
            "days": round(window.days, 2),
            "series": window.series,
        },
        "notEvaluated": [{"what": one.what, "why": one.why} for one in advice.usage.not_evaluated],
        "poolChanges": [pool_change_row(change) for change in advice.pool_changes],
        "idleCapacity": [idle_capacity_row(idle) for idle in advice.idle_capacity],
        "queueAdvice": [queue_advice_row(one) for one in advice.queues],
        # Why a saving is null: each VM size and region the price table lacks, or the node whose size is not known.
        "unpriced": sorted(
            {change.unpriced for change in advice.pool_changes if change.unpriced}
            | {idle.unpriced for idle in advice.idle_capacity if idle.unpriced}
        ),
        "currency": currency,
    }
