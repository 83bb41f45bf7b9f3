"""Every azure-native resource of every stack's plan, against the provider's own schema: each input key is a
property the provider accepts for that type (or nested type), and each enum-typed value is one of the enum's
values.

Where the schema comes from: the installed ``pulumi_azure_native`` Python SDK is generated from the provider's
Pulumi schema, one ``@pulumi.input_type`` class per resource (``ManagedClusterArgs``) and per nested object type
(``ContainerServiceNetworkProfileArgs``), whose properties carry the schema's camelCase names
(``@pulumi.getter(name="nodeOSUpgradeChannel")``) and typed hints, with enums as ``Enum`` classes in
``_enums.py``. ``pulumi._types.input_type_types`` reads exactly that (camelCase name -> resolved type): it is
what the Pulumi runtime itself uses to translate these classes. The wheel ships no schema JSON and the provider
binary (which embeds it) is not installed offline, so the SDK is the most faithful copy at hand; it is pinned
in requirements.txt together with the provider version the plans are deployed with.

Enum-typed properties are typed ``Union[str, SomeEnum]`` (Azure accepts new values before the SDK knows them);
this check is stricter on purpose and requires a value the enum lists, so a typo like ``"Cilium"`` or
``"nodeimage"`` fails here instead of at deploy time.
"""

from __future__ import annotations

import collections.abc
import copy
import enum
import importlib
import typing
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest
from pulumi._types import input_type_types, is_input_type

from aks_gpu.mock_engine import SECRET
from tests.conformance import STACK_NAMES, planned

PROVIDER_PREFIX = "azure-native:"


# Enum values the provider's enum does not list although Azure documents and uses them, each with the source. Kept
# short and exact: a value listed here is accepted for that enum only, and an entry nothing needs fails below.
ENUM_GAPS: dict[tuple[str, str], str] = {
    # The Prometheus stream of a data collection rule's data flow. KnownDataFlowStreams (an extensible enum in the
    # REST spec) lists only the Log Analytics streams; the prometheusForwarder data source's own enum
    # (KnownPrometheusForwarderDataSourceStreams) has it, and Microsoft's managed Prometheus template routes it so:
    # dataFlows: [{streams: ['Microsoft-PrometheusMetrics'], ...}] (AddonBicepTemplate/
    # FullAzureMonitorMetricsProfile.bicep in Azure/prometheus-collector).
    ("KnownDataFlowStreams", "Microsoft-PrometheusMetrics"): "the Prometheus stream of managed Prometheus's data flow",
}
ENUM_GAPS_USED: set[tuple[str, str]] = set()


class UnknownResourceTypeError(LookupError):
    """The plan holds an azure-native type whose ``<Type>Args`` class the installed SDK does not have."""


def args_class(type_token: str) -> type:
    """``azure-native:containerservice:ManagedCluster`` -> ``pulumi_azure_native.containerservice.ManagedClusterArgs``
    (``module/v20240901`` tokens map to the versioned sub-package). Where a nested type already has that name, the
    resource's own class is ``<Type>InitArgs`` (monitor: ``ActionGroupArgs`` is a rule's action, the action group
    resource takes ``ActionGroupInitArgs``)."""
    provider, module, name = type_token.split(":")
    if provider != PROVIDER_PREFIX.rstrip(":"):
        raise UnknownResourceTypeError(type_token)
    try:
        package = importlib.import_module(f"pulumi_azure_native.{module.replace('/', '.')}")
        cls = getattr(package, f"{name}InitArgs", None) or getattr(package, f"{name}Args")
    except (ImportError, AttributeError) as exc:
        raise UnknownResourceTypeError(type_token) from exc
    if not is_input_type(cls):
        raise UnknownResourceTypeError(type_token)
    return typing.cast(type, cls)


