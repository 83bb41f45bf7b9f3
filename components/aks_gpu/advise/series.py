"""Reading a Prometheus ``query_range`` response (the HTTP API's JSON, as ``curl .../api/v1/query_range`` writes it) into
series: labels and sample values. Pure: bytes in, series out; ``AdviceInputError`` says what is wrong, naming the metric.

The response format: https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries
(``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[t, "v"], ...]}]}}``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
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
    time order (NaN and infinite samples left out), and the query's step as the first samples show it (0: unknown).
    ``runs``: where the samples are not one step apart from start to end (a gap, a sample left out), the first time
    and the count of each run of samples one step apart; empty where they are (a range query's usual answer)."""

    labels: Mapping[str, str]
    start: float
    end: float
    values: tuple[float, ...]
    step: float = 0.0
    runs: tuple[tuple[float, int], ...] = ()

    def times(self) -> Iterator[float]:
        """The time of each value, in order."""
        for first, count in self.runs or ((self.start, len(self.values)),):
            for n in range(count):
                yield first + n * self.step


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
        finite = math.isfinite(sum(values))
        if not finite:
            values = [value for value in values if math.isfinite(value)]
        start, end = (float(samples[0][0]), float(samples[-1][0])) if samples else (math.nan, math.nan)
        # The step: the shortest gap among the first samples (a gap of missing samples is a multiple of it).
        times = [float(sample[0]) for sample in samples[:_STEP_SAMPLES]]
        gaps = [later - earlier for earlier, later in pairwise(times) if later > earlier]
        step = min(gaps, default=0.0)
        runs: tuple[tuple[float, int], ...] = ()
        # Each value's time is start + n steps unless samples are missing (or left out): then the runs say where.
        if step and (not finite or round((end - start) / step) + 1 != len(samples)):
            kept = [float(sample[0]) for sample in samples if math.isfinite(float(sample[1]))]
            runs = _runs(kept, step)
    except (TypeError, ValueError, IndexError, KeyError):
        raise AdviceInputError(f'{metric}: series {index} has a sample that is not [time, "value"]') from None
    return Series(labels=labels, start=start, end=end, values=tuple(values), step=step, runs=runs)


def _runs(times: list[float], step: float) -> tuple[tuple[float, int], ...]:
    """(first time, count) of each run of ``times`` one ``step`` apart."""
    runs: list[tuple[float, int]] = []
    for time in times:
        if runs and abs(time - (runs[-1][0] + runs[-1][1] * step)) < step / 2:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((time, 1))
    return tuple(runs)
