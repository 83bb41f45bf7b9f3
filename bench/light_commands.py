"""Light commands: the wall time of each, as a user waits for it, in a fresh interpreter every run (start-up, imports,
reading the input, the work, the output). Median of ``--runs`` runs; target from issue 17: under 0.35 s each.

    python -m bench.light_commands [--runs 9]

or ``python -m bench light-commands``; both exit 1 when a command misses the target.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

PROJECT_DIR = Path(__file__).resolve().parents[1]
TARGET_S = 0.35
SMI = PROJECT_DIR / "tests" / "fixtures" / "smi" / "02_nvidia-smi_table_8xh100_565.57.01.txt"
PODS = PROJECT_DIR / "tests" / "admission" / "objects" / "pods-good.yaml"
COMMANDS: dict[str, list[str]] = {
    "smi parse": ["smi", "parse", str(SMI)],
    "smi health": ["smi", "health", str(SMI)],
    "admission check": ["admission", "check", "--stack", "prod", str(PODS)],
    "catalog": ["catalog"],
    "schema": ["schema"],
}


def wall_times(argv: list[str], runs: int) -> list[float]:
    """``python -m aks_gpu.cli <argv>`` ``runs`` times (the installed ``aksgpu`` script does the same imports)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "aks_gpu.cli", *argv], cwd=PROJECT_DIR, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
    return times


def measure(runs: int) -> dict[str, list[float]]:
    wall_times(COMMANDS["smi parse"], 1)  # the first start of an interpreter fills the OS's file cache
    return {name: wall_times(argv, runs) for name, argv in COMMANDS.items()}


def render(results: dict[str, list[float]], console: Console) -> bool:
    from rich.table import Table

    table = Table(title=f"light commands: wall time in a fresh process, {len(next(iter(results.values())))} runs each")
    for column in ("command", "median s", "best s", "worst s"):
        table.add_column(column, justify="left" if column == "command" else "right")
    met = True
    for name, times in results.items():
        median = statistics.median(times)
        met = met and median < TARGET_S
        style = "green" if median < TARGET_S else "red"
        table.add_row(f"aksgpu {name}", f"[{style}]{median:.3f}[/]", f"{min(times):.3f}", f"{max(times):.3f}")
    console.print(table)
    console.print(f"target (under {TARGET_S} s each, median): {'met' if met else 'MISSED'}")
    return met


def run(console: Console) -> bool:
    return render(measure(9), console)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.light_commands", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    from rich.console import Console

    return 0 if render(measure(args.runs), Console(highlight=False)) else 1


if __name__ == "__main__":
    sys.exit(main())
