"""How long ``aksgpu validate --snapshot`` takes on big clusters: read the folder from disk, then run the checks.

The snapshot is the prod stack (an 8x H100 training pool and a MIG A100 inference pool, 4:1) with N GPU
nodes, generated in memory by the same builder the tests use. Every node has its own ``nvidia-smi -q -x``
(the command the validation runs: about 135 KB for eight H100, 210 KB for eight A100 with 56 MIG devices, in
the layout of a real output; memory in use and power differ per node), so nothing is parsed once for many
nodes, and every check runs, GPU health (ECC, row remapping, retired pages, clock events, PCIe width, fabric,
Node Problem Detector conditions) included. It is written to a temporary folder, then read back and checked,
best of ``REPEATS`` runs. Target: 1,000 GPU nodes in under 2 s.
"""

from __future__ import annotations

import statistics
import tempfile
from functools import partial

from rich.console import Console
from rich.table import Table

from aks_gpu.cluster.snapshot import read_snapshot, write_snapshot
from aks_gpu.resolved.model import ResolvedPool
from aks_gpu.resolved.targets import plugin_targets
from aks_gpu.validation.checks import run_checks
from bench.common import prod_model, timed
from tests.cluster.snapshots import DEFAULT_DRIVER, healthy_snapshot, smi_for

NODE_COUNTS = (100, 1_000, 5_000)
TARGET_NODES = 1_000
TARGET_SECONDS = 2.0
REPEATS = 3


def node_smi(pool: ResolvedPool, index: int) -> str:
    # An explicit driver makes every node's text generated (and different), never the one shared fixture.
    return smi_for(pool, seed=index, driver=DEFAULT_DRIVER[0])


def run(console: Console) -> bool:
    model = prod_model()
    targets = plugin_targets(model)
    table = Table(title=f"aksgpu validate --snapshot: read from disk, then check (best of {REPEATS})")
    for column in ("GPU nodes", "results", "on disk", "build", "write", "read", "checks", "read+checks", "per node", "target"):
        table.add_column(column, justify="right", no_wrap=True)
    met = True
    spread = 0.0
    for count in NODE_COUNTS:
        infer = count // 5
        nodes = {"train": count - infer, "infer": infer}
        snapshot, build_s = timed(partial(healthy_snapshot, model, targets, nodes, node_smi))
        with tempfile.TemporaryDirectory(prefix="aksgpu-bench-") as folder:
            written, write_s = timed(partial(write_snapshot, snapshot, folder))
            size_mib = sum(path.stat().st_size for path in written) / (1024 * 1024)
            reads: list[float] = []
            checks: list[float] = []
            for _ in range(REPEATS):
                loaded, read_s = timed(partial(read_snapshot, folder))
                results, check_s = timed(partial(run_checks, model, targets, loaded))
                reads.append(read_s)
                checks.append(check_s)
        assert not any(result.status == "fail" for result in results), "the benchmark snapshot must be healthy"
        best = min(r + c for r, c in zip(reads, checks, strict=True))
        spread = statistics.pstdev(checks)
        target = ""
        if count == TARGET_NODES:
            ok = best < TARGET_SECONDS
            met = met and ok
            target = f"[green]< {TARGET_SECONDS:g} s[/]" if ok else f"[bold red]MISSED ({TARGET_SECONDS:g} s)[/]"
        table.add_row(
            f"{count:,}",
            f"{len(results):,}",
            f"{size_mib:.1f} MiB",
            f"{build_s:.2f} s",
            f"{write_s:.2f} s",
            f"{min(reads):.3f} s",
            f"{min(checks):.3f} s",
            f"[bold]{best:.3f} s[/]",
            f"{best / count * 1000:.2f} ms",
            target,
        )
    console.print(table)
    console.print(
        f"read: nodes.json, daemonsets.json, pods.json and one smi/<node>.txt (nvidia-smi -q -x) per node; {len(targets)} pools; "
        f"check times vary by {spread:.3f} s (std dev) at {NODE_COUNTS[-1]:,} nodes"
    )
    return met
