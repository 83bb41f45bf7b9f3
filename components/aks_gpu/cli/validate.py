"""``aksgpu validate``: check a deployed stack's GPU pools, live or from a saved snapshot.

``aksgpu validate --stack NAME`` reads the cluster (nodes, device plugin DaemonSets and pods, and the SMI
command run in every GPU node's plugin pod) and runs the checks of ``aks_gpu.validation.checks``.
``aksgpu validate collect --stack NAME --out DIR`` saves what the checks read instead, and
``aksgpu validate --stack NAME --snapshot DIR`` checks such a folder offline.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from aks_gpu.cli import COMMANDS, tables
from aks_gpu.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    add_stack_arguments,
    err,
    load_rendered_sections,
    load_stack,
    out,
    report_config_error,
    report_warnings,
    safe,
)
from aks_gpu.cli.diagnose import run_deep
from aks_gpu.cluster.snapshot import ClusterSnapshot, SnapshotError, read_snapshot, write_snapshot
from aks_gpu.config.problems import ConfigError
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import PluginTarget, plugin_targets
from aks_gpu.validation.checks import CheckResult, run_checks
from aks_gpu.validation.registry import CHECK_IDS, help_text
from aks_gpu.validation.report import counts_by_pool, passed, report_dict

_DESCRIPTION = f"""\
Check every GPU pool of a deployed stack, per pool and per node:
{help_text()}

  aksgpu validate --stack prod                          check the live cluster (current kubeconfig context)
  aksgpu validate collect --stack prod --out snap/      save what the checks read: nodes.json, daemonsets.json,
                                                        pods.json, smi/<node>.txt (and smi/<node>.error), and for
                                                        `aksgpu audit` namespaces.json, resourcequotas.json,
                                                        networkpolicies.json, meta.json
  aksgpu validate --stack prod --snapshot snap/         check a saved snapshot offline

exit status: 0 no check failed (warnings allowed), 1 a check failed, 2 usage, config or snapshot error
"""

_COLLECT_DESCRIPTION = """\
Save what `aksgpu validate` reads of the live cluster into a snapshot folder instead of checking it: nodes.json,
daemonsets.json, pods.json, smi/<node>.txt (the SMI command run in each GPU node's device plugin pod; why not in
smi/<node>.error), and for `aksgpu audit` namespaces.json, resourcequotas.json, networkpolicies.json and meta.json
(the time, the kubeconfig context, the API server). Files are written beside and renamed into place.

  aksgpu validate collect --stack prod --out snap/
  aksgpu validate --stack prod --snapshot snap/         then check it offline
  aksgpu audit --snapshot snap/                         or audit it

No stack? `aksgpu audit collect --out DIR` saves the same folder from any cluster.

