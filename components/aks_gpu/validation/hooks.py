"""Post-deploy validation inside ``pulumi up``: a resource hook on the device plugin resources.

``validation_hook`` builds a ``pulumi.ResourceHook`` that, once a device plugin DaemonSet (or GPU Operator
Release) has been created or updated, reads the cluster with the live probe and runs the same checks as
``aksgpu validate``. With ``validation.onDeploy: fail`` a failed check fails the deployment with the report
as its error; with ``warn`` the report is a warning; ``off`` builds no hook at all. Hooks do not run during
``pulumi preview`` (``ResourceHookOptions.on_dry_run`` stays False): there is no cluster to read then.
https://www.pulumi.com/docs/iac/concepts/options/hooks/

Why after the plugin resource: pulumi-kubernetes waits for a DaemonSet to roll out (and for a Helm
Release's resources to be ready) before it reports the resource created, so by the time an ``after_create``
or ``after_update`` hook runs, the plugin pods have had their chance to start.
https://github.com/pulumi/pulumi-kubernetes/pull/2953

The kubeconfig: the hook gets only the resource's URN, name and inputs/outputs, not the cluster's
credentials, and an ``Output`` cannot be read synchronously. So ``KubeconfigHolder`` registers an
``Output.apply`` at program time that keeps the plain text when the secret resolves. The Kubernetes provider
that creates the plugin resource needs that same kubeconfig first, so by the time the hook runs it has
resolved; should the apply not have run yet, the hook awaits it. The text lives only in this process's
memory and never enters the report.

The hook function is asynchronous and runs the (blocking) probe on a worker thread, so the Pulumi program's
event loop keeps serving other resources while the GPU nodes are probed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import pulumi

from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.internal_error import internal_error_message
from aks_gpu.naming import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import PluginTarget
from aks_gpu.validation.checks import CheckResult, run_checks
from aks_gpu.validation.deep import NodeResult, diagnose_live
from aks_gpu.validation.diagnostics import Level
from aks_gpu.validation.report import passed

DeployMode = Literal["fail", "warn", "off"]

# The checks that read a node's SMI output: on a simulated node with none (a kwok node, `aksgpu local`: no GPU to run
# nvidia-smi on) the hook says "not checked: simulated node" instead of what they say of a GPU node whose exec failed.
SMI_CHECKS = frozenset({"smi-error", "driver-version", "gpu-count", "mig-mode", "gpu-health"})
# A deployment error is read in a terminal: list this many problems, then count the rest.
MAX_FAILURES_SHOWN = 20
MAX_WARNINGS_SHOWN = 10


class Diagnose(Protocol):
    """What ``run_deploy_validation`` runs the vendor diagnostics with (``validation.diagnosticsOnDeploy``): the live
    run of ``aks_gpu.validation.deep`` (the default) or a test's fake. It raises ``ValueError`` when the cluster cannot
    be read."""

    def __call__(
        self, model: PlatformModel, level: Level, wanted: Sequence[str] | None = None, *, kubeconfig_text: str | None,
        skip: Iterable[str],
    ) -> list[NodeResult]: ...


class Collector(Protocol):
    """What ``run_deploy_validation`` reads the cluster with: the live probe's ``collect_snapshot`` (the
    default) or a test's fake. It may raise ``ProbeError`` when the cluster cannot be read at all."""

    def __call__(
        self,
        model: PlatformModel,
        targets: Mapping[str, PluginTarget],
        *,
        kubeconfig_text: str | None,
        concurrency: int,
        timeout_s: float,
        retries: int,
    ) -> ClusterSnapshot: ...


@dataclass(frozen=True)
class HookOutcome:
    """What a deploy-time validation found. ``passed`` is False when a check failed or the cluster could
    not be read; ``report`` is the text the deployment shows."""

    mode: DeployMode
    pools: tuple[str, ...]
    passed: bool
    report: str
    results: tuple[CheckResult, ...] = ()

    @property
    def warnings(self) -> int:
        return sum(1 for r in self.results if r.status == "warn")


class DeployValidationError(Exception):
    """Raised by the hook in ``fail`` mode; Pulumi fails the step with this message (the report)."""


