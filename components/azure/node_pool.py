"""``GpuNodePool``: one AKS agent pool of GPU VMs, tainted and labelled so only GPU work lands on it."""

from typing import Any, NotRequired, TypedDict

import pulumi
from pulumi_azure_native import containerservice

from components.args import platform_model
from components.resolved.model import ResolvedPool
from components.specs import DevicePluginSpec, GpuPoolSpec, StorageSpec


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
        # instead (components/model.py): AKS is not asked to partition too.
        inputs["gpu_instance_profile"] = spec.mig_profile
    if spec.spot:
        # AKS adds the spot taint itself; sending it ourselves would be refused as a reserved key.
        inputs |= {
            "scale_set_priority": "Spot",
            "scale_set_eviction_policy": spec.spot_eviction_policy,
            "spot_max_price": spec.spot_max_price,
        }
    return inputs


class GpuNodePool(pulumi.ComponentResource):
    """A GPU agent pool: vendor taint ``<vendor>.com/gpu=present:NoSchedule``, pool/workload labels,
    autoscaling that Pulumi never fights, spot, MIG and the AKS GPU driver mode.

    Outputs carry what a workload needs to land here: node selector, tolerations, resource name and count.
    """

    agent_pool: containerservice.AgentPool
    """The AKS agent pool; another pool that must wait for this one depends on it."""
    pool_name: pulumi.Output[str]
    node_selector: pulumi.Output[dict[str, str]]
    tolerations: pulumi.Output[list[dict[str, str]]]
    resource_name: pulumi.Output[str]
    resource_count_per_node: pulumi.Output[int | None]

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        sections = {
            "gpu_pools": [args["pool"]],
            "device_plugin": args.get("device_plugin", {}),
            "storage": args.get("storage", {}),
        }
        [pool] = platform_model(sections, f"GpuNodePool {name}", renames={"gpuPools[0]": "pool"}).pools
        super().__init__("aks-gpu:index:GpuNodePool", name, None, opts)
        self.agent_pool = containerservice.AgentPool(
            f"{name}-pool",
            resource_group_name=args["resource_group_name"],
            resource_name_=args["cluster_name"],
            **agent_pool_inputs(pool),
            opts=pulumi.ResourceOptions(
                parent=self,
                # Children do not inherit a component's depends_on: the agent pool carries it (GpuPlatform chains the
                # pools this way, since AKS runs one agent pool operation per cluster at a time).
                depends_on=opts.depends_on if opts else None,
                protect=pool.config.protect,
                # Pool names are fixed, so create-before-delete always collides with the old pool.
                delete_before_replace=True,
                # The cluster autoscaler owns the node count once the pool exists.
                ignore_changes=["count"] if pool.config.autoscaling else None,
            ),
        )
        self.pool_name = pulumi.Output.from_input(pool.name)
        self.node_selector = pulumi.Output.from_input(pool.node_selector)
        self.tolerations = pulumi.Output.from_input([t.to_kube() for t in pool.tolerations])
        self.resource_name = pulumi.Output.from_input(pool.resource.name)
        self.resource_count_per_node = pulumi.Output.from_input(pool.resource.count_per_node)
        self.register_outputs(
            {
                "poolName": self.pool_name,
                "nodeSelector": self.node_selector,
                "tolerations": self.tolerations,
                "resourceName": self.resource_name,
                "resourceCountPerNode": self.resource_count_per_node,
            }
        )
