"""GPU health: what fails GPU jobs in production, read from SMI output, kernel logs and node conditions. Pure.

Two readers, both text or dicts in, frozen results out, no I/O and no Pulumi:

- ``read_health(text, vendor)`` reads ``nvidia-smi -q`` (text or ``-x``), the default ``nvidia-smi`` table,
  ``--query-gpu`` / ``--query-remapped-rows`` CSV with its header, ``nvidia-smi nvlink -s``, ``topo -m`` (on an NVLink
  size), ``dcgmi nvlink --link-status``, kernel log lines (``dmesg``, ``journalctl -k``, the amdgpu driver's RAS lines),
  ``amd-smi metric --ecc`` / ``--ecc-blocks`` (text or ``--json``) and ``rocm-smi --showrasinfo``, and returns
  ``HealthReport(findings, checked)``: ``checked`` names what the input allowed to judge, so "no finding" is
  never claimed for what was not read. ``read_smi_and_health`` returns the SMI report of the same text too, from
  one pass over it (the validation reads both for every node).
- ``read_gpu_conditions(node)`` reads the GPU conditions the AKS Node Problem Detector sets on a node object
  (``kubectl get node -o json``): GPUMissing, XIDErrors, NVLinkStatusInactive, IBLinkFlapping and the others
  AKS documents.

Finding ids (a contract: ``aksgpu smi health`` prints them, other tools match on them):

=========================  ========  ==========================================================================
id                         severity  when
=========================  ========  ==========================================================================
``ecc-uncorrectable``      critical  volatile uncorrectable ECC errors above zero (warning: aggregate only)
``row-remap-failure``      critical  the row remapper failed (no spare row left: the GPU needs replacing)
``row-remap-pending``      critical  rows wait for remapping (the GPU needs a reset)
``retired-pages-pending``  critical  pages wait for retirement (the driver needs a reload, i.e. a reset)
``xid``                    per code  an Xid in the kernel log; severity from components/aks_gpu/data/xid.yaml
``gpu-lost``               critical  "GPU is lost", "Unable to determine the device handle", fallen off the bus,
                                     "RmInitAdapter failed" (the driver could not initialise the GPU), a GPU whose
                                     name nvidia-smi prints as ERR! or most of whose fields read ERR! (a warning when
                                     only some do)
``gpu-reset-required``     critical  the driver or NVML says the GPU needs a reset (or the node a reboot) before it
                                     can be used again: NV_ERR_RESET_REQUIRED, "GPU requires reset", "GPU marked for
                                     reset", "may need to be reset", Xid 154 to a reset or reboot, uvm's "requiring
                                     os reboot", nvidia-smi -q's GPU Recovery Action
``hw-slowdown``            warning   HW slowdown, HW thermal slowdown or HW power brake active
``pcie-degraded``          warning   PCIe link width below its maximum
``nvlink-inactive``        critical  inactive NVLinks (warning when all are and the size may have none)
``fabric-not-ready``       critical  NVSwitch fabric state not Completed or status not Success
``ras-uncorrectable``      critical  AMD: uncorrectable RAS (ECC) errors above zero, or the amdgpu kernel driver
                                     reporting one (an uncorrectable hardware error, an ACA bank with UC, PCC, UECC,
                                     deferred or poison set)
=========================  ========  ==========================================================================

Sources: NVIDIA's Xid catalog (xid.yaml), "NVIDIA A100 GPU memory error management"
(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html: row remapping, pending and failure),
"Dynamic page retirement" (https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html), nvidia-smi's own
field help (the PCIe link "may be reduced when the GPU is not in use"), the fabric states NVIDIA's tools walk
through ("Not Started" -> "In Progress" -> "Completed", https://github.com/NVIDIA/NVSentinel/pull/1382), and the AKS
Node Problem Detector pages cited at ``GPU_CONDITIONS``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from aks_gpu.catalog import load_catalog
from aks_gpu.gpu.smi import amd as amd_formats
from aks_gpu.gpu.smi import nvidia as nvidia_formats
from aks_gpu.gpu.smi import read_prepared
from aks_gpu.gpu.smi.model import SmiReport, VendorChoice
from aks_gpu.gpu.smi.text import (
    MAX_LINE_CHARS,
    PCI_ADDRESS,
    Text,
    box_table,
    cells,
    integer,
    prepare,
    shorten,
    value,
)
from aks_gpu.gpu.xid import CATALOG_URL, load_xid_catalog
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
class _Collector:
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
    """The health findings in one input (see the module docstring for the formats and ids).

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
    collector = _Collector()
    found: Vendor | None = None
    log = nvidia_formats.query_log(prepared) if "nvidia" in vendors else None
    if "nvidia" in vendors and _read_nvidia(prepared, log, collector, nvlink_expected, vendor == "nvidia"):
        found = "nvidia"
    if "amd" in vendors and found is None and _read_amd(prepared, collector):
        found = "amd"
    # -q and -q -x come first among the formats parse_smi tries: read once, they serve both reports.
    report = read_prepared(prepared, vendors, nvidia_formats.query_report(log) if log is not None else None)
    if nvlink_expected and report.vendor == "nvidia" and report.topology:
        _topology_nvlinks(report, collector)
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
    if report.error is not None and report.error.kind == "unreadable":
        return report.error.message
    if report.truncated or prepared.capped:
        what = report.format or "the output"
        return f"{what} was cut short: only its complete part was read, so what follows the cut was not checked"
    if report.format is None and prepared.partial and prepared.lines and _whole_last_line(prepared) is None:
        # A log whose last line has no line end may have been cut inside it ("Xid (PCI:...): 7" of a 79).
        return "its last line has no line end and may have been cut: that line was not read"
    return None


def _first_words(prepared: Text) -> str:
    first = next((line.strip() for line in prepared.lines if line.strip()), None)
    if first is None and prepared.long_lines:
        # A file of one 70 MB line is not empty: its lines were too long to read.
        return f"it holds only {prepared.long_lines} line(s) longer than {MAX_LINE_CHARS // 1024} KiB, which are not read"
    return "it is empty" if first is None else f"it starts with: {shorten(first, 80)}"


