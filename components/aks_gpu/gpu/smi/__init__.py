"""Parsers for the output of the GPU management tools: nvidia-smi, amd-smi and rocm-smi.

Pure: text in, a frozen ``SmiReport`` out. Standard library only, no I/O, so the same code reads a live
pod's output, a saved snapshot and the test fixtures. One module per vendor (``nvidia``, ``amd``; nvidia-smi's -q
and -q -x in ``nvidia_query``, its CSV in ``nvidia_csv``), the shared reading rules in ``text`` (limits, numbers,
versions, box tables) and the report's types in ``model``.

Formats read (``parse_smi`` tells them apart by content):

- nvidia-smi: the default table (the 79-column layout of drivers before 530 and the wider one after,
  with the "MIG devices" table when present), ``-q`` (text) and ``-q -x`` (XML), ``-L``, ``mig -lgip``,
  ``--query-gpu=... --format=csv`` (any field list in any order, with or without header and units),
  ``--query-compute-apps=... --format=csv``, ``nvlink -s`` and ``topo -m``;
- amd-smi: the default table (ROCm 7), ``version``, ``static``, ``list`` and ``metric`` (text and ``--json``);
- rocm-smi: its sections in any number and order (concise table, ``--showdriverversion``, ``--showallinfo``);
- the error messages these tools print when the driver is missing or does not match.

The rules every parser keeps: a value is reported only where the format around it was recognized; text that
is no known format is an ``unrecognized`` error, not an empty report; output cut short says ``truncated`` and
yields nothing from the cut part; CRLF line ends, terminal colour codes, kubectl notices and shell prompts are
ignored; parsing takes time linear in the input and never raises on any text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aks_gpu.gpu.smi import amd, nvidia, nvidia_csv, nvidia_query
from aks_gpu.gpu.smi.errors import loaded_kernel_module, reported_error
from aks_gpu.gpu.smi.model import (
    ErrorKind,
    Format,
    GpuInfo,
    GpuProcess,
    LinkState,
    MigDevice,
    MigMode,
    MigProfile,
    NvLink,
    SmiError,
    SmiReport,
    TopologyLink,
    VendorChoice,
    empty_report,
)
from aks_gpu.gpu.smi.nvidia_csv import NVIDIA_CSV_QUERY_FIELDS
from aks_gpu.gpu.smi.text import MAX_LINE_CHARS, Text, bus_key, prepare, shorten
from aks_gpu.naming import Vendor
from aks_gpu.redaction import scrub_secret_shapes

__all__ = [
    "NVIDIA_CSV_QUERY_FIELDS",
    "ErrorKind",
    "Format",
    "GpuInfo",
    "GpuProcess",
    "LinkState",
    "MigDevice",
    "MigMode",
    "MigProfile",
    "NvLink",
    "SmiError",
    "SmiReport",
    "TopologyLink",
    "Vendor",
    "VendorChoice",
    "parse_mig_profiles",
    "parse_smi",
    "smi_command",
]


def __getattr__(name: str) -> Any:
    # Where a pool's SMI command runs is the resolved model's (components/aks_gpu/resolved/targets.py); the name stays here
    # for callers of this package, loaded on first use so that parsing SMI output never loads the config models.
    if name == "smi_command":
        from aks_gpu.resolved.targets import smi_command

        return smi_command
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_smi(text: str, vendor: VendorChoice = "auto") -> SmiReport:
    """Read one SMI output. ``vendor`` limits which tools' formats are tried; "auto" tries all.

    Text that is no known format gives an ``unrecognized`` error rather than an empty report, so a caller
    never mistakes garbage for "no GPUs".
    """
    if vendor not in ("nvidia", "amd", "auto"):
        raise ValueError(f"vendor must be 'nvidia', 'amd' or 'auto', not {vendor!r}")
    vendors: tuple[Vendor, ...] = ("nvidia", "amd") if vendor == "auto" else (vendor,)
    prepared = prepare(text)
    return read_prepared(prepared, vendors)


def read_prepared(prepared: Text, vendors: tuple[Vendor, ...], first: SmiReport | None = None) -> SmiReport:
    """``parse_smi`` on text already prepared. ``first`` is the report of the first parser, where the caller has
    read the text with it already (the health reader reads -q and -q -x once for both)."""
    report = first
    for parser_vendor, parser in _PARSERS if report is None else ():
        if parser_vendor in vendors:
            report = parser(prepared)
            if report is not None:
                break

    error = reported_error(prepared.lines, vendors, prepared.complete)
    if error is not None:
        error_vendor, smi_error = error
        report = replace(report or empty_report(error_vendor), error=smi_error)
    if report is None:
        return replace(empty_report(None), error=SmiError("unrecognized", _unrecognized_message(prepared)))
    if report.error is None and report.format in _LISTS_GPUS and not report.gpus and not report.truncated:
        # These formats list every GPU the tool sees, and the tool says so in words when it sees none (an error
        # above): read whole with no GPU, the rows were there and could not be read. Never "0 GPUs" silently.
        report = replace(
            report, error=SmiError("unreadable", f"the output is {report.format}, and none of its GPU rows could be read")
        )
    if report.vendor == "nvidia" and report.driver_version is None:
        report = replace(report, driver_version=loaded_kernel_module(prepared.complete))
    return _listed_once(report)


def _listed_once(report: SmiReport) -> SmiReport:
    """The report with each GPU once. A PCI address is one GPU: two rows with the same one are one GPU listed twice
    (two runs of the tool saved in one file, or a file pasted twice), never two GPUs; the error says which."""
    seen: dict[str, GpuInfo] = {}
    kept: list[GpuInfo] = []
    twice: list[str] = []
    for gpu in report.gpus:
        key = bus_key(gpu.bus_id) if gpu.bus_id else None
        if key is None:
            kept.append(gpu)
        elif key in seen:
            twice.append(f"{gpu.bus_id} (as GPU {seen[key].index} and again as GPU {gpu.index})")
        else:
            seen[key] = gpu
            kept.append(gpu)
    if not twice:
        return report
    message = (
        f"the output lists {'a GPU' if len(twice) == 1 else f'{len(twice)} GPUs'} twice by PCI address: "
        f"{', '.join(twice[:8])}{' ...' if len(twice) > 8 else ''}; each is read once ({len(kept)} GPU(s)): "
        "the file may hold two runs of the tool, or two nodes' outputs"
    )
    return replace(report, gpus=tuple(kept), error=report.error or SmiError("duplicate_gpu", message))


# The formats that always list the GPUs (nvidia-smi -L, nvlink -s, topo -m and CSV are recognised by their GPU rows).
_LISTS_GPUS: frozenset[str] = frozenset(
    {"nvidia-smi", "nvidia-smi -q", "nvidia-smi -q -x", "amd-smi", "amd-smi static/list", "amd-smi --json", "rocm-smi --json"}
)


def parse_mig_profiles(text: str) -> tuple[MigProfile, ...]:
    """The rows of ``nvidia-smi mig -lgip``; empty when the text holds no such table."""
    return nvidia.mig_profiles(prepare(text).lines)


def _unrecognized_message(prepared: Text) -> str:
    first = next((line.strip() for line in prepared.lines if line.strip()), None)
    if first is None and "<nvidia_smi_log" in prepared.raw:
        return "an nvidia-smi -q -x document that is not well-formed XML"
    notes = []
    if prepared.long_lines:
        notes.append(f"{prepared.long_lines} line(s) longer than {MAX_LINE_CHARS // 1024} KiB were not read")
    if prepared.capped:
        notes.append("the output was longer than 16 MiB and only its start was read")
    note = f" ({'; '.join(notes)})" if notes else ""
    if first is None:
        return f"the output is empty{note}"
    # The excerpt may be of a file that is no SMI output at all (a config with a token, a password file): whatever
    # has the shape of a credential is left out of it.
    return f"not a known nvidia-smi, amd-smi or rocm-smi output; it starts with: {shorten(scrub_secret_shapes(first))}{note}"


# Tried in order; the first that recognises the text wins. Formats with an unmistakable marker come
# first, CSV (the loosest) last.
_PARSERS: tuple[tuple[Vendor, Callable[[Text], SmiReport | None]], ...] = (
    ("nvidia", nvidia_query.parse_query),
    ("amd", amd.parse_json),
    ("nvidia", nvidia.parse_table),
    ("amd", amd.parse_table),
    ("nvidia", nvidia.parse_mig_profiles),
    ("nvidia", nvidia.parse_nvlink),
    ("nvidia", nvidia.parse_list),
    ("nvidia", nvidia.parse_topology),
    ("amd", amd.parse_version),
    ("amd", amd.parse_text),
    ("amd", amd.parse_rocm_smi),
    ("nvidia", nvidia_csv.parse_csv),
)
