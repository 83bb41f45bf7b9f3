"""Every check ``aksgpu validate`` (and the deploy-time hook) runs, said once: id, what it is judged per, and when it
passes. ``checks.CheckId`` is its type, and the CLI help and the table of docs/validation.md are rendered from here
(``tests/validation/test_registry.py`` holds them to it), as ``components/aks_gpu/audit/registry.py`` does for the audit's
findings. Check ids are a contract (issue 5): the JSON report, the deploy report and other tools name them.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Literal

CheckId = Literal[
    "device-plugin-ready",
    "gpu-schedulable",
    "smi-error",
    "driver-version",
    "driver-consistency",
    "gpu-count",
    "mig-mode",
    "gpu-health",
]


@dataclass(frozen=True)
class ValidationCheck:
    id: CheckId
    scope: str  # what one result is about: "pool", "node", or "pool, node"
    passes_when: str


# In the order results are listed for each node: from "is the plugin there" to MIG details and health.
CHECKS: tuple[ValidationCheck, ...] = (
    ValidationCheck(
        "device-plugin-ready",
        "pool, node",
        "the plugin DaemonSet has desired = ready = available; a plugin pod is Running and ready on the node",
    ),
    ValidationCheck(
        "gpu-schedulable",
        "node",
        "`status.allocatable` holds the pool's resource with the expected count (MIG strategy, time-slicing included)",
    ),
    ValidationCheck(
        "smi-error",
        "node",
        "the SMI command ran and reports no error (driver not loaded, driver/library mismatch, no devices)",
    ),
    ValidationCheck(
        "driver-version", "node", "the driver is at least the pool's `minDriverVersion` (compared as versions: 565.57 < 565.100)"
    ),
    ValidationCheck(
        "driver-consistency", "pool", "every node of the pool runs the same driver (a half-done node image upgrade fails this)"
    ),
    ValidationCheck("gpu-count", "node", "the SMI output lists as many GPUs as the VM size has"),
    ValidationCheck(
        "mig-mode", "node", "MIG is on exactly where the pool has a `migProfile`, with the expected slice count (NVIDIA only)"
    ),
    ValidationCheck(
        "gpu-health",
        "node",
        "no critical finding of `aksgpu smi health` in the node's SMI output (ECC, row remapping, retired pages, lost "
        "GPU, fabric, RAS) and no AKS Node Problem Detector GPU condition (`GPUMissing`, `XIDErrors`, "
        "`NVLinkStatusInactive`, `IBLinkFlapping`, `UnhealthyNvidiaDevicePlugin`, `UnhealthyNvidiaDCGMServices`) "
        "`True` on the node; warnings (HW slowdown, narrow PCIe, `GPUClockThrottling`) warn. The message names the "
        "node, the GPU and what to do",
    ),
)
CHECK_IDS: tuple[CheckId, ...] = tuple(check.id for check in CHECKS)


def help_text(width: int = 114) -> str:
    """The checks as ``aksgpu validate --help`` lists them, wrapped at ``width``."""
    lines: list[str] = []
    for check in CHECKS:
        text = f"{check.passes_when.replace('`', '')} (per {check.scope})"
        lines.extend(textwrap.wrap(text, width - 23, initial_indent=f"  {check.id:<19}  ", subsequent_indent=" " * 23))
    return "\n".join(lines)


def markdown_table() -> str:
    """The table of checks in docs/validation.md."""
    rows = ["| check | per | passes when |", "| --- | --- | --- |"]
    rows += [f"| `{check.id}` | {check.scope} | {check.passes_when} |" for check in CHECKS]
    return "\n".join(rows)