def scoped(
    model: PlatformModel, targets: Mapping[str, PluginTarget], pools: Iterable[str] | None
) -> tuple[PlatformModel, dict[str, PluginTarget]]:
    """The model and targets narrowed to ``pools`` (all pools when None), so a hook on one pool's plugin
    DaemonSet checks that pool and does not fail on another whose plugin is not deployed yet."""
    if pools is None:
        return model, dict(targets)
    wanted = set(pools)
    unknown = wanted - {p.name for p in model.pools}
    if unknown:
        raise ValueError(f"no such GPU pool: {', '.join(sorted(unknown))}")
    narrowed = replace(model, pools=tuple(p for p in model.pools if p.name in wanted))
    return narrowed, {name: target for name, target in targets.items() if name in wanted}


def simulated_nodes(snapshot: ClusterSnapshot) -> tuple[str, ...]:
    """The simulated nodes (kwok's annotation, which ``aksgpu local`` sets), by name: no container runs there."""
    return tuple(
        sorted(
            str(metadata.get("name"))
            for metadata in ((node.get("metadata") or {}) for node in snapshot.nodes)
            if (metadata.get("annotations") or {}).get(KWOK_NODE_ANNOTATION) == KWOK_NODE_ANNOTATION_VALUE
        )
    )


def simulated_without_output(snapshot: ClusterSnapshot) -> tuple[str, ...]:
    """The simulated nodes (kwok's annotation, which ``aksgpu local`` sets) that gave no SMI output, by name."""
    return tuple(name for name in simulated_nodes(snapshot) if name not in snapshot.smi)


def deploy_report(
    results: Sequence[CheckResult], pools: Sequence[str], stack: str | None = None, simulated: Sequence[str] = ()
) -> str:
    """A plain-text report for a deployment log: one verdict line, per-pool counts, the failures and
    warnings (the first few of each) with pool and node, and where to see everything. ``simulated``: the simulated
    nodes without SMI output, whose SMI checks the caller left out: counted as "not checked"."""
    ok = passed(results)
    tally = Counter(r.status for r in results)
    nodes = {r.node for r in results if r.node}
    verdict = "passed" if ok else "FAILED"
    lines = [
        f"aks-gpu post-deploy validation {verdict}: {tally['fail']} failed, {tally['warn']} warnings, "
        f"{tally['pass']} passed ({len(pools)} pool(s), {len(nodes)} GPU node(s))"
        + (f"; {len(simulated)} GPU node(s) not checked: simulated node" if simulated else "")
    ]
    for pool in pools:
        counts = Counter(r.status for r in results if r.pool == pool)
        lines.append(f"  pool {pool}: {counts['fail']} failed, {counts['warn']} warnings, {counts['pass']} passed")
    for status, label, limit in (("fail", "FAIL", MAX_FAILURES_SHOWN), ("warn", "warn", MAX_WARNINGS_SHOWN)):
        found = [r for r in results if r.status == status]
        for result in found[:limit]:
            where = f"{result.pool}/{result.node}" if result.node else result.pool
            lines.append(f"  {label} {result.id} {where}: {result.message}")
        if len(found) > limit:
            lines.append(f"  ... and {len(found) - limit} more ({label})")
    if not ok or tally["warn"]:
        lines.append(f"Every result, with the checks' advice: `aksgpu validate --stack {stack or '<stack>'}`")
    return "\n".join(lines)


def run_deploy_validation(
    model: PlatformModel,
    targets: Mapping[str, PluginTarget],
    kubeconfig_text: str | None,
    mode: DeployMode,
    collect: Collector | None = None,
    pools: Iterable[str] | None = None,
    stack: str | None = None,
    diagnose: Diagnose | None = None,
) -> HookOutcome:
    """Probe the cluster and run the checks (for ``pools``, default all), then, with ``validation.diagnosticsOnDeploy``,
    the vendor diagnostics at level 1 on their GPU nodes (``diagnose``, default the live run); never raises for
    what it finds.

    Blocking (it waits for the probe); the hook runs it on a worker thread.
    """
    scope_model, scope_targets = scoped(model, targets, pools)
    names = tuple(p.name for p in scope_model.pools)
    if mode == "off":
        return HookOutcome(mode, names, True, "validation.onDeploy is off: not run")
    if kubeconfig_text is None:
        return HookOutcome(
            mode,
            names,
            False,
            "aks-gpu post-deploy validation could not run: the cluster's kubeconfig had not resolved when the hook ran",
        )
    # Imported when a validation runs, not when the program loads this module: the kubernetes client's
    # import costs about a second that `pulumi preview` and `aksgpu plan` should not pay.
    from aks_gpu.cluster.probe import ProbeError, collect_snapshot

    settings = model.config.validation
    try:
        snapshot = (collect or collect_snapshot)(
            scope_model,
            scope_targets,
            kubeconfig_text=kubeconfig_text,
            concurrency=settings.concurrency,
            timeout_s=float(settings.exec_timeout_seconds),
            retries=settings.retries,
        )
    except ProbeError as error:
        return HookOutcome(mode, names, False, f"aks-gpu post-deploy validation could not read the cluster: {error}")
    except Exception as error:  # noqa: BLE001 - a bug must fail (or warn) this step with one line, not a traceback
        # The exception's own text is left out: it may quote the kubeconfig it was handed.
        return HookOutcome(mode, names, False, f"aks-gpu post-deploy validation could not run: {internal_error_message(error)}")
    simulated = simulated_without_output(snapshot)
    results = tuple(
        r for r in run_checks(scope_model, scope_targets, snapshot)
        if not (r.node in simulated and r.id in SMI_CHECKS and r.status != "pass")
    )
    report = deploy_report(results, names, stack, simulated)
    if not settings.diagnostics_on_deploy:
        return HookOutcome(mode, names, passed(results), report, results)
    proven, lines = _deploy_diagnostics(scope_model, kubeconfig_text, simulated_nodes(snapshot), diagnose, stack)
    return HookOutcome(mode, names, passed(results) and proven, "\n".join([report, *lines]), results)