# ---------------------------------------------------------------- NVIDIA


def _read_nvidia(
    t: Text, log: nvidia_formats.QueryLog | None, out: _Collector, nvlink_expected: bool | None, vendors_named: bool
) -> bool:
    recognized = False
    if log is not None:
        recognized = True
        out.checked.add("gpu-lost")  # nvidia-smi prints a GPU it cannot reach as an error among its output
        for gpu in log.gpus:
            _query_gpu_health(gpu, log.xml, out)
    elif "NVIDIA-SMI " in t.raw and "Driver Version:" in t.raw:
        recognized = _table_health(t, out) or recognized
    if _ERR in t.raw:
        recognized = _err_cells(t, out) or recognized
    status = nvidia_formats.nvlink_status(t)
    if status is not None:
        recognized = True
        out.checked.add("nvlink-inactive")
        for entry in status:
            inactive = [link.link for link in entry.links if link.state != "active"]
            label = str(entry.gpu.index) if entry.gpu.index is not None else None
            _nvlink_finding(out, label, inactive, len(entry.links), entry.all_inactive_notice, nvlink_expected)
    if log is None and "," in t.raw:
        recognized = _csv_health(t, out) or recognized
    recognized = _dcgmi_link_status(t, out, nvlink_expected) or recognized
    return _kernel_log(t, out, any_kernel_log=vendors_named) or recognized


def _query_gpu_health(gpu: nvidia_formats.QueryGpu, xml: bool, out: _Collector) -> None:
    label = gpu.bus_id

    def counts(field_name: str) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for path in nvidia_formats.QUERY_FIELDS[field_name][1 if xml else 0]:
            number = integer(gpu.fields.get(path))
            if number is not None:
                found.append((path.rsplit("/", 1)[-1], number))
        return found

    volatile, aggregate = counts("ecc_volatile_uncorrectable"), counts("ecc_aggregate_uncorrectable")
    if volatile or aggregate:
        out.checked.add("ecc-uncorrectable")
    if sum(n for _, n in volatile):
        detail = ", ".join(f"{name} {n}" for name, n in volatile if n)
        out.add(
            "ecc-uncorrectable",
            "critical",
            label,
            f"{sum(n for _, n in volatile)} uncorrectable ECC error(s) since the driver loaded ({detail}): data on this "
            "GPU may be corrupt; drain the node and reset the GPU (reboot the node) so row remapping or page retirement "
            "takes effect; if errors return, open an Azure support case",
        )
    elif sum(n for _, n in aggregate):
        detail = ", ".join(f"{name} {n}" for name, n in aggregate if n)
        out.add(
            "ecc-uncorrectable",
            "warning",
            label,
            f"{sum(n for _, n in aggregate)} uncorrectable ECC error(s) in this GPU's life ({detail}), none since the "
            "driver loaded: watch for new ones and for pending row remaps",
        )

    failure, pending = _yes_no(gpu.get("remap_failure", xml)), _yes_no(gpu.get("remap_pending", xml))
    if failure is not None or pending is not None:
        out.checked.update(("row-remap-failure", "row-remap-pending"))
    if failure:
        out.add(
            "row-remap-failure",
            "critical",
            label,
            "row remapping failed: a memory bank has no spare row left, so new errors can no longer be fenced off; drain "
            "the node and open an Azure support case (the GPU needs replacing)",
        )
    if pending:
        rows = integer(gpu.get("remap_uncorrectable", xml))
        count = f" ({rows} row(s) remapped for uncorrectable errors)" if rows else ""
        out.add(
            "row-remap-pending",
            "critical",
            label,
            f"a row remap is pending{count}: it takes effect only after a GPU reset; drain the node and reboot it",
        )

    # Older drivers name it pending_retirement, newer ones pending_blacklist too: pending if either says so.
    pending_pages = [_yes_no(gpu.fields.get(path)) for path in nvidia_formats.QUERY_FIELDS["retired_pending"][1 if xml else 0]]
    known = [state for state in pending_pages if state is not None]
    retired = any(known) if known else None
    if retired is not None:
        out.checked.add("retired-pages-pending")
    if retired:
        out.add(
            "retired-pages-pending",
            "critical",
            label,
            "memory pages are pending retirement: they are retired when the driver reloads; drain the node and reboot it",
        )

    # "None" is this field's healthy value, not a missing one (value() would read it as missing).
    printed = (gpu.get("recovery_action", xml) or "").strip()
    action = "None" if printed == "None" else value(printed)
    if action is not None:
        out.checked.add("gpu-reset-required")
        if action in _RECOVERY_CRITICAL:
            out.add(
                "gpu-reset-required",
                "critical",
                label,
                f"nvidia-smi's GPU Recovery Action is {action!r}: the GPU is not usable until then; drain the node and "
                "reboot it; if it recurs, open an Azure support case",
            )
        elif action != "None":
            out.add(
                "gpu-reset-required",
                "warning",
                label,
                f"nvidia-smi's GPU Recovery Action is {action!r}: stop the GPU-to-GPU (P2P) traffic of the jobs on this "
                "node, then check it again",
            )

    reasons = {
        "HW slowdown": gpu.get("hw_slowdown", xml),
        "HW thermal slowdown": gpu.get("hw_thermal_slowdown", xml),
        "HW power brake": gpu.get("hw_power_brake_slowdown", xml),
    }
    states = {name: _active(raw) for name, raw in reasons.items()}
    if any(state is not None for state in states.values()):
        out.checked.add("hw-slowdown")
    active = [name for name, state in states.items() if state]
    if active:
        out.add(
            "hw-slowdown",
            "warning",
            label,
            f"{', '.join(active)} active: the GPU runs below its clocks (too hot, or the board's power brake is asserted); "
            "if it lasts under load, check the node's cooling and power and open an Azure support case",
        )

    widest, current = _link_width(gpu.get("pcie_width_max", xml)), _link_width(gpu.get("pcie_width_current", xml))
    if widest is not None and current is not None:
        out.checked.add("pcie-degraded")
        if current < widest:
            out.add(
                "pcie-degraded",
                "warning",
                label,
                f"PCIe link at x{current} of x{widest}: host-to-GPU transfers run at a fraction of their speed; the link "
                "may narrow while the GPU is idle, so check again under load, and if it stays narrow drain the node and "
                "redeploy it",
            )

    state, status = value(gpu.get("fabric_state", xml)), value(gpu.get("fabric_status", xml))
    if state is not None:  # "N/A" on GPUs that are not on an NVSwitch fabric
        out.checked.add("fabric-not-ready")
        if state != "Completed" or (status is not None and status != "Success"):
            out.add(
                "fabric-not-ready",
                "critical",
                label,
                f"NVSwitch fabric state {state!r}, status {status or 'N/A'!r} (ready is 'Completed' / 'Success'): CUDA "
                "fails on this GPU ('system not yet initialized'); check nvidia-fabricmanager on the node, then drain it "
                "and reset the GPUs (reboot); if the fabric does not come up, open an Azure support case",
            )


