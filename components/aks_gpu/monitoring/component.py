"""``GpuMonitoring``: GPU health and waste watched in the cluster, on the engine the cluster already runs.

A thin Pulumi layer over the pure builders: the exporters and PodMonitors (``exporters``), the alert rules
(``rules``) and, with the ``azure-monitor`` engine, the Azure Monitor workspace, its data collection endpoint, rule
and association, and one PrometheusRuleGroup per rule group (``azure``). With ``prometheus-operator`` the rules are
one PrometheusRule object instead, and nothing Azure-side is created.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired

import pulumi
from pulumi_azure_native import alertsmanagement, monitor
from pydantic.alias_generators import to_camel

from aks_gpu.args import ArgsError, platform_model
from aks_gpu.component import GpuComponent, kube_resource, plain_output
from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.monitoring import azure
from aks_gpu.monitoring.exporters import exporter_manifests, monitoring_on
from aks_gpu.monitoring.rules import RuleGroup, prometheus_rule_manifest, rule_groups
from aks_gpu.naming import PACKAGE_NAME
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.specs import PlatformSpec

CLUSTER_KEYS = frozenset({"resource_group_name", "cluster_name", "cluster_id", "location", "cluster_existing", "tags"})
REQUIRED_CLUSTER_KEYS = frozenset({"resource_group_name", "cluster_name", "cluster_id", "location"})


class GpuMonitoringArgs(PlatformSpec):
    """The stack's pools, workloads and monitoring settings, and (for the azure-monitor engine) the cluster."""

    resource_group_name: NotRequired[str]
    """The cluster's resource group: the workspace, data collection and rule groups go there."""
    cluster_name: NotRequired[str]
    """The AKS cluster's name (the `cluster` label managed Prometheus puts on its metrics)."""
    cluster_id: NotRequired[pulumi.Input[str]]
    """The cluster's ARM id: the data collection rule is associated with it, and the rule groups are scoped to it."""
    location: NotRequired[str]
    """Azure region of the workspace and the rule groups."""
    cluster_existing: NotRequired[bool]
    """An adopted cluster: its owner enabled managed Prometheus, so only the rule groups are created, on
    monitoring.azureMonitor.workspaceResourceId."""
    tags: NotRequired[dict[str, str]]


def look_up_existing(arm_id: str, parent: pulumi.Resource) -> None:
    """Read an existing Azure Monitor workspace or action group by its ARM id (the config patterns admit only those
    two types), so ``pulumi preview`` fails on a missing one and the plan knows it is declared, not created."""
    parts = arm_id.strip("/").split("/")
    group, kind, name = parts[3], parts[-2].lower(), parts[-1]
    options = pulumi.InvokeOutputOptions(parent=parent)
    if kind == "accounts":
        monitor.get_azure_monitor_workspace_output(resource_group_name=group, azure_monitor_workspace_name=name, opts=options)
    else:
        monitor.get_action_group_output(resource_group_name=group, action_group_name=name, opts=options)


@dataclass(frozen=True)
class MonitoredCluster:
    """The cluster the azure-monitor engine's workspace, data collection and rule groups are for."""

    resource_group_name: str
    cluster_name: str
    cluster_id: pulumi.Input[str]
    location: str
    existing: bool = False
    tags: Mapping[str, str] = field(default_factory=dict)
    # What the Azure resources must wait for though they take nothing from it: the resource group the stack creates.
    after: tuple[pulumi.Resource, ...] = ()


@dataclass(frozen=True)
class MonitoringInputs:
    model: PlatformModel
    cluster: MonitoredCluster | None = None


