"""GPU health from NVIDIA's tools: nvidia-smi -q (text or -x), the default table (its ECC column and ERR! cells),
--query-gpu / --query-remapped-rows CSV, nvlink -s, topo -m and dcgmi nvlink --link-status; the kernel log beside
them is ``kernel_log``'s. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence

from aks_gpu.gpu.health.kernel_log import read_kernel_log
from aks_gpu.gpu.health.report import Collector
from aks_gpu.gpu.smi.model import SmiReport
from aks_gpu.gpu.smi.nvidia import nvlink_status
from aks_gpu.gpu.smi.nvidia_csv import query_csv_records
from aks_gpu.gpu.smi.nvidia_query import QUERY_FIELDS, QueryGpu, QueryLog
from aks_gpu.gpu.smi.text import PCI_ADDRESS, Text, box_table, cells, integer, shorten, value


def read_nvidia(
    t: Text, log: QueryLog | None, out: Collector, nvlink_expected: bool | None, vendors_named: bool
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
    status = nvlink_status(t)
    if status is not None:
        recognized = True
        out.checked.add("nvlink-inactive")
        for entry in status:
            inactive = [link.link for link in entry.links if link.state != "active"]
            label = str(entry.gpu.index) if entry.gpu.index is not None else None
            expected, why = nvlink_expected, "on a size with NVLink"
            if expected is None and sxm_module(entry.gpu.name):
                expected, why = True, f"on an SXM module ({entry.gpu.name}), which has NVLink"
            _nvlink_finding(out, label, inactive, len(entry.links), entry.all_inactive_notice, expected, why)
    if log is None and "," in t.raw:
        recognized = _csv_health(t, out) or recognized
    recognized = _dcgmi_link_status(t, out, nvlink_expected) or recognized
    return read_kernel_log(t, out, any_kernel_log=vendors_named) or recognized


def _query_gpu_health(gpu: QueryGpu, xml: bool, out: Collector) -> None:
    label = gpu.bus_id

    def counts(field_name: str) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for path in QUERY_FIELDS[field_name][1 if xml else 0]:
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
    pending_pages = [_yes_no(gpu.fields.get(path)) for path in QUERY_FIELDS["retired_pending"][1 if xml else 0]]
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


def _csv_health(t: Text, out: Collector) -> bool:
    """``nvidia-smi --query-gpu=...`` / ``--query-remapped-rows=...`` CSV with its header: each row one GPU."""
    records = query_csv_records(t)
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


def _table_health(t: Text, out: Collector) -> bool:
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


def _err_cells(t: Text, out: Collector) -> bool:
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


def _err_record(record: Sequence[tuple[str, ...]], out: Collector) -> bool:
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


def topology_nvlinks(report: SmiReport, out: Collector) -> None:
    """``nvidia-smi topo -m`` on a size whose GPUs are NVLink-connected: a GPU with no NV# path to any peer has lost
    its NVLinks (Azure/azhpc-images#443: an NC80adis_H100_v5 showing SYS between its GPUs, cured by a reboot)."""
    linked: dict[int, bool] = {}
    for link in report.topology:
        linked[link.gpu_index] = linked.get(link.gpu_index, False) or bool(link.nvlinks)
    out.checked.add("nvlink-inactive")
    for gpu, has_nvlink in sorted(linked.items()):
        if not has_nvlink:
            _nvlink_finding(out, str(gpu), [], 0, True, True)


# What the output itself says about the hardware: an SXM module ("NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB") sits
# on an NVLink baseboard (HGX, DGX), its links wired to its peers, where the PCIe card of the same GPU has NVLink only
# through an optional bridge to one peer (https://www.nvidia.com/en-us/data-center/nvlink/: "NVLink is also available
# in A100 PCIe two-GPU configurations"; the A100 PCIe product brief, PB-10137-001, "NVLink Bridge Support").
_SXM = re.compile(r"(?:^|[ -])SXM[0-9]?(?:[ -]|$)", re.ASCII)


def sxm_module(name: str | None) -> bool:
    """Whether the GPU's product name says it is an SXM module (and so has NVLink)."""
    return name is not None and _SXM.search(name) is not None


def _nvlink_finding(
    out: Collector,
    gpu: str | None,
    inactive: Sequence[int],
    total: int,
    notice: bool,
    expected: bool | None,
    why: str = "on a size with NVLink",
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
        out.add("nvlink-inactive", "critical", gpu, f"NVLink {links} inactive {why}: {action}")
    elif expected is None:
        out.add(
            "nvlink-inactive",
            "warning",
            gpu,
            f"NVLink {links} inactive: on a size with NVLink (ND A100/H100/H200) this is critical ({action}); a PCIe GPU "
            "without an NVLink bridge shows the same",
        )


def _dcgmi_link_status(t: Text, out: Collector, expected: bool | None) -> bool:
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


# nvidia-smi -q's "GPU Recovery Action" (R570 on): None, Reset, Reboot, Drain P2P, Drain and Reset (nvidia-smi's manual,
# https://docs.nvidia.com/deploy/nvidia-smi/index.html); the same actions Xid 154 announces.
_RECOVERY_CRITICAL = frozenset({"Reset", "Reboot", "Drain and Reset", "GPU Reset Required", "Node Reboot Required"})


def _yes_no(raw: object) -> bool | None:
    text = value(raw)
    return {"Yes": True, "No": False}.get(text) if text is not None else None


def _active(raw: object) -> bool | None:
    text = value(raw)
    return {"Active": True, "Not Active": False}.get(text) if text is not None else None


def _link_width(raw: object) -> int | None:
    text = value(raw)
    return integer(text.removesuffix("x")) if text is not None and text.endswith("x") else None
