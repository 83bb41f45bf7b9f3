"""The terminal tables of every command: a value people copy (a VM size, a taint, a resource name, a node name, an
id, a column header) is never cut with an ellipsis nor folded. ``print_table`` lays a table out where it fits the
terminal with those whole and the wrapping columns (a message, a remedy) no narrower than their minimum; else the same
rows as a list, one entry a row, each field on its own line, wrapped between words. ``--wide`` lays every table out at
its natural width, one line a row, however narrow the terminal, for copying or for ``less -S``."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

# Wide enough for any table's natural width: rich lays a table out no wider than it needs.
WIDE_COLUMNS = 100_000
WIDE_HELP = "lay tables out at their full width, one line a row, however narrow the terminal (nothing is ever cut)"


def add_wide_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wide", action="store_true", help=WIDE_HELP)


# The width a --wide run replaced, given back to the next command run in the same process (the tests run many).
_REPLACED_WIDTH: list[int | None] = []


def apply_wide(args: argparse.Namespace) -> None:
    """With ``--wide``, the output console stops wrapping at the terminal's width; a later command run in the same
    process without it gets the width back."""
    from aks_gpu.cli import common

    console = common.out
    if _REPLACED_WIDTH:
        console.width = _REPLACED_WIDTH.pop()  # type: ignore[assignment]
    if getattr(args, "wide", False):
        _REPLACED_WIDTH.append(console._width)
        console.width = WIDE_COLUMNS


def table(
    title: str | None = None,
    columns: Iterable[str] = (),
    *,
    right: Iterable[str] = (),
    keep: Iterable[str] = (),
    center: Iterable[str] = (),
    **options: Any,
) -> Table:
    """A rich table whose every column folds rather than cuts: ``right`` names the columns aligned right (counts),
    ``center`` those centred (a status), ``keep`` those whose values stay on one line while the others wrap (names
    people copy: a node, a VM size)."""
    from rich.table import Table

    made = Table(title=title, **options)
    aligned, centred, whole = set(right), set(center), set(keep)
    for column in columns:
        justify = "right" if column in aligned else "center" if column in centred else "left"
        add_column(made, column, justify=justify, no_wrap=column in whole)
    return made


def add_column(made: Table, header: str, **options: Any) -> None:
    """``no_wrap`` columns take their full width first; where even that cannot fit the terminal, they fold too."""
    made.add_column(header, overflow="fold", **options)


def fits(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    width: int,
    *,
    flexible: Mapping[str, int] | None = None,
    keep: Iterable[str] = (),
) -> bool:
    """Whether a table of these columns fits ``width`` without folding a value people need (see ``column_widths``)."""
    return column_widths(headers, rows, width, flexible=flexible, keep=keep) is not None


def _measure(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per column, markup not counted: its natural width (the widest line of its header or cells), its widest cell
    line, its header's longest word and the longest word of its header and cells."""
    from rich.cells import cell_len
    from rich.text import Text

    def lines(markup: str) -> list[str]:
        return Text.from_markup(markup).plain.splitlines()

    def longest(texts: Iterable[str]) -> int:
        return max((cell_len(text) for text in texts), default=0)

    header_lines = [lines(header) for header in headers]
    natural = [longest(found) for found in header_lines]
    widest = [0] * len(headers)
    header_word = [longest(word for line in found for word in line.split()) for found in header_lines]
    word = list(header_word)
    for row in rows:
        for index, cell in enumerate(row[: len(headers)]):
            found = lines(cell)
            widest[index] = max(widest[index], longest(found))
            word[index] = max(word[index], longest(part for line in found for part in line.split()))
    natural = [max(pair) for pair in zip(natural, widest, strict=True)]
    return natural, widest, header_word, word


