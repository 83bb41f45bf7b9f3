"""The simulated nodes of ``aksgpu local``: one kwok Node per node a stack's pools would have on AKS, labelled and
tainted as AKS labels and taints them, with the GPU capacity the pool's device plugin would advertise. Pure: the
resolved model in, Node manifests out (the local engine creates them with the real API server).

Where each part comes from:
- the labels: AKS's reserved system labels (naming.py cites the page), the pool's own ``labels`` and the platform's
  placement labels (``ResolvedPool.node_labels``, the same map the agent pool's ``nodeLabels`` carries);
- the taints: the pool's (GPU, spot, its own ``taints``; ``ResolvedPool.taints``), the system pool's CriticalAddonsOnly;
- the GPU resource: ``ResolvedPool.resource`` (``nvidia.com/gpu``, ``nvidia.com/mig-<profile>``, ``amd.com/gpu``; a
  time-sliced pool's count is GPUs x replicas), as capacity and allocatable;
- cpu, memory, ephemeral-storage and pods: what an AKS node of the pool's VM size shows, its vCPUs, memory, OS disk
  and maxPods less AKS's reservations (``aks_facts.node_resources``, the same figures ``aksgpu admission check``
  judges a pod's fit by).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aks_gpu.aks_facts import gpu_node_images, node_resources, node_rules
from aks_gpu.catalog import CpuArchitecture
from aks_gpu.config.models import CpuPoolConfig, StackConfig
from aks_gpu.naming import (
    AKS_ACCELERATOR_LABEL,
    AKS_AGENTPOOL_LABEL,
    AKS_CLUSTER_LABEL,
    AKS_LEGACY_AGENTPOOL_LABEL,
    AKS_MODE_LABEL,
    AKS_NODE_IMAGE_LABEL,
    AKS_OS_SKU_LABEL,
    ARCH_LABEL,
    CRITICAL_ADDONS_TAINT_KEY,
    CRITICAL_ADDONS_TAINT_VALUE,
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    KWOK_NODE_ANNOTATION,
    KWOK_NODE_ANNOTATION_VALUE,
    OS_LABEL,
    REGION_LABEL,
    SPOT_TAINT_KEY,
    SPOT_TAINT_VALUE,
    ZONE_LABEL,
)
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.resolved.node_labels import cpu_pool_labels

# What a node of a VM size with no recorded vCPUs and memory (data/node_resources.yaml) shows: enough that the
# platform's own pods and a test workload fit, so the scheduler decides by labels, taints and GPU resources alone there.
UNRECORDED_SIZE = {"cpu": "32", "memory": "256Gi", "ephemeral-storage": "512Gi"}
KUBE_ARCH: dict[CpuArchitecture, str] = {"x86_64": "amd64", "arm64": "arm64"}


@dataclass(frozen=True)
class SimulatedPool:
    """One pool as the local control plane shows it."""

    name: str
    mode: str  # "System" or "User", as AKS's mode label spells it
    vm_size: str
    os_sku: str
    zones: tuple[str, ...]
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...]
    gpu_resource: str | None
    gpu_count: int | None
    architecture: str
    max_pods: int | None  # None: the pool sets none (AKS's default)
    os_disk_type: str | None = None  # None: the pool asks none (AKS picks)
    os_disk_size_gb: int | None = None

    def resources(self) -> tuple[dict[str, str], dict[str, str]]:
        """A node's ``status.capacity`` and ``status.allocatable``: what an AKS node of the VM size shows
        (``aks_facts.node_resources``; ``UNRECORDED_SIZE`` for a size it has no figures of), and the GPU resource."""
        computed = node_resources(self.vm_size, self.max_pods, self.os_disk_type, self.os_disk_size_gb)
        if computed is not None:
            capacity, allocatable = dict(computed.capacity), dict(computed.allocatable)
        else:
            pods = str(self.max_pods or node_rules().default_max_pods)
            capacity, allocatable = {**UNRECORDED_SIZE, "pods": pods}, {**UNRECORDED_SIZE, "pods": pods}
        if self.gpu_resource is not None and self.gpu_count:
            capacity[self.gpu_resource] = allocatable[self.gpu_resource] = str(self.gpu_count)
        return capacity, allocatable


def simulated_pools(config: StackConfig, model: PlatformModel) -> tuple[SimulatedPool, ...]:
    """The system pool first, then the GPU pools in the stack file's order, then the CPU user pools."""
    system = config.cluster.system_pool
    pools = [
        SimulatedPool(
            name=system.name,
            mode="System",
            vm_size=system.vm_size,
            os_sku=system.os_sku,
            zones=tuple(system.zones),
            labels={},
            taints=({"key": CRITICAL_ADDONS_TAINT_KEY, "value": CRITICAL_ADDONS_TAINT_VALUE, "effect": "NoSchedule"},),
            gpu_resource=None,
            gpu_count=None,
            architecture="amd64",
            max_pods=None,
        )
    ]
    # A NAP pool has no node until Karpenter makes one for a pending pod: none is simulated ahead.
    pools.extend(simulated_gpu_pool(pool) for pool in model.pools if not pool.nap)
    pools.extend(simulated_cpu_pools(config.cpu_pools, [workload.type for workload in model.workloads]))
    return tuple(pools)


