"""The audit itself: a ``ClusterSnapshot`` (and, with ``--stack``, what the stack expects) in, an ``AuditReport`` out.
Pure: no I/O, no clock (the snapshot's ``collectedAt`` is "now").

Each practice of ``registry`` is judged from the files it reads. A file the snapshot lacks (``resourcequotas.json``,
``networkpolicies.json``, ``namespaces.json``, ``meta.json``, a node's ``smi/<node>.txt``) makes what depends on it
"not checked" in the report, with the reason and how many objects it concerns, never "passed".

Speed: one pass over the nodes, one over the pods (indexed by node), one over quotas and policies; each node's SMI
output is read once (``read_smi_and_health``), so the work grows linearly with the cluster.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Any

from aks_gpu.audit.prices import INSTANCE_TYPE_LABELS, REGION_LABELS, first_label
from aks_gpu.audit.registry import CHECK_BY_ID, CHECKS, NODES, PRACTICES, Severity
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.cluster.inventory import (
    FENCING_EFFECTS,
    NODE_IMAGE_LABEL,
    GpuNode,
    NamespaceInfo,
    PodInfo,
    PolicyInfo,
    QuotaInfo,
    check_shapes,
    read_gpu_nodes,
    read_namespaces,
    read_pods,
    read_policies,
    read_quotas,
    whole,
)
from aks_gpu.cluster.snapshot import (
    NAMESPACES_FILE,
    NETWORK_POLICIES_FILE,
    NODEPOOL_UPGRADES_FILE,
    NODES_FILE,
    PODS_FILE,
    RESOURCE_QUOTAS_FILE,
    ClusterSnapshot,
    parse_rfc3339,
)
from aks_gpu.gpu.findings import by_node
from aks_gpu.gpu.health import read_smi_and_health
from aks_gpu.kube.workload_manifests import ARTICLE_WORKLOAD_LABEL, DENY_ALL_POLICY, PSA_PREFIX
from aks_gpu.naming import INSTANCE_TYPE_LABEL, QUARANTINE_TAINT_KEY, QUOTA_NAME, SPOT_TAINT_KEY, WORKLOAD_LABEL, vendor_resource

# Namespaces whose pods may run on GPU nodes without asking for a GPU: AKS's own, and where the GPU stacks AKS and
# the vendors document install their agents. A stack's own (--stack) come on top.
GPU_STACK_NAMESPACES: dict[str, str] = {
    # AKS's node agents (https://learn.microsoft.com/azure/aks/core-aks-concepts); see admission_exemptions.yaml.
    "kube-system": "AKS's node agents and add-ons",
    # AKS's NVIDIA device plugin walkthrough (https://learn.microsoft.com/azure/aks/use-nvidia-gpu) and this toolkit.
    "gpu-resources": "the NVIDIA device plugin of AKS's walkthrough, and this toolkit's GPU agents",
    # helm install ... -n gpu-operator (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html)
    "gpu-operator": "the NVIDIA GPU Operator",
    # helm upgrade -i nvdp nvdp/nvidia-device-plugin --namespace nvidia-device-plugin
    # (https://github.com/NVIDIA/k8s-device-plugin#deployment-via-helm)
    "nvidia-device-plugin": "the NVIDIA device plugin's Helm chart",
    # helm install amd-gpu-operator ... --namespace kube-amd-gpu
    # (https://instinct.docs.amd.com/projects/gpu-operator/en/latest/installation/kubernetes-helm.html)
    "kube-amd-gpu": "the AMD GPU Operator",
}
STALE_AFTER_DAYS = 60
_SHOWN = 3  # names listed in a message before "+N more"
# SMI health ids that name another vendor's hardware, so a node's output not judging them is no gap. From the id
# table of components/aks_gpu/gpu/health/__init__.py: uncorrectable RAS is AMD's reading (NVIDIA's is ecc-uncorrectable);
# row remapping and dynamic page retirement (NVIDIA's memory error management docs), NVLink and the NVSwitch
# fabric are NVIDIA's.
_OTHER_VENDORS_IDS: dict[str, frozenset[str]] = {
    "nvidia": frozenset({"ras-uncorrectable"}),
    # gpu-reset-required reads NVIDIA's driver, NVML and nvidia-smi (components/aks_gpu/gpu/health/).
    "amd": frozenset(
        {
            "row-remap-failure",
            "row-remap-pending",
            "retired-pages-pending",
            "gpu-reset-required",
            "nvlink-inactive",
            "fabric-not-ready",
        }
    ),
}

# The build date at the end of an AKS node image version. Today: <image>-YYYYMM.DD.V, as the AKS release notes name
# them ("AKSUbuntu-2204-YYYYMM.DD.V", https://github.com/Azure/AKS/blob/master/.github/instructions/changelog.instructions.md)
# and the label shows (AKSUbuntu-2204gen2containerd-202509.23.0, AKSCBLMariner-V2katagen2-202503.13.0). Before 2023:
# <image>-YYYY.MM.DD (AKSUbuntu-1804gen2containerd-2022.01.19, https://learn.microsoft.com/azure/aks/use-labels shows
# AKSUbuntu-1804-2020.03.05). A version without either (a base image, AKSWindows-23H2-gen2, Windows' build numbers)
# has no date this reads: not checked.
_IMAGE_DATE = (
    re.compile(r"-(?P<year>20\d{2})(?P<month>\d{2})\.(?P<day>\d{2})\.\d+$"),
    re.compile(r"-(?P<year>20\d{2})\.(?P<month>\d{2})\.(?P<day>\d{2})$"),
)


# The pool an upgrade profile belongs to, from its ARM id (.../agentPools/<pool>/upgradeProfiles/default), as
# `az aks nodepool get-upgrades` prints it (AgentPoolUpgradeProfile, AKS REST API).
_PROFILE_POOL = re.compile(r"/agentPools/(?P<pool>[^/]+)/upgradeProfiles/", re.IGNORECASE)


def latest_node_images(profiles: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Pool -> the latest node image AKS offers it, from upgrade profiles (``latestNodeImageVersion``; the REST shape
    nests it under ``properties``); a profile without a pool in its id or without the version is skipped."""
    found: dict[str, str] = {}
    for profile in profiles:
        match = _PROFILE_POOL.search(str(profile.get("id", "")))
        properties = profile.get("properties")
        nested = properties if isinstance(properties, Mapping) else {}
        latest = profile.get("latestNodeImageVersion") or nested.get("latestNodeImageVersion")
        if match and isinstance(latest, str) and latest.strip():
            found[match["pool"]] = latest.strip()
    return found


