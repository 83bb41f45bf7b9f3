"""The terminal tables of every command: a value people copy (a VM size, a taint, a resource name, a node name, a
column header) is never cut with an ellipsis. A column narrower than its text wraps it (folded at the column's edge
where a word is longer than the column), and ``--wide`` lays every table out at its natural width, one line a row,
however narrow the terminal, for copying or for ``less -S``."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
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
