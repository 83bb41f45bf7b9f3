"""What each workload should run on, from what it used (``advise.usage``): the smallest MIG instance of its GPU model
that holds its memory and compute with headroom, time-slicing where several such workloads fit one GPU, release for a
GPU idle through the window, or keep; the pool change that carries it and the monthly saving. Pure.

The replicas of one owner (a Deployment's pods) get one recommendation, sized for the busiest of them: a pool change
serves them all alike.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from aks_gpu.advise.metrics import NO_MIG_ACTIVITY
from aks_gpu.advise.queues import QueueAdvice
from aks_gpu.advise.series import Series
from aks_gpu.advise.usage import IDLE_ACTIVITY, IdleGpu, Usage, WorkloadUsage, active_hours_text
from aks_gpu.audit.prices import INSTANCE_TYPE_LABELS, REGION_LABELS, Prices, first_label
from aks_gpu.catalog import Catalog, GpuModel, MigInstance
from aks_gpu.naming import AKS_AGENTPOOL_LABEL, AKS_LEGACY_AGENTPOOL_LABEL

Recommend = Literal["mig", "time-slicing", "release", "keep"]
RECOMMENDS: tuple[Recommend, ...] = ("mig", "time-slicing", "release", "keep")
# How a workload is sized (``sizedAs`` in the JSON): a service on its bursts, never time-sliced; a distributed job kept
# whole; an interactive owner (a notebook) by its duty cycle; batch work (and what is not known) on its p95.
SizedAs = Literal["serving", "distributed", "interactive", "batch"]
# Owner kinds that serve requests: Kubernetes' Deployment and StatefulSet, LeaderWorkerSet (sigs.k8s.io/lws, multi-host
# inference), KServe's InferenceService. Namespaces of the stack's `inference` workload type serve as well.
SERVING_KINDS = frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet", "InferenceService"})
SERVING_TYPE = "inference"
# Owner kinds whose pods work as one job across GPUs (collectives over NCCL): Kubeflow's PyTorchJob and MPIJob,
# JobSet, KubeRay's RayJob and RayCluster (whose workers KubeRay creates itself), LeaderWorkerSet. A MIG instance has no
# GPU-to-GPU P2P, over PCIe or NVLink (NVIDIA's MIG user guide, https://docs.nvidia.com/datacenter/tesla/mig-user-guide/,
# its application considerations), so they are kept whole.
DISTRIBUTED_KINDS = frozenset({"PyTorchJob", "MPIJob", "JobSet", "RayJob", "RayCluster", "LeaderWorkerSet"})
# Pods of one owner that move together (a job's ranks): two or more, held at the same time, whose first samples are
# within this of each other inside the window (started as one), and whose last samples are too, or who run to the
# window's end. Ours: two 5-minute steps.
TOGETHER_SECONDS = 600.0
# An interactive owner idle more than half the time (its duty cycle below this) shares a GPU or releases it when idle.
IDLE_MOST = 0.5
# A MIG instance's activity at or above this share of the instance is saturated: what it would use is more than it
# shows, so it is sized up. Ours, as the headroom.
SATURATED = 0.9
# Memory and compute are sized 20% over what was seen (peak memory, p95 activity): a model's KV cache or a batch a
# little larger than any in the window must still fit. Ours: the margin is a judgement, stated in docs/advise.md.
HEADROOM = 0.20
# Time-slicing shares a GPU's memory with no isolation and its time by context switching; past four workloads a
# GPU the advice sizes at the p95 leaves too little margin for their peaks to coincide. Ours, as HEADROOM.
MAX_TIME_SLICES = 4
# The node names AKS gives VMSS nodes: aks-<pool>-<8 digits>-vmss<6 base-36 digits> (as admission/policy.py reads them:
# every `kubectl get nodes` in the AKS docs, e.g. https://learn.microsoft.com/azure/aks/create-node-pools).
_AKS_NODE = re.compile(r"aks-(?P<pool>[a-z][a-z0-9]{0,11})-\d+-vmss[0-9a-z]+")
# AKS applies one gpuInstanceProfile (MIG1g..MIG7g) to an agent pool, so to every GPU of its nodes (the agent pool's
# property: https://learn.microsoft.com/dotnet/api/microsoft.azure.commands.aks.models.pscontainerserviceagentpoolprofile.gpuinstanceprofile,
# `az aks nodepool add --gpu-instance-profile`, Azure/azure-cli#23501):
# a profile of which one instance fits a GPU (4g.*, 7g.*) leaves the rest of each GPU unused, so it frees no GPU and
# is never advised (the filter on max_instances in _decide).
# An instance profile's memory is in its name (1g.10gb); read as decimal GB, it is below what the GPU gives the
# instance (1g.10gb is 9.75 GiB, 1g.5gb 4.75 GiB, 3g.20gb 19.62 GiB in `nvidia-smi mig -lgip`,
# tests/fixtures/smi/40_* and 41_*), so an instance the advice picks holds what it was sized for.
_PROFILE = re.compile(r"(?P<slices>\d+)g\.(?P<gb>\d+)gb")
_GB_MIB = 1e9 / (1 << 20)
# GPUs and nodes "now" are those held at the same time for at least this long at a stretch: a rolling update's surge
# (the new pod up before the old one goes) holds one more GPU for minutes, which is no lasting need. Ours, as HEADROOM.
HELD_AT_ONCE_SECONDS = 3600.0
# kube-state-metrics writes a node's labels on kube_node_labels as `label_<name>`, every character but a letter, digit
# or underscore as `_` (docs/metrics/cluster/node-metrics.md, SanitizeLabelName in internal/store/utils.go of
# kubernetes/kube-state-metrics), for the labels its --metric-labels-allowlist lets through.
_KSM_INVALID = re.compile(r"[^a-zA-Z0-9_]")


@dataclass(frozen=True)
class NodeFacts:
    """What the advice knows of a node: its pool, VM size and region (from the stack, or kube-state-metrics)."""

    pool: str | None = None
    vm_size: str | None = None
    region: str | None = None
    min_count: int | None = None  # the pool's minCount, where the stack says (None: not known, or no autoscaling)


def _ksm_label(name: str) -> str:
    return "label_" + _KSM_INVALID.sub("_", name)


_SIZE_KEYS = tuple(_ksm_label(name) for name in INSTANCE_TYPE_LABELS)
_REGION_KEYS = tuple(_ksm_label(name) for name in REGION_LABELS)
# AKS labels each node with its agent pool (https://learn.microsoft.com/azure/aks/use-labels#reserved-system-labels).
_POOL_KEYS = tuple(_ksm_label(name) for name in (AKS_AGENTPOOL_LABEL, AKS_LEGACY_AGENTPOOL_LABEL))


def node_labels(series: Iterable[Series]) -> dict[str, NodeFacts]:
    """node name -> its pool, VM size and region, from kube-state-metrics' ``kube_node_labels`` (the labels
    ``node.kubernetes.io/instance-type`` and ``topology.kubernetes.io/region``, and AKS's agent pool label)."""
    found: dict[str, NodeFacts] = {}
    for one in series:
        labels = one.labels
        node = labels.get("node")
        if not node:
            continue
        found[node] = NodeFacts(
            pool=first_label(labels, _POOL_KEYS),
            vm_size=first_label(labels, _SIZE_KEYS),
            region=first_label(labels, _REGION_KEYS),
        )
    return found