def _older_than(image: str, latest: str) -> bool:
    """Whether ``image`` is older than ``latest``: by their build dates where both carry one, else any difference."""
    if image == latest:
        return False
    built, newest = image_build_date(image), image_build_date(latest)
    if built is not None and newest is not None:
        return built < newest
    return True


def image_build_date(version: str) -> date | None:
    """The build date an AKS node image version carries, None when it carries none this can read."""
    for pattern in _IMAGE_DATE:
        match = pattern.search(version.strip())
        if match:
            try:
                return date(int(match["year"]), int(match["month"]), int(match["day"]))
            except ValueError:
                return None
    return None


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class AuditFinding:
    id: str
    severity: Severity
    node: str | None
    namespace: str | None
    pod: str | None
    message: str

    @property
    def practice(self) -> str:
        return CHECK_BY_ID[self.id].practice

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "node": self.node,
            "namespace": self.namespace,
            "pod": self.pod,
            "message": self.message,
        }


@dataclass(frozen=True)
class Gap:
    """What could not be judged: for ``ids`` (empty: the summary only), why, and on how many objects (None: all)."""

    practice: str
    ids: tuple[str, ...]
    reason: str
    count: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"practice": self.practice, "ids": list(self.ids), "reason": self.reason, "count": self.count}


@dataclass(frozen=True)
class PoolSummary:
    pool: str
    vendor: str | None
    gpu_nodes: int
    gpus_capacity: Fraction
    gpus_allocatable: Fraction
    gpus_requested: Fraction
    idle_nodes: int
    resources: Mapping[str, tuple[Fraction, Fraction]]  # resource -> (allocatable, requested)
    node_images: Mapping[str, int]
    expected_resource: str | None = None
    expected_per_node: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "vendor": self.vendor,
            "gpuNodes": self.gpu_nodes,
            "gpusCapacity": whole(self.gpus_capacity),
            "gpusAllocatable": whole(self.gpus_allocatable),
            "gpusRequested": whole(self.gpus_requested),
            "idleNodes": self.idle_nodes,
            "resources": {
                name: {"allocatable": whole(allocatable), "requested": whole(requested)}
                for name, (allocatable, requested) in self.resources.items()
            },
            "nodeImages": dict(self.node_images),
            "expectedResource": self.expected_resource,
            "expectedPerNode": self.expected_per_node,
        }


@dataclass(frozen=True)
class NamespaceSummary:
    namespace: str
    gpu_pods: int
    requests: Mapping[str, Fraction]
    quota: Mapping[str, str] | None  # GPU resource -> hard limit of an unscoped quota; None: quotas not read
    deny_all: bool | None  # None: network policies not read
    labels: Mapping[str, str] | None  # the workload and Pod Security labels; None: namespaces not read
    stack_workload: bool = False

    @property
    def gpus_requested(self) -> Fraction:
        return sum(self.requests.values(), Fraction(0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "gpuPods": self.gpu_pods,
            "gpusRequested": whole(self.gpus_requested),
            "requests": {name: whole(value) for name, value in self.requests.items()},
            "quota": dict(self.quota) if self.quota is not None else None,
            "denyAll": self.deny_all,
            "labels": dict(self.labels) if self.labels is not None else None,
            "stackWorkload": self.stack_workload,
        }


@dataclass(frozen=True)
class IdleNode:
    """A GPU node none of whose GPUs is requested, with what prices it: its VM size and region (node labels)."""

    node: str
    pool: str
    vm_size: str | None
    region: str | None
    gpus: Fraction

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "pool": self.pool, "vmSize": self.vm_size, "region": self.region, "gpus": whole(self.gpus)}


@dataclass(frozen=True)
class AuditReport:
    findings: tuple[AuditFinding, ...]
    pools: tuple[PoolSummary, ...]
    namespaces: tuple[NamespaceSummary, ...]
    checked: tuple[str, ...]  # finding ids judged on at least part of the cluster, in registry order
    not_checked: tuple[Gap, ...]
    gpu_nodes: int
    collected_at: str | None
    stack: str | None = None
    cluster: Mapping[str, str] = field(default_factory=dict)  # the snapshot's "context" and "server", where known
    idle: tuple[IdleNode, ...] = ()  # the gpu-idle nodes

    @property
    def failed(self) -> bool:
        return any(finding.severity == "fail" for finding in self.findings)

    def count(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity == severity)

    def summary(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "cluster": dict(self.cluster),
            "collectedAt": self.collected_at,
            "gpuNodes": self.gpu_nodes,
            "fail": self.count("fail"),
            "warn": self.count("warn"),
            "pools": [pool.to_dict() for pool in self.pools],
            "namespaces": [namespace.to_dict() for namespace in self.namespaces],
            "checked": list(self.checked),
            "notChecked": [gap.to_dict() for gap in self.not_checked],
            "idle": [node.to_dict() for node in self.idle],
        }

    def to_dict(self) -> dict[str, Any]:
        """``{"findings": [{"id", "severity", "node", "namespace", "pod", "message"}], "summary": {...}}``."""
        return {"findings": [finding.to_dict() for finding in self.findings], "summary": self.summary()}


