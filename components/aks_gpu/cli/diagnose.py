"""``aksgpu validate --deep``: run the vendors' active diagnostics on every GPU node of a stack (or the nodes named
with ``--node``), live or from a snapshot's recorded outputs, and grade them (``aks_gpu.validation.diagnostics``).

Live, each node gets its diagnostic pod in turn (it holds every GPU of the node, so nodes are diagnosed one after the
other: the point is to prove them, not to be fast); ``--quarantine`` then acts on the verdicts, as the diagnostic
schedule does: a failing node is tainted ``aks-gpu/gpu-quarantine=diagnostic:NoSchedule`` and cordoned, a node it
quarantined returns only after a passing diagnostic, an inconclusive one is left as it is.

Exit status: 0 every node healthy, 1 a node unhealthy or inconclusive (not proven), 2 usage, config or cluster error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aks_gpu.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, out, safe
from aks_gpu.cluster.objects import NodeStatus
from aks_gpu.cluster.snapshot import DIAG_DIR, SnapshotError, read_diag_outputs, read_snapshot
from aks_gpu.gpu.diag import Grade, combine
from aks_gpu.gpu.diag.expectations import diagnostic_images
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.validation.diagnostics import (
    DEADLINE_SECONDS,
    Level,
    NodeAction,
    dcgm_command,
    diagnostic_pod_manifest,
    node_action,
    tool_grades,
    tools,
)

# How long a node's diagnostic pod may wait to be scheduled and through its init containers: a node whose GPUs hold
# other work never schedules it (it asks for every GPU), and that is reported as inconclusive, not waited on.
SCHEDULE_WAIT_S = 600.0
# AMD's RVS is graded from recorded outputs (--snapshot); no diagnostic pod runs it on a live cluster yet.
AMD_NOT_RUN = "no diagnostic pod runs RVS yet (no public RVS image is pinned): record `rvs` and grade it with --snapshot"
_STYLE = {"healthy": "green", "unhealthy": "bold red", "inconclusive": "yellow"}


@dataclass(frozen=True)
class NodeResult:
    node: str
    pool: str
    verdict: Grade
    tools: tuple[Grade, ...]
    action: NodeAction | None  # None: --quarantine not given


def _grade_dict(grade: Grade) -> dict[str, Any]:
    return {
        "tool": grade.tool,
        "state": grade.state,
        "verdict": str(grade),
        "warnings": list(grade.warnings),
        "evidence": list(grade.evidence),
    }


def report_dict(level: int, results: Sequence[NodeResult]) -> dict[str, Any]:
    """``{"passed", "level", "nodes": [{"node", "pool", "state", "verdict", "tools": [...], "action", "actionReason"}]}``."""
    return {
        "passed": all(result.verdict.passed for result in results),
        "level": level,
        "nodes": [
            {
                "node": result.node,
                "pool": result.pool,
                "state": result.verdict.state,
                "verdict": str(result.verdict),
                "tools": [_grade_dict(grade) for grade in result.tools],
                "action": result.action.action if result.action else None,
                "actionReason": result.action.reason if result.action else None,
            }
            for result in results
        ],
    }


def _gpu_nodes(
    model: PlatformModel, nodes: Sequence[dict[str, Any]], wanted: Sequence[str] | None
) -> list[tuple[str, ResolvedPool]]:
    pools = {pool.name: pool for pool in model.pools}
    found: list[tuple[str, ResolvedPool]] = []
    for item in nodes:
        metadata = item.get("metadata") or {}
        pool = pools.get(((metadata.get("labels") or {}).get(POOL_LABEL)) or "")
        if pool is not None and (not wanted or metadata.get("name") in wanted):
            found.append((str(metadata.get("name")), pool))
    missing = sorted(set(wanted or ()) - {name for name, _ in found})
    if missing:
        raise ValueError(f"--node {', '.join(missing)}: not a GPU node of this stack's pools")
    return sorted(found, key=lambda pair: pair[0])


def _result(
    pool: ResolvedPool, outputs: dict[str, str | None], notes: dict[str, str], level: Level, vm_size: str | None
) -> tuple[Grade, tuple[Grade, ...]]:
    grades = tuple(tool_grades(pool, outputs, level, vm_size, notes))
    return combine("node", grades), grades


def run_deep(args: argparse.Namespace, model: PlatformModel) -> int:
    level: Level = args.level or 1
    try:
        results = _from_snapshot(args, model, level) if args.snapshot is not None else _live(args, model, level)
    except (ValueError, SnapshotError) as error:
        err.print(f"[bold red]aksgpu validate --deep[/]: {safe(str(error))}")
        return EXIT_USAGE
    unpinned = [image.reference for image in diagnostic_images().values() if not image.digest]
    if unpinned and args.snapshot is None:
        err.print(f"[yellow]warning[/]: diagnostic images run by tag, not pinned by digest: {safe(', '.join(unpinned))}")
    if args.json:
        sys.stdout.write(json.dumps(report_dict(level, results), indent=2) + "\n")
    else:
        _print(level, results)
    return EXIT_OK if all(result.verdict.passed for result in results) else EXIT_FAILED


def _from_snapshot(args: argparse.Namespace, model: PlatformModel, level: Level) -> list[NodeResult]:
    snapshot = read_snapshot(args.snapshot)
    recorded = read_diag_outputs(args.snapshot)
    results: list[NodeResult] = []
    for node, pool in _gpu_nodes(model, snapshot.nodes, args.node):
        outputs: dict[str, str | None] = dict(recorded.get(node, {}))
        notes = {} if node in recorded else dict.fromkeys(tools(pool), f"no {DIAG_DIR}/{node}/ folder in the snapshot")
        verdict, grades = _result(pool, outputs, notes, level, _instance_type(snapshot.nodes, node))
        results.append(NodeResult(node, pool.name, verdict, grades, None))
    return results


def _instance_type(nodes: Sequence[dict[str, Any]], name: str) -> str | None:
    """The node's own VM size (its instance-type label), which the NCCL figures are looked up by."""
    for item in nodes:
        if (item.get("metadata") or {}).get("name") == name:
            return NodeStatus.read(item).instance_type
    return None


