"""What a first deploy needs to exist in Azure: the mock engine answers any name, Azure answers NotFound. Every Azure
scope a registered resource names (its resource group, its cluster, an ARM id in an input) is created by the stack
or looked up by a get-invoke (declared as existing); the plan refuses anything else."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
from pulumi_azure_native import containerservice, resources

from aks_gpu.mock_engine import PlanResult, UndeclaredAzureReferenceError, run_mocked
from tests.conftest import STACK_NAMES, MockHarness, minimal_raw, planned_result, raw_stack

GROUP = "azure-native:resources:ResourceGroup"
CLUSTER = "azure-native:containerservice:ManagedCluster"


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_each_shipped_stack_creates_its_resource_group_before_the_cluster(stack: str) -> None:
    result = planned_result(stack)
    [group] = result.by_type(GROUP)
    [cluster] = result.by_type(CLUSTER)
    expected = raw_stack(stack)["aks-gpu:cluster"]["resourceGroup"]
    assert group.inputs["resourceGroupName"] == expected == cluster.inputs["resourceGroupName"]
    assert group.urn in cluster.options["dependsOn"]
    # The Azure Monitor side takes nothing from the cluster, but must not be created before the group either.
    for record in result.resources:
        if record.type.startswith("azure-native:monitor:AzureMonitorWorkspace") or record.type.endswith("DataCollectionEndpoint"):
            assert group.urn in record.options["dependsOn"], record.name


def test_an_adopted_group_is_looked_up_not_created(harness: MockHarness) -> None:
    raw = minimal_raw()
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], "existingResourceGroup": True}
    result = harness.run_stack("test", raw)
    assert result.by_type(GROUP) == []
    assert result.by_type(CLUSTER)[0].inputs["resourceGroupName"] == "rg-test"


def test_an_adopted_cluster_creates_no_group(harness: MockHarness) -> None:
    raw = minimal_raw()
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], "existing": True}
    raw["aks-gpu:monitoring"]["azureMonitor"]["workspaceResourceId"] = _workspace_id("rg-shared")
    result = harness.run_stack("test", raw)
    assert result.by_type(GROUP) == [] and result.by_type(CLUSTER) == []
    # The pools join the looked-up cluster; the workspace in another group is looked up too.
    assert result.by_type("azure-native:containerservice:AgentPool")


def _workspace_id(group: str) -> str:
    return f"/subscriptions/0/resourceGroups/{group}/providers/Microsoft.Monitor/accounts/amw"


# ---------------------------------------------------------------- the engine's rule, on hand-made programs


class CheckingHarness:
    """Runs a hand-made program as ``aksgpu plan`` runs a stack program: with the reference check on."""

    def run(self, program: Callable[[], object]) -> PlanResult:
        return run_mocked(program, "test", check_references=True)


@pytest.fixture
def checking() -> CheckingHarness:
    return CheckingHarness()


def test_a_component_on_its_own_is_not_checked(harness: MockHarness) -> None:
    """A component run by itself gets its cluster from its caller (another stack, a StackReference): only a whole
    stack program, as aksgpu plan runs it, must create or look up what it names."""
    harness.run(lambda: containerservice.ManagedCluster("aks", resource_group_name="rg-elsewhere", resource_name_="aks"))


def test_a_resource_in_a_group_nobody_creates_is_refused(checking: CheckingHarness) -> None:
    def program() -> None:
        containerservice.ManagedCluster("aks", resource_group_name="rg-nowhere", resource_name_="aks")

    with pytest.raises(UndeclaredAzureReferenceError, match="rg-nowhere"):
        checking.run(program)


def test_a_pool_of_a_cluster_nobody_creates_is_refused(checking: CheckingHarness) -> None:
    def program() -> None:
        resources.ResourceGroup("rg", resource_group_name="rg-a")
        containerservice.AgentPool("pool", resource_group_name="rg-a", resource_name_="aks-elsewhere", agent_pool_name="gpu")

    with pytest.raises(UndeclaredAzureReferenceError, match="joins cluster 'aks-elsewhere'"):
        checking.run(program)


def test_an_arm_id_into_an_undeclared_group_is_refused_and_a_lookup_declares_it(checking: CheckingHarness) -> None:
    def program(look_up: bool) -> None:
        resources.ResourceGroup("rg", resource_group_name="rg-a")
        if look_up:
            resources.get_resource_group_output(resource_group_name="rg-b")
        pulumi_azure_native_role("/subscriptions/0/resourceGroups/rg-b/providers/Microsoft.Monitor/accounts/amw")

    with pytest.raises(UndeclaredAzureReferenceError, match="input scope refers to"):
        checking.run(lambda: program(False))
    checking.run(lambda: program(True))


def pulumi_azure_native_role(scope: str) -> None:
    from pulumi_azure_native import authorization

    authorization.RoleAssignment("role", scope=scope, principal_id="p", role_definition_id="/subscriptions/0/x")


def test_names_compare_without_case_as_arm_does(checking: CheckingHarness) -> None:
    def program() -> None:
        resources.ResourceGroup("rg", resource_group_name="RG-A")
        containerservice.ManagedCluster("aks", resource_group_name="rg-a", resource_name_="aks")

    checking.run(program)


def test_the_plan_says_whether_the_group_is_created_or_adopted(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from aks_gpu.cli import main
    from tests.conftest import PROJECT_DIR

    for adopt, words in ((False, "created by this stack"), (True, "adopted")):
        raw = copy.deepcopy(minimal_raw())
        raw["aks-gpu:cluster"]["existingResourceGroup"] = adopt
        stack_file = tmp_path / "Pulumi.rg.yaml"
        stack_file.write_text(yaml.safe_dump({"config": raw}), encoding="utf-8")
        argv = ["plan", "--stack", "rg", "--config-file", str(stack_file), "--out", str(tmp_path / "out")]
        assert main([*argv, "--project-dir", str(PROJECT_DIR)]) == 0
        printed = " ".join(capsys.readouterr().out.split())
        assert f"resource group rg-test: {words}" in printed



# ---------------------------------------------------------------- what a fresh subscription must have


def test_each_stack_lists_the_providers_features_and_role_its_resources_need() -> None:
    from aks_gpu.azure.prerequisites import subscription_prerequisites
    from tests.conftest import stack_config

    def names(stack: str) -> set[str]:
        return {item.what for item in subscription_prerequisites(stack_config(stack))}

    prod, amd = names("prod"), names("amd")
    # prod: NVMe cache (extension) and Azure Monitor; amd: prometheus-operator (no Azure Monitor), an RDMA AMD size.
    assert {
        "resource provider Microsoft.ContainerService",
        "resource provider Microsoft.KubernetesConfiguration",
        "resource provider Microsoft.Monitor",
        "resource provider Microsoft.Insights",
        "resource provider Microsoft.AlertsManagement",
    } <= prod
    assert "preview feature Microsoft.ContainerService/AKSInfinibandSupport" in amd
    assert not any("Monitor" in name or "KubernetesConfiguration" in name for name in amd)
    assert any("roleAssignments/write" in name for name in prod)


def test_the_plan_registers_a_provider_for_every_azure_namespace_it_creates_in() -> None:
    """Every resource type the plan creates is covered by a listed provider (Microsoft.Resources and
    Microsoft.Authorization are registered in every subscription)."""
    from aks_gpu.azure.prerequisites import subscription_prerequisites
    from tests.conftest import stack_config

    namespaces = {
        "containerservice": "Microsoft.ContainerService",
        "kubernetesconfiguration": "Microsoft.KubernetesConfiguration",
        "monitor:AzureMonitorWorkspace": "Microsoft.Monitor",
        "monitor:DataCollection": "Microsoft.Insights",
        "alertsmanagement": "Microsoft.AlertsManagement",
    }
    for stack in STACK_NAMES:
        listed = " ".join(item.what for item in subscription_prerequisites(stack_config(stack)))
        for record in planned_result(stack).resources:
            for part, namespace in namespaces.items():
                if record.custom and f"azure-native:{part}" in record.type:
                    assert namespace in listed, (stack, record.type)


class FakeAz:
    """The Azure CLI as the check calls it: a provider list and a feature state, and the calls it got."""

    def __init__(self, providers: dict[str, str] | None, feature_state: str = "Registered") -> None:
        self.providers, self.feature_state = providers, feature_state
        self.calls: list[list[str]] = []

    def __call__(self, arguments: list[str]) -> str | None:
        import json

        self.calls.append(arguments)
        if arguments[:2] == ["provider", "list"]:
            if self.providers is None:
                return None
            return json.dumps([{"namespace": name, "state": state} for name, state in self.providers.items()])
        return self.feature_state + "\n"


ALL_REGISTERED = {
    namespace: "Registered"
    for namespace in (
        "Microsoft.ContainerService",
        "Microsoft.KubernetesConfiguration",
        "microsoft.monitor",  # ARM compares namespaces without case
        "Microsoft.Insights",
        "Microsoft.AlertsManagement",
    )
}


def test_a_fresh_subscription_stops_before_the_first_resource_with_one_message() -> None:
    from aks_gpu.program import check_subscription
    from aks_gpu.resolved.stack import validate_stack

    prod = validate_stack(raw_stack("prod"), "stacks/Pulumi.prod.yaml")
    fresh = {"Microsoft.ContainerService": "NotRegistered", "Microsoft.Insights": "Registering"}
    with pytest.raises(pulumi.RunError) as caught:
        check_subscription(prod, FakeAz(fresh), environment={})
    message = str(caught.value)
    for namespace in ("ContainerService", "KubernetesConfiguration", "Monitor", "Insights", "AlertsManagement"):
        assert f"az provider register --namespace Microsoft.{namespace} --wait" in message
    assert "nothing was created" in message
    # Everything registered: no error. The provider's subscription is the one asked about.
    ready = FakeAz(ALL_REGISTERED)
    check_subscription(prod, ready, environment={"ARM_SUBSCRIPTION_ID": "sub-1"})
    assert ready.calls and all(call[-2:] == ["--subscription", "sub-1"] for call in ready.calls)


def test_the_amd_preview_feature_is_checked_and_named() -> None:
    from aks_gpu.program import check_subscription
    from aks_gpu.resolved.stack import validate_stack

    amd = validate_stack(raw_stack("amd"), "stacks/Pulumi.amd.yaml")
    with pytest.raises(pulumi.RunError) as caught:
        check_subscription(amd, FakeAz(ALL_REGISTERED, feature_state="Pending"), environment={})
    assert "az feature register --namespace Microsoft.ContainerService --name AKSInfinibandSupport" in str(caught.value)
    check_subscription(amd, FakeAz(ALL_REGISTERED, feature_state="Registered"), environment={})


def test_without_a_usable_cli_nothing_is_stopped_and_the_skip_switch_skips() -> None:
    from aks_gpu.program import check_subscription
    from aks_gpu.resolved.stack import validate_stack

    prod = validate_stack(raw_stack("prod"), "stacks/Pulumi.prod.yaml")
    check_subscription(prod, FakeAz(None), environment={})  # warns, does not stop
    skipped = FakeAz({})
    check_subscription(prod, skipped, environment={"AKSGPU_SKIP_SUBSCRIPTION_CHECK": "1"})
    assert skipped.calls == []


def test_the_plan_never_calls_azure(harness: MockHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the mock engine the check does not run, even where an Azure CLI is installed."""
    import shutil
    import subprocess

    def no_azure(arguments: list[str]) -> str | None:
        raise AssertionError(f"the plan called az {arguments}")

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/az")
    monkeypatch.setattr(subprocess, "run", no_azure)
    harness.run_stack("prod")


def test_a_secret_resource_group_name_is_checked_too(checking: CheckingHarness) -> None:
    """The plan masks secrets in what it records; the check reads the plain names, as the provider does."""

    def program(create: bool) -> None:
        if create:
            resources.ResourceGroup("rg", resource_group_name=pulumi.Output.secret("rg-hidden"))
        containerservice.ManagedCluster("aks", resource_group_name=pulumi.Output.secret("rg-hidden"), resource_name_="aks")

    with pytest.raises(UndeclaredAzureReferenceError, match="is created in resource group") as caught:
        checking.run(lambda: program(False))
    assert "rg-hidden" not in str(caught.value)  # the message keeps the secret
    checking.run(lambda: program(True))