# The --query-gpu and --query-remapped-rows fields the health ids read, as nvidia-smi's --help-query-gpu names them
# (quoted in netdata/netdata#10362 and #15755) and as Azure's HPC health checks query them (Azure/azurehpc-health-
# checks customTests/azure_gpu_ecc.nhc: ecc.errors.uncorrected.volatile.sram/.dram, remapped_rows.pending/.failure).
_CSV_VOLATILE = ("ecc.errors.uncorrected.volatile.total", "ecc.errors.uncorrected.volatile.dram",
                 "ecc.errors.uncorrected.volatile.sram", "ecc.errors.uncorrected.volatile.device_memory")  # fmt: skip
_CSV_AGGREGATE = ("ecc.errors.uncorrected.aggregate.total", "ecc.errors.uncorrected.aggregate.dram",
                  "ecc.errors.uncorrected.aggregate.sram", "ecc.errors.uncorrected.aggregate.device_memory")  # fmt: skip
_CSV_SLOWDOWN = ("clocks_event_reasons.hw_slowdown", "clocks_throttle_reasons.hw_slowdown",
                 "clocks_event_reasons.hw_thermal_slowdown", "clocks_throttle_reasons.hw_thermal_slowdown",
                 "clocks_event_reasons.hw_power_brake_slowdown", "clocks_throttle_reasons.hw_power_brake_slowdown")  # fmt: skip


def _flag(raw: str | None) -> bool | None:
    """Yes/No, Active/Not Active, or a count (Azure's checks read remapped_rows.pending as a number)."""
    text = value(raw)
    if text is None:
        return None
    if text in ("Yes", "Active"):
        return True
    if text in ("No", "Not Active"):
        return False
    number = integer(text)
    return None if number is None else number > 0


def _csv_health(t: Text, out: _Collector) -> bool:
    """``nvidia-smi --query-gpu=...`` / ``--query-remapped-rows=...`` CSV with its header: each row one GPU."""
    records = nvidia_formats.query_csv_records(t)
    read = False
    for number, record in enumerate(records or ()):
        bus = value(record.get("pci.bus_id"))
        label = bus if bus and PCI_ADDRESS.fullmatch(bus) else value(record.get("index")) or str(number)
        volatile = [(name, count) for name in _CSV_VOLATILE if (count := integer(record.get(name))) is not None]
        aggregate = [(name, count) for name in _CSV_AGGREGATE if (count := integer(record.get(name))) is not None]
        if volatile or aggregate:
            read = True
            out.checked.add("ecc-uncorrectable")
        if sum(count for _, count in volatile):
            detail = ", ".join(f"{name} {count}" for name, count in volatile if count)
            out.add(
                "ecc-uncorrectable",
                "critical",
                label,
                f"uncorrectable ECC errors since the driver loaded ({detail}): drain the node and reset the GPU (reboot "
                "the node); if errors return, open an Azure support case",
            )
        elif sum(count for _, count in aggregate):
            detail = ", ".join(f"{name} {count}" for name, count in aggregate if count)
            out.add("ecc-uncorrectable", "warning", label, f"uncorrectable ECC errors in this GPU's life ({detail}), none "
                    "since the driver loaded: watch for new ones and for pending row remaps")  # fmt: skip
        pending, failure = _flag(record.get("remapped_rows.pending")), _flag(record.get("remapped_rows.failure"))
        if pending is not None or failure is not None:
            read = True
            out.checked.update(("row-remap-failure", "row-remap-pending"))
        if failure:
            out.add("row-remap-failure", "critical", label, "row remapping failed: a memory bank has no spare row left; "
                    "drain the node and open an Azure support case (the GPU needs replacing)")  # fmt: skip
        if pending:
            out.add("row-remap-pending", "critical", label, "a row remap is pending: it takes effect only after a GPU "
                    "reset; drain the node and reboot it")  # fmt: skip
        retired = _flag(record.get("retired_pages.pending"))
        if retired is not None:
            read = True
            out.checked.add("retired-pages-pending")
            if retired:
                out.add("retired-pages-pending", "critical", label, "memory pages are pending retirement: they are "
                        "retired when the driver reloads; drain the node and reboot it")  # fmt: skip
        slowdown = [name for name in _CSV_SLOWDOWN if record.get(name) is not None]
        if slowdown:
            read = True
            out.checked.add("hw-slowdown")
            active = [name for name in slowdown if _flag(record.get(name))]
            if active:
                out.add("hw-slowdown", "warning", label, f"{', '.join(active)} active: the GPU runs below its clocks; "
                        "if it lasts under load, check the node's cooling and power and open an Azure support case")  # fmt: skip
    return read


