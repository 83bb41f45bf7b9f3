"""Parsers for the output of the GPU management tools: nvidia-smi, amd-smi and rocm-smi.

Pure: text in, a frozen ``SmiReport`` out. Standard library only, no I/O, so the same code reads a live
pod's output, a saved snapshot and the test fixtures.

Formats read (``parse_smi`` tells them apart by content):

- nvidia-smi: the default table (the 79-column layout of drivers before 530 and the wider one after,
  with the "MIG devices" table when present), ``--query-gpu=... --format=csv`` (with or without header
  and units), ``-q -x`` XML, ``-L``, ``mig -lgip``;
- amd-smi: the default table (ROCm 7), ``version``, ``static`` and ``list`` (text and ``--json``);
- rocm-smi: ``--showdriverversion``;
- the error messages these tools print when the driver is missing or does not match.

A value the output does not show, or shows as "N/A", is None: nothing is inferred.
"""

from __future__ import annotations

import csv
import json
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Literal, cast
from xml.etree import ElementTree

Vendor = Literal["nvidia", "amd"]
VendorChoice = Literal["nvidia", "amd", "auto"]
MigMode = Literal["Enabled", "Disabled"]
ErrorKind = Literal["driver_not_loaded", "driver_library_mismatch", "no_devices", "unrecognized"]


@dataclass(frozen=True)
class GpuInfo:
    index: int | None
    name: str | None
    uuid: str | None
    memory_total_mib: int | None
    mig_mode: MigMode | None


@dataclass(frozen=True)
class MigDevice:
    gpu_index: int | None
    profile: str | None  # "1g.10gb": the name nvidia-smi prints, without its "MIG " prefix
    uuid: str | None


@dataclass(frozen=True)
class SmiError:
    kind: ErrorKind
    message: str


@dataclass(frozen=True)
class SmiReport:
    vendor: Vendor | None
    driver_version: str | None
    cuda_version: str | None
    rocm_version: str | None
    gpus: tuple[GpuInfo, ...] = ()
    mig_devices: tuple[MigDevice, ...] = ()
    error: SmiError | None = None

    def to_dict(self) -> dict[str, object]:
        """The report as the JSON object ``aksgpu smi parse`` prints."""
        return {
            "vendor": self.vendor,
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "rocm_version": self.rocm_version,
            "gpus": [asdict(gpu) for gpu in self.gpus],
            "mig_devices": [asdict(device) for device in self.mig_devices],
            "error": None if self.error is None else asdict(self.error),
        }


@dataclass(frozen=True)
class MigProfile:
    """One row of ``nvidia-smi mig -lgip``: a GPU-instance profile a MIG-enabled GPU offers."""

    gpu_index: int
    profile: str  # "1g.10gb", "1g.10gb+me"
    profile_id: int
    instances_free: int
    instances_total: int
    memory_mib: int  # printed in GiB with two decimals (9.75); 9.75 GiB is the 9984 MiB a 1g.10gb reports
    multiprocessor_count: int


def smi_command(vendor: Vendor) -> list[str]:
    """The command the live validator runs in the device plugin pod, for ``parse_smi`` to read.

    NVIDIA: plain ``nvidia-smi`` is in every driver and prints driver, CUDA, each GPU's name, memory and
    MIG mode, and the MIG devices, in one call.

    AMD: ``amd-smi static --json`` gives the amdgpu driver version and, per GPU, the market name and VRAM
    size in one call on ROCm 6.0 and later (see fixtures 51 and 56 for the same data as text). Plain
    ``amd-smi`` would add the ROCm version, but it only prints that table from ROCm 7.0 on (before, it
    prints usage), and JSON does not shift when a column is added. The ROCm version is left unknown; the
    driver version is what the checks compare.
    """
    if vendor == "nvidia":
        return ["nvidia-smi"]
    return ["amd-smi", "static", "--json"]


