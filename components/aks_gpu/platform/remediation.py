"""The quarantine engine in the cluster: NVSentinel's namespace and Helm release, from the pure builder
(``components/aks_gpu/monitoring/remediation.py``). Nothing with ``remediation.mode: off`` or without NVIDIA pools.

With ``remediation.repair`` also the janitor-provider's Azure identity: a user-assigned identity with a federated
credential for its ServiceAccount, and a custom role on the cluster's node resource group that restarts scale set VMs
and reads their instance view, nothing more (``repair`` in components/aks_gpu/data/remediation.yaml)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, managedidentity, resources

from aks_gpu.azure.cluster import CLIENT_CONFIG_CALL, GpuCluster, answered
from aks_gpu.component import kube_resource
from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.monitoring.remediation import (
    RepairTarget,
    namespace_manifest,
    remediation_release,
    repair_facts,
    repair_runs,
    repair_subject,
)
from aks_gpu.naming import PACKAGE_NAME
from aks_gpu.platform.charts import chart_release
from aks_gpu.resolved.model import PlatformModel


def repair_identity(
    name: str, cluster: GpuCluster, location: str, opts: pulumi.ResourceOptions
) -> tuple[RepairTarget, list[pulumi.Resource]]:
    """The janitor-provider's identity and what it may do: its client id for the chart, and the Azure resources the
    release must wait for (the federated credential and the role assignment)."""
    client = authorization.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=opts.parent))
    subscription = client.subscription_id.apply(
        lambda sub: answered(sub, CLIENT_CONFIG_CALL, "subscriptionId", "the repair role's scope")
    )
    # The node resource group AKS made with the cluster, looked up (its ARM id as Azure gives it): the role's scope.
    node_group = resources.get_resource_group_output(
        resource_group_name=cluster.node_resource_group, opts=pulumi.InvokeOutputOptions(parent=opts.parent)
    )
    scope = node_group.id
    identity = managedidentity.UserAssignedIdentity(
        f"{name}-identity",
        resource_group_name=cluster.resource_group_name,
        location=location,
        tags={"managed-by": PACKAGE_NAME},
        opts=opts,
    )
    credential = managedidentity.FederatedIdentityCredential(
        f"{name}-federated",
        resource_group_name=cluster.resource_group_name,
        resource_name_=identity.name,
        issuer=cluster.oidc_issuer_url,
        subject=repair_subject(),
        audiences=[repair_facts().federated_audience],
        opts=opts,
    )
    role = authorization.RoleDefinition(
        f"{name}-role",
        scope=scope,
        assignable_scopes=[scope],
        # Role names are unique in a tenant: the node resource group's name is the cluster's own.
        role_name=pulumi.Output.concat(f"{PACKAGE_NAME} node repair ", node_group.name),
        description="aks-gpu: NVSentinel's janitor-provider restarts this cluster's GPU nodes (scale set VMs) and reads "
        "their instance view; nothing else",
        # Exactly the ARM actions the janitor-provider's Azure code calls (repair facts): no data actions, no wildcard.
        permissions=[authorization.PermissionArgs(actions=list(repair_facts().arm_actions))],
        role_type="CustomRole",
        opts=opts,
    )
    assignment = authorization.RoleAssignment(
        f"{name}-role-assignment",
        scope=scope,
        principal_id=identity.principal_id,
        principal_type="ServicePrincipal",
        role_definition_id=role.id,
        description="aks-gpu: NVSentinel's janitor-provider repairs quarantined GPU nodes",
        opts=opts,
    )
    target = RepairTarget(subscription, cluster.node_resource_group, location, identity.client_id)
    return target, [identity, credential, role, assignment]


@dataclass(frozen=True)
class AzureSite:
    """Where the repair identity goes: the cluster, its region, and options without a Kubernetes provider."""

    cluster: GpuCluster
    location: str
    opts: pulumi.ResourceOptions


def remediation_resources(
    name: str, model: PlatformModel, opts: pulumi.ResourceOptions, site: AzureSite | None = None
) -> list[pulumi.Resource]:
    """The namespace and the release, children of ``opts.parent``, and with repair the identity on ``site``; empty
    when nothing is deployed. The config rules refuse repair where the stack has no Azure cluster (a kubeconfig)."""
    target: RepairTarget | None = None
    azure: list[pulumi.Resource] = []
    if repair_runs(model.config) and site is not None:
        target, azure = repair_identity(f"{name}-repair", site.cluster, site.location, site.opts)
    spec = remediation_release(model, critical_xid_codes(), target)
    if spec is None:
        return []
    namespace = kube_resource(f"{name}-namespace", namespace_manifest(), opts)
    # After the repair's Azure identity and role, which its values name.
    release = chart_release(f"{name}-release", spec, namespace, opts, after=azure)
    return [*azure, namespace, release]