@dataclass(frozen=True)
class Pricing:
    """How the advice prices a GPU: the node's VM size and region, then the price table (``audit.prices``)."""

    prices: Prices
    catalog: Catalog
    nodes: Mapping[str, NodeFacts] = field(default_factory=dict)  # node name -> facts (kube_node_labels)
    pools: Mapping[str, NodeFacts] = field(default_factory=dict)  # AKS pool name -> facts (from the stack)
    stack: str | None = None  # the stack the pools come from, for the messages

    def node(self, host: str) -> NodeFacts:
        known = self.nodes.get(host)
        matched = _AKS_NODE.fullmatch(host)
        pool = (known.pool if known else None) or (matched["pool"] if matched else None)
        from_pool = self.pools.get(pool or "")
        return NodeFacts(
            pool=pool,
            vm_size=(known.vm_size if known else None) or (from_pool.vm_size if from_pool else None),
            region=(known.region if known else None) or (from_pool.region if from_pool else None),
            min_count=from_pool.min_count if from_pool else None,
        )

    def node_month(self, host: str) -> float | None:
        """The monthly list price of the VM ``host`` is, or None where unknown (``unpriced`` says why)."""
        facts = self.node(host)
        priced = self.prices.monthly(facts.region, facts.vm_size)
        return priced[0] if priced else None

    def unpriced(self, host: str) -> str | None:
        """Why a node ``host`` has no price (None where it has one): ``unpriced: <size> in <region>`` where the price
        table lacks that size in that region, else what of the node is not known and where it would come from."""
        facts = self.node(host)
        if facts.vm_size and facts.region:
            return None if self.node_month(host) is not None else f"unpriced: {facts.vm_size} in {facts.region}"
        missing = " and ".join(what for what, known in (("VM size", facts.vm_size), ("region", facts.region)) if not known)
        if self.stack is None:
            return f"unpriced: the {missing} of {host} not known (name the stack with --stack, or add kube_node_labels)"
        if facts.pool is None:
            return f"unpriced: the {missing} of {host} not known (not an AKS node name aks-<pool>-<digits>-vmss<suffix>)"
        return f"unpriced: the {missing} of {host} not known (its pool {facts.pool} is not in stack {self.stack})"