def parse_smi(text: str, vendor: VendorChoice = "auto") -> SmiReport:
    """Read one SMI output. ``vendor`` limits which tools' formats are tried; "auto" tries all.

    Text that is no known format gives an ``unrecognized`` error rather than an empty report, so a caller
    never mistakes garbage for "no GPUs".
    """
    if vendor not in ("nvidia", "amd", "auto"):
        raise ValueError(f"vendor must be 'nvidia', 'amd' or 'auto', not {vendor!r}")
    vendors: tuple[Vendor, ...] = ("nvidia", "amd") if vendor == "auto" else (vendor,)
    lines = _meaningful_lines(text)

    report: SmiReport | None = None
    for parser_vendor, parser in _PARSERS:
        if parser_vendor in vendors:
            report = parser(lines)
            if report is not None:
                break

    error = _reported_error(lines, vendors)
    if error is not None:
        error_vendor, smi_error = error
        report = replace(report or _empty_report(error_vendor), error=smi_error)
    if report is None:
        return replace(_empty_report(None), error=SmiError("unrecognized", _unrecognized_message(lines)))
    if report.vendor == "nvidia" and report.driver_version is None:
        report = replace(report, driver_version=_first_group(_NVRM_VERSION, lines))
    return report


def parse_mig_profiles(text: str) -> tuple[MigProfile, ...]:
    """The rows of ``nvidia-smi mig -lgip``; empty when the text holds no such table."""
    profiles: list[MigProfile] = []
    for line in _meaningful_lines(text):
        match = _LGIP_ROW.match(line.strip())
        if match is None:
            continue
        profiles.append(
            MigProfile(
                gpu_index=int(match["gpu"]),
                profile=match["profile"],
                profile_id=int(match["id"]),
                instances_free=int(match["free"]),
                instances_total=int(match["total"]),
                memory_mib=round(float(match["gib"]) * 1024),
                multiprocessor_count=int(match["sm"]),
            )
        )
    return tuple(profiles)


# --- lines, values and units -----------------------------------------------------------------------

# Lines that are not the tool's output but come with it when it is captured from a terminal or a pod:
# kubectl's notices, a shell prompt with the command typed after it, or the command echoed on its own.
_NOISE_LINE = re.compile(
    r"""^\s*(?:
        Defaulted\ container\ .*
      | command\ terminated\ with\ exit\ code\ \d+
      | Unable\ to\ use\ a\ TTY\b.*
      | (?:[\w.-]+@[\w.-]+:\S*?)?[$#]\ .*
      | (?:sudo\ +)?(?:nvidia-smi|amd-smi|rocm-smi|kubectl)(?:\s.*)?
    )$""",
    re.VERBOSE,
)

# How the tools print "no value". Brackets are stripped before the lookup ("[N/A]" in CSV).
_NO_VALUE = {"", "n/a", "na", "none", "unknown", "not supported", "unknown error", "insufficient permissions"}

# Memory units to MiB. amd-smi prints "MB" but means MiB: an MI300X's 192 GiB of HBM shows as
# "196592 MB", which is 192 * 1024 = 196608 MiB less a reserve, where 192 GiB in decimal megabytes
# would be 206158. So "MB" and "GB" are read as MiB and GiB, for both vendors.
_MIB_PER_UNIT = {
    "b": 1 / (1024 * 1024),
    "kib": 1 / 1024,
    "kb": 1 / 1024,
    "mib": 1,
    "mb": 1,
    "gib": 1024,
    "gb": 1024,
    "tib": 1024 * 1024,
    "tb": 1024 * 1024,
}
_AMOUNT = re.compile(r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?i?B)?$", re.IGNORECASE)
# "1MiB /  81559MiB" (nvidia-smi) or "4976/196592 MB" (amd-smi), possibly among other values in a cell.
_USED_OF_TOTAL = re.compile(
    r"(?P<used>\d+(?:\.\d+)?)\s*(?:[KMGT]?i?B)?\s*/\s*(?P<total>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?i?B)\b",
    re.IGNORECASE,
)
# Identifiers are one token: "GPU-63d1e50a-…", "MIG-GPU-…/1/0" (R470 MIG names), amd-smi's
# "76ff73a1-0000-1000-80a0-8c022586fed6". A placeholder such as "<redacted>" is not an identifier.
_IDENTIFIER = re.compile(r"^[0-9A-Za-z][0-9A-Za-z/_:.-]*$")


def _meaningful_lines(text: str) -> list[str]:
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return [line.rstrip() for line in text.split("\n") if not _NOISE_LINE.match(line)]


def _value(raw: object) -> str | None:
    """A printed value, or None when it is one of the tools' spellings of "no value"."""
    if raw is None:
        return None
    text = str(raw).strip()
    if text.strip("[]").strip().lower() in _NO_VALUE:
        return None
    return text


