"""How parsing time grows with the input: the SMI parsers and the health reader on inputs built to make a
backtracking parser slow (a 20,000-digit memory cell took 41 s before), each at 1x, 2x, 4x and 8x its size.
A line longer than 64 KiB is not read at all, so the single-line inputs stay under that at 8x.

Parsing runs after the exec, so no exec timeout bounds it: it must be linear in its input. The growth exponent
is fitted from the 1x and 8x times (1.0 is linear, 2.0 quadratic); target: at most 1.3 for every input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from rich.console import Console
from rich.table import Table

from aks_gpu.gpu.health import read_smi_and_health
from bench.common import timed
from tests.cluster.snapshots import nvidia_smi_xml

REPEATS = 3
TARGET_EXPONENT = 1.3
_BANNER = "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |\n"
_HEADER = (
    "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
    "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
    "|===============================+======================+======================|\n"
)


def _memory_cell(size: int) -> str:
    row = "|   0  Tesla T4  Off | 00000000:00:1E.0 Off | 0 |\n"
    return _BANNER + _HEADER + row + f"| N/A | {'9' * size}MiB / {'9' * size} |\n"


def _name_cell(size: int) -> str:
    return _BANNER + _HEADER + f"|   0{' ' * size}Tesla T4{' ' * size}Off | 00000000:00:1E.0 Off | 0 |\n"


def _csv(size: int) -> str:
    return "index, name, uuid\n" + "".join(f"{n}, NVIDIA {'x' * 40}, GPU-{n:032x}\n" for n in range(size // 60))


def _xml(size: int) -> str:
    return nvidia_smi_xml(gpus=max(1, size // 17_000), gpu_name="NVIDIA H100 80GB HBM3", memory_mib=81559, fabric=True)


def _kernel_log(size: int) -> str:
    line = "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp\n"
    return line * (size // len(line))


def _prompt_run(size: int) -> str:
    return "user@host" + "x" * size + " nvidia-smi\n" + "$" * size + "\n"


def _brackets(size: int) -> str:
    return "x" + "[{" * (size // 2) + "\n"


def _deep_query(size: int) -> str:
    lines = ["==============NVSMI LOG==============", "GPU 00000000:53:00.0"]
    total, depth = 0, 1
    while total < size:
        lines.append(" " * depth + "Key : value")
        total += depth + 12
        depth = depth % 1_000 + 1
    return "\n".join(lines) + "\n"


INPUTS: tuple[tuple[str, Callable[[int], str], int], ...] = (
    # Lines over 64 KiB are not read at all: the sizes keep the 8x line under that, so the parser does the work.
    ("table: memory cell of N digits", _memory_cell, 3_500),
    ("table: name cell of N spaces", _name_cell, 3_500),
    ("--query-gpu CSV of N chars", _csv, 200_000),
    ("-q -x of N chars", _xml, 400_000),
    ("kernel log of N chars", _kernel_log, 400_000),
    ("prompt-like line of N chars", _prompt_run, 7_000),
    ("a line of N brackets", _brackets, 7_000),
    ("-q text indented ever deeper, N chars", _deep_query, 400_000),
)


def run(console: Console) -> bool:
    table = Table(title=f"parse_smi + read_health on growing inputs (best of {REPEATS})")
    for column in ("input", "1x", "2x", "4x", "8x", "exponent", "target"):
        table.add_column(column, justify="right", no_wrap=True)
    met = True
    for name, build, size in INPUTS:
        read_smi_and_health(build(size))  # warm up
        times = []
        for factor in (1, 2, 4, 8):
            text = build(size * factor)
            times.append(min(timed(partial(read_smi_and_health, text))[1] for _ in range(REPEATS)))
        exponent = math.log(max(times[3], 1e-6) / max(times[0], 1e-6)) / math.log(8)
        ok = exponent <= TARGET_EXPONENT or times[3] < 0.01  # below 10 ms the timer's noise decides
        met = met and ok
        table.add_row(
            f"{name} (N={size:,})",
            *(f"{seconds * 1000:.1f} ms" for seconds in times),
            f"{exponent:.2f}",
            "[green]linear[/]" if ok else f"[bold red]MISSED ({TARGET_EXPONENT})[/]",
        )
    console.print(table)
    return met