# ---------------------------------------------------------------- the audit


@dataclass
class _Run:
    findings: list[AuditFinding] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)

    def add(
        self,
        id_: str,
        severity: Severity,
        message: str,
        node: str | None = None,
        namespace: str | None = None,
        pod: str | None = None,
    ) -> None:
        self.findings.append(AuditFinding(id_, severity, node, namespace, pod, message))

    def gap(self, practice: str, ids: Sequence[str], reason: str, count: int | None = None) -> None:
        self.gaps.append(Gap(practice, tuple(ids), reason, count))


def _nothing_to_judge(run: _Run, node_count: int) -> None:
    """No GPU node: nothing fails, but no node practice was judged either, and a kubeconfig pointed at the wrong
    cluster looks exactly like this. Every finding read off the nodes is reported not checked, never passed."""
    reason = (
        f"no GPU node among the {node_count} node(s) (none has GPU capacity or a GPU label): nothing to judge; "
        "is this the cluster you meant?"
    )
    for practice in PRACTICES:
        checks = [check for check in CHECKS if check.practice == practice.id and NODES in check.reads]
        ids = [finding for check in checks for finding in check.finding_ids]
        if ids:
            run.gap(practice.id, ids, reason)
            run.checked.difference_update(ids)


def run_audit(snapshot: ClusterSnapshot, stack: StackExpectations | None = None, *, shapes_checked: bool = False) -> AuditReport:
    """Every finding of ``registry`` over ``snapshot``. Raises ``SnapshotError`` for an object of the wrong shape.

    ``shapes_checked``: the snapshot comes from ``read_snapshot`` or the probe, which check every object's shape as
    they read it; the audit then does not check again (a tenth of its time at 1,000 nodes)."""
    if not shapes_checked:
        check_shapes(
            (
                (NODES_FILE, "Node", snapshot.nodes),
                (PODS_FILE, "Pod", snapshot.pods),
                (NAMESPACES_FILE, "Namespace", snapshot.namespaces),
                (RESOURCE_QUOTAS_FILE, "ResourceQuota", snapshot.resourcequotas),
                (NETWORK_POLICIES_FILE, "NetworkPolicy", snapshot.networkpolicies),
            )
        )
    extra = stack.resources if stack else frozenset()
    nodes = read_gpu_nodes(snapshot.nodes, stack.pool_vendors if stack else None, extra)
    pods = read_pods(snapshot.pods, extra)
    quotas = read_quotas(snapshot.resourcequotas, extra) if snapshot.resourcequotas is not None else None
    policies = read_policies(snapshot.networkpolicies) if snapshot.networkpolicies is not None else None
    namespaces = read_namespaces(snapshot.namespaces) if snapshot.namespaces is not None else None
    collected = parse_rfc3339(snapshot.collected_at) if snapshot.collected_at else None

    node_names = {node.name for node in nodes}
    on_node: dict[str, list[PodInfo]] = defaultdict(list)
    for pod in pods:
        if pod.node in node_names and not pod.finished:
            on_node[pod.node].append(pod)

    run = _Run()
    commands = _Commands(stack)
    _placement(run, nodes, on_node, stack, commands)
    _validation(run, nodes, stack)
    _node_images(run, nodes, collected, commands, snapshot)
    namespace_summaries = _isolation(run, pods, quotas, policies, namespaces, stack, snapshot)
    idle = _utilisation(run, nodes, on_node, commands)
    idle_nodes = tuple(
        IdleNode(
            node.name,
            node.pool,
            first_label(node.labels, INSTANCE_TYPE_LABELS),
            first_label(node.labels, REGION_LABELS),
            node.gpus_capacity,
        )
        for node in nodes
        if node.name in idle
    )
    faulty, judged = _health(run, nodes, snapshot, stack)
    _faulty_schedulable(run, nodes, faulty, judged, stack)
    if not nodes:
        _nothing_to_judge(run, len(snapshot.nodes))

    order = {check.id: number for number, check in enumerate(CHECKS)}
    practice_order = {practice.id: number for number, practice in enumerate(PRACTICES)}
    findings = sorted(
        run.findings,
        key=lambda f: (
            practice_order[f.practice],
            order[CHECK_BY_ID[f.id].id],
            f.node or "",
            f.namespace or "",
            f.pod or "",
            f.id,
            f.message,
        ),
    )
    registry_order = [finding for check in CHECKS for finding in check.finding_ids]
    return AuditReport(
        findings=tuple(findings),
        pools=_pool_summaries(nodes, on_node, idle, stack),
        namespaces=namespace_summaries,
        checked=tuple(finding for finding in registry_order if finding in run.checked),
        not_checked=tuple(run.gaps),
        gpu_nodes=len(nodes),
        collected_at=snapshot.collected_at,
        stack=stack.name if stack else None,
        cluster=dict(snapshot.cluster),
        idle=idle_nodes,
    )


