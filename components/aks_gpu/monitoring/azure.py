"""Azure Monitor managed service for Prometheus for an AKS cluster, as azure-native inputs. Pure.

What AKS needs to send a cluster's metrics to an Azure Monitor workspace, as Microsoft's own template lays it out
(AddonBicepTemplate/FullAzureMonitorMetricsProfile.bicep and its nested templates in Azure/prometheus-collector,
which `az aks create --enable-azure-monitor-metrics` mirrors):

- the Azure Monitor workspace (Microsoft.Monitor/accounts);
- a data collection endpoint (kind Linux) and a data collection rule that forwards the Prometheus stream
  (``Microsoft-PrometheusMetrics``, data source ``prometheusForwarder``) to the workspace, named
  ``MSProm-<workspace location>-<cluster>`` (endpoint cut to 44 characters, rule to 64, as the template cuts them);
- the rule's association with the cluster (``MSProm-<cluster location>-<cluster>``): "Deleting this association will
  break the data collection for this AKS Cluster";
- the cluster's ``azureMonitorProfile.metrics`` (``metrics_profile``), which runs the ama-metrics add-on; the template
  sets it after the association, and the add-on waits for its configuration until the association exists.

Every input is in snake_case as the ``pulumi_azure_native`` Args classes take them; tests/conformance checks the
camelCase the provider receives against those classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aks_gpu.config.models import AlertReceiver
from aks_gpu.monitoring.rules import AlertRule, RuleGroup, iso_duration
from aks_gpu.naming import ACTION_GROUP_SHORT_NAME, PLATFORM_OBJECT_PREFIX, POOL_LABEL, action_group_name

PROMETHEUS_STREAM = "Microsoft-PrometheusMetrics"
DESTINATION_NAME = "MonitoringAccount1"
# Prometheus rule group severities: "0-4, default is 3 (informational)"; Azure Monitor alert severities read
# 0 Critical, 1 Error, 2 Warning, 3 Informational, 4 Verbose.
# https://learn.microsoft.com/azure/azure-monitor/metrics/prometheus-rule-groups#alert-rule-properties-arm-template
# https://learn.microsoft.com/azure/azure-monitor/alerts/alerts-overview (severity levels)
AZURE_SEVERITY = {"critical": 0, "warning": 2, "info": 3}
# rules.resolveConfiguration: "When enabled, the alert is automatically resolved when the condition is no longer
# true", after timeToResolve (default PT5M; prometheus-rule-groups page). Ten minutes, so a condition that flaps around
# a scrape gap does not resolve and re-fire.
TIME_TO_RESOLVE = "PT10M"


def workspace_name(cluster_name: str, configured: str | None) -> str:
    """The workspace GpuMonitoring creates: the stack's name, or ``<cluster>-amw`` (``_`` is not allowed there)."""
    return configured or f"{cluster_name.replace('_', '-')}-amw"


def collection_names(cluster_name: str, workspace_location: str, cluster_location: str) -> tuple[str, str, str]:
    """The endpoint, rule and association names of Microsoft's template (FullAzureMonitorMetricsProfile.bicep)."""
    base = f"MSProm-{workspace_location}-{cluster_name}"
    return base[:44], base[:64], f"MSProm-{cluster_location}-{cluster_name}"


def metrics_profile() -> dict[str, Any]:
    """The cluster's ``azure_monitor_profile``: the metrics add-on on, and kube-state-metrics exporting the pool label
    the per-pool rules join on (``kube_node_labels{label_aks_gpu_pool=...}``). metricLabelsAllowlist: "Comma-separated
    list of additional Kubernetes label keys that will be used in the resource's labels metric (Example:
    'namespaces=[k8s-label-1,k8s-label-n,...],pods=[app],...')" (ManagedClusterAzureMonitorProfileKubeStateMetrics)."""
    return {
        "metrics": {
            "enabled": True,
            "kube_state_metrics": {"metric_labels_allowlist": f"nodes=[{POOL_LABEL}]", "metric_annotations_allow_list": ""},
        }
    }


def workspace_inputs(resource_group: str, name: str, location: str, tags: dict[str, str]) -> dict[str, Any]:
    return {"resource_group_name": resource_group, "azure_monitor_workspace_name": name, "location": location, "tags": tags}


def endpoint_inputs(resource_group: str, name: str, location: str, tags: dict[str, str]) -> dict[str, Any]:
    return {
        "resource_group_name": resource_group,
        "data_collection_endpoint_name": name,
        "location": location,
        "kind": "Linux",
        "description": "aks-gpu: data collection endpoint of Azure Monitor managed Prometheus",
        "tags": tags,
    }


