"""``GpuCluster``: the AKS cluster GPU pools attach to, created with safe defaults or adopted as it is."""

import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, TypeVar, cast

import pulumi
import pulumi_kubernetes as k8s
from pulumi_azure_native import authorization, containerservice, resources

from aks_gpu.aks_facts import fixed_at_creation
from aks_gpu.args import validated
from aks_gpu.azure.kubeconfig import use_login_mode
from aks_gpu.azure.maintenance import (
    AUTO_UPGRADE_CONFIG_NAME,
    NODE_OS_CONFIG_NAME,
    maintenance_window_args,
)
from aks_gpu.component import GpuComponent, plain_output
from aks_gpu.config.models import ClusterConfig
from aks_gpu.input_files import read_bounded
from aks_gpu.monitoring.azure import metrics_profile
from aks_gpu.naming import PACKAGE_NAME
from aks_gpu.specs import ClusterSpec

# The system pool runs CoreDNS, metrics-server and the like, and nothing else: AKS honours this taint
# on system pools ("CriticalAddonsOnly=true:NoSchedule") so user pods go to the GPU (or other user) pools.
SYSTEM_POOL_TAINT = "CriticalAddonsOnly=true:NoSchedule"
# The built-in role "Azure Kubernetes Service RBAC Cluster Admin": "Lets you manage all resources in the cluster."
# https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/containers#azure-kubernetes-service-rbac-cluster-admin
AKS_RBAC_CLUSTER_ADMIN_ROLE_ID = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
Value = TypeVar("Value")
# The Pulumi type token of the cluster (pulumi_azure_native containerservice.ManagedCluster).
MANAGED_CLUSTER_TYPE = "azure-native:containerservice:ManagedCluster"


# How the azure-native provider is told to sign in as an application rather than a person: its config keys and
# the environment variables it reads (https://www.pulumi.com/registry/packages/azure-native/installation-configuration/,
# https://www.pulumi.com/docs/esc/providers/login/azure-login/).
SERVICE_PRINCIPAL_CONFIG = ("clientId", "useOidc", "useMsi")
SERVICE_PRINCIPAL_ENV = ("ARM_CLIENT_ID", "ARM_USE_OIDC", "ARM_USE_MSI")


def deployer_principal_type(
    configured: str,
    provider_config: Mapping[str, str | None],
    environment: Mapping[str, str],
    cli_login_type: str | None = None,
) -> Literal["User", "ServicePrincipal"]:
    """The principalType of the deploying identity's role assignment: the stack's choice, or the guess "auto" makes
    from how the azure-native provider signs in. ARM refuses a mismatch ("UnmatchedPrincipalType: The PrincipalId ...
    has type 'ServicePrincipal', which is different from specified PrincipalType 'User'", as quoted in
    Azure/modern-web-app-pattern-dotnet#129), and the SDK's default is "User".

    Without application credentials the provider uses the Azure CLI's login; ``cli_login_type`` is that login's
    kind (``azure_cli_login_type``): ``az login --service-principal`` (the azure/login action in CI) and
    ``az login --identity`` both sign in as a service principal."""
    if configured in ("User", "ServicePrincipal"):
        return configured  # type: ignore[return-value]
    signs_in_as_app = any(provider_config.get(key) for key in SERVICE_PRINCIPAL_CONFIG) or any(
        environment.get(key) for key in SERVICE_PRINCIPAL_ENV
    )
    return "ServicePrincipal" if signs_in_as_app or cli_login_type == AZURE_CLI_SERVICE_PRINCIPAL else "User"


# The Azure CLI keeps its logins in azureProfile.json under AZURE_CONFIG_DIR (default ~/.azure): each subscription
# has "isDefault" and a "user" with "type" "user" or "servicePrincipal" (managed identities included). The key names
# are azure-cli's (src/azure-cli-core/azure/cli/core/_profile.py: _IS_DEFAULT_SUBSCRIPTION, _USER_ENTITY,
# _USER_TYPE, _SERVICE_PRINCIPAL); the CLI writes the file with a UTF-8 byte order mark.
AZURE_CLI_PROFILE = "azureProfile.json"
AZURE_CLI_SERVICE_PRINCIPAL = "servicePrincipal"
# A profile lists subscriptions, a few hundred bytes each; far above any real one.
AZURE_CLI_PROFILE_LIMIT = 16 * 1024 * 1024


