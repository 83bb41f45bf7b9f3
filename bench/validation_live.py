"""How long the live probe (``aksgpu validate --stack``, and the deploy hook) takes on a big cluster.

The cluster is a fake Kubernetes API server on 127.0.0.1 (``tests.cluster.fake_apiserver``) holding the prod
stack (8x H100 training nodes and MIG A100 inference nodes, 4:1, each printing its own nvidia-smi -q -x) built
by the same snapshot builder the tests use. Every exec takes ``EXEC_DELAY_S`` on the server, about what
nvidia-smi takes on a GPU node plus the API server -> kubelet round trip, so the numbers show what the
probe's concurrency buys, not how fast a loopback socket is.

Measured: the probe at concurrency 1 on 50 nodes (extrapolated to 1,000: a sequential probe would take
minutes), and at the default concurrency 16 and above on 1,000 nodes, then the checks over what it read.
The client library's import and first connection are paid once in a warm-up and reported apart.
Target: 1,000 GPU nodes probed live in under 20 s at the default concurrency.
"""

from __future__ import annotations

from functools import partial

from rich.console import Console
from rich.table import Table

from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import PluginTarget, plugin_targets
from aks_gpu.validation.checks import run_checks
from bench.common import prod_model, timed
from tests.cluster.fake_apiserver import FakeApiServer, FakeCluster
from tests.cluster.snapshots import healthy_snapshot

EXEC_DELAY_S = 0.2
DEFAULT_CONCURRENCY = 16
RUNS = ((50, 1), (1_000, DEFAULT_CONCURRENCY), (1_000, 32), (1_000, 64))
TARGET_NODES = 1_000
TARGET_SECONDS = 20.0


def cluster(model: PlatformModel, targets: dict[str, PluginTarget], count: int) -> FakeCluster:
    infer = count // 5
    return FakeCluster.from_snapshot(healthy_snapshot(model, targets, {"train": count - infer, "infer": infer}))


def run(console: Console) -> bool:
    # Imported here: the kubernetes client's import is part of the warm-up below, not of the bench's import.
    from aks_gpu.cluster.probe import collect_snapshot

    model = prod_model()
    targets = plugin_targets(model)

    with FakeApiServer(cluster(model, targets, 2)) as server:
        _, warm_s = timed(lambda: collect_snapshot(model, targets, kubeconfig_text=server.kubeconfig_text()))

    table = Table(title=f"live probe against a fake API server, {EXEC_DELAY_S * 1000:.0f} ms per exec")
    for column in (
        "GPU nodes",
        "concurrency",
        "probe",
        "max in flight",
        "ideal",
        "overhead",
        "per node",
        "1,000 nodes",
        "checks",
        "target",
    ):
        table.add_column(column, justify="right", no_wrap=True)
    met = True
    for count, concurrency in RUNS:
        fake = cluster(model, targets, count)
        with FakeApiServer(fake, exec_delay_s=EXEC_DELAY_S) as server:
            probe = partial(collect_snapshot, model, targets, kubeconfig_text=server.kubeconfig_text(), concurrency=concurrency)
            snapshot, probe_s = timed(probe)
            in_flight = server.stats.max_in_flight
        assert len(snapshot.smi) == count and not snapshot.exec_errors, snapshot.exec_errors
        results, check_s = timed(partial(run_checks, model, targets, snapshot))
        assert not any(r.status == "fail" for r in results), "the benchmark cluster must be healthy"
        ideal = count * EXEC_DELAY_S / concurrency
        per_thousand = probe_s * TARGET_NODES / count
        target = ""
        if count == TARGET_NODES and concurrency == DEFAULT_CONCURRENCY:
            ok = probe_s < TARGET_SECONDS
            met = met and ok
            target = f"[green]< {TARGET_SECONDS:g} s[/]" if ok else f"[bold red]MISSED ({TARGET_SECONDS:g} s)[/]"
        table.add_row(
            f"{count:,}",
            str(concurrency),
            f"[bold]{probe_s:.2f} s[/]",
            str(in_flight),
            f"{ideal:.2f} s",
            f"{(probe_s - ideal) / count * 1000:.1f} ms/node",
            f"{probe_s / count * 1000:.1f} ms",
            f"{per_thousand:.1f} s" + (" (extrapolated)" if count != TARGET_NODES else ""),
            f"{check_s:.2f} s",
            target,
        )
    console.print(table)
    console.print(
        f"warm-up (kubernetes client import, first connection, 2 nodes, no delay): {warm_s:.2f} s, paid once per "
        "process and not in the rows above; ideal = nodes x exec time / concurrency"
    )
    return met
