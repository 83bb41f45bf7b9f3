"""``GpuNodePool``: one AKS agent pool of GPU VMs, tainted and labelled so only GPU work lands on it."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

import pulumi
from pulumi_azure_native import containerservice

from aks_gpu.aks_facts import fixed_at_creation
from aks_gpu.args import platform_model
from aks_gpu.component import GpuComponent
from aks_gpu.config.models import CpuPoolConfig
from aks_gpu.kube.workload_manifests import TolerationSpec
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import ResolvedPool
from aks_gpu.resolved.node_labels import cpu_pool_labels
from aks_gpu.specs import DevicePluginSpec, GpuPoolSpec, StorageSpec

# The Pulumi type token of an agent pool (pulumi_azure_native containerservice.AgentPool).
AGENT_POOL_TYPE = "azure-native:containerservice:AgentPool"


class GpuNodePoolArgs(TypedDict):
    pool: GpuPoolSpec
    """The pool, as one entry of a stack file's `aks-gpu:gpuPools` (snake_case here)."""
    resource_group_name: pulumi.Input[str]
    """The cluster's resource group."""
    cluster_name: pulumi.Input[str]
    """The AKS cluster the pool joins."""
    device_plugin: NotRequired[DevicePluginSpec]
    """The stack's device plugin settings: they decide the driver mode and the MIG resource name."""
    storage: NotRequired[StorageSpec]
    """The stack's storage settings: NVMe pools of the v1 flavour carry its io-engine label."""


def agent_pool_inputs(pool: ResolvedPool) -> dict[str, Any]:
    """The AgentPool inputs for a resolved pool (snake_case, as ``AgentPoolArgs`` takes them). Pure."""
    spec = pool.config
    inputs: dict[str, Any] = {
        "agent_pool_name": spec.name,
        "mode": "User",
        "vm_size": spec.vm_size,
        "os_type": "Linux",
        "os_sku": spec.os_sku,
        "os_disk_type": spec.os_disk_type,
        "max_pods": spec.max_pods,
        "node_taints": [taint.aks() for taint in pool.taints if not taint.key.startswith("kubernetes.azure.com/")],
        "node_labels": dict(pool.node_labels),
        "gpu_profile": {"driver": pool.gpu_driver},
    }
    if spec.managed_gpu:
        # Only reached where the installed SDK carries gpuProfile.nvidia (config rule managed-gpu-api-unreachable).
        inputs["gpu_profile"]["nvidia"] = {"management_mode": "Managed"}
    if not spec.spot:
        # Spot pools get no upgradeSettings at all: ARM refuses maxSurge and maxUnavailable there ("Spot pools can't
        # set max surge"), and AKS upgrades them with neither surge nodes nor a drain
        # (https://learn.microsoft.com/azure/aks/spot-node-pool#upgrade-a-spot-node-pool). data/arm_refusals.yaml.
        upgrade = spec.upgrade
        inputs["upgrade_settings"] = {
            "max_surge": upgrade.effective_max_surge,
            **({"max_unavailable": upgrade.max_unavailable} if upgrade.max_unavailable is not None else {}),
            "drain_timeout_in_minutes": upgrade.drain_timeout_in_minutes,
            "node_soak_duration_in_minutes": upgrade.node_soak_duration_in_minutes,
        }
        if spec.undrainable_node_behavior is not None:
            inputs["upgrade_settings"]["undrainable_node_behavior"] = spec.undrainable_node_behavior
    if spec.autoscaling:
        inputs |= {"enable_auto_scaling": True, "min_count": spec.min_count, "max_count": spec.max_count, "count": spec.min_count}
    else:
        inputs |= {"enable_auto_scaling": False, "count": spec.count}
    if spec.os_disk_size_gb is not None:
        inputs["os_disk_size_gb"] = spec.os_disk_size_gb
    if spec.zones:
        inputs["availability_zones"] = list(spec.zones)
    if spec.mig_profile is not None and pool.mig_partitioner == "aks":
        # With the GPU Operator owning the driver, its MIG manager partitions from the nvidia.com/mig.config label
        # instead (components/aks_gpu/resolved/model.py): AKS is not asked to partition too.
        inputs["gpu_instance_profile"] = spec.mig_profile
    if spec.spot:
        # AKS adds the spot taint itself; sending it ourselves would be refused as a reserved key.
        inputs |= {
            "scale_set_priority": "Spot",
            "scale_set_eviction_policy": spec.spot_eviction_policy,
            "spot_max_price": spec.spot_max_price,
        }
    return inputs


