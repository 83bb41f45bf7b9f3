"""Post-deploy checks of every GPU pool, over a ``ClusterSnapshot``. Pure: dicts and text in, results out.

The same checks run on a live cluster (the probe collects a snapshot first) and on a saved snapshot, and
they import neither ``pulumi`` nor ``kubernetes``. What a pool should look like comes from the platform
model and the device plugin targets, never re-derived here.

Each check gives one result per GPU node of a pool (or one per pool for the pool-wide ones), with status
``pass``, ``fail`` or ``warn`` and a message that says what was found and what to do about it. Which checks there
are, what each is judged per and when it passes: ``registry.CHECKS`` (a pool that scales from zero and has no
nodes yet gets ``gpu-schedulable`` and ``driver-consistency`` as warnings, "not checked: no nodes yet": nothing of
it was checked, and nothing failed).

A check that cannot be evaluated because something it depends on already failed (no SMI output, an SMI
error) is a ``warn`` that says "not checked" and points at the failing check, so one broken node shows
one failure, not five. ``mig-mode`` is left out for AMD pools: AMD GPUs have no MIG.

One node's output never stops the run: a parser that fails on it (a bug, or input no test foresaw) makes that
node's SMI output "unrecognized" with the reason, and every other node is still checked.

Speed: pods are indexed by node once per plugin target and each node's SMI output is read once for both the
SMI report and its health findings, so the work grows linearly with the number of nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from aks_gpu.cluster.objects import NodeStatus, PluginPods, pod_name, pod_problem
from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.config.problems import clipped
from aks_gpu.gpu.findings import NodeFinding, by_node, gpus_named
from aks_gpu.gpu.health import GpuCondition, HealthReport, read_smi_and_health
from aks_gpu.gpu.smi import SmiError, SmiReport
from aks_gpu.gpu.smi.model import empty_report
from aks_gpu.gpu.versions import parse_version, version_at_least
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.resolved.targets import PluginTarget, smi_command
from aks_gpu.validation.registry import CHECK_IDS as CHECK_IDS
from aks_gpu.validation.registry import CheckId

Status = Literal["pass", "fail", "warn"]
# What a pool at minCount 0 with no node gets: a warning that nothing was checked (never a pass), not a failure.
NOT_CHECKED_NO_NODES = "not checked: no nodes yet"
_NAMES_SHOWN = 3  # node names listed in a pool-wide message before "+N more"


@dataclass(frozen=True)
class CheckResult:
    id: str
    pool: str
    node: str | None  # None for a pool-wide result
    status: Status
    message: str


def run_checks(model: PlatformModel, targets: Mapping[str, PluginTarget], snapshot: ClusterSnapshot) -> list[CheckResult]:
    """Every check for every GPU pool of ``model``, in pool order, pool-wide results before node ones.

    Nodes are found by the ``aks-gpu/pool`` label; nodes of pools the stack does not have are ignored.
    """
    pool_names = {pool.name for pool in model.pools}
    nodes_by_pool: dict[str, list[NodeStatus]] = {name: [] for name in pool_names}
    for item in snapshot.nodes:
        labels = (item.get("metadata") or {}).get("labels") or {}
        pool_name = labels.get(POOL_LABEL)
        if pool_name in nodes_by_pool:
            nodes_by_pool[pool_name].append(NodeStatus.read(item))
    pods = PluginPods(snapshot.pods, targets.values())

    results: list[CheckResult] = []
    for pool in model.pools:
        target = targets.get(pool.name)
        context = _PoolContext(model, pool, target)
        nodes = sorted(nodes_by_pool[pool.name], key=lambda node: node.name)
        states = [
            _node_state(
                node, _best_pod(pods, target, node.name), snapshot.smi.get(node.name), snapshot.exec_errors.get(node.name), pool
            )
            for node in nodes
        ]
        results.append(_daemonset_ready(context, snapshot.daemonsets, states))
        if not states:
            results.append(_no_nodes(context))
        results.append(_driver_consistency(context, states))
        for state in states:
            results.append(_plugin_pod_ready(context, state))
            results.append(_gpu_schedulable(context, state))
            results.append(_smi_error(context, state))
            results.append(_driver_version(context, state))
            results.append(_gpu_count(context, state))
            if pool.vendor == "nvidia":
                results.append(_mig_mode(context, state))
            results.append(_gpu_health(context, state))
    return results


# ---------------------------------------------------------------- what the checks read


def _best_pod(pods: PluginPods, target: PluginTarget | None, node: str) -> _Pod | None:
    found = pods.best(target, node)
    return _Pod.read(found) if found is not None else None


@dataclass(frozen=True)
class _Pod:
    namespace: str
    name: str
    problem: str | None  # why it is not Running and ready; None when it is

    @classmethod
    def read(cls, item: Mapping[str, Any]) -> _Pod:
        metadata = item.get("metadata") or {}
        return cls(namespace=str(metadata.get("namespace") or ""), name=pod_name(item), problem=pod_problem(item))


@dataclass(frozen=True)
class _NodeState:
    node: NodeStatus
    pod: _Pod | None
    report: SmiReport | None  # None: no SMI output was collected
    exec_note: str | None
    health: HealthReport | None = None  # None: no SMI output was collected


@dataclass(frozen=True)
class _PoolContext:
    model: PlatformModel
    pool: ResolvedPool
    target: PluginTarget | None

    @property
    def command(self) -> str:
        return " ".join(self.target.smi_command if self.target else smi_command(self.pool.vendor))

    @property
    def tool(self) -> str:
        return self.target.smi_command[0] if self.target and self.target.smi_command else smi_command(self.pool.vendor)[0]

    @property
    def vm_size(self) -> str:
        return self.pool.vm_size.name if self.pool.vm_size else self.pool.config.vm_size

    @property
    def selector(self) -> str:
        labels = self.target.pod_labels if self.target else {}
        return ",".join(f"{name}={value}" for name, value in sorted(labels.items()))

    def result(self, check: CheckId, node: str | None, status: Status, message: str) -> CheckResult:
        return CheckResult(id=check, pool=self.pool.name, node=node, status=status, message=message)

    def node_image_upgrade(self) -> str:
        cluster = self.model.cluster
        group, name = (cluster.resource_group, cluster.name) if cluster else ("<resource group>", "<cluster>")
        return f"`az aks nodepool upgrade -g {group} --cluster-name {name} -n {self.pool.name} --node-image-only`"

    def driver_owner(self) -> str:
        """Who installs this pool's driver, and so what to change to get another one."""
        if self.pool.vendor == "amd":
            return "AKS installs no AMD driver: the amdgpu driver comes from the AMD GPU Operator (or your node image)"
        if self.pool.gpu_driver == "None" and self.model.config.device_plugin.mode == "gpu-operator":
            return "the pool has gpuDriver None, so the NVIDIA GPU Operator's driver pod installs the driver"
        if self.pool.gpu_driver == "None":
            return "the pool has gpuDriver None: AKS installs no driver, whatever installs it on the nodes must provide it"
        return f"AKS installs the driver with the node image: upgrade it with {self.node_image_upgrade()}"


