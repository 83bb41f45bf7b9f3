"""No refactor replaces a deployed resource: every shipped stack registers exactly the committed URNs, and every URN
an earlier release deployed is taken over by one resource of today's through its aliases, as the engine resolves
them (``aks_gpu.mock_engine.previous_urns``). See ``tests/urns/__init__.py`` for how the lists are kept."""

from __future__ import annotations

from collections import Counter

import pulumi
import pytest

from aks_gpu.mock_engine import AliasSpec, ResourceRecord, engine_urn, previous_urns
from tests.conftest import STACK_NAMES, MockHarness, planned_result
from tests.urns import current_file, read_urns, retired_file


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_the_stack_registers_exactly_the_committed_urns(stack: str) -> None:
    registered = {record.urn for record in planned_result(stack).resources}
    committed = set(read_urns(current_file(stack)))
    assert committed, f"{current_file(stack)} is missing: write it with python -m tests.urns"
    gone, new = sorted(committed - registered), sorted(registered - committed)
    assert not gone and not new, (
        f"URNs of stack {stack} changed: a resource whose URN changes is replaced (a GPU pool drains every node).\n"
        f"gone: {gone}\nnew: {new}\n"
        "Keep the name, or add an alias and move the old URN to the .retired.txt list; a new resource: python -m tests.urns"
    )


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_retired_urn_is_taken_over_by_one_resource(stack: str) -> None:
    records = planned_result(stack).resources
    retired = read_urns(retired_file(stack))
    current = {record.urn for record in records}
    assert not set(retired) & current, "a retired URN is registered again: remove it from the retired list"
    found = previous_urns(records, set(retired))
    missing = sorted(set(retired) - set(found.values()))
    assert not missing, f"no resource of stack {stack} takes over these URNs (they would be deleted): {missing}"
    claims = Counter(found.values())
    assert all(count == 1 for count in claims.values()), f"claimed by two resources: {[u for u, n in claims.items() if n > 1]}"


# ---------------------------------------------------------------- the engine's rules, on hand-made registrations

STACK_URN = "urn:pulumi:dev::aks-gpu::pulumi:pulumi:Stack::aks-gpu-dev"


def record(name: str, type_: str, parent: str | None, *aliases: AliasSpec) -> ResourceRecord:
    urn = engine_urn(name, type_, parent, project="aks-gpu", stack="dev")
    return ResourceRecord(urn, type_, name, parent, type_.startswith("azure"), {}, {}, aliases)


def test_urns_carry_every_ancestor_type_but_the_stack() -> None:
    root = record("platform", "aks-gpu:index:GpuPlatform", STACK_URN)
    child = record("platform-cluster", "aks-gpu:index:GpuCluster", root.urn)
    grandchild = record("platform-cluster-aks", "azure-native:containerservice:ManagedCluster", child.urn)
    assert root.urn == "urn:pulumi:dev::aks-gpu::aks-gpu:index:GpuPlatform::platform"
    assert grandchild.urn == (
        "urn:pulumi:dev::aks-gpu::aks-gpu:index:GpuPlatform$aks-gpu:index:GpuCluster"
        "$azure-native:containerservice:ManagedCluster::platform-cluster-aks"
    )


def test_a_renamed_root_carries_its_children_by_their_name_prefix() -> None:
    """One alias on the root is enough for children named after it, as the engine inherits it (inheritedChildAlias);
    a child named otherwise is not carried."""
    root = record("platform", "aks-gpu:index:GpuPlatform", STACK_URN, AliasSpec(name="dev"))
    child = record("platform-cluster", "aks-gpu:index:GpuCluster", root.urn)
    grandchild = record("platform-cluster-aks", "azure-native:containerservice:ManagedCluster", child.urn)
    stray = record("other", "azure-native:containerservice:AgentPool", child.urn)
    old_root = "urn:pulumi:dev::aks-gpu::aks-gpu:index:GpuPlatform::dev"
    old_child = "urn:pulumi:dev::aks-gpu::aks-gpu:index:GpuPlatform$aks-gpu:index:GpuCluster::dev-cluster"
    old_grandchild = (
        "urn:pulumi:dev::aks-gpu::aks-gpu:index:GpuPlatform$aks-gpu:index:GpuCluster"
        "$azure-native:containerservice:ManagedCluster::dev-cluster-aks"
    )
    old_stray = old_child.replace("::dev-cluster", "$azure-native:containerservice:AgentPool::x")
    found = previous_urns([grandchild, stray, child, root], {old_root, old_child, old_grandchild, old_stray})
    assert found == {root.urn: old_root, child.urn: old_child, grandchild.urn: old_grandchild}


def test_an_alias_naming_the_old_parent_resolves_through_the_parents_own_alias() -> None:
    root = record("platform", "aks-gpu:index:GpuPlatform", STACK_URN, AliasSpec(name="dev"))
    moved = record("pool", "azure-native:containerservice:AgentPool", root.urn, AliasSpec(name="old-pool", parent_urn=root.urn))
    unparented = record("thing", "azure-native:containerservice:AgentPool", root.urn, AliasSpec(no_parent=True))
    old_root = "urn:pulumi:dev::aks-gpu::aks-gpu:index:GpuPlatform::dev"
    old_moved = "urn:pulumi:dev::aks-gpu::aks-gpu:index:GpuPlatform$azure-native:containerservice:AgentPool::old-pool"
    old_unparented = "urn:pulumi:dev::aks-gpu::azure-native:containerservice:AgentPool::thing"
    found = previous_urns([root, moved, unparented], {old_root, old_moved, old_unparented})
    assert found == {root.urn: old_root, moved.urn: old_moved, unparented.urn: old_unparented}


def test_the_mock_engine_records_the_aliases_a_program_sends(harness: MockHarness) -> None:
    """The SDK sends alias specs (the mock monitor supports them, as the engine does); the plan keeps each."""

    def program() -> None:
        renamed = pulumi.ResourceOptions(aliases=[pulumi.Alias(name="dev")])
        parent = pulumi.ComponentResource("aks-gpu:index:GpuPlatform", "platform", None, renamed)
        pulumi.CustomResource(
            "azure-native:containerservice:AgentPool",
            "platform-train",
            {},
            pulumi.ResourceOptions(parent=parent, aliases=[pulumi.Alias(name="train", parent=pulumi.ROOT_STACK_RESOURCE)]),
        )
        parent.register_outputs({})

    result = harness.run(program, stack="dev")
    by_name = {r.name: r for r in result.resources}
    assert by_name["platform"].aliases == (AliasSpec(name="dev"),)
    # The SDK sends "parent: the stack" as no parent at all.
    assert by_name["platform-train"].aliases == (AliasSpec(name="train", no_parent=True),)
    old = {
        "urn:pulumi:dev::aks-gpu::aks-gpu:index:GpuPlatform::dev",
        "urn:pulumi:dev::aks-gpu::azure-native:containerservice:AgentPool::train",
    }
    assert set(previous_urns(result.resources, old).values()) == old


def test_renaming_a_stack_renames_no_resource() -> None:
    """`pulumi stack rename` rewrites the stack part of every URN in the state; no resource name may follow the stack
    name, or the renamed stack's next update would replace everything."""
    from tests.conftest import raw_stack

    renamed = MockHarness().run_stack("dev-renamed", raw_stack("dev"))
    as_dev = {record.urn.replace("urn:pulumi:dev-renamed::", "urn:pulumi:dev::") for record in renamed.resources}
    assert as_dev == {record.urn for record in planned_result("dev").resources}
