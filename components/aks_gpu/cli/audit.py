"""``aksgpu audit``: hold any AKS GPU cluster against the GPU best-practices article, no stack needed.

``aksgpu audit --snapshot DIR`` reads a saved snapshot (``aksgpu audit collect``, ``validate collect``, or kubectl);
``aksgpu audit [--kubeconfig F] [--context C]`` reads the live cluster, read-only (with ``--stack`` it also runs
the SMI command in the stack's device plugin pods, as ``validate`` does). The findings are
``aks_gpu.audit.registry``'s; the judging is ``aks_gpu.audit.engine``'s (the results ``aks_gpu.audit.report``'s), the
page ``aks_gpu.audit.html``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aks_gpu.audit import registry
from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.html import render_html
from aks_gpu.audit.report import AuditFinding, AuditReport, practices_of
from aks_gpu.audit.stack import StackExpectations, expectations
from aks_gpu.cli import COMMANDS, tables
from aks_gpu.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    aksgpu_version,
    err,
    load_stack,
    out,
    report_config_error,
    report_warnings,
    safe,
    write_text_file,
)
from aks_gpu.cluster.inventory import is_gpu_node, whole
from aks_gpu.cluster.snapshot import ClusterSnapshot, SnapshotError, read_snapshot, write_snapshot
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import PluginTarget, plugin_targets

_DESCRIPTION = f"""\
Hold an AKS GPU cluster against Microsoft's GPU best practices for AKS
(https://learn.microsoft.com/azure/aks/best-practices-gpu): no stack needed. GPU nodes are found by their
capacity (nvidia.com/gpu, amd.com/gpu, nvidia.com/mig-*) or labels (accelerator, kubernetes.azure.com/accelerator,
nvidia.com/gpu.present), pools by kubernetes.azure.com/agentpool. With --stack, what the stack sets is expected
too (each pool's taints and GPU resource, the stack's namespaces).

Findings (fail makes the exit status 1; warn does not):
{registry.help_text()}

What a snapshot lacks is reported as not checked, never as passed: namespaces.json, resourcequotas.json,
networkpolicies.json (isolation), meta.json with collectedAt (node image age), smi/<node>.txt (SMI health).

  aksgpu audit collect --out snap/                save a snapshot of the live cluster (no stack needed)
  aksgpu audit --snapshot snap/                   audit a saved snapshot
  aksgpu audit                                    the live cluster of the current kubeconfig context
  aksgpu audit --kubeconfig F --context C         another one
  aksgpu audit --snapshot snap/ --json            {{"findings": [{{"id", "severity", "node", "namespace", "pod",
                                                  "message"}}], "summary": {{...}}}}
  aksgpu audit --snapshot snap/ --html audit.html one self-contained page for a ticket
  aksgpu audit --stack prod                       expectations from stacks/Pulumi.prod.yaml too

exit status: 0 nothing fails (warnings allowed), 1 a finding fails, 2 usage error or a snapshot that cannot be read
"""

_COLLECT_DESCRIPTION = """\
Save what `aksgpu audit` reads of a live cluster into a snapshot folder, with no stack: every GPU node, the pods
on them or asking for GPUs, the DaemonSets, namespaces, resource quotas, network policies, the events on nodes the
planned-disruption checks read (AKS node auto-repair's and the scheduled events', a bounded number per node),
meta.json (the time, the kubeconfig context and the API server), and the SMI output of every GPU node (nvidia-smi
-q -x or amd-smi, run in the node's GPU Operator driver pod or device plugin pod, found by the labels the vendors'
manifests give them: components/aks_gpu/data/smi_pods.yaml). Files are written beside and renamed into place.

  aksgpu audit collect --out snap/                          the current kubeconfig context
  aksgpu audit collect --out snap/ --kubeconfig F --context C
  aksgpu audit --snapshot snap/                             then audit it, anywhere, offline

RBAC: list nodes, pods, daemonsets, namespaces, resourcequotas, networkpolicies and events cluster-wide (the last
four optional), and create pods/exec on the plugin and driver pods. Without the exec right, each node's reason is
saved as smi/<node>.error and its health is reported not checked. Cannot run our tool against production? The
same folder can be written with kubectl alone: see docs/audit.md.

exit status: 0 written, 2 usage error, a cluster that cannot be read or a folder that cannot be written
"""

_STYLE = {"fail": "bold red", "warn": "yellow"}
# Rows per practice in the terminal; --json and --html carry every finding.
MAX_ROWS_SHOWN = 50


class _UsageError(Exception):
    """A command line, snapshot or cluster-access problem: nothing was audited; stderr, exit status 2."""


def register(subparsers: Any) -> None:
    """Add ``audit`` and ``audit collect`` to the ``aksgpu`` command line."""
    parser = subparsers.add_parser(
        "audit",
        help=COMMANDS["audit"],
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--snapshot", type=Path, metavar="DIR", help="audit this saved snapshot instead of a live cluster")
    add_cluster_arguments(parser)
    parser.add_argument("--json", action="store_true", help='print {"findings": [...], "summary": {...}} on stdout, nothing else')
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write the report as one self-contained HTML page")
    parser.add_argument(
        "--metrics",
        type=Path,
        metavar="DIR",
        help="with --html: add `aksgpu advise`'s recommendations from this folder of query_range responses",
    )
    tables.add_wide_argument(parser)
    parser.add_argument("--stack", metavar="NAME", help="also expect what this stack sets (its Pulumi.<NAME>.yaml)")
    parser.add_argument("--config-file", type=Path, metavar="FILE", help="with --stack: read this stack file instead")
    parser.add_argument(
        "--project-dir", type=Path, metavar="DIR", help="with --stack: the folder with Pulumi.yaml (default: found from here)"
    )
    parser.set_defaults(handler=run)
    actions = parser.add_subparsers(dest="audit_action", metavar="collect", title="subcommand")
    collect = actions.add_parser(
        "collect",
        help="save a snapshot of a live cluster for `aksgpu audit --snapshot` (no stack needed)",
        description=_COLLECT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    collect.add_argument("--out", type=Path, metavar="DIR", required=True, help="the folder to write the snapshot to")
    add_cluster_arguments(collect)
    collect.set_defaults(handler=run_collect)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")


def run_collect(args: argparse.Namespace) -> int:
    """Read the live cluster as ``audit`` does, run the SMI command in each GPU node's plugin or driver pod, and save it
    all as a snapshot folder."""
    audit_only = [
        flag for flag in ("snapshot", "json", "html", "stack", "config_file", "project_dir") if getattr(args, flag, None)
    ]
    if audit_only:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in audit_only)
        err.print(f"[bold red]aksgpu audit collect[/]: {flags}: for `aksgpu audit`; collect saves a snapshot and judges nothing")
        return EXIT_USAGE
    if args.out.exists() and not args.out.is_dir():
        err.print(f"[bold red]aksgpu audit collect[/]: --out {safe(str(args.out))} is a file, not a folder: nothing was read")
        return EXIT_USAGE
    try:
        snapshot = _probe(args, None, {}, known_smi_pods=True)
        written = write_snapshot(snapshot, args.out)
    except (_UsageError, SnapshotError) as error:
        err.print(f"[bold red]aksgpu audit collect[/]: {safe(str(error))}")
        return EXIT_USAGE
    except OSError as error:
        reason = safe(error.strerror or error)
        err.print(f"[bold red]aksgpu audit collect[/]: cannot write the snapshot to {safe(str(args.out))}: {reason}")
        return EXIT_USAGE
    gpu_nodes = sum(1 for node in snapshot.nodes if is_gpu_node(node))
    failed = sorted(name for name in snapshot.exec_errors if name not in snapshot.smi)
    where = ", ".join(f"{key} {value}" for key, value in sorted(snapshot.cluster.items()))
    out.print(
        f"wrote {len(written)} file(s) to {safe(str(args.out))}{f' ({safe(where)})' if where else ''}: {gpu_nodes} GPU node(s), "
        f"{len(snapshot.pods)} pod(s) on them or asking for GPUs, {len(snapshot.smi)} SMI output(s)"
    )
    for name in failed[:MAX_ROWS_SHOWN]:
        out.print(f"  [yellow]no SMI output[/] {safe(name)}: {safe(snapshot.exec_errors[name])}")
    if len(failed) > MAX_ROWS_SHOWN:
        out.print(f"  +{len(failed) - MAX_ROWS_SHOWN} more (smi/<node>.error)")
    for name, reason in sorted(snapshot.not_collected.items()):
        out.print(f"  [yellow]not collected[/] {safe(name)}: {safe(reason)}")
    out.print(f"audit it with: aksgpu audit --snapshot {safe(str(args.out))}")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    tables.apply_wide(args)
    try:
        _check_usage(args)
        model, expected = _stack(args)
        snapshot, source = _snapshot(args, model)
        report = run_audit(snapshot, expected, shapes_checked=True)  # read_snapshot and the probe checked them
        if args.html is not None:
            # The page names the cluster by the context and API server the snapshot recorded, never a local folder.
            page = render_html(
                report,
                made_at=datetime.now(UTC),
                version=aksgpu_version(),
                source=None if args.snapshot is not None else source,
                advice=_advice(args),
            )
            _write_html(args.html, page)
    except ConfigError as error:
        return report_config_error(error)
    except (_UsageError, SnapshotError) as error:
        err.print(f"[bold red]aksgpu audit[/]: {safe(str(error))}")
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    else:
        print_report(report, source=source)
    if args.html is not None:
        (err if args.json else out).print(f"wrote {safe(str(args.html))}")
    return EXIT_FAILED if report.failed else EXIT_OK


def _check_usage(args: argparse.Namespace) -> None:
    if args.snapshot is not None and (args.kubeconfig is not None or args.context is not None):
        raise _UsageError("--kubeconfig and --context are for a live cluster; --snapshot audits saved files and reads none")
    if args.stack is None and (args.config_file is not None or args.project_dir is not None):
        raise _UsageError("--config-file and --project-dir go with --stack NAME")
    if args.html is not None and args.html.is_dir():
        raise _UsageError(f"--html {args.html}: is a folder; give the file to write")
    if getattr(args, "metrics", None) is not None and args.html is None:
        raise _UsageError("--metrics adds the advice to the --html page: give --html FILE too (or run `aksgpu advise`)")


def _advice(args: argparse.Namespace) -> dict[str, Any] | None:
    """``aksgpu advise``'s document from ``--metrics DIR``, priced by the audit's ``--stack`` where one is named."""
    if getattr(args, "metrics", None) is None:
        return None
    from aks_gpu.advise.report import advice_document
    from aks_gpu.cli.advise import AdviceUsageError, advice_from

    try:
        advice, currency = advice_from(args)
    except AdviceUsageError as error:
        raise _UsageError(f"--metrics: {error}") from None
    return advice_document(advice, currency)


def _stack(args: argparse.Namespace) -> tuple[PlatformModel | None, StackExpectations | None]:
    if args.stack is None:
        return None, None
    loaded = load_stack(args)
    report_warnings(loaded)
    model = loaded.validated.model
    return model, expectations(model, args.stack)


def _snapshot(args: argparse.Namespace, model: PlatformModel | None) -> tuple[ClusterSnapshot, str]:
    if args.snapshot is not None:
        return read_snapshot(args.snapshot), f"snapshot {args.snapshot}"
    context = f"context {args.context}" if args.context else "the current context"
    kubeconfig = args.kubeconfig or "$KUBECONFIG / ~/.kube/config"
    return _probe(args, model, plugin_targets(model) if model is not None else {}), f"live cluster ({context} of {kubeconfig})"


def _probe(
    args: argparse.Namespace, model: PlatformModel | None, targets: dict[str, PluginTarget], *, known_smi_pods: bool = False
) -> ClusterSnapshot:
    """Read the live cluster with the probe's client, timeouts and retries, a progress bar on stderr (stdout stays
    clean for --json). Without a stack nothing is exec'd (the audit only lists objects), unless ``known_smi_pods``
    (``audit collect``): then the SMI command runs in each GPU node's plugin or driver pod, found by its labels."""
    try:
        # Imported here: the kubernetes client is only needed on the live path.
        from aks_gpu.cluster.probe import ProbeError, collect_snapshot
    except ImportError as error:
        raise _UsageError(f"the live probe is not available ({error}); audit a saved snapshot with --snapshot DIR") from None
    settings: dict[str, Any] = {}
    if model is not None:
        validation = model.config.validation
        settings = {
            "concurrency": validation.concurrency,
            "timeout_s": float(validation.exec_timeout_seconds),
            "retries": validation.retries,
        }
    label = "reading the cluster and probing GPU nodes" if targets or known_smi_pods else "reading the cluster"
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("audit", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total or None)

        try:
            return collect_snapshot(
                model,
                targets,
                kubeconfig=args.kubeconfig,
                context=args.context,
                progress=advance,
                full=True,
                known_smi_pods=known_smi_pods,
                **settings,
            )
        except ProbeError as error:
            raise _UsageError(str(error)) from None