def _node_state(node: NodeStatus, pod: _Pod | None, text: str | None, note: str | None, pool: ResolvedPool) -> _NodeState:
    """The node's SMI report and health findings, read in one pass; a parser failure stays with this node."""
    if text is None:
        return _NodeState(node=node, pod=pod, report=None, exec_note=note)
    try:
        # The node's own size (its instance-type label) says whether its GPUs are NVLink-connected; the pool's
        # declared size where the node carries none.
        size = node.instance_type or (pool.vm_size.name if pool.vm_size else pool.config.vm_size)
        report, health = read_smi_and_health(text, pool.vendor, vm_size=size)
    except Exception as error:  # noqa: BLE001 - one node's output must not stop the checks of every other node
        reason = f"the {pool.vendor} output parser failed on this node's output ({type(error).__name__}: {error})"[:300]
        failed = replace(empty_report(pool.vendor), error=SmiError("unrecognized", reason))
        return _NodeState(node, pod, failed, note, HealthReport((), (), pool.vendor, reason))
    return _NodeState(node=node, pod=pod, report=report, exec_note=note, health=health)


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" +{len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else "")


def _indices(values: Sequence[int | None]) -> str:
    return ", ".join("?" if value is None else str(value) for value in values)


def _not_checked(context: _PoolContext, check: CheckId, state: _NodeState) -> CheckResult | None:
    """The "cannot tell" result when the SMI output is missing or reports an error; None when it is usable."""
    if state.report is None:
        return context.result(
            check, state.node.name, "warn", f"not checked: no `{context.tool}` output from this node (see smi-error)"
        )
    # A GPU listed twice is read once: the rest of the output is usable, and gpu-count says what was wrong with it.
    if state.report.error is not None and state.report.error.kind != "duplicate_gpu":
        return context.result(check, state.node.name, "warn", f"not checked: `{context.tool}` reports an error (see smi-error)")
    return None


