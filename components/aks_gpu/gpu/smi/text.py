"""Reading SMI text safely: lines, limits, values, numbers, versions and box-drawn tables. Pure, no I/O.

Every parser reads through these helpers, which hold three promises:

- **Linear time.** No regular expression here can backtrack over a run of its own input: patterns are
  anchored, their repeats are separated by literals, and the box tables and memory cells are split with
  string methods. A line longer than ``MAX_LINE_CHARS`` is no SMI line and is not read at all.
- **No crash on any text.** Numbers are ASCII digits of bounded length (a superscript "²" is ``isdigit()``
  but no digit here; a 400-digit count is no count), decimals are finite, and sizes stay in range.
- **No guess.** A value is returned only in the shape the tool prints it; anything else is None.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

# Bounds on what is read. nvidia-smi -q -x for eight GPUs is about 200 KB and its longest line under 200
# characters; a CSV of all 115 --query-gpu fields is under 3 KB a line. Far above that is not SMI output.
MAX_INPUT_CHARS = 16 * 1024 * 1024
MAX_LINE_CHARS = 64 * 1024
MAX_DIGITS = 15  # the largest count or size an SMI tool prints fits in 15 digits (PB in bytes)
MAX_MIB = 1 << 40  # 1 EiB: any memory size above is garbage

# Lines that are not the tool's output but come with it when it is captured from a terminal or a pod:
# kubectl's notices, a shell prompt with the command typed after it, or the command echoed on its own.
_NOISE_LINE = re.compile(
    r"""^[ \t]*(?:
        Defaulted\ container\ .*
      | command\ terminated\ with\ exit\ code\ [0-9]+
      | Unable\ to\ use\ a\ TTY\b.*
      | (?:[\w.-]+@[\w.-]+:[^ \t]*)?[$\#]\ .*
      | \[[\w.-]+@[\w.-]+\ [^\]]{0,200}\][$\#]\ .*
      | (?:sudo\ +)?(?:nvidia-smi|amd-smi|rocm-smi|kubectl)(?:[ \t].*)?
    )$""",
    re.VERBOSE | re.ASCII,
)
# What log collectors put before each line of a command's output, stripped so the output reads as the tool printed it:
# kubectl logs --timestamps ("2024-05-01T12:34:56.123456789Z ", RFC 3339 with nanoseconds and one space,
# https://kubernetes.io/docs/reference/kubectl/generated/kubectl_logs/), journalctl's default short format
# ("Mar 05 23:33:35 host ident[pid]: ") and its short-iso form ("2024-05-01T12:34:56+0000 host ident[pid]: ", an
# offset without a colon, which tells it from kubectl's "Z"),
# https://www.freedesktop.org/software/systemd/man/latest/journalctl.html (--output). One space after the prefix is
# the separator; what follows keeps its own indentation (amd-smi's nesting is read from it).
_JOURNAL_PREFIX = re.compile(
    r"^(?:[A-Z][a-z]{2} [ 0-3][0-9] [0-2][0-9]:[0-5][0-9]:[0-6][0-9]"
    r"|[0-9]{4}-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9](?:\.[0-9]{1,6})?[+-][0-9]{4})"
    r" (?P<host>[^ :]{1,128}) (?P<ident>[^ :\[]{1,128})(?:\[[0-9]{1,10}\])?: ",
    re.ASCII,
)
_KUBECTL_PREFIX = re.compile(
    r"^[0-9]{4}-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9](?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}) ", re.ASCII
)
_PREFIX_PROBE_LINES = 64  # lines looked at to decide whether the output carries prefixes at all
# What a parallel shell puts before each line of a host's output: pdsh "prefaces each line of output with the hostname
# of originating system" as "host: " (pdsh(1), https://www.mankier.com/1/pdsh, -L and dshbak(1)), clush the same, and
# others name the stream too ("nid005113 out: ", "nid005113 err: ", issue 35). Unlike a timestamp it has no shape of
# its own ("GPU: 0" is amd-smi's), so it is read off only when every line of the output carries the same host.
_HOST_PREFIX = re.compile(r"^(?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,252})(?: (?:out|err))?: ", re.ASCII)
# Words that begin lines of the outputs themselves in the same "word: " shape and are no host: the kernel modules'
# tags (a dmesg without timestamps is all "NVRM: Xid ..." lines, fixtures health/48 and 49), the log levels the
# tools print ("ERROR: ...", "WARNING: ..."), and programs naming themselves in their errors ("bash: nvidia-smi:
# command not found", "sudo: ...", "kubectl: ...").
_NOT_HOSTS = frozenset(
    {"nvrm", "nvidia", "nvidia-modeset", "nvidia-uvm", "amdgpu", "kernel", "error", "warning", "info", "note", "gpu"}
    | {"bash", "sh", "dash", "zsh", "ash", "sudo", "env", "kubectl", "nvidia-smi", "amd-smi", "rocm-smi", "dcgmi"}
)

# Terminal colour and cursor codes (CSI ... final byte) and title strings (OSC ... BEL): rocm-smi and
# amd-smi colour their warnings, and a captured terminal keeps the codes.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]", re.ASCII)

# How the tools print "no value". Brackets are stripped before the lookup ("[N/A]" in CSV).
# nvidia-smi prints "ERR!" in a field it failed to read (the driver could not reach the GPU, or the query failed):
# that is no value either; the health reader looks for it in the raw cells (health/nvidia.py, ``_err_cells``).
_NO_VALUE = {"", "n/a", "na", "none", "unknown", "not supported", "unknown error", "insufficient permissions", "err!"}

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
_AMOUNT = re.compile(r"(?P<number>[0-9]{1,15}(?:\.[0-9]{1,6})?) ?(?P<unit>[KMGT]?i?B)?", re.ASCII | re.IGNORECASE)
_DECIMAL = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,9})?", re.ASCII)
# Identifiers are one token: "GPU-63d1e50a-…", "MIG-GPU-…/1/0" (R470 MIG names), amd-smi's
# "76ff73a1-0000-1000-80a0-8c022586fed6". A placeholder such as "<redacted>" is not an identifier.
_IDENTIFIER = re.compile(r"[0-9A-Za-z][0-9A-Za-z/_:.-]{0,127}", re.ASCII)
# PCI addresses as the tools print them: "00000000:18:00.0" (nvidia-smi), "0000:0c:00.0" (amd-smi),
# "0000:65:00" (the kernel's NVRM lines).
PCI_ADDRESS = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?", re.ASCII)


def bus_key(bus_id: str) -> str:
    """A PCI address in one spelling: nvidia-smi writes an 8-digit domain ("00000000:18:00.0"), amd-smi and lspci 4
    ("0000:18:00.0"), and letters in either case."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 3 and parts[0] and len(parts[0]) <= 8 and all(c in "0123456789abcdef" for c in parts[0]):
        parts[0] = f"{int(parts[0], 16):x}"
    return ":".join(parts)

# Version shapes. NVIDIA drivers are "565.57.01", "550.120", "418.87.01"; CUDA "12.7"; AMD's amdgpu DKMS module
# "6.12.12" and ROCm "7.0.0" or "6.3.2-66". A Linux kernel release has a "-" and a build after it
# ("6.14.0-28-generic", "4.18.0-348.12.2.el8_5.x86_64"): where an AMD tool prints one as the driver version,
# the amdgpu module is the kernel's own (in-tree) and has no version of its own.
NVIDIA_DRIVER = re.compile(r"[0-9]{2,4}(?:\.[0-9]{1,4}){1,3}", re.ASCII)
CUDA = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?", re.ASCII)
AMD_MODULE = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,5}){1,3}", re.ASCII)
ROCM = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,5}){1,3}(?:-[0-9]{1,8})?", re.ASCII)
KERNEL_RELEASE = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}(?:\.[0-9]{1,5})?-[0-9A-Za-z][0-9A-Za-z._+~-]{0,63}", re.ASCII)


