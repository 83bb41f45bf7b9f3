"""``python -m bench [NAME ...]``: run the named benchmarks (default: all); exit 1 when one misses its target."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

from bench import BENCHMARKS


def main(argv: Sequence[str] | None = None) -> int:
    names = [benchmark.name for benchmark in BENCHMARKS]
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run: {', '.join(names)} (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    # Piped output (make bench > log) gets a wide page instead of rich's 80-column fallback.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    if args.list:
        for benchmark in BENCHMARKS:
            console.print(f"[bold]{benchmark.name}[/]: {benchmark.description}")
        return 0
    unknown = [name for name in args.names if name not in names]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    missed: list[str] = []
    for benchmark in BENCHMARKS:
        if args.names and benchmark.name not in args.names:
            continue
        console.rule(f"[bold]{benchmark.name}[/]: {benchmark.description}")
        if not benchmark.load()(console):
            missed.append(benchmark.name)
    if missed:
        console.print(f"[bold red]target missed[/]: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