# ---------------------------------------------------------------- device-plugin-ready


def _daemonset_ready(context: _PoolContext, daemonsets: Sequence[Mapping[str, Any]], states: Sequence[_NodeState]) -> CheckResult:
    target = context.target
    if target is None:
        return context.result(
            "device-plugin-ready",
            None,
            "warn",
            "no device plugin is known for this pool, so its DaemonSet and pods were not checked",
        )
    matching = [ds for ds in daemonsets if _runs_target_pods(ds, target)]
    if not matching:
        return context.result(
            "device-plugin-ready",
            None,
            "fail",
            f"no DaemonSet in namespace {target.namespace} runs pods labelled {context.selector}: the device plugin is not "
            f"deployed (run `pulumi up`), or the GPU Operator has not created it yet (`kubectl -n {target.namespace} get pods`)",
        )
    # One DaemonSet may serve several pools: its counts are cluster-wide, so whether this pool is hit is read
    # from this pool's own nodes and their pods.
    affected = [s.node.name for s in states if not s.node.ready or s.pod is None or s.pod.problem is not None]
    unhealthy: list[str] = []
    summaries: list[str] = []
    for ds in sorted(matching, key=lambda item: str(item.get("metadata", {}).get("name"))):
        name = f"{target.namespace}/{ds.get('metadata', {}).get('name')}"
        status = ds.get("status") or {}
        # Zero counts are left out of the JSON the API server returns.
        desired, ready, available = (
            int(status.get(key) or 0) for key in ("desiredNumberScheduled", "numberReady", "numberAvailable")
        )
        summary = f"DaemonSet {name}: {desired} desired, {ready} ready, {available} available"
        summaries.append(summary)
        if not desired == ready == available:
            unhealthy.append(summary)
        elif desired == 0 and states:
            return context.result(
                "device-plugin-ready",
                None,
                "fail",
                f"{summary}: it schedules no pod although the pool has {len(states)} node(s); its nodeSelector, affinity "
                "or tolerations do not match the GPU nodes",
            )
    if unhealthy and affected:
        return context.result(
            "device-plugin-ready",
            None,
            "fail",
            f"{'; '.join(unhealthy)}: {len(affected)} of this pool's {len(states)} node(s) have no ready plugin pod "
            f"({_names(affected)}); see their rows, or `kubectl -n {target.namespace} get pods -l {context.selector} -o wide`",
        )
    if unhealthy:
        return context.result(
            "device-plugin-ready",
            None,
            "warn",
            f"{'; '.join(unhealthy)}: the pods not ready are on other nodes; every node of this pool has a ready plugin pod",
        )
    # Counts that look fine while a node of this pool has no ready pod (a node the DaemonSet does not select,
    # a status not caught up yet) fail on that node's own row.
    return context.result("device-plugin-ready", None, "pass", "; ".join(summaries))