def _identifier(raw: object) -> str | None:
    text = _value(raw)
    return text if text is not None and _IDENTIFIER.match(text) else None


def _integer(raw: object) -> int | None:
    text = _value(raw)
    return int(text) if text is not None and text.isdigit() else None


def _mib(amount: float, unit: str) -> int | None:
    factor = _MIB_PER_UNIT.get(unit.lower())
    return None if factor is None else round(amount * factor)


def _memory_mib(raw: object, default_unit: str) -> int | None:
    """Memory such as "81559 MiB" or "96434 MB", or a bare number in ``default_unit``, in MiB."""
    text = _value(raw)
    match = _AMOUNT.match(text) if text is not None else None
    if match is None:
        return None
    return _mib(float(match["number"]), match["unit"] or default_unit)


def _total_memory_mib(cell: str) -> int | None:
    match = _USED_OF_TOTAL.search(cell)
    return None if match is None else _mib(float(match["total"]), match["unit"])


def _mig_mode(raw: object) -> MigMode | None:
    # nvidia-smi marks a mode change waiting for a GPU reset with "*" ("Disabled*"); the mode in force
    # until then is the one printed.
    text = _value(raw)
    mode = text.rstrip("*").strip().capitalize() if text is not None else None
    return cast(MigMode, mode) if mode in ("Enabled", "Disabled") else None


def _empty_report(vendor: Vendor | None) -> SmiReport:
    return SmiReport(vendor=vendor, driver_version=None, cuda_version=None, rocm_version=None)


# --- errors ------------------------------------------------------------------------------------------

