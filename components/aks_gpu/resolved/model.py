"""The GPU platform model: a validated stack config resolved against the catalog. Pure, computed once.

Every consumer reads this model instead of re-deriving it: the Azure and Kubernetes components, the quota
and admission rules, and the post-deploy checks. In particular ``schedulable_resource`` is the one
answer to "what does this pool expose, and how many per node?" (MIG math, MIG strategy, time-slicing).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from aks_gpu.catalog import Catalog, GpuModel, VmSize, load_catalog
from aks_gpu.config.models import ClusterConfig, GpuPoolConfig, PlatformConfig, StackConfig, WorkloadConfig
from aks_gpu.naming import (
    ACCELERATOR_LABEL,
    CRITICAL_ADDONS_TAINT_KEY,
    GPU_TAINT_VALUE,
    MIG_CONFIG_LABEL,
    MIG_RESOURCE_PREFIX,
    POOL_LABEL,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    SPOT_TAINT_KEY,
    SPOT_TAINT_VALUE,
    VENDORS,
    WORKLOAD_LABEL,
    Vendor,
    gpu_taint_key,
    serves_label,
    vendor_resource,
)
from aks_gpu.resolved.node_labels import nvme_node_labels, plugin_node_labels

MigStrategy = Literal["single", "mixed"]
# Who cuts a MIG pool's GPUs into instances: AKS from the agent pool's gpuInstanceProfile (with the driver it
# installs), or the GPU Operator's MIG manager from the node's nvidia.com/mig.config label (operator-owned driver).
MigPartitioner = Literal["aks", "gpu-operator"]
# The mig-parted config names the MIG manager reads, one per instance profile: NVIDIA's default config uses the
# same "all-<profile>" names (assets/state-mig-manager/0400_configmap.yaml in NVIDIA/gpu-operator); the operator
# values (kube/gpu_operator.py) ship exactly these configs, so the label never names a config that is not there.
MIG_CONFIG_PREFIX = "all-"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, text: str) -> Taint:
        """``key=value:Effect`` as AKS's nodeTaints list spells them."""
        key_value, _, effect = text.rpartition(":")
        key, _, value = key_value.partition("=")
        return cls(key=key, value=value, effect=effect)

    def aks(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"

    def toleration(self) -> Toleration:
        return Toleration(key=self.key, operator="Equal", value=self.value, effect=self.effect)


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: Literal["Equal", "Exists"]
    effect: str
    value: str | None = None

    def to_kube(self) -> dict[str, str]:
        """The toleration as a pod spec carries it (camelCase, no empty value for Exists)."""
        spec = {"key": self.key, "operator": self.operator, "effect": self.effect}
        if self.operator == "Equal" and self.value is not None:
            spec["value"] = self.value
        return spec


@dataclass(frozen=True)
class SchedulableResource:
    """What one node of a pool advertises to the scheduler: ``name`` with ``count_per_node`` units."""

    name: str
    count_per_node: int | None  # None when the pool's GPU facts are unknown


@dataclass(frozen=True)
class ResolvedPool:
    config: GpuPoolConfig
    vendor: Vendor
    vm_size: VmSize | None
    gpu_model: GpuModel | None
    gpus_per_node: int | None
    mig_profile: str | None  # the NVIDIA instance name, e.g. "1g.10gb"
    mig_instances_per_gpu: int | None
    time_slicing_replicas: int | None
    resource: SchedulableResource
    taints: tuple[Taint, ...]
    node_labels: dict[str, str]
    gpu_driver: Literal["Install", "None"]
    # Who partitions a MIG pool's GPUs; None without MIG.
    mig_partitioner: MigPartitioner | None = None
    # agentPool: an AKS agent pool; nap: a Karpenter NodePool and AKSNodeClass (azure/node_provisioning.py).
    provisioning: Literal["agentPool", "nap"] = "agentPool"

    @property
    def nap(self) -> bool:
        return self.provisioning == "nap"

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def workload(self) -> str:
        return self.config.workload

    @property
    def node_selector(self) -> dict[str, str]:
        """The label that pins a pod to this pool and nothing else."""
        return {POOL_LABEL: self.name}

    @property
    def gpu_taint(self) -> Taint:
        """The GPU taint of the pool's nodes: ``<vendor>.com/gpu``, or the slice's own resource under the mixed MIG
        strategy (``naming.gpu_taint_key``)."""
        return next(t for t in self.taints if t.key == gpu_taint_key(self.vendor, self.resource.name))

    @property
    def tolerations(self) -> tuple[Toleration, ...]:
        """What a pod must tolerate to land here: every taint the pool's nodes carry (spot included)."""
        return tuple(t.toleration() for t in self.taints)

    @property
    def expected_mig_devices_per_node(self) -> int | None:
        if self.mig_instances_per_gpu is None or self.gpus_per_node is None:
            return None
        return self.mig_instances_per_gpu * self.gpus_per_node


@dataclass(frozen=True)
class ResolvedWorkload:
    config: WorkloadConfig
    pools: tuple[ResolvedPool, ...]
    resource_name: str | None  # None when no pool serves the workload (refused by the rules)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def type(self) -> str:
        return self.config.type

    @property
    def quota_key(self) -> str | None:
        # Extended resources accept only the requests. prefix in a ResourceQuota.
        return f"requests.{self.resource_name}" if self.resource_name else None

    @property
    def tolerations(self) -> tuple[Toleration, ...]:
        return distinct_tolerations(self.pools)

    @property
    def kube_tolerations(self) -> list[dict[str, str]]:
        """``tolerations`` as a pod spec carries them."""
        return [toleration.to_kube() for toleration in self.tolerations]

    @property
    def node_selector(self) -> dict[str, str]:
        """One pool: pin to it. Several pools of the same type: select by workload label."""
        if len(self.pools) == 1:
            return self.pools[0].node_selector
        return {WORKLOAD_LABEL: self.type}


@dataclass(frozen=True)
class PlatformModel:
    config: PlatformConfig
    pools: tuple[ResolvedPool, ...]
    workloads: tuple[ResolvedWorkload, ...]

    @property
    def cluster(self) -> ClusterConfig | None:
        """The cluster settings when the model came from a whole stack; None for a component's sections."""
        return self.config.cluster if isinstance(self.config, StackConfig) else None

    @property
    def mig_strategy(self) -> MigStrategy:
        return self.config.device_plugin.mig_strategy

    def pool(self, name: str) -> ResolvedPool:
        return next(p for p in self.pools if p.name == name)

    def pools_of(self, vendor: Vendor) -> tuple[ResolvedPool, ...]:
        return tuple(p for p in self.pools if p.vendor == vendor)

    @property
    def vendors(self) -> tuple[Vendor, ...]:
        return tuple(v for v in VENDORS if self.pools_of(v))

    @property
    def nvme_pools(self) -> tuple[ResolvedPool, ...]:
        return tuple(p for p in self.pools if p.config.nvme_cache)


# ---------------------------------------------------------------- placement of a set of pools


def distinct_tolerations(pools: Iterable[ResolvedPool]) -> tuple[Toleration, ...]:
    """Every taint the pools' nodes carry, tolerated once each (first occurrence wins, order kept)."""
    seen: dict[Toleration, None] = {}
    for pool in pools:
        for toleration in pool.tolerations:
            seen.setdefault(toleration)
    return tuple(seen)


# The platform's agents tolerate the quarantine taint whatever remediation.mode says: a node quarantined by the engine,
# or by a person with `kubectl taint`, keeps its device plugin, exporters and health monitors, so its fault stays
# visible and its recovery can be seen. Workload pods get pool.tolerations, which never include it.
QUARANTINE_TOLERATION = Toleration(QUARANTINE_TAINT_KEY, "Exists", QUARANTINE_TAINT_EFFECT)
# The system pool's CriticalAddonsOnly=true:NoSchedule (components/aks_gpu/azure/cluster.py), for the platform's
# controllers that run there.
SYSTEM_POOL_TOLERATION = Toleration(CRITICAL_ADDONS_TAINT_KEY, "Exists", "NoSchedule")


def tolerations_for(pools: Iterable[ResolvedPool]) -> list[dict[str, str]]:
    """What the platform's agents on these pools' nodes tolerate: ``distinct_tolerations`` as a pod spec carries them,
    and the quarantine taint."""
    return [toleration.to_kube() for toleration in (*distinct_tolerations(pools), QUARANTINE_TOLERATION)]


def node_affinity_for(pools: Iterable[ResolvedPool]) -> dict[str, Any]:
    """Required node affinity on the pool label: the pods land on these pools' nodes and nowhere else."""
    names = sorted({pool.name for pool in pools})
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": names}]}]
            }
        }
    }