@dataclass(frozen=True)
class Text:
    """One output, normalised: LF line ends, no terminal codes, noise lines dropped.

    ``partial`` is True when the output does not end with a line end: its last line may have been cut in
    the middle (an exec stopped by its timeout) and is kept in ``lines`` as ``last``, not among ``complete``.
    """

    raw: str  # the normalised text, capped at MAX_INPUT_CHARS
    lines: tuple[str, ...]  # the meaningful lines, over-long ones replaced by ""
    partial: bool
    capped: bool
    long_lines: int
    # Lines that came with a log collector's prefix (kubectl --timestamps, journald, a parallel shell's "host: "),
    # stripped from every line above; "journal-kernel" when journald named the kernel as their source (journalctl -k).
    prefix: str | None = None

    @property
    def complete(self) -> tuple[str, ...]:
        """The lines known to be whole: all of them, less the last one when the output was cut."""
        return self.lines[:-1] if self.partial and self.lines else self.lines

    @property
    def cut(self) -> bool:
        """True when something was dropped: a partial last line or the tail beyond MAX_INPUT_CHARS."""
        return self.capped or (self.partial and bool(self.lines))


def table_cut(t: Text) -> bool:
    """For box tables, which always end with a rule ("+----+"): cut when the output stops without a line end after
    anything else. A row is no proof the line is whole: "|   4  NVIDIA H100 ...  On  |  " cut inside its record reads,
    trailing blanks stripped, as a one-cell row."""
    last = t.lines[-1] if t.lines else ""
    if t.capped:
        return True
    if not t.partial or not t.lines:
        return False
    if not is_rule(last):
        return True
    # A rule cut inside ("+------+" of a "+------+------+" rule) is shorter than the table's lines before it.
    before = next((line for line in reversed(t.lines[:-1]) if is_rule(line) or cells(line) is not None), None)
    return before is not None and len(last.strip()) < len(before.strip())