class _Commands:
    """The commands messages suggest, with the stack's names where there is one."""

    def __init__(self, stack: StackExpectations | None) -> None:
        self.group = (stack.resource_group if stack else None) or "<resource-group>"
        self.cluster = (stack.cluster if stack else None) or "<cluster>"

    def nodepool(self, action: str, pool: str, flags: str = "") -> str:
        return f"`az aks nodepool {action} --resource-group {self.group} --cluster-name {self.cluster} --name {pool}{flags}`"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" +{len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _count(value: Fraction) -> str:
    return str(whole(value))


def _requests(requests: Mapping[str, Fraction]) -> str:
    return ", ".join(f"{name} x {_count(value)}" for name, value in requests.items())


# ---------------------------------------------------------------- placement


def _fences(node: GpuNode, stack: StackExpectations | None) -> tuple[tuple[str, str | None, str], ...] | None:
    """The taints that count as the node's GPU fence: the stack pool's (all of them needed), or None for "any one
    of the generic ones" (the vendor's key, or sku=gpu)."""
    if stack is not None and node.stack_pool is not None:
        return stack.pools[node.stack_pool].taints
    return None


def _placement(
    run: _Run,
    nodes: Sequence[GpuNode],
    on_node: Mapping[str, Sequence[PodInfo]],
    stack: StackExpectations | None,
    commands: _Commands,
) -> None:
    run.checked.update(("gpu-node-untainted", "gpu-squatter"))
    untainted: set[str] = set()
    for node in nodes:
        problem = _untainted(node, stack, commands)
        if problem is not None:
            untainted.add(node.name)
            run.add("gpu-node-untainted", "fail", problem, node=node.name)

    exempt = set(GPU_STACK_NAMESPACES) | (set(stack.gpu_namespaces) if stack else set())
    for node in nodes:
        for pod in on_node.get(node.name, ()):
            if pod.phase != "Running" or pod.gpus > 0 or pod.daemonset or pod.static or pod.namespace in exempt:
                continue
            how = (
                "the node has no GPU taint (see gpu-node-untainted)"
                if node.name in untainted
                else "it tolerates the node's GPU taint (or ran there before the taint)"
            )
            run.add(
                "gpu-squatter",
                "fail",
                f"pod runs on GPU node {node.name} (pool {node.pool}) and requests no GPU: {how}. It takes the node's CPU "
                "and memory from GPU work and keeps the autoscaler from removing the node; give it a node selector for a "
                "CPU pool and no toleration of the GPU taint",
                node=node.name,
                namespace=pod.namespace,
                pod=pod.name,
            )


def _untainted(node: GpuNode, stack: StackExpectations | None, commands: _Commands) -> str | None:
    """Why the node lacks its fence, None when it has it."""
    taints = ", ".join(str(taint) for taint in node.taints) or "none"
    required = _fences(node, stack)
    if required is not None:
        missing = [
            f"{key}={value}:{effect}" if value else f"{key}:{effect}"
            for key, value, effect in required
            if not any(t.key == key and (not value or t.value == value) and t.effect == effect for t in node.taints)
        ]
        if not missing:
            return None
        assert stack is not None and node.stack_pool is not None
        return (
            f"node lacks the taint(s) {', '.join(missing)} that pool {node.stack_pool} of stack {stack.name} sets (its "
            f"taints: {taints}): pods that do not ask for a GPU can land here. `pulumi up --stack {stack.name}` puts the "
            f"pool's taints back; new nodes get them from the pool, a node tainted by hand loses it on reimage"
        )
    keys = [vendor_resource(node.vendor)] if node.vendor else [vendor_resource("nvidia"), vendor_resource("amd")]
    for taint in node.taints:
        if taint.effect in FENCING_EFFECTS and (taint.key in keys or (taint.key == "sku" and taint.value == "gpu")):
            return None
    soft = [str(t) for t in node.taints if t.key in keys or t.key == "sku"]
    why = f"its {', '.join(soft)} only asks the scheduler (PreferNoSchedule)" if soft else f"its taints: {taints}"
    fence = f"{keys[0]}=present:NoSchedule"
    return (
        f"GPU node ({node.evidence}) has no NoSchedule taint that keeps general pods off ({why}): taint pool {node.pool} "
        f"with {fence} (or sku=gpu:NoSchedule, as AKS's walkthrough does), e.g. "
        f"{commands.nodepool('update', node.pool, f' --node-taints {fence}')}, and give GPU pods the toleration"
    )


# ---------------------------------------------------------------- validation


def _validation(run: _Run, nodes: Sequence[GpuNode], stack: StackExpectations | None) -> None:
    run.checked.add("device-plugin-missing")
    for node in nodes:
        exposed = {name: value for name, value in node.capacity.items() if value > 0}
        shown = ", ".join(f"{name} x {_count(value)}" for name, value in sorted(exposed.items()))
        expected = stack.pools[node.stack_pool] if stack is not None and node.stack_pool is not None else None
        if expected is not None and stack is not None:
            if node.capacity.get(expected.resource, Fraction(0)) > 0:
                continue
            instead = (
                f"it shows {shown} instead: the plugin runs with another MIG strategy or sharing"
                if shown
                else ("it shows no GPU resource: the device plugin does not run on it or has not registered the GPUs")
            )
            run.add(
                "device-plugin-missing",
                "fail",
                f"capacity has no {expected.resource}, the resource pool {expected.name} of stack {stack.name} exposes; "
                f"{instead}. Check the device plugin pod on the node (`aksgpu validate --stack {stack.name}`)",
                node=node.name,
            )
            continue
        if exposed:
            continue
        zero = ", ".join(f"{name} is 0" for name in sorted(node.capacity))
        run.add(
            "device-plugin-missing",
            "fail",
            f"GPU node ({node.evidence}) exposes no GPU resource ({'capacity ' + zero if zero else 'nothing in its capacity'}): "
            "GPU pods cannot be scheduled here. Deploy the vendor's device plugin DaemonSet (or GPU Operator) so a pod of "
            "it runs on this node (it must tolerate the node's taints), then read that pod's log",
            node=node.name,
        )