def _write_html(path: Path, page: str) -> None:
    try:
        write_text_file(path, page)
    except OSError as error:
        raise _UsageError(f"cannot write {path}: {error.strerror or error}") from None


# ---------------------------------------------------------------- the terminal


def print_report(report: AuditReport, *, source: str) -> None:
    cluster = ", ".join(f"{key} {value}" for key, value in sorted(report.cluster.items()))
    origin = f"{source} ({cluster})" if cluster else source
    origin = f"{origin}, collected {report.collected_at}" if report.collected_at else origin
    stack = f", stack {report.stack}" if report.stack else ""
    out.print(
        f"[bold]aksgpu audit[/] of {safe(origin)}{safe(stack)}: {report.gpu_nodes} GPU node(s) in {len(report.pools)} pool(s)"
    )
    listed = False
    if report.pools:
        listed |= _print_pools(report)
    grouped = practices_of(report.findings)
    gaps = {practice.id: [gap for gap in report.not_checked if gap.practice == practice.id] for practice in registry.PRACTICES}
    for practice in registry.PRACTICES:
        findings = grouped[practice.id]
        out.print()
        if findings:
            listed |= _print_findings(practice.title, findings)
            if len(findings) > MAX_ROWS_SHOWN:
                out.print(f"  +{len(findings) - MAX_ROWS_SHOWN} more (--json or --html has every finding)")
            for check in registry.checks_of(practice.id):
                if any(finding.id in check.finding_ids for finding in findings):
                    label = check.id if not check.ids else "smi health findings"
                    out.print(f"  [bold]what to do[/] ({label}): {safe(check.fix)}")
        else:
            note = " in what was checked" if gaps[practice.id] else ""
            out.print(f"[bold]{safe(practice.title)}[/]: [green]no finding[/]{note}")
        for gap in gaps[practice.id]:
            what = ", ".join(gap.ids) if gap.ids else "summary"
            count = f" ({gap.count})" if gap.count is not None else ""
            out.print(f"  [dim]not checked[/] {safe(what)}{count}: {safe(gap.reason)}")
    if report.namespaces:
        out.print()
        listed |= _print_namespaces(report)
    if listed:
        out.print()
        out.print(f"[dim]{tables.list_note(json=True)}[/]")
    out.print()
    fail, warn = report.count("fail"), report.count("warn")
    if fail:
        out.print(f"[bold red]audit failed[/]: {fail} finding(s) fail, {warn} warn")
    elif not report.gpu_nodes:
        out.print(f"[bold yellow]nothing to audit[/]: no GPU node found, nothing fails, {warn} warning(s)")
    else:
        out.print(f"[bold green]audit passed[/]: nothing fails, {warn} warning(s)")


