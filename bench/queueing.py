"""GPU queues on the real engines (docs/queueing.md): ``aksgpu local up --stack teams`` runs Kueue (``make tools``'
kueue group) against the local control plane, and the real scheduler binds what it admits to kwok's simulated nodes.

On a project copy in a temporary folder (its cluster always stopped and purged), four nodes a pool:

- borrowing: a 3-pod, 24-GPU Job in ``research`` (16 GPUs nominal; ``vision``, idle, lends 8), submitted ``ROUNDS``
  times, each deleted before the next: submit to its Workload admitted, and to its three pods bound;
- reclaim: with research's 24-GPU Job running, ``vision`` submits a 16-GPU Job of its own: submit to vision's Workload
  admitted, research's borrowed Workload preempted on the way;
- Kueue's controller memory (resident set, from /proc) once the queues have run.

Target: every admission within 5 s of its submit (Kueue admits in one scheduling cycle; on AKS the node's own
start-up comes on top, which kwok does not simulate).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from aks_gpu.local.control_plane import LocalPaths
from aks_gpu.local.engine import kueue_pid
from tests.e2e.conftest import LocalCluster, project_copy, start_in, stop
from tests.e2e.conftest import until as wait_for
from tests.e2e.test_queueing import admitted, bound_pods, submit, workload_of

STACK = "teams"
NODES_PER_POOL = 4
ROUNDS = 5
ADMITTED_TARGET_S = 5.0
POLL_S = 0.1


def until(what: str, check: Callable[[], object]) -> None:
    """Polled every 0.1 s: the times below are read from it."""
    wait_for(what, check, every=POLL_S)


def delete_job(cluster: LocalCluster, namespace: str, name: str) -> None:
    """The Job gone, and its Workload with it: until then Kueue still counts its quota, and the next round's Job would
    wait for that instead of being timed on its own admission."""
    cluster.kubectl("delete", "-n", namespace, f"job/{name}", "--cascade=foreground", "--wait=true", timeout=120)
    until(f"{namespace}/{name}'s pods gone", lambda: not bound_pods(cluster, namespace, name))
    until(f"{namespace}/{name}'s Workload gone", lambda: workload_of(cluster, namespace, name) is None)


def borrow_round(cluster: LocalCluster, name: str) -> tuple[float, float]:
    """(submit to admitted, submit to 3 pods bound) of one 24-GPU Job in research, which borrows 8 GPUs."""
    start = submit(cluster, name, "research", pods=3, gpus_each=8)
    until(f"research/{name} admitted", lambda: admitted(cluster, "research", name))
    to_admitted = time.monotonic() - start
    until(f"research/{name}'s pods bound", lambda: len(bound_pods(cluster, "research", name)) == 3)
    return to_admitted, time.monotonic() - start


def reclaim(cluster: LocalCluster) -> float:
    """Submit to admitted of vision's own 16 GPUs while research borrows 8 of them: Kueue preempts to give them back."""
    submit(cluster, "borrower", "research", pods=3, gpus_each=8)
    until("research/borrower's pods bound", lambda: len(bound_pods(cluster, "research", "borrower")) == 3)
    start = submit(cluster, "lender", "vision", pods=2, gpus_each=8)
    until("vision/lender admitted", lambda: admitted(cluster, "vision", "lender"))
    return time.monotonic() - start


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def run(console: Console) -> bool:
    with tempfile.TemporaryDirectory(prefix="aksgpu-bench-queues-") as folder:
        cluster = start_in(project_copy(Path(folder)), STACK, NODES_PER_POOL)
        try:
            rounds = []
            for number in range(ROUNDS):
                rounds.append(borrow_round(cluster, f"big-{number}"))
                delete_job(cluster, "research", f"big-{number}")
            to_reclaim = reclaim(cluster)
            pid = kueue_pid(LocalPaths(cluster.project, STACK))
            memory = resident_mib(pid) if pid is not None else float("nan")
        finally:
            stop(cluster)
    admitted_s = [first for first, _ in rounds]
    bound_s = [second for _, second in rounds]
    table = Table(title=f"Kueue on aksgpu local up --stack {STACK} ({NODES_PER_POOL} nodes a pool, {ROUNDS} rounds)")
    for column in ("", "median", "max", "target"):
        table.add_column(column, justify="left" if not column else "right")
    table.add_row(
        "24-GPU Job (8 borrowed): submit to admitted",
        f"{statistics.median(admitted_s):.2f} s",
        f"{max(admitted_s):.2f} s",
        f"{ADMITTED_TARGET_S:.0f} s",
    )
    table.add_row("the same: submit to its 3 pods bound", f"{statistics.median(bound_s):.2f} s", f"{max(bound_s):.2f} s", "")
    table.add_row(
        "the lender's 16-GPU Job: submit to admitted (reclaim)", f"{to_reclaim:.2f} s", "", f"{ADMITTED_TARGET_S:.0f} s"
    )
    table.add_row("Kueue controller resident memory", f"{memory:.0f} MiB", "", "")
    console.print(table)
    return max(admitted_s) < ADMITTED_TARGET_S and to_reclaim < ADMITTED_TARGET_S