def _table_health(t: Text, out: _Collector) -> bool:
    """The default table's "Volatile Uncorr. ECC" column: the count of volatile uncorrectable ECC errors."""
    header_line = next((n for n, line in enumerate(t.lines) if "Bus-Id" in line and "Volatile Uncorr. ECC" in line), None)
    table = box_table(t.lines, header_line) if header_line is not None else None
    if table is None:
        return False
    ecc_at = table.label_position("Volatile Uncorr. ECC")
    name_at = table.label_position("Name")
    bus_at = table.label_position("Bus-Id")
    out.checked.add("gpu-lost")
    for record in table.records:
        raw = table.cell(record, ecc_at)
        count = integer(raw)
        words = (table.cell(record, name_at) or "").split()
        bus = (table.cell(record, bus_at) or "").split()
        label = bus[0] if bus and PCI_ADDRESS.fullmatch(bus[0]) else (words[0] if words else None)
        if count is None:
            if raw is not None and _ERR in raw:
                out.skip("ecc-uncorrectable", label, "nvidia-smi printed ERR! for the volatile uncorrectable ECC count")
            continue
        out.checked.add("ecc-uncorrectable")
        if count:
            out.add(
                "ecc-uncorrectable",
                "critical",
                label,
                f"{count} volatile uncorrectable ECC error(s) (nvidia-smi's Volatile Uncorr. ECC column): drain the node "
                "and reset the GPU (reboot the node); if errors return, open an Azure support case",
            )
    return True


# nvidia-smi prints ERR! in a field whose NVML query failed. A GPU whose name reads ERR!, or most of whose fields do,
# is one the driver cannot reach (Lambda's page on GSP RPC timeouts shows it: tests/fixtures/health/38); a single
# field (the power draw, the MIG mode of a GPU whose driver predates MIG) is a reading that failed, which Azure's
# HPC diagnostics call transient (https://github.com/Azure/azhpc-diagnostics/issues/77, fixture 39): a warning.
_ERR = "ERR!"


def _err_cells(t: Text, out: _Collector) -> bool:
    """GPU records of the default table (whole tables, or records cut out of one) with ERR! in their cells."""
    read = False
    record: list[tuple[str, ...]] = []
    for line in (*t.complete, ""):
        row = cells(line)
        if row is not None and len(row) == 3:
            record.append(row)
            continue
        if record and record[0][0].split()[:1] and integer(record[0][0].split()[0]) is not None:
            read = _err_record(record, out) or read
        record = []
    return read


def _err_record(record: Sequence[tuple[str, ...]], out: _Collector) -> bool:
    first = record[0]
    index_word, _, rest = first[0].strip().partition(" ")
    bus_words = first[1].split()
    if not bus_words or not (PCI_ADDRESS.fullmatch(bus_words[0]) or bus_words[0] == _ERR):
        return False  # not a GPU record of nvidia-smi's table (the Processes table has no bus id)
    out.checked.add("gpu-lost")
    label = bus_words[0] if PCI_ADDRESS.fullmatch(bus_words[0]) else index_word
    errors = sum(cell.split().count(_ERR) for row in record for cell in row)
    if not errors:
        return True
    fields = sum(len(cell.split()) for row in record for cell in row)
    name_unread = rest.strip().split()[:1] == [_ERR]
    shown = " | ".join(shorten(cell.strip(), 40) for row in record for cell in row if _ERR in cell)
    if name_unread or errors * 2 >= fields - errors:
        out.add(
            "gpu-lost",
            "critical",
            label,
            f"nvidia-smi cannot read GPU {index_word} ({errors} field(s) read ERR!: {shown}): the driver cannot reach "
            "it; drain the node and reboot it; if it recurs, open an Azure support case for the hardware",
        )
    else:
        out.add(
            "gpu-lost",
            "warning",
            label,
            f"nvidia-smi could not read {errors} field(s) of GPU {index_word} ({shown}): often a reading that failed "
            "once; run nvidia-smi again, and if it persists read the kernel log for Xid errors on this GPU",
        )
    return True


def _topology_nvlinks(report: SmiReport, out: _Collector) -> None:
    """``nvidia-smi topo -m`` on a size whose GPUs are NVLink-connected: a GPU with no NV# path to any peer has lost
    its NVLinks (Azure/azhpc-images#443: an NC80adis_H100_v5 showing SYS between its GPUs, cured by a reboot)."""
    linked: dict[int, bool] = {}
    for link in report.topology:
        linked[link.gpu_index] = linked.get(link.gpu_index, False) or bool(link.nvlinks)
    out.checked.add("nvlink-inactive")
    for gpu, has_nvlink in sorted(linked.items()):
        if not has_nvlink:
            _nvlink_finding(out, str(gpu), [], 0, True, True)


def _nvlink_finding(
    out: _Collector, gpu: str | None, inactive: Sequence[int], total: int, notice: bool, expected: bool | None
) -> None:
    every = notice or (total > 0 and len(inactive) == total)
    if not inactive and not notice:
        return
    links = "all links" if notice and not total else f"link(s) {', '.join(map(str, inactive))} of {total}"
    action = (
        "GPU-to-GPU traffic falls back to PCIe or fails (NCCL jobs hang or slow down); drain the node and reset its "
        "GPUs (reboot); if links stay down, reimage the node or open an Azure support case"
    )
    if not every:
        out.add("nvlink-inactive", "critical", gpu, f"NVLink {links} inactive: {action}")
    elif expected is True:
        out.add("nvlink-inactive", "critical", gpu, f"NVLink {links} inactive on a size with NVLink: {action}")
    elif expected is None:
        out.add(
            "nvlink-inactive",
            "warning",
            gpu,
            f"NVLink {links} inactive: on a size with NVLink (ND A100/H100/H200) this is critical ({action}); a PCIe GPU "
            "without an NVLink bridge shows the same",
        )


