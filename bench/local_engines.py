"""The real engines of ``aksgpu local`` (docs/local.md): how long they take, on this machine's tools (``make tools``).

Three benchmarks, each on a project copy in a temporary folder (the checkout's Pulumi.yaml, stacks/ and .tools/), its
cluster always stopped and purged:

- ``local-up``: ``aksgpu local up --stack prod`` with a warm tool cache (the cluster, its simulated nodes and the
  stack's in-cluster layer by the real Pulumi CLI), then the second ``up``, which changes nothing. Target: the first
  under 90 s.
- ``audit-live-local``: ``aksgpu audit --kubeconfig ... --json`` (no stack: the audit reads the cluster and runs no
  exec) over 1,000 simulated GPU nodes of the prod stack's GPU pools, every one with its device plugin and exporter
  pods, through the real API server. Target: under 5 s.
- ``admission-vs-server``: ``aksgpu admission check --stack prod --json`` of 1,000 objects (bench.admission_check's
  generator, in the namespaces the stack creates) against one server-side dry-run create of each object, on one
  kept-alive connection. Target: the offline check, start-up included, at least 2x ahead.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from aks_gpu.config.loader import load_stack_file
from aks_gpu.local.nodes import node_manifests
from aks_gpu.naming import AKS_AGENTPOOL_LABEL
from aks_gpu.resolved.stack import validate_stack
from bench.admission_check import generated
from bench.common import PROJECT_DIR, prod_model, timed
from tests.e2e.conftest import TOOLS, LocalCluster, project_copy

STACK = "prod"
UP_TARGET_S = 90.0
AUDIT_NODES = 1_000
AUDIT_TARGET_S = 5.0
ADMISSION_OBJECTS = 1_000
ADMISSION_TARGET_RATIO = 2.0
UP_TIMEOUT_S = 600
# Nodes are created in Lists of this many (one kubectl apply each), and the benchmark waits at most this long for
# the DaemonSets' pods of 1,000 nodes to be created and run on kwok.
NODE_BATCH = 200
PODS_READY_TIMEOUT_S = 900
# Lists and applies of a thousand nodes' objects: longer than the e2e suite's calls of a few objects.
KUBECTL_TIMEOUT_S = 300


def tools_missing(console: Console) -> bool:
    if (TOOLS / "kwokctl").exists():
        return False
    console.print("[red]no .tools/bin/kwokctl: run `make tools` first[/]")
    return True


@contextmanager
def project() -> Iterator[LocalCluster]:
    """A project copy in a temporary folder, as the e2e suite makes one, its cluster always stopped and purged."""
    with tempfile.TemporaryDirectory(prefix="aksgpu-bench-local-") as folder:
        copy = LocalCluster(project_copy(Path(folder)), STACK)
        try:
            yield copy
        finally:
            copy.aksgpu("local", "down", "--stack", STACK, "--purge", timeout=180)


def listed(copy: LocalCluster, *what: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(copy.kubectl("get", *what, "-o", "json", timeout=KUBECTL_TIMEOUT_S).stdout)["items"]
    return items


def up(copy: LocalCluster) -> float:
    done, seconds = timed(lambda: copy.aksgpu("local", "up", "--stack", STACK, timeout=UP_TIMEOUT_S))
    if done.returncode != 0:
        raise RuntimeError(f"local up exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def run_up(console: Console) -> bool:
    if tools_missing(console):
        return False
    with project() as copy:
        first = up(copy)
        second = up(copy)
        status = copy.aksgpu("local", "status", "--stack", STACK, "--json")
        document = json.loads(status.stdout)
    table = Table(title=f"aksgpu local up --stack {STACK} (tools cached)")
    for column in ("first up", "second up (no changes)", "nodes", "Pulumi resources", "pending changes", "target"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{first:.1f} s",
        f"{second:.1f} s",
        str(document["nodes"]),
        str(document["pulumi"]["resources"]),
        str(document["pulumi"]["pendingChanges"]),
        f"{UP_TARGET_S:.0f} s",
    )
    console.print(table)
    return first < UP_TARGET_S


def extra_gpu_nodes(copy: LocalCluster, count: int) -> list[dict[str, Any]]:
    """Simulated GPU nodes of the stack's GPU pools, as ``local up`` makes them, until there are ``count`` in all."""
    validated = validate_stack(load_stack_file(PROJECT_DIR / "stacks" / f"Pulumi.{STACK}.yaml"), f"stacks/Pulumi.{STACK}.yaml")
    config, model = validated.config, validated.model
    gpu_pools = {pool.name for pool in model.pools}
    per_pool = math.ceil(count / len(gpu_pools))
    existing = {n["metadata"]["name"] for n in listed(copy, "nodes")}
    wanted = [
        node
        for node in node_manifests(config, model, per_pool)
        if node["metadata"]["labels"].get(AKS_AGENTPOOL_LABEL) in gpu_pools
    ][:count]
    return [node for node in wanted if node["metadata"]["name"] not in existing]