def _deploy_diagnostics(
    model: PlatformModel, kubeconfig_text: str, simulated: Sequence[str], diagnose: Diagnose | None, stack: str | None
) -> tuple[bool, list[str]]:
    """Level 1 of the vendor diagnostics on the GPU nodes of ``model``'s pools (simulated nodes left out: nothing
    runs on a kwok node): whether every node was proven healthy, and the report's lines."""
    try:
        results = (diagnose or diagnose_live)(model, 1, None, kubeconfig_text=kubeconfig_text, skip=simulated)
    except ValueError as error:  # the cluster could not be read (its message is redacted, one line)
        return False, [f"vendor diagnostics could not run: {error}"]
    except Exception as error:  # noqa: BLE001 - the step fails (or warns) with one line, never a traceback
        return False, [f"vendor diagnostics could not run: {internal_error_message(error)}"]
    proven = [result for result in results if result.verdict.passed]
    run = " and ".join(
        tools
        for vendor, tools in (("nvidia", "dcgmi diag level 1, CUDA context, NCCL all-reduce"), ("amd", "amd-smi RAS, RVS"))
        if any(pool.vendor == vendor for pool in model.pools)
    )
    lines = [
        f"vendor diagnostics ({run}): {len(proven)} of {len(results)} GPU node(s) healthy"
        + (f"; {len(simulated)} simulated node(s) not run" if simulated else "")
    ]
    failed = [result for result in results if not result.verdict.passed]
    for result in failed[:MAX_FAILURES_SHOWN]:
        lines.append(f"  FAIL gpu-diagnostic {result.pool}/{result.node}: {result.verdict}")
    if len(failed) > MAX_FAILURES_SHOWN:
        lines.append(f"  ... and {len(failed) - MAX_FAILURES_SHOWN} more (FAIL)")
    if failed:
        lines.append(f"Each tool's verdict: `aksgpu validate --stack {stack or '<stack>'} --deep`")
    return not failed, lines


def report_outcome(outcome: HookOutcome, resource: str = "") -> None:
    """Act on an outcome as the stack's ``validation.onDeploy`` says: fail the step, warn, or note a pass."""
    prefix = f"[{resource}] " if resource else ""
    if not outcome.passed and outcome.mode == "fail":
        raise DeployValidationError(prefix + outcome.report)
    if not outcome.passed or outcome.warnings:
        pulumi.log.warn(prefix + outcome.report)
    else:
        pulumi.log.info(prefix + outcome.report)


class KubeconfigHolder:
    """The plain text of a (secret) kubeconfig ``Output``, kept when it resolves, for code that runs outside
    the Output graph. Create it while the program runs (it registers an ``apply``)."""

    def __init__(self, kubeconfig: pulumi.Output[str]) -> None:
        self._text: str | None = None
        self._stored: pulumi.Output[None] = kubeconfig.apply(self._store)

    def _store(self, text: str) -> None:
        self._text = text

    @property
    def text(self) -> str | None:
        return self._text

    async def resolved(self) -> str | None:
        """The text, waiting for the apply when it has not run yet (None when the value is unknown)."""
        if self._text is None:
            await self._stored.future()
        return self._text