class GpuMonitoring(GpuComponent[MonitoringInputs]):
    """Exporters on every GPU pool, their scrape configuration and the alert rules; nothing without GPU pools or
    with ``monitoring.enabled: false``.

    ``opts.provider`` is the cluster's Kubernetes provider; the Azure resources use the default azure-native provider.
    ``opts.depends_on`` (the GPU pools) holds back the children.
    """

    workspace_id: pulumi.Output[str]
    """The Azure Monitor workspace the metrics and rule groups are in (empty with the prometheus-operator engine)."""
    rule_group_names: pulumi.Output[list[str]]
    """The alert rule groups: PrometheusRuleGroup names in Azure, or group names inside the PrometheusRule."""

    def __init__(self, name: str, args: GpuMonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> MonitoringInputs:
        component = f"GpuMonitoring {name}"
        model = platform_model(args, component, CLUSTER_KEYS)
        if not (monitoring_on(model) and model.config.monitoring.engine == "azure-monitor"):
            return MonitoringInputs(model)
        missing = sorted(REQUIRED_CLUSTER_KEYS - set(args))
        if missing:
            reason = "is required with the azure-monitor engine: the workspace, data collection and rule groups are the cluster's"
            raise ArgsError(component, [(to_camel(key), reason) for key in missing])
        cluster = MonitoredCluster(
            args["resource_group_name"],
            args["cluster_name"],
            args["cluster_id"],
            args["location"],
            args.get("cluster_existing", False),
            dict(args.get("tags", {})),
        )
        return MonitoringInputs(model, cluster)

    def build(self, name: str, inputs: MonitoringInputs) -> dict[str, Any]:
        model = inputs.model
        monitoring = model.config.monitoring
        azure_engine = monitoring.engine == "azure-monitor"
        self.workspace_id = plain_output("")
        self.rule_group_names = plain_output([])
        # The exporters, for callers that wait for them (not outputs of the package).
        self.daemonsets: list[pulumi.Resource] = []
        outputs = {"workspaceId": self.workspace_id, "ruleGroupNames": self.rule_group_names}
        if not monitoring_on(model):
            return outputs

        groups = rule_groups(model, critical_xid_codes())
        crd_after: list[pulumi.Resource] = []
        # An adopted cluster without the workspace its owner sends metrics to: exporters only (the config rules warn);
        # managed Prometheus's PodMonitor CRD may not even exist there.
        cluster = inputs.cluster
        adopted = cluster is not None and cluster.existing
        scraped = not (azure_engine and adopted and monitoring.azure_monitor.workspace_resource_id is None)
        if azure_engine and scraped and cluster is not None:
            crd_after = self._azure(name, cluster, model, groups)
        else:
            rule = prometheus_rule_manifest(groups, model)
            kube_resource(f"{name}-prometheusrule", rule, self.child())
            self.rule_group_names = plain_output([group.name for group in groups])

        previous: list[pulumi.Resource] = []
        for manifest in exporter_manifests(model):
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            resource_name = f"{name}-{kind.lower()}-{object_name}"
            if kind == "PodMonitor" and not scraped:
                continue
            if kind == "PodMonitor":
                # Managed Prometheus's PodMonitor CRD comes with the metrics add-on, which starts collecting once the
                # data collection rule is associated with the cluster.
                kube_resource(resource_name, manifest, self.child(after=crd_after))
                continue
            resource = kube_resource(resource_name, manifest, self.child(after=previous if kind == "DaemonSet" else ()))
            if kind == "DaemonSet":
                self.daemonsets.append(resource)
            else:
                previous.append(resource)
        return {"workspaceId": self.workspace_id, "ruleGroupNames": self.rule_group_names}

    def _azure(
        self, name: str, monitored: MonitoredCluster, model: PlatformModel, groups: tuple[RuleGroup, ...]
    ) -> list[pulumi.Resource]:
        """The workspace, data collection and rule groups; returns what the PodMonitors wait for."""
        settings = model.config.monitoring.azure_monitor
        group, cluster, location = monitored.resource_group_name, monitored.cluster_name, monitored.location
        cluster_id = monitored.cluster_id
        tags = {"managed-by": PACKAGE_NAME, **monitored.tags}
        # The Azure Monitor side needs the cluster, not its GPU pools: only the association waits for those.
        child = self.child(waits=False, after=monitored.after)
        waits: list[pulumi.Resource] = []
        workspace_id: pulumi.Input[str]
        # What the stack does not create, it looks up: a missing workspace or action group stops the preview, before
        # anything is created, instead of failing the rule groups' PUT halfway through.
        for existing in (settings.workspace_resource_id, *settings.action_group_ids):
            if existing is not None:
                look_up_existing(existing, self)
        if settings.workspace_resource_id is not None:
            workspace_id = settings.workspace_resource_id
        else:
            workspace = monitor.AzureMonitorWorkspace(
                f"{name}-workspace",
                **azure.workspace_inputs(group, azure.workspace_name(cluster, settings.workspace_name), location, tags),
                opts=child,
            )
            workspace_id = workspace.id
        if not monitored.existing:
            endpoint_name, rule_name, association_name = azure.collection_names(cluster, location, location)
            endpoint = monitor.DataCollectionEndpoint(
                f"{name}-dce", **azure.endpoint_inputs(group, endpoint_name, location, tags), opts=child
            )
            collection = monitor.DataCollectionRule(
                f"{name}-dcr",
                **azure.collection_rule_inputs(group, rule_name, location, endpoint.id, workspace_id, tags),
                opts=child,
            )
            association = monitor.DataCollectionRuleAssociation(
                f"{name}-dcra",
                **azure.association_inputs(association_name, cluster_id, collection.id),
                opts=self.child(),
            )
            waits.append(association)
        # Who hears the alerts: the action groups the stack names, and the one it creates from its receivers.
        action_groups: list[pulumi.Input[str]] = list(settings.action_group_ids)
        if settings.receivers:
            receivers = monitor.ActionGroup(
                f"{name}-action-group", **azure.action_group_inputs(group, cluster, settings.receivers, tags), opts=child
            )
            action_groups.append(receivers.id)
        names = []
        for rule_group in groups:
            inputs = azure.rule_group_inputs(
                rule_group,
                resource_group=group,
                location=location,
                cluster_name=cluster,
                workspace_id=workspace_id,
                cluster_id=cluster_id,
                action_group_ids=action_groups,
                tags=tags,
            )
            names.append(inputs["rule_group_name"])
            alertsmanagement.PrometheusRuleGroup(f"{name}-rules-{rule_group.name}", **inputs, opts=child)
        self.workspace_id = pulumi.Output.from_input(workspace_id)
        self.rule_group_names = plain_output(names)
        return waits
