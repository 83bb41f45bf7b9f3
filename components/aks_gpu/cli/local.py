"""``aksgpu local``: a stack's in-cluster layer on a real Kubernetes control plane on this machine (kwokctl's binary
runtime, simulated nodes) deployed by the real Pulumi CLI (docs/local.md)."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aks_gpu.cli import COMMANDS, tables
from aks_gpu.cli.common import EXIT_OK, EXIT_USAGE, err, escape, out

DEFAULT_NODES_PER_POOL = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "local",
        help=COMMANDS["local"],
        description="Start etcd and a Kubernetes control plane on 127.0.0.1 (TLS, RBAC, AKS's admission plugins) from "
        "the tools `make tools` builds, create simulated nodes from the stack's pools as AKS labels and taints them, "
        "and deploy the stack's in-cluster layer with the real Pulumi CLI into .local/NAME/. No Azure resource is "
        "created. See docs/local.md.",
    )
    commands = parser.add_subparsers(dest="local_command", metavar="COMMAND", required=True)
    up = commands.add_parser(
        "up",
        help="start the local cluster (if needed) and deploy the stack onto it",
        description="Start the stack's local control plane unless it runs, create its simulated nodes, and deploy the "
        "stack's in-cluster layer with the real Pulumi CLI; writes the admin kubeconfig .local/NAME/kubeconfig (0600). "
        "A second up changes nothing. Helm releases whose chart registry is out of reach are left out, and said so.",
    )
    _stack_argument(up)
    up.add_argument(
        "--nodes-per-pool",
        type=_positive,
        default=DEFAULT_NODES_PER_POOL,
        metavar="N",
        help="simulated nodes per pool (default 1)",
    )
    up.add_argument("--port", type=_port, metavar="PORT", help="the API server's port on 127.0.0.1 (default: a free one)")
    up.set_defaults(handler=run_up)
    status = commands.add_parser(
        "status",
        help="the local cluster and its Pulumi stack",
        description="Whether the stack's local cluster runs, its server, Kubernetes version, nodes and GPU nodes, and its "
        "Pulumi stack: the CLI's version, the resources in the state and the changes a fresh pulumi preview finds.",
    )
    _stack_argument(status)
    status.add_argument("--json", action="store_true", help="print one JSON object on stdout, nothing else")
    tables.add_wide_argument(status)
    status.set_defaults(handler=run_status)
    down = commands.add_parser(
        "down",
        help="stop every process `up` started",
        description="Stop every process of the stack's local cluster (etcd, the control plane, kwok) and check its port "
        "is closed; the cluster's data and the Pulumi state stay for the next up unless --purge removes .local/NAME.",
    )
    _stack_argument(down)
    down.add_argument("--purge", action="store_true", help="also remove .local/NAME (cluster data and Pulumi state)")
    down.set_defaults(handler=run_down)


def _stack_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", metavar="NAME", required=True, help="stack name: reads stacks/Pulumi.<NAME>.yaml")
    parser.add_argument("--project-dir", type=Path, metavar="DIR", help="the folder with Pulumi.yaml (default: found from here)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1 or value > 1000:
        raise argparse.ArgumentTypeError("must be between 1 and 1000")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be a TCP port, 1-65535")
    return value


def _project(args: argparse.Namespace) -> Path:
    from aks_gpu.cli.common import project_dir_for

    return project_dir_for(args)


def _fail(exc: Exception) -> int:
    from aks_gpu.local.engine import LocalError

    code = exc.exit_code if isinstance(exc, LocalError) else EXIT_USAGE
    err.print(f"[bold red]aksgpu local[/]: {escape(str(exc))}")
    return code


def say(text: str) -> None:
    """One line of progress, on stderr (stdout is the result)."""
    err.print(escape(text))


def run_up(args: argparse.Namespace) -> int:
    from aks_gpu.cli.common import load_stack
    from aks_gpu.local.control_plane import LocalPaths
    from aks_gpu.local.crds import stand_in_crds, stand_in_namespaces
    from aks_gpu.local.engine import (
        LOCAL_CHANGES,
        Local,
        LocalError,
        PulumiRun,
        change_counts,
        check_kubeconfig,
        check_kubernetes_minor,
        end_processes,
        kube_version,
        local_stack_config,
        pulumi_processes,
        reach_host,
        require_tools,
        start_karpenter,
        start_kueue,
        unreachable_charts,
    )
    from aks_gpu.local.karpenter import nap_pools
    from aks_gpu.local.nodes import node_manifests

    project_dir = _project(args)
    # SIGTERM (a CI runner's cancel, `kill`) is Ctrl-C here: `up` cleans up the same way instead of dying with its
    # Pulumi children left running.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        bin_dir = require_tools(project_dir)
        args.config_file = None
        loaded = load_stack(args)
        check_kubernetes_minor(loaded.validated.config, kube_version(bin_dir))
        paths = LocalPaths(project_dir, args.stack)
        check_kubeconfig(paths.kubeconfig)
        local = Local(paths, bin_dir)
        started = local.start(args.port, say, [workload.name for workload in loaded.validated.config.workloads])
        try:
            config, model = loaded.validated.config, loaded.validated.model
            nodes = node_manifests(config, model, args.nodes_per_pool)
            nap = bool(nap_pools(model))
            # A NAP stack's Karpenter installs the real NodePool CRD: no stand-in of it.
            local.apply([*stand_in_crds(real_node_pools=nap), *stand_in_namespaces(config)])
            local.apply(nodes)
            if config.queueing is not None:
                start_kueue(local, config.queueing, say)
            if nap:
                start_karpenter(local, config, model, say)
            left_out = unreachable_charts(config, reach_host)
            for release, why in left_out.items():
                err.print(f"[yellow]left out[/] the Helm release {escape(release)}: {escape(why)}")
            run = PulumiRun(paths, bin_dir, local_stack_config(loaded.raw, paths.kubeconfig.resolve(), left_out), local_program)
            for change in LOCAL_CHANGES:
                say(f"local stack config: {change}")
            say(f"deploying stack {args.stack} with the Pulumi CLI into {paths.state}")
            with run.stack() as stack:
                result = engine_call(lambda: stack.up(color="never"))
            changes = change_counts(result.summary.resource_changes)
            hook_lines = deploy_hook_lines(result.stdout)
        except KeyboardInterrupt:
            # Ctrl-C (or SIGTERM) during `up`: the Pulumi CLI and its plugin end with it, and what this call started
            # stops (a failed step leaves it running, to look at).
            end_processes(pulumi_processes(paths.pulumi_home))
            if started:
                local._stop_quietly()
            raise
    except LocalError as exc:
        return _fail(exc)
    out.print(
        f"stack {escape(args.stack)}: {len(nodes)} simulated nodes, Pulumi changes: "
        f"{escape(json.dumps(changes) if changes else 'none')}"
    )
    for line in hook_lines:
        out.print(f"post-deploy hook (run by the Pulumi engine): {escape(line)}")
    out.print(f"kubeconfig: {escape(str(paths.kubeconfig))}  (KUBECONFIG={escape(str(paths.kubeconfig))} kubectl get nodes)")
    return EXIT_OK


def deploy_hook_lines(engine_output: str) -> list[str]:
    """The post-deploy validation's verdicts in the Pulumi CLI's output of an update (one per hook that ran; none when
    nothing changed), each line as the hook reported it, without the engine's prefix; the CLI prints a diagnostic
    both as it happens and in its closing summary, so each line is kept once."""
    marker = "aks-gpu post-deploy validation"
    lines = (line[line.index(marker) :].strip() for line in engine_output.splitlines() if marker in line)
    return list(dict.fromkeys(lines))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def status_document(args: argparse.Namespace) -> dict[str, Any]:
    from aks_gpu.local.control_plane import LocalPaths
    from aks_gpu.local.engine import Local, LocalError, PulumiRun, change_counts, karpenter_pid, kueue_pid, require_tools

    project_dir = _project(args)
    bin_dir = require_tools(project_dir)
    paths = LocalPaths(project_dir, args.stack)
    local = Local(paths, bin_dir)
    running = local.exists() and local.answering()
    document: dict[str, Any] = {
        "running": running,
        "server": local.server(),
        "kubernetesVersion": None,
        "nodes": 0,
        "gpuNodes": 0,
        "pulumi": {"cli": None, "stack": args.stack, "resources": 0, "pendingChanges": None},
        # The controllers `local up` runs as processes of this machine: each one's pid, None when not running.
        "kueue": kueue_pid(paths),
        "karpenter": karpenter_pid(paths),
    }
    try:
        version = json.loads(local.kubectl("version", "-o", "json", timeout=10)) if running else {}
        document["pulumi"]["cli"] = _pulumi_version(bin_dir)
    except LocalError:
        version = {}
    document["kubernetesVersion"] = (version.get("serverVersion") or {}).get("gitVersion")
    if running:
        nodes = local.nodes()
        document["nodes"] = len(nodes)
        document["gpuNodes"] = sum(1 for node in nodes if _gpu_node(node))
    if running and paths.state.is_dir():
        stack_file = paths.workspace / f"Pulumi.{args.stack}.yaml"
        import yaml

        stack_config = (
            (yaml.safe_load(stack_file.read_text(encoding="utf-8")) or {}).get("config", {}) if stack_file.is_file() else {}
        )
        run = PulumiRun(paths, bin_dir, stack_config, local_program)
        with run.stack() as stack:
            deployment = stack.export_stack()
            document["pulumi"]["resources"] = len((deployment.deployment or {}).get("resources") or [])
            preview = engine_call(lambda: stack.preview(color="never"))
            document["pulumi"]["pendingChanges"] = sum(change_counts(preview.change_summary).values())
    return document


def engine_call(call: Callable[[], Any]) -> Any:
    """A Pulumi CLI call; its failure is exit 1 with the engine's own error lines, not an internal error."""
    from pulumi.automation.errors import CommandError

    from aks_gpu.local.engine import LocalError

    try:
        return call()
    except CommandError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip().startswith("error:")]
        raise LocalError("pulumi failed:\n" + "\n".join(dict.fromkeys(lines[-8:]) or ["(no error line)"]), 1) from None


