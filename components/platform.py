"""``GpuPlatform``: the whole GPU stack from one args object (a ``StackSpec``), as ``__main__.py`` and other
stacks use it."""

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, cast

import pulumi
from pydantic.alias_generators import to_camel

from components.args import platform_sections, spec_of, stack_model
from components.azure import GpuCluster, GpuNodePool
from components.kube.admission_policy import GpuAdmissionPolicy, GpuAdmissionPolicyArgs
from components.kube.device_plugin import GpuDevicePlugin
from components.kube.smoke_job import GpuValidation
from components.kube.workload_manifests import TolerationSpec, toleration
from components.kube.workload_namespace import GpuWorkloadNamespace, namespace_args
from components.monitoring.component import GpuMonitoring
from components.resolved.model import PlatformModel, ResolvedPool
from components.specs import StackSpec
from components.storage.nvme_cache import NvmeCache


class PoolOutput(TypedDict):
    """What a workload needs to land on one GPU pool."""

    node_selector: dict[str, str]
    tolerations: list[TolerationSpec]
    resource_name: str
    """The extended resource one node advertises: nvidia.com/gpu, amd.com/gpu or nvidia.com/mig-<profile>."""
    resource_count_per_node: int
    """How many of it one node advertises (0 when the pool's GPU count is unknown)."""
    vm_size: str
    workload: str
    """The workload type the pool serves (a team namespace of this type may use it)."""
    mig_profile: NotRequired[str]
    mig_strategy: NotRequired[str]


def pool_output(pool: ResolvedPool, model: PlatformModel) -> PoolOutput:
    output: PoolOutput = {
        "node_selector": dict(pool.node_selector),
        "tolerations": [toleration(t.to_kube()) for t in pool.tolerations],
        "resource_name": pool.resource.name,
        "resource_count_per_node": pool.resource.count_per_node or 0,
        "vm_size": pool.config.vm_size,
        "workload": pool.workload,
    }
    if pool.mig_profile:
        output["mig_profile"] = pool.mig_profile
        output["mig_strategy"] = model.mig_strategy
    return output


