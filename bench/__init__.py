"""Benchmarks behind ``make bench`` (``python -m bench``): one entry per benchmark, run by name or all.

A benchmark is a function that prints its measurements (a rich table) and returns whether it met its
target, so ``make bench`` exits 1 when a target is missed. Timing targets live here, never in tests.
To add one, write ``bench/<name>.py`` with a ``run(console) -> bool`` (or name another function) and add a
line to ``BENCHMARKS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console


@dataclass(frozen=True)
class Benchmark:
    name: str
    description: str
    module: str  # imported only when the benchmark runs, so one benchmark's imports never slow another
    function: str = "run"  # in ``module``: (console) -> whether the target was met

    def load(self) -> Callable[[Console], bool]:
        runner: Callable[[Console], bool] = getattr(importlib.import_module(self.module), self.function)
        return runner


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "validation-snapshot",
        "post-deploy checks over a snapshot of 100, 1,000 and 5,000 GPU nodes (target: 1,000 in under 2 s)",
        "bench.validation_snapshot",
    ),
    Benchmark(
        "smi-parse",
        "SMI parsing and GPU health reading on inputs made to backtrack, at 1x-8x (target: linear, exponent <= 1.3)",
        "bench.smi_parse",
    ),
    Benchmark(
        "validation-live",
        "live probe of 1,000 GPU nodes through a fake API server, 200 ms per exec (target: under 20 s at concurrency 16)",
        "bench.validation_live",
    ),
    Benchmark(
        "admission-check",
        "aksgpu admission check of 100, 1,000 and 5,000 objects, cel-cpp and cel-python (target: 5,000 in under 5 s)",
        "bench.admission_check",
    ),
    Benchmark(
        "admission-cost",
        "admission check of objects at the API server's CEL cost limits, both engines (target: the server's decisions)",
        "bench.admission_cost",
    ),
    Benchmark(
        "admission-hostile",
        "admission check of one object up to the API server's 3 MiB, both engines (target: under 2 s CPU, the server's decision)",
        "bench.admission_hostile",
    ),
    Benchmark(
        "audit-snapshot",
        "aksgpu audit over a snapshot of 100 and 1,000 GPU nodes, every practice and SMI health (target: 1,000 in under 2 s)",
        "bench.audit_snapshot",
    ),
    Benchmark(
        "plan-vs-hand",
        "aksgpu plan vs the same resources registered by hand with the typed SDK classes, prod and 40 pools (target: 1.10x)",
        "bench.plan_vs_hand",
    ),
    Benchmark(
        "light-commands",
        "wall time of --help, --version, schema, catalog, smi parse, smi health, admission check --help in a fresh process"
        " (target: each at most 8x a bare interpreter importing json and yaml)",
        "bench.light_commands",
    ),
    Benchmark(
        "hostile-bounds",
        "validate and audit of a 10,000-node, 100,000-pod snapshot (target: 30 s, 2 GiB each); a silent API server: exit 2",
        "bench.hostile_bounds",
    ),
    Benchmark(
        "advise",
        "aksgpu advise --metrics DIR --json over 1,000 GPUs x 7 days at 5-minute steps (target: under 5 s, 1.5 x the input)",
        "bench.advise",
    ),
    Benchmark(
        "plan-cost",
        "aksgpu plan for dev, prod and 10/50/99-pool stacks vs bare Pulumi (target: at most +30% per resource, linear)",
        "bench.plan_cost",
    ),
    Benchmark(
        "local-up",
        "aksgpu local up --stack prod with the tools cached, then the second up (target: the first under 90 s)",
        "bench.local_engines",
        "run_up",
    ),
    Benchmark(
        "audit-live-local",
        "aksgpu audit live over 1,000 simulated GPU nodes through the real API server (target: under 5 s)",
        "bench.local_engines",
        "run_audit",
    ),
    Benchmark(
        "queues-local",
        "Kueue on aksgpu local up --stack teams: a borrowing Job and a reclaim, submit to admitted (target: under 5 s)",
        "bench.queueing",
    ),
    Benchmark(
        "admission-vs-server",
        "admission check of 1,000 objects offline vs a dry-run create of each on the real API server (target: 2x ahead)",
        "bench.local_engines",
        "run_admission",
    ),
)