# ---------------------------------------------------------------- node images


def _node_images(
    run: _Run, nodes: Sequence[GpuNode], collected: datetime | None, commands: _Commands, snapshot: ClusterSnapshot
) -> None:
    unlabelled = [node.name for node in nodes if node.image is None]
    if unlabelled:
        run.gap(
            "node-image",
            ("node-image-stale", "node-image-mixed"),
            f"no {NODE_IMAGE_LABEL} label on {_names(unlabelled)} (not an AKS node, or a virtual node)",
            len(unlabelled),
        )
    labelled = [node for node in nodes if node.image is not None]
    judged = bool(labelled) or not nodes  # no GPU node at all: nothing is left unjudged

    if judged:
        run.checked.add("node-image-mixed")
    by_pool: dict[str, Counter[str]] = defaultdict(Counter)
    for node in labelled:
        by_pool[node.pool][str(node.image)] += 1
    for pool, images in sorted(by_pool.items()):
        if len(images) > 1:
            spread = "; ".join(
                f"{image} on {count} node(s)" for image, count in sorted(images.items(), key=lambda i: (-i[1], i[0]))
            )
            run.add(
                "node-image-mixed",
                "warn",
                f"pool {pool} runs {len(images)} node images: {spread}. A node image upgrade is half done (or nodes were "
                f"reimaged one by one): let it finish, or run {commands.nodepool('upgrade', pool, ' --node-image-only')}; "
                "one image per pool is one GPU driver per pool",
            )

    # Where the snapshot has the pool's upgrade profile, a node image is judged against the latest one AKS offers that
    # pool; the age rule judges the rest (and its message says so).
    offered = latest_node_images(snapshot.nodepool_upgrades or [])
    by_age = [node for node in labelled if node.pool not in offered]
    for node in labelled:
        latest = offered.get(node.pool)
        if latest is None:
            continue
        run.checked.add("node-image-stale")
        if _older_than(str(node.image), latest):
            run.add(
                "node-image-stale",
                "warn",
                f"node image {node.image} is older than {latest}, the latest AKS offers pool {node.pool} (its upgrade "
                f"profile in {NODEPOOL_UPGRADES_FILE}): it misses that image's GPU driver and security fixes. Upgrade the "
                f"pool with {commands.nodepool('upgrade', node.pool, ' --node-image-only')}, or set the node OS upgrade "
                "channel NodeImage with a maintenance window",
                node=node.name,
            )
    if not by_age:
        if not labelled:
            run.checked.add("node-image-stale")
        return
    profile_hint = (
        f"judged by age: the snapshot has no upgrade profile of pool {{pool}} ({NODEPOOL_UPGRADES_FILE}: `az aks nodepool "
        "get-upgrades` per pool) to compare with the latest image AKS offers"
    )
    if collected is None:
        why = "meta.json is not in the snapshot" if snapshot.collected_at is None else "the snapshot's collectedAt is unknown"
        run.gap(
            "node-image",
            ("node-image-stale",),
            f"{why}: node image age needs the time of collection (`aksgpu validate collect` writes meta.json with "
            f"collectedAt), or {NODEPOOL_UPGRADES_FILE} to compare with the latest image AKS offers the pool",
            len(by_age) if len(by_age) < len(labelled) else None,
        )
        return
    undated: list[str] = []
    day = collected.astimezone(UTC).date()
    for node in by_age:
        built = image_build_date(str(node.image))
        if built is None:
            undated.append(node.name)
            continue
        age = (day - built).days
        if age > STALE_AFTER_DAYS:
            run.add(
                "node-image-stale",
                "warn",
                f"node image {node.image} was built on {built.isoformat()}, {age} days before the snapshot "
                f"({snapshot.collected_at}; more than {STALE_AFTER_DAYS}): it misses newer GPU drivers and security fixes. "
                f"Upgrade pool {node.pool} with {commands.nodepool('upgrade', node.pool, ' --node-image-only')}, or set the "
                f"node OS upgrade channel NodeImage with a maintenance window ({profile_hint.format(pool=node.pool)})",
                node=node.name,
            )
    if len(undated) < len(by_age) or not nodes:
        run.checked.add("node-image-stale")
    if undated:
        run.gap(
            "node-image",
            ("node-image-stale",),
            f"the node image version of {_names(undated)} carries no build date this reads "
            "(YYYYMM.DD.V or YYYY.MM.DD at its end)",
            len(undated),
        )


# ---------------------------------------------------------------- isolation