@dataclass(frozen=True)
class NodePoolInputs:
    """A pool resolved against the stack (its driver mode, MIG resource and node labels depend on the device plugin and
    storage settings), and the cluster it joins."""

    pool: ResolvedPool
    resource_group_name: pulumi.Input[str]
    cluster_name: pulumi.Input[str]


class GpuNodePool(GpuComponent[NodePoolInputs]):
    """A GPU agent pool: vendor taint ``<vendor>.com/gpu=present:NoSchedule``, pool/workload labels,
    autoscaling that Pulumi never fights, spot, MIG and the AKS GPU driver mode.

    Outputs carry what a workload needs to land here: node selector, tolerations, resource name and count, each known
    once the agent pool is (read from what it was created with).
    """

    agent_pool: containerservice.AgentPool
    """The AKS agent pool; another pool that must wait for this one depends on it."""
    pool_name: pulumi.Output[str]
    node_selector: pulumi.Output[dict[str, str]]
    tolerations: pulumi.Output[list[TolerationSpec]]
    """Every taint of the pool, tolerated: what a GpuWorkloadNamespace's `tolerations` takes."""
    resource_name: pulumi.Output[str]
    resource_count_per_node: pulumi.Output[int | None]

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> NodePoolInputs:
        sections = {
            "gpu_pools": [args["pool"]],
            "device_plugin": args.get("device_plugin", {}),
            "storage": args.get("storage", {}),
        }
        [pool] = platform_model(sections, f"GpuNodePool {name}", renames={"gpuPools[0]": "pool"}).pools
        return NodePoolInputs(pool, args["resource_group_name"], args["cluster_name"])

    def build(self, name: str, inputs: NodePoolInputs) -> dict[str, Any]:
        pool = inputs.pool
        self.agent_pool = containerservice.AgentPool(
            f"{name}-pool",
            resource_group_name=inputs.resource_group_name,
            resource_name_=inputs.cluster_name,
            **agent_pool_inputs(pool),
            # GpuPlatform chains the pools through the component's depends_on: AKS runs one agent pool operation per
            # cluster at a time.
            opts=self.child(
                protect=pool.config.protect,
                # Pool names are fixed, so create-before-delete always collides with the old pool.
                delete_before_replace=True,
                # What AKS fixes at creation is replaced, never sent as an update AKS refuses halfway through an up.
                replace_on_changes=fixed_at_creation(AGENT_POOL_TYPE),
                # The cluster autoscaler owns the node count once the pool exists.
                ignore_changes=["count"] if pool.config.autoscaling else None,
            ),
        )
        # Read from the agent pool, so whoever places pods by these waits for the pool to exist.
        labels = self.agent_pool.node_labels.apply(lambda created: dict(created or pool.node_labels))
        self.pool_name = labels.apply(lambda created: created[POOL_LABEL])
        self.node_selector = labels.apply(lambda created: {POOL_LABEL: created[POOL_LABEL]})
        tolerations = [cast(TolerationSpec, t.to_kube()) for t in pool.tolerations]
        self.tolerations = self.agent_pool.node_taints.apply(lambda _: tolerations)
        self.resource_name = self.agent_pool.vm_size.apply(lambda _: pool.resource.name)
        self.resource_count_per_node = self.agent_pool.vm_size.apply(lambda _: pool.resource.count_per_node)
        return {
            "poolName": self.pool_name,
            "nodeSelector": self.node_selector,
            "tolerations": self.tolerations,
            "resourceName": self.resource_name,
            "resourceCountPerNode": self.resource_count_per_node,
        }


def cpu_agent_pool_inputs(pool: CpuPoolConfig, workload_types: Iterable[str]) -> dict[str, Any]:
    """The AgentPool inputs of a CPU user pool (snake_case, as ``AgentPoolArgs`` takes them). Pure. No taint: any
    Pod may run here; autoscaled between minCount and maxCount (AgentPool enableAutoScaling/minCount/maxCount,
    https://learn.microsoft.com/rest/api/aks/agent-pools/create-or-update). nodeLabels update in place when a workload
    type is added (data/immutable_fields.yaml)."""
    inputs: dict[str, Any] = {
        "agent_pool_name": pool.name,
        "mode": "User",
        "vm_size": pool.vm_size,
        "os_type": "Linux",
        "os_sku": pool.os_sku,
        "max_pods": pool.max_pods,
        "node_labels": cpu_pool_labels(pool, workload_types),
        "enable_auto_scaling": True,
        "min_count": pool.min_count,
        "max_count": pool.max_count,
        "count": pool.min_count,
    }
    if pool.zones:
        inputs["availability_zones"] = list(pool.zones)
    return inputs
