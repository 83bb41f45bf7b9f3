"""Light commands: the wall time of each, as a user waits for it, in a fresh interpreter every run (start-up, imports,
reading the input, the work, the output), against a bare interpreter that imports json and yaml, timed in the same
rounds (one run of each per round, so a load that comes and goes weighs on all alike). Median of ``--runs`` rounds;
target (issues 17 and 46): each median at most 8x the bare interpreter's.

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
TARGET_RATIO = 8.0
SMI = PROJECT_DIR / "tests" / "fixtures" / "smi" / "02_nvidia-smi_table_8xh100_565.57.01.txt"
PODS = PROJECT_DIR / "tests" / "admission" / "objects" / "pods-good.yaml"
BARE = "bare interpreter"
CLI = ("-m", "aks_gpu.cli")
# What each is run as, after the interpreter: the bare one imports what any command line reading YAML or writing
# JSON must; the others are ``python -m aks_gpu.cli`` (the installed ``aksgpu`` script does the same imports).
COMMANDS: dict[str, list[str]] = {
    BARE: ["-c", "import json, yaml"],
    "aksgpu --help": [*CLI, "--help"],
    "aksgpu --version": [*CLI, "--version"],
    "aksgpu schema": [*CLI, "schema"],
    "aksgpu catalog": [*CLI, "catalog"],
    "aksgpu smi parse": [*CLI, "smi", "parse", str(SMI)],
    "aksgpu smi health": [*CLI, "smi", "health", str(SMI)],
    "aksgpu admission check --help": [*CLI, "admission", "check", "--help"],
    # Not a light command by the goal (it validates a stack and compiles CEL), measured to show where it stands.
    "aksgpu admission check --stack prod": [*CLI, "admission", "check", "--stack", "prod", str(PODS)],
}
UNTARGETED = ("aksgpu admission check --stack prod",)


def wall_time(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *arguments], cwd=PROJECT_DIR, capture_output=True, check=False)
    return time.perf_counter() - started


def measure(runs: int) -> dict[str, list[float]]:
    for arguments in COMMANDS.values():  # the first start of each fills the OS's file cache
        wall_time(arguments)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, arguments in COMMANDS.items():
            times[name].append(wall_time(arguments))
    return times


def render(results: dict[str, list[float]], console: Console) -> bool:
    from rich.table import Table

    bare = statistics.median(results[BARE])
    table = Table(title=f"light commands: wall time in a fresh process, {len(results[BARE])} rounds")
    for column in ("command", "median s", "best s", "worst s", "x bare"):
        table.add_column(column, justify="left" if column == "command" else "right")
    met = True
    for name, times in results.items():
        median = statistics.median(times)
        ratio = median / bare
        targeted = name not in (BARE, *UNTARGETED)
        met = met and (ratio <= TARGET_RATIO or not targeted)
        style = ("green" if ratio <= TARGET_RATIO else "red") if targeted else "default"
        table.add_row(name, f"{median:.3f}", f"{min(times):.3f}", f"{max(times):.3f}", f"[{style}]{ratio:.1f}[/]")
    console.print(table)
    verdict = "met" if met else "MISSED"
    console.print(f"target (each light command's median at most {TARGET_RATIO:g}x the bare interpreter's): {verdict}")
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