def _dcgmi_link_status(t: Text, out: _Collector, expected: bool | None) -> bool:
    """``dcgmi nvlink --link-status``: per "gpuId N:" a row of U (up), D (down), X (disabled), _ (not supported)."""
    if not any(line.strip() == "NvLink Link Status" or "|  NvLink Link Status  |" in line for line in t.lines):
        return False
    gpu: str | None = None
    read = False
    for line in t.complete:
        stripped = line.strip()
        if stripped.startswith("gpuId ") and stripped.endswith(":"):
            number = integer(stripped[6:-1])
            gpu = str(number) if number is not None else None
            continue
        if stripped.startswith("NvSwitches"):
            gpu = None
            continue
        states = stripped.split()
        if gpu is None or not states or not all(state in ("U", "D", "X", "_") for state in states):
            continue
        read = True
        links = [number for number, state in enumerate(states) if state != "_"]
        down = [number for number, state in enumerate(states) if state == "D"]
        _nvlink_finding(out, gpu, down, len(links), False, expected)
        gpu = None
    if read:
        out.checked.add("nvlink-inactive")
    return read


_KERNEL_MARKERS = ("NVRM:", " kernel: ", "kernel: ")
_XID = "NVRM: Xid ("


def _kernel_log(t: Text, out: _Collector, *, any_kernel_log: bool) -> bool:
    """Xid lines of the NVIDIA kernel module in dmesg or journalctl form (any prefix), and lost-GPU lines anywhere.

    A kernel log is judged for Xids when it carries the NVIDIA module's lines ("NVRM:"), or any kernel log when
    the caller named NVIDIA as the vendor: an AMD node's log without NVRM lines says nothing about Xids. A lost
    GPU is reported by the kernel module ("has fallen off the bus") and by nvidia-smi itself ("Unable to
    determine the device handle for GPU ...: GPU is lost"), so those lines count in any input. A line the output
    was cut in is read only as far as it is whole (``_whole_last_line``): "Xid (...): 7" may be the start of 79.
    """
    last = _whole_last_line(t)
    lines = t.complete + ((last,) if last is not None else ())
    kernel = (
        t.prefix == "journal-kernel"
        or any(marker in line for line in lines for marker in _KERNEL_MARKERS)
        or any(_dmesg_stamp(line) for line in lines)
    )
    judged = kernel and (any_kernel_log or any("NVRM" in line for line in lines))
    lost = _lost_gpus(lines)
    reset = _reset_required(lines)
    if judged:
        out.checked.update(("xid", "gpu-lost", "gpu-reset-required"))
        _xid_findings(lines, out)
    if lost:
        out.checked.add("gpu-lost")
    for bus, line in lost.items():
        out.add("gpu-lost", "critical", bus, _lost_message(bus, line))
    if reset:
        out.checked.add("gpu-reset-required")
    for bus, line in reset.items():
        where = f" at {bus}" if bus else ""
        out.add(
            "gpu-reset-required",
            "critical",
            bus,
            f"the driver says the GPU{where} must be reset before it can be used again ({line}): CUDA fails on it until "
            "then; drain the node and reboot it; if it recurs, open an Azure support case",
        )
    return judged or bool(lost) or bool(reset)


# What the NVIDIA driver and NVML print when a GPU is unusable until it is reset (or the node rebooted). NVML's
# return code NVML_ERROR_RESET_REQUIRED ("The GPU requires a reset before it can be used again", nvml.h) prints as
# "GPU requires reset" (leptonai/gpud, nvml errors: ErrGPURequiresReset); the kernel module's status
# NV_ERR_RESET_REQUIRED (0x62) in its assertions (scitix/sichek#51, fixture 40); "GPU marked for reset" after back to
# back GSP RPC timeouts and Xid 154's recovery action "GPU Reset Required" / "Node Reboot Required" / "Drain and
# Reset" (NVIDIA/open-gpu-kernel-modules#446, fixture 41; the actions are nvidia-smi -q's GPU Recovery Action); "may
# need to be reset" when GSP cannot boot (open-gpu-kernel-modules#1230, fixture 42); and uvm's "requiring os reboot to
# recover" (the global fatal error it reports with Xid 154, open-gpu-kernel-modules#1134).
_RESET_MARKERS = (
    "NV_ERR_RESET_REQUIRED",
    "GPU requires reset",
    "GPU marked for reset",
    "may need to be reset",
    "requiring os reboot to recover",
    "(GPU Reset Required)",
    "(Node Reboot Required)",
    "(Drain and Reset)",
)


def _reset_required(lines: Sequence[str]) -> dict[str | None, str]:
    found: dict[str | None, str] = {}
    for number, line in enumerate(lines):
        if any(marker in line for marker in _RESET_MARKERS):
            bus = _pci_address(line) or next(
                (address for nearby in (*reversed(lines[max(0, number - 3) : number]), *lines[number + 1 : number + 4])
                 if (address := _pci_address(nearby))),
                None,
            )
            found.setdefault(bus, shorten(line.strip(), 160))
    if None in found and len(found) > 1:
        del found[None]  # the same event, named with its GPU on another line
    return found


# What the NVIDIA kernel module and nvidia-smi print for a GPU the driver cannot use. Beyond the three, the
# kernel module's "RmInitAdapter failed" / "rm_init_adapter failed": the driver could not initialise the GPU, and
# nvidia-smi then reports "No devices were found" for it (tests/fixtures/health/18, from
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/862; the same pair in issues 789 there and in
# NVIDIA/gpu-operator#1146). The GPU is out of service as surely as one fallen off the bus.
_LOST_MARKERS = ("fallen off the bus", "GPU is lost", "Unable to determine the device handle")
_INIT_FAILED_MARKERS = ("RmInitAdapter failed", "rm_init_adapter failed")


