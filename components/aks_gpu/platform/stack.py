"""``GpuPlatform``: the whole GPU stack from one args object (a ``StackSpec``), as ``__main__.py`` and other stacks use
it, and what the platform stack exports for the teams that build on it."""

from pathlib import Path
from typing import Any, Self

import pulumi
import pulumi_kubernetes as k8s
from pulumi_azure_native import containerservice

from aks_gpu.admission.component import AdmissionInputs, GpuAdmissionPolicy
from aks_gpu.admission.deployment_safeguards import excluded_namespaces
from aks_gpu.aks_facts import fixed_at_creation
from aks_gpu.args import stack_model
from aks_gpu.azure.cluster import ClusterInputs, GpuCluster
from aks_gpu.azure.node_pool import AGENT_POOL_TYPE, GpuNodePool, NodePoolInputs, cpu_agent_pool_inputs
from aks_gpu.azure.node_provisioning import azure_node_class_ref
from aks_gpu.component import GpuComponent, kube_resource, plain_output
from aks_gpu.config.models import StackConfig
from aks_gpu.kube.kueue import gpu_ceilings
from aks_gpu.kube.team_role import team_role_manifest
from aks_gpu.kube.workload_manifests import PoolOutput, pool_output
from aks_gpu.kube.workload_namespace import GpuWorkloadNamespace, platform_namespace
from aks_gpu.monitoring.component import GpuMonitoring, MonitoredCluster, MonitoringInputs
from aks_gpu.platform.device_plugin import DevicePluginInputs, GpuDevicePlugin
from aks_gpu.platform.node_provisioning import NodeClassOf, nap_pool_resources
from aks_gpu.platform.queueing import queueing_resources
from aks_gpu.platform.remediation import AzureSite, remediation_resources
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.specs import StackSpec
from aks_gpu.storage.nvme_cache import NvmeCache, NvmeCacheInputs
from aks_gpu.validation.smoke import GpuValidation


def read_given_kubeconfig(path: str) -> str:
    """The contents of a given cluster's kubeconfig (relative paths from the project folder, where Pulumi runs the
    program): the device plugin's deploy check connects with them, and the provider gets them rather than the path so
    a kubeconfig moved after the deploy does not break the next one."""
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise pulumi.RunError(f"cluster.kubeconfig: cannot read {path}: {exc.strerror or exc}") from None


