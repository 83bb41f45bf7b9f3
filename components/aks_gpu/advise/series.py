"""Reading a Prometheus ``query_range`` response (the HTTP API's JSON, as ``curl .../api/v1/query_range`` writes it) into
series: labels and sample values. Pure: bytes in, series out; ``AdviceInputError`` says what is wrong, naming the metric.

The response format: https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries
(``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...}, "values": [[t, "v"], ...]}]}}``).

A week of 1,000 GPUs is 2 million samples a metric, 45 MiB of JSON: decoding it into lists and strings took most of
the advice's time and five times the file's size in memory. The response is read a piece at a time instead, the way
Prometheus writes it (compact JSON, each series ``{"metric":{...},"values":[[t,"v"],...]}``): each series' labels are
decoded as JSON, its values read straight into an array of doubles (its times only where samples are missing, for
its ``runs``, the same as reading the whole document gives), and a series whose samples nothing reads
(``labels_only``: kube-state-metrics' owners and node labels) keeps its labels only. Anything not in that shape is read
again as a whole JSON document, which says what is wrong.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, pairwise
from typing import Any

# How many of a series' first samples show its step.
_STEP_SAMPLES = 16
# The start of the result list, and of each series up to its values: labels are strings (escapes included).
_RESULT = re.compile(rb'"result"\s*:\s*\[')
_STRING = rb'"(?:[^"\\]|\\.)*"'
_SERIES_HEAD = re.compile(rb'\{"metric":(\{(?:' + _STRING + rb":" + _STRING + rb",?)*\}),\"values\":\[")
# What stands between two samples' values: `"],[1764547200.5,"`, the time as Prometheus writes it.
_TIME_BYTES = b"0123456789.[],"


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
    values: Sequence[float]
    step: float = 0.0
    runs: tuple[tuple[float, int], ...] = ()

    def times(self) -> Iterator[float]:
        """The time of each value, in order."""
        for first, count in self.runs or ((self.start, len(self.values)),):
            for n in range(count):
                yield first + n * self.step


class _NotCompactError(Exception):
    """The response is not in the shape the piecewise reader knows: read it whole."""


def parse_query_range(
    metric: str, data: bytes | str | Iterable[bytes], *, labels_only: bool = False, again: Iterable[bytes] | None = None
) -> list[Series]:
    """The series of one ``query_range`` response for ``metric`` (its bytes, or its pieces in order); with
    ``labels_only`` the series' labels without their samples. ``AdviceInputError`` when it is not one. ``again``: the
    same pieces once more, for a response the piecewise reader hands to the whole-document reader (a one-shot iterable
    of pieces needs it)."""
    pieces: Iterable[bytes] = [data.encode("utf-8") if isinstance(data, str) else data] if isinstance(data, str | bytes) else data
    try:
        return _read_compact(metric, iter(pieces), labels_only)
    except _NotCompactError:
        whole = data if isinstance(data, str | bytes) else b"".join(again if again is not None else data)
        return _read_whole(metric, whole, labels_only)


def _read_compact(metric: str, pieces: Iterator[bytes], labels_only: bool) -> list[Series]:
    buffer, at = b"", 0
    found: list[Series] = []

    def more() -> bool:
        nonlocal buffer, at
        piece = next(pieces, b"")
        if not piece:
            return False
        buffer, at = buffer[at:] + piece, 0
        return True

    while (opened := _RESULT.search(buffer)) is None:
        if len(buffer) > 1 << 16 or not more():
            raise _NotCompactError
    head = buffer[: opened.start()]
    at = opened.end()
    while True:
        while at >= len(buffer):
            if not more():
                raise _NotCompactError
        if buffer[at] == 0x5D:  # `]`: the end of the result list
            break
        if found:
            if buffer[at] != 0x2C:  # `,` between two series
                raise _NotCompactError
            at += 1
        end = buffer.find(b"]}", at)
        while end < 0:
            if not more():
                raise _NotCompactError
            end = buffer.find(b"]}", at)
        series = _SERIES_HEAD.match(buffer, at, end)
        if series is None:
            raise _NotCompactError
        found.append(_compact_series(series[1], buffer[series.end() : end], labels_only))
        at = end + 2
    tail = buffer[at + 1 :] + b"".join(pieces)
    try:
        document = json.loads(head + b'"result":[]' + tail)
    except (ValueError, RecursionError):
        raise _NotCompactError from None
    _check_document(metric, document)
    return found


def _compact_series(labels_text: bytes, samples: bytes, labels_only: bool) -> Series:
    try:
        labels = {str(key): str(value) for key, value in json.loads(labels_text).items()}
    except (ValueError, RecursionError):
        raise _NotCompactError from None
    if labels_only or not samples:
        return Series(labels=labels, start=math.nan, end=math.nan, values=array("d"), step=0.0)
    # `[t,"v"],[t,"v"]` split at the quotes: the values, and between them `[t,`, `],[t,` ... `]`.
    parts = samples.split(b'"')
    texts, around = parts[1::2], parts[0::2]
    count = len(texts)
    # n samples hold n `[` and `]`, 2n - 1 commas, and between the values only times: digits, `.`, `[`, `]`, `,`.
    if (
        len(parts) != 2 * count + 1
        or samples.count(b"[") != count
        or samples.count(b"]") != count
        or samples.count(b",") != 2 * count - 1
        or b"".join(around).translate(None, _TIME_BYTES)
    ):
        raise _NotCompactError
    try:
        values = array("d", map(float, texts))
        first = [float(part.strip(b"[],")) for part in around[: min(count, _STEP_SAMPLES)]]
        last = float(around[-2].strip(b"[],"))
    except ValueError:
        raise _NotCompactError from None
    finite = not (b"N" in samples or b"I" in samples)  # NaN, +Inf, -Inf: left out
    if not finite:
        kept = [math.isfinite(value) for value in values]
        values = array("d", compress(values, kept))
    gaps = [later - earlier for earlier, later in pairwise(first) if later > earlier]
    step = min(gaps, default=0.0)
    runs: tuple[tuple[float, int], ...] = ()
    # As the whole-document reader: where samples are missing or left out, the runs say each value's time.
    if step and (not finite or round((last - first[0]) / step) + 1 != count):
        try:
            times = [float(part.strip(b"[],")) for part in around[:count]]
        except ValueError:
            raise _NotCompactError from None
        runs = _runs(times if finite else compress(times, kept), step, first[0])
    return Series(labels=labels, start=first[0], end=last, values=values, step=step, runs=runs)


def _check_document(metric: str, document: Any) -> None:
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


def _read_whole(metric: str, data: bytes | str, labels_only: bool) -> list[Series]:
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise AdviceInputError(f"{metric}: not a Prometheus query_range response: not JSON ({error})") from None
    _check_document(metric, document)
    return [_series(metric, index, entry, labels_only) for index, entry in enumerate(document["data"]["result"])]


def _series(metric: str, index: int, entry: Any, labels_only: bool = False) -> Series:
    if not isinstance(entry, dict) or not isinstance(entry.get("metric"), dict) or not isinstance(entry.get("values"), list):
        raise AdviceInputError(f"{metric}: series {index} has no 'metric' labels and 'values' list")
    labels = {str(key): str(value) for key, value in entry["metric"].items()}
    samples = [] if labels_only else entry["values"]
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
            runs = _runs(kept, step, start)
    except (TypeError, ValueError, IndexError, KeyError):
        raise AdviceInputError(f'{metric}: series {index} has a sample that is not [time, "value"]') from None
    return Series(labels=labels, start=start, end=end, values=array("d", values), step=step, runs=runs)


def _runs(times: Iterable[float], step: float, start: float) -> tuple[tuple[float, int], ...]:
    """(first time, count) of each run of ``times`` (the kept samples') one ``step`` apart; empty where they are one
    run from ``start`` (each value's time is then start + n steps, as without runs)."""
    runs: list[tuple[float, int]] = []
    for time in times:
        if runs and abs(time - (runs[-1][0] + runs[-1][1] * step)) < step / 2:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((time, 1))
    return () if len(runs) == 1 and runs[0][0] == start else tuple(runs)