def _whole_last_line(t: Text) -> str | None:
    """The last line of an input that does not end with a line end, where what the checks read of it is whole.

    Such a line may have been cut (an exec stopped by its timeout), or may be whole: a line pasted from a ticket,
    ``echo -n``, an editor that adds no final line end. Dropping it would hide an Xid 79 on the last line and still
    claim the log checked. What is read of it is whole when an Xid's code is followed by its comma ("Xid (PCI:...):
    79," cannot be the start of another code), or when a lost-GPU marker stands after the GPU's address in full
    (nvidia-smi's "...: GPU is lost", the kernel's "... has fallen off the bus", "RmInitAdapter failed"): the rest
    of the line is only the message, shortened anyway.
    """
    if not t.partial or not t.lines:
        return None
    last = t.lines[-1]
    at = last.find(_XID)
    parsed = _xid_line(last[at + len(_XID) :]) if at >= 0 else None
    if parsed is not None and last[at + len(_XID) :].partition("): ")[2].partition(",")[1]:
        return last
    if any(marker in last for marker in _LOST_MARKERS[:2] + _INIT_FAILED_MARKERS):
        return last
    return None


def _lost_gpus(lines: Sequence[str]) -> dict[str | None, str]:
    lost: dict[str | None, str] = {}
    for number, line in enumerate(lines):
        if any(marker in line for marker in _LOST_MARKERS + _INIT_FAILED_MARKERS):
            bus = _pci_address(line) or next(
                (found for earlier in reversed(lines[max(0, number - 3) : number]) if (found := _pci_address(earlier))), None
            )
            lost.setdefault(bus, shorten(line.strip(), 160))
    return lost


def _lost_message(bus: str | None, line: str) -> str:
    at = f" at {bus}" if bus else ""
    if any(marker in line for marker in _INIT_FAILED_MARKERS):
        return (
            f"the driver could not initialise the GPU{at} ({line}): it is not usable (nvidia-smi shows no device for it); "
            "drain the node and reboot or reimage it; if it recurs, open an Azure support case for the hardware"
        )
    return (
        f"the GPU{at} is lost ({line}): the driver cannot reach it and it stays lost until the VM restarts; drain the "
        "node and reboot or reimage it; if it recurs, open an Azure support case for the hardware"
    )


def _xid_findings(lines: Sequence[str], out: _Collector) -> None:
    catalog = load_xid_catalog()
    xids: dict[tuple[str | None, int], tuple[int, str]] = {}
    for line in lines:
        at = line.find(_XID)
        if at < 0:
            continue
        parsed = _xid_line(line[at + len(_XID) :])
        if parsed is not None:
            bus, code, detail = parsed
            seen, first = xids.get((bus, code), (0, detail))
            xids[(bus, code)] = (seen + 1, first)
    for (bus, code), (seen, detail) in sorted(xids.items(), key=lambda item: (item[0][0] or "", item[0][1])):
        entry = catalog.get(code)
        times = f", {seen} times" if seen > 1 else ""
        where = f" on PCI {bus}" if bus else ""
        said = f"; the log says: {detail}" if detail else ""
        if entry is None:
            out.add(
                "xid",
                "warning",
                bus,
                f"Xid {code}{where}{times}: not in NVIDIA's Xid catalog ({CATALOG_URL}); look it up for this driver and "
                f"GPU{said}",
            )
            continue
        severity = entry.severity
        if entry.immediate == _NVLINK5_WORKFLOW and detail.split()[1:2] == ["Fatal"]:
            # The driver names the NVLink5 error's severity itself ("NETIR_LINK_EVT Fatal XC0 ..." against
            # "SAW_MVB Nonfatal ..."): a Fatal one takes the link down until the GPUs are reset (gpud grades the same
            # lines so, leptonai/gpud#1160 and #1174; fixtures 48, 49).
            severity = "critical"
        out.add(
            "xid",
            severity,
            bus,
            f"Xid {code} ({entry.mnemonic}: {entry.description}){where}{times}: {entry.action} (NVIDIA's immediate action: "
            f"{entry.immediate or 'none given'}; {entry.source}){said}",
        )


# nvidia-smi -q's "GPU Recovery Action" (R570 on): None, Reset, Reboot, Drain P2P, Drain and Reset (nvidia-smi's manual,
# https://docs.nvidia.com/deploy/nvidia-smi/index.html); the same actions Xid 154 announces.
_RECOVERY_CRITICAL = frozenset({"Reset", "Reboot", "Drain and Reset", "GPU Reset Required", "Node Reboot Required"})


_NVLINK5_WORKFLOW = "WORKFLOW_NVLINK5_ERR"


def _dmesg_stamp(line: str) -> bool:
    """ "[ 1843.308145] ..." or "[Fri Aug 30 11:43:09 2024] ...": a dmesg line (a markdown quote "> " before it)."""
    stripped = line.lstrip("> ").lstrip()
    inside, closing, _ = stripped[1:40].partition("]")
    if not stripped.startswith("[") or not closing:
        return False
    seconds, dot, fraction = inside.strip().partition(".")
    if dot and seconds.isascii() and seconds.isdigit() and fraction.isdigit():
        return True
    words = inside.split()
    return len(words) == 5 and words[3].count(":") == 2 and words[4].isascii() and words[4].isdigit() and len(words[4]) == 4


def _xid_line(rest: str) -> tuple[str | None, int, str] | None:
    """After "NVRM: Xid (": "PCI:0000:9b:00): 119, pid=..., <message>" -> (bus, code, message)."""
    inside, closing, after = rest.partition("): ")
    if not closing or len(inside) > 24:
        return None
    bus = inside.removeprefix("PCI:")
    code_text, comma, detail = after.partition(",")
    code = integer(code_text) if len(code_text) <= 4 else None
    if code is None:
        return None
    return (bus if PCI_ADDRESS.fullmatch(bus) else None), code, shorten(detail.strip(), 160) if comma else ""


def _pci_address(line: str) -> str | None:
    for word in line.replace(",", " ").replace("(", " ").replace(")", " ").split():
        # "PCI:0000:9b:00" in NVRM lines; "GPU0000:07:00.0" in nvidia-smi's "Unable to determine the device handle".
        candidate = word.removeprefix("PCI:").removeprefix("GPU").rstrip(":.")
        if len(candidate) <= 16 and PCI_ADDRESS.fullmatch(candidate):
            return candidate
    return None


