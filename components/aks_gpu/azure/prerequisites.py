"""What a stack needs from its Azure subscription before the first ``pulumi up``: resource provider registrations,
preview features and the deploying identity's rights. Pure: config in, one command list out.

azure-native registers no resource provider itself (pulumi/pulumi-azure-native#3479: "The subscription ... is not
registered to use microsoft.insights" on the first DiagnosticSetting), and it has no resource or invoke that registers
or reads one. ``aksgpu plan`` prints this list; under ``pulumi up`` the program reads the states through the Azure CLI
where it can (``aks_gpu.program.check_subscription``) and stops before the first resource with one message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from aks_gpu.config.models import StackConfig

# The namespace each kind of resource the program creates lives in (ARM resource types: Microsoft.ContainerService/
# managedClusters, Microsoft.KubernetesConfiguration/extensions, Microsoft.Monitor/accounts, Microsoft.Insights/
# dataCollectionEndpoints and dataCollectionRules, Microsoft.AlertsManagement/prometheusRuleGroups).
CONTAINER_SERVICE = "Microsoft.ContainerService"
KUBERNETES_CONFIGURATION = "Microsoft.KubernetesConfiguration"
MONITOR = "Microsoft.Monitor"
INSIGHTS = "Microsoft.Insights"
ALERTS_MANAGEMENT = "Microsoft.AlertsManagement"
# "If your AMD GPU VM size is RDMA-enabled with the `r` naming convention (e.g. Standard_ND96isr_MI300X_v5), ...
# register the AKSInfinibandSupport feature flag" (https://learn.microsoft.com/azure/aks/use-amd-gpus, read 2026-12-01).
INFINIBAND_FEATURE = "AKSInfinibandSupport"
# The size name's feature letters (after the vCPU count) hold `r` for RDMA: Standard_ND96isr_MI300X_v5.
_RDMA_SIZE = re.compile(r"Standard_[A-Za-z]+\d+[a-z]*r[a-z]*_.*")
# The deployer role assignment (cluster.deployerAccess) is a Microsoft.Authorization/roleAssignments/write: Owner,
# User Access Administrator or Role Based Access Control Administrator have it, Contributor does not
# (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/general).
ROLE_ASSIGNMENT_WRITE = "Microsoft.Authorization/roleAssignments/write"


@dataclass(frozen=True)
class Prerequisite:
    what: str
    why: str
    command: str
    kind: Literal["provider", "feature", "role"] = "provider"
    # The resource provider namespace (provider, feature) and the feature's name.
    namespace: str = ""
    feature: str = ""


# The state a registration must be in: `az provider list` (registrationState) and `az feature show`
# (properties.state) both say "Registered" (https://learn.microsoft.com/azure/azure-resource-manager/management/
# resource-providers-and-types).
REGISTERED = "registered"


def missing_prerequisites(
    needed: list[Prerequisite], provider_states: Mapping[str, str], feature_states: Mapping[str, str]
) -> list[Prerequisite]:
    """The providers and features of ``needed`` not registered, given the subscription's states (namespace or
    ``namespace/feature`` -> state; names compare without case, as ARM's do). The role is not read: it is listed,
    not checked."""
    providers = {name.lower(): state.lower() for name, state in provider_states.items()}
    features = {name.lower(): state.lower() for name, state in feature_states.items()}
    def state(item: Prerequisite) -> str | None:
        if item.kind == "provider":
            return providers.get(item.namespace.lower())
        return features.get(f"{item.namespace}/{item.feature}".lower())

    return [item for item in needed if item.kind != "role" and state(item) != REGISTERED]


def not_ready_message(missing: list[Prerequisite]) -> str:
    """The one message a first deploy stops with: what is missing, and the commands that fix it."""
    lines = [f"the Azure subscription is not ready for this stack: {', '.join(item.what for item in missing)}. Run:"]
    lines += [f"  {item.command}" for item in missing]
    lines.append("then pulumi up again (nothing was created). Set AKSGPU_SKIP_SUBSCRIPTION_CHECK=1 to skip this check.")
    return "\n".join(lines)


def subscription_prerequisites(config: StackConfig) -> list[Prerequisite]:
    """What a fresh subscription lacks for this stack, each with the command that provides it (idempotent: running
    it on a ready subscription changes nothing)."""
    cluster = config.cluster
    needed: list[Prerequisite] = []

    def provider(namespace: str, why: str) -> None:
        command = f"az provider register --namespace {namespace} --wait"
        needed.append(Prerequisite(f"resource provider {namespace}", why, command, "provider", namespace))

    provider(CONTAINER_SERVICE, "the cluster and its agent pools")
    if any(pool.nvme_cache for pool in config.gpu_pools):
        provider(KUBERNETES_CONFIGURATION, "the Azure Container Storage extension of the nvmeCache pools")
    monitoring = config.monitoring
    if monitoring.enabled and monitoring.engine == "azure-monitor" and config.gpu_pools:
        provider(MONITOR, "the Azure Monitor workspace")
        provider(INSIGHTS, "the data collection endpoint and rule")
        provider(ALERTS_MANAGEMENT, "the Prometheus rule groups")
    rdma_amd = sorted({pool.vm_size for pool in config.gpu_pools if pool.vendor == "amd" and _RDMA_SIZE.fullmatch(pool.vm_size)})
    if rdma_amd:
        needed.append(
            Prerequisite(
                f"preview feature {CONTAINER_SERVICE}/{INFINIBAND_FEATURE}",
                f"AMD RDMA sizes ({', '.join(rdma_amd)}) land on one InfiniBand network only with it",
                f"az feature register --namespace {CONTAINER_SERVICE} --name {INFINIBAND_FEATURE} "
                f"&& az provider register --namespace {CONTAINER_SERVICE}",
                "feature",
                CONTAINER_SERVICE,
                INFINIBAND_FEATURE,
            )
        )
    if not cluster.existing and cluster.deployer_access.enabled:
        # A group the stack creates does not exist yet to be a scope: the subscription is the narrowest one.
        scope = "/subscriptions/<subscription>" + (
            f"/resourceGroups/{cluster.resource_group}" if cluster.existing_resource_group else ""
        )
        needed.append(
            Prerequisite(
                f"{ROLE_ASSIGNMENT_WRITE} for the deploying identity",
                "the deployer's AKS RBAC Cluster Admin assignment (Contributor lacks it: AuthorizationFailed after the "
                "cluster exists); or set cluster.deployerAccess.enabled false and list an admin group",
                f"az role assignment create --assignee <deployer> --role 'Role Based Access Control Administrator' "
                f"--scope {scope}",
                "role",
            )
        )
    return needed