@dataclass(frozen=True)
class Recommendation:
    usage: WorkloadUsage
    recommend: Recommend
    profile: str | None  # the MIG instance (1g.10gb) for mig; None otherwise
    mig_value: str | None  # the pool's gpuInstanceProfile (MIG1g) for mig
    per_gpu: int  # workloads like it that one GPU carries after the change (0 for release)
    pool: str | None
    why: str
    unpriced: str | None = None  # why the saving is None
    saving: float | None = None  # this pod's share of its pool change's saving (``_pool_changes``)
    sized_as: SizedAs = "batch"

    @property
    def gpus_held(self) -> float:
        """The GPUs it holds now: a MIG instance is the share of a GPU its profile's pool gives each (1/7 for 1g)."""
        instance = _instance(self.usage.model, self.usage.mig_profile) if self.usage.mig_profile else None
        return self.usage.gpus / instance.max_instances if instance else float(self.usage.gpus)

    @property
    def monthly_saving(self) -> float | None:
        """This pod's share of what its pool change saves a month (the change's saving over its workloads); 0 for keep,
        None where the change is not priced."""
        return 0.0 if self.recommend == "keep" else self.saving


@dataclass(frozen=True)
class PoolChange:
    """One change to a pool and what it frees on the bill: the GPUs and nodes its workloads hold at the same time now,
    and after the change (a node is what Azure bills; the GPUs freed are capacity)."""

    pool: str | None
    gpu_model: str
    recommend: Recommend
    profile: str | None
    mig_value: str | None
    per_gpu: int
    workloads: int
    gpus_now: int  # GPUs held at the same time (a GPU time-sliced between the pods counts once)
    gpus_after: int
    gpus_per_node: int | None
    nodes_now: int  # nodes held at the same time whose GPUs only these workloads held
    node_month: float | None  # the pool's VM's monthly price
    unpriced: str | None = None  # why node_month is None

    @property
    def gpus_freed(self) -> int:
        return max(0, self.gpus_now - self.gpus_after)

    @property
    def nodes_after(self) -> int:
        """The nodes the change needs: none for release; for a new MIG or time-sliced pool, whole nodes, at least one."""
        if self.recommend == "release" or not self.gpus_after:
            return 0
        return max(1, math.ceil(self.gpus_after / (self.gpus_per_node or 1)))

    @property
    def nodes_freed(self) -> int:
        """Nodes freed (negative: the new pool needs more nodes than the change frees)."""
        return self.nodes_now - self.nodes_after

    @property
    def monthly_saving(self) -> float | None:
        """The nodes freed at the pool's VM price; None where it is not priced."""
        return None if self.node_month is None else round(self.nodes_freed * self.node_month, 2)