_XML_ROOT_START = "<nvidia_smi_log"
_XML_ROOT_END = "</nvidia_smi_log>"


def prepare(text: str) -> Text:
    """Normalise one output and split it into lines.

    Of an ``nvidia-smi -q -x`` document only what stands outside the XML root becomes lines (the stderr lines an
    exec keeps beside it: kubectl's notices, "Unable to determine the device handle for GPU ..."): the XML is read
    from ``raw`` by its own reader, and splitting 200 KB of it into lines on every node would cost more than
    reading it.
    """
    capped = len(text) > MAX_INPUT_CHARS
    if capped:
        text = text[:MAX_INPUT_CHARS]
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text, prefix = strip_line_prefixes(text)
    outside = text
    root = text.find(_XML_ROOT_START)
    if root >= 0:
        end = text.rfind(_XML_ROOT_END)
        # Cut inside the XML: its reader says so; the lines before it are whole.
        tail = text[end + len(_XML_ROOT_END) :] if end >= 0 else "\n"
        outside = text[:root] + ("\n" if text[:root] and not text[:root].endswith("\n") else "") + tail.lstrip(" \t")
    partial = bool(outside) and not outside.endswith("\n")
    raw_lines = outside.split("\n")
    if not partial:
        raw_lines.pop()  # the empty string after the final line end
    lines: list[str] = []
    long_lines = 0
    last_kept = len(raw_lines) - 1
    for number, line in enumerate(raw_lines):
        if len(line) > MAX_LINE_CHARS:
            long_lines += 1
            lines.append("")
            continue
        line = line.rstrip()
        if _NOISE_LINE.match(line):
            if number == last_kept:
                partial = False  # the cut (if any) fell on a kubectl notice, not on the tool's output
            continue
        lines.append(line)
    return Text(raw=text, lines=tuple(lines), partial=partial, capped=capped, long_lines=long_lines, prefix=prefix)