def _isolation(
    run: _Run,
    pods: Sequence[PodInfo],
    quotas: Sequence[QuotaInfo] | None,
    policies: Sequence[PolicyInfo] | None,
    namespaces: Mapping[str, NamespaceInfo] | None,
    stack: StackExpectations | None,
    snapshot: ClusterSnapshot,
) -> tuple[NamespaceSummary, ...]:
    gpu_pods = [pod for pod in pods if pod.gpus > 0 and not pod.finished]
    by_namespace: dict[str, list[PodInfo]] = defaultdict(list)
    for pod in gpu_pods:
        by_namespace[pod.namespace].append(pod)

    missing_files = []
    if quotas is None:
        missing_files.append(RESOURCE_QUOTAS_FILE)
        run.gap("isolation", ("gpu-pod-unfenced",), _absent(snapshot, RESOURCE_QUOTAS_FILE, "GPU quotas are not checked"))
    if policies is None:
        missing_files.append(NETWORK_POLICIES_FILE)
        run.gap(
            "isolation",
            ("gpu-pod-unfenced",),
            _absent(snapshot, NETWORK_POLICIES_FILE, "deny-all network policies are not checked"),
        )
    if namespaces is None:
        run.gap(
            "isolation",
            (),
            _absent(snapshot, NAMESPACES_FILE, "the namespaces' workload and Pod Security labels are not shown"),
        )
    if len(missing_files) < 2:
        run.checked.add("gpu-pod-unfenced")

    unscoped: dict[str, dict[str, str]] = defaultdict(dict)
    scoped: dict[str, list[str]] = defaultdict(list)
    for quota in quotas or ():
        if quota.scoped:
            if quota.gpu_hard:
                scoped[quota.namespace].append(quota.name)
            continue
        for resource, hard in quota.gpu_hard.items():
            unscoped[quota.namespace].setdefault(resource, hard)
    denies: dict[str, tuple[bool, bool]] = {}
    for policy in policies or ():
        ingress, egress = denies.get(policy.namespace, (False, False))
        denies[policy.namespace] = (ingress or policy.denies_ingress, egress or policy.denies_egress)

    summaries = []
    for namespace, members in sorted(by_namespace.items()):
        requests: dict[str, Fraction] = defaultdict(Fraction)
        for pod in members:
            for resource, value in pod.gpu_requests.items():
                requests[resource] += value
        limits = dict(sorted(unscoped[namespace].items())) if quotas is not None else None
        ingress, egress = denies.get(namespace, (False, False))
        deny_all = (ingress and egress) if policies is not None else None
        labels = None
        if namespaces is not None:
            found = namespaces.get(namespace)
            raw = found.labels if found else {}
            labels = {
                key: value
                for key, value in sorted(raw.items())
                if key in (ARTICLE_WORKLOAD_LABEL, WORKLOAD_LABEL) or key == f"{PSA_PREFIX}/enforce"
            }
        stack_workload = stack is not None and namespace in stack.workload_namespaces
        summaries.append(
            NamespaceSummary(namespace, len(members), dict(sorted(requests.items())), limits, deny_all, labels, stack_workload)
        )
        for pod in members:
            problems = []
            if quotas is not None:
                unfenced = [resource for resource in pod.gpu_requests if resource not in unscoped[namespace]]
                if unfenced:
                    scoped_note = (
                        f" (ResourceQuota {', '.join(scoped[namespace])} has scopes: it counts only the pods they select)"
                        if scoped[namespace]
                        else ""
                    )
                    problems.append(
                        "no ResourceQuota on " + ", ".join(f"requests.{resource}" for resource in unfenced) + scoped_note
                    )
            if policies is not None and not (ingress and egress):
                directions = [name for name, denied in (("ingress", ingress), ("egress", egress)) if not denied]
                problems.append(f"no NetworkPolicy that denies all {' and '.join(directions)}")
            if not problems:
                continue
            fix = (
                f"this is stack {stack.name}'s workload namespace: `pulumi up --stack {stack.name}` restores its "
                f"{QUOTA_NAME} and {DENY_ALL_POLICY}"
                if stack_workload and stack is not None
                else f"give the namespace a ResourceQuota on its GPU resource and the article's {DENY_ALL_POLICY} policy "
                "(every pod, Ingress and Egress, no rules), then allow only what it needs"
            )
            run.add(
                "gpu-pod-unfenced",
                "warn",
                f"pod requests {_requests(pod.gpu_requests)} in namespace {namespace}, which has {'; '.join(problems)}: "
                f"one team's jobs can take every GPU or reach the others'. Fix: {fix}",
                node=pod.node,
                namespace=namespace,
                pod=pod.name,
            )
    return tuple(summaries)


def _absent(snapshot: ClusterSnapshot, file: str, consequence: str) -> str:
    why = snapshot.not_collected.get(file)
    return f"{file} is not in the snapshot{f' ({why})' if why else ''}: {consequence}"


# ---------------------------------------------------------------- utilisation


def _utilisation(run: _Run, nodes: Sequence[GpuNode], on_node: Mapping[str, Sequence[PodInfo]], commands: _Commands) -> set[str]:
    run.checked.add("gpu-idle")
    idle: set[str] = set()
    for node in nodes:
        exposed = {name: value for name, value in node.capacity.items() if value > 0}
        if not exposed:
            continue  # device-plugin-missing says it
        here = on_node.get(node.name, ())
        if any(pod.gpus > 0 for pod in here):
            continue
        idle.add(node.name)
        gpus = ", ".join(f"{_count(value)} {name}" for name, value in sorted(exposed.items()))
        allocatable = node.gpus_allocatable
        short = (
            f" (only {_count(allocatable)} allocatable: the device plugin marks the others unhealthy)"
            if allocatable < node.gpus_capacity
            else ""
        )
        pods = f"{len(here)} pod(s) run there, none asks for a GPU" if here else "no pod runs there"
        autoscale = commands.nodepool("update", node.pool, " --enable-cluster-autoscaler --min-count 0 --max-count <n>")
        run.add(
            "gpu-idle",
            "warn",
            f"GPU node of pool {node.pool}: none of its {gpus} is requested{short} ({pods}): the node is paid for and "
            f"idle. Let the cluster autoscaler remove it ({autoscale}), scale the pool down, or share the GPUs (MIG, "
            "time-slicing) so smaller jobs fill them",
            node=node.name,
        )
    return idle


# ---------------------------------------------------------------- health