exit status: 0 written, 2 usage, config or cluster-access error
"""

# The bounds of validation.execTimeoutSeconds and validation.concurrency in the stack config.
MAX_TIMEOUT_S = 600
MAX_CONCURRENCY = 256
_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow"}
_CELL = {"pass": "pass", "fail": "FAIL", "warn": "warn"}


class _UsageError(Exception):
    """A command line, snapshot or cluster-access problem (nothing could be checked): stderr, exit status 2."""


def register(subparsers: Any) -> None:
    """Add ``validate`` and ``validate collect`` to the ``aksgpu`` command line."""
    parser = subparsers.add_parser(
        "validate",
        help=COMMANDS["validate"],
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Not required of argparse here: `validate collect --stack NAME` names it after the subcommand (run() asks for it).
    add_stack_arguments(parser, required=False)
    parser.add_argument(
        "--sections-file",
        type=Path,
        metavar="FILE",
        help="read the stack's in-cluster sections as the stack rendered them for its diagnostic schedule (the "
        "CronJob's ConfigMap) instead of a stack file",
    )
    _add_live_arguments(parser)
    parser.add_argument("--snapshot", type=Path, metavar="DIR", help="check this saved snapshot instead of a live cluster")
    parser.add_argument("--json", action="store_true", help='print {"passed": ..., "checks": [...]} on stdout, nothing else')
    parser.add_argument("--verbose", "-v", action="store_true", help="list every result's message, passes included")
    _add_deep_arguments(parser)
    tables.add_wide_argument(parser)
    # Hidden: `validate --out DIR` gets told it is collect's, rather than "unrecognized arguments".
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.set_defaults(handler=run, action=None)
    actions = parser.add_subparsers(dest="validate_action", metavar="collect", title="subcommand")
    collect = actions.add_parser(
        "collect",
        help="save a snapshot of what the checks (and `aksgpu audit`) read, instead of checking",
        description=_COLLECT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="aksgpu validate collect [-h] --stack NAME --out DIR [--config-file FILE] [--project-dir DIR]\n"
        "                               [--kubeconfig FILE] [--context NAME] [--concurrency N] [--timeout S]",
    )
    # Both required, checked by run() (`validate --stack prod collect --out d` names the stack before the subcommand).
    add_stack_arguments(collect, required=False)
    collect.add_argument("--out", type=Path, metavar="DIR", help="the folder to write the snapshot to (required)")
    _add_live_arguments(collect)
    # Hidden: what only checking takes, so that collect says why instead of "unrecognized arguments".
    collect.add_argument("--snapshot", type=Path, help=argparse.SUPPRESS)
    collect.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    collect.add_argument("--verbose", "-v", action="store_true", help=argparse.SUPPRESS)
    # A flag not given after `collect` keeps what was given before it.
    for action in collect._actions:
        if action.dest != "help":
            action.default = argparse.SUPPRESS
    collect.set_defaults(handler=run, action="collect")


def _add_deep_arguments(parser: argparse.ArgumentParser) -> None:
    deep = parser.add_argument_group("vendor diagnostics (docs/validation.md, Active diagnostics)")
    deep.add_argument(
        "--deep",
        action="store_true",
        help="run the vendors' diagnostics on every GPU node instead: dcgmi diag, a CUDA context on every GPU, NCCL "
        "all_reduce_perf (a pod per node holding all its GPUs); with --snapshot, grade diag/<node>/<tool>.txt",
    )
    deep.add_argument("--level", type=int, choices=(1, 2, 3), help="the dcgmi diag level (default 1; 2 or 3 on the schedule)")
    deep.add_argument("--node", action="append", metavar="NAME", help="diagnose this GPU node only (repeatable)")
    deep.add_argument(
        "--quarantine",
        action="store_true",
        help="act as the diagnostic schedule does: taint and cordon a failing node, return a node it quarantined "
        "once it passes (live only)",
    )
    deep.add_argument(
        "--in-cluster",
        action="store_true",
        help="call the API server as this pod's ServiceAccount (its mounted token), not through a kubeconfig: how the "
        "diagnostic schedule's CronJob runs",
    )


def _add_live_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="nodes probed at once (default: the stack's validation.concurrency)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="S",
        help="seconds allowed per SMI exec (default: the stack's validation.execTimeoutSeconds)",
    )


def run(args: argparse.Namespace) -> int:
    tables.apply_wide(args)
    try:
        _check_usage(args)
        if args.sections_file is not None:
            # The diagnostic schedule's CronJob: the sections its stack rendered, no stack file.
            model = load_rendered_sections(args.sections_file)
        else:
            loaded = load_stack(args)
            report_warnings(loaded)
            model = loaded.validated.model
    except _UsageError as error:
        err.print(f"[bold red]aksgpu validate[/]: {safe(str(error))}")
        return EXIT_USAGE
    except ConfigError as error:
        return report_config_error(error)
    if args.action != "collect" and args.deep:
        return run_deep(args, model)
    targets = plugin_targets(model)
    try:
        if args.action == "collect":
            return _collect(args, model, targets)
        collect = f"aksgpu validate collect --stack {args.stack} --out {{out}}" if args.stack else None
        snapshot = read_snapshot(args.snapshot, collect=collect) if args.snapshot is not None else _probe(args, model, targets)
    except (_UsageError, SnapshotError) as error:
        err.print(f"[bold red]aksgpu validate[/]: {safe(str(error))}")
        return EXIT_USAGE
    results = run_checks(model, targets, snapshot)
    if args.json:
        sys.stdout.write(json.dumps(report_dict(results), indent=2) + "\n")
    else:
        print_results(model, results, verbose=args.verbose, source=str(args.snapshot) if args.snapshot else None)
    return EXIT_OK if passed(results) else EXIT_FAILED


def _check_usage(args: argparse.Namespace) -> None:
    if args.stack is None:
        raise _UsageError("--stack NAME is required: the stack whose GPU pools to check (stacks/Pulumi.<NAME>.yaml)")
    if args.action == "collect":
        if args.out is None:
            raise _UsageError("collect needs --out DIR, the folder to write the snapshot to")
        if args.snapshot is not None:
            raise _UsageError("collect reads the live cluster; --snapshot is for checking a saved one")
        if args.json or args.verbose:
            raise _UsageError("--json and --verbose print check results; collect runs no checks")
        return
    if args.out is not None:
        raise _UsageError("--out is for `aksgpu validate collect`; to check a saved snapshot use --snapshot DIR")
    deep_only = [flag for flag in ("level", "node", "quarantine", "in_cluster") if getattr(args, flag, None)]
    if deep_only and not args.deep:
        flags = ", ".join("--" + flag.replace("_", "-") for flag in deep_only)
        raise _UsageError(f"{flags}: for the vendor diagnostics; add --deep")
    if args.in_cluster:
        elsewhere = [flag for flag in ("kubeconfig", "context", "snapshot") if getattr(args, flag) is not None]
        if elsewhere:
            flags = ", ".join(f"--{flag}" for flag in elsewhere)
            raise _UsageError(f"{flags}: --in-cluster calls the API server as the pod's ServiceAccount; give one or the other")
    if args.sections_file is not None and args.config_file is not None:
        raise _UsageError("--sections-file and --config-file: give the stack's rendered sections or a stack file, not both")
    if args.quarantine and args.snapshot is not None:
        raise _UsageError("--quarantine acts on a live cluster's nodes; --snapshot reads saved files")
    if args.snapshot is not None:
        live_only = [flag for flag in ("kubeconfig", "context", "concurrency", "timeout") if getattr(args, flag) is not None]
        if live_only:
            flags = ", ".join(f"--{flag}" for flag in live_only)
            raise _UsageError(f"{flags}: for a live cluster; --snapshot checks saved files and reads no cluster")


def _collect(args: argparse.Namespace, model: PlatformModel, targets: dict[str, PluginTarget]) -> int:
    # Everything `aksgpu audit` reads too (all GPU nodes and the pods on them, namespaces, quotas, network
    # policies, meta.json), so one snapshot serves both.
    snapshot = _probe(args, model, targets, full=True)
    try:
        written = write_snapshot(snapshot, args.out)
    except OSError as error:
        raise _UsageError(f"cannot write the snapshot to {args.out}: {error.strerror or error}") from None
    pools = {pool.name for pool in model.pools}
    gpu_nodes = [node for node in snapshot.nodes if ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL) in pools]
    out.print(
        f"wrote {len(written)} file(s) to {safe(str(args.out))}: {len(snapshot.nodes)} node(s), {len(gpu_nodes)} of them in "
        f"this stack's GPU pools; {len(snapshot.smi)} SMI output(s), {len(snapshot.exec_errors)} exec error(s)"
    )
    out.print(f"check it with: aksgpu validate --stack {safe(args.stack)} --snapshot {safe(str(args.out))}")
    return EXIT_OK


def _probe(
    args: argparse.Namespace, model: PlatformModel, targets: dict[str, PluginTarget], *, full: bool = False
) -> ClusterSnapshot:
    """Read the live cluster with a progress bar on stderr (stdout stays clean for --json)."""
    try:
        # Imported here: the kubernetes client is only needed on the live path.
        from aks_gpu.cluster.probe import ProbeError, collect_snapshot
    except ImportError as error:
        raise _UsageError(f"the live probe is not available ({error}); check a saved snapshot with --snapshot DIR") from None
    settings = model.config.validation
    columns = (TextColumn("probing GPU nodes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("probe", total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            return collect_snapshot(
                model,
                targets,
                kubeconfig=args.kubeconfig,
                context=args.context,
                concurrency=args.concurrency or settings.concurrency,
                timeout_s=args.timeout or float(settings.exec_timeout_seconds),
                retries=settings.retries,
                progress=advance,
                full=full,
            )
        except ProbeError as error:
            # No cluster could be read at all (kubeconfig, network, RBAC): nothing was checked.
            raise _UsageError(str(error)) from None


# ---------------------------------------------------------------- rendering


def _cell(result: CheckResult | None) -> str:
    if result is None:
        return ""
    return f"[{_STYLE[result.status]}]{_CELL[result.status]}[/]"


# The list's fields under each pool and node: its checks by status, the failed first.
_LISTED = ("fail", "warn", "pass")


def print_results(model: PlatformModel, results: Sequence[CheckResult], *, verbose: bool, source: str | None) -> None:
    """One row per pool (its pool-wide checks) and per GPU node, one column per check (a table where every node name
    and check id fits whole, else a list: each pool and node with its checks by status), then the results' messages
    and the counts."""
    rows: dict[tuple[str, str | None], dict[str, CheckResult]] = {}
    for result in results:
        rows.setdefault((result.pool, result.node), {})[result.id] = result
    cells: list[tuple[str, ...]] = []
    entries: list[tuple[str, ...]] = []
    for (pool, node), row in rows.items():
        where = safe(node) if node is not None else "[dim](pool)[/]"
        cells.append((f"[bold]{safe(pool)}[/]", where, *(_cell(row.get(check)) for check in CHECK_IDS)))
        by_status = [
            ", ".join(check for check in CHECK_IDS if check in row and row[check].status == wanted) for wanted in _LISTED
        ]
        entries.append((safe(pool), where, *by_status))
    title = f"GPU pools of {safe(model.cluster.name)}" if model.cluster else "GPU pools"
    if tables.print_table(
        out,
        title,
        ("pool", "node", *CHECK_IDS),
        cells,
        keep=("pool", "node", *CHECK_IDS),
        center=CHECK_IDS,
        lead=2,
        missing="[dim]-[/]",
        group=True,
        listed=(("pool", "node", *_LISTED), entries),
    ):
        out.print(f"[dim]{tables.list_note()}[/]")
    shown = [result for result in results if verbose or result.status != "pass"]
    if shown:
        out.print()
    for result in shown:
        where = f"{result.pool}/{result.node}" if result.node is not None else f"{result.pool} (pool)"
        out.print(f"[{_STYLE[result.status]}]{result.status:<4}[/] {safe(where)} [bold]{result.id}[/]: {safe(result.message)}")
    out.print()
    for pool, counts in counts_by_pool(results).items():
        out.print(f"{safe(pool)}: {counts['pass']} pass, {counts['fail']} fail, {counts['warn']} warn")
    failed = sum(1 for result in results if result.status == "fail")
    origin = f" (snapshot {safe(source)})" if source else ""
    unchecked = sum(1 for result in results if result.status == "warn" and result.message.startswith("not checked"))
    also = f"; {unchecked} check(s) not checked" if unchecked else ""
    if failed:
        out.print(f"[bold red]validation failed[/]: {failed} check(s) failed{also}{origin}")
    else:
        out.print(f"[bold green]validation passed[/]: nothing failed{also}{origin}")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_CONCURRENCY}, not {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    # The same bound as validation.execTimeoutSeconds; inf or 1e308 would overflow the socket timeout.
    if not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most {MAX_TIMEOUT_S}, not {text}")
    return value