_ERROR_SIGNATURES: tuple[tuple[Vendor, ErrorKind, re.Pattern[str]], ...] = (
    ("nvidia", "driver_not_loaded", re.compile(r"NVIDIA-SMI has failed because it couldn't communicate")),
    # The driver's user-space library is not there at all (not installed, or not mounted into the pod).
    ("nvidia", "driver_not_loaded", re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml")),
    ("nvidia", "driver_library_mismatch", re.compile(r"Driver/library version mismatch")),
    ("nvidia", "no_devices", re.compile(r"^No devices were found")),
    # amd-smi and rocm-smi, with or without Python logging's "ERROR:root:" prefix.
    (
        "amd",
        "driver_not_loaded",
        re.compile(
            r"amdgpu not found in modules|driver not initialized|check amdgpu version and module status",
            re.IGNORECASE,
        ),
    ),
)
_NVML_LIBRARY_VERSION = re.compile(r"^NVML library version:\s*(\S+)")
# /proc/driver/nvidia/version, often pasted beside a mismatch error: the kernel module actually loaded.
_NVRM_VERSION = re.compile(r"^NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)\b")


def _reported_error(lines: Sequence[str], vendors: Sequence[Vendor]) -> tuple[Vendor, SmiError] | None:
    for vendor, kind, pattern in _ERROR_SIGNATURES:
        if vendor not in vendors:
            continue
        for line in lines:
            if pattern.search(line.strip()):
                message = line.strip()
                library_version = _first_group(_NVML_LIBRARY_VERSION, lines) if kind == "driver_library_mismatch" else None
                if library_version is not None:
                    message += f" (NVML library version: {library_version})"
                return vendor, SmiError(kind, message)
    return None


def _first_group(pattern: re.Pattern[str], lines: Sequence[str]) -> str | None:
    for line in lines:
        match = pattern.search(line.strip())
        if match is not None:
            return match.group(1)
    return None


def _unrecognized_message(lines: Sequence[str]) -> str:
    first = next((line.strip() for line in lines if line.strip()), None)
    if first is None:
        return "the output is empty"
    shown = textwrap.shorten(first, width=120, placeholder="...")
    return f"not a known nvidia-smi, amd-smi or rocm-smi output; it starts with: {shown}"


# --- box tables (nvidia-smi and amd-smi defaults) --------------------------------------------------

_RULE = re.compile(r"^[+|][-=+|]*[-=][-=+|]*[+|]$")  # +----+----+, |----+----|, |====+====|


@dataclass(frozen=True)
class _BoxTable:
    """One box-drawn table: the header rows and, per record, its rows, both split into cells."""

    header: tuple[tuple[str, ...], ...]
    records: tuple[tuple[tuple[str, ...], ...], ...]

    def label_position(self, label: str) -> tuple[int, int] | None:
        """(row, column) of the header cell holding ``label``; records hold the value at the same place."""
        for row_number, row in enumerate(self.header):
            for column_number, cell in enumerate(row):
                if label in cell:
                    return row_number, column_number
        return None

    def cell(self, record: Sequence[Sequence[str]], position: tuple[int, int] | None) -> str | None:
        if position is None:
            return None
        row_number, column_number = position
        if row_number >= len(record) or column_number >= len(record[row_number]):
            return None
        return record[row_number][column_number]


def _cells(line: str) -> tuple[str, ...] | None:
    stripped = line.strip()
    if not stripped.startswith("|") or _RULE.match(stripped):
        return None
    inner = stripped[1:-1] if stripped.endswith("|") and len(stripped) > 1 else stripped[1:]
    return tuple(inner.split("|"))


def _box_table(lines: Sequence[str], start: int) -> _BoxTable | None:
    """The table whose header begins at or after ``lines[start]``.

    The header is the block of rows right above the first "|===|" rule. Records follow, separated by
    rules; the table ends at the first line that is not a table row or a row whose cell count differs
    from the header's (the "MIG devices:" or "Processes:" title of the next table).
    """
    header_end = next((number for number in range(start, len(lines)) if lines[number].strip().startswith("|=")), None)
    if header_end is None:
        return None
    header: list[tuple[str, ...]] = []
    for line in reversed(lines[start:header_end]):
        cells = _cells(line)
        if cells is None:
            break
        header.insert(0, cells)
    if not header:
        return None
    width = len(header[0])

    records: list[tuple[tuple[str, ...], ...]] = []
    record: list[tuple[str, ...]] = []
    for line in lines[header_end + 1 :]:
        stripped = line.strip()
        if _RULE.match(stripped):
            if record:
                records.append(tuple(record))
            record = []
            continue
        cells = _cells(stripped)
        if cells is None or len(cells) != width:
            break
        record.append(cells)
    if record:
        records.append(tuple(record))
    return _BoxTable(header=tuple(header), records=tuple(records))


def _line_number(lines: Sequence[str], pattern: re.Pattern[str], start: int = 0) -> int | None:
    return next((number for number in range(start, len(lines)) if pattern.search(lines[number])), None)


# --- nvidia-smi default table ------------------------------------------------------------------------

_NVIDIA_BANNER = re.compile(r"NVIDIA-SMI\s+\S+\s+Driver Version:\s*(?P<driver>[^\s|]+)")
_CUDA_VERSION = re.compile(r"CUDA Version:\s*(?P<cuda>[^\s|]+)")
_NVIDIA_GPU_HEADER = re.compile(r"\bName\b.*\|.*Bus-Id")
# "   0  NVIDIA H100 80GB HBM3          On  ": index, name, then the persistence mode (or, on Windows, the
# driver model). Long names are cut by nvidia-smi and keep their "..." here.
_NVIDIA_GPU_CELL = re.compile(r"^\s*(?P<index>\d+)\s+(?P<name>.*?)(?:\s+(?:On|Off|WDDM|TCC|N/A))?\s*$")
_MIG_DEVICES_TITLE = re.compile(r"^\|\s*MIG devices:")
_MIG_DEVICE_CELL = re.compile(r"^\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<ci>\d+)\s+(?P<device>\d+)\s*$")


def _parse_nvidia_table(lines: Sequence[str]) -> SmiReport | None:
    banner_line = _line_number(lines, _NVIDIA_BANNER)
    if banner_line is None:
        return None
    banner = lines[banner_line]
    driver = _NVIDIA_BANNER.search(banner)
    cuda = _CUDA_VERSION.search(banner)

    gpus: list[GpuInfo] = []
    mig_devices: list[MigDevice] = []
    header_line = _line_number(lines, _NVIDIA_GPU_HEADER, banner_line)
    table = _box_table(lines, header_line) if header_line is not None else None
    if table is not None:
        name_at = table.label_position("Name")
        memory_at = table.label_position("Memory-Usage")
        mig_mode_at = table.label_position("MIG M.")  # absent before R450: the mode stays unknown
        for record in table.records:
            match = _NVIDIA_GPU_CELL.match(table.cell(record, name_at) or "")
            if match is None:
                continue
            gpus.append(
                GpuInfo(
                    index=int(match["index"]),
                    name=_value(match["name"]),
                    uuid=None,  # the table does not show it
                    memory_total_mib=_total_memory_mib(table.cell(record, memory_at) or ""),
                    mig_mode=_mig_mode(table.cell(record, mig_mode_at)),
                )
            )
        mig_title = _line_number(lines, _MIG_DEVICES_TITLE, header_line or banner_line)
        mig_table = _box_table(lines, mig_title + 1) if mig_title is not None else None
        for record in mig_table.records if mig_table is not None else ():
            device = _MIG_DEVICE_CELL.match(record[0][0])
            if device is not None:
                # The table names neither the profile nor the UUID (``nvidia-smi -L`` does).
                mig_devices.append(MigDevice(gpu_index=int(device["gpu"]), profile=None, uuid=None))

    return SmiReport(
        vendor="nvidia",
        driver_version=_value(driver["driver"]) if driver else None,
        cuda_version=_value(cuda["cuda"]) if cuda else None,
        rocm_version=None,
        gpus=tuple(gpus),
        mig_devices=tuple(mig_devices),
    )


# --- nvidia-smi -q -x ------------------------------------------------------------------------------


def _parse_nvidia_xml(lines: Sequence[str]) -> SmiReport | None:
    text = "\n".join(lines)
    start = text.find("<nvidia_smi_log")
    end = text.rfind("</nvidia_smi_log>")
    if start < 0 or end < start:
        return None
    # Only the root element is parsed: the prolog and its DOCTYPE (a reference to nvsmi_device_v*.dtd)
    # carry nothing to read, and leaving them out keeps the XML parser away from any DTD.
    try:
        root = ElementTree.fromstring(text[start : end + len("</nvidia_smi_log>")])
    except ElementTree.ParseError:
        return None

    gpus: list[GpuInfo] = []
    mig_devices: list[MigDevice] = []
    # The XML carries no GPU index; nvidia-smi writes the <gpu> elements in index order.
    for index, gpu in enumerate(root.findall("gpu")):
        gpus.append(
            GpuInfo(
                index=index,
                name=_value(gpu.findtext("product_name")),
                uuid=_identifier(gpu.findtext("uuid")),
                memory_total_mib=_memory_mib(gpu.findtext("fb_memory_usage/total"), "MiB"),
                mig_mode=_mig_mode(gpu.findtext("mig_mode/current_mig")),
            )
        )
        for device in gpu.findall("mig_devices/mig_device"):
            # <mig_device> holds instance ids and memory but no profile name; <uuid> is read where the
            # driver writes one.
            mig_devices.append(MigDevice(gpu_index=index, profile=None, uuid=_identifier(device.findtext("uuid"))))

    return SmiReport(
        vendor="nvidia",
        driver_version=_value(root.findtext("driver_version")),
        cuda_version=_value(root.findtext("cuda_version")),
        rocm_version=None,
        gpus=tuple(gpus),
        mig_devices=tuple(mig_devices),
    )


# --- nvidia-smi -L -----------------------------------------------------------------------------------

_LIST_GPU = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)\s]+)\)$")
_LIST_MIG = re.compile(r"^MIG (?P<profile>\S+)\s+Device\s+\d+: \(UUID: (?P<uuid>[^)\s]+)\)$")


