"""``GpuPlatform``: the whole GPU stack from one resolved model, as ``__main__.py`` and other stacks use it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.azure import GpuCluster, GpuClusterArgs, GpuNodePool, GpuNodePoolArgs
from components.kube.admission_policy import GpuAdmissionPolicy, GpuAdmissionPolicyArgs
from components.kube.device_plugin import GpuDevicePlugin, GpuDevicePluginArgs
from components.kube.workload_namespace import GpuWorkloadNamespace, GpuWorkloadNamespaceArgs
from components.model import PlatformModel
from components.storage import NvmeCache, NvmeCacheArgs


@dataclass(frozen=True)
class GpuPlatformArgs:
    model: PlatformModel


class GpuPlatform(pulumi.ComponentResource):
    """Cluster, GPU pools and what runs inside the cluster for them, composed in dependency order."""

    cluster: GpuCluster
    pools: dict[str, GpuNodePool]
    device_plugin: GpuDevicePlugin
    nvme_cache: NvmeCache
    admission: GpuAdmissionPolicy
    workloads: dict[str, GpuWorkloadNamespace]
    kubeconfig: pulumi.Output[str]
    pool_outputs: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("aks-gpu:index:GpuPlatform", name, None, opts)
        model = args.model
        config = model.config
        self.cluster = GpuCluster(
            f"{name}-cluster",
            GpuClusterArgs(cluster=config.cluster, location=config.location),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.pools = {
            pool.name: GpuNodePool(
                f"{name}-{pool.name}",
                GpuNodePoolArgs(
                    pool=pool,
                    resource_group_name=self.cluster.resource_group_name,
                    cluster_name=self.cluster.cluster_name,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for pool in model.pools
        }
        pools_ready = list(self.pools.values())
        self.device_plugin = GpuDevicePlugin(
            f"{name}-gpu",
            GpuDevicePluginArgs(model=model),
            pulumi.ResourceOptions(parent=self, provider=self.cluster.provider, depends_on=pools_ready),
        )
        self.nvme_cache = NvmeCache(
            f"{name}-nvme",
            NvmeCacheArgs(
                model=model,
                resource_group_name=self.cluster.resource_group_name,
                cluster_name=self.cluster.cluster_name,
            ),
            # After the pools: v1 wants its io-engine label on them before the extension installs.
            opts=pulumi.ResourceOptions(parent=self, provider=self.cluster.provider, depends_on=pools_ready),
        )
        gpu_resources = tuple(sorted({pool.resource.name for pool in model.pools}))
        self.workloads = {
            workload.name: GpuWorkloadNamespace(
                f"{name}-{workload.name}",
                GpuWorkloadNamespaceArgs(workload=workload, platform_gpu_resources=gpu_resources),
                opts=pulumi.ResourceOptions(parent=self, provider=self.cluster.provider),
            )
            for workload in model.workloads
        }
        self.admission = GpuAdmissionPolicy(
            f"{name}-admission",
            GpuAdmissionPolicyArgs(model=model),
            opts=pulumi.ResourceOptions(parent=self, provider=self.cluster.provider),
        )
        self.kubeconfig = self.cluster.kubeconfig
        self.pool_outputs = pulumi.Output.from_input(
            {
                pool.name: {
                    "nodeSelector": pool.node_selector,
                    "tolerations": [t.to_kube() for t in pool.tolerations],
                    "resourceName": pool.resource.name,
                    "resourceCountPerNode": pool.resource.count_per_node,
                    "vmSize": pool.config.vm_size,
                    "migProfile": pool.mig_profile,
                    "migStrategy": model.mig_strategy if pool.mig_profile else None,
                }
                for pool in model.pools
            }
        )
        self.register_outputs(
            {"kubeconfig": self.kubeconfig, "pools": self.pool_outputs, "devicePlugin": self.device_plugin.targets}
        )
