"""GpuCluster: the exact inputs Azure receives, the adopted-cluster path, and the Kubernetes provider."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from pulumi_azure_native import authorization
from pulumi_azure_native import containerservice as cs

from aks_gpu.azure.cluster import GpuCluster, GpuClusterArgs, azure_cli_login_type, deployer_principal_type
from aks_gpu.mock_engine import FAKE_OBJECT_ID, FAKE_SUBSCRIPTION, PlanResult
from aks_gpu.specs import ClusterSpec
from tests.conftest import MockHarness, minimal_raw, planned_result, raw_stack

MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
MAINTENANCE = "azure-native:containerservice:MaintenanceConfiguration"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"


def cluster_inputs(result: PlanResult) -> dict[str, Any]:
    [cluster] = result.by_type(MANAGED_CLUSTER)
    return cluster.inputs


def test_prod_cluster_inputs() -> None:
    result = planned_result("prod")
    inputs = cluster_inputs(result)
    assert inputs["resourceName"] == "aks-gpu-prod" and inputs["resourceGroupName"] == "rg-gpu-prod"
    assert inputs["location"] == "swedencentral" and inputs["kubernetesVersion"] == "1.36"
    assert inputs["supportPlan"] == "KubernetesOfficial"
    assert inputs["networkProfile"] == {
        "networkPlugin": "azure",
        "networkPluginMode": "overlay",
        "networkPolicy": "cilium",
        "networkDataplane": "cilium",
        "podCidr": "10.244.0.0/16",
    }
    assert inputs["autoUpgradeProfile"] == {"upgradeChannel": "patch", "nodeOSUpgradeChannel": "NodeImage"}
    assert inputs["disableLocalAccounts"] is True
    assert inputs["aadProfile"]["managed"] is True and inputs["aadProfile"]["enableAzureRBAC"] is True
    assert inputs["oidcIssuerProfile"] == {"enabled": True}
    assert inputs["securityProfile"] == {"workloadIdentity": {"enabled": True}}
    [system] = inputs["agentPoolProfiles"]
    assert system["mode"] == "System" and system["nodeTaints"] == ["CriticalAddonsOnly=true:NoSchedule"]
    assert system["enableAutoScaling"] is True and (system["minCount"], system["maxCount"]) == (2, 3)


def test_enum_values_are_spelled_as_the_provider_defines_them() -> None:
    inputs = cluster_inputs(planned_result("prod"))
    assert inputs["networkProfile"]["networkPolicy"] in {e.value for e in cs.NetworkPolicy}
    assert inputs["networkProfile"]["networkPluginMode"] in {e.value for e in cs.NetworkPluginMode}
    assert inputs["networkProfile"]["networkDataplane"] in {e.value for e in cs.NetworkDataplane}
    assert inputs["autoUpgradeProfile"]["upgradeChannel"] in {e.value for e in cs.UpgradeChannel}
    assert inputs["autoUpgradeProfile"]["nodeOSUpgradeChannel"] in {e.value for e in cs.NodeOSUpgradeChannel}
    assert inputs["sku"]["tier"] in {e.value for e in cs.ManagedClusterSKUTier}
    assert inputs["supportPlan"] in {e.value for e in cs.KubernetesSupportPlan}
    assert inputs["agentPoolProfiles"][0]["mode"] in {e.value for e in cs.AgentPoolMode}


def test_cluster_options_protect_prod_and_leave_inline_pools_alone() -> None:
    [cluster] = planned_result("prod").by_type(MANAGED_CLUSTER)
    assert cluster.options["protect"] is True
    assert cluster.options["ignoreChanges"] == ["agentPoolProfiles"]
    assert cluster.options["replaceOnChanges"] == ["dnsPrefix", "location", "resourceName"]
    [dev_cluster] = planned_result("dev").by_type(MANAGED_CLUSTER)
    assert dev_cluster.options["protect"] is False


def test_maintenance_windows() -> None:
    windows = {r.inputs["configName"]: r.inputs for r in planned_result("prod").by_type(MAINTENANCE)}
    assert set(windows) == {"aksManagedNodeOSUpgradeSchedule", "aksManagedAutoUpgradeSchedule"}
    node_os = windows["aksManagedNodeOSUpgradeSchedule"]
    assert node_os["resourceName"] == "aks-gpu-prod"
    assert node_os["maintenanceWindow"] == {
        "schedule": {"weekly": {"dayOfWeek": "Sunday", "intervalWeeks": 1}},
        "durationHours": 6,
        "startTime": "02:00",
        "utcOffset": "+00:00",
    }


def test_monthly_window_and_blackout_dates(harness: MockHarness) -> None:
    window = {
        "schedule": "relativeMonthly",
        "dayOfWeek": "Saturday",
        "weekIndex": "First",
        "startTime": "22:00",
        "durationHours": 8,
        "notAllowedDates": [{"start": "2026-12-20", "end": "2027-01-03"}],
    }
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", "maintenance": {"autoUpgrade": window}}})
    [config] = harness.run_stack("test", raw).by_type(MAINTENANCE)
    assert config.inputs["configName"] == "aksManagedAutoUpgradeSchedule"
    assert config.inputs["maintenanceWindow"]["schedule"] == {
        "relativeMonthly": {"dayOfWeek": "Saturday", "intervalMonths": 1, "weekIndex": "First"}
    }
    assert config.inputs["maintenanceWindow"]["notAllowedDates"] == [{"start": "2026-12-20", "end": "2027-01-03"}]


def test_existing_cluster_creates_nothing_in_azure(harness: MockHarness) -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], "existing": True}
    result = harness.run_stack("prod", raw)
    assert result.by_type(MANAGED_CLUSTER) == [] and result.by_type(MAINTENANCE) == []
    [provider] = result.by_type("pulumi:providers:kubernetes")
    # The adopted cluster's ARM id comes from the lookup and keeps the provider stable.
    assert provider.inputs["clusterIdentifier"].endswith("/managedClusters/aks-gpu-prod")
    pools = result.by_type("azure-native:containerservice:AgentPool")
    assert {p.inputs["resourceName"] for p in pools} == {"aks-gpu-prod"}


def test_kubeconfig_is_a_secret_and_feeds_the_provider() -> None:
    result = planned_result("dev")
    assert result.outputs["kubeconfig"] == "[secret]"
    [provider] = result.by_type("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert provider.inputs["clusterIdentifier"].endswith("/managedClusters/aks-gpu-dev")


def test_kaito_turns_on_the_ai_toolchain_operator_with_oidc(harness: MockHarness) -> None:
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", "kaito": True, "workloadIdentity": False}})
    inputs = cluster_inputs(harness.run_stack("test", raw))
    assert inputs["aiToolchainOperatorProfile"] == {"enabled": True}
    assert inputs["oidcIssuerProfile"] == {"enabled": True}


def test_component_can_be_used_on_its_own(harness: MockHarness) -> None:
    holder: dict[str, k8s.Provider] = {}

    def program() -> None:
        spec: ClusterSpec = {"resource_group": "rg-team", "name": "aks-team", "network_policy": "calico"}
        cluster = GpuCluster("team", GpuClusterArgs(cluster=spec, location="westeurope"))
        holder["provider"] = cluster.provider
        pulumi.export("name", cluster.cluster_name)

    result = harness.run(program)
    assert result.outputs["name"] == "aks-team"
    inputs = cluster_inputs(result)
    assert inputs["networkProfile"]["networkPolicy"] == "calico" and "networkDataplane" not in inputs["networkProfile"]
    assert {r.type for r in result.resources} >= {"aks-gpu:index:GpuCluster", MANAGED_CLUSTER, "pulumi:providers:kubernetes"}
    assert all(r.parent for r in result.resources if r.type != "aks-gpu:index:GpuCluster")


def test_bad_cluster_args_fail_with_the_key_and_register_nothing(harness: MockHarness) -> None:
    spec: ClusterSpec = {"resource_group": "rg-team", "name": "aks team", "network_policy": "weave"}
    with pytest.raises(pulumi.RunError) as caught:
        harness.run(lambda: GpuCluster("team", GpuClusterArgs(cluster=spec, location="westeurope")))
    message = str(caught.value)
    assert "cluster.name: 'aks team' is not allowed" in message and "cluster.networkPolicy: 'weave' is not allowed" in message


# ---------------------------------------------------------------- the deploying identity's Kubernetes access


def test_the_deployer_gets_aks_rbac_cluster_admin_on_the_cluster_before_any_kubernetes_object() -> None:
    result = planned_result("prod")
    [grant] = result.by_type(ROLE_ASSIGNMENT)
    [cluster] = result.by_type(MANAGED_CLUSTER)
    # The client config's object id, on the cluster's ARM id, with the built-in role's id (built-in-roles/containers).
    assert grant.inputs["principalId"] == FAKE_OBJECT_ID
    assert grant.inputs["scope"].endswith("/providers/Microsoft.ContainerService/managedClusters/aks-gpu-prod")
    assert grant.inputs["roleDefinitionId"] == (
        f"/subscriptions/{FAKE_SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
    )
    # Always sent: the SDK would send "User" for a missing one, and ARM refuses a mismatch (UnmatchedPrincipalType).
    assert grant.inputs["principalType"] in {e.value for e in authorization.PrincipalType}
    assert cluster.urn in grant.options["dependsOn"]
    [provider] = result.by_type("pulumi:providers:kubernetes")
    assert grant.urn in provider.options["dependsOn"]


def test_deployer_access_can_be_turned_off_and_is_never_made_for_an_adopted_cluster(harness: MockHarness) -> None:
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", "deployerAccess": {"enabled": False}}})
    assert harness.run_stack("test", raw).by_type(ROLE_ASSIGNMENT) == []
    adopted = raw_stack("dev")
    adopted["aks-gpu:cluster"] = {**adopted["aks-gpu:cluster"], "existing": True}
    assert harness.run_stack("dev", adopted).by_type(ROLE_ASSIGNMENT) == []


@pytest.mark.parametrize(
    ("configured", "provider", "env", "expected"),
    [
        ("auto", {}, {}, "User"),  # az login as a person: the CLI's user
        ("auto", {}, {"ARM_CLIENT_ID": "app", "ARM_CLIENT_SECRET": "s"}, "ServicePrincipal"),
        ("auto", {}, {"ARM_USE_OIDC": "true"}, "ServicePrincipal"),
        ("auto", {"useMsi": "true"}, {}, "ServicePrincipal"),
        ("auto", {"clientId": "app"}, {}, "ServicePrincipal"),
        ("User", {"clientId": "app"}, {"ARM_USE_OIDC": "true"}, "User"),  # the stack's word wins
        ("ServicePrincipal", {}, {}, "ServicePrincipal"),
    ],
)
def test_the_deployers_principal_type_follows_how_the_provider_signs_in(
    configured: str, provider: dict[str, str], env: dict[str, str], expected: str
) -> None:
    assert deployer_principal_type(configured, provider, env) == expected


def test_the_kubeconfig_the_stack_uses_logs_in_without_a_person(harness: MockHarness) -> None:
    """PlanMocks returns the kubeconfig AKS returns (`--login devicecode`); what the program hands the provider and
    exports is the rewritten one."""

    def program() -> None:
        spec: ClusterSpec = {"resource_group": "rg-team", "name": "aks-team", "kubelogin_mode": "workloadidentity"}
        cluster = GpuCluster("team", GpuClusterArgs(cluster=spec, location="westeurope"))
        pulumi.export("kubeconfig", pulumi.Output.unsecret(cluster.kubeconfig))

    document = yaml.safe_load(harness.run(program).outputs["kubeconfig"])
    [user] = document["users"]
    assert user["user"]["exec"]["command"] == "kubelogin"
    assert user["user"]["exec"]["args"] == [
        "get-token",
        "--login",
        "workloadidentity",
        "--server-id",
        "6dae42f8-4368-4678-94ff-3960e28e3630",
    ]
    assert "devicecode" not in yaml.safe_dump(document)
    assert document["clusters"][0]["cluster"]["server"].startswith("https://aks-team")


# ---------------------------------------------------------------- the Azure CLI's login (azureProfile.json)


def cli_profile(folder: Path, *logins: tuple[bool, str]) -> Path:
    """An azureProfile.json as the Azure CLI writes it (byte order mark first), one subscription per (isDefault, type)."""
    subscriptions = [
        {"id": f"sub-{i}", "isDefault": default, "user": {"name": "who", "type": kind}, "tenantId": "t"}
        for i, (default, kind) in enumerate(logins)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "azureProfile.json").write_text("\ufeff" + json.dumps({"subscriptions": subscriptions}), encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("cli", "provider", "env", "expected"),
    [
        ("servicePrincipal", {}, {}, "ServicePrincipal"),  # az login --service-principal / --identity (azure/login in CI)
        ("user", {}, {}, "User"),
        (None, {}, {}, "User"),  # no CLI login readable: as before
        ("user", {}, {"ARM_USE_OIDC": "true"}, "ServicePrincipal"),  # the provider's own credentials come first
    ],
)
def test_an_azure_cli_service_principal_login_is_a_service_principal(
    cli: str | None, provider: dict[str, str], env: dict[str, str], expected: str
) -> None:
    assert deployer_principal_type("auto", provider, env, cli) == expected
    assert deployer_principal_type("User", provider, env, cli) == "User"  # the stack's word still wins


def test_the_cli_login_is_read_from_the_default_subscription(tmp_path: Path) -> None:
    folder = cli_profile(tmp_path / "cli", (False, "user"), (True, "servicePrincipal"))
    assert azure_cli_login_type({"AZURE_CONFIG_DIR": str(folder)}) == "servicePrincipal"
    # Without AZURE_CONFIG_DIR the CLI's folder is ~/.azure.
    cli_profile(tmp_path / "home" / ".azure", (True, "user"))
    assert azure_cli_login_type({}, home=tmp_path / "home") == "user"


@pytest.mark.parametrize("text", ["", "{not json", "[]", '{"subscriptions": [{"isDefault": true}]}', '{"subscriptions": {}}'])
def test_an_unreadable_cli_profile_tells_nothing(tmp_path: Path, text: str) -> None:
    (tmp_path / "azureProfile.json").write_text(text, encoding="utf-8")
    assert azure_cli_login_type({"AZURE_CONFIG_DIR": str(tmp_path)}) is None
    assert azure_cli_login_type({"AZURE_CONFIG_DIR": str(tmp_path / "absent")}) is None


def test_a_cli_profile_that_is_a_fifo_is_not_waited_for(tmp_path: Path) -> None:
    # A pipe in the profile's place would block read_text forever (no writer): the plan must go on without it.
    os.mkfifo(tmp_path / "azureProfile.json")
    assert azure_cli_login_type({"AZURE_CONFIG_DIR": str(tmp_path)}) is None


def test_the_plan_sends_service_principal_for_a_cli_service_principal_login(
    harness: MockHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(cli_profile(tmp_path, (True, "servicePrincipal"))))
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks"}})
    [grant] = harness.run_stack("test", raw).by_type(ROLE_ASSIGNMENT)
    assert grant.inputs["principalType"] == "ServicePrincipal"