class GpuPlatform(pulumi.ComponentResource):
    """Cluster, GPU pools and what runs inside the cluster for them, composed in dependency order: the GPU
    device plugin, the NVMe cache, one namespace per workload type and the GPU admission policy."""

    kubeconfig: pulumi.Output[str]
    """Exec (kubelogin) kubeconfig of the cluster; a secret."""
    cluster_name: pulumi.Output[str]
    resource_group_name: pulumi.Output[str]
    cluster_id: pulumi.Output[str]
    """The cluster's ARM id: the clusterIdentifier of a Kubernetes provider built from the kubeconfig, so a
    rotated kubeconfig updates that provider instead of replacing it and every object it manages."""
    pools: pulumi.Output[dict[str, PoolOutput]]
    """Per GPU pool: node selector, tolerations, resource name and count per node."""
    namespaces: pulumi.Output[list[str]]
    """The workload namespaces."""

    def __init__(self, name: str, args: StackSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        model = stack_model(args, f"GpuPlatform {name}")
        super().__init__("aks-gpu:index:GpuPlatform", name, None, opts)
        cluster = model.cluster
        if cluster is None:  # stack_model validated a StackConfig: it always has one
            raise TypeError("a stack model without a cluster")
        sections = platform_sections(model.config)
        # The parts, for Python callers (not outputs of the package: other languages see the outputs below).
        monitoring, stack_cluster = model.config.monitoring, cluster
        # Managed Prometheus is a cluster setting; an adopted cluster keeps whatever its owner set.
        managed_prometheus = monitoring.enabled and monitoring.engine == "azure-monitor" and bool(model.pools)
        self.cluster: GpuCluster = GpuCluster(
            f"{name}-cluster",
            {"cluster": spec_of(cluster), "location": args["location"], "azure_monitor_metrics": managed_prometheus},
            opts=pulumi.ResourceOptions(parent=self),
        )
        # One pool after the other, in the stack file's order: AKS runs one agent pool operation per cluster at a
        # time and answers a second concurrent PUT with 409 OperationNotAllowed ("Another agentpool operation
        # (<pool> - Creating) is in progress", e.g. https://github.com/cilium/cilium/issues/25944;
        # https://aka.ms/aks-pending-operation). dependsOn orders creates and updates alike; URNs do not change.
        self.node_pools: dict[str, GpuNodePool] = {}
        previous: GpuNodePool | None = None
        for pool in model.pools:
            previous = self.node_pools[pool.name] = GpuNodePool(
                f"{name}-{pool.name}",
                {
                    "pool": spec_of(pool.config),
                    "resource_group_name": self.cluster.resource_group_name,
                    "cluster_name": self.cluster.cluster_name,
                    "device_plugin": sections.get("device_plugin", {}),
                    "storage": sections.get("storage", {}),
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[previous.agent_pool] if previous else None),
            )
        pools_ready: list[pulumi.Resource] = list(self.node_pools.values())
        in_cluster = pulumi.ResourceOptions(parent=self, provider=self.cluster.provider)
        self.device_plugin: GpuDevicePlugin = GpuDevicePlugin(
            f"{name}-gpu",
            {**sections, "kubeconfig": self.cluster.kubeconfig},
            pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=pools_ready)),
        )
        self.validation: GpuValidation = GpuValidation(
            f"{name}-smoke",
            sections,
            # The smoke Jobs need the plugin to advertise the GPU resource first.
            pulumi.ResourceOptions.merge(
                in_cluster,
                pulumi.ResourceOptions(depends_on=[*self.device_plugin.daemonsets, *self.device_plugin.releases]),
            ),
        )
        self.nvme_cache: NvmeCache = NvmeCache(
            f"{name}-nvme",
            {
                **sections,
                "resource_group_name": self.cluster.resource_group_name,
                "cluster_name": self.cluster.cluster_name,
            },
            # After the pools: v1 wants its io-engine label on them before the extension installs.
            opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=pools_ready)),
        )
        gpu_resources = tuple(sorted({pool.resource.name for pool in model.pools}))
        self.workloads: dict[str, GpuWorkloadNamespace] = {
            workload.name: GpuWorkloadNamespace(
                f"{name}-{workload.name}", namespace_args(workload, gpu_resources), opts=in_cluster
            )
            for workload in model.workloads
        }
        # The cluster's network policy tells the policy whether Calico's namespaces are AKS's own (exempt).
        cluster = model.cluster
        admission_args = cast(GpuAdmissionPolicyArgs, dict(sections))
        if cluster is not None:
            admission_args["network_policy"] = cluster.network_policy
        self.admission: GpuAdmissionPolicy = GpuAdmissionPolicy(f"{name}-admission", admission_args, opts=in_cluster)
        self.monitoring: GpuMonitoring = GpuMonitoring(
            f"{name}-monitoring",
            {
                **sections,
                "resource_group_name": stack_cluster.resource_group,
                "cluster_name": stack_cluster.name,
                "cluster_id": self.cluster.cluster_id,
                "location": stack_cluster.location or args["location"],
                "cluster_existing": stack_cluster.existing,
                "tags": dict(stack_cluster.tags),
            },
            # The exporters go into the device plugin's namespace, on the GPU pools' nodes.
            opts=pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[*pools_ready, self.device_plugin])),
        )

        self.kubeconfig = self.cluster.kubeconfig
        self.cluster_name = self.cluster.cluster_name
        self.resource_group_name = self.cluster.resource_group_name
        self.cluster_id = self.cluster.cluster_id
        self.pools = pulumi.Output.from_input({pool.name: pool_output(pool, model) for pool in model.pools})
        self.namespaces = pulumi.Output.from_input([workload.name for workload in model.workloads])
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "clusterName": self.cluster_name,
                "resourceGroupName": self.resource_group_name,
                "clusterId": self.cluster_id,
                "pools": self.pools,
                "namespaces": self.namespaces,
            }
        )


def camel_case_entries(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """JSON's convention for stack outputs: each entry's keys in camelCase (label keys inside left alone)."""
    return {name: {to_camel(key): value for key, value in entry.items()} for name, entry in entries.items()}


def stack_exports(platform: GpuPlatform) -> dict[str, Any]:
    """What the platform stack exports for the teams that build on it (``StackReference`` consumers)."""
    return {
        "clusterName": platform.cluster_name,
        "resourceGroupName": platform.resource_group_name,
        # With the kubeconfig, what a team stack builds its Kubernetes provider from (clusterIdentifier).
        "clusterId": platform.cluster_id,
        "kubeconfig": platform.kubeconfig,
        "pools": platform.pools.apply(camel_case_entries),
        "devicePlugin": platform.device_plugin.targets.apply(camel_case_entries),
        "namespaces": {name: ns.pod_placement for name, ns in platform.workloads.items()},
        "nvmeStorageClass": platform.nvme_cache.storage_class_name,
        "nvmeVolumes": platform.nvme_cache.volume_snippets,
    }
