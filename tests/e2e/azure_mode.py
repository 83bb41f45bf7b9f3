"""The program in Azure mode under the real Pulumi CLI, through the azure-native stand-in (tests/e2e/azure_stand_in.py):
the normal program path (``aks_gpu.program.run_platform``, the stack's own config, no ``cluster.kubeconfig``) as the
Automation API's inline program, with its state, PULUMI_HOME and passphrase in a folder of the test's own. With a local
kwok cluster (``with_cluster``), the cluster's credentials point at it, so an ``up`` deploys the in-cluster layer
there and later previews diff the Kubernetes objects against a real API server."""

from __future__ import annotations

import contextlib
import copy
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aks_gpu.config.loader import load_stack_file
from aks_gpu.local.control_plane import LocalPaths
from aks_gpu.local.engine import Local, PulumiRun, end_processes, environment, local_stack_config, pulumi_processes
from aks_gpu.program import run_platform
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR
from tests.e2e import azure_stand_in
from tests.e2e.conftest import TOOLS

# What the local cluster cannot run, left out of the Azure-mode config as `aksgpu local up` leaves it out
# (local_stack_config): a GPU check on simulated nodes, the smoke Job's completion, a chart registry out of reach.
LEFT_OUT = {"NVSentinel (remediation)": "no network to its chart registry in the e2e tier"}


def shipped_config(stack: str) -> dict[str, Any]:
    """A shipped stack's config for Azure mode: the stack file, less what a simulated cluster cannot run."""
    raw = load_stack_file(PROJECT_DIR / "stacks" / f"Pulumi.{stack}.yaml")
    config = local_stack_config(raw, Path("/unused"), LEFT_OUT)
    cluster = dict(config["aks-gpu:cluster"])
    del cluster["kubeconfig"]  # Azure mode: the program creates the cluster
    config["aks-gpu:cluster"] = cluster
    return config


# The engine's step ops of a replacement (create-replacement, delete-replaced, replace, and their order).
REPLACE_OPS = frozenset({"replace", "create-replacement", "delete-replaced"})


@dataclass
class Preview:
    # URN -> the engine's step ops for it, in the order the engine reported them.
    steps: dict[str, list[str]] = field(default_factory=dict)
    # URN -> the input paths the engine reports changed (its detailed diff).
    diffs: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None

    def ops(self) -> dict[str, str]:
        """URN -> what the engine does to it, for every resource it changes: create, update, delete or replace."""
        found = {}
        for urn, ops in self.steps.items():
            if REPLACE_OPS & set(ops):
                found[urn] = "replace"
            elif ops != ["same"]:
                found[urn] = ops[-1]
        return found

    def delete_first(self, urn: str) -> bool:
        """Whether the engine deletes the old resource before it creates the replacement."""
        ops = self.steps[urn]
        return "delete-replaced" in ops and ops.index("delete-replaced") < ops.index("create-replacement")


@dataclass
class AzureStack:
    """One stack of the program in Azure mode, in ``root``."""

    root: Path
    stack: str
    config: dict[str, Any]
    cluster: Local | None = None

    @property
    def paths(self) -> LocalPaths:
        return LocalPaths(self.root, self.stack)

    def _run(self, config: dict[str, Any]) -> PulumiRun:
        return PulumiRun(self.paths, TOOLS, config, run_platform)

    @contextlib.contextmanager
    def _stack(self, config: dict[str, Any]) -> Iterator[Any]:
        pulumi_home = self.paths.pulumi_home
        if not (pulumi_home / "plugins" / f"resource-azure-native-v{azure_stand_in.PLUGIN_VERSION}").is_dir():
            pulumi_home.mkdir(parents=True, exist_ok=True)
            azure_stand_in.install(TOOLS / "pulumi", pulumi_home, self.root, {"PATH": str(TOOLS)})
        env: dict[str, str] = {}
        if self.cluster is not None:
            env[azure_stand_in.KUBECONFIG_ENV] = str(self.root / "exec-kubeconfig.yaml")
        with environment(env), self._run(config).stack() as stack:
            yield stack

    def up(self, config: dict[str, Any] | None = None) -> dict[str, int]:
        with self._stack(config or self.config) as stack:
            result = stack.up(color="never")
        return {op: count for op, count in (result.summary.resource_changes or {}).items() if op != "same"}

    def preview(self, config: dict[str, Any] | None = None) -> Preview:
        with self._stack(config or self.config) as stack:
            return preview_of(stack)

    def export(self, path: Path) -> Path:
        """``pulumi stack export`` of the deployed stack, written to ``path``."""
        with self._stack(self.config) as stack:
            return export_of(stack, path)

    def close(self) -> None:
        end_processes(pulumi_processes(self.paths.pulumi_home))
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.delete()


def preview_of(stack: Any) -> Preview:
    """A preview of an Automation API stack, step by step as the engine reports them."""
    from pulumi.automation.errors import CommandError

    found = Preview()

    def on_event(event: Any) -> None:
        pre = event.resource_pre_event
        if pre is not None and pre.metadata.type != "pulumi:pulumi:Stack":
            found.steps.setdefault(pre.metadata.urn, []).append(str(pre.metadata.op.value))
            detailed = pre.metadata.detailed_diff or {}
            found.diffs.setdefault(pre.metadata.urn, sorted(detailed) or list(pre.metadata.diffs or []))

    try:
        stack.preview(color="never", on_event=on_event)
    except CommandError as exc:
        found.error = str(exc)
    return found


def export_of(stack: Any, path: Path) -> Path:
    """``pulumi stack export --file PATH`` of an Automation API stack, by the CLI itself (the Automation API's
    export_stack leaves the export's ``features`` out). Called inside ``PulumiRun.stack()``, whose engine variables
    (backend, passphrase, PULUMI_HOME) are set then."""
    subprocess.run(
        [str(TOOLS / "pulumi"), "stack", "export", "--stack", stack.name, "--file", str(path)],
        cwd=stack.workspace.work_dir,
        capture_output=True,
        check=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return path


def with_cluster(root: Path, stack: str, config: dict[str, Any]) -> AzureStack:
    """An Azure-mode stack whose cluster credentials reach a local kwok cluster started here (its simulated nodes and
    stand-in CRDs as `aksgpu local up` makes them)."""
    from aks_gpu.local.crds import stand_in_crds, stand_in_namespaces
    from aks_gpu.local.nodes import node_manifests

    azure = AzureStack(root, stack, config)
    local = Local(LocalPaths(root, f"{stack}-kwok"), TOOLS)
    azure.cluster = local
    try:
        local.start(None, lambda _: None)
        validated = validate_stack(config, stack)
        local.apply([*stand_in_crds(), *stand_in_namespaces(validated.config)])
        local.apply(node_manifests(validated.config, validated.model, 1))
        azure_stand_in.exec_kubeconfig(local.paths.kubeconfig, root)
    except BaseException:
        azure.close()
        raise
    return azure


def changed(config: dict[str, Any], key: str, edit: Any) -> dict[str, Any]:
    """A deep copy of ``config`` with ``edit`` (a function of the old value) applied to the value at ``key``."""
    result = copy.deepcopy(config)
    result[key] = edit(result.get(key))
    return result