def strip_line_prefixes(text: str) -> tuple[str, str | None]:
    """The text without the prefix a log collector put before each line, and which prefix it was (None: none).

    Decided on the first lines: an output whose first lines carry no prefix is returned as it is, in one check per
    line of the probe. A line without the prefix (a wrapped line, a notice) is kept as it is.
    """
    # A parallel shell's host prefix is the outermost (pdsh running journalctl prints "host: Mar 05 ... kernel: ").
    text, host = _strip_host_prefix(text)
    probe = text[: 64 * 1024].split("\n", _PREFIX_PROBE_LINES)[:_PREFIX_PROBE_LINES]
    journal = sum(1 for line in probe if _JOURNAL_PREFIX.match(line))
    kubectl = sum(1 for line in probe if _KUBECTL_PREFIX.match(line))
    if not journal and not kubectl:
        return text, host
    pattern = _JOURNAL_PREFIX if journal >= kubectl else _KUBECTL_PREFIX
    kernel = False
    lines = text.split("\n")
    for number, line in enumerate(lines):
        match = pattern.match(line) if len(line) <= MAX_LINE_CHARS else None
        # A last line that is the prefix alone (an output cut right after it) stays: stripped, the cut would vanish.
        if match is not None and (match.end() < len(line) or number < len(lines) - 1):
            lines[number] = line[match.end() :]
            kernel = kernel or (pattern is _JOURNAL_PREFIX and match["ident"] == "kernel")
    name = ("journal-kernel" if kernel else "journal") if pattern is _JOURNAL_PREFIX else "kubectl"
    return "\n".join(lines), name


def _strip_host_prefix(text: str) -> tuple[str, str | None]:
    """The text without a parallel shell's "host: " or "host out: " prefix, when every line that is not a prompt or
    a kubectl notice carries one, all of the same host (a one-GPU ``nvidia-smi -L`` is one line). The first line is
    looked at first, so an output without the prefix costs one line check."""
    probe = text[: 64 * 1024].split("\n", _PREFIX_PROBE_LINES)[:_PREFIX_PROBE_LINES]
    line = next((line for line in probe if line.strip() and not _NOISE_LINE.match(line.rstrip())), "")
    first = _HOST_PREFIX.match(line)
    if first is None:
        return text, None
    host = first["host"]
    if host.lower() in _NOT_HOSTS or host.lower().startswith("nvidia-nvswitch"):
        return text, None
    lines = text.split("\n")
    stripped: list[str] = []
    prefixed = 0
    for line in lines:
        match = _HOST_PREFIX.match(line) if len(line) <= MAX_LINE_CHARS else None
        if match is not None and match["host"] == host:
            stripped.append(line[match.end() :])
            prefixed += 1
        elif not line.strip() or _NOISE_LINE.match(line.rstrip()):
            stripped.append(line)
        else:
            return text, None  # a line of no host, or of another: not one host's prefixed output
    return ("\n".join(stripped), "host") if prefixed else (text, None)


def noise_line(line: str) -> bool:
    """A line that comes with a captured output and is not part of it (a prompt, a kubectl notice)."""
    return bool(_NOISE_LINE.match(line.rstrip()))


def value(raw: object) -> str | None:
    """A printed value, or None when it is one of the tools' spellings of "no value"."""
    if raw is None:
        return None
    text = str(raw).strip()
    if text.strip("[]").strip().lower() in _NO_VALUE:
        return None
    return text


def identifier(raw: object) -> str | None:
    text = value(raw)
    return text if text is not None and _IDENTIFIER.fullmatch(text) else None


