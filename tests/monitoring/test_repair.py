"""Repair, then prove, then return (aks-gpu:remediation.repair, issue 43 item 2): NVSentinel's fault-remediation,
janitor and janitor-provider reset or reboot a quarantined node through Azure, as a workload identity whose custom
role restarts this cluster's scale set VMs only; a pool can be kept out; the circuit breaker is the rate limit; and a
repaired node stays quarantined until the node diagnostics passed on its current boot. The values are held to the
facts read from the chart and its code at the pinned release (components/aks_gpu/data/remediation.yaml, repair)."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from aks_gpu.config.problems import ConfigError
from aks_gpu.data_files import load_yaml
from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.mock_engine import PlanResult
from aks_gpu.monitoring.remediation import (
    GATE_POLICY,
    PINS_FILE,
    RepairTarget,
    remediation_release,
    remediation_summary,
    repair_runs,
)
from aks_gpu.naming import DIAGNOSTICS_PASSED_ANNOTATION, POOL_LABEL
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import MockHarness, minimal_raw, stack_model

REPAIR: dict[str, Any] = load_yaml(PINS_FILE)["repair"]
TARGET = RepairTarget("sub-1", "MC_rg-test_aks-test_swedencentral", "swedencentral", "client-1")
GPU_POOL = {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training"}
# Eight nodes at the fewest: 25% of them is 2, so the breaker runs (it is the repair's rate limit).
POOLS = [{**GPU_POOL, "minCount": 8, "maxCount": 10}]
ON = {
    "mode": "on",
    "maxUnhealthy": "25%",
    "datastore": "external-mongodb",
    "datastoreSecret": "nvsentinel-datastore",
    "certManagerInstalled": True,
    "repair": {"enabled": True},
}


def raw_of(
    remediation: dict[str, Any] | None = None, pools: list[dict[str, Any]] | None = None, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    raw = minimal_raw(**{"aks-gpu:gpuPools": pools or POOLS, **(extra or {})})
    raw["aks-gpu:remediation"] = ON if remediation is None else remediation
    return raw


def model_of(
    remediation: dict[str, Any] | None = None, pools: list[dict[str, Any]] | None = None, extra: dict[str, Any] | None = None
) -> PlatformModel:
    return validate_stack(raw_of(remediation, pools, extra), "test").model


def values_of(model: PlatformModel) -> dict[str, Any]:
    release = remediation_release(model, critical_xid_codes(), TARGET)
    assert release is not None
    return release.values


def cel(expression: str, **activation: Any) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression)).evaluate({k: json_to_cel(v) for k, v in activation.items()})


# ---------------------------------------------------------------- off unless asked


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_repair_is_off_unless_a_stack_asks_and_then_no_repair_module_runs(stack: str) -> None:
    model = stack_model(stack)
    assert not repair_runs(model.config)
    release = remediation_release(model, critical_xid_codes())
    assert release is not None
    flags = release.values["global"]
    assert [flags[key]["enabled"] for key in ("faultRemediation", "janitor", "janitorProvider")] == [False, False, False]
    assert "repair: off" in remediation_summary(model)


def test_on_turns_on_the_three_modules_the_chart_switches() -> None:
    values = values_of(model_of())
    assert sorted(f"global.{key}.enabled" for key in ("faultRemediation", "janitor", "janitorProvider")) == sorted(
        REPAIR["switches"]
    )
    assert all(values["global"][key] == {"enabled": True} for key in ("faultRemediation", "janitor", "janitorProvider"))


# ---------------------------------------------------------------- the Azure provider and its identity


def test_the_janitor_provider_acts_on_azure_as_the_stacks_identity() -> None:
    provider = values_of(model_of())["janitor-provider"]
    assert provider["csp"] == {
        "provider": REPAIR["janitor_provider"]["provider"],
        "azure": {
            "subscriptionId": "sub-1",
            "resourceGroup": "MC_rg-test_aks-test_swedencentral",
            "location": "swedencentral",
            # With clientId set the chart annotates its ServiceAccount and labels its pods for workload identity.
            "clientId": "client-1",
        },
    }
    # Controllers run on the system pool.
    assert {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"} in provider["tolerations"]


def test_the_values_need_the_azure_target_when_repair_runs() -> None:
    with pytest.raises(ValueError, match="RepairTarget"):
        remediation_release(model_of(), critical_xid_codes())


# ---------------------------------------------------------------- GPU reset where it suffices, else reboot


def test_aks_driver_pools_are_rebooted_a_gpu_reset_needs_the_gpu_operator() -> None:
    values = values_of(model_of())
    # COMPONENT_RESET stays the chart's RebootNode: no override of the action, the janitor's GPU reset off.
    assert "maintenance" not in values["fault-remediation"]
    assert values["janitor"]["config"]["controllers"] == {"gpuReset": {"enabled": False}}
    assert "reboot of the VM" in remediation_summary(model_of())


def test_gpu_operator_pools_get_a_gpu_reset_per_gpu_superseded_by_a_reboot() -> None:
    model = model_of(extra={"aks-gpu:devicePlugin": {"mode": "gpu-operator"}})
    values = values_of(model)
    action = values["fault-remediation"]["maintenance"]["actions"]["COMPONENT_RESET"]
    assert action["kind"] == REPAIR["actions"]["gpu_reset_kind"]
    assert (action["apiGroup"], action["version"]) == (REPAIR["actions"]["api_group"], REPAIR["actions"]["api_version"])
    assert action["impactedEntityScope"] == "GPU_UUID" and action["supersedingEquivalenceGroups"] == ["restart"]
    template = values["fault-remediation"]["maintenance"]["templates"][action["templateFileName"]]
    assert "kind: GPUReset" in template and "{{ .ImpactedEntityScopeValue }}" in template
    reset = values["janitor"]["config"]["controllers"]["gpuReset"]
    assert reset == {
        "serviceManager": {"name": REPAIR["gpu_reset"]["service_manager"]},
        "resetJob": {"runtimeClassName": REPAIR["gpu_reset"]["runtime_class"]},
    }
    assert "GPU reset, else reboot" in remediation_summary(model)


# ---------------------------------------------------------------- per pool, and the rate limit


def test_a_pool_with_repair_false_is_kept_out_of_the_janitors_hands() -> None:
    pools = [{**POOLS[0], "name": "train"}, {**POOLS[0], "name": "infer", "workload": "inference", "repair": False}]
    model = model_of(pools=pools, extra={"aks-gpu:workloads": [{"name": "team-a", "type": "training", "gpuQuota": 2}]})
    [exclusion] = values_of(model)["janitor"]["config"]["nodes"]["exclusions"]
    assert exclusion == {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": ["infer"]}]}
    # Every node of the pool carries that label (AKS puts a pool's labels on each node it creates).
    infer = next(pool for pool in model.pools if pool.name == "infer")
    assert infer.node_labels[POOL_LABEL] == "infer"
    assert "not on infer" in remediation_summary(model)
    # Every pool repaired: no exclusion.
    assert values_of(model_of())["janitor"]["config"]["nodes"]["exclusions"] == []


def test_repair_needs_the_circuit_breaker_its_only_rate_limit() -> None:
    # minCount 0: the breaker would halt on the first quarantine, so it is off, and repairs would go unbounded.
    with pytest.raises(ConfigError, match=r"aks-gpu:remediation\.maxUnhealthy.*rate limit"):
        model_of(pools=[{**GPU_POOL, "maxCount": 10}])
    breaker = values_of(model_of())["fault-quarantine"]["circuitBreaker"]
    assert breaker == {"enabled": True, "percentage": 25, "duration": "5m"}


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"mode": "dry-run"}, r"remediation\.repair\.enabled.*mode dry-run"),
        ({"certManagerInstalled": False}, r"remediation\.certManagerInstalled"),
    ],
)
def test_repair_is_refused_where_it_cannot_work(change: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        model_of({**ON, **change})


def test_repair_needs_an_azure_cluster_with_workload_identity() -> None:
    with pytest.raises(ConfigError, match=r"aks-gpu:cluster\.workloadIdentity"):
        model_of(extra={"aks-gpu:cluster": {"resourceGroup": "rg-test", "name": "aks-test", "workloadIdentity": False}})
    with pytest.raises(ConfigError, match=r"remediation\.repair\.enabled.*kubeconfig"):
        model_of(extra={"aks-gpu:cluster": {"resourceGroup": "rg-test", "name": "aks-test", "kubeconfig": "/dev/null"}})


# ---------------------------------------------------------------- prove, then return


def node(annotations: dict[str, str] | None, boot: str = "boot-2") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "aks-gpu-0", "labels": {"accelerator": "nvidia"}}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "status": {"nodeInfo": {"bootID": boot}, "conditions": []}}


def test_a_quarantined_node_is_held_until_the_diagnostics_pass_on_its_current_boot() -> None:
    values = values_of(model_of())
    assert values["global"]["kubernetesObjectMonitor"] == {"enabled": True}
    [gate] = [p for p in values["kubernetes-object-monitor"]["policies"] if p["name"] == GATE_POLICY]
    predicate = gate["predicate"]["expression"]
    quarantined = {REPAIR["quarantine_annotation"]: "{}"}
    # Quarantined, no diagnostics yet: held (a fatal event).
    assert cel(predicate, resource=node(quarantined))
    # Passed before the repair's reboot (another boot): still held.
    assert cel(predicate, resource=node({**quarantined, DIAGNOSTICS_PASSED_ANNOTATION: "boot-1"}))
    # Passed on this boot: released (the monitor sends the healthy event).
    assert not cel(predicate, resource=node({**quarantined, DIAGNOSTICS_PASSED_ANNOTATION: "boot-2"}))
    # A node never quarantined is never held, with or without annotations.
    assert not cel(predicate, resource=node(None))
    assert not cel(predicate, resource=node({"other": "x"}))
    # The gate's own event asks fault-remediation for nothing: no reboot loop.
    assert gate["healthEvent"]["isFatal"] is True
    assert gate["healthEvent"]["recommendedAction"] == REPAIR["gate_recommended_action"] == "NONE"


def test_the_gate_event_keeps_the_node_quarantined() -> None:
    rule_sets = values_of(model_of())["fault-quarantine"]["ruleSets"]
    gate_rule = rule_sets[-1]
    event = {"agent": "kubernetes-object-monitor", "checkName": GATE_POLICY, "isFatal": True, "componentClass": "GPU"}
    healthy_node = node(None)
    assert all(
        cel(clause["expression"], **({"event": event} if clause["kind"] == "HealthEvent" else {"node": healthy_node}))
        for clause in gate_rule["match"]["all"]
    )
    assert gate_rule["taint"]["key"] == "aks-gpu/gpu-quarantine" and gate_rule["cordon"] == {"shouldCordon": True}
    # Without repair there is no gate: quarantined nodes return as the monitors recover (as before).
    off = remediation_release(stack_model("prod"), critical_xid_codes())
    assert off is not None
    assert all(p["name"] != GATE_POLICY for p in off.values["kubernetes-object-monitor"]["policies"])


# ---------------------------------------------------------------- the Azure resources the stack creates


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return MockHarness().run_stack("test", raw_of())


def _one(plan: PlanResult, kind: str) -> dict[str, Any]:
    [record] = plan.by_type(kind)
    return record.inputs


def test_the_identity_is_federated_to_the_janitor_providers_service_account(plan: PlanResult) -> None:
    credential = _one(plan, "azure-native:managedidentity:FederatedIdentityCredential")
    assert credential["subject"] == f"system:serviceaccount:nvsentinel:{REPAIR['janitor_provider']['service_account']}"
    assert credential["audiences"] == [REPAIR["federated_audience"]]
    assert credential["issuer"] == "https://oidc.example.invalid/aks-test/"
    identity = _one(plan, "azure-native:managedidentity:UserAssignedIdentity")
    assert identity["resourceGroupName"] == "rg-test"


def test_the_custom_role_restarts_this_clusters_scale_set_vms_and_nothing_else(plan: PlanResult) -> None:
    node_group = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/MC_rg-test_aks-test_swedencentral"
    role = _one(plan, "azure-native:authorization:RoleDefinition")
    assert role["scope"] == node_group and role["assignableScopes"] == [node_group]
    [permission] = role["permissions"]
    assert (
        permission["actions"]
        == REPAIR["janitor_provider"]["arm_actions"]
        == [
            "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/restart/action",
            "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView/read",
        ]
    )
    assert not permission.get("dataActions") and not permission.get("notActions")
    assignment = next(
        r.inputs for r in plan.by_type("azure-native:authorization:RoleAssignment") if r.name.endswith("-repair-role-assignment")
    )
    assert assignment["scope"] == node_group
    assert assignment["principalId"] == "44444444-4444-4444-4444-444444444444"  # the identity's service principal
    assert assignment["principalType"] == "ServicePrincipal"


def test_the_release_waits_for_the_identity_and_carries_its_client_id(plan: PlanResult) -> None:
    [release] = [r for r in plan.by_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("name") == "nvsentinel"]
    assert release.inputs["values"]["janitor-provider"]["csp"]["azure"]["clientId"] == "33333333-3333-3333-3333-333333333333"
    waits_for = set(release.options.get("dependsOn") or ())
    for kind in ("FederatedIdentityCredential", "UserAssignedIdentity"):
        [record] = plan.by_type(f"azure-native:managedidentity:{kind}")
        assert record.urn in waits_for, kind


# ---------------------------------------------------------------- the seam: the node diagnostics record their pass


def test_a_passing_diagnostic_releases_a_repaired_node_and_a_failing_one_holds_it() -> None:
    from aks_gpu.gpu.diag import Grade
    from aks_gpu.validation.diagnostics import node_action

    predicate = gate_predicate()
    engine_taint = {"key": "aks-gpu/gpu-quarantine", "value": "fault", "effect": "NoSchedule"}
    repaired = node({REPAIR["quarantine_annotation"]: "{}", DIAGNOSTICS_PASSED_ANNOTATION: "boot-1"}, boot="boot-2")
    repaired["spec"] = {"unschedulable": True, "taints": [engine_taint]}
    assert cel(predicate, resource=repaired)  # rebooted by the repair: the old pass does not count

    passed = node_action(repaired, Grade("node", "healthy"))
    # The engine's quarantine is the engine's to lift: the diagnostic records the pass on this boot, nothing else.
    assert passed.action == "proven" and passed.patch == {"metadata": {"annotations": {DIAGNOSTICS_PASSED_ANNOTATION: "boot-2"}}}
    released = {
        **repaired,
        "metadata": {
            **repaired["metadata"],
            "annotations": {**repaired["metadata"]["annotations"], DIAGNOSTICS_PASSED_ANNOTATION: "boot-2"},
        },
    }
    assert not cel(predicate, resource=released)

    failed = node_action(released, Grade("node", "unhealthy", "dcgm-diag: memory"))
    assert failed.patch is not None and failed.patch["metadata"] == {"annotations": {DIAGNOSTICS_PASSED_ANNOTATION: None}}
    held = {**released, "metadata": {**released["metadata"], "annotations": {REPAIR["quarantine_annotation"]: "{}"}}}
    assert cel(predicate, resource=held)
    # An inconclusive run records nothing.
    assert node_action(repaired, Grade("node", "inconclusive", "pcie skipped")).patch is None


def gate_predicate() -> str:
    [gate] = [p for p in values_of(model_of())["kubernetes-object-monitor"]["policies"] if p["name"] == GATE_POLICY]
    return str(gate["predicate"]["expression"])


def test_a_failing_diagnostic_on_a_node_the_engine_holds_adds_no_second_quarantine_taint() -> None:
    # The API server refuses two taints of one key and effect (seen on the local cluster: tests/e2e/test_repair_gate.py).
    from aks_gpu.gpu.diag import Grade
    from aks_gpu.validation.diagnostics import node_action

    held = node({REPAIR["quarantine_annotation"]: "{}", DIAGNOSTICS_PASSED_ANNOTATION: "boot-2"})
    held["spec"] = {
        "unschedulable": True,
        "taints": [{"key": "aks-gpu/gpu-quarantine", "value": "fault", "effect": "NoSchedule"}],
    }
    action = node_action(held, Grade("node", "unhealthy", "dcgm-diag: memory"))
    assert action.action == "none" and action.patch is not None
    assert "taints" not in action.patch["spec"] and action.patch["spec"]["unschedulable"] is True


def test_repair_with_every_pool_kept_out_is_warned_and_deploys_no_repair_module() -> None:
    stack = validate_stack(raw_of(pools=[{**POOLS[0], "repair": False}]), "test")
    assert any(w.path == "aks-gpu:remediation.repair.enabled" and "nothing is repaired" in w.message for w in stack.warnings)
    assert not repair_runs(stack.model.config)
    release = remediation_release(stack.model, critical_xid_codes())
    assert release is not None and release.values["global"]["janitor"] == {"enabled": False}