@dataclass(frozen=True)
class IdleCapacity:
    """A pool's GPUs no pod held in the whole window, and the nodes none of whose GPUs a pod held: what lowering the
    pool's minCount (where it holds them) and letting the autoscaler remove them saves."""

    pool: str | None
    gpu_model: str
    gpus: int
    nodes: int  # nodes with no GPU a pod held
    nodes_seen: int  # the pool's nodes in the window
    min_count: int | None  # the pool's minCount, where the stack says
    monthly_saving: float | None
    unpriced: str | None  # why the saving is None

    @property
    def min_count_after(self) -> int | None:
        """The minCount that lets the autoscaler remove the idle nodes: the nodes a pod used, where minCount is above."""
        busy = self.nodes_seen - self.nodes
        return busy if self.min_count is not None and self.min_count > busy else None


@dataclass(frozen=True)
class Advice:
    usage: Usage
    recommendations: tuple[Recommendation, ...]
    pool_changes: tuple[PoolChange, ...]
    idle_capacity: tuple[IdleCapacity, ...] = ()
    # With --stack on a queueing stack: teams whose nominal GPUs idled while another of their type borrowed.
    queues: tuple[QueueAdvice, ...] = ()

    @property
    def frees_capacity(self) -> bool:
        """Whether the advice frees GPUs: a pool change carries its workloads on fewer, or idle nodes can go. A change
        that frees none (one small workload moved to a MIG pool of its own) is not enough."""
        return any(change.gpus_freed for change in self.pool_changes) or any(idle.nodes for idle in self.idle_capacity)


def profile_memory_mib(profile: str) -> float:
    matched = _PROFILE.fullmatch(profile)
    return int(matched["gb"]) * _GB_MIB if matched else 0.0


def profile_slices(profile: str) -> int:
    matched = _PROFILE.fullmatch(profile)
    return int(matched["slices"]) if matched else 0


def _percent(share: float) -> str:
    return f"{share * 100:.1f}%"


def _instance(model: GpuModel, profile: str) -> MigInstance | None:
    return next((instance for instance in model.mig.values() if instance.profile == profile), None)


def _moves_together(group: Sequence[WorkloadUsage], usage: Usage) -> bool:
    """Whether the owner's pods move together: two or more, held at the same time, started as one inside the window
    and ended as one (or run on to its end)."""
    if len(group) < 2 or max(one.first for one in group) >= min(one.last for one in group):
        return False
    firsts, lasts = [one.first for one in group], [one.last for one in group]
    started = max(firsts) - min(firsts) <= TOGETHER_SECONDS and min(firsts) > usage.window.start + TOGETHER_SECONDS
    ended = max(lasts) - min(lasts) <= TOGETHER_SECONDS
    return started and ended


def sized_as(
    group: Sequence[WorkloadUsage], usage: Usage, serving_namespaces: frozenset[str] = frozenset()
) -> tuple[SizedAs, str]:
    """How an owner's pods are sized, and why (the kind, the namespace, the pods moving together)."""
    first = group[0]
    kind = first.kind
    if kind in DISTRIBUTED_KINDS:
        return "distributed", f"a {kind}"
    if kind not in SERVING_KINDS and _moves_together(group, usage):
        return "distributed", f"{len(group)} pods that started and ended together"
    serving_namespace = first.namespace in serving_namespaces
    duty = max(one.duty_cycle for one in group)
    if kind == "StatefulSet" and len(group) == 1 and not serving_namespace and duty < IDLE_MOST:
        return "interactive", f"a StatefulSet of one pod (a notebook) active {_percent(duty)} of the time"
    if kind in SERVING_KINDS or serving_namespace:
        return "serving", f"a {kind}" if kind in SERVING_KINDS else f"in the {SERVING_TYPE} namespace {first.namespace}"
    return "batch", f"a {kind}" if kind else "an owner of unknown kind"


def _fitting(model: GpuModel, memory_needed: float, slices_needed: float, shareable: bool) -> list[tuple[str, MigInstance]]:
    """The model's MIG profiles that hold ``memory_needed`` MiB and ``slices_needed`` compute slices, smallest first;
    ``shareable``: only those of which two or more fit a GPU (one of which frees nothing)."""
    return sorted(
        (
            (value, instance)
            for value, instance in model.mig.items()
            if profile_memory_mib(instance.profile) >= memory_needed
            and profile_slices(instance.profile) >= slices_needed
            and (instance.max_instances > 1 or not shareable)
        ),
        key=lambda item: (profile_slices(item[1].profile), profile_memory_mib(item[1].profile)),
    )