def _health(
    run: _Run, nodes: Sequence[GpuNode], snapshot: ClusterSnapshot, stack: StackExpectations | None
) -> tuple[dict[str, list[str]], list[str]]:
    """Judges the health findings. Returns, for ``gpu-node-faulty-schedulable``, the nodes with a critical fault (node ->
    what it is) and the nodes whose health was judged at all (an NPD GPU condition, or readable SMI output)."""
    faulty: dict[str, list[str]] = defaultdict(list)
    judged: list[str] = []
    no_output: list[str] = []
    exec_failed: list[str] = []
    unreadable: list[str] = []
    incomplete: list[str] = []
    first_incomplete: str | None = None
    no_conditions: list[str] = []
    # Nodes whose output was read but does not show what some health ids need (nvidia-smi -q -x carries no Xid
    # event and no NVLink state): those ids are not checked there, not passed.
    unjudged: dict[tuple[str, ...], list[str]] = defaultdict(list)
    health_ids = CHECK_BY_ID["ecc-uncorrectable"].finding_ids
    first_note: str | None = None
    first_unreadable: str | None = None
    for node in nodes:
        if node.conditions:
            run.checked.add("gpu-condition")
            judged.append(node.name)
        else:
            no_conditions.append(node.name)
        for condition in node.conditions:
            if not condition.active:
                continue
            if condition.severity == "critical":
                faulty[node.name].append(f"Node Problem Detector {condition.type}=True")
            detail = f"{condition.reason or 'no reason given'}{f': {condition.message}' if condition.message else ''}"
            run.add(
                "gpu-condition",
                "fail" if condition.severity == "critical" else "warn",
                f"Node Problem Detector condition {condition.type}=True ({detail}): {condition.advice}",
                node=node.name,
            )
        text = snapshot.smi.get(node.name)
        if text is None:
            note = snapshot.exec_errors.get(node.name)
            if note:
                exec_failed.append(node.name)
                first_note = first_note or note
            else:
                no_output.append(node.name)
            continue
        try:
            _, health = read_smi_and_health(text, node.vendor or "auto", vm_size=node.labels.get(INSTANCE_TYPE_LABEL))
        except Exception as error:  # noqa: BLE001 - one node's output must not stop the audit of every other node
            unreadable.append(node.name)
            first_unreadable = first_unreadable or f"the parser failed ({type(error).__name__}: {str(error)[:200]})"
            continue
        if health.unreadable is not None or not health.checked:
            unreadable.append(node.name)
            first_unreadable = first_unreadable or health.unreadable or "it shows no GPU health data"
            continue
        run.checked.update(health.checked)
        judged.append(node.name)
        if health.incomplete is not None or health.not_checked:
            # Read in part (cut short, rows or fields it could not read): what was not read is a gap, never a pass.
            incomplete.append(node.name)
            first_incomplete = first_incomplete or health.incomplete or "; ".join(
                f"{entry.id} on GPU {entry.gpu or '?'}: {entry.reason}" for entry in health.not_checked[:2]
            )
        vendor = health.vendor or node.vendor
        skipped = _OTHER_VENDORS_IDS.get(vendor, frozenset()) if vendor else frozenset()
        missing = tuple(id_ for id_ in health_ids if id_ not in health.checked and id_ not in skipped)
        if missing:
            unjudged[missing].append(node.name)
        # One line per node and finding, naming every GPU it was found on (aks_gpu.gpu.findings).
        for merged in by_node(health.findings):
            if merged.severity == "critical":
                on = ", ".join(merged.gpus)
                faulty[node.name].append(f"{merged.id} on GPU {on}" if on else merged.id)
            run.add(merged.id, "fail" if merged.severity == "critical" else "warn", merged.text(), node=node.name)

    collect = (
        f"`aksgpu validate collect --stack {stack.name} --out DIR`"
        if stack
        else "`aksgpu validate collect --stack NAME --out DIR`"
    )
    if no_output:
        run.gap(
            "health",
            health_ids,
            f"no SMI output in the snapshot for {_names(no_output)} (smi/<node>.txt: {collect} saves nvidia-smi -q -x "
            "of every GPU node, or kubectl exec it into the file)",
            len(no_output),
        )
    if exec_failed:
        run.gap(
            "health",
            health_ids,
            f"the SMI command failed on {_names(exec_failed)} (smi/<node>.error: {first_note})",
            len(exec_failed),
        )
    if unreadable:
        run.gap(
            "health",
            health_ids,
            f"the SMI output of {_names(unreadable)} gives no health data ({first_unreadable})",
            len(unreadable),
        )
    if incomplete:
        run.gap(
            "health",
            health_ids,
            f"the SMI output of {_names(incomplete)} was not read whole ({first_incomplete})",
            len(incomplete),
        )
    for missing, names in unjudged.items():
        xid = (
            " (Xid events are in the kernel log, dmesg or journalctl -k, not in nvidia-smi -q; save it beside the SMI "
            "output in smi/<node>.txt, or read the Node Problem Detector's XIDErrors condition)"
            if "xid" in missing
            else ""
        )
        run.gap(
            "health",
            missing,
            f"the SMI output of {_names(names)} does not show what these need{xid}",
            len(names),
        )
    if no_conditions:
        # Where AKS runs no NPD GPU check at all, say so: the GPU Operator's pools and AMD pools (gpuDriver None).
        unmonitored = [name for name in no_conditions if _no_npd_gpu_checks(nodes, name, stack)]
        others = [name for name in no_conditions if name not in unmonitored]
        if unmonitored:
            run.gap(
                "health",
                ("gpu-condition",),
                f"{_names(unmonitored)} run a GPU driver AKS does not install (gpuDriver None: the NVIDIA GPU Operator's "
                "driver, or an AMD pool): AKS's Node Problem Detector runs no GPU check there, so no condition will ever "
                "show; the exporters' health alerts and `aksgpu smi health` are what watch these GPUs",
                len(unmonitored),
            )
        if others:
            run.gap(
                "health",
                ("gpu-condition",),
                f"no Node Problem Detector GPU condition on {_names(others)} (AKS sets them only on the GPU sizes it "
                "monitors, and not with --gpu-driver none)",
                len(others),
            )
    return faulty, judged