# ---------------------------------------------------------------- resolution


def gpu_facts(pool: GpuPoolConfig, catalog: Catalog) -> tuple[VmSize | None, GpuModel | None, int | None]:
    """The VM size, GPU model and GPUs per node of a pool: the catalog first, the pool's own facts second."""
    return catalog.gpu_facts(pool.vm_size, pool.gpu_model, pool.gpu_count)


def effective_time_slicing(pool: GpuPoolConfig, stack_replicas: int | None) -> int | None:
    """Time-slicing applies to NVIDIA pools without MIG; the pool's own setting wins over the stack's."""
    if pool.vendor != "nvidia" or pool.mig_profile is not None:
        return None
    return pool.time_slicing_replicas or stack_replicas


def schedulable_resource(
    pool: GpuPoolConfig,
    strategy: MigStrategy,
    catalog: Catalog,
    stack_time_slicing: int | None = None,
) -> SchedulableResource:
    """The resource name and count per node that a pool exposes once its device plugin runs.

    - no MIG: ``<vendor>.com/gpu`` x GPUs per node (x time-slicing replicas when shared);
    - MIG, ``single`` strategy: ``nvidia.com/gpu`` x GPUs x instances per GPU (ND96asr_v4 + MIG1g -> 56);
    - MIG, ``mixed`` strategy: ``nvidia.com/mig-<profile>`` (e.g. ``nvidia.com/mig-1g.10gb``), same count.
    """
    _, model, gpus = gpu_facts(pool, catalog)
    base = vendor_resource(pool.vendor)
    if pool.mig_profile is not None:
        instance = model.mig.get(pool.mig_profile) if model else None
        count = instance.max_instances * gpus if instance and gpus else None
        if strategy == "mixed":
            name = f"{MIG_RESOURCE_PREFIX}{instance.profile if instance else 'unknown'}"
            return SchedulableResource(name=name, count_per_node=count)
        return SchedulableResource(name=base, count_per_node=count)
    replicas = effective_time_slicing(pool, stack_time_slicing)
    if gpus is None:
        return SchedulableResource(name=base, count_per_node=None)
    return SchedulableResource(name=base, count_per_node=gpus * (replicas or 1))