def collection_rule_inputs(
    resource_group: str, name: str, location: str, endpoint_id: Any, workspace_id: Any, tags: dict[str, str]
) -> dict[str, Any]:
    return {
        "resource_group_name": resource_group,
        "data_collection_rule_name": name,
        "location": location,
        "kind": "Linux",
        "data_collection_endpoint_id": endpoint_id,
        "data_sources": {
            "prometheus_forwarder": [{"name": "PrometheusDataSource", "streams": [PROMETHEUS_STREAM], "label_include_filter": {}}]
        },
        "destinations": {"monitoring_accounts": [{"account_resource_id": workspace_id, "name": DESTINATION_NAME}]},
        "data_flows": [{"destinations": [DESTINATION_NAME], "streams": [PROMETHEUS_STREAM]}],
        "description": "aks-gpu: the cluster's Prometheus metrics to its Azure Monitor workspace",
        "tags": tags,
    }


def association_inputs(name: str, cluster_id: Any, rule_id: Any) -> dict[str, Any]:
    return {
        "association_name": name,
        "resource_uri": cluster_id,
        "data_collection_rule_id": rule_id,
        "description": "Association of data collection rule. Deleting this association will break the data collection "
        "for this AKS Cluster.",
    }


# Action groups are a global resource: location "Global" (ActionGroupResource in the Microsoft.Insights/actionGroups
# REST spec; every Microsoft sample sets it so), in the cluster's resource group.
ACTION_GROUP_LOCATION = "Global"


def action_group_inputs(
    resource_group: str, cluster_name: str, receivers: Sequence[AlertReceiver], tags: dict[str, str]
) -> dict[str, Any]:
    """The action group of the stack's ``monitoring.azureMonitor.receivers`` as ``monitor.ActionGroup`` takes it
    (Microsoft.Insights/actionGroups@2024-10-01-preview): email receivers {name, emailAddress} and webhook receivers
    {name, serviceUri}, each with the common alert schema, so every receiver gets the same payload."""
    return {
        "resource_group_name": resource_group,
        "action_group_name": action_group_name(cluster_name),
        "location": ACTION_GROUP_LOCATION,
        "group_short_name": ACTION_GROUP_SHORT_NAME,
        "enabled": True,
        "email_receivers": [
            {"name": r.name, "email_address": r.email, "use_common_alert_schema": True} for r in receivers if r.email
        ],
        "webhook_receivers": [
            {"name": r.name, "service_uri": r.webhook, "use_common_alert_schema": True} for r in receivers if r.webhook
        ],
        "tags": tags,
    }


def azure_rule(rule: AlertRule, action_group_ids: Sequence[Any]) -> dict[str, Any]:
    """One alert rule as PrometheusRuleArgs takes it: the same expression, labels and annotations as the rule file."""
    body: dict[str, Any] = {
        "alert": rule.alert,
        "expression": rule.expr,
        "severity": AZURE_SEVERITY[rule.severity],
        "labels": rule.all_labels,
        "annotations": rule.annotations,
        "enabled": True,
        "resolve_configuration": {"auto_resolved": True, "time_to_resolve": TIME_TO_RESOLVE},
    }
    if rule.for_minutes:
        body["for_"] = iso_duration(rule.for_minutes)
    if action_group_ids:
        body["actions"] = [{"action_group_id": group} for group in action_group_ids]
    return body


def rule_group_name(group: RuleGroup, cluster_name: str) -> str:
    return f"{group.name}-{cluster_name}"


def rule_group_inputs(
    group: RuleGroup,
    *,
    resource_group: str,
    location: str,
    cluster_name: str,
    workspace_id: Any,
    cluster_id: Any,
    action_group_ids: Sequence[Any],
    tags: dict[str, str],
) -> dict[str, Any]:
    """A PrometheusRuleGroup scoped to this cluster: scopes "Must include the target Azure Monitor workspace ID. Can
    optionally include one more cluster ID"; clusterName "Must match the cluster label that's added to metrics scraped
    from your target cluster. By default, set to the last part (resource name) of the cluster ID".
    https://learn.microsoft.com/azure/azure-monitor/metrics/prometheus-rule-groups"""
    return {
        "resource_group_name": resource_group,
        "rule_group_name": rule_group_name(group, cluster_name),
        "location": location,
        "scopes": [workspace_id, cluster_id],
        "cluster_name": cluster_name,
        "interval": iso_duration(group.interval_minutes),
        "enabled": True,
        "description": f"aks-gpu: GPU {group.name.removeprefix(PLATFORM_OBJECT_PREFIX)} alerts for {cluster_name}",
        "rules": [azure_rule(rule, action_group_ids) for rule in group.rules],
        "tags": tags,
    }