def _no_npd_gpu_checks(nodes: Sequence[GpuNode], name: str, stack: StackExpectations | None) -> bool:
    node = next(node for node in nodes if node.name == name)
    pool = stack.pools.get(node.stack_pool or "") if stack is not None else None
    if pool is not None:
        return not pool.npd_gpu_checks
    # Without the stack: AKS installs no AMD driver, so an AMD node never gets AKS's NPD GPU checks.
    return node.vendor == "amd"


# ---------------------------------------------------------------- faulty but schedulable

# Taints GPU pods carry tolerations for, so they fence nothing off from GPU work: the vendors' GPU taints (and the
# sku=gpu of AKS's own walkthrough), and AKS's spot taint.
_GPU_WORK_TOLERATES = frozenset({"nvidia.com/gpu", "amd.com/gpu", "sku", SPOT_TAINT_KEY})


def _fenced_from_gpu_work(node: GpuNode, stack: StackExpectations | None) -> str | None:
    """Why new GPU pods cannot land on ``node`` (cordoned, or a taint they do not tolerate), or None."""
    if node.unschedulable:
        return "cordoned"
    pool = stack.pools.get(node.stack_pool or "") if stack is not None else None
    own = {key for key, _, _ in pool.taints} if pool is not None else set()
    for taint in node.taints:
        if taint.effect not in FENCING_EFFECTS:
            continue
        if taint.key == QUARANTINE_TAINT_KEY or (taint.key not in _GPU_WORK_TOLERATES and taint.key not in own):
            return f"tainted {taint}"
    return None


def _faulty_schedulable(
    run: _Run,
    nodes: Sequence[GpuNode],
    faulty: Mapping[str, Sequence[str]],
    judged: Sequence[str],
    stack: StackExpectations | None,
) -> None:
    if not judged:
        if nodes:
            run.gap(
                "health",
                ("gpu-node-faulty-schedulable",),
                "no node's GPU health was judged (no Node Problem Detector GPU condition, no readable SMI output): "
                "which node is faulty is unknown",
                len(nodes),
            )
        return
    run.checked.add("gpu-node-faulty-schedulable")
    for node in nodes:
        faults = faulty.get(node.name)
        if not faults or _fenced_from_gpu_work(node, stack) is not None:
            continue
        run.add(
            "gpu-node-faulty-schedulable",
            "fail",
            f"GPU node of pool {node.pool} has a critical GPU fault ({', '.join(faults)}) and still takes new GPU pods: "
            "it is neither cordoned nor tainted against GPU work, so the next GPU job can land on it and fail. Cordon "
            f"it (`kubectl cordon {node.name}`), drain it and repair it; aks-gpu:remediation mode on quarantines such a "
            "node within minutes (docs/remediation.md)",
            node=node.name,
        )


# ---------------------------------------------------------------- summary per pool


def _pool_summaries(
    nodes: Sequence[GpuNode], on_node: Mapping[str, Sequence[PodInfo]], idle: set[str], stack: StackExpectations | None
) -> tuple[PoolSummary, ...]:
    grouped: dict[str, list[GpuNode]] = defaultdict(list)
    for node in nodes:
        grouped[node.pool].append(node)
    summaries = []
    for pool, members in sorted(grouped.items()):
        allocatable: dict[str, Fraction] = defaultdict(Fraction)
        requested: dict[str, Fraction] = defaultdict(Fraction)
        for node in members:
            for resource, value in node.allocatable.items():
                allocatable[resource] += value
            for pod in on_node.get(node.name, ()):
                for resource, value in pod.gpu_requests.items():
                    requested[resource] += value
        resources = {
            name: (allocatable.get(name, Fraction(0)), requested.get(name, Fraction(0)))
            for name in sorted(set(allocatable) | set(requested))
        }
        vendors = sorted({node.vendor for node in members if node.vendor})
        stack_pools = {node.stack_pool for node in members if node.stack_pool}
        expected = stack.pools[next(iter(stack_pools))] if stack is not None and len(stack_pools) == 1 else None
        summaries.append(
            PoolSummary(
                pool=pool,
                vendor=", ".join(vendors) or None,
                gpu_nodes=len(members),
                gpus_capacity=sum((node.gpus_capacity for node in members), Fraction(0)),
                gpus_allocatable=sum(allocatable.values(), Fraction(0)),
                gpus_requested=sum(requested.values(), Fraction(0)),
                idle_nodes=sum(1 for node in members if node.name in idle),
                resources=resources,
                node_images=dict(sorted(Counter(str(node.image) for node in members if node.image).items())),
                expected_resource=expected.resource if expected else None,
                expected_per_node=expected.count_per_node if expected else None,
            )
        )
    return tuple(summaries)


def practices_of(findings: Iterable[AuditFinding]) -> dict[str, list[AuditFinding]]:
    """Findings grouped by practice, in the registry's practice order (every practice present, maybe empty)."""
    grouped: dict[str, list[AuditFinding]] = {practice.id: [] for practice in PRACTICES}
    for finding in findings:
        grouped[finding.practice].append(finding)
    return grouped