def integer(raw: object) -> int | None:
    """A whole number printed in ASCII digits (at most MAX_DIGITS of them), else None."""
    text = value(raw) if not isinstance(raw, int) or isinstance(raw, bool) else str(raw)
    if text is None or not (0 < len(text) <= MAX_DIGITS) or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def decimal(raw: object) -> float | None:
    """A finite decimal number printed as digits ("25.781", "-3.5"), else None."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        number = float(raw)
        return number if math.isfinite(number) and abs(number) < 1e15 else None
    text = value(raw)
    if text is None or not _DECIMAL.fullmatch(text):
        return None
    return float(text)


def mib(amount: float, unit: str) -> int | None:
    factor = _MIB_PER_UNIT.get(unit.lower())
    if factor is None or not math.isfinite(amount) or amount < 0:
        return None
    result = amount * factor
    return round(result) if result <= MAX_MIB else None


def memory_mib(raw: object, default_unit: str) -> int | None:
    """Memory such as "81559 MiB" or "96434 MB", or a bare number in ``default_unit``, in MiB."""
    text = value(raw)
    match = _AMOUNT.fullmatch(text) if text is not None and len(text) <= 40 else None
    if match is None:
        return None
    return mib(float(match["number"]), match["unit"] or default_unit)


def total_memory_mib(cell: str) -> int | None:
    """The total of a "used / total" memory cell: "1MiB /  81559MiB" (nvidia-smi), "4976/196592 MB" (amd-smi).

    Split with string methods rather than searched with a pattern, so a cell of 20,000 digits costs one pass.
    """
    _, slash, total = cell.strip().rpartition("/")
    if not slash or not total.strip():
        return None
    unit_only = _AMOUNT.fullmatch(total.strip()) if len(total.strip()) <= 40 else None
    if unit_only is None or unit_only["unit"] is None:
        return None
    return mib(float(unit_only["number"]), unit_only["unit"])


def version(raw: object, shape: re.Pattern[str]) -> str | None:
    """The value when it has the shape of a version of that kind ("565.57.01"), else None."""
    text = value(raw)
    return text if text is not None and len(text) <= 80 and shape.fullmatch(text) else None


def first_line(lines: Sequence[str], needle: str, start: int = 0) -> int | None:
    """The number of the first line at or after ``start`` that contains ``needle`` (plain text, not a pattern)."""
    return next((number for number in range(start, len(lines)) if needle in lines[number]), None)


def shorten(text: str, width: int = 120) -> str:
    text = " ".join(text.split()[:40])
    return text if len(text) <= width else text[: width - 3] + "..."


# --- box tables (nvidia-smi and amd-smi defaults) --------------------------------------------------


def is_rule(line: str) -> bool:
    """+----+----+, |----+----|, |====+====|: a line of only those characters, with at least one - or =."""
    stripped = line.strip()
    return (
        len(stripped) >= 2
        and stripped[0] in "+|"
        and stripped[-1] in "+|"
        and ("-" in stripped or "=" in stripped)
        and not stripped.strip("+|-=")
    )


def cells(line: str) -> tuple[str, ...] | None:
    """The cells of a table row "| a | b |"; None for a rule or a line that is no closed row."""
    stripped = line.strip()
    if len(stripped) < 2 or stripped[0] != "|" or stripped[-1] != "|" or is_rule(stripped):
        return None
    return tuple(stripped[1:-1].split("|"))


@dataclass(frozen=True)
class BoxTable:
    """One box-drawn table: the header rows and, per record, its rows, both split into cells.

    ``complete`` is False when the table stops without its closing rule or with a record shorter than the
    header (output cut in the middle): that last record is left out of ``records``.
    """

    header: tuple[tuple[str, ...], ...]
    records: tuple[tuple[tuple[str, ...], ...], ...]
    complete: bool
    end: int  # the line number after the table

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


def box_table(lines: Sequence[str], start: int, *, fixed_rows: bool = True) -> BoxTable | None:
    """The table whose header begins at or after ``lines[start]``.

    The header is the block of rows right above the first "|===|" rule. Records follow, separated by rules;
    the table ends at the first line that is not a row of the header's width (the "MIG devices:" or
    "Processes:" title of the next table). With ``fixed_rows`` a record must have as many rows as the header.
    """
    header_end = next((number for number in range(start, len(lines)) if lines[number].strip().startswith("|=")), None)
    if header_end is None:
        return None
    header: list[tuple[str, ...]] = []
    for number in range(header_end - 1, start - 1, -1):
        row = cells(lines[number])
        if row is None:
            break
        header.insert(0, row)
    if not header:
        return None
    width = len(header[0])

    records: list[tuple[tuple[str, ...], ...]] = []
    record: list[tuple[str, ...]] = []
    closed = False
    number = header_end + 1
    while number < len(lines):
        line = lines[number]
        if is_rule(line):
            if record:
                records.append(tuple(record))
            record = []
            closed = True
            number += 1
            continue
        row = cells(line)
        if row is None or len(row) != width:
            break
        record.append(row)
        closed = False
        number += 1
    complete = closed and not record
    if record and (not fixed_rows or len(record) == len(header)) and number < len(lines):
        records.append(tuple(record))  # a record the next table's title ended without a rule
        complete = True
    if fixed_rows:
        records = [r for r in records if len(r) == len(header)]
    return BoxTable(header=tuple(header), records=tuple(records), complete=complete, end=number)
