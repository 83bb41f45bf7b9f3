"""The health reader: one input read by every reader that applies to it (NVIDIA's tools, its kernel module's log,
AMD's tools), and the SMI report of the same text from the same pass. Pure."""

from __future__ import annotations

from aks_gpu.catalog import load_catalog
from aks_gpu.gpu.health.amd import read_amd
from aks_gpu.gpu.health.kernel_log import whole_last_line
from aks_gpu.gpu.health.nvidia import read_nvidia, topology_nvlinks
from aks_gpu.gpu.health.report import Collector, HealthReport
from aks_gpu.gpu.smi import read_prepared
from aks_gpu.gpu.smi.model import SmiReport, VendorChoice
from aks_gpu.gpu.smi.nvidia_query import query_log, query_report
from aks_gpu.gpu.smi.text import MAX_LINE_CHARS, Text, prepare, shorten
from aks_gpu.naming import Vendor


def nvlink_expected_for(vm_size: str | None) -> bool | None:
    """Whether a VM size's GPUs are NVLink-connected, from the catalog (components/aks_gpu/data/gpu_catalog.yaml, ``nvlink``):
    None for a size it does not know or has no source for."""
    if not vm_size:
        return None
    size = load_catalog().vm_size(vm_size.strip())
    return size.nvlink if size is not None else None


def read_health(
    text: str, vendor: VendorChoice = "auto", *, nvlink_expected: bool | None = None, vm_size: str | None = None
) -> HealthReport:
    """The health findings in one input (``aks_gpu.gpu.health`` names the formats and ids).

    ``nvlink_expected``: whether the node's GPUs have NVLink (True on ND A100/H100/H200 sizes). When every link
    of a GPU is inactive and this is unknown (None), the finding is a warning: a PCIe GPU without an NVLink
    bridge shows the same; with True it is critical; with False it is not reported. ``vm_size`` (the node's
    ``node.kubernetes.io/instance-type``) sets it from the catalog when it is not given.
    """
    return read_smi_and_health(text, vendor, nvlink_expected=nvlink_expected, vm_size=vm_size)[1]


def read_smi_and_health(
    text: str, vendor: VendorChoice = "auto", *, nvlink_expected: bool | None = None, vm_size: str | None = None
) -> tuple[SmiReport, HealthReport]:
    """``parse_smi`` and ``read_health`` of the same text, reading it once (the validation does both per node)."""
    if vendor not in ("nvidia", "amd", "auto"):
        raise ValueError(f"vendor must be 'nvidia', 'amd' or 'auto', not {vendor!r}")
    if nvlink_expected is None:
        nvlink_expected = nvlink_expected_for(vm_size)
    vendors: tuple[Vendor, ...] = ("nvidia", "amd") if vendor == "auto" else (vendor,)
    prepared = prepare(text)
    collector = Collector()
    found: Vendor | None = None
    log = query_log(prepared) if "nvidia" in vendors else None
    if "nvidia" in vendors and read_nvidia(prepared, log, collector, nvlink_expected, vendor == "nvidia"):
        found = "nvidia"
    if "amd" in vendors and found is None and read_amd(prepared, collector):
        found = "amd"
    # -q and -q -x come first among the formats parse_smi tries: read once, they serve both reports.
    report = read_prepared(prepared, vendors, query_report(log) if log is not None else None)
    if nvlink_expected and report.vendor == "nvidia" and report.topology:
        topology_nvlinks(report, collector)
        found = found or "nvidia"
    incomplete = _not_read_whole(report, prepared)
    if not collector.checked and not collector.findings:
        what = report.format or ("an SMI error" if report.error and report.error.kind != "unrecognized" else None)
        reason = (
            f"the input ({what}) shows no GPU health data"
            if what
            else f"not an input the health check reads ({_first_words(prepared)})"
        )
        hint = (
            "; give it nvidia-smi -q (or -q -x), nvidia-smi nvlink -s, a kernel log (dmesg, journalctl -k), "
            "amd-smi metric --ecc or rocm-smi --showrasinfo"
        )
        return report, collector.report(found or report.vendor, reason + hint, incomplete)
    return report, collector.report(found or report.vendor, incomplete=incomplete)


def _not_read_whole(report: SmiReport, prepared: Text) -> str | None:
    """Why the input was not read whole, or None: the one rule every reader keeps (an output cut short, or one in a
    format this reads whose GPU rows could not be read, is never called healthy)."""
    if report.error is not None and report.error.kind in ("unreadable", "duplicate_gpu"):
        # A GPU listed twice is two outputs in one input: which of them a finding came from cannot be told.
        return report.error.message
    if report.truncated or prepared.capped:
        what = report.format or "the output"
        return f"{what} was cut short: only its complete part was read, so what follows the cut was not checked"
    if report.format is None and prepared.partial and prepared.lines and whole_last_line(prepared) is None:
        # A log whose last line has no line end may have been cut inside it ("Xid (PCI:...): 7" of a 79).
        return "its last line has no line end and may have been cut: that line was not read"
    return None


def _first_words(prepared: Text) -> str:
    first = next((line.strip() for line in prepared.lines if line.strip()), None)
    if first is None and prepared.long_lines:
        # A file of one 70 MB line is not empty: its lines were too long to read.
        return f"it holds only {prepared.long_lines} line(s) longer than {MAX_LINE_CHARS // 1024} KiB, which are not read"
    return "it is empty" if first is None else f"it starts with: {shorten(first, 80)}"
