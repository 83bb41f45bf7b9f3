"""GpuMonitoring wired into the platform, as the plan records it: the Azure side for managed Prometheus (workspace,
data collection, rule groups scoped to the cluster, the cluster's metrics profile), the PrometheusRule for an
operator, nothing when it is off; and the rule groups Azure gets hold the same rule text promtool checks."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.mock_engine import PlanResult
from aks_gpu.monitoring.rules import prometheus_duration, rule_file, rule_groups
from tests.conformance import planned
from tests.conftest import MockHarness, raw_stack, stack_model
from tests.monitoring import promtool

WORKSPACE = "/subscriptions/0000/resourceGroups/rg-obs/providers/Microsoft.Monitor/accounts/amw-shared"
ACTION_GROUP = "/subscriptions/0000/resourceGroups/rg-obs/providers/microsoft.insights/actionGroups/gpu-oncall"
MONITOR_TYPES = (
    "azure-native:monitor:AzureMonitorWorkspace",
    "azure-native:monitor:DataCollectionEndpoint",
    "azure-native:monitor:DataCollectionRule",
    "azure-native:monitor:DataCollectionRuleAssociation",
    "azure-native:alertsmanagement:PrometheusRuleGroup",
    "azure-native:monitor:ActionGroup",
)


def of_type(resources: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [r for r in resources if r["type"] == type_]


def records(result: PlanResult) -> list[dict[str, Any]]:
    return [r.to_json() for r in result.resources]


def test_managed_prometheus_for_prod() -> None:
    plan = planned("prod")
    resources = plan.resources
    (cluster,) = of_type(resources, "azure-native:containerservice:ManagedCluster")
    assert cluster["inputs"]["azureMonitorProfile"] == {
        "metrics": {
            "enabled": True,
            "kubeStateMetrics": {"metricLabelsAllowlist": "nodes=[aks-gpu/pool]", "metricAnnotationsAllowList": ""},
        }
    }
    (workspace,) = of_type(resources, "azure-native:monitor:AzureMonitorWorkspace")
    assert workspace["inputs"]["azureMonitorWorkspaceName"] == "aks-gpu-prod-amw"
    (endpoint,) = of_type(resources, "azure-native:monitor:DataCollectionEndpoint")
    (rule,) = of_type(resources, "azure-native:monitor:DataCollectionRule")
    (association,) = of_type(resources, "azure-native:monitor:DataCollectionRuleAssociation")
    cluster_id = association["inputs"]["resourceUri"]
    assert cluster_id.endswith("/managedClusters/aks-gpu-prod")
    assert rule["inputs"]["dataCollectionEndpointId"] == f"{endpoint['name']}-id"
    assert rule["inputs"]["destinations"]["monitoringAccounts"][0]["accountResourceId"] == f"{workspace['name']}-id"
    assert association["inputs"]["dataCollectionRuleId"] == f"{rule['name']}-id"
    assert association["inputs"]["associationName"] == "MSProm-swedencentral-aks-gpu-prod"
    groups = of_type(resources, "azure-native:alertsmanagement:PrometheusRuleGroup")
    assert sorted(g["inputs"]["ruleGroupName"] for g in groups) == ["aks-gpu-health-aks-gpu-prod", "aks-gpu-waste-aks-gpu-prod"]
    for group in groups:
        assert group["inputs"]["scopes"] == [f"{workspace['name']}-id", cluster_id]
        assert group["inputs"]["clusterName"] == "aks-gpu-prod"
        # Every rule notifies the action group prod creates from its receiver.
        assert all(len(r["actions"]) == 1 for r in group["inputs"]["rules"])
    # The scrape configuration waits for the association (the add-on starts collecting once it exists).
    (monitor,) = of_type(resources, "kubernetes:azmonitoring.coreos.com/v1:PodMonitor")
    assert association["urn"] in monitor["options"]["dependsOn"]
    assert plan.outputs.get("kubeconfig") == "[secret]"


def test_azure_severities() -> None:
    groups = of_type(planned("prod").resources, "azure-native:alertsmanagement:PrometheusRuleGroup")
    by_alert = {r["alert"]: r for g in groups for r in g["inputs"]["rules"]}
    assert by_alert["GpuXidCritical"]["severity"] == 0  # Critical
    assert by_alert["GpuNvlinkErrors"]["severity"] == 2  # Warning
    assert by_alert["GpuQuotaUnused"]["severity"] == 3  # Informational
    assert by_alert["GpuAllocatedIdle"]["for"] == "PT1H"


def azure_rule_file(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """A Prometheus rule file rebuilt from the PrometheusRuleGroups the plan sends to Azure."""

    def minutes(iso: str) -> int:
        match = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?", iso)
        assert match, iso
        return int(match.group(1) or 0) * 60 + int(match.group(2) or 0)

    out = []
    for group in sorted(groups, key=lambda g: g["inputs"]["ruleGroupName"]):
        rules = []
        for rule in group["inputs"]["rules"]:
            body: dict[str, Any] = {"alert": rule["alert"], "expr": rule["expression"]}
            if "for" in rule:
                body["for"] = prometheus_duration(minutes(rule["for"]))
            body |= {"labels": rule["labels"], "annotations": rule["annotations"]}
            rules.append(body)
        name = group["inputs"]["ruleGroupName"].removesuffix("-aks-gpu-prod")
        out.append({"name": name, "interval": prometheus_duration(minutes(group["inputs"]["interval"])), "rules": rules})
    return {"groups": out}


def test_azure_gets_the_rule_text_promtool_checks(tmp_path: Path) -> None:
    groups = of_type(planned("prod").resources, "azure-native:alertsmanagement:PrometheusRuleGroup")
    from_azure = azure_rule_file(groups)
    assert from_azure == rule_file(rule_groups(stack_model("prod"), critical_xid_codes()))
    done = promtool.check_rules(promtool.write_yaml(tmp_path / "azure.yaml", from_azure))
    assert done.returncode == 0, done.stdout + done.stderr


def test_prometheus_operator_engine_creates_nothing_in_azure(tmp_path: Path) -> None:
    plan = planned("amd")
    assert [r for t in MONITOR_TYPES for r in of_type(plan.resources, t)] == []
    (cluster,) = of_type(plan.resources, "azure-native:containerservice:ManagedCluster")
    assert "azureMonitorProfile" not in cluster["inputs"]
    (rule,) = plan.of_kind("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == rule_file(rule_groups(stack_model("amd"), critical_xid_codes()))
    done = promtool.check_rules(promtool.write_yaml(tmp_path / "spec.yaml", rule["spec"]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert {m["kind"] for m in plan.manifests.values()} >= {"PodMonitor", "PrometheusRule", "DaemonSet"}


def test_monitoring_off_creates_none_of_it(harness: MockHarness) -> None:
    raw = copy.deepcopy(raw_stack("prod"))
    raw["aks-gpu:monitoring"] = {"enabled": False}
    resources = records(harness.run_stack("prod", config=raw))
    assert [r for t in MONITOR_TYPES for r in of_type(resources, t)] == []
    (cluster,) = of_type(resources, "azure-native:containerservice:ManagedCluster")
    assert "azureMonitorProfile" not in cluster["inputs"]
    names = {r["inputs"].get("metadata", {}).get("name") for r in resources if r["type"].startswith("kubernetes:")}
    assert "dcgm-exporter" not in names and "dcgm-exporter-metrics" not in names
    (component,) = [r for r in resources if r["type"] == "aks-gpu:index:GpuMonitoring"]
    assert [r for r in resources if r["parent"] == component["urn"]] == []


def test_prod_creates_an_action_group_from_its_receiver_and_every_alert_routes_to_it() -> None:
    resources = planned("prod").resources
    (group,) = of_type(resources, "azure-native:monitor:ActionGroup")
    inputs = group["inputs"]
    assert inputs["actionGroupName"] == "aks-gpu-prod-gpu-alerts" and inputs["location"] == "Global"
    assert inputs["enabled"] is True and len(inputs["groupShortName"]) <= 12
    assert [r["emailAddress"] for r in inputs["emailReceivers"]] == ["gpu-oncall@example.com"]
    for rule_group in of_type(resources, "azure-native:alertsmanagement:PrometheusRuleGroup"):
        assert all(r["actions"] == [{"actionGroupId": f"{group['name']}-id"}] for r in rule_group["inputs"]["rules"])


def test_receivers_and_existing_action_groups_are_both_notified(harness: MockHarness) -> None:
    raw = copy.deepcopy(raw_stack("prod"))
    raw["aks-gpu:monitoring"]["azureMonitor"] = {
        "actionGroupIds": [ACTION_GROUP],
        "receivers": [{"name": "pager", "webhook": "https://pager.example.com/hook"}],
    }
    resources = records(harness.run_stack("prod", config=raw))
    (group,) = of_type(resources, "azure-native:monitor:ActionGroup")
    assert group["inputs"]["webhookReceivers"] == [
        {"name": "pager", "serviceUri": "https://pager.example.com/hook", "useCommonAlertSchema": True}
    ]
    assert group["inputs"]["emailReceivers"] == []
    expected = [{"actionGroupId": ACTION_GROUP}, {"actionGroupId": f"{group['name']}-id"}]
    for rule_group in of_type(resources, "azure-native:alertsmanagement:PrometheusRuleGroup"):
        assert all(r["actions"] == expected for r in rule_group["inputs"]["rules"])
    # Existing action groups only: nothing created.
    raw["aks-gpu:monitoring"]["azureMonitor"] = {"actionGroupIds": [ACTION_GROUP]}
    assert of_type(records(harness.run_stack("prod", config=raw)), "azure-native:monitor:ActionGroup") == []


def test_an_adopted_cluster_gets_rule_groups_on_its_owners_workspace(harness: MockHarness) -> None:
    raw = copy.deepcopy(raw_stack("prod"))
    raw["aks-gpu:cluster"]["existing"] = True
    raw["aks-gpu:monitoring"] = {"azureMonitor": {"workspaceResourceId": WORKSPACE, "actionGroupIds": [ACTION_GROUP]}}
    resources = records(harness.run_stack("prod", config=raw))
    for type_ in (*MONITOR_TYPES[:4], "azure-native:monitor:ActionGroup"):
        assert of_type(resources, type_) == [], f"{type_}: the owner's managed Prometheus is left alone"
    groups = of_type(resources, "azure-native:alertsmanagement:PrometheusRuleGroup")
    assert len(groups) == 2
    for group in groups:
        assert group["inputs"]["scopes"][0] == WORKSPACE
        assert all(r["actions"] == [{"actionGroupId": ACTION_GROUP}] for r in group["inputs"]["rules"])


def test_an_adopted_cluster_without_a_workspace_gets_the_exporters_only(harness: MockHarness) -> None:
    raw = copy.deepcopy(raw_stack("prod"))
    raw["aks-gpu:cluster"]["existing"] = True
    resources = records(harness.run_stack("prod", config=raw))
    assert [r for t in MONITOR_TYPES for r in of_type(resources, t)] == []
    assert of_type(resources, "kubernetes:azmonitoring.coreos.com/v1:PodMonitor") == []
    assert [r["inputs"]["metadata"]["name"] for r in of_type(resources, "kubernetes:apps/v1:DaemonSet")].count(
        "dcgm-exporter"
    ) == 1
