"""nvidia-smi -q (text) and -q -x (XML), read into one model (``QueryLog``) that the SMI report and the health reader
both read. Pure: prepared text in, a report (or None: not this format) out.

Where the output was cut short, only what is complete is read and the report says ``truncated``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from xml.etree import ElementTree

from aks_gpu.gpu.smi.model import GpuInfo, MigDevice, SmiReport
from aks_gpu.gpu.smi.nvidia import mig_mode
from aks_gpu.gpu.smi.text import CUDA, NVIDIA_DRIVER, PCI_ADDRESS, Text, identifier, integer, memory_mib, value, version

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
