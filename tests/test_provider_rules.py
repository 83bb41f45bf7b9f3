"""data/azure_native_rules.yaml, the azure-native provider's own replace rules: held to its shape, to the resource
types the program creates, and to the pinned SDK (every field is an input of that resource in pulumi_azure_native)."""

from __future__ import annotations

import importlib
import re

import pytest

from aks_gpu.aks_facts import (
    checked_api_versions,
    provider_deletes_before_replace,
    provider_replace_rules,
)

# The types the program creates: data/azure_api_versions.yaml lists each with the API version it was checked at.
CREATED_TYPES = sorted(checked_api_versions())


def _sdk_args(token: str) -> type:
    """The resource's own args class, from the SDK's package for it (where a type of the same name exists, the SDK calls
    it ``ActionGroupInitArgs``: ``monitor.ActionGroupArgs`` is an input type other resources use). Read through the
    package, never by importing the resource's module directly: that import leaves the lazily loading package without
    the resource's class, and the program built later in the same run then fails."""
    _, module, name = token.split(":")
    package = importlib.import_module(f"pulumi_azure_native.{module}")
    return getattr(package, f"{name}InitArgs", None) or getattr(package, f"{name}Args")  # type: ignore[no-any-return]


def _input_type(args: type, pulumi_name: str) -> tuple[bool, type | None]:
    """Whether ``args`` (a pulumi input type) has an input called ``pulumi_name``, and the input type it takes when
    that is an object (or a list of objects)."""
    module = importlib.import_module(args.__module__.rsplit(".", 1)[0])
    for value in vars(args).values():
        if isinstance(value, property) and getattr(value.fget, "_pulumi_name", None) == pulumi_name:
            names = re.findall(r"ForwardRef\('(\w+Args)'\)", str(value.fget.__annotations__.get("return")))
            return True, (getattr(module, names[0]) if names else None)
    return False, None


def _sdk_has(token: str, path: str) -> bool:
    current: type | None = _sdk_args(token)
    for part in path.split("."):
        if current is None:
            return False
        found, current = _input_type(current, part)
        if not found:
            return False
    return True


def test_every_type_the_program_creates_has_its_rules() -> None:
    for token in CREATED_TYPES:
        assert provider_replace_rules(token), f"{token}: no provider replace rules recorded"
        _answer, why = provider_deletes_before_replace(token)
        assert "pulumi/pulumi-azure-native@" in why, f"{token}: the delete-first answer names no source"


@pytest.mark.parametrize("token", CREATED_TYPES)
def test_each_rule_names_an_input_of_the_sdk(token: str) -> None:
    for rule in provider_replace_rules(token):
        assert rule.resource == token
        assert _sdk_has(token, rule.field), f"{token}: {rule.field} is not an input of pulumi_azure_native's {token}"
        assert re.search(r"@[0-9a-f]{40} \S+", rule.source), f"{token} {rule.field}: the source names no commit and path"


def test_the_sdk_check_would_catch_a_wrong_field() -> None:
    assert _sdk_has("azure-native:containerservice:ManagedCluster", "networkProfile.networkPolicy")
    assert not _sdk_has("azure-native:containerservice:ManagedCluster", "networkProfile.networkPolicyy")
    assert not _sdk_has("azure-native:containerservice:AgentPool", "vmSize.name")


def test_the_gpu_pool_rules_the_issue_turns_on() -> None:
    pool = {rule.field: rule.rule for rule in provider_replace_rules("azure-native:containerservice:AgentPool")}
    # pulumi/pulumi-azure-native#3655: the provider replaces a pool on a new VM size or MIG profile, and only those of
    # the fields AKS fixes at creation; the rest (osDiskType, maxPods, spot, gpuProfile.driver) it updates in place.
    assert pool["vmSize"] == pool["gpuInstanceProfile"] == "force-new-map"
    for fixed_by_aks in ("osDiskType", "maxPods", "scaleSetPriority", "spotMaxPrice", "gpuProfile.driver", "maxCount"):
        assert not any(rule.covers(fixed_by_aks) for rule in provider_replace_rules("azure-native:containerservice:AgentPool"))
    assert provider_deletes_before_replace("azure-native:containerservice:AgentPool")[0] is True


def test_a_network_policy_change_replaces_the_cluster_and_a_load_balancer_change_does_not() -> None:
    rules = provider_replace_rules("azure-native:containerservice:ManagedCluster")
    assert any(rule.covers("networkProfile.networkPolicy") for rule in rules)
    assert not any(rule.covers("networkProfile.loadBalancerProfile.managedOutboundIPs.count") for rule in rules)
    assert any(rule.covers("linuxProfile.ssh.publicKeys") for rule in rules)  # inside a replace key


def test_role_assignments_are_replaced_create_first() -> None:
    answer, why = provider_deletes_before_replace("azure-native:authorization:RoleAssignment")
    assert answer is False and "UUID" in why
