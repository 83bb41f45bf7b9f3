"""Active vendor diagnostics over a cluster, live or from a snapshot: every GPU node of a stack (or those named) gets its
verdict (``aks_gpu.validation.diagnostics``: the pod, the grades, the node action), and, with ``quarantine``, the node
patch it calls for. ``aksgpu validate --deep`` and the deploy hook (``validation.diagnosticsOnDeploy``) run it.

I/O: the live path creates each node's diagnostic pod in turn (it holds every GPU of the node, so nodes are diagnosed
one after the other: the point is to prove them, not to be fast) through ``aks_gpu.cluster.diag_run``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aks_gpu.cluster.objects import NodeStatus
from aks_gpu.cluster.snapshot import DIAG_DIR, read_diag_outputs, read_snapshot
from aks_gpu.gpu.diag import Grade, combine
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.validation.diagnostics import (
    SCHEDULE_WAIT_S,
    Level,
    NodeAction,
    diagnostic_pod_manifest,
    exec_step,
    node_action,
    tool_grades,
    tools,
)


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


def gpu_nodes(
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


def _graded(
    pool: ResolvedPool, outputs: dict[str, str | None], notes: dict[str, str], level: Level, vm_size: str | None
) -> tuple[Grade, tuple[Grade, ...]]:
    grades = tuple(tool_grades(pool, outputs, level, vm_size, notes))
    return combine("node", grades), grades


def diagnose_snapshot(model: PlatformModel, folder: Path, level: Level, wanted: Sequence[str] | None) -> list[NodeResult]:
    """Every (wanted) GPU node's verdict from a snapshot's recorded ``diag/<node>/<tool>.txt``."""
    snapshot = read_snapshot(folder)
    recorded = read_diag_outputs(folder)
    results: list[NodeResult] = []
    for node, pool in gpu_nodes(model, snapshot.nodes, wanted):
        outputs: dict[str, str | None] = dict(recorded.get(node, {}))
        notes = {} if node in recorded else dict.fromkeys(tools(pool), f"no {DIAG_DIR}/{node}/ folder in the snapshot")
        verdict, grades = _graded(pool, outputs, notes, level, _instance_type(snapshot.nodes, node))
        results.append(NodeResult(node, pool.name, verdict, grades, None))
    return results


def _instance_type(nodes: Sequence[dict[str, Any]], name: str) -> str | None:
    """The node's own VM size (its instance-type label), which the NCCL figures are looked up by."""
    for item in nodes:
        if (item.get("metadata") or {}).get("name") == name:
            return NodeStatus.read(item).instance_type
    return None


def diagnose_live(
    model: PlatformModel,
    level: Level,
    wanted: Sequence[str] | None = None,
    *,
    quarantine: bool = False,
    kubeconfig: str | None = None,
    context: str | None = None,
    kubeconfig_text: str | None = None,
    in_cluster: bool = False,
    schedule_wait_s: float = SCHEDULE_WAIT_S,
    skip: Iterable[str] = (),
) -> list[NodeResult]:
    """Every (wanted) GPU node's verdict on the live cluster, ``skip`` left out; with ``quarantine``, each node patched as
    its verdict calls for. ``in_cluster``: as the pod's ServiceAccount (the diagnostic schedule's CronJob), not through
    a kubeconfig. Raises ``ValueError`` when the cluster cannot be read."""
    # Imported here: the kubernetes client is only needed on the live path.
    from kubernetes import client as kube_client

    from aks_gpu.cluster.client_config import ProbeError, load_client_configuration, load_in_cluster_configuration
    from aks_gpu.cluster.diag_run import list_nodes, run_diagnostic
    from aks_gpu.cluster.probe import pool_selector
    from aks_gpu.cluster.retries import describe

    try:
        configuration = (
            load_in_cluster_configuration() if in_cluster else load_client_configuration(kubeconfig, context, kubeconfig_text)
        )
    except ProbeError as error:
        raise ValueError(str(error)) from None
    results: list[NodeResult] = []
    with kube_client.ApiClient(configuration) as api:
        core = kube_client.CoreV1Api(api)
        try:
            nodes = list_nodes(core, pool_selector(pool.name for pool in model.pools))
        except Exception as error:  # noqa: BLE001 - the cluster cannot be read: a usage error, said in one line
            raise ValueError(f"cannot list the GPU nodes: {describe(error)}") from None
        left_out = set(skip)
        for node, pool in gpu_nodes(model, nodes, wanted):
            if node in left_out:
                continue
            step = exec_step(pool, level)
            run = run_diagnostic(
                core,
                diagnostic_pod_manifest(pool, node, level),
                step.tool,
                step.command,
                schedule_wait_s=schedule_wait_s,
                exec_timeout_s=step.timeout_s,
            )
            verdict, grades = _graded(pool, run.outputs, run.notes, level, _instance_type(nodes, node))
            action = _act(core, node, verdict) if quarantine else None
            results.append(NodeResult(node, pool.name, verdict, grades, action))
    return results


def _act(core: Any, node: str, verdict: Grade) -> NodeAction:
    """Patch the node as its verdict calls for; a node changed meanwhile (409: the patch carries the resourceVersion it
    was computed from) is read again and the action computed anew, once."""
    from kubernetes.client import ApiException

    from aks_gpu.cluster.diag_run import patch_node, read_node

    for attempt in (1, 2):
        action = node_action(read_node(core, node), verdict)
        if action.patch is None:
            return action
        try:
            patch_node(core, node, action.patch)
            return action
        except ApiException as error:
            if error.status != 409 or attempt == 2:
                raise ValueError(f"cannot patch node {node}: {error.status} {error.reason}") from None
    raise AssertionError("unreachable")