def _yes_no(raw: object) -> bool | None:
    text = value(raw)
    return {"Yes": True, "No": False}.get(text) if text is not None else None


def _active(raw: object) -> bool | None:
    text = value(raw)
    return {"Active": True, "Not Active": False}.get(text) if text is not None else None


def _link_width(raw: object) -> int | None:
    text = value(raw)
    return integer(text.removesuffix("x")) if text is not None and text.endswith("x") else None


# ---------------------------------------------------------------- AMD


def _read_amd(t: Text, out: _Collector) -> bool:
    recognized = False
    for document in amd_formats.json_documents(t.raw):
        for index, fields in amd_formats.json_devices(document):
            recognized = _amd_ecc(str(index), fields, out) or recognized
    recognized = _amdgpu_kernel_ras(t, out) or recognized
    return _amd_text_ecc(t, out) or _rocm_smi_ras(t, out) or recognized


# The amdgpu kernel driver's uncorrectable RAS reports. Its messages: "uncorrectable hardware error(ERREVENT_ATHUB_
# INTERRUPT) detected!" (fixtures 43 on MI300X, 44 on MI50, from ROCm/legacy-rocm-build#4021 and #1886) and "N
# uncorrectable hardware errors detected in <block> block" (amdgpu_ras.c, its per-block count); and the ACA banks it
# dumps under "[Hardware Error]: aca entry[N].STATUS=0x...", whose STATUS bits are those of amdgpu_aca.h (Linux,
# drivers/gpu/drm/amd/amdgpu): UC 61, PCC 57, UECC 45, DEFERRED 44, POISON 43 - any of them is an error the hardware did
# not correct (deferred and poisoned data are uncorrectable data not yet consumed). A bank with none of them (a
# corrected error) is not a finding. A log without such a line does not say the GPU had none (logs rotate): no
# "checked" from it.
_ACA_STATUS = ".STATUS=0x"
_ACA_UNCORRECTED_BITS = {61: "UC", 57: "PCC", 45: "UECC", 44: "deferred", 43: "poison"}


def _amdgpu_kernel_ras(t: Text, out: _Collector) -> bool:
    if "amdgpu" not in t.raw:
        return False
    found: dict[str | None, str] = {}
    for line in t.complete:
        if "amdgpu" not in line:
            continue
        lowered = line.lower()
        if "uncorrectable hardware error" in lowered:
            found.setdefault(_pci_address(line), shorten(line.strip(), 160))
            continue
        at = line.find(_ACA_STATUS)
        if at < 0 or "aca entry" not in line:
            continue
        digits = line[at + len(_ACA_STATUS) : at + len(_ACA_STATUS) + 16]
        status = int(digits, 16) if len(digits) == 16 and all(c in "0123456789abcdefABCDEF" for c in digits) else None
        bits = [name for bit, name in _ACA_UNCORRECTED_BITS.items() if status is not None and status >> bit & 1]
        if bits:
            found.setdefault(_pci_address(line), f"ACA bank with {', '.join(bits)} set: {shorten(line.strip(), 120)}")
    for bus, line in found.items():
        _ras(out, bus, f"the amdgpu driver reports an uncorrectable error ({line})")
    return bool(found)


def _amd_ecc(gpu: str | None, fields: Mapping[str, object], out: _Collector) -> bool:
    """amd-smi metric --ecc ("ecc": totals) and --ecc-blocks ("ecc_blocks": per block), as --json prints them."""
    read = False
    ecc = fields.get("ecc")
    if isinstance(ecc, Mapping):
        total = integer(ecc.get("total_uncorrectable_count"))
        if total is not None:
            read = True
            if total:
                _ras(out, gpu, f"{total} uncorrectable RAS (ECC) error(s) in total")
    blocks = fields.get("ecc_blocks")
    if isinstance(blocks, Mapping):
        for block, counts in blocks.items():
            count = integer(counts.get("uncorrectable_count")) if isinstance(counts, Mapping) else None
            if count is not None:
                read = True
                if count:
                    _ras(out, gpu, f"{count} uncorrectable RAS error(s) in block {block}")
    if read:
        out.checked.add("ras-uncorrectable")
    return read


def _amd_text_ecc(t: Text, out: _Collector) -> bool:
    """amd-smi metric --ecc / --ecc-blocks as text: "GPU: N", then "ECC:" or a block ("UMC:") and its counts.

    Lines cut out of that output (a grep of one block) are read too, without a GPU.
    """
    gpu: str | None = None
    block: str | None = None
    read = False
    for line in t.complete:
        stripped = line.strip()
        kind, colon, rest = stripped.partition(": ")
        if line[:1] not in (" ", "\t") and colon and kind == "GPU":
            number = integer(rest)
            gpu, block = (str(number) if number is not None else None), None
            continue
        if stripped.endswith(":") and " " not in stripped:
            block = stripped[:-1]
            continue
        name = kind.upper()
        if name not in ("TOTAL_UNCORRECTABLE_COUNT", "UNCORRECTABLE_COUNT") or not colon:
            continue
        count = integer(rest)
        if count is None:
            continue
        read = True
        if count:
            where = f" in block {block}" if block and block != "ECC" and name == "UNCORRECTABLE_COUNT" else " in total"
            _ras(out, gpu, f"{count} uncorrectable RAS error(s){where}")
    if read:
        out.checked.add("ras-uncorrectable")
    return read