def _parse_nvidia_list(lines: Sequence[str]) -> SmiReport | None:
    listed: list[tuple[GpuInfo, list[MigDevice]]] = []
    for line in lines:
        stripped = line.strip()
        gpu = _LIST_GPU.match(stripped)
        if gpu is not None:
            info = GpuInfo(int(gpu["index"]), _value(gpu["name"]), _identifier(gpu["uuid"]), None, None)
            listed.append((info, []))
            continue
        mig = _LIST_MIG.match(stripped)
        if mig is not None and listed:
            owner = listed[-1][0]
            listed[-1][1].append(MigDevice(owner.index, mig["profile"], _identifier(mig["uuid"])))
    if not listed:
        return None
    # A GPU with MIG devices has MIG enabled; one without may have it enabled with no instances yet,
    # so its mode stays unknown.
    gpus = tuple(replace(info, mig_mode="Enabled") if devices else info for info, devices in listed)
    return SmiReport(
        vendor="nvidia",
        driver_version=None,
        cuda_version=None,
        rocm_version=None,
        gpus=gpus,
        mig_devices=tuple(device for _, devices in listed for device in devices),
    )


# --- nvidia-smi mig -lgip ----------------------------------------------------------------------------

_LGIP_TITLE = re.compile(r"GPU instance profiles:")
_NO_MIG_ENABLED = re.compile(r"^No MIG-enabled devices found\.?$")
_LGIP_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+MIG\s+(?P<profile>\S+)\s+(?P<id>\d+)\s+(?P<free>\d+)/(?P<total>\d+)"
    r"\s+(?P<gib>\d+(?:\.\d+)?)\s+\S+\s+(?P<sm>\d+)\b"
)


