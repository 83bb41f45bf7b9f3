"""What a stack expects of its cluster, for ``aksgpu audit --stack``: per pool its vendor, the resource and count it
exposes, the taints it sets; the namespaces its agents run in; its workload namespaces. Taken from the resolved
model, the device plugin targets and the admission policy's exemptions, never re-derived here. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aks_gpu.admission.policy import policy_exempt_namespaces
from aks_gpu.kube.workload_manifests import network_policy_manifests
from aks_gpu.naming import SPOT_TAINT_KEY, Vendor
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import plugin_targets


@dataclass(frozen=True)
class PoolExpectation:
    name: str
    vendor: Vendor
    resource: str
    count_per_node: int | None  # None when the catalog does not know the size
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect) of the taints that fence the pool off
    # AKS's Node Problem Detector runs its GPU checks only where AKS installs the driver: not on gpuDriver None (the
    # NVIDIA GPU Operator's own driver, every AMD pool). https://learn.microsoft.com/azure/aks/gpu-health-monitoring
    npd_gpu_checks: bool = True


@dataclass(frozen=True)
class StackExpectations:
    name: str
    pools: Mapping[str, PoolExpectation]
    gpu_namespaces: frozenset[str]  # where the stack (or AKS) runs agents on GPU nodes
    workload_namespaces: Mapping[str, str]  # namespace -> the GPU resource its pods request (None: no pool serves it)
    resource_group: str | None
    cluster: str | None
    # namespace -> the NetworkPolicies the stack makes there (its deny-all and the allows of workloads[].network)
    network_policies: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def resources(self) -> frozenset[str]:
        return frozenset(pool.resource for pool in self.pools.values())

    @property
    def pool_vendors(self) -> dict[str, Vendor]:
        return {name: pool.vendor for name, pool in self.pools.items()}


def expectations(model: PlatformModel, stack: str) -> StackExpectations:
    targets = plugin_targets(model)
    pools = {
        pool.name: PoolExpectation(
            name=pool.name,
            vendor=pool.vendor,
            resource=targets[pool.name].resource_name,
            count_per_node=targets[pool.name].count_per_node,
            # AKS adds the spot taint itself; it keeps pods off but is no GPU fence, so it is not asked for.
            taints=tuple(
                (taint.key, taint.value, taint.effect)
                for taint in pool.taints
                if taint.key != SPOT_TAINT_KEY and taint.effect in ("NoSchedule", "NoExecute")
            ),
            npd_gpu_checks=pool.gpu_driver != "None",
        )
        for pool in model.pools
    }
    cluster = model.cluster
    return StackExpectations(
        name=stack,
        pools=pools,
        gpu_namespaces=frozenset(policy_exempt_namespaces(model)),
        workload_namespaces={workload.name: workload.resource_name or "" for workload in model.workloads},
        resource_group=cluster.resource_group if cluster else None,
        cluster=cluster.name if cluster else None,
        network_policies={
            workload.name: frozenset(policy["metadata"]["name"] for policy in network_policy_manifests(workload.config))
            for workload in model.workloads
        },
    )