def simulated_cpu_pools(cpu_pools: Iterable[CpuPoolConfig], workload_types: Sequence[str]) -> tuple[SimulatedPool, ...]:
    """The CPU user pools: untainted, labelled for every workload type (the workload namespaces' node selector picks
    them for the pods that ask for no GPU), as the AgentPool's nodeLabels make them."""
    return tuple(
        SimulatedPool(
            name=cpu.name,
            mode="User",
            vm_size=cpu.vm_size,
            os_sku=cpu.os_sku,
            zones=tuple(cpu.zones),
            labels=cpu_pool_labels(cpu, workload_types),
            taints=(),
            gpu_resource=None,
            gpu_count=None,
            architecture="amd64",
            max_pods=cpu.max_pods,
        )
        for cpu in cpu_pools
    )


def simulated_gpu_pool(pool: ResolvedPool) -> SimulatedPool:
    labels = {**pool.config.labels, **pool.node_labels}
    if pool.vendor == "nvidia":
        # AKS labels its NVIDIA GPU nodes so (https://learn.microsoft.com/azure/aks/use-labels#reserved-system-labels).
        labels[AKS_ACCELERATOR_LABEL] = "nvidia"
    taints = tuple({"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints)
    if pool.config.spot and not any(t["key"] == SPOT_TAINT_KEY for t in taints):
        taints += ({"key": SPOT_TAINT_KEY, "value": SPOT_TAINT_VALUE, "effect": "NoSchedule"},)
    if pool.config.spot:
        # AKS labels spot nodes as it taints them (https://learn.microsoft.com/azure/aks/spot-node-pool).
        labels[SPOT_TAINT_KEY] = SPOT_TAINT_VALUE
    architecture = KUBE_ARCH[pool.vm_size.cpu_architecture] if pool.vm_size is not None else "amd64"
    return SimulatedPool(
        name=pool.name,
        mode="User",
        vm_size=pool.config.vm_size,
        os_sku=pool.config.os_sku,
        zones=tuple(pool.config.zones),
        labels=labels,
        taints=taints,
        gpu_resource=pool.resource.name,
        gpu_count=pool.resource.count_per_node,
        architecture=architecture,
        max_pods=pool.config.max_pods,
        os_disk_type=pool.config.os_disk_type,
        os_disk_size_gb=pool.config.os_disk_size_gb,
    )


def node_name(cluster: str, pool: str, index: int) -> str:
    """AKS's VMSS node name, ``aks-<pool>-<8 digits>-vmss<6 base-36 digits>``; the digits are a hash of the cluster
    name here (AKS's own are a hash of the cluster's identity), so a second ``up`` names the same nodes."""
    digits = int(hashlib.sha256(f"{cluster}/{pool}".encode()).hexdigest(), 16) % 10**8
    return f"aks-{pool}-{digits:08d}-vmss{_base36(index):0>6}"


def _base36(number: int) -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, rest = divmod(number, 36)
        text = alphabet[rest] + text
        if number == 0:
            return text


def zone_of(location: str, zones: tuple[str, ...], index: int) -> str:
    """AKS spreads a zonal pool's nodes over its zones in turn; a pool without zones shows zone "0"."""
    return f"{location}-{zones[index % len(zones)]}" if zones else "0"


def node_manifests(config: StackConfig, model: PlatformModel, nodes_per_pool: int) -> list[dict[str, Any]]:
    """Every simulated node: ``nodes_per_pool`` per pool, the system pool's included."""
    if nodes_per_pool < 1:
        raise ValueError("nodes_per_pool must be at least 1")
    cluster = config.cluster.name
    location = config.cluster.location or config.location
    manifests: list[dict[str, Any]] = []
    for pool in simulated_pools(config, model):
        for index in range(nodes_per_pool):
            manifests.append(_node(pool, cluster, location, index))
    return manifests


def _node(pool: SimulatedPool, cluster: str, location: str, index: int) -> dict[str, Any]:
    name = node_name(cluster, pool.name, index)
    labels = {
        **pool.labels,
        AKS_AGENTPOOL_LABEL: pool.name,
        AKS_LEGACY_AGENTPOOL_LABEL: pool.name,
        AKS_MODE_LABEL: pool.mode.lower(),
        # The newest node image AKS announces (data/gpu_node_images.yaml), in the form its label shows: no real
        # image backs a simulated node.
        AKS_NODE_IMAGE_LABEL: gpu_node_images().current_image(pool.os_sku),
        AKS_OS_SKU_LABEL: pool.os_sku,
        AKS_CLUSTER_LABEL: f"MC_{cluster}",
        INSTANCE_TYPE_LABEL: pool.vm_size,
        REGION_LABEL: location,
        ZONE_LABEL: zone_of(location, pool.zones, index),
        OS_LABEL: "linux",
        ARCH_LABEL: pool.architecture,
        HOSTNAME_LABEL: name,
    }
    capacity, allocatable = pool.resources()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(sorted(labels.items())),
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE, "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": [dict(t) for t in pool.taints]},
        "status": {"capacity": dict(capacity), "allocatable": dict(allocatable)},
    }
