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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from aks_gpu.advise.metrics import NO_MIG_ACTIVITY
from aks_gpu.advise.usage import IDLE_ACTIVITY, IdleGpu, Usage, WorkloadUsage, active_hours_text
from aks_gpu.audit.prices import Prices
from aks_gpu.catalog import Catalog, GpuModel, MigInstance

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


@dataclass(frozen=True)
class NodeFacts:
    """What the advice knows of a node: its pool, VM size and region (from the stack, or kube-state-metrics)."""

    pool: str | None = None
    vm_size: str | None = None
    region: str | None = None
    min_count: int | None = None  # the pool's minCount, where the stack says (None: not known, or no autoscaling)


@dataclass(frozen=True)
class Pricing:
    """How the advice prices a GPU: the node's VM size and region, then the price table (``audit.prices``)."""

    prices: Prices
    catalog: Catalog
    nodes: Mapping[str, NodeFacts] = field(default_factory=dict)  # node name -> facts
    pools: Mapping[str, NodeFacts] = field(default_factory=dict)  # AKS pool name -> facts (from the stack)

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

    def gpu_month(self, host: str) -> float | None:
        """The monthly list price of one GPU on ``host`` (its VM's price over its GPUs), or None where unknown."""
        facts = self.node(host)
        size = self.catalog.vm_size(facts.vm_size) if facts.vm_size else None
        month = self.node_month(host)
        if size is None or month is None:
            return None
        return month / size.gpu_count

    def unpriced(self, host: str) -> str | None:
        """Why a GPU on ``host`` has no price (None where it has one): the VM size or region unknown, or the price
        table without that size in that region."""
        facts = self.node(host)
        if not facts.vm_size or not facts.region:
            missing = " and ".join(what for what, known in (("VM size", facts.vm_size), ("region", facts.region)) if not known)
            return f"unpriced: the {missing} of {host} not known (name the stack with --stack)"
        if self.catalog.vm_size(facts.vm_size) is None or self.prices.monthly(facts.region, facts.vm_size) is None:
            return f"unpriced: {facts.vm_size} in {facts.region} (not in the price table)"
        return None


@dataclass(frozen=True)
class Recommendation:
    usage: WorkloadUsage
    recommend: Recommend
    profile: str | None  # the MIG instance (1g.10gb) for mig; None otherwise
    mig_value: str | None  # the pool's gpuInstanceProfile (MIG1g) for mig
    per_gpu: int  # workloads like it that one GPU carries after the change (0 for release)
    pool: str | None
    gpu_month: float | None
    why: str
    unpriced: str | None = None  # why gpu_month is None
    sized_as: SizedAs = "batch"

    @property
    def gpus_held(self) -> float:
        """The GPUs it holds now: a MIG instance is the share of a GPU its profile's pool gives each (1/7 for 1g)."""
        instance = _instance(self.usage.model, self.usage.mig_profile) if self.usage.mig_profile else None
        return self.usage.gpus / instance.max_instances if instance else float(self.usage.gpus)

    @property
    def monthly_saving(self) -> float | None:
        """This pod's share of what the change saves: the GPUs it holds, less its share of the GPU it moves to (below
        0 where it sizes a MIG instance up)."""
        if self.gpu_month is None or self.recommend == "keep":
            return None if self.recommend != "keep" else 0.0
        kept = 0.0 if self.recommend == "release" else 1 / self.per_gpu
        return round(self.gpu_month * (self.gpus_held - kept), 2)


@dataclass(frozen=True)
class PoolChange:
    """One change to a pool and what it frees: the workloads it carries, the GPUs they hold now and after."""

    pool: str | None
    gpu_model: str
    recommend: Recommend
    profile: str | None
    mig_value: str | None
    per_gpu: int
    workloads: int
    gpus_now: int
    gpus_after: int
    gpus_per_node: int | None
    monthly_saving: float | None

    @property
    def gpus_freed(self) -> int:
        return max(0, self.gpus_now - self.gpus_after)

    @property
    def nodes_freed(self) -> int | None:
        if not self.gpus_per_node:
            return None
        return self.gpus_freed // self.gpus_per_node


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
                    gpu_month=pricing.gpu_month(host),
                    why=why,
                    unpriced=pricing.unpriced(host),
                    sized_as=how,
                )
            )
    return Advice(
        usage=usage,
        recommendations=tuple(recommendations),
        pool_changes=_pool_changes(recommendations, pricing),
        idle_capacity=_idle_capacity(usage, pricing),
    )


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


def _pool_changes(recommendations: Sequence[Recommendation], pricing: Pricing) -> tuple[PoolChange, ...]:
    by_change: dict[tuple[str, str, str, str, int], list[Recommendation]] = defaultdict(list)
    for one in recommendations:
        if one.recommend != "keep":
            key = (one.pool or "", one.usage.model.key, one.recommend, one.profile or "", one.per_gpu)
            by_change[key].append(one)
    changes: list[PoolChange] = []
    for (pool, model_key, recommend, profile, per_gpu), members in sorted(by_change.items()):
        gpus_now = math.ceil(sum(one.gpus_held for one in members) - 1e-9)
        gpus_after = 0 if recommend == "release" else math.ceil(len(members) / per_gpu)
        prices = [one.gpu_month for one in members]
        saving = None
        if all(price is not None for price in prices) and prices:
            per_gpu_price = sum(price for price in prices if price is not None) / len(prices)
            saving = round((gpus_now - gpus_after) * per_gpu_price, 2)
        size_name = pricing.pools[pool].vm_size if pool in pricing.pools else pricing.node(members[0].usage.hosts[0]).vm_size
        size = pricing.catalog.vm_size(size_name) if size_name else None
        changes.append(
            PoolChange(
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
                monthly_saving=saving,
            )
        )
    return tuple(changes)


def pool_change_text(change: PoolChange) -> str:
    """The change in words, as a person would make it in the stack."""
    where = f"pool {change.pool}" if change.pool else f"the {change.gpu_model} pool"
    freed = change.gpus_now - change.gpus_after
    nodes = change.nodes_freed
    shrink = f"; {where} could shrink by {nodes} node(s)" if nodes else ""
    if not freed:
        shrink = "; frees no GPU until the pool carries more workloads like these"
    if change.recommend == "release":
        return f"{where}: release {freed} idle GPU(s) of {change.workloads} workload(s){shrink}"
    if change.recommend == "mig":
        return (
            f"a pool of {change.gpu_model} with migProfile {change.mig_value} ({change.profile}, {change.per_gpu} per GPU) "
            f"carries {change.workloads} workload(s) from {where} on {change.gpus_after} GPU(s) "
            f"instead of {change.gpus_now}{shrink}"
        )
    return (
        f"a pool of {change.gpu_model} with timeSlicingReplicas {change.per_gpu} carries {change.workloads} workload(s) "
        f"from {where} on {change.gpus_after} GPU(s) instead of {change.gpus_now}{shrink}"
    )
