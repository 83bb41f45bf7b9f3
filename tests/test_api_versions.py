"""Each Azure resource of a plan carries the API version it is sent with, and it is the one the rules were checked
against (data/azure_api_versions.yaml); a provider that moved a default API version is a plan warning."""

from __future__ import annotations

import pytest

from aks_gpu.aks_facts import checked_api_versions
from aks_gpu.mock_engine.api_versions import api_version_warnings, installed_api_version
from tests.conftest import STACK_NAMES, planned_result


def test_every_azure_resource_of_every_stack_records_the_checked_api_version() -> None:
    checked = checked_api_versions()
    for stack in STACK_NAMES:
        for record in planned_result(stack).resources:
            if record.custom and record.type.startswith("azure-native:"):
                assert record.to_json()["apiVersion"] == checked[record.type], (stack, record.type)
            else:
                assert "apiVersion" not in record.to_json()


def test_the_installed_provider_is_the_one_the_rules_were_checked_against() -> None:
    assert api_version_warnings(set(checked_api_versions())) == []
    assert installed_api_version("azure-native:containerservice:AgentPool") == "2025-09-01"


def test_a_moved_api_version_is_a_warning_naming_the_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    import aks_gpu.mock_engine.api_versions as module

    monkeypatch.setattr(module, "checked_api_versions", lambda: {"azure-native:containerservice:AgentPool": "2024-01-01"})
    (warning,) = api_version_warnings({"azure-native:containerservice:AgentPool", "kubernetes:core/v1:Namespace"})
    assert "AgentPool is sent with API version 2025-09-01" in warning and "2024-01-01" in warning