def _parse_nvidia_mig_profiles(lines: Sequence[str]) -> SmiReport | None:
    if any(_NO_MIG_ENABLED.match(line.strip()) for line in lines):
        # nvidia-smi answered, and no GPU has MIG enabled; it does not say which GPUs it looked at.
        return _empty_report("nvidia")
    if _line_number(lines, _LGIP_TITLE) is None:
        return None
    # nvidia-smi lists profiles only for GPUs in MIG mode.
    indices = dict.fromkeys(profile.gpu_index for profile in parse_mig_profiles("\n".join(lines)))
    gpus = tuple(GpuInfo(index, None, None, None, "Enabled") for index in indices)
    return replace(_empty_report("nvidia"), gpus=gpus)


# --- nvidia-smi --query-gpu=... --format=csv ---------------------------------------------------------

_QUERY_FIELD = re.compile(r"^(?P<field>[a-z][a-z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?: \[(?P<unit>[^\]]+)\])?$")
_FIELD_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id"}
# A header is taken for nvidia-smi's when it names at least one of these fields.
_KNOWN_FIELDS = {"index", "name", "uuid", "driver_version", "memory.total", "mig.mode.current", "pci.bus_id"}

# Without a header, columns cannot be named from the output alone. A headerless row is read only when it
# has the shape of the query below, column for column; README documents it as the query to use.
NVIDIA_CSV_QUERY_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "mig.mode.current")
_HEADERLESS_SHAPE = (
    re.compile(r"^\d+$"),
    re.compile(r"^\S.*$"),
    re.compile(r"^GPU-[0-9A-Fa-f-]+$"),
    re.compile(r"^\d+(?:\.\d+)+$"),
    re.compile(r"^\d+(?: MiB)?$"),
    re.compile(r"^(?:Enabled|Disabled|\[?N/A\]?)$"),
)


def _csv_rows(lines: Sequence[str]) -> list[list[str]]:
    return [[field.strip() for field in row] for row in csv.reader(lines, skipinitialspace=True)]


def _query_header(row: Sequence[str]) -> list[tuple[str, str | None]] | None:
    fields: list[tuple[str, str | None]] = []
    for column in row:
        match = _QUERY_FIELD.match(column)
        if match is None:
            return None
        fields.append((_FIELD_ALIASES.get(match["field"], match["field"]), match["unit"]))
    return fields if any(field in _KNOWN_FIELDS for field, _ in fields) else None


def _parse_nvidia_csv(lines: Sequence[str]) -> SmiReport | None:
    rows = [row for row in _csv_rows([line for line in lines if line.strip()]) if row]
    headers = ((number, _query_header(row)) for number, row in enumerate(rows))
    header_number, header = next(((number, found) for number, found in headers if found), (-1, None))
    if header is not None:
        body = rows[header_number + 1 :]
    else:
        header = [(field, None) for field in NVIDIA_CSV_QUERY_FIELDS]
        body = [row for row in rows if len(row) == len(header)]
        if not body or not all(shape.match(value) for row in body for shape, value in zip(_HEADERLESS_SHAPE, row, strict=True)):
            return None

    records: list[dict[str, tuple[str, str | None]]] = []
    for row in body:
        if len(row) != len(header):
            break  # whatever follows the CSV
        records.append({field: (value, unit) for (field, unit), value in zip(header, row, strict=True)})
    if not records:
        return None

    def read(record: Mapping[str, tuple[str, str | None]], field: str) -> str | None:
        return _value(record[field][0]) if field in record else None

    gpus = tuple(
        GpuInfo(
            index=_integer(read(record, "index")),
            name=read(record, "name"),
            uuid=_identifier(read(record, "uuid")),
            memory_total_mib=(
                _memory_mib(read(record, "memory.total"), record["memory.total"][1] or "MiB")
                if "memory.total" in record
                else None
            ),
            mig_mode=_mig_mode(read(record, "mig.mode.current")),
        )
        for record in records
    )
    driver_versions = [version for record in records if (version := read(record, "driver_version"))]
    return SmiReport(
        vendor="nvidia",
        driver_version=driver_versions[0] if driver_versions else None,
        cuda_version=None,  # not a --query-gpu field
        rocm_version=None,
        gpus=gpus,
    )


