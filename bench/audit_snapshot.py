"""How long ``aksgpu audit --snapshot`` takes on big clusters: read the folder from disk, then audit it.

The cluster is the prod stack built as the article asks (``tests/audit/clusters.clean_snapshot``): N GPU nodes (an
8x H100 training pool and a MIG A100 inference pool, 4:1), each with its own ``nvidia-smi -q -x`` (135-210 KB, as the
validation benchmark has them), its Node Problem Detector conditions, its device plugin pod, a DaemonSet pod of a
node agent and a workload pod using every GPU; plus 20% more nodes as CPU nodes with four pods each, the workload
namespaces with their quotas and policies, and meta.json. Every practice is judged, SMI health included. Best of
``REPEATS``; the JSON and the HTML page are rendered too. Target: 1,000 GPU nodes in under 2 s (read + audit).
"""

from __future__ import annotations

import copy
import json
import tempfile
from datetime import UTC, datetime
from functools import partial
from typing import Any

from rich.console import Console
from rich.table import Table

from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.html import render_html
from aks_gpu.audit.report import AuditReport
from aks_gpu.cluster.snapshot import ClusterSnapshot, read_snapshot, write_snapshot
from aks_gpu.naming import POOL_LABEL
from bench.common import timed
from tests.audit.clusters import clean_snapshot, workload_pod

NODE_COUNTS = (100, 1_000)
# And 1,000 GPU nodes with findings on every one (untainted, idle), for the cost of reporting 2,000 findings.
BROKEN = 1_000
TARGET_NODES = 1_000
TARGET_SECONDS = 2.0
REPEATS = 3


def big_cluster(gpu_nodes: int) -> ClusterSnapshot:
    """``clean_snapshot`` at ``gpu_nodes``, with a node agent on every GPU node and CPU nodes full of other pods."""
    infer = gpu_nodes // 5
    snapshot = clean_snapshot({"train": gpu_nodes - infer, "infer": infer})
    system = next(node for node in snapshot.nodes if POOL_LABEL not in node["metadata"].get("labels", {}))
    pods: list[dict[str, Any]] = list(snapshot.pods)
    nodes = list(snapshot.nodes)
    for node in [n for n in snapshot.nodes if POOL_LABEL in n["metadata"].get("labels", {})]:
        name = node["metadata"]["name"]
        pods.append(workload_pod("monitoring", f"node-exporter-{name[-6:]}", name, {}, owner=("DaemonSet", "node-exporter")))
    for index in range(gpu_nodes // 5):
        cpu = copy.deepcopy(system)
        cpu["metadata"]["name"] = name = f"aks-cpu-27182818-vmss{index:06d}"
        cpu["metadata"]["labels"] = {
            "agentpool": "cpu",
            "kubernetes.azure.com/agentpool": "cpu",
            "kubernetes.azure.com/mode": "user",
        }
        nodes.append(cpu)
        for pod in range(4):
            pods.append(workload_pod("web", f"frontend-{index:06d}-{pod}", name, {}, owner=("ReplicaSet", "frontend")))
    return ClusterSnapshot(
        nodes=nodes,
        daemonsets=snapshot.daemonsets,
        pods=pods,
        smi=snapshot.smi,
        exec_errors={},
        namespaces=snapshot.namespaces,
        resourcequotas=snapshot.resourcequotas,
        networkpolicies=snapshot.networkpolicies,
        collected_at=snapshot.collected_at,
    )


def broken_cluster(gpu_nodes: int) -> ClusterSnapshot:
    """``big_cluster`` with every GPU node untainted and idle (its workload pod gone)."""
    snapshot = big_cluster(gpu_nodes)
    for node in snapshot.nodes:
        if POOL_LABEL in node["metadata"].get("labels", {}):
            node["spec"]["taints"] = []
    pods = [pod for pod in snapshot.pods if not pod["metadata"]["namespace"].startswith("gpu-")]
    return ClusterSnapshot(**{**snapshot.__dict__, "pods": pods})


def _json(report: AuditReport) -> str:
    return json.dumps(report.to_dict())


def run(console: Console) -> bool:
    table = Table(title=f"aksgpu audit --snapshot: read from disk, then audit (best of {REPEATS})")
    for column in (
        "GPU nodes",
        "pods",
        "findings",
        "on disk",
        "read",
        "audit",
        "read+audit",
        "per node",
        "JSON",
        "HTML",
        "target",
    ):
        table.add_column(column, justify="right", no_wrap=True)
    met = True
    for count, build in [*((n, big_cluster) for n in NODE_COUNTS), (BROKEN, broken_cluster)]:
        snapshot, _ = timed(partial(build, count))
        with tempfile.TemporaryDirectory(prefix="aksgpu-bench-audit-") as folder:
            written = write_snapshot(snapshot, folder)
            size_mib = sum(path.stat().st_size for path in written) / (1024 * 1024)
            reads: list[float] = []
            audits: list[float] = []
            report: AuditReport | None = None
            for _ in range(REPEATS):
                loaded, read_s = timed(partial(read_snapshot, folder))
                report, audit_s = timed(partial(run_audit, loaded, shapes_checked=True))  # as the CLI does
                reads.append(read_s)
                audits.append(audit_s)
        # Read whole: nothing is left unchecked but what nvidia-smi -q -x cannot show (Xid events, NVLink state).
        assert report is not None, "the benchmark ran"
        assert all("does not show what these need" in gap.reason for gap in report.not_checked), report.not_checked
        assert bool(report.findings) == (build is broken_cluster), "the clean cluster has no finding, the broken one many"
        _, json_s = timed(partial(_json, report))
        _, html_s = timed(partial(render_html, report, made_at=datetime.now(UTC), version="bench", source="bench"))
        best = min(r + a for r, a in zip(reads, audits, strict=True))
        target = ""
        if count == TARGET_NODES and build is big_cluster:
            ok = best < TARGET_SECONDS
            met = met and ok
            target = f"[green]< {TARGET_SECONDS:g} s[/]" if ok else f"[bold red]MISSED ({TARGET_SECONDS:g} s)[/]"
        table.add_row(
            f"{count:,}" + (" (broken)" if build is broken_cluster else ""),
            f"{len(snapshot.pods):,}",
            str(len(report.findings)),
            f"{size_mib:.1f} MiB",
            f"{min(reads):.3f} s",
            f"{min(audits):.3f} s",
            f"[bold]{best:.3f} s[/]",
            f"{best / count * 1000:.2f} ms",
            f"{json_s:.3f} s",
            f"{html_s:.3f} s",
            target,
        )
    console.print(table)
    console.print(
        "read: nodes, daemonsets, pods, namespaces, resourcequotas, networkpolicies, meta.json and one smi/<node>.txt "
        "(nvidia-smi -q -x) per GPU node; audit: every finding of components/aks_gpu/audit/registry.py, SMI health included"
    )
    return met
