"""nvidia-smi's line and box layouts: the default table, -L, nvlink -s, topo -m and mig -lgip, and the reading rules
the other nvidia-smi parsers share (``mig_mode``). Pure: prepared text in, a report (or None: not this format) out.

The other formats have their own modules: -q and -q -x in ``nvidia_query``, --query-gpu and --query-compute-apps CSV
in ``nvidia_csv``. Where the output was cut short, only what is complete is read and the report says ``truncated``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from aks_gpu.gpu.smi.model import (
    GpuInfo,
    MigDevice,
    MigMode,
    MigProfile,
    NvLink,
    SmiError,
    SmiReport,
    TopologyLink,
    empty_report,
)
from aks_gpu.gpu.smi.text import (
    CUDA,
    NVIDIA_DRIVER,
    PCI_ADDRESS,
    BoxTable,
    Text,
    box_table,
    cells,
    decimal,
    first_line,
    identifier,
    integer,
    mib,
    table_cut,
    total_memory_mib,
    value,
    version,
)


def mig_mode(raw: object) -> MigMode | None:
    # nvidia-smi marks a mode change waiting for a GPU reset with "*" ("Disabled*"); the mode in force
    # until then is the one printed.
    text = value(raw)
    mode = text.rstrip("*").strip().capitalize() if text is not None else None
    return cast(MigMode, mode) if mode in ("Enabled", "Disabled") else None


def _word_after(text: str, label: str) -> str | None:
    """The whitespace-delimited word after ``label`` in ``text`` ("Driver Version: 565.57.01 ..." -> "565.57.01")."""
    at = text.find(label)
    if at < 0:
        return None
    words = text[at + len(label) :].split(None, 1)
    return words[0] if words else None


# --- the default table -------------------------------------------------------------------------------

_PERSISTENCE = ("On", "Off", "WDDM", "TCC", "N/A")


def _gpu_cell(cell: str) -> tuple[int, str | None] | None:
    """ "   0  NVIDIA H100 80GB HBM3          On  ": index, name, then the persistence mode (or, on Windows, the
    driver model). Long names are cut by nvidia-smi and keep their "..." here."""
    stripped = cell.strip()
    head, _, rest = stripped.partition(" ")
    index = integer(head) if len(head) <= 4 else None
    if index is None:
        return None
    rest = rest.strip()
    if rest in _PERSISTENCE:
        return index, None
    words = rest.rsplit(None, 1)
    if len(words) == 2 and words[1] in _PERSISTENCE:
        rest = words[0]
    return index, value(rest)


def parse_table(t: Text) -> SmiReport | None:
    lines = t.lines
    banner_line = next((n for n, line in enumerate(lines) if "NVIDIA-SMI " in line and "Driver Version:" in line), None)
    if banner_line is None and t.partial and lines and lines[-1].lstrip().startswith("| NVIDIA-SMI "):
        # The output stops inside the banner: nvidia-smi's table, of which nothing can be read.
        return replace(empty_report("nvidia", "nvidia-smi"), truncated=True)
    if banner_line is None:
        return None
    banner = cells(lines[banner_line])
    driver = cuda = None
    if banner is not None:
        driver = version(_word_after(banner[0], "Driver Version:"), NVIDIA_DRIVER)
        cuda = version(_word_after(banner[0], "CUDA Version:"), CUDA)

    gpus: list[GpuInfo] = []
    mig_devices: list[MigDevice] = []
    header_line = next((n for n in range(banner_line, len(lines)) if "Bus-Id" in lines[n] and "Name" in lines[n]), None)
    table = box_table(lines, header_line) if header_line is not None else None
    # nvidia-smi prints its header and at least one GPU whenever it prints the banner (no GPU: "No devices were
    # found", and no table): a banner without the header, or a header without its rule, was cut (`nvidia-smi | head`).
    complete = table is not None and table.complete
    if table is not None:
        gpus = _table_gpus(table)
        mig_title = first_line(lines, "MIG devices:", table.end)
        mig_table = box_table(lines, mig_title + 1, fixed_rows=False) if mig_title is not None else None
        for record in mig_table.records if mig_table is not None else ():
            numbers = [integer(word) for word in record[0][0].split()]
            if len(numbers) == 4 and all(number is not None for number in numbers):
                # The table names neither the profile nor the UUID (``nvidia-smi -L`` does).
                mig_devices.append(MigDevice(gpu_index=numbers[0], profile=None, uuid=None))
        if mig_table is not None and not mig_table.complete:
            complete = False
    if banner is None and not table_cut(t):
        return None  # "NVIDIA-SMI ... Driver Version:" in a line that is no table row: not this table
    if driver is None and not gpus and not table_cut(t):
        return None  # a banner whose version is no version, and no GPU: not an answer from nvidia-smi
    return SmiReport(
        vendor="nvidia",
        driver_version=driver,
        cuda_version=cuda,
        rocm_version=None,
        gpus=tuple(gpus),
        mig_devices=tuple(mig_devices),
        format="nvidia-smi",
        truncated=table_cut(t) or not complete,
    )


def _table_gpus(table: BoxTable) -> list[GpuInfo]:
    name_at = table.label_position("Name")
    memory_at = table.label_position("Memory-Usage")
    mig_mode_at = table.label_position("MIG M.")  # absent before R450: the mode stays unknown
    bus_at = table.label_position("Bus-Id")
    gpus: list[GpuInfo] = []
    for record in table.records:
        parsed = _gpu_cell(table.cell(record, name_at) or "")
        if parsed is None:
            continue
        bus_words = (table.cell(record, bus_at) or "").split()
        gpus.append(
            GpuInfo(
                index=parsed[0],
                name=parsed[1],
                uuid=None,  # the table does not show it
                memory_total_mib=total_memory_mib(table.cell(record, memory_at) or ""),
                mig_mode=mig_mode(table.cell(record, mig_mode_at)),
                bus_id=bus_words[0] if bus_words and PCI_ADDRESS.fullmatch(bus_words[0]) else None,
            )
        )
    return gpus


# --- nvidia-smi -L and nvidia-smi nvlink -s (the same GPU lines) --------------------------------------------


def _list_gpu(stripped: str) -> GpuInfo | None:
    """ "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-63d1e50a-…)"."""
    if not stripped.startswith("GPU ") or not stripped.endswith(")"):
        return None
    number, colon, rest = stripped[4:].partition(": ")
    index = integer(number)
    at = rest.rfind(" (UUID: ")
    if not colon or index is None or at < 0:
        return None
    return GpuInfo(index, value(rest[:at]), identifier(rest[at + 8 : -1]), None, None)


def _list_mig(stripped: str) -> tuple[str, str | None] | None:
    """ "MIG 1g.10gb     Device  0: (UUID: MIG-…)" -> ("1g.10gb", "MIG-…")."""
    if not stripped.startswith("MIG ") or not stripped.endswith(")"):
        return None
    words = stripped.split()
    if len(words) < 6 or words[2] != "Device" or words[4] != "(UUID:" or integer(words[3].removesuffix(":")) is None:
        return None
    return words[1], identifier(stripped[stripped.rfind("(UUID: ") + 7 : -1])


def parse_list(t: Text) -> SmiReport | None:
    listed: list[tuple[GpuInfo, list[MigDevice]]] = []
    for line in t.lines:  # each line ends with ")": a cut one does not parse, so partial lines need no care
        stripped = line.strip()
        gpu = _list_gpu(stripped)
        if gpu is not None:
            listed.append((gpu, []))
            continue
        mig = _list_mig(stripped)
        if mig is not None and listed:
            owner = listed[-1][0]
            listed[-1][1].append(MigDevice(owner.index, mig[0], mig[1]))
    if not listed:
        return None
    # A GPU with MIG devices has MIG enabled; one without may have it enabled with no instances yet,
    # so its mode stays unknown.
    gpus = tuple(replace(info, mig_mode="Enabled") if devices else info for info, devices in listed)
    last = t.lines[-1].strip() if t.lines else ""
    return replace(
        empty_report("nvidia", "nvidia-smi -L"),
        gpus=gpus,
        mig_devices=tuple(device for _, devices in listed for device in devices),
        truncated=t.capped or (t.partial and _list_gpu(last) is None and _list_mig(last) is None),
    )


@dataclass(frozen=True)
class NvLinkGpu:
    gpu: GpuInfo
    links: tuple[NvLink, ...]
    all_inactive_notice: bool  # nvidia-smi printed that all links are inactive instead of listing them


def nvlink_status(t: Text) -> tuple[NvLinkGpu, ...] | None:
    """``nvidia-smi nvlink -s``: each GPU's line, then "Link N: 25 GB/s" or "Link N: <inactive>" per link.

    A GPU whose links NVML cannot read prints a notice that all links are inactive (the wording Azure's HPC
    health checks match: https://github.com/Azure/azurehpc-health-checks/pull/132).
    """
    gpus: list[tuple[GpuInfo, list[NvLink], bool]] = []
    for line in t.lines:
        stripped = line.strip()
        gpu = _list_gpu(stripped)
        if gpu is not None:
            gpus.append((gpu, [], False))
            continue
        if not gpus:
            continue
        owner = gpus[-1]
        if "all links are inactive" in stripped.lower():
            gpus[-1] = (owner[0], owner[1], True)
            continue
        link = _link_line(stripped, owner[0].index)
        if link is not None:
            owner[1].append(link)
    if not any(links or notice for _, links, notice in gpus):
        return None
    return tuple(NvLinkGpu(gpu, tuple(links), notice) for gpu, links, notice in gpus)


def _link_line(stripped: str, gpu_index: int | None) -> NvLink | None:
    # Self-delimited ("GB/s" or ">" ends it), so a line cut short does not parse.
    if not stripped.startswith("Link "):
        return None
    number, colon, state = stripped[5:].partition(": ")
    link = integer(number)
    if not colon or link is None:
        return None
    state = state.strip()
    if state == "<inactive>":
        return NvLink(gpu_index, link, "inactive", None)
    amount, _, unit = state.partition(" ")
    speed = decimal(amount)
    if unit == "GB/s" and speed is not None and speed >= 0:
        return NvLink(gpu_index, link, "active", speed)
    return None


def parse_nvlink(t: Text) -> SmiReport | None:
    status = nvlink_status(t)
    if status is None:
        return None
    last = t.lines[-1].strip() if t.lines else ""
    whole = _list_gpu(last) is not None or _link_line(last, None) is not None
    return replace(
        empty_report("nvidia", "nvidia-smi nvlink -s"),
        gpus=tuple(entry.gpu for entry in status),
        nvlinks=tuple(link for entry in status for link in entry.links),
        truncated=t.capped or (t.partial and not whole),
    )


# --- nvidia-smi topo -m ----------------------------------------------------------------------------------

_TOPOLOGY_CELLS = frozenset({"X", "SYS", "NODE", "PHB", "PXB", "PIX", "SOC"})  # from the matrix's own legend


def _device_column(word: str) -> bool:
    return word.isascii() and ((word[:3] in ("GPU", "NIC") and word[3:].isdigit()) or word.startswith("mlx"))


def parse_topology(t: Text) -> SmiReport | None:
    """``nvidia-smi topo -m``: a header naming GPU0.. (and NICs), then one row per device with one cell per column.

    Published copies lose their tabs, so columns are words; the device columns are the leading words of the
    header up to "CPU Affinity". A cell that is none of the legend's values makes its row unread.
    """
    lines = t.complete
    header_line = next(
        (n for n, line in enumerate(lines) if line.split()[:1] == ["GPU0"] and "Affinity" in line and line[:1] in " \t"),
        None,
    )
    if header_line is None:
        return None
    header = lines[header_line].split()
    columns: list[str] = []
    for word in header:
        if not _device_column(word):
            break
        columns.append(word)
    gpu_columns = {number: int(name[3:]) for number, name in enumerate(columns) if name.startswith("GPU")}
    gpus: list[GpuInfo] = []
    topology: list[TopologyLink] = []
    for line in lines[header_line + 1 :]:
        words = line.split()
        if not words or not words[0].startswith("GPU") or not words[0][3:].isdigit() or not words[0].isascii():
            if words[:1] == ["Legend:"]:
                break
            continue
        row_index = integer(words[0][3:])
        row_cells = words[1 : 1 + len(columns)]
        if row_index is None or len(row_cells) < len(columns) or not all(_topology_cell(cell) for cell in row_cells):
            continue
        gpus.append(GpuInfo(row_index, None, None, None, None))
        for column, cell in enumerate(row_cells):
            peer = gpu_columns.get(column)
            if peer is not None and peer != row_index:
                nvlinks = integer(cell[2:]) if cell.startswith("NV") else None
                topology.append(TopologyLink(row_index, peer, cell, nvlinks))
    if not gpus:
        return None
    return replace(empty_report("nvidia", "nvidia-smi topo -m"), gpus=tuple(gpus), topology=tuple(topology), truncated=t.cut)


def _topology_cell(cell: str) -> bool:
    return cell in _TOPOLOGY_CELLS or (cell.startswith("NV") and cell[2:].isascii() and cell[2:].isdigit() and len(cell) <= 5)


# --- nvidia-smi mig -lgip ----------------------------------------------------------------------------------

_LGIP_ROW = re.compile(
    r"^\| *(?P<gpu>[0-9]{1,3}) +MIG +(?P<profile>[^ ]{1,32}) +(?P<id>[0-9]{1,4}) +(?P<free>[0-9]{1,3})/(?P<total>[0-9]{1,3})"
    r" +(?P<gib>[0-9]{1,5}(?:\.[0-9]{1,2})?) +[^ ]{1,8} +(?P<sm>[0-9]{1,5})\b",
    re.ASCII,
)


def mig_profiles(lines: Sequence[str]) -> tuple[MigProfile, ...]:
    profiles: list[MigProfile] = []
    for line in lines:
        stripped = line.strip()
        # A row is read whole or not at all: one cut in its SM count would still match the pattern.
        match = _LGIP_ROW.match(stripped) if stripped.endswith("|") else None
        memory = mib(float(match["gib"]), "GiB") if match is not None else None
        if match is None or memory is None:
            continue
        profiles.append(
            MigProfile(
                gpu_index=int(match["gpu"]),
                profile=match["profile"],
                profile_id=int(match["id"]),
                instances_free=int(match["free"]),
                instances_total=int(match["total"]),
                memory_mib=memory,
                multiprocessor_count=int(match["sm"]),
            )
        )
    return tuple(profiles)


def parse_mig_profiles(t: Text) -> SmiReport | None:
    if any(line.strip() in ("No MIG-enabled devices found.", "No MIG-enabled devices found") for line in t.lines):
        # nvidia-smi answered, and no GPU has MIG enabled; it does not say which GPUs it looked at.
        return empty_report("nvidia", "nvidia-smi mig -lgip")
    if first_line(t.lines, "GPU instance profiles:") is None:
        return None
    # nvidia-smi lists profiles only for GPUs in MIG mode.
    indices = dict.fromkeys(profile.gpu_index for profile in mig_profiles(t.lines))
    gpus = tuple(GpuInfo(index, None, None, None, "Enabled") for index in indices)
    report = replace(empty_report("nvidia", "nvidia-smi mig -lgip"), gpus=gpus, truncated=t.cut)
    if not gpus and not t.cut:
        # The title is there and not one profile row was read (a prefix before each line, a layout this does not
        # know): nvidia-smi prints the title only above the rows of a MIG-enabled GPU, so never "0 GPUs" silently.
        return replace(report, error=SmiError("unreadable", "nvidia-smi mig -lgip output whose profile rows could not be read"))
    return report