def resolve_pool(pool: GpuPoolConfig, config: PlatformConfig, catalog: Catalog) -> ResolvedPool:
    size, model, gpus = gpu_facts(pool, catalog)
    instance = model.mig.get(pool.mig_profile) if (model and pool.mig_profile) else None
    resource = schedulable_resource(pool, config.device_plugin.mig_strategy, catalog, config.device_plugin.time_slicing_replicas)
    taints = [Taint(key=gpu_taint_key(pool.vendor, resource.name), value=GPU_TAINT_VALUE, effect="NoSchedule")]
    taints += [Taint.parse(text) for text in pool.taints]
    if pool.spot:
        # AKS adds this taint to every spot node by itself; workloads must tolerate it too.
        taints.append(Taint(key=SPOT_TAINT_KEY, value=SPOT_TAINT_VALUE, effect="NoSchedule"))
    driver = pool.effective_gpu_driver(config.device_plugin.mode)
    partitioner: MigPartitioner | None = None
    if instance is not None:
        # AKS partitions MIG from gpuInstanceProfile together with the driver it installs ("Azure configures the GPU
        # hardware, installs and maintains the required driver stack", https://learn.microsoft.com/azure/aks/
        # concepts-gpu-partitioning#managed-multi-instance-gpu-mig-on-aks). With the GPU Operator owning the driver,
        # the AKS docs say nothing of gpuInstanceProfile; the operator's MIG manager owns the layout instead
        # (https://learn.microsoft.com/azure/aks/best-practices-ml-ops#partition-a100-and-h100-gpus-with-mig), driven by
        # the nvidia.com/mig.config node label. So: the operator partitions exactly when it owns the driver.
        operator_owned = pool.vendor == "nvidia" and config.device_plugin.mode == "gpu-operator" and driver == "None"
        partitioner = "gpu-operator" if operator_owned else "aks"
    platform_labels = {
        ACCELERATOR_LABEL: pool.vendor,
        WORKLOAD_LABEL: pool.workload,
        serves_label(pool.workload): "true",
        POOL_LABEL: pool.name,
        # Azure Container Storage v1 runs its io-engine only on nodes carrying its label.
        **(nvme_node_labels(config.storage.flavour) if pool.nvme_cache else {}),
        # Which device plugin config (both modes) and which GPU Operator operands apply to this pool.
        **plugin_node_labels(pool, config),
        **({MIG_CONFIG_LABEL: f"{MIG_CONFIG_PREFIX}{instance.profile}"} if instance and partitioner == "gpu-operator" else {}),
    }
    # The config rules refuse a pool label on a platform key; should one get here anyway, the platform's value wins.
    labels = {**pool.labels, **platform_labels}
    return ResolvedPool(
        config=pool,
        vendor=pool.vendor,
        vm_size=size,
        gpu_model=model,
        gpus_per_node=gpus,
        mig_profile=instance.profile if instance else None,
        mig_instances_per_gpu=instance.max_instances if instance else None,
        time_slicing_replicas=effective_time_slicing(pool, config.device_plugin.time_slicing_replicas),
        resource=resource,
        taints=tuple(taints),
        node_labels=labels,
        gpu_driver=driver,
        mig_partitioner=partitioner,
        provisioning=pool.effective_provisioning(config.cluster if isinstance(config, StackConfig) else None),
    )


def workload_pools(workload: WorkloadConfig, pools: tuple[ResolvedPool, ...]) -> tuple[ResolvedPool, ...]:
    if workload.pool is not None:
        return tuple(p for p in pools if p.name == workload.pool)
    return tuple(p for p in pools if p.workload == workload.type)


def resolve(config: PlatformConfig, catalog: Catalog | None = None) -> PlatformModel:
    catalog = catalog or load_catalog()
    pools = tuple(resolve_pool(pool, config, catalog) for pool in config.gpu_pools)
    workloads = []
    for workload in config.workloads:
        targets = workload_pools(workload, pools)
        names = {p.resource.name for p in targets}
        workloads.append(
            ResolvedWorkload(
                config=workload,
                pools=targets,
                resource_name=next(iter(names)) if len(names) == 1 else None,
            )
        )
    return PlatformModel(config=config, pools=pools, workloads=tuple(workloads))