def azure_cli_login_type(environment: Mapping[str, str], home: Path | None = None) -> str | None:
    """The kind of login ("user" or "servicePrincipal") of the Azure CLI's default subscription, or None when there is
    no readable profile: then nothing is known and the guess stays as it was."""
    configured = environment.get("AZURE_CONFIG_DIR")
    config_dir = Path(configured) if configured else (home or Path.home()) / ".azure"
    try:
        # Bounded and regular files only: a FIFO or a device in its place must not hang or fill a plan.
        data = read_bounded(config_dir / AZURE_CLI_PROFILE, AZURE_CLI_PROFILE_LIMIT)
        profile = json.loads(data.decode("utf-8-sig"))
    except (OSError, ValueError):  # InputFileError and UnicodeDecodeError are ValueErrors
        return None
    subscriptions = profile.get("subscriptions") if isinstance(profile, dict) else None
    for subscription in subscriptions if isinstance(subscriptions, list) else []:
        if isinstance(subscription, dict) and subscription.get("isDefault") is True:
            user = subscription.get("user")
            kind = user.get("type") if isinstance(user, dict) else None
            return kind if isinstance(kind, str) else None
    return None


def role_definition_id(subscription_id: str, role_id: str) -> str:
    """A built-in role's ARM id as a role assignment takes it (subscription-scoped, like az role assignment create)."""
    return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{role_id}"


class GpuClusterArgs(TypedDict):
    cluster: ClusterSpec
    """The cluster settings, as a stack file's `aks-gpu:cluster` (snake_case here)."""
    location: str
    """Azure region, unless cluster.location says otherwise."""
    azure_monitor_metrics: NotRequired[bool]
    """Turn on Azure Monitor managed Prometheus (azureMonitorProfile.metrics, with the aks-gpu/pool node label in
    kube-state-metrics); GpuMonitoring adds the workspace and data collection. Default false."""


# The provider functions the components call (invokes), by token. A unit test's mocks (``pulumi.runtime.set_mocks``) must
# answer each, as ``aks_gpu.testing.AksGpuMocks`` does; docs/composing.md#unit-tests lists them for consumers.
CREDENTIALS_CALL = "azure-native:containerservice:listManagedClusterUserCredentials"
CLIENT_CONFIG_CALL = "azure-native:authorization:getClientConfig"
GET_CLUSTER_CALL = "azure-native:containerservice:getManagedCluster"
CALLS = (CREDENTIALS_CALL, CLIENT_CONFIG_CALL, GET_CLUSTER_CALL)


class UnansweredCallError(RuntimeError):
    """A provider call (or a resource's computed output) came back without a value the component needs. Azure always
    returns it, so this is a unit test whose mocks did not answer: the message names the call and what to return."""

    def __init__(self, call: str, field: str, needed_for: str) -> None:
        super().__init__(
            f"{call} returned no `{field}`, which {needed_for}. Under unit-test mocks (pulumi.runtime.set_mocks) your"
            " Mocks must answer it: use aks_gpu.testing.AksGpuMocks, or subclass it and hand what you do not answer to"
            " super() (docs/composing.md#unit-tests)"
        )


def answered(value: Value | None, call: str, field: str, needed_for: str) -> Value:
    """``value``, or ``UnansweredCallError`` when a call's result lacks it (None, empty)."""
    if value is None or value == "" or value == []:
        raise UnansweredCallError(call, field, needed_for)
    return value


def decode_kubeconfig(result: Any) -> str:
    """The first kubeconfig of a listManagedClusterUserCredentials result, base64-decoded."""
    kubeconfigs = result.get("kubeconfigs") if isinstance(result, dict) else result.kubeconfigs
    needed_for = "GpuCluster needs for the cluster's kubeconfig (its Kubernetes provider)"
    first = answered(kubeconfigs, CREDENTIALS_CALL, "kubeconfigs", needed_for)[0]
    value = first["value"] if isinstance(first, dict) else first.value
    return base64.b64decode(value).decode("utf-8")


@dataclass(frozen=True)
class ClusterInputs:
    cluster: ClusterConfig
    location: str
    azure_monitor_metrics: bool = False


