"""Plan vs hand-written: what the toolkit costs over a program that registers the same resources by hand.

Side by side, for the prod stack and a generated 40-pool stack (``bench/stacks.py``), each in fresh worker processes
(``bench.plan_cost``'s workers), alternating so that whatever else runs on the machine touches both alike:

- ``toolkit``: the real ``__main__.py`` under the mock engine (config validated and resolved once, the components
  built from the model);
- ``hand-written``: the same resources (types, names, parents, inputs, providers, dependencies, options), registered
  through the provider SDKs' typed classes (``containerservice.AgentPool(...)``, ``k8s.apps.v1.DaemonSet(...)``),
  with plain components for the same tree: what a program written by hand pays, the typed classes' output properties
  and aliases included. A check in the worker holds its inputs to the toolkit's.

The cost is the warm plan's CPU time: the median of ``WARM_RUNS`` plans after the first in each worker (the SDKs' lazy
imports and first-use caches are done), which the machine's other work disturbs least; the first ("cold") is shown
beside it. The target, from issue 17, is at most 1.10x.

    python -m bench.plan_vs_hand [--repeats 3] [--sizes 40] [--stacks prod]

or ``python -m bench plan-vs-hand``; both exit 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

PROJECT_DIR = Path(__file__).resolve().parents[1]
if str(PROJECT_DIR) not in sys.path:
    sys.path.insert(0, str(PROJECT_DIR))

from bench.plan_cost import COST, Sample, Scenario, _run_worker, _worker_command, scenarios  # noqa: E402

if TYPE_CHECKING:
    from rich.console import Console

TARGET = 1.10
WARM_RUNS = 5
DEFAULT_STACKS = ("prod",)
DEFAULT_SIZES = (40,)


@dataclass
class SideBySide:
    scenario: str
    resources: int = 0
    toolkit: list[Sample] = field(default_factory=list)
    hand: list[Sample] = field(default_factory=list)

    def median(self, samples: list[Sample], attribute: str = COST) -> float:
        return float(statistics.median(getattr(sample, attribute) for sample in samples))

    @property
    def ratio(self) -> float:
        return self.median(self.toolkit) / self.median(self.hand)


def measure(scenario: Scenario, repeats: int, work_dir: Path, log: Callable[[str], None]) -> SideBySide:
    result = SideBySide(scenario.name)
    records = work_dir / f"{scenario.name}.records.json"
    for attempt in range(1, repeats + 1):
        log(f"{scenario.name}: run {attempt}/{repeats}")
        warm = ["--warm-runs", str(WARM_RUNS)]
        toolkit = ["toolkit", "--stack", scenario.stack, "--config-file", str(scenario.config_file), *warm]
        if attempt == 1:
            toolkit += ["--records-out", str(records)]
        result.toolkit.append(_run_worker(_worker_command(*toolkit)))
        hand = ["typed", "--stack", scenario.stack, "--records", str(records), *warm]
        result.hand.append(_run_worker(_worker_command(*hand)))
        result.resources = result.toolkit[0].resources
    return result


def measure_all(repeats: int, stacks: Sequence[str], sizes: Sequence[int], log: Callable[[str], None]) -> list[SideBySide]:
    with tempfile.TemporaryDirectory(prefix="aksgpu-bench-") as folder:
        work_dir = Path(folder)
        return [measure(s, repeats, work_dir, log) for s in scenarios(work_dir, stacks, sizes)]


def render(results: list[SideBySide], console: Console) -> None:
    from rich.table import Table

    table = Table(title="aksgpu plan vs the same resources registered by hand (warm plan, CPU seconds, medians)")
    for column in ("stack", "resources", "toolkit s", "hand-written s", "toolkit / hand", "toolkit cold s", "hand cold s"):
        table.add_column(column, justify="left" if column == "stack" else "right")
    for r in results:
        style = "green" if r.ratio <= TARGET else "red"
        table.add_row(
            r.scenario,
            str(r.resources),
            f"{r.median(r.toolkit):.3f}",
            f"{r.median(r.hand):.3f}",
            f"[{style}]{r.ratio:.2f}x[/]",
            f"{r.median(r.toolkit, 'cold_cpu_s'):.2f}",
            f"{r.median(r.hand, 'cold_cpu_s'):.2f}",
        )
    console.print(table)
    worst = max(r.ratio for r in results)
    verdict = "met" if worst <= TARGET else "MISSED"
    console.print(f"target (at most {TARGET:.2f}x the hand-written program): {verdict}, worst {worst:.2f}x")


def run(console: Console) -> bool:
    """``python -m bench plan-vs-hand``: prod and 40 pools, three workers each; True when the target is met."""
    results = measure_all(3, DEFAULT_STACKS, DEFAULT_SIZES, log=lambda line: console.print(f"[dim]{line}[/]"))
    render(results, console)
    return max(r.ratio for r in results) <= TARGET


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plan_vs_hand", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stacks", type=lambda t: [p for p in t.split(",") if p], default=list(DEFAULT_STACKS))
    parser.add_argument("--sizes", type=lambda t: [int(p) for p in t.split(",") if p], default=list(DEFAULT_SIZES))
    args = parser.parse_args(argv)
    from rich.console import Console

    results = measure_all(args.repeats, args.stacks, args.sizes, log=lambda line: print(line, file=sys.stderr, flush=True))
    render(results, Console(highlight=False, width=None if sys.stdout.isatty() else 160))
    return 0 if max(r.ratio for r in results) <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