# --- amd-smi default table (ROCm 7) --------------------------------------------------------------------

_AMD_BANNER = re.compile(r"AMD-SMI\s+\S+\s+amdgpu version:")
_AMDGPU_VERSION = re.compile(r"amdgpu version:\s*(?P<version>[^\s|]+)")
_ROCM_VERSION = re.compile(r"ROCm version:\s*(?P<version>[^\s|]+)")
_AMD_NAME_CELL = re.compile(r"^\s*[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s+(?P<name>.*?)\s*$")
_LEADING_INTEGER = re.compile(r"^\s*(\d+)\b")


def _parse_amd_table(lines: Sequence[str]) -> SmiReport | None:
    banner_line = _line_number(lines, _AMD_BANNER)
    if banner_line is None:
        return None
    banner = lines[banner_line]
    driver = _AMDGPU_VERSION.search(banner)
    rocm = _ROCM_VERSION.search(banner)

    gpus: list[GpuInfo] = []
    table = _box_table(lines, banner_line + 1)
    if table is not None:
        name_at = table.label_position("GPU-Name")  # "BDF   GPU-Name"
        index_at = table.label_position("HIP-ID")  # "GPU  HIP-ID  OAM-ID  Partition-Mode"
        memory_at = table.label_position("Mem-Usage")
        for record in table.records:
            name = _AMD_NAME_CELL.match(table.cell(record, name_at) or "")
            index = _LEADING_INTEGER.match(table.cell(record, index_at) or "")
            if name is None or index is None:
                continue
            gpus.append(
                GpuInfo(
                    index=int(index.group(1)),
                    name=_value(name["name"]),
                    uuid=None,
                    memory_total_mib=_total_memory_mib(table.cell(record, memory_at) or ""),
                    mig_mode=None,  # AMD GPUs have no MIG; their compute partitions are another thing
                )
            )
    return SmiReport(
        vendor="amd",
        driver_version=_value(driver["version"]) if driver else None,
        cuda_version=None,
        rocm_version=_value(rocm["version"]) if rocm else None,
        gpus=tuple(gpus),
    )


# --- amd-smi version ---------------------------------------------------------------------------------

# "AMDSMI Tool: 24.7.1+b446d6c | AMDSMI Library version: 24.7.2.0 | ROCm version: 6.2.2 | amdgpu version:
# 6.10.10 | amd_hsmp version: 2.2" (the amdgpu part from amd-smi 24.7 on), or the banner of amd-smi's usage text:
# "AMD System Management Interface | Version: 24.5.2.0 | ROCm version: 6.1.2 | Platform: Linux Baremetal".
_AMD_VERSION_LINE = re.compile(r"^(?:AMDSMI Tool:|AMD System Management Interface \|)")


def _parse_amd_version(lines: Sequence[str]) -> SmiReport | None:
    line_number = _line_number(lines, _AMD_VERSION_LINE)
    if line_number is None:
        return None
    line = lines[line_number]
    driver = _AMDGPU_VERSION.search(line)
    rocm = _ROCM_VERSION.search(line)
    return SmiReport(
        vendor="amd",
        driver_version=_value(driver["version"]) if driver else None,
        cuda_version=None,
        rocm_version=_value(rocm["version"]) if rocm else None,
    )


# --- amd-smi static / list (text and --json) ---------------------------------------------------------

_DEVICE_SECTION = re.compile(r"^(?P<kind>GPU|CPU|CORE): (?P<id>\d+)$")
_Tree = dict[str, object]


