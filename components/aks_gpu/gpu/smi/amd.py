"""amd-smi's and rocm-smi's outputs: the amd-smi default table (ROCm 7), ``version``, ``static``/``list``/``metric``
as text and ``--json``, and rocm-smi's sections (concise table, ``--showdriverversion``, ``--showallinfo``, CSV).
Pure: prepared text in, a report (or None: not this format) out.

The amdgpu driver's version: the DKMS module AMD ships prints its own ("6.12.12"); the kernel's in-tree module
has none, and the tools print the kernel release instead ("6.14.0-28-generic"). rocm-smi's own README says so:
"For ROCk installations, this will be the AMDGPU module version (e.g. 5.0.71). For non-ROCk or monolithic ROCk
installations, this will be the kernel version" (https://github.com/ROCm/ROC-smi/blob/master/README.md). A kernel
release is reported as ``kernel_driver``, never as ``driver_version``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import cast

from aks_gpu.gpu.smi.model import GpuInfo, SmiError, SmiReport, empty_report
from aks_gpu.gpu.smi.text import (
    AMD_MODULE,
    KERNEL_RELEASE,
    MAX_DIGITS,
    PCI_ADDRESS,
    ROCM,
    Text,
    box_table,
    cells,
    identifier,
    integer,
    memory_mib,
    mib,
    table_cut,
    total_memory_mib,
    value,
    version,
)


def driver_or_kernel(raw: object) -> tuple[str | None, str | None]:
    """(driver version, kernel release) from what an AMD tool prints as the amdgpu / driver version."""
    module = version(raw, AMD_MODULE)
    if module is not None:
        return module, None
    return None, version(raw, KERNEL_RELEASE)


# --- amd-smi default table (ROCm 7) --------------------------------------------------------------------


def parse_table(t: Text) -> SmiReport | None:
    """The box amd-smi prints with no arguments. Its banner rows name the tool ("AMD-SMI 26.0.0+eaa54ecc") and
    the versions, on one row (ROCm 7.0: "amdgpu version: 6.12.12  ROCm version: 7.0.0") or one per row (later:
    "amdgpu Version:  N/A"); the GPU rows follow, two per GPU."""
    lines = t.lines
    banner_line = next((n for n, line in enumerate(lines) if line.startswith("| AMD-SMI ") and cells(line)), None)
    if banner_line is None:
        return None
    banner_rows: list[str] = []
    for line in lines[banner_line:]:
        row = cells(line)
        if row is None or len(row) != 1:
            break
        banner_rows.append(row[0])
    banner = " ".join(banner_rows)
    driver, kernel = driver_or_kernel(_after_label(banner, "amdgpu version:"))
    rocm = version(_after_label(banner, "rocm version:"), ROCM)

    gpus: list[GpuInfo] = []
    table = box_table(lines, banner_line + len(banner_rows))
    if table is not None:
        name_at = table.label_position("GPU-Name")  # "BDF   GPU-Name"
        index_at = table.label_position("HIP-ID")  # "GPU  HIP-ID  OAM-ID  Partition-Mode"
        memory_at = table.label_position("Mem-Usage")
        for record in table.records:
            bus, _, name = (table.cell(record, name_at) or "").strip().partition(" ")
            index_words = (table.cell(record, index_at) or "").split()
            index = integer(index_words[0]) if index_words else None
            if not PCI_ADDRESS.fullmatch(bus) or index is None:
                continue
            gpus.append(
                GpuInfo(
                    index=index,
                    name=value(name),
                    uuid=None,
                    memory_total_mib=total_memory_mib(table.cell(record, memory_at) or ""),
                    mig_mode=None,  # AMD GPUs have no MIG; their compute partitions are another thing
                    bus_id=bus,
                )
            )
    return SmiReport(
        vendor="amd",
        driver_version=driver,
        cuda_version=None,
        rocm_version=rocm,
        gpus=tuple(gpus),
        format="amd-smi",
        truncated=table_cut(t) or (table is not None and not table.complete),
        kernel_driver=kernel,
    )


def _after_label(text: str, label: str) -> str | None:
    """The word after ``label``, matched without regard to case."""
    at = text.lower().find(label)
    if at < 0:
        return None
    words = text[at + len(label) :].split(None, 1)
    return words[0] if words else None


# --- amd-smi version ---------------------------------------------------------------------------------

# "AMDSMI Tool: 24.7.1+b446d6c | AMDSMI Library version: 24.7.2.0 | ROCm version: 6.2.2 | amdgpu version:
# 6.10.10 | amd_hsmp version: 2.2" (the amdgpu part from amd-smi 24.7 on), or the banner of amd-smi's usage text:
# "AMD System Management Interface | Version: 24.5.2.0 | ROCm version: 6.1.2 | Platform: Linux Baremetal".
_VERSION_PREFIXES = ("AMDSMI Tool:", "AMD System Management Interface |")


def parse_version(t: Text) -> SmiReport | None:
    line_number = next((n for n, line in enumerate(t.lines) if line.strip().startswith(_VERSION_PREFIXES)), None)
    if line_number is None:
        return None
    line = t.lines[line_number].strip()
    fields = line.split("|")
    cut = t.partial and line_number == len(t.lines) - 1
    if cut:
        fields = fields[:-1]  # the field the cut fell in is not read; those before a "|" are whole
    values: dict[str, str] = {}
    for field in fields:
        key, colon, rest = field.partition(":")
        if colon:
            values.setdefault(key.strip().lower(), rest.strip())
    driver, kernel = driver_or_kernel(values.get("amdgpu version"))
    return replace(
        empty_report("amd", "amd-smi version"),
        driver_version=driver,
        kernel_driver=kernel,
        rocm_version=version(values.get("rocm version"), ROCM),
        truncated=t.cut,
    )


# --- amd-smi static / list / metric (text and --json) -----------------------------------------------------

Tree = dict[str, object]
# Keys only amd-smi prints inside a "GPU: N" section: a section with none of them is not amd-smi's, whatever
# "GPU: 0" line started it (a log line, a YAML file).
_AMD_SECTION_KEYS = frozenset(
    {"asic", "bus", "driver", "vram", "board", "vbios", "ifwi", "bdf", "uuid", "kfd_id", "node_id", "partition_id",
     "ecc", "ecc_blocks", "usage", "power", "partition", "ras", "limit", "process_isolation", "numa", "cache_info"}
)


def indented_sections(lines: Sequence[str]) -> list[tuple[int, Tree]]:
    """amd-smi's text output as (GPU number, nested dict of lower-cased keys), one per "GPU: N" section.

    The text is YAML-like: "KEY: value" leaves and "KEY:" parents, nested by indentation.
    """
    sections: list[tuple[int, Tree]] = []
    parents: list[tuple[int, Tree]] = []  # (indentation, node), innermost last
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped == "...":  # "..." marks a cut in published examples
            continue
        indentation = len(line) - len(line.lstrip(" "))
        kind, colon, number = stripped.partition(": ")
        if indentation == 0 and colon and kind in ("GPU", "CPU", "CORE"):
            index = integer(number)
            tree: Tree = {}
            parents = [(0, tree)] if index is not None else []
            if kind == "GPU" and index is not None:
                sections.append((index, tree))
            continue
        key, colon, rest = stripped.partition(":")
        if not colon or not parents:
            continue
        while len(parents) > 1 and parents[-1][0] >= indentation:
            parents.pop()
        node = parents[-1][1]
        name = key.strip().lower()
        if rest.strip():
            node.setdefault(name, rest.strip())
        elif name not in node:
            child: Tree = {}
            node[name] = child
            parents.append((indentation, child))
    return [(index, tree) for index, tree in sections if _AMD_SECTION_KEYS & set(tree)]


def lookup(tree: Mapping[str, object], *path: str) -> object:
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
        if isinstance(amount, int | float) and not isinstance(amount, bool) and isinstance(unit, str):
            return mib(float(amount), unit) if math.isfinite(float(amount)) else None
        return None
    return memory_mib(size, "MB")


def _amd_report(devices: Sequence[tuple[int, Mapping[str, object]]], format_: str, cut: bool) -> SmiReport:
    gpus = tuple(
        GpuInfo(
            index=index,
            name=value(name) if isinstance(name := lookup(fields, "asic", "market_name"), str) else None,
            uuid=identifier(fields.get("uuid")) if isinstance(fields.get("uuid"), str) else None,  # list; static has none
            memory_total_mib=_amd_memory_mib(lookup(fields, "vram", "size")),
            mig_mode=None,
            bus_id=_bus(lookup(fields, "bus", "bdf") or fields.get("bdf")),
        )
        for index, fields in devices
    )
    printed = [lookup(fields, "driver", "version") for _, fields in devices]
    classified = [driver_or_kernel(raw) for raw in printed if isinstance(raw, str)]
    return SmiReport(
        vendor="amd",
        driver_version=next((driver for driver, _ in classified if driver), None),
        cuda_version=None,
        rocm_version=None,
        gpus=gpus,
        format=format_,  # type: ignore[arg-type]
        truncated=cut,
        kernel_driver=next((kernel for _, kernel in classified if kernel), None),
    )


def _bus(raw: object) -> str | None:
    return raw if isinstance(raw, str) and PCI_ADDRESS.fullmatch(raw) else None


def parse_text(t: Text) -> SmiReport | None:
    sections = indented_sections(t.complete)
    return _amd_report(sections, "amd-smi static/list", t.cut) if sections else None


def json_documents(raw: str, limit: int = 4) -> Iterator[object]:
    """The JSON values in ``raw``, in order (amd-smi's, and a second command's after it), at most ``limit``.

    NaN, Infinity, 1e999 and integers longer than MAX_DIGITS are read as None, not as numbers; a document nested
    deeper than Python's recursion limit, or one that is no JSON, ends the reading.
    """
    decoder = json.JSONDecoder(
        parse_constant=lambda _: None,
        parse_float=_finite_float,
        parse_int=lambda digits: int(digits) if len(digits.lstrip("-")) <= MAX_DIGITS else None,
    )
    position, found = 0, 0
    while found < limit and position < len(raw):
        # A document starts a line ("[" or "{" first on it): a bracket inside prose is no JSON. Lines are walked
        # once each, so a line full of brackets costs one pass.
        newline = raw.find("\n", position)
        line_end = len(raw) if newline < 0 else newline
        line = raw[position:line_end]
        start = position + len(line) - len(line.lstrip())
        if start < line_end and raw[start] in "[{":
            try:
                document, end = decoder.raw_decode(raw, start)
            except (ValueError, RecursionError):
                return
            yield document
            found += 1
            position = end
            continue
        position = line_end + 1


def _finite_float(text: str) -> float | None:
    number = float(text)
    return number if math.isfinite(number) else None


def json_devices(document: object) -> list[tuple[int, Mapping[str, object]]]:
    # ROCm 6.4 and later wrap the list as {"gpu_data": [...]}; earlier releases print the bare list.
    entries = document.get("gpu_data") if isinstance(document, dict) else document
    if not isinstance(entries, list):
        return []
    devices: list[tuple[int, Mapping[str, object]]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        gpu = entry.get("gpu")
        if isinstance(gpu, int) and not isinstance(gpu, bool) and 0 <= gpu < 1024 and _AMD_SECTION_KEYS & set(entry):
            devices.append((gpu, cast(Mapping[str, object], entry)))
    return devices


def parse_json(t: Text) -> SmiReport | None:
    for document in json_documents(t.raw, limit=1):
        devices = json_devices(document)
        if devices:
            return _amd_report(devices, "amd-smi --json", t.capped)
        return _rocm_smi_json(document, t.capped)
    return None


# rocm-smi --json: {"card0": {"Card Series": ..., "VRAM Total Memory (B)": ...}, "system": {"Driver version": ...}},
# the keys rocm-smi prints in its text form (rocm_smi_lib's python_smi_tools/rocm_smi.py; fixtures smi/66 and 67).
_ROCM_SMI_NAME_KEYS = ("Card Series", "Device Name", "Card series")


def _rocm_smi_json(document: object, cut: bool) -> SmiReport | None:
    if not isinstance(document, dict):
        return None
    cards = {
        index: fields
        for key, fields in document.items()
        if isinstance(key, str)
        and key.startswith("card")
        and (index := integer(key[4:])) is not None
        and index < 1024
        and isinstance(fields, dict)
    }
    if not cards:
        return None
    system = document.get("system")
    printed = system.get("Driver version") if isinstance(system, dict) else None
    driver, kernel = driver_or_kernel(printed)
    gpus = []
    for index, fields in sorted(cards.items()):
        name = next((value(fields[key]) for key in _ROCM_SMI_NAME_KEYS if isinstance(fields.get(key), str)), None)
        total = integer(fields.get("VRAM Total Memory (B)"))
        bus = fields.get("PCI Bus")
        gpus.append(
            GpuInfo(
                index=index,
                name=name,
                uuid=None,
                memory_total_mib=mib(float(total), "B") if total is not None else None,
                mig_mode=None,
                bus_id=_bus(bus.lower() if isinstance(bus, str) else None),
            )
        )
    return replace(
        empty_report("amd", "rocm-smi --json"), driver_version=driver, kernel_driver=kernel, gpus=tuple(gpus), truncated=cut
    )


# --- rocm-smi ------------------------------------------------------------------------------------------

_ROCM_SMI_BANNER = "ROCm System Management Interface"
_ROCM_SMI_END = "End of ROCm SMI Log"


def parse_rocm_smi(t: Text) -> SmiReport | None:
    """rocm-smi's text: a banner, then sections in any order and number (``--showallinfo`` prints many).

    The driver version is read wherever its line stands ("Driver version: 6.7.0" at the top in old releases,
    under "Version of System Component" in later ones); the GPUs are the rows of the concise table when there is
    one, else the GPU[N] that the per-GPU lines name. ``rocm-smi --csv`` has no banner: its "device,Driver version"
    header is read the same way.
    """
    lines = t.complete
    banner = next((n for n, line in enumerate(lines) if _ROCM_SMI_BANNER in line or _concise_header(line)), None)
    csv_driver = _rocm_smi_csv_driver(lines)
    csv_gpus = _rocm_smi_csv_gpus(lines)
    if banner is None and csv_driver is None and not csv_gpus:
        return None
    if banner is None and csv_gpus:
        return replace(empty_report("amd", "rocm-smi"), gpus=csv_gpus, truncated=t.cut)
    printed = csv_driver
    indices: dict[int, None] = {}
    memory: dict[int, int | None] = {}
    concise: dict[int, None] = {}
    in_concise = False
    for line in lines[(banner or 0) :]:
        stripped = line.strip()
        if stripped.startswith("Driver version:") and printed is None:
            printed = stripped.partition(":")[2].strip()
            continue
        if (stripped.startswith("=") and "Concise Info" in stripped) or _concise_header(stripped):
            in_concise = True
            continue
        if in_concise:
            if stripped.startswith("=") and stripped.strip("=").strip() in ("", "End of ROCm SMI Log"):
                if concise:
                    in_concise = False
                continue
            words = stripped.split()
            if words and (index := integer(words[0])) is not None and index < 1024:
                concise[index] = None
            continue
        gpu = _rocm_smi_gpu(stripped)
        if gpu is not None:
            index, key, rest = gpu
            indices[index] = None
            if key.lower() == "vram total memory (b)":
                total = integer(rest)
                memory[index] = mib(float(total), "B") if total is not None else None
    driver, kernel = driver_or_kernel(printed)
    chosen = concise or indices
    gpus = tuple(GpuInfo(index, None, None, memory.get(index), None) for index in chosen)
    # rocm-smi closes every run with "End of ROCm SMI Log" after its banner: a banner without it was cut (at a line
    # end, where nothing else marks the cut).
    ended = any(_ROCM_SMI_END in line for line in lines)
    cut = t.cut or (any(_ROCM_SMI_BANNER in line for line in lines) and not ended)
    report = replace(empty_report("amd", "rocm-smi"), driver_version=driver, kernel_driver=kernel, gpus=gpus, truncated=cut)
    if not gpus and (in_concise or any(_GPU_MENTION in line or not _rocm_smi_frame(line, printed) for line in lines)):
        # Lines are there besides the banner, the rules and the driver version, and no GPU was read from them (a
        # prefix before each line, a layout this does not know): an error that says so, never "0 GPUs". Only an
        # output of nothing but those (--showdriverversion) has no GPU to show.
        return replace(report, error=SmiError("unreadable", "rocm-smi output whose GPU rows could not be read"))
    return report


def _rocm_smi_frame(line: str, printed: str | None) -> bool:
    """A line of rocm-smi's frame, which names no GPU: blank, a rule or section title ("=== ... ==="), or the driver
    version that was read ("Driver version: ...", or --csv's "device,Driver version" and "cardsystem,...")."""
    stripped = line.strip()
    if printed is not None and (stripped.startswith("Driver version:") or stripped == "device,Driver version"):
        return True
    return not stripped or stripped.startswith("=") or (printed is not None and stripped.startswith("cardsystem,"))


_GPU_MENTION = "GPU["


def _rocm_smi_csv_gpus(lines: Sequence[str]) -> tuple[GpuInfo, ...]:
    """rocm-smi --csv: a header starting with "device," and one "cardN,..." row per GPU (fixture smi/68)."""
    for number, line in enumerate(lines):
        header = line.strip().split(",")
        if header[:1] != ["device"] or len(header) < 2:
            continue
        gpus: list[GpuInfo] = []
        for row_line in lines[number + 1 :]:
            row = row_line.strip().split(",")
            index = integer(row[0][4:]) if row[0].startswith("card") else None
            if index is None or index >= 1024 or len(row) != len(header):
                break
            fields = dict(zip(header, row, strict=True))
            total = integer(fields.get("VRAM Total Memory (B)"))
            gpus.append(
                GpuInfo(
                    index,
                    value(fields.get("Card Series") or fields.get("Device Name")),
                    None,
                    mib(float(total), "B") if total is not None else None,
                    None,
                )
            )
        return tuple(gpus)
    return ()


def _concise_header(line: str) -> bool:
    """The concise table's header: "Device  Node  IDs ... VRAM%  GPU%" (ROCm 6), "Device [Model : Revision] ..." (5)."""
    words = line.split()
    # ROCm 3 and 4 began the header with "GPU" ("GPU  Temp  AvgPwr ... VRAM%  GPU%", fixtures smi/69 and 71).
    return words[:1] in (["Device"], ["GPU"]) and "VRAM%" in words and "GPU%" in words


def _rocm_smi_gpu(stripped: str) -> tuple[int, str, str] | None:
    """ "GPU[0]\t\t: VRAM Total Memory (B): 34342961152" -> (0, "VRAM Total Memory (B)", "34342961152")."""
    if not stripped.startswith("GPU["):
        return None
    number, bracket, rest = stripped[4:].partition("]")
    index = integer(number)
    if not bracket or index is None or index >= 1024:
        return None
    _, colon, item = rest.partition(":")
    key, _, item_value = item.strip().partition(":")
    return (index, key.strip(), item_value.strip()) if colon else None


def _rocm_smi_csv_driver(lines: Sequence[str]) -> str | None:
    """ "device,Driver version" then "cardsystem,<version>": rocm-smi --showdriverversion --csv."""
    for number, line in enumerate(lines[:-1]):
        if line.strip() == "device,Driver version":
            name, comma, printed = lines[number + 1].strip().partition(",")
            return printed.strip() if comma and name == "cardsystem" else None
    return None