@dataclass
class SchemaCheck:
    """Walks inputs against types; collects problems (``path: message``) and what it actually checked."""

    problems: list[str] = field(default_factory=list)
    fields_checked: int = 0
    enums_checked: int = 0

    def object(self, cls: type, value: Any, path: str) -> None:
        if not isinstance(value, dict):
            self.problems.append(f"{path}: expected an object ({cls.__name__}), got {value!r}")
            return
        properties = input_type_types(cls)
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if key not in properties:
                self.problems.append(f"{where}: not a property of {cls.__name__} (accepted: {', '.join(sorted(properties))})")
                continue
            self.fields_checked += 1
            self.value(properties[key], item, where)

    def value(self, hint: Any, value: Any, path: str) -> None:
        if value is None or value == SECRET:
            return
        candidates = _candidates(hint)
        enums = [c for c in candidates if isinstance(c, type) and issubclass(c, enum.Enum)]
        if enums:
            allowed = sorted({str(member.value) for e in enums for member in e})
            self.enums_checked += 1
            gaps = [(e.__name__, value) for e in enums if (e.__name__, value) in ENUM_GAPS]
            ENUM_GAPS_USED.update(gaps)
            if value not in allowed and not gaps:
                self.problems.append(f"{path}: {value!r} is not one of {', '.join(allowed)} ({enums[0].__name__})")
            return
        for candidate in candidates:
            if isinstance(candidate, type) and is_input_type(candidate):
                self.object(candidate, value, path)
                return
            origin = typing.get_origin(candidate)
            if origin in (collections.abc.Sequence, list):
                if not isinstance(value, list):
                    self.problems.append(f"{path}: expected a list, got {value!r}")
                    return
                (item_hint,) = typing.get_args(candidate)
                for index, item in enumerate(value):
                    self.value(item_hint, item, f"{path}[{index}]")
                return
            if origin in (collections.abc.Mapping, dict):
                if not isinstance(value, dict):
                    self.problems.append(f"{path}: expected a map, got {value!r}")
                    return
                _, item_hint = typing.get_args(candidate)
                for key, item in value.items():
                    self.value(item_hint, item, f"{path}[{key!r}]")
                return
        scalars = tuple(c for c in candidates if c in (str, int, float, bool))
        if scalars and not _scalar_fits(value, scalars):
            names = " or ".join(c.__name__ for c in scalars)
            self.problems.append(f"{path}: expected {names}, got {value!r}")


def _candidates(hint: Any) -> list[Any]:
    """The concrete types a hint allows, without Optional/Input/Awaitable/Output wrappers."""
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        found: list[Any] = []
        for arg in typing.get_args(hint):
            found += _candidates(arg)
        return found
    if hint is type(None) or origin in (collections.abc.Awaitable, pulumi.Output) or hint is pulumi.Output:
        return []
    return [hint]


