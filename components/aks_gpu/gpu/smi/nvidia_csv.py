"""nvidia-smi --query-gpu=... and --query-compute-apps=... with --format=csv: any field list in any order, with or
without header and units. Pure: prepared text in, a report (or None: not this format) out.

Where the output was cut short, only what is complete is read and the report says ``truncated``.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from aks_gpu.gpu.smi.model import GpuInfo, GpuProcess, SmiReport, empty_report
from aks_gpu.gpu.smi.nvidia import mig_mode
from aks_gpu.gpu.smi.text import NVIDIA_DRIVER, PCI_ADDRESS, Text, identifier, integer, memory_mib, value, version

_QUERY_FIELD = re.compile(
    r"(?P<field>[a-z][A-Za-z0-9_]{0,63}(?:\.[A-Za-z0-9_]{1,63}){0,6})(?: \[(?P<unit>[^\]]{1,16})\])?", re.ASCII
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