class GpuPlatform(GpuComponent[PlatformModel]):
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

    # The node class each NAP NodePool names: its AKSNodeClass (`aksgpu local` builds the platform with kwok's, ``of``).
    # Private: a public class annotation would be published as an output of the component package (its schema).
    _nap_node_class: NodeClassOf = staticmethod(azure_node_class_ref)

    def __init__(self, name: str, args: StackSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def of(
        cls,
        name: str,
        inputs: PlatformModel,
        opts: pulumi.ResourceOptions | None = None,
        nap_node_class: NodeClassOf | None = None,
    ) -> Self:
        """The platform built from a resolved model; ``nap_node_class``: the node class each NAP NodePool names, in
        place of the pool's AKSNodeClass (``aksgpu local``: Karpenter's kwok provider's)."""
        component = cls.__new__(cls)
        if nap_node_class is not None:
            component._nap_node_class = nap_node_class
        component._register(name, inputs, opts)
        return component

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> PlatformModel:
        return stack_model(args, f"GpuPlatform {name}")

    def build(self, name: str, model: PlatformModel) -> dict[str, Any]:
        # The stack was validated and resolved once; every child is built from its part of the model.
        stack = model.config
        if not isinstance(stack, StackConfig):
            raise TypeError("GpuPlatform is built from a whole stack's model, with its cluster")
        cluster = stack.cluster
        monitoring = model.config.monitoring
        # Managed Prometheus is a cluster setting; an adopted cluster keeps whatever its owner set.
        managed_prometheus = monitoring.enabled and monitoring.engine == "azure-monitor" and bool(model.pools)
        location = cluster.location or stack.location
        # The parts, for Python callers (not outputs of the package: other languages see the outputs below).
        self.node_pools: dict[str, GpuNodePool] = {}
        self.cpu_pools: dict[str, containerservice.AgentPool] = {}
        self.cluster: GpuCluster | None = None
        if cluster.kubeconfig is not None:
            # The cluster is given by a kubeconfig (a cluster a team already has, or `aksgpu local`): no Azure resource,
            # only the in-cluster layer below, through a provider of its own. The Azure mode's URNs are untouched: this
            # provider is a new resource of its own name, and none of the Azure children exist here.
            kubeconfig: pulumi.Output[str] = pulumi.Output.secret(read_given_kubeconfig(cluster.kubeconfig))
            provider: pulumi.ProviderResource = k8s.Provider(
                f"{name}-kubernetes", k8s.ProviderArgs(kubeconfig=kubeconfig), self.child()
            )
            pools_ready: list[pulumi.Resource] = []
            cluster_name: pulumi.Output[str] = plain_output(cluster.name)
            resource_group_name: pulumi.Output[str] = plain_output(cluster.resource_group)
            # The provider's clusterIdentifier stands for the cluster: the kubeconfig's path, not its contents.
            cluster_id: pulumi.Output[str] = plain_output(f"kubeconfig:{cluster.kubeconfig}")
        else:
            self.cluster = GpuCluster.of(
                f"{name}-cluster", ClusterInputs(cluster, stack.location, managed_prometheus), self.child()
            )
            # One pool after the other, in the stack file's order: AKS runs one agent pool operation per cluster at a
            # time and answers a second concurrent PUT with 409 OperationNotAllowed ("Another agentpool operation
            # (<pool> - Creating) is in progress", e.g. https://github.com/cilium/cilium/issues/25944;
            # https://aka.ms/aks-pending-operation). dependsOn orders creates and updates alike; URNs do not change.
            previous: GpuNodePool | None = None
            # NAP pools are Karpenter NodePools, created in the cluster below: no agent pool.
            for pool in (pool for pool in model.pools if not pool.nap):
                previous = self.node_pools[pool.name] = GpuNodePool.of(
                    f"{name}-{pool.name}",
                    NodePoolInputs(pool, self.cluster.resource_group_name, self.cluster.cluster_name),
                    self.child(after=[previous.agent_pool] if previous else ()),
                )
            # The agent pools themselves: a component in depends_on costs every dependent a walk through its children.
            # The CPU user pools, after the GPU pools and in the same chain (one agent pool operation at a time).
            workload_types = [workload.type for workload in model.workloads]
            last: pulumi.Resource | None = previous.agent_pool if previous else None
            for cpu in stack.cpu_pools:
                last = self.cpu_pools[cpu.name] = containerservice.AgentPool(
                    f"{name}-{cpu.name}-pool",
                    resource_group_name=self.cluster.resource_group_name,
                    resource_name_=self.cluster.cluster_name,
                    **cpu_agent_pool_inputs(cpu, workload_types),
                    opts=self.child(
                        after=[last] if last else (),
                        protect=cpu.protect,
                        delete_before_replace=True,
                        replace_on_changes=fixed_at_creation(AGENT_POOL_TYPE),
                        ignore_changes=["count"],
                    ),
                )
            pools_ready = [pool.agent_pool for pool in self.node_pools.values()]
            pools_ready += list(self.cpu_pools.values())
            if cluster.sku == "Automatic" and not cluster.existing:
                # Automatic enforces Deployment Safeguards and baseline Pod Security, which the GPU agents' host access
                # fails: their namespaces are excluded (admission/deployment_safeguards.py), before anything runs there.
                pools_ready.append(
                    containerservice.DeploymentSafeguard(
                        f"{name}-safeguards",
                        resource_uri=self.cluster.cluster_id,
                        level="Enforce",
                        excluded_namespaces=excluded_namespaces(model),
                        opts=self.child(),
                    )
                )
            provider = self.cluster.provider
            kubeconfig = self.cluster.kubeconfig
            cluster_name = self.cluster.cluster_name
            resource_group_name = self.cluster.resource_group_name
            cluster_id = self.cluster.cluster_id
        # In the cluster: the components' children inherit its Kubernetes provider.
        in_cluster = pulumi.ResourceOptions(provider=provider)

        def inside(after: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(self.child(after=after or ()), in_cluster)

        # The NAP pools' node classes and NodePools (Automatic, or Standard with nodeProvisioning Auto).
        self.nap_pools: list[pulumi.Resource] = nap_pool_resources(f"{name}-nap", model, inside(), self._nap_node_class)
        pools_ready = [*pools_ready, *self.nap_pools]
        self.device_plugin: GpuDevicePlugin = GpuDevicePlugin.of(
            f"{name}-gpu", DevicePluginInputs(model, kubeconfig), inside(pools_ready)
        )
        # The smoke Jobs need the plugin to advertise the GPU resource first.
        self.validation: GpuValidation = GpuValidation.of(
            f"{name}-smoke", model, inside([*self.device_plugin.daemonsets, *self.device_plugin.releases])
        )
        # After the pools: v1 wants its io-engine label on them before the extension installs.
        # Azure Container Storage is an AKS extension (an Azure resource): not in the given-cluster mode.
        self.nvme_cache: NvmeCache | None = (
            NvmeCache.of(
                f"{name}-nvme",
                NvmeCacheInputs(model, self.cluster.resource_group_name, self.cluster.cluster_name),
                inside(pools_ready),
            )
            if self.cluster is not None
            else None
        )
        gpu_resources = tuple(sorted({pool.resource.name for pool in model.pools}))
        # The role the workloads' `edit` bindings name (Kubernetes' edit less NetworkPolicy writes): cluster-wide, so one
        # per cluster, and there for team stacks' own GpuWorkloadNamespaces too; before the bindings that name it.
        self.team_role = kube_resource(f"{name}-team-role", team_role_manifest(), inside())
        # With queueing, each namespace's GPU quota is the ceiling of what Kueue may admit there (kube/kueue.py).
        ceilings = gpu_ceilings(model)
        self.workloads: dict[str, GpuWorkloadNamespace] = {
            workload.name: GpuWorkloadNamespace.of(
                f"{name}-{workload.name}",
                platform_namespace(workload, gpu_resources, ceilings.get(workload.name)),
                inside([self.team_role]),
            )
            for workload in model.workloads
        }
        # GPU queues (aks-gpu:queueing): Kueue's chart, then the queues, the LocalQueues inside the workload namespaces.
        self.queueing: list[pulumi.Resource] = queueing_resources(
            f"{name}-queueing", model, inside(pools_ready), [w.namespace for w in self.workloads.values()]
        )
        # The cluster's network policy tells the policy whether Calico's namespaces are AKS's own (exempt).
        self.admission: GpuAdmissionPolicy = GpuAdmissionPolicy.of(
            f"{name}-admission", AdmissionInputs(model, cluster.network_policy), inside()
        )
        # The azure-monitor engine's workspace and rule groups are Azure resources: a given cluster gets the exporters
        # and the rules as a PrometheusRule (monitoring/component.py, no cluster).
        monitored = (
            MonitoredCluster(
                cluster.resource_group,
                cluster.name,
                self.cluster.cluster_id,
                location,
                cluster.existing,
                dict(cluster.tags),
                (self.cluster.resource_group,) if self.cluster.resource_group is not None else (),
            )
            if self.cluster is not None
            else None
        )
        # The exporters go into the device plugin's namespace, on the GPU pools' nodes.
        self.monitoring: GpuMonitoring = GpuMonitoring.of(
            f"{name}-monitoring", MonitoringInputs(model, monitored), inside([*pools_ready, self.device_plugin])
        )
        # Quarantine of faulty GPU nodes (remediation.mode dry-run or on): after the device plugin, whose nodes it watches.
        # With repair, the janitor-provider's Azure identity too (on the cluster's node resource group).
        self.remediation: list[pulumi.Resource] = remediation_resources(
            f"{name}-remediation",
            model,
            inside([*pools_ready, self.device_plugin]),
            AzureSite(self.cluster, location, self.child()) if self.cluster is not None else None,
        )

        self.kubeconfig = kubeconfig
        self.cluster_name = cluster_name
        self.resource_group_name = resource_group_name
        self.cluster_id = cluster_id
        self.pools = plain_output({pool.name: pool_output(pool, model) for pool in model.pools})
        self.namespaces = plain_output([workload.name for workload in model.workloads])
        return {
            "kubeconfig": self.kubeconfig,
            "clusterName": self.cluster_name,
            "resourceGroupName": self.resource_group_name,
            "clusterId": self.cluster_id,
            "pools": self.pools,
            "namespaces": self.namespaces,
        }


def stack_exports(platform: GpuPlatform) -> dict[str, Any]:
    """What the platform stack exports for the teams that build on it (``StackReference`` consumers); every dict key in
    camelCase, as in every other language."""
    return {
        "clusterName": platform.cluster_name,
        "resourceGroupName": platform.resource_group_name,
        # With the kubeconfig, what a team stack builds its Kubernetes provider from (clusterIdentifier).
        "clusterId": platform.cluster_id,
        "kubeconfig": platform.kubeconfig,
        "pools": platform.pools,
        "devicePlugin": platform.device_plugin.targets,
        "namespaces": {name: ns.pod_placement for name, ns in platform.workloads.items()},
        "nvmeStorageClass": platform.nvme_cache.storage_class_name if platform.nvme_cache else "",
        "nvmeVolumes": platform.nvme_cache.volume_snippets if platform.nvme_cache else {},
    }
