"""Reading a Prometheus ``query_range`` response (the HTTP API's JSON, as ``curl .../api/v1/query_range`` writes it) into
series: labels and sample values. Pure: bytes in, series out; ``AdviceInputError`` says what is wrong, naming the metric.

The response format: https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries
(``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[t, "v"], ...]}]}}``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

# How many of a series' first samples show its step.
_STEP_SAMPLES = 16


class AdviceInputError(ValueError):
    """Input the advice cannot be computed from; the message says which metric, series or label."""


@dataclass(frozen=True)
class Series:
    """One time series of a metric: its labels, the first and last sample time (Unix seconds), the sample values in
    time order (NaN and infinite samples left out), and the query's step as the first samples show it (0: unknown)."""

    labels: Mapping[str, str]
    start: float
    end: float
    values: tuple[float, ...]
    step: float = 0.0


def parse_query_range(metric: str, data: bytes | str) -> list[Series]:
    """The series of one ``query_range`` response for ``metric``; ``AdviceInputError`` when it is not one."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise AdviceInputError(f"{metric}: not a Prometheus query_range response: not JSON ({error})") from None
    if not isinstance(document, dict):
        raise AdviceInputError(f"{metric}: not a Prometheus query_range response: the top level is not an object")
    if document.get("status") != "success":
        said = document.get("error") or document.get("status")
        raise AdviceInputError(f"{metric}: the query did not succeed (status {said!r})")
    body = document.get("data")
    if not isinstance(body, dict) or body.get("resultType") != "matrix" or not isinstance(body.get("result"), list):
        kind = body.get("resultType") if isinstance(body, dict) else None
        raise AdviceInputError(
            f"{metric}: not a range query's result (resultType {kind!r}, expected 'matrix': use /api/v1/query_range)"
        )
    return [_series(metric, index, entry) for index, entry in enumerate(body["result"])]


def _series(metric: str, index: int, entry: Any) -> Series:
    if not isinstance(entry, dict) or not isinstance(entry.get("metric"), dict) or not isinstance(entry.get("values"), list):
        raise AdviceInputError(f"{metric}: series {index} has no 'metric' labels and 'values' list")
    labels = {str(key): str(value) for key, value in entry["metric"].items()}
    samples = entry["values"]
    try:
        # Whole lists at a time (a week of 1,000 GPUs is 2 million samples a metric): the values as Prometheus writes
        # them, strings, then floats; NaN and the infinities ("NaN", "+Inf", "-Inf") left out where the sum shows any.
        values = list(map(float, [sample[1] for sample in samples]))
        if not math.isfinite(sum(values)):
            values = [value for value in values if math.isfinite(value)]
        start, end = (float(samples[0][0]), float(samples[-1][0])) if samples else (math.nan, math.nan)
        # The step: the shortest gap among the first samples (a gap of missing samples is a multiple of it).
        times = [float(sample[0]) for sample in samples[:_STEP_SAMPLES]]
        gaps = [later - earlier for earlier, later in pairwise(times) if later > earlier]
    except (TypeError, ValueError, IndexError, KeyError):
        raise AdviceInputError(f'{metric}: series {index} has a sample that is not [time, "value"]') from None
    return Series(labels=labels, start=start, end=end, values=tuple(values), step=min(gaps, default=0.0))