def _runs_target_pods(daemonset: Mapping[str, Any], target: PluginTarget) -> bool:
    metadata = daemonset.get("metadata") or {}
    if metadata.get("namespace") != target.namespace:
        return False
    template_labels = (((daemonset.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
    return all(template_labels.get(name) == value for name, value in target.pod_labels.items())


def _plugin_pod_ready(context: _PoolContext, state: _NodeState) -> CheckResult:
    node = state.node
    if not node.ready:
        return context.result(
            "device-plugin-ready",
            node.name,
            "fail",
            f"node is NotReady: {node.not_ready}; no plugin pod runs on it until the kubelet reports Ready "
            f"(`kubectl describe node {node.name}`; AKS node auto-repair restarts or reimages nodes NotReady for long)",
        )
    target = context.target
    if target is None:
        return context.result("device-plugin-ready", node.name, "warn", "no device plugin is known for this pool: not checked")
    pod = state.pod
    if pod is None:
        return context.result(
            "device-plugin-ready",
            node.name,
            "fail",
            f"no device plugin pod (namespace {target.namespace}, labels {context.selector}) on this node: the DaemonSet "
            "does not select it; compare its nodeSelector, affinity and tolerations with the node's labels and taints",
        )
    if pod.problem is not None:
        return context.result(
            "device-plugin-ready",
            node.name,
            "fail",
            f"device plugin pod {pod.namespace}/{pod.name} is {pod.problem}: "
            f"see `kubectl -n {pod.namespace} describe pod {pod.name}` and its logs",
        )
    return context.result(
        "device-plugin-ready", node.name, "pass", f"device plugin pod {pod.namespace}/{pod.name} is Running and ready"
    )


# ---------------------------------------------------------------- gpu-schedulable


def _no_nodes(context: _PoolContext) -> CheckResult:
    config = context.pool.config
    minimum = config.min_count if config.autoscaling else (config.count or 0)
    if minimum == 0:
        return context.result(
            "gpu-schedulable",
            None,
            "warn",
            f"{NOT_CHECKED_NO_NODES}: the pool scales from zero, so no node has {POOL_LABEL}={context.pool.name} until a"
            " pending GPU pod makes the autoscaler add one; nothing of its GPUs was checked: validate again while one runs",
        )
    return context.result(
        "gpu-schedulable",
        None,
        "fail",
        f"no node has {POOL_LABEL}={context.pool.name}, but the pool keeps at least {minimum}: the nodes failed to "
        "provision (GPU quota, regional capacity, spot eviction) or lack the label; check `az aks nodepool show` "
        f"and `kubectl get nodes -l agentpool={context.pool.name}`",
    )


def _expected_because(context: _PoolContext) -> str:
    pool = context.pool
    gpus = f"{pool.gpus_per_node} GPU(s)" if pool.gpus_per_node is not None else "? GPU(s)"
    if pool.mig_profile is not None:
        strategy = (context.target.mig_strategy if context.target else None) or context.model.mig_strategy
        return f"{gpus} x {pool.mig_instances_per_gpu} MIG {pool.mig_profile} slices, {strategy} strategy"
    if pool.time_slicing_replicas:
        return f"{gpus} x {pool.time_slicing_replicas} time-slicing replicas"
    return f"{gpus} per {context.vm_size}"


def _quantity(raw: object) -> int | None:
    text = str(raw).strip()
    # ASCII digits only: "²".isdigit() is True and int() refuses it; 15 digits is more GPUs than exist.
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 15 else None


def _gpu_schedulable(context: _PoolContext, state: _NodeState) -> CheckResult:
    node, pool = state.node, context.pool
    resource = context.target.resource_name if context.target else pool.resource.name
    expected = context.target.count_per_node if context.target else pool.resource.count_per_node
    if not node.ready:
        return context.result(
            "gpu-schedulable", node.name, "fail", f"node is NotReady: {node.not_ready}; the scheduler places no GPU pod here"
        )
    raw = node.allocatable.get(resource)
    count = _quantity(raw) if raw is not None else 0
    others = sorted(
        f"{name} x {value}"
        for name, value in node.allocatable.items()
        if name != resource and name.startswith(("nvidia.com/", "amd.com/")) and _quantity(value) != 0
    )
    if count is None:
        # A kubelet advertises a whole, non-negative count of an extended resource; "-8" or "7500m" is a node status
        # edited or corrupted, and no scheduling decision can rest on it.
        return context.result(
            "gpu-schedulable",
            node.name,
            "fail",
            f"allocatable {resource} is {clipped(repr(raw), 60)}, not a whole number of GPUs: no kubelet advertises that;"
            " the node's status is corrupt or was edited",
        )
    if count == 0:
        hint = (
            f"; it advertises {', '.join(others)} instead: the device plugin exposes another resource (check "
            "devicePlugin.migStrategy against how the plugin runs)"
            if others
            else ": the device plugin has not registered the GPUs (see device-plugin-ready and smi-error for this node)"
        )
        return context.result("gpu-schedulable", node.name, "fail", f"allocatable has no {resource}{hint}")
    if expected is None:
        return context.result(
            "gpu-schedulable",
            node.name,
            "warn",
            f"{resource} x {count} allocatable; the expected count is unknown because the catalog does not know "
            f"{context.vm_size}: set gpuCount (and gpuModel) on the pool",
        )
    if count != expected:
        return context.result(
            "gpu-schedulable",
            node.name,
            "fail",
            f"{resource} x {count} allocatable, expected {expected} ({_expected_because(context)}){_count_hint(context, count)}",
        )
    if node.cordoned:
        return context.result(
            "gpu-schedulable",
            node.name,
            "warn",
            f"{resource} x {count} allocatable as expected, but the node is cordoned: no new pod lands here until "
            f"`kubectl uncordon {node.name}` (or the upgrade that cordoned it ends)",
        )
    return context.result(
        "gpu-schedulable", node.name, "pass", f"{resource} x {count} allocatable ({_expected_because(context)})"
    )


def _count_hint(context: _PoolContext, count: int) -> str:
    pool = context.pool
    if pool.mig_profile is not None and count == pool.gpus_per_node:
        return ": the plugin counts whole GPUs, not MIG slices; check that MIG is on (see mig-mode) and the plugin's MIG strategy"
    if pool.time_slicing_replicas and count == pool.gpus_per_node:
        return ": time-slicing is not in effect; check the plugin's sharing config and restart its pod on this node"
    if pool.gpus_per_node is not None and count < (pool.resource.count_per_node or 0):
        return ": some GPUs are missing or marked unhealthy by the plugin (see gpu-count and the plugin pod's log)"
    return ""


# ---------------------------------------------------------------- smi-error


def _smi_error(context: _PoolContext, state: _NodeState) -> CheckResult:
    node = state.node.name
    note = f" (collector: {state.exec_note})" if state.exec_note and state.report is not None else ""
    if state.report is None:
        reason = state.exec_note or "no output was collected from this node (the exec failed or was not attempted)"
        return context.result(
            "smi-error", node, "fail", f"could not run `{context.command}`: {reason}; {_try_by_hand(context, state)}"
        )
    error = state.report.error
    if error is None:
        report = state.report
        driver = f", driver {report.driver_version}" if report.driver_version else ""
        return context.result("smi-error", node, "pass", f"`{context.command}` ran: {len(report.gpus)} GPU(s){driver}{note}")
    advice = {
        "driver_not_loaded": (
            "the GPU driver is not loaded on this node; "
            + (
                f"{context.driver_owner()}; if the image is current, drain the node and reimage it"
                if context.pool.vendor == "nvidia" and context.pool.gpu_driver == "Install"
                else f"{context.driver_owner()}: check that driver's pod and logs on this node"
            )
        ),
        "driver_library_mismatch": (
            "the loaded kernel module and the driver's user-space library are different versions (a driver update "
            "without a reboot): drain the node and restart it"
        ),
        "nvml_init_failed": (
            "NVML could not start in the container: with 'Unknown Error' the container lost access to the GPU device "
            "nodes (a systemd reload of the node's cgroups, or a container toolkit change); restart the pod, and if it "
            "recurs check the NVIDIA container toolkit's configuration on the node or reimage it"
        ),
        "no_devices": (
            "the driver sees no GPU: a GPU failed or is detached from the VM; drain the node and redeploy or reimage the VM"
        ),
        "unreadable": (
            f"the output is a format this tool reads but its GPU rows could not be read: save it and run `aksgpu smi "
            f"parse FILE`; something may print before each line of `{context.tool}`"
        ),
        "duplicate_gpu": (
            f"one GPU is listed twice: `{context.tool}` printed its output twice or something else printed into it; "
            f"run `{context.command}` by hand and check what it prints"
        ),
        "unrecognized": (
            f"the output is no format this tool reads: save it and run `aksgpu smi parse FILE`; the container may lack "
            f"`{context.tool}` or print something before it"
        ),
    }[error.kind]
    return context.result("smi-error", node, "fail", f"{error.kind}: {error.message}; {advice}{note}")


def _try_by_hand(context: _PoolContext, state: _NodeState) -> str:
    pod = state.pod
    if not state.node.ready:
        return "the node is NotReady (see device-plugin-ready): validate again once it is Ready"
    if pod is None:
        return "there is no device plugin pod on the node to run it in (see device-plugin-ready)"
    container = f" -c {context.target.container}" if context.target and context.target.container else ""
    return f"try `kubectl -n {pod.namespace} exec {pod.name}{container} -- {context.command}`"


# ---------------------------------------------------------------- driver-version, driver-consistency


def _driver_version(context: _PoolContext, state: _NodeState) -> CheckResult:
    node = state.node.name
    report = state.report
    # A mismatch error can still name the loaded kernel module's version: compare that one too.
    version = report.driver_version if report is not None else None
    if version is None:
        if report is not None and report.error is None:
            return context.result(
                "driver-version", node, "warn", f"the `{context.command}` output shows no driver version; it cannot be compared"
            )
        skipped = _not_checked(context, "driver-version", state)
        assert skipped is not None
        return skipped
    minimum = context.pool.config.min_driver_version
    if minimum is None:
        return context.result("driver-version", node, "pass", f"driver {version} (the pool sets no minDriverVersion)")
    at_least = version_at_least(version, minimum)
    if at_least is None:
        return context.result(
            "driver-version", node, "warn", f"driver {version!r} cannot be compared with minDriverVersion {minimum}"
        )
    if at_least:
        return context.result("driver-version", node, "pass", f"driver {version} >= minDriverVersion {minimum}")
    return context.result(
        "driver-version",
        node,
        "fail",
        f"driver {version} is older than the pool's minDriverVersion {minimum}: {context.driver_owner()}",
    )


def _driver_consistency(context: _PoolContext, states: Sequence[_NodeState]) -> CheckResult:
    if not states:
        return context.result("driver-consistency", None, "warn", f"{NOT_CHECKED_NO_NODES}: no driver to compare")
    groups: dict[object, list[str]] = {}
    shown: dict[object, str] = {}
    for state in states:
        version = state.report.driver_version if state.report is not None else None
        if version is None:
            continue
        key: object = parse_version(version) or version  # "565.57.1" and "565.57.01" are one version
        groups.setdefault(key, []).append(state.node.name)
        shown.setdefault(key, version)
    read = sum(len(names) for names in groups.values())
    unread = f"; {len(states) - read} node(s) not read (see smi-error)" if read < len(states) else ""
    if not groups:
        return context.result(
            "driver-consistency", None, "warn", f"no driver version read from any of the {len(states)} node(s) (see smi-error)"
        )
    if len(groups) == 1:
        (key,) = groups
        return context.result("driver-consistency", None, "pass", f"all {read} node(s) read run driver {shown[key]}{unread}")
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), str(item[0])))
    spread = "; ".join(f"{shown[key]} on {len(names)} node(s) ({_names(names)})" for key, names in ordered)
    return context.result(
        "driver-consistency",
        None,
        "fail",
        f"{len(groups)} driver versions in one pool: {spread}{unread}. A node image upgrade is probably half done: let it "
        f"finish (or run {context.node_image_upgrade()}) and validate again",
    )


