"""AMD's ROCm Validation Suite (``rvs``) read and graded.

RVS 1.3 and later end a run with a summary table (ROCm/ROCmValidationSuite ``rvs/src/rvsexec.cpp``, ``do_yaml``): a
system overview, the GPUs, then one ``| <action> | <MODULE> | PASS|FAIL |`` row per action of the configuration (GPUP
properties, PEQT/PEBB/PBQT PCIe and peer links, IET power, GST GEMM stress, BABEL and MEM memory, PESM PCIe state).
Before it, and in older releases alone, each module logs ``[RESULT] [<time>] [<action>] ... pass: TRUE|FALSE`` (SMQT
writes it in lower case: ``smqt <gpu> pass: false``), GST ``... Target GFLOPS: <n> met: TRUE|FALSE``, and
``RVS-ERROR [<module>] ...`` lines (docs/ug1main.md @21584e1 shows each module's output).
https://rocm.docs.amd.com/projects/ROCmValidationSuite/en/latest/

- an action FAIL (or a module's ``pass: FALSE`` / ``met: FALSE``) is unhealthy, naming the action's module and the
  GPUs that failed;
- RVS that could not run (``RVS-ERROR`` and no result at all: "No platform support for the detected GPU",
  ROCm/ROCmValidationSuite#1263; a configuration without a required key, #1131) is inconclusive;
- a summary table without a result row or its closing border, or without a row for an action the log ran, or an action that
  logged its start (``Action name :<action>``) but no verdict, was cut off: inconclusive (a failure the log shows
  still counts);
- every action PASS is healthy.
"""

from __future__ import annotations

import re

from aks_gpu.gpu.diag.grade import Grade

TOOL = "rvs"
_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*([A-Z][A-Z0-9_]*)\s*\|\s*(PASS|FAIL|SKIP\w*|N/?A)\s*\|\s*$", re.IGNORECASE)
_VERDICT = re.compile(r"\[RESULT\]\s*\[[^\]]*\]\s*\[([^\]]+)\](.*?)\b(?:pass|met):\s*(TRUE|FALSE)\b", re.IGNORECASE)
_GPU_IN_VERDICT = re.compile(r"\[GPU::\s*(\d+)\]|^\s*([a-z]+)\s+(\d+)\b", re.IGNORECASE)
_STARTED = re.compile(r"\[RESULT\]\s*\[[^\]]*\]\s*Action name\s*:\s*(\S+)")
_MODULE = re.compile(r"\[RESULT\]\s*\[[^\]]*\]\s*Module name\s*:\s*(\S+)")
_SUMMARY = re.compile(r"\|\s*Action Name\s*\|\s*Module\s*\|\s*Result\s*\|", re.IGNORECASE)
_ERROR = re.compile(r"RVS-ERROR.*")
_BORDER = re.compile(r"^\+[-=]+\+$")


def read_rvs(text: str) -> Grade:
    """The grade of one ``rvs`` run."""
    lines = text.splitlines()
    rows = [match.groups() for match in map(_ROW.match, (line.strip() for line in lines)) if match]
    errors = [match.group(0).strip() for match in map(_ERROR.search, lines) if match]
    verdicts: dict[str, dict[str, bool]] = {}
    modules: dict[str, str] = {}
    action = ""
    for line in lines:  # "Action name :<action>" then "Module name :<module>" open each action's log
        opened, module = _STARTED.search(line), _MODULE.search(line)
        action = opened.group(1) if opened else action
        if module and action:
            modules[action] = module.group(1).upper()
    for match in map(_VERDICT.search, lines):
        if match:
            gpu = _GPU_IN_VERDICT.search(match.group(2))
            where = (gpu.group(1) or gpu.group(3)) if gpu else ""
            if gpu and gpu.group(2):
                modules[match.group(1)] = gpu.group(2).upper()
            by_gpu = verdicts.setdefault(match.group(1), {})
            by_gpu[where] = by_gpu.get(where, True) and match.group(3).upper() == "TRUE"  # a later pass hides no failure
    failed = [f"{module} ({action}{_gpus(verdicts.get(action))})" for action, module, result in rows if result.upper() == "FAIL"]
    in_summary = {action for action, _, _ in rows}
    failed += [
        f"{modules[action]} ({action}{_gpus(by_gpu)})" if action in modules else f"{action}{_gpus(by_gpu)}"
        for action, by_gpu in verdicts.items()
        if not all(by_gpu.values()) and action not in in_summary
    ]
    if failed:
        return Grade(TOOL, "unhealthy", ", ".join(failed), tuple(errors[:5]))
    started = {match.group(1) for match in map(_STARTED.search, lines) if match}
    if rows:
        stripped = [line.strip() for line in lines]
        last = max(i for i, line in enumerate(stripped) if _ROW.match(line))
        closing = next((line for line in stripped[last + 1 :] if line), "")
        if not _BORDER.match(closing):
            return Grade(TOOL, "inconclusive", "the summary table ends without its closing border (cut off)")
        skipped = [f"{module} ({action})" for action, module, result in rows if result.upper() != "PASS"]
        if skipped:
            return Grade(TOOL, "inconclusive", f"not run: {', '.join(skipped)}")
        missing = sorted((started | set(verdicts)) - in_summary)
        if missing:
            return Grade(TOOL, "inconclusive", f"the summary has no row for {', '.join(missing)} (cut off)")
        return Grade(TOOL, "healthy")
    if any(_SUMMARY.search(line) for line in lines):
        return Grade(TOOL, "inconclusive", "the summary table ends before any action's result (cut off)")
    if verdicts:
        unfinished = sorted(started - set(verdicts))
        if unfinished:
            return Grade(TOOL, "inconclusive", f"no result for {', '.join(unfinished)} (cut off)")
        return Grade(TOOL, "healthy")
    why = errors[0] if errors else "no RVS result in the output"
    return Grade(TOOL, "inconclusive", f"rvs did not run: {why[:300]}", tuple(errors[:5]))


def _gpus(by_gpu: dict[str, bool] | None) -> str:
    """``, GPU 3254, 33367``: the GPUs (RVS's GPU ids) whose verdict was false, where the log names them."""
    failed = sorted((gpu for gpu, passed in (by_gpu or {}).items() if gpu and not passed), key=int)
    return f", GPU {', '.join(failed)}" if failed else ""