def _decide(group: Sequence[WorkloadUsage], how: SizedAs, kind_why: str) -> tuple[Recommend, str | None, str | None, int, str]:
    """(recommend, profile, gpuInstanceProfile value, workloads per GPU after, why) for an owner's pods."""
    model: GpuModel = group[0].model
    peak_memory = max(one.peak_memory_mib for one in group)
    peak_activity = max(one.peak_activity for one in group)
    gpus = max(one.gpus for one in group)
    mig = next((one.mig_profile for one in group if one.mig_profile), None)
    if mig and any(NO_MIG_ACTIVITY in one.activity_metric for one in group):
        # No activity on a MIG instance: sized by its memory alone, never down on compute it may use.
        return _resize(model, mig, peak_memory * (1 + HEADROOM), None, f"not reported ({NO_MIG_ACTIVITY})", peak_memory)
    if peak_activity <= IDLE_ACTIVITY:
        return "release", None, None, 0, f"idle through the window: activity peaked at {_percent(peak_activity)}"
    if how == "distributed":
        return "keep", None, None, 1, f"{kind_why}, a distributed job: kept whole (a MIG instance has no GPU-to-GPU P2P)"
    # A service is sized on its bursts (its hourly peaks' high percentile), other work on the p95 of its samples.
    if how == "serving":
        activity = max(one.burst_activity for one in group)
        measured = f"bursts {_percent(activity)}"
    else:
        activity = max(one.p95_activity for one in group)
        measured = f"p95 {_percent(activity)}"
    memory_needed = peak_memory * (1 + HEADROOM)
    if mig:
        return _resize(model, mig, memory_needed, activity, measured, peak_memory)
    if gpus > 1:
        return "keep", None, None, 1, f"holds {gpus} GPUs, busy up to {_percent(peak_activity)}: sized whole"
    compute_needed = activity * (1 + HEADROOM)
    need = (
        f"needs {memory_needed:,.0f} MiB (peak {peak_memory:,.0f} + {HEADROOM:.0%}) and {_percent(compute_needed)} of the "
        f"compute ({measured} + {HEADROOM:.0%})"
    )
    if model.mig:
        full = max(profile_slices(instance.profile) for instance in model.mig.values())
        fitting = _fitting(model, memory_needed, compute_needed * full, shareable=True)
        if fitting:
            value, instance = fitting[0]
            slices = profile_slices(instance.profile)
            why = f"{need}: {instance.profile} holds it ({slices}/{full} of the compute), {instance.max_instances} per GPU"
            return "mig", instance.profile, value, instance.max_instances, why
    duty = max(one.duty_cycle for one in group)
    pattern = f"active {_percent(duty)} of the time, in {active_hours_text(group[0].active_hours)}"
    if how == "serving":
        return "keep", None, None, 1, f"{need}: no MIG instance holds it, and a service ({kind_why}) is not time-sliced"
    if group[0].vendor == "nvidia" and compute_needed > 0 and memory_needed > 0:
        memory_total = model.memory_gib * _GB_MIB
        by_compute = int(1 // compute_needed)
        if how == "interactive":
            # Idle most of the time: its active hours seldom meet another's, so it shares by its duty cycle.
            by_compute = max(by_compute, int(1 // max(duty, IDLE_ACTIVITY)))
        fit = min(int(memory_total // memory_needed), by_compute, MAX_TIME_SLICES)
        if fit >= 2:
            said = f"{need}: {fit} such workloads share one {model.key}"
            return "time-slicing", None, None, fit, said + (f" ({kind_why}, {pattern})" if how == "interactive" else "")
    if how == "interactive":
        return "keep", None, None, 1, f"{kind_why}, {pattern}: release its GPU when idle (cull the notebook)"
    return "keep", None, None, 1, f"{need}: no smaller share of one {model.key} GPU holds it"


def _resize(
    model: GpuModel, current: str, memory_needed: float, activity: float | None, measured: str, peak_memory: float
) -> tuple[Recommend, str | None, str | None, int, str]:
    """A workload already on the MIG instance ``current``, resized: the smallest profile that holds its memory and
    compute with headroom. Its activity is a share of its own instance (DCGM reports a MIG instance's profiling fields
    for the instance: a 1g instance reaches 100%, https://github.com/NVIDIA/DCGM/issues/138), so the slices it uses
    are that share of the instance's slices; where activity is not known (None), the slices it has."""
    slices_now = profile_slices(current)
    memory_now = profile_memory_mib(current)
    slices_needed = slices_now if activity is None else activity * slices_now * (1 + HEADROOM)
    saturated = activity is not None and activity >= SATURATED
    if saturated:
        slices_needed = max(slices_needed, slices_now + 1)
    need = (
        f"on {current}: memory peak {peak_memory:,.0f} MiB ({_percent(peak_memory / memory_now) if memory_now else '?'} of "
        f"the instance), activity {measured} of it{' (saturated)' if saturated else ''}: needs {memory_needed:,.0f} MiB "
        f"and {slices_needed:.1f} slice(s)"
    )
    fitting = _fitting(model, memory_needed, slices_needed, shareable=False)
    if not fitting:
        return "keep", None, None, 1, f"{need}: size up to a whole {model.key}, no MIG instance holds it"
    value, instance = fitting[0]
    if instance.profile == current:
        return "keep", None, None, 1, f"{need}: {current} holds it, and no smaller instance does"
    larger = profile_slices(instance.profile) > slices_now or profile_memory_mib(instance.profile) > memory_now
    if larger:
        return "mig", instance.profile, value, instance.max_instances, f"{need}: size up to {instance.profile}"
    shareable = _fitting(model, memory_needed, slices_needed, shareable=True)
    if not shareable or shareable[0][1].profile == current:
        return "keep", None, None, 1, f"{need}: {current} holds it, and no smaller instance two of which fit a GPU does"
    value, instance = shareable[0]
    return "mig", instance.profile, value, instance.max_instances, f"{need}: size down to {instance.profile}"


def advise(usage: Usage, pricing: Pricing, serving_namespaces: frozenset[str] = frozenset()) -> Advice:
    """One recommendation per pod (decided per owner), and the pool changes that carry them. ``serving_namespaces``:
    the stack's namespaces of the ``inference`` workload type, whose workloads are sized as services."""
    groups: dict[tuple[str, str, str], list[WorkloadUsage]] = defaultdict(list)
    for workload in usage.workloads:
        groups[(workload.namespace, workload.owner, workload.model.key)].append(workload)
    recommendations: list[Recommendation] = []
    for key in sorted(groups):
        group = groups[key]
        how, kind_why = sized_as(group, usage, serving_namespaces)
        recommend, profile, value, per_gpu, why = _decide(group, how, kind_why)
        for workload in group:
            host = workload.hosts[0]
            recommendations.append(
                Recommendation(
                    usage=workload,
                    recommend=recommend,
                    profile=profile,
                    mig_value=value,
                    per_gpu=per_gpu,
                    pool=pricing.node(host).pool,
                    why=why,
                    sized_as=how,
                )
            )
    changes = _pool_changes(recommendations, usage, pricing)
    return Advice(
        usage=usage,
        recommendations=tuple(_with_savings(recommendations, changes)),
        pool_changes=tuple(change for change, _ in changes),
        idle_capacity=_idle_capacity(usage, pricing),
    )


def _with_savings(
    recommendations: Sequence[Recommendation], changes: Sequence[tuple[PoolChange, Sequence[Recommendation]]]
) -> list[Recommendation]:
    """Each recommendation with its share of its pool change's saving, and the change's reason where it is unpriced."""
    share: dict[int, tuple[float | None, str | None]] = {}
    for change, members in changes:
        saving = change.monthly_saving
        for one in members:
            share[id(one)] = (None if saving is None else round(saving / len(members), 2), change.unpriced)
    return [
        replace(one, saving=share[id(one)][0], unpriced=share[id(one)][1]) if id(one) in share else one for one in recommendations
    ]


def _idle_capacity(usage: Usage, pricing: Pricing) -> tuple[IdleCapacity, ...]:
    by_pool: dict[tuple[str, str], list[IdleGpu]] = defaultdict(list)
    for gpu in usage.idle:
        by_pool[(pricing.node(gpu.host).pool or "", gpu.model.key)].append(gpu)
    hosts_by_pool: dict[str, set[str]] = defaultdict(set)
    for host in {gpu.host for gpu in usage.idle} | set(usage.busy_hosts):
        hosts_by_pool[pricing.node(host).pool or ""].add(host)
    found: list[IdleCapacity] = []
    for (pool, model_key), gpus in sorted(by_pool.items()):
        idle_hosts = sorted({gpu.host for gpu in gpus} - set(usage.busy_hosts))
        months = [pricing.node_month(host) for host in idle_hosts]
        unpriced = next((why for host in idle_hosts if (why := pricing.unpriced(host))), None)
        found.append(
            IdleCapacity(
                pool=pool or None,
                gpu_model=model_key,
                gpus=len(gpus),
                nodes=len(idle_hosts),
                nodes_seen=len(hosts_by_pool[pool]),
                min_count=pricing.node(gpus[0].host).min_count,
                monthly_saving=None if unpriced else round(sum(month or 0.0 for month in months), 2),
                unpriced=unpriced,
            )
        )
    return tuple(found)


def idle_capacity_text(idle: IdleCapacity) -> str:
    """The idle capacity and the change that frees it, in words."""
    where = f"pool {idle.pool}" if idle.pool else f"the {idle.gpu_model} nodes"
    said = f"{where}: {idle.gpus} {idle.gpu_model} GPU(s) no pod held in the window"
    if not idle.nodes:
        return f"{said}, on nodes that other pods use (capacity, no node to remove)"
    said += f", {idle.nodes} of its {idle.nodes_seen} node(s) wholly idle"
    after = idle.min_count_after
    if after is not None:
        return f"{said}: lower minCount from {idle.min_count} to {after} so the autoscaler removes them"
    if idle.min_count is not None:
        return f"{said}: minCount {idle.min_count} does not hold them; the autoscaler should remove them (is it on?)"
    return f"{said}: keep minCount at most {idle.nodes_seen - idle.nodes} so the autoscaler removes them"


def held_at_once(
    spans: Iterable[tuple[float, float] | tuple[float, float, float]], at_least: float = HELD_AT_ONCE_SECONDS
) -> int:
    """The most of ``spans`` ([start, end) in seconds) held at once for ``at_least`` seconds at a stretch, in whole GPUs
    (or nodes) rounded up: a span holds one, or the share its third item says (a MIG instance: 1/7 of a GPU for a 1g);
    where no stretch is that long (a short window), the most held at once at all."""
    events: list[tuple[float, float]] = []
    for start, end, *share in spans:
        if end > start:
            held = share[0] if share else 1.0
            events += [(start, held), (end, -held)]
    events.sort()
    segments: list[tuple[float, float, float]] = []  # (from, to, how much held)
    count = 0.0
    for (when, delta), (later, _) in zip(events, [*events[1:], (math.inf, 0)][: len(events)], strict=True):
        count = round(count + delta, 9)  # shares of a GPU (1/7) add up to whole GPUs again
        if later > when and count:
            segments.append((when, later, count))

    def longest(level: float) -> float:
        best, since, until = 0.0, None, None
        for start, end, held in segments:
            if held >= level and since is not None and start == until:
                until = end
            elif held >= level:
                since, until = start, end
            else:
                since = None
            if since is not None and until is not None:
                best = max(best, until - since)
        return best

    levels = sorted({held for _, _, held in segments})
    if not levels or longest(levels[0]) < at_least:
        return math.ceil(levels[-1]) if levels else 0
    low, high = 0, len(levels) - 1  # longest(level) falls as level rises: the highest level whose stretch is long enough
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if longest(levels[middle]) >= at_least else (low, middle - 1)
    return math.ceil(levels[low])


def _pool_changes(
    recommendations: Sequence[Recommendation], usage: Usage, pricing: Pricing
) -> list[tuple[PoolChange, list[Recommendation]]]:
    by_change: dict[tuple[str, str, str, str, int], list[Recommendation]] = defaultdict(list)
    for one in recommendations:
        if one.recommend != "keep":
            key = (one.pool or "", one.usage.model.key, one.recommend, one.profile or "", one.per_gpu)
            by_change[key].append(one)
    changes: list[tuple[PoolChange, list[Recommendation]]] = []
    for (pool, model_key, recommend, profile, per_gpu), members in sorted(by_change.items()):
        # A sample stands for the step after it: a pod's GPU is held from its first sample to its last plus a step.
        # A GPU only these pods held counts once however many held it (time-sliced, or MIG instances of it); a MIG
        # instance of a GPU that other pods share counts as its share of the GPU (``Recommendation.gpus_held``).
        ours = {(one.usage.namespace, one.usage.pod) for one in members}
        foreign = {gpu for gpu, holders in usage.holders.items() if not holders <= ours}
        gpus: dict[tuple[str, str, str], list[float]] = {}
        pods: list[tuple[float, float]] = []
        for one in members:
            ends = [(held.first, held.last + one.usage.step) for held in one.usage.held]
            pods.append((min(start for start, _ in ends), max(end for _, end in ends)) if ends else (0.0, 0.0))
            share = one.gpus_held / one.usage.gpus if one.usage.gpus else 1.0
            for held, (start, end) in zip(one.usage.held, ends, strict=True):
                shared = (held.host, held.gpu) in foreign and share < 1
                where = (held.host, held.gpu, held.instance if shared else "")
                span = gpus.setdefault(where, [start, end, share if shared else 1.0])
                span[0], span[1] = min(span[0], start), max(span[1], end)
        only_ours = {host for host, _ in usage.holders} - {host for host, _ in foreign}
        hosts: dict[str, list[float]] = {}
        for (host, _, _), (start, end, _) in gpus.items():
            if host in only_ours:
                span = hosts.setdefault(host, [start, end])
                span[0], span[1] = min(span[0], start), max(span[1], end)
        gpus_now = held_at_once((start, end, share) for start, end, share in gpus.values())
        gpus_after = 0 if recommend == "release" else math.ceil(held_at_once(pods) / per_gpu)
        host = members[0].usage.hosts[0]
        size_name = pricing.pools[pool].vm_size if pool in pricing.pools else pricing.node(host).vm_size
        size = pricing.catalog.vm_size(size_name) if size_name else None
        unpriced = next((why for one in members for why in [pricing.unpriced(one.usage.hosts[0])] if why), None)
        change = PoolChange(
            pool=pool or None,
            gpu_model=model_key,
            recommend=recommend,  # type: ignore[arg-type]
            profile=profile or None,
            mig_value=members[0].mig_value,
            per_gpu=per_gpu,
            workloads=len(members),
            gpus_now=gpus_now,
            gpus_after=gpus_after,
            gpus_per_node=size.gpu_count if size else None,
            nodes_now=held_at_once((start, end) for start, end in hosts.values()),
            node_month=None if unpriced else pricing.node_month(host),
            unpriced=unpriced,
        )
        changes.append((change, members))
    return changes


def pool_change_text(change: PoolChange) -> str:
    """The change in words, as a person would make it in the stack."""
    where = f"pool {change.pool}" if change.pool else f"the {change.gpu_model} pool"
    freed, nodes = change.gpus_freed, change.nodes_freed
    if not freed:
        bill = "; frees no GPU until the pool carries more workloads like these"
    elif nodes > 0:
        bill = f"; {where} could shrink by {nodes} node(s)"
    elif nodes < 0:
        bill = f"; frees {freed} GPU(s) of capacity but no node, and the new pool needs {-nodes} node(s) more"
    else:
        bill = f"; frees {freed} GPU(s) of capacity, no whole node"
    if change.recommend == "release":
        return f"{where}: release {freed} idle GPU(s) of {change.workloads} workload(s){bill}"
    if change.recommend == "mig":
        return (
            f"a pool of {change.gpu_model} with migProfile {change.mig_value} ({change.profile}, {change.per_gpu} per GPU) "
            f"carries {change.workloads} workload(s) from {where} on {change.gpus_after} GPU(s) "
            f"instead of {change.gpus_now}{bill}"
        )
    return (
        f"a pool of {change.gpu_model} with timeSlicingReplicas {change.per_gpu} carries {change.workloads} workload(s) "
        f"from {where} on {change.gpus_after} GPU(s) instead of {change.gpus_now}{bill}"
    )