# ---------------------------------------------------------------- gpu-count, mig-mode


def _gpu_count(context: _PoolContext, state: _NodeState) -> CheckResult:
    skipped = _not_checked(context, "gpu-count", state)
    if skipped is not None:
        return skipped
    assert state.report is not None
    node, listed, expected = state.node.name, len(state.report.gpus), context.pool.gpus_per_node
    # One GPU is one PCI address: the parser reads a GPU listed twice once and says so (a log concatenated twice, a
    # hand-edited snapshot); counting rows would pass a node that lost GPUs, so such an output fails the count.
    error = state.report.error
    if error is not None and error.kind == "duplicate_gpu":
        return context.result(
            "gpu-count", node, "fail", f"{error.message}: the output is not one reading of this node's GPUs; collect it again"
        )
    if listed == 0:
        return context.result("gpu-count", node, "warn", f"the `{context.command}` output lists no GPUs (its format shows none)")
    if expected is None:
        return context.result(
            "gpu-count",
            node,
            "warn",
            f"{listed} GPU(s) listed; the catalog does not know {context.vm_size}: set gpuCount on the pool to check the count",
        )
    if listed == expected:
        return context.result("gpu-count", node, "pass", f"{listed} GPU(s), as {context.vm_size} has")
    if listed < expected:
        return context.result(
            "gpu-count",
            node,
            "fail",
            f"`{context.tool}` lists {listed} GPU(s), {context.vm_size} has {expected}: {expected - listed} GPU(s) are not "
            "visible to the driver (failed, or fallen off the bus: look for Xid 79 in the kernel log); drain the node "
            "and redeploy or reimage the VM",
        )
    return context.result(
        "gpu-count",
        node,
        "fail",
        f"`{context.tool}` lists {listed} GPU(s), more than the {expected} the pool expects of {context.vm_size}: "
        "its vmSize or gpuCount does not match the VM",
    )