def hook_function(
    model: PlatformModel,
    targets: Mapping[str, PluginTarget],
    kubeconfig: KubeconfigHolder,
    mode: DeployMode,
    collect: Collector | None = None,
    pools: Iterable[str] | None = None,
) -> Callable[[pulumi.ResourceHookArgs], Awaitable[None]]:
    """The function a ``ResourceHook`` calls: exposed so tests can call it with a ``ResourceHookArgs``."""
    scope = None if pools is None else tuple(pools)
    stack = pulumi.get_stack()

    async def validate_gpu_pools(args: pulumi.ResourceHookArgs) -> None:
        text = await kubeconfig.resolved()
        outcome = await asyncio.to_thread(run_deploy_validation, model, targets, text, mode, collect, scope, stack)
        report_outcome(outcome, args.name)

    return validate_gpu_pools


def validation_hook(
    name: str,
    model: PlatformModel,
    targets: Mapping[str, PluginTarget],
    kubeconfig: pulumi.Output[str],
    mode: DeployMode,
    pools: Iterable[str] | None = None,
    collect: Collector | None = None,
) -> pulumi.ResourceHook | None:
    """A hook named ``{name}-validate`` that validates ``pools`` (default: every pool) after the resource it
    is bound to is created or updated; None when ``mode`` is ``off``. Bind it with
    ``ResourceOptions(hooks=ResourceHookBinding(after_create=[hook], after_update=[hook]))``."""
    if mode == "off":
        return None
    function = hook_function(model, targets, KubeconfigHolder(kubeconfig), mode, collect, pools)
    return pulumi.ResourceHook(f"{name}-validate", function)


HookFactory = Callable[[Iterable[str]], pulumi.ResourceHookBinding | None]


def validation_hooks(
    name: str,
    model: PlatformModel,
    targets: Mapping[str, PluginTarget],
    kubeconfig: pulumi.Output[str],
    mode: DeployMode,
    collect: Collector | None = None,
) -> HookFactory:
    """A factory the device plugin component calls per resource with the pools that resource serves: it
    returns the binding for a hook validating those pools (one hook per distinct set of pools, named
    ``{name}-validate-<pools>``), or None when ``mode`` is ``off`` or no pool is given. One kubeconfig
    holder serves them all."""
    if mode == "off":
        return lambda pools: None
    holder = KubeconfigHolder(kubeconfig)
    made: dict[tuple[str, ...], pulumi.ResourceHookBinding | None] = {}

    def binding(pools: Iterable[str]) -> pulumi.ResourceHookBinding | None:
        key = tuple(sorted(set(pools)))
        if not key:
            return None
        if key not in made:
            function = hook_function(model, targets, holder, mode, collect, key)
            made[key] = hook_binding(pulumi.ResourceHook(f"{name}-validate-{'-'.join(key)}", function))
        return made[key]

    return binding


def pools_validated_by(manifest: Mapping[str, Any], targets: Mapping[str, PluginTarget]) -> tuple[str, ...]:
    """The pools a hook on this DaemonSet validates: those whose SMI command runs in its pods (its selector
    is their target's ``pod_labels``, in their namespace). Empty for any other DaemonSet (a labeller, the AMD
    plugin when an amd-smi probe DaemonSet is what the validation execs into)."""
    if manifest.get("kind") != "DaemonSet":
        return ()
    metadata = manifest.get("metadata") or {}
    selector = ((manifest.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return tuple(
        pool
        for pool, target in targets.items()
        if target.namespace == metadata.get("namespace") and dict(target.pod_labels) == dict(selector)
    )


def pools_validated_by_release(
    targets: Mapping[str, PluginTarget], vendor: str, daemonsets: Iterable[Mapping[str, Any]]
) -> tuple[str, ...]:
    """The pools a hook on a GPU Operator Release of ``vendor`` validates: its pools whose exec'd pods the
    Release itself creates, i.e. that no DaemonSet of ours (``daemonsets``) serves."""
    ours = {pool for manifest in daemonsets for pool in pools_validated_by(manifest, targets)}
    return tuple(
        pool for pool, target in targets.items() if target.vendor == vendor and target.mode == "gpu-operator" and pool not in ours
    )


def hook_binding(hook: pulumi.ResourceHook | None) -> pulumi.ResourceHookBinding | None:
    """The binding that runs ``hook`` after create and after update (None for no hook)."""
    if hook is None:
        return None
    return pulumi.ResourceHookBinding(after_create=[hook], after_update=[hook])
