"""The advice as machines read it (``aksgpu advise --json``; the audit's HTML takes the same rows). Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aks_gpu.advise.recommend import Advice, PoolChange, Recommendation, pool_change_text


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
        "nodesFreed": change.nodes_freed,
        "monthlySaving": change.monthly_saving,
        "change": pool_change_text(change),
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
        "currency": currency,
    }