def _mig_mode(context: _PoolContext, state: _NodeState) -> CheckResult:
    skipped = _not_checked(context, "mig-mode", state)
    if skipped is not None:
        return skipped
    assert state.report is not None
    report, pool, node = state.report, context.pool, state.node.name
    enabled = [gpu.index for gpu in report.gpus if gpu.mig_mode == "Enabled"]
    disabled = [gpu.index for gpu in report.gpus if gpu.mig_mode == "Disabled"]
    unknown = [gpu.index for gpu in report.gpus if gpu.mig_mode is None]

    if pool.mig_profile is None:
        if enabled:
            return context.result(
                "mig-mode",
                node,
                "fail",
                f"MIG is on for GPU(s) {_indices(enabled)} but the pool has no migProfile: those GPUs are split into "
                "slices nobody asked for; recreate the node (or the pool without gpuInstanceProfile)",
            )
        mig_capable = pool.gpu_model.supports_mig if pool.gpu_model else True
        if unknown and mig_capable:
            return context.result(
                "mig-mode",
                node,
                "warn",
                f"the `{context.command}` output shows no MIG mode for GPU(s) {_indices(unknown)}: "
                "cannot tell whether MIG is off",
            )
        if not disabled:
            return context.result("mig-mode", node, "pass", "MIG off: this GPU has no MIG")
        return context.result("mig-mode", node, "pass", f"MIG off on all {len(disabled)} GPU(s), as the pool has no migProfile")

    profile = f"{pool.config.mig_profile} ({pool.mig_profile})"
    if disabled:
        return context.result(
            "mig-mode",
            node,
            "fail",
            f"MIG is off for GPU(s) {_indices(disabled)} but the pool's migProfile {profile} needs it on every GPU: AKS "
            "turns MIG on from the pool's gpuInstanceProfile when it creates the node; if every node shows this, the pool "
            "was created without it and must be recreated (`aksgpu plan` shows the replacement), else reimage this node",
        )
    if not enabled and not report.mig_devices:
        return context.result(
            "mig-mode",
            node,
            "warn",
            f"the `{context.command}` output shows no MIG information (this format prints none): cannot tell whether MIG "
            f"is on with {profile}; plain `nvidia-smi` shows it",
        )
    other_profiles = sorted({d.profile for d in report.mig_devices if d.profile and d.profile != pool.mig_profile})
    if other_profiles:
        return context.result(
            "mig-mode",
            node,
            "fail",
            f"MIG devices of profile(s) {', '.join(other_profiles)} on this node, but the pool's migProfile is {profile}: "
            f"the GPUs were partitioned by hand or by another tool; {_repartition_advice(pool)}",
        )
    expected = pool.expected_mig_devices_per_node
    found = len(report.mig_devices)
    if expected is None:
        return context.result("mig-mode", node, "warn", f"MIG on, {found} MIG device(s); the expected count is unknown")
    if found != expected:
        per_gpu: dict[int | None, int] = {gpu.index: 0 for gpu in report.gpus}
        for device in report.mig_devices:
            per_gpu[device.gpu_index] = per_gpu.get(device.gpu_index, 0) + 1
        short = [
            f"GPU {'?' if index is None else index}: {count}"
            for index, count in per_gpu.items()
            if count != pool.mig_instances_per_gpu
        ]
        detail = f" (per GPU, where not {pool.mig_instances_per_gpu}: {', '.join(short)})" if short else ""
        why = "MIG is on but no GPU instance was created" if found == 0 else "the GPUs are not fully partitioned"
        return context.result(
            "mig-mode",
            node,
            "fail",
            f"{found} MIG device(s), expected {expected} ({pool.gpus_per_node} GPU(s) x {pool.mig_instances_per_gpu} x "
            f"{pool.mig_profile}){detail}: {why}; {_repartition_advice(pool)}",
        )
    return context.result(
        "mig-mode",
        node,
        "pass",
        f"MIG on, {found} x {pool.mig_profile} ({pool.gpus_per_node} GPU(s) x {pool.mig_instances_per_gpu})",
    )


