"""AMD's GPU test runner's results read and graded, beside RVS's own output (``read_amd_rvs`` takes either).

The test runner (``docker.io/rocm/test-runner``, which the AMD GPU Operator's auto node remediation, pre-start and
manual checks run) drives RVS (or, in its private image, AGFHC) and reports each run as a Kubernetes Event whose
message is its result summary, a JSON list of iterations (ROCm/device-metrics-exporter pkg/testrunner/interface
types.go ``IterationResult`` @afd0fe81):
``[{"number": 1, "suitesResult": {"<GPU>": {"<action>": "success"}}, "status": "completed"}]``, the GPU named by its
index (or, in older releases, its KFD id), each action's result ``success``, ``failure``, ``skipped``, ``cancelled``,
``timedout`` or ``queued`` (interface.go), the iteration's status ``completed`` or ``timed_out``. A recorded result is
that message as ``kubectl get events`` prints it, the Event as JSON, or the bare list.

The test runner fails a run on any failed action, and on an iteration with no result at all ("the test didn't run at
all, or the test parser failed", testrunner.go ``getOverallResult``). Graded as an engineer would:

- an action that failed on a GPU is unhealthy, naming the action and the GPU;
- an iteration that timed out, gave no result, or whose actions were only skipped, cancelled or queued proves nothing:
  inconclusive, saying which;
- every action of every GPU a success is healthy.

Pure: text in, grade out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from aks_gpu.gpu.diag.grade import Grade
from aks_gpu.gpu.diag.rvs import read_rvs

TOOL = "rvs"
_SUMMARY_START = '[{"number"'
_NOT_RUN = ("skipped", "cancelled", "queued")


def read_amd_rvs(text: str) -> Grade:
    """The grade of an AMD validation run: the test runner's result summary where the text holds one, else RVS's own
    output (``read_rvs``)."""
    return read_test_runner(text) or read_rvs(text)


def read_test_runner(text: str) -> Grade | None:
    """The grade of the test runner's result summaries in ``text``; None where it holds none."""
    iterations = list(_iterations(text))
    if not iterations:
        return None
    failed: dict[str, None] = {}
    not_run: dict[str, None] = {}
    timed_out: dict[str, None] = {}
    empty: list[str] = []
    for iteration in iterations:
        number = str(iteration.get("number", "?"))
        suites = iteration.get("suitesResult") or {}
        if iteration.get("status") == "timed_out":
            timed_out[f"iteration {number}"] = None
        elif not suites:
            empty.append(number)
        for gpu, actions in suites.items() if isinstance(suites, dict) else ():
            for action, result in (actions or {}).items() if isinstance(actions, dict) else ():
                where = f"{action} (GPU {gpu})"
                if result == "failure":
                    failed[where] = None
                elif result == "timedout":
                    timed_out[where] = None
                elif result != "success":
                    not_run[f"{where} {result}"] = None
    if failed:
        return Grade(TOOL, "unhealthy", ", ".join(failed))
    if timed_out:
        return Grade(TOOL, "inconclusive", f"timed out: {', '.join(timed_out)}")
    if empty:
        why = "gave no result (the test did not run, or its output could not be read)"
        return Grade(TOOL, "inconclusive", f"iteration {', '.join(empty)} {why}")
    if not_run:
        return Grade(TOOL, "inconclusive", f"not run: {', '.join(not_run)}")
    return Grade(TOOL, "healthy")


def _iterations(text: str) -> Iterator[dict[str, Any]]:
    """Every iteration of every result summary in ``text``: a JSON document (an Event, a list of Events, the summary
    itself), else each summary a line holds (``kubectl get events``)."""
    try:
        document: Any = json.loads(text)
    except ValueError:
        document = None
    if document is not None:
        yield from _walk(document)
        return
    decoder = json.JSONDecoder()
    at = text.find(_SUMMARY_START)
    while at >= 0:
        try:
            found, end = decoder.raw_decode(text, at)
        except ValueError:
            end = at + len(_SUMMARY_START)
        else:
            yield from _walk(found)
        at = text.find(_SUMMARY_START, end)


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if "suitesResult" in value or ("number" in value and "status" in value):
            yield value
            return
        for inner in value.values():
            yield from _walk(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner)
    elif isinstance(value, str) and value.lstrip().startswith(_SUMMARY_START):
        # An Event's message: the summary as a JSON string.
        try:
            yield from _walk(json.loads(value))
        except ValueError:
            return