def _scalar_fits(value: Any, scalars: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in scalars
    if isinstance(value, int):
        return int in scalars or float in scalars
    return isinstance(value, scalars)


def check_resource(type_token: str, inputs: dict[str, Any]) -> SchemaCheck:
    check = SchemaCheck()
    check.object(args_class(type_token), inputs, "")
    return check


def _azure_cases() -> list[Any]:
    cases = []
    for stack in STACK_NAMES:
        for resource in planned(stack).azure_resources():
            cases.append(pytest.param(stack, resource["urn"], id=f"{stack}-{resource['type'].split(':')[-1]}-{resource['name']}"))
    return cases


@pytest.mark.parametrize(("stack", "urn"), _azure_cases())
def test_azure_inputs_match_the_provider_schema(stack: str, urn: str) -> None:
    resource = next(r for r in planned(stack).resources if r["urn"] == urn)
    check = check_resource(resource["type"], resource["inputs"])
    assert check.problems == [], f"{resource['type']} {resource['name']}:\n" + "\n".join(check.problems)
    assert check.fields_checked >= len(resource["inputs"])


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_plans_azure_resources_to_check(stack: str) -> None:
    types = {r["type"] for r in planned(stack).azure_resources()}
    if planned(stack).config.cluster.existing:
        assert "azure-native:containerservice:ManagedCluster" not in types
    else:
        assert "azure-native:containerservice:ManagedCluster" in types
    if planned(stack).config.gpu_pools:
        assert "azure-native:containerservice:AgentPool" in types


def test_enum_values_of_the_real_plans_are_checked() -> None:
    """The walk reaches the enum-typed fields we set (network policy, upgrade channels, GPU driver...)."""
    enums = 0
    for stack in STACK_NAMES:
        for resource in planned(stack).azure_resources():
            enums += check_resource(resource["type"], resource["inputs"]).enums_checked
    assert enums >= 10 * len(STACK_NAMES)


# ---------------------------------------------------------------- the check catches what it is meant to catch


def _cluster_inputs() -> dict[str, Any]:
    for stack in STACK_NAMES:
        for resource in planned(stack).azure_resources():
            if resource["type"] == "azure-native:containerservice:ManagedCluster":
                return copy.deepcopy(resource["inputs"])
    raise AssertionError("no stack creates a ManagedCluster")


def test_a_misspelled_top_level_field_is_caught() -> None:
    inputs = _cluster_inputs()
    inputs["disableLocalAcounts"] = inputs.pop("disableLocalAccounts")
    problems = check_resource("azure-native:containerservice:ManagedCluster", inputs).problems
    assert len(problems) == 1 and problems[0].startswith("disableLocalAcounts: not a property of ManagedClusterArgs")


def test_a_misspelled_nested_field_is_caught() -> None:
    inputs = _cluster_inputs()
    # The provider spells it nodeOSUpgradeChannel; the snake_case-to-camel guess "nodeOsUpgradeChannel" is wrong.
    inputs["autoUpgradeProfile"]["nodeOsUpgradeChannel"] = inputs["autoUpgradeProfile"].pop("nodeOSUpgradeChannel")
    problems = check_resource("azure-native:containerservice:ManagedCluster", inputs).problems
    assert [p.split(":")[0] for p in problems] == ["autoUpgradeProfile.nodeOsUpgradeChannel"]


def test_a_bad_enum_value_is_caught() -> None:
    inputs = _cluster_inputs()
    inputs["networkProfile"]["networkPolicy"] = "Cilium"
    problems = check_resource("azure-native:containerservice:ManagedCluster", inputs).problems
    assert len(problems) == 1 and problems[0].startswith("networkProfile.networkPolicy: 'Cilium' is not one of")
    assert "cilium" in problems[0]


def test_a_bad_enum_value_inside_a_list_is_caught() -> None:
    inputs = _cluster_inputs()
    inputs["agentPoolProfiles"][0]["mode"] = "system"
    problems = check_resource("azure-native:containerservice:ManagedCluster", inputs).problems
    assert [p.split(":")[0] for p in problems] == ["agentPoolProfiles[0].mode"]


def test_a_wrong_scalar_type_is_caught() -> None:
    inputs = _cluster_inputs()
    inputs["disableLocalAccounts"] = "true"
    problems = check_resource("azure-native:containerservice:ManagedCluster", inputs).problems
    assert [p.split(":")[0] for p in problems] == ["disableLocalAccounts"]


def test_an_unknown_resource_type_is_an_error_not_a_pass() -> None:
    with pytest.raises(UnknownResourceTypeError):
        args_class("azure-native:containerservice:ManagedClustr")
    with pytest.raises(UnknownResourceTypeError):
        args_class("azure-native:nosuchmodule:Thing")


def test_pool_and_maintenance_enums_are_checked() -> None:
    pool = {"agentPoolName": "gpu", "resourceGroupName": "rg", "resourceName": "aks", "gpuProfile": {"driver": "install"}}
    problems = check_resource("azure-native:containerservice:AgentPool", pool).problems
    assert [p.split(":")[0] for p in problems] == ["gpuProfile.driver"]
    window = {
        "configName": "aksManagedNodeOSUpgradeSchedule",
        "resourceGroupName": "rg",
        "resourceName": "aks",
        "maintenanceWindow": {"durationHours": 4, "startTime": "02:00", "schedule": {"weekly": {"dayOfWeek": "Sun"}}},
    }
    problems = check_resource("azure-native:containerservice:MaintenanceConfiguration", window).problems
    assert [p.split(":")[0] for p in problems] == ["maintenanceWindow.schedule.weekly.dayOfWeek"]


def test_every_enum_gap_is_still_needed() -> None:
    """An entry the provider's enum has caught up with (or no plan uses) comes off ENUM_GAPS."""
    for stack in STACK_NAMES:
        for resource in planned(stack).azure_resources():
            check_resource(resource["type"], resource["inputs"])
    assert sorted(set(ENUM_GAPS) - ENUM_GAPS_USED) == []
    for enum_name, value in ENUM_GAPS:
        import pulumi_azure_native.monitor._enums as monitor_enums

        assert value not in {m.value for m in getattr(monitor_enums, enum_name)}, f"{enum_name} now lists {value}"


def test_an_enum_gap_does_not_open_other_values() -> None:
    flows = {"dataFlows": [{"streams": ["Microsoft-PrometheusMetric"], "destinations": ["a"]}], "resourceGroupName": "rg"}
    problems = check_resource("azure-native:monitor:DataCollectionRule", flows).problems
    assert [p.split(":")[0] for p in problems] == ["dataFlows[0].streams[0]"]