def column_widths(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    width: int,
    *,
    flexible: Mapping[str, int] | None = None,
    keep: Iterable[str] = (),
) -> list[int] | None:
    """Each column's width in a table of these columns ``width`` wide where nothing people need is folded, or None
    where no such table fits: a ``keep`` column needs its widest cell on one line (its header may wrap between
    words), a column named in ``flexible`` wraps between words and needs the given width (never less than its longest
    word, never more than its natural width), every other one its natural width (its widest line, header included);
    rich's borders and padding take 3 a column, and 1. Room left over widens the columns that wrap, each toward its
    natural width in proportion to what it lacks."""
    natural, widest, header_word, word = _measure(headers, list(rows))
    room = flexible or {}
    whole = set(keep)
    needed = []
    for index, header in enumerate(headers):
        if header in room:
            needed.append(min(natural[index], max(room[header], word[index])))
        elif header in whole:
            needed.append(max(widest[index], header_word[index]))
        else:
            needed.append(natural[index])
    spare = width - (sum(needed) + 3 * len(headers) + 1)
    if spare < 0:
        return None
    lacking = [most - least for most, least in zip(natural, needed, strict=True)]
    total = sum(lacking)
    if total <= spare:
        return natural
    widths = [least + spare * short // total for least, short in zip(needed, lacking, strict=True)]
    # what the rounding down left, one column each, the ones that lack most first
    left = width - (sum(widths) + 3 * len(headers) + 1)
    for index in sorted(range(len(headers)), key=lambda index: natural[index] - widths[index], reverse=True)[:left]:
        if widths[index] < natural[index]:
            widths[index] += 1
    return widths


def width_of(console: Any) -> int:
    return int(console.width)


def list_note(*, json: bool = True) -> str:
    """The line under output that was laid out as a list, telling the ways to a table or to every field."""
    every = ", --json for every field" if json else ""
    return f"(laid out as a list: the table does not fit this terminal; --wide for one line a row{every})"


def _joined(cell: str) -> str:
    """A cell's lines as one line of the list: a comma between items, a space after a line that ends a sentence."""
    joined = ""
    for part in (part.strip() for part in cell.split("\n")):
        if part:
            joined += ("" if not joined else " " if joined.endswith((".", ";", ":")) else ", ") + part
    return joined


def print_rows(
    console: Any,
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    lead: int = 1,
    bare: Iterable[str] = (),
) -> None:
    """A table laid out as a list, one entry a row: its ``lead`` first cells on the entry's first line, then one
    indented line per other non-empty cell (``header: value``, the value alone for a ``bare`` column; a cell's lines
    joined), wrapped between words at the terminal's edge, the lines it wraps onto indented further, never cut.
    Cells are rich markup (already escaped), like a table's."""
    from rich.text import Text

    def indented(markup: str, indent: int) -> None:
        # wrapped at the terminal's edge less the indent, the lines after the first indented 2 more (told from the
        # next field), a word longer than that folded; no padding to the right
        text = Text.from_markup(markup)
        first = text.wrap(console, max(10, int(console.width) - indent), overflow="fold")
        lines = [first[0]] if first else []
        if len(first) > 1:
            start = len(first[0].plain)
            start += len(text.plain[start:]) - len(text.plain[start:].lstrip(" "))
            lines += text[start:].wrap(console, max(10, int(console.width) - indent - 2), overflow="fold")
        for number, line in enumerate(lines):
            line.rstrip()
            console.print(Text(" " * (indent + (2 if number else 0))) + line, soft_wrap=True)

    unlabeled = set(bare)
    if title:
        console.print(Text.from_markup(f"[bold]{title}[/]"))
    for row in rows:
        indented(" ".join(cell for cell in row[:lead] if cell), 2)
        for header, cell in zip(headers[lead:], row[lead:], strict=False):
            if not Text.from_markup(cell).plain.strip():
                continue
            label = "" if header in unlabeled else f"[dim]{header}:[/] "
            indented(f"{label}{_joined(cell)}", 4)


def print_table(
    console: Any,
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Iterable[str] = (),
    keep: Iterable[str] = (),
    center: Iterable[str] = (),
    flexible: Mapping[str, int] | None = None,
    lead: int = 1,
    bare: Iterable[str] = (),
    missing: str | None = None,
    group: bool = False,
    listed: tuple[Sequence[str], Sequence[Sequence[str]]] | None = None,
    **options: Any,
) -> bool:
    """The table where it fits the console's width with every kept value whole (see ``column_widths``), else the
    same rows as a list (``print_rows``). Returns whether it printed the list.

    ``missing``: what an empty cell shows in the table (the list leaves the field out). ``group``: rows whose first
    cell is the previous row's make a group: the table shows that cell once and rules a line between groups (the list
    names it in every entry). ``listed``: the headers and rows the list lays out instead of ``headers`` and ``rows``,
    where a list reads better arranged otherwise (a quota's verdict first, a node's checks by status)."""
    right, keep, center = tuple(right), tuple(keep), tuple(center)
    filled = [[cell or (missing or "") for cell in row] for row in rows]
    widths = column_widths(headers, filled, width_of(console), flexible=flexible, keep=keep)
    if widths is None:
        list_headers, list_rows = listed or (headers, rows)
        print_rows(console, title, list_headers, list_rows, lead=lead, bare=bare)
        return True
    # a title wider than the table would wrap at its width, folding a long name in it: it goes above the table instead
    above = title is not None and _measure((title,), ())[0][0] > sum(widths) + 3 * len(widths) + 1
    if above:
        from rich.text import Text

        console.print(Text.from_markup(f"[bold]{title}[/]"))
    made = table(None if above else title, headers, right=right, keep=keep, center=center, **options)
    natural, *_ = _measure(headers, filled)
    if widths != natural:
        # some columns wrap: each at the width worked out, none collapsed by rich below what it needs
        for column, fixed in zip(made.columns, widths, strict=True):
            column.width = fixed
            column.no_wrap = False
    previous: str | None = None
    for row, cells in zip(rows, filled, strict=True):
        if group:
            if previous is not None and row[0] != previous:
                made.add_section()
            if row[0] == previous:
                cells[0] = ""
            previous = row[0]
        made.add_row(*cells)
    console.print(made)
    return False