def _live(args: argparse.Namespace, model: PlatformModel, level: Level) -> list[NodeResult]:
    # Imported here: the kubernetes client is only needed on the live path.
    from kubernetes import client as kube_client

    from aks_gpu.cluster.client_config import ProbeError, load_client_configuration
    from aks_gpu.cluster.diag_run import list_nodes, patch_node, read_node, run_diagnostic
    from aks_gpu.cluster.probe import pool_selector

    try:
        configuration = load_client_configuration(args.kubeconfig, args.context)
    except ProbeError as error:
        raise ValueError(str(error)) from None
    results: list[NodeResult] = []
    with kube_client.ApiClient(configuration) as api:
        core = kube_client.CoreV1Api(api)
        try:
            nodes = list_nodes(core, pool_selector(pool.name for pool in model.pools))
        except Exception as error:  # noqa: BLE001 - the cluster cannot be read: a usage error, said in one line
            raise ValueError(f"cannot list the GPU nodes: {type(error).__name__}: {str(error)[:300]}") from None
        for node, pool in _gpu_nodes(model, nodes, args.node):
            outputs: dict[str, str | None] = {}
            notes = dict.fromkeys(tools(pool), AMD_NOT_RUN)
            if pool.vendor == "nvidia":
                run = run_diagnostic(
                    core,
                    diagnostic_pod_manifest(pool, node, level),
                    "dcgm-diag",
                    dcgm_command(level),
                    schedule_wait_s=args.timeout or SCHEDULE_WAIT_S,
                    exec_timeout_s=float(DEADLINE_SECONDS[level]),
                )
                outputs, notes = run.outputs, run.notes
            verdict, grades = _result(pool, outputs, notes, level, _instance_type(nodes, node))
            action = None
            if args.quarantine:
                action = node_action(read_node(core, node), verdict)
                if action.patch is not None:
                    patch_node(core, node, action.patch)
            results.append(NodeResult(node, pool.name, verdict, grades, action))
    return results


def _print(level: int, results: Sequence[NodeResult]) -> None:
    out.print(f"[bold]Vendor diagnostics[/] (dcgmi diag level {level}, CUDA context, NCCL all-reduce)")
    for result in results:
        state = result.verdict.state
        acted = f" -> {result.action.action}" if result.action and result.action.action != "none" else ""
        out.print(f"[{_STYLE[state]}]{state:<12}[/] {safe(result.pool)}/{safe(result.node)}{acted}")
        for grade in result.tools:
            out.print(f"    [{_STYLE[grade.state]}]{grade.tool:<16}[/] {safe(str(grade))}")
            for warning in grade.warnings:
                out.print(f"    [dim]{'':<16} warning: {safe(warning)}[/]")
        if not result.tools:
            out.print(f"    {safe(str(result.verdict))}")
    healthy = sum(1 for result in results if result.verdict.passed)
    line = f"{healthy} of {len(results)} node(s) healthy"
    out.print(
        f"[bold green]diagnostics passed[/]: {line}"
        if healthy == len(results)
        else f"[bold red]diagnostics not passed[/]: {line}"
    )
