"""The terminal tables of every command: a value people copy (a VM size, a taint, a resource name, a node name, a
column header) is never cut with an ellipsis. A column narrower than its text wraps it (folded at the column's edge
where a word is longer than the column), and ``--wide`` lays every table out at its natural width, one line a row,
however narrow the terminal, for copying or for ``less -S``."""

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
    **options: Any,
) -> Table:
    """A rich table whose every column folds rather than cuts: ``right`` names the columns aligned right (counts),
    ``keep`` those whose values stay on one line while the others wrap (names people copy: a node, a VM size)."""
    from rich.table import Table

    made = Table(title=title, **options)
    aligned, whole = set(right), set(keep)
    for column in columns:
        add_column(made, column, justify="right" if column in aligned else "left", no_wrap=column in whole)
    return made


def add_column(made: Table, header: str, **options: Any) -> None:
    """``no_wrap`` columns take their full width first; where even that cannot fit the terminal, they fold too."""
    made.add_column(header, overflow="fold", **options)


def fits(
    headers: Sequence[str], rows: Iterable[Sequence[str]], width: int, *, flexible: Mapping[str, int] | None = None
) -> bool:
    """Whether a table of these columns fits ``width`` without folding a value people need: a column named in
    ``flexible`` wraps and needs only its given width, every other one its widest cell (markup not counted), plus
    rich's borders and padding (3 a column, and 1)."""
    from rich.cells import cell_len
    from rich.text import Text

    wanted = [cell_len(header) for header in headers]
    for row in rows:
        for index, cell in enumerate(row):
            longest = max((cell_len(line) for line in Text.from_markup(cell).plain.splitlines()), default=0)
            wanted[index] = max(wanted[index], longest)
    room = flexible or {}
    needed = sum(room.get(header, wanted[index]) for index, header in enumerate(headers))
    return needed + 3 * len(headers) + 1 <= width


def width_of(console: Any) -> int:
    return int(console.width)


def list_note(*, json: bool = True) -> str:
    """The line under output that was laid out as a list, telling the ways to a table or to every field."""
    every = ", --json for every field" if json else ""
    return f"(laid out as a list: the table does not fit this terminal; --wide for one line a row{every})"


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
    indented line per other non-empty cell (``header: value``, the value alone for a ``bare`` column), wrapped at the
    terminal's edge, never cut. Cells are rich markup (already escaped), like a table's."""
    from rich.text import Text

    def indented(markup: str, indent: int) -> None:
        # wrapped at the terminal's edge less the indent, a word longer than that folded; no padding to the right
        width = max(10, int(console.width) - indent)
        for line in Text.from_markup(markup).wrap(console, width, overflow="fold"):
            line.rstrip()
            console.print(Text(" " * indent) + line, soft_wrap=True)

    unlabeled = set(bare)
    if title:
        console.print(Text.from_markup(f"[bold]{title}[/]"))
    for row in rows:
        indented(" ".join(cell for cell in row[:lead] if cell), 2)
        for header, cell in zip(headers[lead:], row[lead:], strict=False):
            if not Text.from_markup(cell).plain.strip():
                continue
            label = "" if header in unlabeled else f"[dim]{header}:[/] "
            cell = ", ".join(part for part in cell.split("\n") if part.strip())
            indented(f"{label}{cell}", 4)


def print_table(
    console: Any,
    title: str | None,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Iterable[str] = (),
    keep: Iterable[str] = (),
    flexible: Mapping[str, int] | None = None,
    lead: int = 1,
    bare: Iterable[str] = (),
    **options: Any,
) -> bool:
    """The table where it fits the console's width with every kept value whole (see ``fits``), else the same rows
    as a list (``print_rows``). Returns whether it printed the list."""
    if fits(headers, rows, width_of(console), flexible=flexible):
        made = table(title, headers, right=right, keep=keep, **options)
        for row in rows:
            made.add_row(*row)
        console.print(made)
        return False
    print_rows(console, title, headers, rows, lead=lead, bare=bare)
    return True