def _indented_sections(lines: Sequence[str]) -> list[tuple[int, _Tree]]:
    """amd-smi's text output as (GPU number, nested dict of lower-cased keys), one per "GPU: N" section.

    The text is YAML-like: "KEY: value" leaves and "KEY:" parents, nested by indentation.
    """
    sections: list[tuple[int, _Tree]] = []
    parents: list[tuple[int, _Tree]] = []  # (indentation, node), innermost last
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped == "...":  # "..." marks a cut in published examples
            continue
        indentation = len(line) - len(line.lstrip(" "))
        section = _DEVICE_SECTION.match(line)
        if section is not None:
            tree: _Tree = {}
            parents = [(0, tree)]
            if section["kind"] == "GPU":
                sections.append((int(section["id"]), tree))
            continue
        key, colon, value = stripped.partition(":")
        if not colon or not parents:
            continue
        while len(parents) > 1 and parents[-1][0] >= indentation:
            parents.pop()
        node = parents[-1][1]
        if value.strip():
            node[key.strip().lower()] = value.strip()
        else:
            child: _Tree = {}
            node[key.strip().lower()] = child
            parents.append((indentation, child))
    return sections


def _lookup(tree: Mapping[str, object], *path: str) -> object:
    node: object = tree
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _amd_memory_mib(size: object) -> int | None:
    # --json prints {"value": 196592, "unit": "MB"}; the text output prints "196592 MB".
    if isinstance(size, Mapping):
        amount, unit = size.get("value"), size.get("unit")
        if isinstance(amount, int | float) and isinstance(unit, str):
            return _mib(float(amount), unit)
        return None
    return _memory_mib(size, "MB")


def _amd_report(devices: Sequence[tuple[int, Mapping[str, object]]]) -> SmiReport:
    gpus = tuple(
        GpuInfo(
            index=index,
            name=_value(_lookup(fields, "asic", "market_name")),
            uuid=_identifier(fields.get("uuid")),  # amd-smi list; static has none
            memory_total_mib=_amd_memory_mib(_lookup(fields, "vram", "size")),
            mig_mode=None,
        )
        for index, fields in devices
    )
    versions = [_value(_lookup(fields, "driver", "version")) for _, fields in devices]
    return SmiReport(
        vendor="amd",
        driver_version=next((version for version in versions if version), None),
        cuda_version=None,
        rocm_version=None,
        gpus=gpus,
    )


def _parse_amd_text(lines: Sequence[str]) -> SmiReport | None:
    sections = _indented_sections(lines)
    return _amd_report(sections) if sections else None


def _parse_amd_json(lines: Sequence[str]) -> SmiReport | None:
    start = next((number for number, line in enumerate(lines) if line.lstrip()[:1] in ("[", "{")), None)
    if start is None:
        return None
    try:
        # raw_decode stops at the end of the JSON value, so lines printed after it do not matter.
        document, _ = json.JSONDecoder().raw_decode("\n".join(lines[start:]).lstrip())
    except json.JSONDecodeError:
        return None
    # ROCm 6.4 and later wrap the list as {"gpu_data": [...]}; earlier releases print the bare list.
    entries = document.get("gpu_data") if isinstance(document, dict) else document
    if not isinstance(entries, list):
        return None
    devices = [
        (entry["gpu"], cast(Mapping[str, object], entry))
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("gpu"), int)
    ]
    return _amd_report(devices) if devices else None


# --- rocm-smi --showdriverversion --------------------------------------------------------------------

_ROCM_SMI_BANNER = re.compile(r"ROCm System Management Interface")
# With the in-tree amdgpu module this is the kernel release ("6.14.0-28-generic"), reported as it is.
_ROCM_SMI_DRIVER = re.compile(r"Driver version:\s*(\S+)")


def _parse_rocm_smi(lines: Sequence[str]) -> SmiReport | None:
    if _line_number(lines, _ROCM_SMI_BANNER) is None:
        return None
    driver = _first_group(_ROCM_SMI_DRIVER, lines)
    return replace(_empty_report("amd"), driver_version=_value(driver))


# Tried in order; the first that recognises the text wins. Formats with an unmistakable marker come
# first, CSV (the loosest) last.
_PARSERS: tuple[tuple[Vendor, Callable[[Sequence[str]], SmiReport | None]], ...] = (
    ("nvidia", _parse_nvidia_xml),
    ("amd", _parse_amd_json),
    ("nvidia", _parse_nvidia_table),
    ("amd", _parse_amd_table),
    ("nvidia", _parse_nvidia_mig_profiles),
    ("nvidia", _parse_nvidia_list),
    ("amd", _parse_amd_version),
    ("amd", _parse_amd_text),
    ("amd", _parse_rocm_smi),
    ("nvidia", _parse_nvidia_csv),
)