# ---------------------------------------------------------------- gpu-health

_SHOWN_FINDINGS = 4  # findings spelled out in one message before "+N more"


def _gpu_health(context: _PoolContext, state: _NodeState) -> CheckResult:
    node = state.node.name
    report, health = state.report, state.health
    conditions = state.node.gpu_conditions
    active = [condition for condition in conditions if condition.active]
    gpu_names = {gpu.bus_id: gpu.index for gpu in report.gpus if gpu.bus_id} if report is not None else {}

    def named(gpu: str) -> str:
        index = gpu_names.get(gpu)
        return f"{index} ({gpu})" if index is not None else gpu

    def where(finding: NodeFinding) -> str:
        # One GPU by its index and bus address; several by their indexes ("8 GPUs (0, 1, ...)").
        short = (lambda gpu: str(gpu_names.get(gpu, gpu))) if len(finding.gpus) > 1 else named
        return gpus_named(finding.gpus, short).removesuffix(": ") or "the node"

    # One entry per finding of the node, naming every GPU it was found on (eight GPUs slowed down are one entry).
    findings = by_node(health.findings) if health is not None else []
    problems = [f"{where(f)}: {f.id}: {f.message}" for f in findings if f.severity == "critical"] + [
        f"Node Problem Detector condition {c.type}=True ({c.reason or 'no reason given'}"
        f"{f': {c.message}' if c.message else ''}): {c.advice}"
        for c in active
        if c.severity == "critical"
    ]
    if problems:
        return context.result("gpu-health", node, "fail", _listed(problems))
    notes = [f"{where(f)}: {f.id}: {f.message}" for f in findings if f.severity == "warning"] + [
        f"Node Problem Detector condition {c.type}=True: {c.advice}" for c in active if c.severity != "critical"
    ]
    if health is not None:
        # What was not read is never passed: an output cut short, a GPU field the tool printed as ERR!.
        notes += [f"{named(n.gpu) if n.gpu else 'the node'}: {n.id} not checked: {n.reason}" for n in health.not_checked]
        notes += [f"`{context.command}` not read whole: {health.incomplete}"] if health.incomplete else []
    read = _health_read(context, report, health, conditions)
    if notes:
        return context.result("gpu-health", node, "warn", f"{_listed(notes)} ({read})")
    if (health is None or not health.checked) and not conditions:
        why = "no output from this node" if report is None else "its output shows no health data"
        return context.result(
            "gpu-health",
            node,
            "warn",
            f"not checked: `{context.command}`: {why} (see smi-error), and the node carries no Node Problem Detector "
            "GPU condition (AKS sets them only on the GPU sizes it monitors, and not with gpuDriver None)",
        )
    return context.result("gpu-health", node, "pass", f"no health problem: {read}")


