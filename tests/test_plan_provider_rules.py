"""`aksgpu plan` against the deployed state, by the azure-native provider's own replace rules
(data/azure_native_rules.yaml) and as the engine compares a `pulumi stack export` (tests/e2e/test_change_safety.py
checks both against the real CLI)."""

from __future__ import annotations

import json
from typing import Any

from aks_gpu.azure.cluster import MANAGED_CLUSTER_TYPE as MANAGED_CLUSTER
from aks_gpu.cli.deployed_state import previous_plan_state
from aks_gpu.mock_engine.changes import KUBERNETES_PROVIDER, exported_view, plan_changes
from aks_gpu.mock_engine.mocks import FAKE_OBJECT_ID, FAKE_SUBSCRIPTION
from tests.conftest import PROJECT_DIR, planned_result, raw_stack


def _calico(raw: dict[str, Any]) -> None:
    raw["aks-gpu:cluster"]["networkPolicy"] = "calico"


def test_a_network_policy_change_replaces_the_cluster_by_the_providers_own_rule() -> None:
    import copy

    from aks_gpu.mock_engine import run_program

    raw = copy.deepcopy(raw_stack("dev"))
    _calico(raw)
    deployed = previous_plan_state(json.loads(json.dumps(planned_result("dev").to_json())), "before")
    changes = plan_changes(deployed, run_program(PROJECT_DIR, "dev", raw)).changes
    [cluster] = [change for change in changes if change.type == MANAGED_CLUSTER]
    assert cluster.action == "replace" and "networkProfile.networkPolicy" in cluster.fields
    assert "azure-native provider replaces it" in cluster.why and "pulumi/pulumi-azure-native@" in cluster.why
    # The cascade the engine takes with it: the Kubernetes provider and the objects it owns.
    [provider] = [change for change in changes if change.type == KUBERNETES_PROVIDER]
    assert provider.action == "replace"
    assert sum(change.type.startswith("kubernetes:") and change.action == "replace" for change in changes) > 10


def test_an_export_is_compared_as_the_engine_recorded_it() -> None:
    # The state leaves empty values out and holds a provider's plugin version; the plan's mock identity is the
    # deployment's own there.
    old = {"egress": None, "spec": {"env": [{"name": "A"}]}, "version": "4.34.2", "principalId": "real-object-id"}
    new = {"egress": [], "spec": {"env": [{"name": "A", "value": ""}]}, "principalId": FAKE_OBJECT_ID}
    before, after = exported_view(old, new, provider=True)
    assert before == after
    # Still a change: a value that differs, a version on a resource that is not a provider.
    before, after = exported_view({"maxCount": 2}, {"maxCount": 3}, provider=False)
    assert before != after
    before, after = exported_view({"version": "1"}, {}, provider=False)
    assert before != after
    scope = f"/subscriptions/{FAKE_SUBSCRIPTION}/resourceGroups/rg"
    assert exported_view({"scope": "/subscriptions/real/resourceGroups/rg"}, {"scope": scope}, provider=False)[1] == {
        "scope": "/subscriptions/real/resourceGroups/rg"
    }
