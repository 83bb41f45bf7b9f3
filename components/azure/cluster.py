"""``GpuCluster``: the AKS cluster GPU pools attach to, created with safe defaults or adopted as it is."""

import base64
from typing import Any, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s
from pulumi_azure_native import containerservice

from components.args import validated
from components.azure.maintenance import (
    AUTO_UPGRADE_CONFIG_NAME,
    NODE_OS_CONFIG_NAME,
    maintenance_window_args,
)
from components.config.models import ClusterConfig
from components.specs import ClusterSpec

# The system pool runs CoreDNS, metrics-server and the like, and nothing else: AKS honours this taint
# on system pools ("CriticalAddonsOnly=true:NoSchedule") so user pods go to the GPU (or other user) pools.
SYSTEM_POOL_TAINT = "CriticalAddonsOnly=true:NoSchedule"


class GpuClusterArgs(TypedDict):
    cluster: ClusterSpec
    """The cluster settings, as a stack file's `aks-gpu:cluster` (snake_case here)."""
    location: str
    """Azure region, unless cluster.location says otherwise."""


def decode_kubeconfig(result: Any) -> str:
    """The first kubeconfig of a listManagedClusterUserCredentials result, base64-decoded."""
    kubeconfigs = result["kubeconfigs"] if isinstance(result, dict) else result.kubeconfigs
    first = kubeconfigs[0]
    value = first["value"] if isinstance(first, dict) else first.value
    return base64.b64decode(value).decode("utf-8")


class GpuCluster(pulumi.ComponentResource):
    """An AKS cluster for GPU work: system pool only (GPU pools are separate ``GpuNodePool`` resources),
    Azure CNI overlay with a network policy engine, Entra ID RBAC, OIDC issuer and workload identity,
    auto-upgrade and node-OS channels with maintenance windows, and a Kubernetes provider for the rest.

    With ``cluster.existing: true`` nothing is created: the cluster is looked up and the rest attaches to it.
    """

    cluster_name: pulumi.Output[str]
    resource_group_name: pulumi.Output[str]
    cluster_id: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = validated(ClusterConfig, args["cluster"], f"GpuCluster {name}", at="cluster")
        super().__init__("aks-gpu:index:GpuCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        if spec.existing:
            found = containerservice.get_managed_cluster_output(
                resource_group_name=spec.resource_group, resource_name=spec.name, opts=pulumi.InvokeOutputOptions(parent=self)
            )
            self.cluster_id = found.id
            self.cluster_name = pulumi.Output.from_input(spec.name)
        else:
            cluster = containerservice.ManagedCluster(
                f"{name}-aks",
                **self._cluster_inputs(spec, args["location"]),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    protect=spec.protect,
                    # GPU pools are separate AgentPool resources; the inline profile only seeds the system
                    # pool, so later drift there (autoscaler counts, upgrades) must not fight Pulumi.
                    ignore_changes=["agentPoolProfiles"],
                ),
            )
            self.cluster_id = cluster.id
            self.cluster_name = cluster.name
            windows = (
                (NODE_OS_CONFIG_NAME, spec.maintenance.node_os),
                (AUTO_UPGRADE_CONFIG_NAME, spec.maintenance.auto_upgrade),
            )
            for config_name, window in windows:
                if window is None:
                    continue
                containerservice.MaintenanceConfiguration(
                    f"{name}-{config_name}",
                    resource_group_name=spec.resource_group,
                    resource_name_=cluster.name,
                    config_name=config_name,
                    maintenance_window=cast(Any, maintenance_window_args(window)),
                    opts=child,
                )
        self.resource_group_name = pulumi.Output.from_input(spec.resource_group)

        credentials = containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=spec.resource_group,
            resource_name=self.cluster_name,
            # Entra ID clusters: an exec (kubelogin) kubeconfig, not a static token.
            format="exec",
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        self.kubeconfig = pulumi.Output.secret(credentials.apply(decode_kubeconfig))
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Replace the provider (and every object it owns) only when the cluster itself is replaced;
            # a rotated kubeconfig is an update.
            cluster_identifier=self.cluster_id,
            enable_server_side_apply=True,
            opts=child,
        )
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "resourceGroupName": self.resource_group_name,
                "clusterId": self.cluster_id,
                "kubeconfig": self.kubeconfig,
            }
        )

    @staticmethod
    def _cluster_inputs(spec: ClusterConfig, location: str) -> dict[str, Any]:
        system = spec.system_pool
        network: dict[str, Any] = {
            "network_plugin": "azure",
            "network_plugin_mode": "overlay",
            "pod_cidr": spec.pod_cidr,
        }
        if spec.network_policy != "none":
            network["network_policy"] = spec.network_policy
        if spec.network_policy == "cilium":
            # Azure CNI powered by Cilium: the cilium policy engine requires the cilium dataplane.
            network["network_dataplane"] = "cilium"
        inputs: dict[str, Any] = {
            "resource_group_name": spec.resource_group,
            "resource_name_": spec.name,
            "location": spec.location or location,
            "dns_prefix": spec.dns_prefix or spec.name,
            "kubernetes_version": spec.kubernetes_version,
            "sku": {"name": "Base", "tier": spec.sku_tier},
            "identity": {"type": "SystemAssigned"},
            "enable_rbac": True,
            "aad_profile": {
                "managed": True,
                "enable_azure_rbac": True,
                "admin_group_object_ids": list(spec.entra_admin_group_object_ids),
            },
            "disable_local_accounts": not spec.local_accounts,
            "oidc_issuer_profile": {"enabled": spec.workload_identity or spec.kaito},
            "security_profile": {"workload_identity": {"enabled": spec.workload_identity}},
            "auto_upgrade_profile": {
                "upgrade_channel": spec.upgrade_channel,
                "node_os_upgrade_channel": spec.node_os_upgrade_channel,
            },
            "network_profile": network,
            "agent_pool_profiles": [
                {
                    "name": system.name,
                    "mode": "System",
                    "vm_size": system.vm_size,
                    "os_type": "Linux",
                    "os_sku": system.os_sku,
                    "enable_auto_scaling": True,
                    "count": system.min_count,
                    "min_count": system.min_count,
                    "max_count": system.max_count,
                    "availability_zones": list(system.zones) or None,
                    "node_taints": [SYSTEM_POOL_TAINT],
                }
            ],
            "tags": {"managed-by": "aks-gpu", **spec.tags},
        }
        if spec.kaito:
            inputs["ai_toolchain_operator_profile"] = {"enabled": True}
        return inputs
