"""``aksgpu validate --deep``: run the vendors' active diagnostics on every GPU node of a stack (or the nodes named
with ``--node``), live or from a snapshot's recorded outputs, and grade them (``aks_gpu.validation.diagnostics``).

Live, each node gets its diagnostic pod in turn (``aks_gpu.validation.deep``); ``--quarantine`` then acts on the
verdicts, as the diagnostic schedule does: a failing node is tainted ``aks-gpu/gpu-quarantine=diagnostic:NoSchedule``
and cordoned, a node it quarantined returns only after a passing diagnostic, an inconclusive one is left as it is.

Exit status: 0 every node healthy, 1 a node unhealthy or inconclusive (not proven), 2 usage, config or cluster error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from aks_gpu.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, out, safe
from aks_gpu.cluster.snapshot import SnapshotError
from aks_gpu.gpu.diag.expectations import diagnostic_images
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.validation.deep import NodeResult, diagnose_live, diagnose_snapshot, report_dict
from aks_gpu.validation.diagnostics import SCHEDULE_WAIT_S, Level

_STYLE = {"healthy": "green", "unhealthy": "bold red", "inconclusive": "yellow"}


def run_deep(args: argparse.Namespace, model: PlatformModel) -> int:
    level: Level = args.level or 1
    try:
        results = (
            diagnose_snapshot(model, args.snapshot, level, args.node)
            if args.snapshot is not None
            else diagnose_live(
                model,
                level,
                args.node,
                quarantine=args.quarantine,
                kubeconfig=args.kubeconfig,
                context=args.context,
                in_cluster=args.in_cluster,
                schedule_wait_s=args.timeout or SCHEDULE_WAIT_S,
            )
        )
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


def _print(level: int, results: Sequence[NodeResult]) -> None:
    out.print(f"[bold]Vendor diagnostics[/], level {level}")
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
