"""AMD's ROCm Validation Suite (``rvs``) read and graded.

RVS 1.3 and later end a run with a summary table (ROCm/ROCmValidationSuite ``rvs/src/rvsexec.cpp``, ``do_yaml``): a
system overview, the GPUs, then one ``| <action> | <MODULE> | PASS|FAIL |`` row per action of the configuration (GPUP
properties, PEQT/PEBB/PBQT PCIe and peer links, IET power, GST GEMM stress, BABEL and MEM memory, PESM PCIe state).
Before it, and in older releases alone, each module logs ``[RESULT] [<time>] [<action>] ... pass: TRUE|FALSE`` and
``RVS-ERROR [<module>] ...`` lines. https://rocm.docs.amd.com/projects/ROCmValidationSuite/en/latest/

- an action FAIL (or a module's ``pass: FALSE``) is unhealthy, naming the action's module;
- RVS that could not run (``RVS-ERROR`` and no result at all: "No platform support for the detected GPU",
  ROCm/ROCmValidationSuite#1263) is inconclusive;
- every action PASS is healthy.
"""

from __future__ import annotations

import re

from aks_gpu.gpu.diag.grade import Grade

TOOL = "rvs"
_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*([A-Z][A-Z0-9_]*)\s*\|\s*(PASS|FAIL|SKIP\w*|N/?A)\s*\|\s*$", re.IGNORECASE)
_VERDICT = re.compile(r"\[RESULT\]\s*\[[^\]]*\]\s*\[([^\]]+)\].*\bpass:\s*(TRUE|FALSE)\b", re.IGNORECASE)
_ERROR = re.compile(r"RVS-ERROR.*")


def read_rvs(text: str) -> Grade:
    """The grade of one ``rvs`` run."""
    rows = [match.groups() for match in map(_ROW.match, (line.strip() for line in text.splitlines())) if match]
    errors = [match.group(0).strip() for match in map(_ERROR.search, text.splitlines()) if match]
    if rows:
        failed = [f"{module} ({action})" for action, module, result in rows if result.upper() == "FAIL"]
        if failed:
            return Grade(TOOL, "unhealthy", ", ".join(failed), tuple(errors[:5]))
        skipped = [f"{module} ({action})" for action, module, result in rows if result.upper() != "PASS"]
        if skipped:
            return Grade(TOOL, "inconclusive", f"not run: {', '.join(skipped)}")
        return Grade(TOOL, "healthy")
    verdicts = [match.groups() for match in map(_VERDICT.search, text.splitlines()) if match]
    if verdicts:
        failed = sorted({action for action, passed in verdicts if passed.upper() == "FALSE"})
        if failed:
            return Grade(TOOL, "unhealthy", ", ".join(failed), tuple(errors[:5]))
        return Grade(TOOL, "healthy")
    why = errors[0] if errors else "no RVS result in the output"
    return Grade(TOOL, "inconclusive", f"rvs did not run: {why[:300]}", tuple(errors[:5]))
