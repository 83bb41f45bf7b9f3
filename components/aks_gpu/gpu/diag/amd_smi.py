"""amd-smi's RAS counters graded as a diagnostic: the diagnostic pod's ``amd-smi metric --ecc --json`` (text and the
other amd-smi and rocm-smi RAS formats read the same), read by the health readers of ``aks_gpu.gpu.health`` (no second
parser).

AMD's own rule is the uncorrectable count: the device metrics exporter marks a GPU unhealthy when an uncorrectable ECC
counter exceeds its threshold, and the GPU Operator's Node Problem Detector example raises a node condition on
``gpu_ecc_uncorrect_total`` above 0 (sources in ``components/aks_gpu/data/gpu_diagnostics.yaml``):

- a critical health finding (``ras-uncorrectable``: an uncorrectable RAS error on a GPU) is unhealthy, naming it;
- an output without a RAS counter is inconclusive, saying which: amd-smi or rocm-smi could not reach the driver
  (an ``ERROR:`` line instead of counters), or the output is another of their reads (``amd-smi list``, ``static``,
  ``metric`` without ``--ecc``, ``rocm-smi --json --showrasinfo``'s "No JSON data to report"), which says nothing
  of the GPU's errors;
- counters read and none above zero is healthy; a warning finding stays a warning.

Pure: text in, grade out.
"""

from __future__ import annotations

from aks_gpu.gpu.diag.grade import Grade
from aks_gpu.gpu.health import read_health

TOOL = "amd-smi"
CHECKED = "ras-uncorrectable"


def read_amd_smi_ras(text: str) -> Grade:
    """The grade of one ``amd-smi metric --ecc`` output."""
    report = read_health(text, "amd")
    critical = [finding for finding in report.findings if finding.severity == "critical"]
    if critical:
        parts = dict.fromkeys(f"{f.id} (GPU {f.gpu})" if f.gpu is not None else f.id for f in critical)
        return Grade(TOOL, "unhealthy", ", ".join(parts), tuple(f.message for f in critical[:5]))
    warnings = tuple(finding.message for finding in report.findings)
    if CHECKED not in report.checked:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        said = next((line for line in lines if line.upper().startswith(("ERROR", "WARNING"))), None)
        if said:
            return Grade(TOOL, "inconclusive", f"no RAS counter read: {said[:300]}", warnings=warnings)
        first = lines[0] if lines else "no output"
        return Grade(
            TOOL,
            "inconclusive",
            f"not a RAS read (amd-smi metric --ecc or rocm-smi --showrasinfo): no error counter in it ({first[:200]})",
            warnings=warnings,
        )
    return Grade(TOOL, "healthy", warnings=warnings)
