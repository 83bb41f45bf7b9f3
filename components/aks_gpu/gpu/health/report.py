"""The health report: the finding ids (a contract), a finding, an id not checked, and the report of one input, with
the collector the readers add to. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from aks_gpu.naming import Vendor

Severity = Literal["critical", "warning"]
FindingId = Literal[
    "ecc-uncorrectable",
    "row-remap-failure",
    "row-remap-pending",
    "retired-pages-pending",
    "xid",
    "gpu-lost",
    "gpu-reset-required",
    "hw-slowdown",
    "pcie-degraded",
    "nvlink-inactive",
    "fabric-not-ready",
    "ras-uncorrectable",
]
FINDING_IDS: tuple[FindingId, ...] = get_args(FindingId)


@dataclass(frozen=True)
class Finding:
    id: FindingId
    severity: Severity
    gpu: str | None  # the GPU as the input names it: its PCI address, else its index ("3"); None when not said
    message: str  # what was found and what to do

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "severity": self.severity, "gpu": self.gpu, "message": self.message}


@dataclass(frozen=True)
class NotChecked:
    """An id the input should have allowed to judge and did not, for one GPU or all (``gpu`` None), and why."""

    id: FindingId
    gpu: str | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "gpu": self.gpu, "reason": self.reason}


@dataclass(frozen=True)
class HealthReport:
    """What one input says about GPU health. ``unreadable`` says why nothing could be judged (then exit 2).

    ``incomplete`` says why the input was not read whole (it was cut short, or rows of a format this reads could not
    be read): what was read is reported, and the input is never called healthy (``smi health`` exits 2 unless a
    finding is critical). ``not_checked`` names the ids that were not judged for a GPU the input shows, and why.
    """

    findings: tuple[Finding, ...]
    checked: tuple[FindingId, ...]  # in FINDING_IDS order
    vendor: Vendor | None = None
    unreadable: str | None = None
    incomplete: str | None = None
    not_checked: tuple[NotChecked, ...] = ()

    @property
    def critical(self) -> bool:
        return any(finding.severity == "critical" for finding in self.findings)

    @property
    def healthy(self) -> bool:
        """Read whole, something checked, nothing found: the only state that may be called healthy."""
        return not self.findings and bool(self.checked) and self.unreadable is None and self.incomplete is None

    def to_dict(self) -> dict[str, object]:
        """``{"findings": [{"id", "severity", "gpu", "message"}], "checked": [ids], "not_checked": [{"id", "gpu",
        "reason"}], "incomplete": why or null}``, the contract of ``smi health``."""
        return {
            "findings": [finding.to_dict() for finding in self.findings],
            "checked": list(self.checked),
            "not_checked": [entry.to_dict() for entry in self.not_checked],
            "incomplete": self.incomplete,
        }


@dataclass
class Collector:
    findings: list[Finding] = field(default_factory=list)
    checked: set[FindingId] = field(default_factory=set)
    not_checked: list[NotChecked] = field(default_factory=list)

    def add(self, id_: FindingId, severity: Severity, gpu: str | None, message: str) -> None:
        self.findings.append(Finding(id_, severity, gpu, message))

    def skip(self, id_: FindingId, gpu: str | None, reason: str) -> None:
        self.not_checked.append(NotChecked(id_, gpu, reason))

    def report(self, vendor: Vendor | None, unreadable: str | None = None, incomplete: str | None = None) -> HealthReport:
        order = {id_: number for number, id_ in enumerate(FINDING_IDS)}
        findings = sorted(self.findings, key=lambda f: (f.severity != "critical", order[f.id], f.gpu or ""))
        checked = tuple(id_ for id_ in FINDING_IDS if id_ in self.checked or any(f.id == id_ for f in findings))
        skipped = tuple(sorted(dict.fromkeys(self.not_checked), key=lambda n: (order[n.id], n.gpu or "")))
        return HealthReport(tuple(findings), checked, vendor, unreadable, incomplete, skipped)