def _print_pools(report: AuditReport) -> bool:
    columns = (
        "pool", "vendor", "GPU nodes", "GPUs allocatable", "GPUs requested", "idle nodes", "node images", "GPU drivers"
    )  # fmt: skip
    right = ["GPU nodes", "GPUs allocatable", "GPUs requested", "idle nodes"]
    rows = []
    for pool in report.pools:
        images = ", ".join(f"{image} ({count})" for image, count in pool.node_images.items()) or "-"
        drivers = ", ".join(f"{version} ({count})" for version, count in pool.driver_versions.items()) or "-"
        rows.append(
            (
                safe(pool.pool),
                safe(pool.vendor or "?"),
                str(pool.gpu_nodes),
                str(whole(pool.gpus_allocatable)),
                str(whole(pool.gpus_requested)),
                str(pool.idle_nodes),
                safe(images),
                safe(drivers),
            )
        )
    flexible = {column: 9 for column in right}
    keep = ("pool", "node images", "GPU drivers")
    return tables.print_table(out, "GPU pools", columns, rows, right=right, keep=keep, flexible=flexible)


# The narrowest a finding's message column may be before the findings are laid out as a list instead.
MESSAGE_MIN_WIDTH = 40


def _print_findings(title: str, findings: list[AuditFinding]) -> bool:
    """A practice's findings as a table where every id, node, namespace and pod fits whole beside a message column
    at least MESSAGE_MIN_WIDTH wide; else as a list, one entry a finding (severity and id, then node, namespace, pod
    and the message wrapped)."""
    columns = ("severity", "id", "node", "namespace", "pod", "message")
    rows = [
        (
            f"[{_STYLE[finding.severity]}]{finding.severity}[/]",
            safe(finding.id),
            safe(finding.node or ""),
            safe(finding.namespace or ""),
            safe(finding.pod or ""),
            safe(finding.message),
        )
        for finding in findings[:MAX_ROWS_SHOWN]
    ]
    return tables.print_table(
        out,
        safe(title),
        columns,
        rows,
        keep=("severity", "id", "node", "namespace", "pod"),
        flexible={"message": MESSAGE_MIN_WIDTH},
        lead=2,
        bare=("message",),
        title_justify="left",
    )


def _print_namespaces(report: AuditReport) -> bool:
    rows = []
    for namespace in report.namespaces:
        quota = "not read" if namespace.quota is None else (", ".join(f"{k}: {v}" for k, v in namespace.quota.items()) or "none")
        deny = "not read" if namespace.deny_all is None else ("yes" if namespace.deny_all else "no")
        rows.append((safe(namespace.namespace), str(namespace.gpu_pods), str(whole(namespace.gpus_requested)), safe(quota), deny))
    columns = ("namespace", "GPU pods", "GPUs requested", "GPU quota", "deny-all")
    return tables.print_table(
        out, "Namespaces with GPU pods", columns, rows, keep=("namespace",), flexible={"GPU quota": 20}
    )
