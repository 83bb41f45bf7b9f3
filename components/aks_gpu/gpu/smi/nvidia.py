"""nvidia-smi's outputs: the default table, -q (text), -q -x (XML), -L, mig -lgip, --query-gpu and
--query-compute-apps CSV, nvlink -s and topo -m. Pure: prepared text in, a report (or None: not this format) out.

Where the output was cut short, only what is complete is read and the report says ``truncated``.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, cast
from xml.etree import ElementTree

from aks_gpu.gpu.smi.model import (
    GpuInfo,
    GpuProcess,
    MigDevice,
    MigMode,
    MigProfile,
    NvLink,
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
    memory_mib,
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


# --- nvidia-smi -q and -q -x: one model for both ---------------------------------------------------------

QueryFormat = Literal["nvidia-smi -q", "nvidia-smi -q -x"]


@dataclass(frozen=True)
class QueryGpu:
    """One GPU of ``nvidia-smi -q`` (text) or ``-q -x`` (XML): its values by path, in that format's words.

    Text paths are the section titles joined by "/" ("ECC Errors/Volatile/DRAM Uncorrectable"), XML paths the
    element names ("ecc_errors/volatile/dram_uncorrectable"). ``QUERY_FIELDS`` names both for what is read.
    """

    bus_id: str | None
    fields: Mapping[str, str]
    mig_device_count: int | None  # None where the format does not list MIG devices (the text form here)

    def get(self, field: str, xml: bool) -> str | None:
        for path in QUERY_FIELDS[field][1 if xml else 0]:
            if path in self.fields:
                return self.fields[path]
        return None


@dataclass(frozen=True)
class QueryLog:
    format: QueryFormat
    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    gpus: tuple[QueryGpu, ...]
    truncated: bool

    @property
    def xml(self) -> bool:
        return self.format == "nvidia-smi -q -x"


# (text paths, XML paths) per field, the first found wins. Element names from NVIDIA's nvsmi_device_v12/v13
# DTDs as real outputs print them (tests/fixtures/smi: telegraf's testdata, gpud's testdata).
QUERY_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "product_name": (("Product Name",), ("product_name",)),
    "uuid": (("GPU UUID",), ("uuid",)),
    "fb_total": (("FB Memory Usage/Total",), ("fb_memory_usage/total",)),
    "mig_current": (("MIG Mode/Current",), ("mig_mode/current_mig",)),
    # Volatile counts since the driver loaded; aggregate counts for the GPU's life. Ampere and later split
    # SRAM and DRAM (R535+ also SRAM parity / SEC-DED); Volta and earlier count single and double bit errors.
    "ecc_volatile_uncorrectable": (
        (
            "ECC Errors/Volatile/SRAM Uncorrectable",
            "ECC Errors/Volatile/SRAM Uncorrectable Parity",
            "ECC Errors/Volatile/SRAM Uncorrectable SEC-DED",
            "ECC Errors/Volatile/DRAM Uncorrectable",
            "ECC Errors/Volatile/Double Bit/Total",
        ),
        (
            "ecc_errors/volatile/sram_uncorrectable",
            "ecc_errors/volatile/sram_uncorrectable_parity",
            "ecc_errors/volatile/sram_uncorrectable_secded",
            "ecc_errors/volatile/dram_uncorrectable",
            "ecc_errors/volatile/double_bit/total",
        ),
    ),
    "ecc_aggregate_uncorrectable": (
        (
            "ECC Errors/Aggregate/SRAM Uncorrectable",
            "ECC Errors/Aggregate/SRAM Uncorrectable Parity",
            "ECC Errors/Aggregate/SRAM Uncorrectable SEC-DED",
            "ECC Errors/Aggregate/DRAM Uncorrectable",
            "ECC Errors/Aggregate/Double Bit/Total",
        ),
        (
            "ecc_errors/aggregate/sram_uncorrectable",
            "ecc_errors/aggregate/sram_uncorrectable_parity",
            "ecc_errors/aggregate/sram_uncorrectable_secded",
            "ecc_errors/aggregate/dram_uncorrectable",
            "ecc_errors/aggregate/double_bit/total",
        ),
    ),
    "remap_uncorrectable": (("Remapped Rows/Uncorrectable Error",), ("remapped_rows/remapped_row_unc",)),
    "remap_pending": (("Remapped Rows/Pending",), ("remapped_rows/remapped_row_pending",)),
    "remap_failure": (("Remapped Rows/Remapping Failure Occurred",), ("remapped_rows/remapped_row_failure",)),
    "retired_pending": (
        ("Retired Pages/Pending Page Blacklist", "Retired Pages/Pending Page Retirement", "Retired Pages/Pending"),
        ("retired_pages/pending_blacklist", "retired_pages/pending_retirement"),
    ),
    # "Clocks Event Reasons" from R535 on, "Clocks Throttle Reasons" before; the thermal and power-brake reasons
    # are indented under "HW Slowdown" in the text form.
    "hw_slowdown": (
        ("Clocks Event Reasons/HW Slowdown", "Clocks Throttle Reasons/HW Slowdown"),
        ("clocks_event_reasons/clocks_event_reason_hw_slowdown", "clocks_throttle_reasons/clocks_throttle_reason_hw_slowdown"),
    ),
    "hw_thermal_slowdown": (
        ("Clocks Event Reasons/HW Slowdown/HW Thermal Slowdown", "Clocks Throttle Reasons/HW Slowdown/HW Thermal Slowdown"),
        (
            "clocks_event_reasons/clocks_event_reason_hw_thermal_slowdown",
            "clocks_throttle_reasons/clocks_throttle_reason_hw_thermal_slowdown",
        ),
    ),
    "hw_power_brake_slowdown": (
        (
            "Clocks Event Reasons/HW Slowdown/HW Power Brake Slowdown",
            "Clocks Throttle Reasons/HW Slowdown/HW Power Brake Slowdown",
        ),
        (
            "clocks_event_reasons/clocks_event_reason_hw_power_brake_slowdown",
            "clocks_throttle_reasons/clocks_throttle_reason_hw_power_brake_slowdown",
        ),
    ),
    "pcie_width_max": (("PCI/GPU Link Info/Link Width/Max",), ("pci/pci_gpu_link_info/link_widths/max_link_width",)),
    "pcie_width_current": (
        ("PCI/GPU Link Info/Link Width/Current",),
        ("pci/pci_gpu_link_info/link_widths/current_link_width",),
    ),
    # R570 on: what the GPU needs before it can be used again (None, Reset, Reboot, Drain P2P, Drain and Reset).
    "recovery_action": (("GPU Recovery Action",), ("gpu_recovery_action",)),
    "fabric_state": (("Fabric/State",), ("fabric/state",)),
    "fabric_status": (("Fabric/Status",), ("fabric/status",)),
}
# Every field spelled out once: a text ECC path may be a prefix of another, so each is listed whole.
_ALL_PATHS = frozenset(path for text, xml in QUERY_FIELDS.values() for path in (*text, *xml))


def query_report(log: QueryLog) -> SmiReport:
    gpus: list[GpuInfo] = []
    mig_devices: list[MigDevice] = []
    # Neither form carries the GPU index; nvidia-smi writes the GPUs in index order (by PCI bus id).
    for index, gpu in enumerate(log.gpus):
        gpus.append(
            GpuInfo(
                index=index,
                name=value(gpu.get("product_name", log.xml)),
                uuid=identifier(gpu.get("uuid", log.xml)),
                memory_total_mib=memory_mib(gpu.get("fb_total", log.xml), "MiB"),
                mig_mode=mig_mode(gpu.get("mig_current", log.xml)),
                bus_id=gpu.bus_id,
            )
        )
        # <mig_device> holds instance ids and memory but no profile name and no UUID.
        mig_devices += [MigDevice(gpu_index=index, profile=None, uuid=None)] * (gpu.mig_device_count or 0)
    return SmiReport(
        vendor="nvidia",
        driver_version=version(log.driver_version, NVIDIA_DRIVER),
        cuda_version=version(log.cuda_version, CUDA),
        rocm_version=None,
        gpus=tuple(gpus),
        mig_devices=tuple(mig_devices),
        format=log.format,
        truncated=log.truncated,
    )


def parse_query(t: Text) -> SmiReport | None:
    log = query_log(t)
    return None if log is None else query_report(log)


def query_log(t: Text) -> QueryLog | None:
    """The -q -x XML or -q text in ``t``; None when it holds neither."""
    xml = query_xml(t.raw, cut=t.capped) if "<nvidia_smi_log" in t.raw else None
    return xml or query_text(t)


# -- -q text


_QUERY_MAX_DEPTH = 12


def _is_log_banner(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("=") and stripped.endswith("=") and stripped.strip("=").strip() == "NVSMI LOG"


def query_text(t: Text) -> QueryLog | None:
    """``nvidia-smi -q``: "Key : value" lines nested by indentation under one "GPU <bus id>" line per GPU."""
    lines = t.complete
    start = next((number for number, line in enumerate(lines) if _is_log_banner(line)), None)
    if start is None:
        return None
    top: dict[str, str] = {}
    gpus: list[QueryGpu] = []
    bus_id: str | None = None
    fields: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indentation, key) of the enclosing sections, innermost last

    def close_gpu() -> None:
        if bus_id is not None or fields:
            gpus.append(QueryGpu(bus_id=bus_id, fields=fields, mig_device_count=None))

    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        indentation = len(line) - len(line.lstrip(" "))
        stripped = line.strip()
        if indentation == 0:
            words = stripped.split(" ")
            if len(words) == 2 and words[0] == "GPU" and PCI_ADDRESS.fullmatch(words[1]):
                close_gpu()
                bus_id, fields, stack = words[1], {}, []
                continue
            key, separator, rest = _key_value(stripped)
            if separator and bus_id is None:
                top.setdefault(key, rest)
            continue
        key, separator, rest = _key_value(stripped)
        while stack and stack[-1][0] >= indentation:
            stack.pop()
        if len(stack) >= _QUERY_MAX_DEPTH:
            continue  # nvidia-smi nests sections four deep; deeper is no -q output, and is not walked
        path = "/".join([*(name for _, name in stack), key])
        if separator and path not in fields and path in _ALL_PATHS:
            fields[path] = rest
        stack.append((indentation, key))
    close_gpu()
    attached = integer(top.get("Attached GPUs"))
    return QueryLog(
        format="nvidia-smi -q",
        driver_version=top.get("Driver Version"),
        cuda_version=top.get("CUDA Version"),
        attached_gpus=integer(top.get("Attached GPUs")),
        gpus=tuple(gpus),
        # Cut at a line end, the text form has no mark of its own: fewer GPU sections than "Attached GPUs" says is.
        truncated=t.cut or (attached is not None and len(gpus) < attached),
    )


def _key_value(stripped: str) -> tuple[str, bool, str]:
    """ "Bus Id                            : 00000000:53:00.0" -> ("Bus Id", True, "00000000:53:00.0")."""
    at = stripped.find(" : ")
    if at < 0:
        if stripped.endswith(" :"):
            return stripped[:-2].rstrip(), True, ""
        return stripped, False, ""
    return stripped[:at].rstrip(), True, stripped[at + 3 :].strip()


# -- -q -x XML
#
# An 8-GPU node prints about 200 KB of XML, most of it supported clocks, utilisation and power readings that
# no check reads. Parsing all of it on 1,000 nodes would take seconds, so the root's children are walked with
# string search (linear, in C) and, of each <gpu>, only the children a check reads are handed to the XML parser,
# which checks them as XML. An element that is not closed ends the walk: the output was cut, and the GPUs
# before it are read.

_XML_ROOT = "nvidia_smi_log"
_XML_ROOT_FIELDS = ("driver_version", "cuda_version", "attached_gpus")
_XML_GPU_CHILDREN = frozenset(path.split("/", 1)[0] for _, xml in QUERY_FIELDS.values() for path in xml)
_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", re.ASCII)


class _XmlCutError(Exception):
    """The document stops inside an element."""


class _XmlMalformedError(Exception):
    """Something other than an element or text where an element may start."""


def _xml_children(text: str, start: int, stop: int) -> Iterator[tuple[str, str, int]]:
    """(name, whole element text, end offset) for each child element in ``text[start:stop]``, in order.

    Stops at the parent's closing tag. Elements of the nvidia-smi log never nest an element of their own name,
    so an element ends at the first closing tag of its name.
    """
    position = start
    while True:
        opening = text.find("<", position, stop)
        if opening < 0:
            return
        if text.startswith("</", opening):
            return
        if text.startswith(("<!", "<?"), opening):
            raise _XmlMalformedError
        closing_bracket = text.find(">", opening, stop)
        if closing_bracket < 0:
            raise _XmlCutError
        head = text[opening + 1 : closing_bracket]
        name = head.rstrip("/").split(None, 1)[0] if head.rstrip("/").strip() else ""
        if not _XML_NAME.fullmatch(name):
            raise _XmlMalformedError
        if head.endswith("/"):
            position = closing_bracket + 1
            yield name, text[opening:position], position
            continue
        end_tag = f"</{name}>"
        end = text.find(end_tag, closing_bracket + 1, stop)
        if end < 0:
            raise _XmlCutError
        position = end + len(end_tag)
        yield name, text[opening:position], position


def _xml_element(fragment: str) -> ElementTree.Element:
    try:
        return ElementTree.fromstring(fragment)
    except (ElementTree.ParseError, RecursionError, ValueError) as error:
        raise _XmlMalformedError from error


def query_xml(raw: str, *, cut: bool = False) -> QueryLog | None:
    start = raw.find(f"<{_XML_ROOT}")
    if start < 0:
        return None
    # Only the root element is read: the prolog and its DOCTYPE (a reference to nvsmi_device_v*.dtd) carry
    # nothing to read, and leaving them out keeps the XML parser away from any DTD.
    open_end = raw.find(">", start)
    closing = raw.rfind(f"</{_XML_ROOT}>")
    truncated = cut or closing < 0
    stop = closing if closing >= 0 else len(raw)
    if open_end < 0 or (closing >= 0 and closing < open_end):
        return None
    root_fields: dict[str, str] = {}
    gpus: list[QueryGpu] = []
    try:
        last = open_end + 1
        for name, element, end in _xml_children(raw, open_end + 1, stop):
            last = end
            if name in _XML_ROOT_FIELDS:
                root_fields.setdefault(name, (_xml_element(element).text or "").strip())
            elif name == "gpu":
                gpus.append(_xml_gpu(element))
        if closing >= 0 and raw[last:closing].strip():
            raise _XmlMalformedError  # text or a stray closing tag between the last element and </nvidia_smi_log>
    except _XmlCutError:
        if not truncated:
            return None  # an element without its end inside a closed document: malformed, not cut
    except _XmlMalformedError:
        return None
    return QueryLog(
        format="nvidia-smi -q -x",
        driver_version=root_fields.get("driver_version"),
        cuda_version=root_fields.get("cuda_version"),
        attached_gpus=integer(root_fields.get("attached_gpus")),
        gpus=tuple(gpus),
        truncated=truncated,
    )


# The <gpu> children that hold other elements of the same names as those read (a MIG device has its own
# fb_memory_usage), or nothing read and much text (supported clocks are half of a GPU's XML): searched around.
_XML_SKIP = ("mig_devices", "processes", "accounted_processes", "supported_clocks")
_XML_PATHS = tuple(dict.fromkeys(path for _, xml in QUERY_FIELDS.values() for path in xml))


def _find_outside(text: str, needle: str, skipped: Sequence[tuple[int, int]]) -> int:
    position = text.find(needle)
    while position >= 0:
        inside = next((end for start, end in skipped if start <= position < end), None)
        if inside is None:
            return position
        position = text.find(needle, inside)
    return -1


def _xml_gpu(element: str) -> QueryGpu:
    """One <gpu> element: the children a check reads are cut out with string search and parsed as one XML
    document, and each field is looked up in it by path (in C, not in a Python walk of every element)."""
    open_end = element.find(">")
    if open_end < 0:
        raise _XmlMalformedError
    bus_id = _xml_element(element[:open_end].rstrip("/") + "/>").get("id")
    skipped: list[tuple[int, int]] = []
    mig_devices: int | None = None
    for name in _XML_SKIP:
        start = element.find(f"<{name}>", open_end)
        if start < 0:
            continue
        end = element.find(f"</{name}>", start)
        if end < 0:
            raise _XmlMalformedError  # an element left open inside a closed <gpu>
        skipped.append((start, end))
        if name == "mig_devices":
            mig_devices = element.count("<mig_device>", start, end)
    parts: list[str] = []
    for name in _XML_GPU_CHILDREN:
        start = _find_outside(element, f"<{name}>", skipped)
        if start < 0:
            continue
        end = element.find(f"</{name}>", start)
        if end < 0:
            raise _XmlMalformedError
        parts.append(element[start : end + len(name) + 3])
    subset = _xml_element("<gpu>" + "".join(parts) + "</gpu>")
    fields: dict[str, str] = {}
    # One tag per step: Element.find runs a plain tag in C, a path through the Python ElementPath module.
    parents: dict[str, ElementTree.Element | None] = {"": subset}
    for path in _XML_PATHS:
        parent_path, _, tag = path.rpartition("/")
        if parent_path not in parents:
            node: ElementTree.Element | None = subset
            for step in parent_path.split("/"):
                node = node.find(step) if node is not None else None
            parents[parent_path] = node
        parent = parents[parent_path]
        found = parent.find(tag) if parent is not None else None
        if found is not None and len(found) == 0:
            fields[path] = (found.text or "").strip()
    return QueryGpu(
        bus_id=bus_id if bus_id is not None and PCI_ADDRESS.fullmatch(bus_id) else None,
        fields=fields,
        mig_device_count=mig_devices,
    )


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
    return replace(empty_report("nvidia", "nvidia-smi mig -lgip"), gpus=gpus, truncated=t.cut)


# --- nvidia-smi --query-gpu=... / --query-compute-apps=... --format=csv ------------------------------------

_QUERY_FIELD = re.compile(
    r"(?P<field>[a-z][a-z0-9_]{0,63}(?:\.[A-Za-z0-9_]{1,63}){0,6})(?: \[(?P<unit>[^\]]{1,16})\])?", re.ASCII
)
_FIELD_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id"}
# A header is taken for --query-gpu's when it names at least one of these fields.
_GPU_FIELDS = {"index", "name", "uuid", "driver_version", "memory.total", "mig.mode.current", "pci.bus_id"}
# The header --query-compute-apps prints: its own field names, and the GPU's under gpu_* names.
_APP_FIELDS = {"pid", "process_name", "used_gpu_memory", "used_memory"}
# Fields whose values have a fixed shape: a one-column CSV is read only for one of these. A lone free-text
# column ("name") cannot be told apart from any other line, such as a kubectl error under the header.
_STRICT = {"index", "uuid", "driver_version", "memory.total", "mig.mode.current", "pci.bus_id", "pid", "used_gpu_memory"}

# Without a header, columns cannot be named from the output alone. A headerless row is read only when it
# has the shape of the query below, column for column; README documents it as the query to use.
NVIDIA_CSV_QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "mig.mode.current")
_HEADERLESS_SHAPE = (
    re.compile(r"[0-9]{1,3}", re.ASCII),
    re.compile(r"[^ ].{0,95}", re.ASCII | re.DOTALL),
    re.compile(r"GPU-[0-9A-Fa-f-]{8,64}", re.ASCII),
    NVIDIA_DRIVER,
    re.compile(r"[0-9]{1,9}(?: MiB)?", re.ASCII),
    re.compile(r"Enabled|Disabled|\[?N/A\]?", re.ASCII),
)

Header = list[tuple[str, str | None]]


def _csv_rows(lines: Sequence[str]) -> list[list[str]]:
    try:
        return [[field.strip() for field in row] for row in csv.reader(lines, skipinitialspace=True)]
    except csv.Error:
        return []


def _query_header(row: Sequence[str]) -> Header | None:
    fields: Header = []
    for column in row:
        match = _QUERY_FIELD.fullmatch(column)
        if match is None:
            return None
        fields.append((match["field"], match["unit"]))
    names = {name for name, _ in fields}
    if not names & (_GPU_FIELDS | _APP_FIELDS | set(_FIELD_ALIASES)):
        return None
    if len(fields) == 1 and fields[0][0] not in _STRICT | {"gpu_uuid", "gpu_bus_id"}:
        return None
    return fields


def query_csv_records(t: Text) -> list[dict[str, str]] | None:
    """The rows of a --query-gpu / --query-remapped-rows CSV with a header, as {field: cell} (field names as the header
    prints them, units dropped, ``gpu_bus_id`` as ``pci.bus_id``); None when the text holds no such header."""
    rows = [row for row in _csv_rows([line for line in t.complete if line.strip()]) if row]
    found = next(((n, header) for n, row in enumerate(rows) if (header := _query_header(row))), None)
    if found is None:
        return None
    number, header = found
    names = [_FIELD_ALIASES.get(name, name) for name, _ in header]
    records: list[dict[str, str]] = []
    for row in rows[number + 1 :]:
        if len(row) != len(names):
            break
        records.append(dict(zip(names, row, strict=True)))
    return records


def parse_csv(t: Text) -> SmiReport | None:
    rows = [row for row in _csv_rows([line for line in t.complete if line.strip()]) if row]
    header_number, header = next(((n, found) for n, row in enumerate(rows) if (found := _query_header(row))), (-1, None))
    if header is not None and {name for name, _ in header} & _APP_FIELDS:
        return _compute_apps(header, rows[header_number + 1 :], t.cut)
    if header is not None:
        header = [(_FIELD_ALIASES.get(name, name), unit) for name, unit in header]
        body = rows[header_number + 1 :]
    else:
        header = [(field, None) for field in NVIDIA_CSV_QUERY_FIELDS]
        body = [row for row in rows if len(row) == len(header)]
        if not body or not all(
            shape.fullmatch(cell) for row in body for shape, cell in zip(_HEADERLESS_SHAPE, row, strict=True)
        ):
            return None

    gpus: list[GpuInfo] = []
    driver_versions: list[str] = []
    for row in body:
        if len(row) != len(header):
            break  # whatever follows the CSV
        record = {field: (cell, unit) for (field, unit), cell in zip(header, row, strict=True)}
        gpu, driver = _csv_gpu(record)
        if gpu is None:
            break  # a row in which no field has its shape is no GPU row
        gpus.append(gpu)
        if driver is not None:
            driver_versions.append(driver)
    if not gpus:
        return None
    return replace(
        empty_report("nvidia", "nvidia-smi --query-gpu"),
        driver_version=driver_versions[0] if driver_versions else None,
        gpus=tuple(gpus),
        truncated=t.cut,
    )


def _csv_gpu(record: Mapping[str, tuple[str, str | None]]) -> tuple[GpuInfo | None, str | None]:
    def read(field: str) -> str | None:
        return value(record[field][0]) if field in record else None

    memory_unit = record["memory.total"][1] if "memory.total" in record else None
    gpu = GpuInfo(
        index=index if (index := integer(read("index"))) is not None and index < 1000 else None,
        name=read("name"),
        uuid=uuid if (uuid := identifier(read("uuid"))) is not None and uuid.startswith("GPU-") else None,
        memory_total_mib=memory_mib(read("memory.total"), memory_unit or "MiB") if "memory.total" in record else None,
        mig_mode=mig_mode(read("mig.mode.current")),
        bus_id=bus if (bus := read("pci.bus_id")) is not None and PCI_ADDRESS.fullmatch(bus) else None,
    )
    driver = version(read("driver_version"), NVIDIA_DRIVER)
    strict_values = [gpu.index, gpu.uuid, gpu.memory_total_mib, gpu.mig_mode, gpu.bus_id, driver]
    present = [field for field in record if field in _STRICT and value(record[field][0]) is not None]
    if present and all(item is None for item in strict_values):
        return None, None  # the fields that have a shape all miss it: not nvidia-smi's row
    if not present and gpu.name is None:
        return None, None
    return gpu, driver


def _compute_apps(header: Header, body: Sequence[Sequence[str]], cut: bool) -> SmiReport:
    processes: list[GpuProcess] = []
    for row in body:
        if len(row) != len(header):
            break
        process = _csv_process({field: (cell, unit) for (field, unit), cell in zip(header, row, strict=True)})
        if process is None:
            break
        processes.append(process)
    return replace(empty_report("nvidia", "nvidia-smi --query-compute-apps"), processes=tuple(processes), truncated=cut)


def _csv_process(record: Mapping[str, tuple[str, str | None]]) -> GpuProcess | None:
    def read(field: str) -> str | None:
        return value(record[field][0]) if field in record else None

    memory_field = "used_gpu_memory" if "used_gpu_memory" in record else "used_memory"
    unit = record[memory_field][1] if memory_field in record else None
    uuid = identifier(read("gpu_uuid"))
    process = GpuProcess(
        gpu_uuid=uuid if uuid is not None and uuid.startswith(("GPU-", "MIG-")) else None,
        pid=integer(read("pid")),
        name=read("process_name"),
        used_memory_mib=memory_mib(read(memory_field), unit or "MiB") if memory_field in record else None,
    )
    if process.pid is None and process.gpu_uuid is None and process.used_memory_mib is None:
        return None
    return process