def _rocm_smi_ras(t: Text, out: _Collector) -> bool:
    """``rocm-smi --showrasinfo``: per "GPU[N]:" a table of Block, Status, Correctable Error, Uncorrectable Error."""
    gpu: str | None = None
    in_table = False
    read = False
    for line in t.complete:
        stripped = line.strip()
        if stripped.startswith("GPU[") and "]" in stripped[:10]:
            number = integer(stripped[4 : stripped.index("]")])
            gpu = str(number) if number is not None else None
            in_table = False
            continue
        if "Uncorrectable Error" in stripped and "Block" in stripped:
            in_table = True
            continue
        words = stripped.split()
        if not in_table or len(words) != 4:
            in_table = in_table and bool(words) and not stripped.startswith(("_", "="))
            continue
        count = integer(words[3])
        if count is None or integer(words[2]) is None:
            continue
        read = True
        if count:
            _ras(out, gpu, f"{count} uncorrectable RAS error(s) in block {words[0]} (status {words[1]})")
    if read:
        out.checked.add("ras-uncorrectable")
    return read


def _ras(out: _Collector, gpu: str | None, what: str) -> None:
    out.add(
        "ras-uncorrectable",
        "critical",
        gpu,
        f"{what}: data on this GPU may be corrupt; drain the node and reset the GPU (reboot the node); if errors return "
        "or the bad-page threshold is reached (amd-smi bad-pages), open an Azure support case",
    )


# ---------------------------------------------------------------- Node Problem Detector conditions


@dataclass(frozen=True)
class GpuConditionType:
    type: str
    severity: Severity  # when the condition is True
    advice: str


# The GPU node conditions the AKS Node Problem Detector sets ("GPU only" rows of
# https://learn.microsoft.com/azure/aks/node-problem-detector, and https://learn.microsoft.com/azure/aks/gpu-health-monitoring).
# The two pages disagree on one name: the table says XIDErrors, the GPU page's list GPUXIDErrors; both are read.
# NPD's convention: status "True" means the problem is present. AKS runs these checks only on its GPU sizes
# (the page names Standard_ND96asr_v4 and Standard_ND96isr_H100_v5) and not with --gpu-driver none.
GPU_CONDITIONS: dict[str, GpuConditionType] = {
    condition.type: condition
    for condition in (
        GpuConditionType(
            "GPUMissing",
            "critical",
            "nvidia-smi sees fewer GPUs than the VM size has (a GPU failed or fell off the bus): drain the node and reimage "
            "it; if it recurs open an Azure support case",
        ),
        GpuConditionType(
            "XIDErrors",
            "critical",
            "the kernel log holds Xid errors: read them (`aksgpu smi health` on the node's `journalctl -k`) and act on the "
            "codes; most need the node drained and rebooted",
        ),
        GpuConditionType(
            "GPUXIDErrors",
            "critical",
            "the kernel log holds Xid errors: read them (`aksgpu smi health` on the node's `journalctl -k`) and act on the "
            "codes; most need the node drained and rebooted",
        ),
        GpuConditionType(
            "NVLinkStatusInactive",
            "critical",
            "NVLink is inactive between GPUs: multi-GPU jobs slow down or hang; drain the node and reboot it; if it "
            "persists reimage the node or open an Azure support case",
        ),
        GpuConditionType(
            "IBLinkFlapping",
            "critical",
            "an InfiniBand link goes up and down: multi-node jobs on this node slow down or fail; drain the node and open "
            "an Azure support case",
        ),
        GpuConditionType(
            "GPUClockThrottling",
            "warning",
            "the GPU clocks are throttled: check temperature and power (`nvidia-smi -q -d PERFORMANCE`); if it lasts, open "
            "an Azure support case",
        ),
        GpuConditionType(
            "UnhealthyNvidiaDevicePlugin",
            "critical",
            "AKS's managed NVIDIA device plugin service is not active: the GPUs are not schedulable; reimage the node",
        ),
        # AKS-managed GPU pools (gpuProfile.nvidia.managementMode Managed) run DCGM as node services, and NPD reports
        # this condition beside UnhealthyNvidiaDevicePlugin ("GPU health signals",
        # https://learn.microsoft.com/azure/aks/aks-managed-gpu-nodes, read 2026-12-01; AKS's node image tests check
        # both conditions: ValidateNPDUnhealthyNvidiaDCGMServices in Azure/AgentBaker e2e).
        GpuConditionType(
            "UnhealthyNvidiaDCGMServices",
            "critical",
            "AKS's managed NVIDIA DCGM services are not active: the GPU's health watches and metrics are blind, and the "
            "GPU may be faulty; reimage the node; if it recurs open an Azure support case",
        ),
    )
}


@dataclass(frozen=True)
class GpuCondition:
    type: str
    status: str  # "True" (the problem is present), "False", "Unknown", or what the object says
    reason: str | None
    message: str | None
    last_transition: str | None
    severity: Severity
    advice: str

    @property
    def active(self) -> bool:
        return self.status == "True"


def read_gpu_conditions(node: Mapping[str, Any]) -> tuple[GpuCondition, ...]:
    """The AKS NPD GPU conditions on a node object (``kubectl get node -o json``), in the order the node lists them.

    Any shape is read without error: a node with no status, conditions that are no list or entries that are no
    objects give no conditions. An empty result means NPD reports no GPU condition on this node (not a GPU size
    AKS monitors, --gpu-driver none, or NPD not running): nothing was checked, which is not "healthy".
    """
    status = node.get("status") if isinstance(node, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    found: list[GpuCondition] = []
    for condition in conditions if isinstance(conditions, list) else ():
        if not isinstance(condition, Mapping):
            continue
        kind = GPU_CONDITIONS.get(str(condition.get("type")))
        if kind is None:
            continue
        found.append(
            GpuCondition(
                type=kind.type,
                status=str(condition.get("status") or "Unknown"),
                reason=_text(condition.get("reason")),
                message=_text(condition.get("message")),
                last_transition=_text(condition.get("lastTransitionTime")),
                severity=kind.severity,
                advice=kind.advice,
            )
        )
    return tuple(found)


def _text(raw: object) -> str | None:
    return shorten(raw, 300) if isinstance(raw, str) and raw.strip() else None


def active_conditions(conditions: Iterable[GpuCondition]) -> list[GpuCondition]:
    return [condition for condition in conditions if condition.active]
