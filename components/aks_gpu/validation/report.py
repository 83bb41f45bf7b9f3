"""Check results as the JSON ``aksgpu validate --json`` prints, and the counts a summary needs. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from aks_gpu.validation.checks import CheckResult, Status

STATUSES: tuple[Status, ...] = ("pass", "fail", "warn")


def passed(results: Sequence[CheckResult]) -> bool:
    """True when no check failed; warnings do not fail a validation."""
    return not any(result.status == "fail" for result in results)


def report_dict(results: Sequence[CheckResult]) -> dict[str, Any]:
    """``{"passed": bool, "checks": [{"id", "pool", "node", "status", "message"}, ...]}``, results in order."""
    return {
        "passed": passed(results),
        "checks": [
            {"id": result.id, "pool": result.pool, "node": result.node, "status": result.status, "message": result.message}
            for result in results
        ],
    }


def counts_by_pool(results: Sequence[CheckResult]) -> dict[str, dict[Status, int]]:
    """Per pool (in the order pools first appear), how many results have each status."""
    tallies: dict[str, Counter[Status]] = {}
    for result in results:
        tallies.setdefault(result.pool, Counter())[result.status] += 1
    return {pool: {status: tally[status] for status in STATUSES} for pool, tally in tallies.items()}
