"""The azure-native stand-in of the e2e tier (tests/e2e/azure_stand_in.py), its pure answers: Diff by the provider's own
replace rules (data/azure_native_rules.yaml) and nothing else, and an ARM id for every type the rules hold."""

from __future__ import annotations

from aks_gpu.aks_facts import checked_api_versions, provider_replace_rules
from tests.e2e.azure_stand_in import ARM_IDS, arm_id, diff

POOL = "azure-native:containerservice:AgentPool"
CLUSTER = "azure-native:containerservice:ManagedCluster"


def test_every_type_with_provider_rules_gets_an_arm_id() -> None:
    held = {token for token in ARM_IDS if provider_replace_rules(token)}
    assert set(checked_api_versions()) <= set(ARM_IDS)
    assert held == set(ARM_IDS)


def test_a_pool_is_replaced_delete_first_on_its_vm_size_only_by_the_providers_rule() -> None:
    old = {"vmSize": "Standard_NC4as_T4_v3", "maxPods": 30, "gpuProfile": {"driver": "Install"}}
    answer = diff(POOL, old, {**old, "vmSize": "Standard_NC8as_T4_v3"})
    assert answer["replaces"] == ["vmSize"] and answer["deleteBeforeReplace"] is True
    # What AKS fixes but the provider updates in place: the engine replaces those only through replaceOnChanges.
    answer = diff(POOL, old, {**old, "maxPods": 60, "gpuProfile": {"driver": "None"}})
    assert answer["replaces"] == [] and answer["detailedDiff"] == {"maxPods": "update", "gpuProfile.driver": "update"}


def test_the_cluster_is_replaced_on_a_network_policy_change_and_updated_on_a_tag() -> None:
    old = {"networkProfile": {"networkPolicy": "cilium"}, "tags": {"a": "1"}}
    assert diff(CLUSTER, old, {**old, "networkProfile": {"networkPolicy": "calico"}})["replaces"] == ["networkProfile"]
    assert diff(CLUSTER, old, {**old, "tags": {"a": "2"}})["replaces"] == []


def test_a_role_assignment_is_replaced_create_first() -> None:
    answer = diff("azure-native:authorization:RoleAssignment", {"principalId": "a"}, {"principalId": "b"})
    assert answer["replaces"] == ["principalId"] and answer["deleteBeforeReplace"] is False


def test_arm_ids() -> None:
    resource_id, name = arm_id(POOL, {"resourceGroupName": "rg", "resourceName": "aks", "agentPoolName": "gpu"})
    assert resource_id.endswith("/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks/agentPools/gpu")
    assert name == "gpu"
    # Unnamed by the program: named from its inputs, the same each time.
    first = arm_id("azure-native:authorization:RoleAssignment", {"scope": "/s", "principalId": "p"})
    assert first == arm_id("azure-native:authorization:RoleAssignment", {"scope": "/s", "principalId": "p"})