def pods_running(copy: LocalCluster) -> tuple[int, int]:
    pods = listed(copy, "pods", "-A")
    return sum(1 for pod in pods if (pod.get("status") or {}).get("phase") == "Running"), len(pods)


def wait_for_daemonsets(copy: LocalCluster, added: int) -> None:
    """Until every DaemonSet has a ready pod on each node it selects, the new nodes counted, and that holds for three
    polls in a row (the DaemonSet controller counts the nodes in its own time)."""
    deadline = time.monotonic() + PODS_READY_TIMEOUT_S
    steady, last = 0, -1
    while time.monotonic() < deadline:
        items = listed(copy, "daemonsets", "-A")
        desired = sum(int((ds.get("status") or {}).get("desiredNumberScheduled", 0)) for ds in items)
        ready = all(
            (ds.get("status") or {}).get("numberReady", 0) == (ds.get("status") or {}).get("desiredNumberScheduled", 0)
            for ds in items
        )
        steady = steady + 1 if ready and desired == last and desired >= added else 0
        if steady >= 3:
            return
        last = desired
        time.sleep(5)
    raise RuntimeError(f"the DaemonSets' pods were not all ready within {PODS_READY_TIMEOUT_S} s")


def run_audit(console: Console) -> bool:
    if tools_missing(console):
        return False
    with project() as copy:
        up(copy)
        nodes = extra_gpu_nodes(copy, AUDIT_NODES)
        start = time.perf_counter()
        for index in range(0, len(nodes), NODE_BATCH):
            batch = {"apiVersion": "v1", "kind": "List", "items": nodes[index : index + NODE_BATCH]}
            applied = copy.kubectl("apply", "-f", "-", stdin=json.dumps(batch), timeout=KUBECTL_TIMEOUT_S)
            if applied.returncode != 0:
                raise RuntimeError(applied.stderr[-2000:])
        wait_for_daemonsets(copy, len(nodes))
        settled = time.perf_counter() - start
        running, total = pods_running(copy)
        runs = []
        for _ in range(3):
            done, seconds = timed(lambda: copy.aksgpu("audit", "--kubeconfig", str(copy.kubeconfig), "--json"))
            report = json.loads(done.stdout)
            runs.append((seconds, done.returncode, report["summary"]))
    best = min(seconds for seconds, _, _ in runs)
    summary = runs[0][2]
    table = Table(title=f"aksgpu audit --json, live, the real API server ({STACK} stack, kwok nodes)")
    for column in ("GPU nodes", "pods", "nodes + pods settled", "audit (best of 3)", "exit", "target"):
        table.add_column(column, justify="right")
    table.add_row(
        str(summary["gpuNodes"]),
        f"{running:,} running of {total:,}",
        f"{settled:.0f} s",
        f"{best:.2f} s",
        str(runs[0][1]),
        f"{AUDIT_TARGET_S:.0f} s",
    )
    console.print(table)
    return summary["gpuNodes"] >= AUDIT_NODES and best < AUDIT_TARGET_S


def run_admission(console: Console) -> bool:
    if tools_missing(console):
        return False
    # Imported here: tests.e2e.kube is the e2e suite's server client (requests, the admin client certificate).
    from tests.e2e.kube import Server

    model = prod_model()
    namespaces = {workload.name for workload in model.workloads} | {"default"}
    objects = [obj for obj in generated(ADMISSION_OBJECTS * 2) if obj["metadata"]["namespace"] in namespaces]
    objects = objects[:ADMISSION_OBJECTS]
    with project() as copy, tempfile.TemporaryDirectory() as folder:
        up(copy)
        manifest = Path(folder) / "objects.yaml"
        manifest.write_text(yaml.safe_dump_all(objects))
        offline, offline_s = timed(
            lambda: copy.aksgpu("admission", "check", "--stack", STACK, "--json", str(manifest))
        )
        if offline.returncode not in (0, 1):
            raise RuntimeError(f"admission check exited {offline.returncode}: {offline.stderr[-2000:]}")
        server = Server(copy.kubeconfig)
        answers, server_s = timed(lambda: [server.create(obj, dry_run=True).decision for obj in objects])
    ratio = server_s / offline_s
    table = Table(title=f"{len(objects):,} objects: aksgpu admission check vs the API server's dry-run creates")
    for column in ("offline check (one process)", "server (one dry run each)", "per object", "ratio", "target"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{offline_s:.2f} s",
        f"{server_s:.2f} s ({answers.count('admitted')} admitted, {answers.count('denied')} denied)",
        f"{offline_s / len(objects) * 1000:.2f} / {server_s / len(objects) * 1000:.2f} ms",
        f"{ratio:.1f}x",
        f">= {ADMISSION_TARGET_RATIO:.0f}x",
    )
    console.print(table)
    return ratio >= ADMISSION_TARGET_RATIO