class GpuCluster(GpuComponent[ClusterInputs]):
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
    deployer_access: authorization.RoleAssignment | None
    """The deploying identity's "Azure Kubernetes Service RBAC Cluster Admin" assignment, when it is made."""
    resource_group: resources.ResourceGroup | None
    """The cluster's resource group, when the stack creates it (not cluster.existing nor existingResourceGroup)."""
    oidc_issuer_url: pulumi.Output[str | None]
    """The cluster's OIDC issuer URL: the issuer of the federated credentials its workload identities use."""
    node_resource_group: pulumi.Output[str | None]
    """The resource group AKS keeps the cluster's scale sets in (MC_...)."""

    def __init__(self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> ClusterInputs:
        spec = validated(ClusterConfig, args["cluster"], f"GpuCluster {name}", at="cluster")
        return ClusterInputs(spec, args["location"], args.get("azure_monitor_metrics", False))

    def build(self, name: str, inputs: ClusterInputs) -> dict[str, Any]:
        spec = inputs.cluster
        self.resource_group = None
        if not spec.existing and not spec.existing_resource_group:
            # The group is the stack's: ARM refuses the cluster PUT into a group that does not exist
            # (ResourceGroupNotFound). Protected with the cluster: deleting a group deletes all it holds.
            self.resource_group = resources.ResourceGroup(
                f"{name}-rg",
                resource_group_name=spec.resource_group,
                location=spec.location or inputs.location,
                tags={"managed-by": PACKAGE_NAME, **spec.tags},
                opts=self.child(protect=spec.protect),
            )
        elif not spec.existing:
            # Declared as existing: looked up, so a preview stops on a missing group before anything is created.
            resources.get_resource_group_output(
                resource_group_name=spec.resource_group, opts=pulumi.InvokeOutputOptions(parent=self)
            )
        if spec.existing:
            found = containerservice.get_managed_cluster_output(
                resource_group_name=spec.resource_group, resource_name=spec.name, opts=pulumi.InvokeOutputOptions(parent=self)
            )
            self.cluster_id = found.id.apply(lambda found_id: answered(found_id, GET_CLUSTER_CALL, "id", "names the cluster"))
            self.cluster_name = plain_output(spec.name)
            issuer_profile: pulumi.Output[Any] = found.oidc_issuer_profile
            self.node_resource_group = found.node_resource_group
        else:
            cluster = containerservice.ManagedCluster(
                f"{name}-aks",
                **self._cluster_inputs(spec, inputs.location, inputs.azure_monitor_metrics),
                opts=self.child(
                    after=[self.resource_group] if self.resource_group is not None else (),
                    protect=spec.protect,
                    replace_on_changes=fixed_at_creation(MANAGED_CLUSTER_TYPE),
                    # GPU pools are separate AgentPool resources; the inline profile only seeds the system
                    # pool, so later drift there (autoscaler counts, upgrades) must not fight Pulumi. A change of
                    # cluster.systemPool on a running cluster is refused by `aksgpu plan` instead of dropped here
                    # (aks_gpu.mock_engine.changes, SYSTEM_POOL_PROCEDURE).
                    ignore_changes=["agentPoolProfiles"],
                ),
            )
            self.cluster_id = cluster.id
            issuer_profile = cluster.oidc_issuer_profile
            self.node_resource_group = cluster.node_resource_group
            # Azure names the cluster its resourceName; a unit test's new_resource that echoes the inputs returns none.
            self.cluster_name = cluster.name.apply(
                lambda cluster_name: answered(
                    cluster_name, f"the ManagedCluster {name}-aks (new_resource)", "name", "the credentials and GPU pools use"
                )
            )
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
                    opts=self.child(),
                )
        # The issuer of the federated credentials (remediation.repair); None where the cluster has none (ARM answers it
        # only with oidcIssuerProfile enabled, which cluster.workloadIdentity turns on; the config rules require that).
        self.oidc_issuer_url = issuer_profile.apply(lambda profile: profile.issuer_url if profile is not None else None)
        self.resource_group_name = plain_output(spec.resource_group)
        self.deployer_access = None
        if not spec.existing and spec.deployer_access.enabled:
            self.deployer_access = self._grant_deployer(name, spec)

        credentials = containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=spec.resource_group,
            resource_name=self.cluster_name,
            # Entra ID clusters: an exec (kubelogin) kubeconfig, not a static token.
            format="exec",
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        mode = spec.kubelogin_mode
        # AKS writes `kubelogin get-token --login devicecode`, which waits for a person; use a mode that does not.
        self.kubeconfig = pulumi.Output.secret(credentials.apply(lambda result: use_login_mode(decode_kubeconfig(result), mode)))
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            # Replace the provider (and every object it owns) only when the cluster itself is replaced;
            # a rotated kubeconfig is an update.
            cluster_identifier=self.cluster_id,
            enable_server_side_apply=True,
            # Every Kubernetes object comes after the deployer's role assignment. Azure RBAC "can take up to five
            # minutes to propagate" (https://learn.microsoft.com/azure/aks/entra-id-authorization): a first up that
            # still gets 403 Forbidden succeeds when run again.
            opts=self.child(after=[self.deployer_access] if self.deployer_access else ()),
        )
        return {
            "clusterName": self.cluster_name,
            "resourceGroupName": self.resource_group_name,
            "clusterId": self.cluster_id,
            "kubeconfig": self.kubeconfig,
        }

    def _grant_deployer(self, name: str, spec: ClusterConfig) -> authorization.RoleAssignment:
        """ "Azure Kubernetes Service RBAC Cluster Admin" on the cluster for the identity running the deployment (the
        client config's object id): with Entra ID RBAC on and local accounts off, nothing else gives it access to
        the Kubernetes API it deploys to next. Turn off with cluster.deployerAccess.enabled: false."""
        client = authorization.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=self))
        inputs: dict[str, Any] = {
            "scope": self.cluster_id,
            "principal_id": client.object_id.apply(
                lambda object_id: answered(object_id, CLIENT_CONFIG_CALL, "objectId", "the deployer's role assignment is for")
            ),
            "role_definition_id": client.subscription_id.apply(
                lambda subscription: role_definition_id(
                    answered(subscription, CLIENT_CONFIG_CALL, "subscriptionId", "the deployer's role is defined in"),
                    AKS_RBAC_CLUSTER_ADMIN_ROLE_ID,
                )
            ),
            "description": "aks-gpu: the deploying identity manages the cluster's Kubernetes objects",
        }
        provider = pulumi.Config("azure-native")
        configured = spec.deployer_access.principal_type
        inputs["principal_type"] = deployer_principal_type(
            configured,
            {key: provider.get(key) for key in SERVICE_PRINCIPAL_CONFIG},
            os.environ,
            azure_cli_login_type(os.environ) if configured == "auto" else None,
        )
        return authorization.RoleAssignment(f"{name}-deployer-admin", **inputs, opts=self.child())

    @staticmethod
    def _cluster_inputs(spec: ClusterConfig, location: str, azure_monitor_metrics: bool = False) -> dict[str, Any]:
        system = spec.system_pool
        network: dict[str, Any] = {
            "network_plugin": "azure",
            "network_plugin_mode": "overlay",
            "pod_cidr": spec.pod_cidr,
        }
        # Sent only when set: a cluster deployed before these keys existed keeps AKS's defaults, and its inputs.
        if spec.service_cidr is not None:
            network["service_cidr"] = spec.service_cidr
        if spec.dns_service_ip is not None:
            network["dns_service_ip"] = spec.dns_service_ip
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
            # ManagedClusterSKUName: Base (AKS Standard) or Automatic.
            "sku": {"name": "Automatic" if spec.sku == "Automatic" else "Base", "tier": spec.sku_tier},
            # AKSLongTermSupport with the Premium tier keeps a minor patched a year past its end of life
            # (https://learn.microsoft.com/azure/aks/long-term-support#enable-long-term-support).
            "support_plan": spec.support_plan,
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
            "tags": {"managed-by": PACKAGE_NAME, **spec.tags},
        }
        if spec.sku != "Automatic":
            # Automatic's system nodes are AKS-managed: its documented template sends no agentPoolProfiles
            # (data/arm_refusals.yaml automatic-managed-system-pool).
            system_pool: dict[str, Any] = {
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
            if spec.node_auto_provisioning:
                # Beside NAP the API takes fixed-size pools only ("autoscaling Node Pools cannot be",
                # data/arm_refusals.yaml nap-no-autoscaled-agent-pools): minCount system nodes.
                system_pool |= {"enable_auto_scaling": False, "min_count": None, "max_count": None}
            inputs["agent_pool_profiles"] = [system_pool]
        if spec.node_auto_provisioning:
            # nodeProvisioningProfile.mode Auto (API 2025-09-01): NAP's Karpenter, which reads the NAP pools' NodePools.
            inputs["node_provisioning_profile"] = {"mode": "Auto"}
        if spec.kaito:
            inputs["ai_toolchain_operator_profile"] = {"enabled": True}
        if azure_monitor_metrics:
            inputs["azure_monitor_profile"] = metrics_profile()
        return inputs