def _pulumi_version(bin_dir: Path) -> str | None:
    import subprocess

    try:
        done = subprocess.run([str(bin_dir / "pulumi"), "version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def _gpu_node(node: dict[str, Any]) -> bool:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return any(
        name.startswith(("nvidia.com/", "amd.com/")) and str(value) not in ("0", "") for name, value in allocatable.items()
    )


def run_status(args: argparse.Namespace) -> int:
    from aks_gpu.local.engine import LocalError

    tables.apply_wide(args)
    try:
        document = status_document(args)
    except LocalError as exc:
        return _fail(exc)
    if args.json:
        out.print_json(json.dumps(document))
        return EXIT_OK
    pulumi = document["pulumi"]
    rows = [
        (what, escape(str(value)))
        for what, value in (
            ("running", document["running"]),
            ("server", document["server"]),
            ("Kubernetes", document["kubernetesVersion"]),
            ("nodes (GPU)", f"{document['nodes']} ({document['gpuNodes']})"),
            ("Pulumi CLI", pulumi["cli"]),
            ("resources", pulumi["resources"]),
            ("pending changes", pulumi["pendingChanges"]),
            ("Kueue", _process(document["kueue"])),
            ("Karpenter (kwok provider)", _process(document["karpenter"])),
        )
    ]
    # the list: one entry, the stack, each value on a line of its own under it
    listed = (("stack", *(what for what, _ in rows)), [(escape(args.stack), *(value for _, value in rows))])
    title = f"aksgpu local: {escape(args.stack)}"
    if tables.print_table(out, title, ("what", "value"), rows, keep=("what", "value"), listed=listed):
        out.print(f"[dim]{tables.list_note(json=True)}[/]")
    return EXIT_OK


def _process(pid: int | None) -> str:
    return f"process {pid}" if pid is not None else "not running"


def local_program() -> None:
    """The platform program as `aksgpu local` runs it: each NAP NodePool names Karpenter's kwok node class, which the
    local Karpenter serves, instead of its AKSNodeClass (local/karpenter.py)."""
    from aks_gpu.local.karpenter import kwok_node_class_ref
    from aks_gpu.program import run_platform

    run_platform(kwok_node_class_ref)


def run_down(args: argparse.Namespace) -> int:
    from aks_gpu.local.control_plane import LocalPaths
    from aks_gpu.local.engine import (
        Local,
        LocalError,
        end_processes,
        port_closes,
        pulumi_processes,
        require_tools,
        stop_karpenter,
        stop_kueue,
    )

    project_dir = _project(args)
    paths = LocalPaths(project_dir, args.stack)
    try:
        bin_dir = require_tools(project_dir)
        local = Local(paths, bin_dir)
        server = local.server()
        # A queueing stack's Kueue and a NAP stack's Karpenter first: they watch the API server that stops next.
        if stop_kueue(paths):
            say("stopped the stack's Kueue process")
        if stop_karpenter(paths):
            say("stopped the stack's Karpenter process")
        if args.purge:
            local.delete()
        else:
            local.stop()
        # A killed `aksgpu local` leaves its Pulumi CLI and the Kubernetes provider plugin running: end them too.
        leftover = end_processes(pulumi_processes(paths.pulumi_home))
        if leftover:
            say(f"ended {len(leftover)} Pulumi process(es) a killed run left: {', '.join(map(str, leftover))}")
        if server is not None:
            port = int(server.rsplit(":", 1)[1])
            if not port_closes(port):
                raise LocalError(f"port {port} is still open after stopping the local cluster", 1)
    except LocalError as exc:
        return _fail(exc)
    if args.purge and paths.root.exists():
        shutil.rmtree(paths.root)
    err.print(
        f"stopped the local cluster of stack {escape(args.stack)}"
        + (" and removed .local/" + escape(args.stack) if args.purge else "")
    )
    return EXIT_OK