def _listed(items: Sequence[str]) -> str:
    shown = "; ".join(items[:_SHOWN_FINDINGS])
    return shown + (f"; +{len(items) - _SHOWN_FINDINGS} more" if len(items) > _SHOWN_FINDINGS else "")


def _health_read(
    context: _PoolContext, report: SmiReport | None, health: HealthReport | None, conditions: Sequence[GpuCondition]
) -> str:
    """What the check read, so a pass never claims what was not looked at."""
    parts = []
    if health is not None and health.checked:
        gpus = f" on {len(report.gpus)} GPU(s)" if report is not None and report.gpus else ""
        parts.append(f"`{context.command}` checked {', '.join(health.checked)}{gpus}")
    elif report is not None:
        parts.append(f"`{context.command}` gave no health data (see smi-error)")
    if conditions:
        parts.append("Node Problem Detector GPU conditions " + ", ".join(f"{c.type}={c.status}" for c in conditions))
    else:
        parts.append("no Node Problem Detector GPU condition on the node")
    return "; ".join(parts)


def _repartition_advice(pool: ResolvedPool) -> str:
    """How a pool's GPUs get their MIG layout back: who partitions them decides it (``ResolvedPool.mig_partitioner``)."""
    if pool.mig_partitioner == "gpu-operator":
        # The GPU Operator's MIG manager applies the mig-parted config the node's nvidia.com/mig.config label names
        # and reports the outcome in nvidia.com/mig.config.state (success, pending, rebooting or failed).
        # https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html
        return (
            "the GPU Operator's MIG manager partitions this pool: check the node's nvidia.com/mig.config.state label and "
            "the nvidia-mig-manager pod's log on it, then relabel nvidia.com/mig.config to have it applied again"
        )
    # AKS partitions at node creation from the pool's gpuInstanceProfile, so a fresh node gets the layout back.
    return "reimage the node so AKS partitions it again"
