"""Quarantine of faulty GPU nodes (aks-gpu:remediation, NVSentinel): the modes, the circuit breaker, the drain per
workload type, the tolerations of the quarantine taint, the admission exemption, and the values against the chart's
own keys (tests/fixtures/remediation/SOURCES.md). The CEL the engine evaluates is run here through cel-python on
node objects and health events shaped as NVSentinel documents them."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import celpy
import jsonschema
import pytest
from celpy.adapter import json_to_cel

from aks_gpu.config.problems import ConfigError
from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.kube.device_plugin import plugin_manifests
from aks_gpu.kube.gpu_operator import nvidia_operator_values
from aks_gpu.monitoring.exporters import exporter_manifests
from aks_gpu.monitoring.remediation import (
    circuit_breaker_percentage,
    npd_condition_types,
    remediation_release,
    remediation_summary,
    remediation_values,
)
from aks_gpu.naming import QUARANTINE_TAINT_EFFECT, QUARANTINE_TAINT_KEY, REMEDIATION_NAMESPACE
from aks_gpu.resolved.exemptions import exempt_namespaces
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import FIXTURES_DIR, minimal_raw, stack_model

SCHEMA = json.loads((FIXTURES_DIR / "remediation" / "nvsentinel-values.schema.json").read_text(encoding="utf-8"))
XIDS = critical_xid_codes()


def model_of(remediation: dict[str, Any] | None = None, **overrides: Any) -> PlatformModel:
    raw = minimal_raw(**overrides)
    if remediation is not None:
        raw["aks-gpu:remediation"] = remediation
    return validate_stack(raw, "test").model


def values_of(model: PlatformModel) -> dict[str, Any]:
    release = remediation_release(model, XIDS)
    assert release is not None
    return release.values


def cel(expression: str, **activation: Any) -> Any:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return program.evaluate({name: json_to_cel(value) for name, value in activation.items()})


# ---------------------------------------------------------------- modes


def test_off_deploys_nothing_and_exempts_nothing() -> None:
    model = model_of({"mode": "off"})
    assert remediation_release(model, XIDS) is None
    assert REMEDIATION_NAMESPACE not in exempt_namespaces(model.config, None)
    assert remediation_summary(model).startswith("remediation: off")


def test_off_is_the_default_so_an_upgrade_starts_no_engine() -> None:
    assert remediation_release(model_of(), XIDS) is None


def test_dry_run_runs_every_module_and_changes_no_node() -> None:
    values = values_of(model_of({"mode": "dry-run"}))
    assert values["global"]["dryRun"] is True
    assert values["global"]["faultQuarantine"] == {"enabled": True}
    assert values["global"]["nodeDrainer"] == {"enabled": True}


def test_on_quarantines_with_the_platform_taint_and_a_cordon() -> None:
    values = values_of(model_of({"mode": "on"}))
    assert values["global"]["dryRun"] is False
    for rule_set in values["fault-quarantine"]["ruleSets"]:
        assert rule_set["cordon"] == {"shouldCordon": True}
        assert rule_set["taint"]["key"] == QUARANTINE_TAINT_KEY
        assert rule_set["taint"]["effect"] == QUARANTINE_TAINT_EFFECT


def test_an_amd_only_stack_gets_no_engine() -> None:
    amd = [{"name": "mi", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "training", "maxCount": 2}]
    model = model_of({"mode": "on"}, **{"aks-gpu:gpuPools": amd})
    assert remediation_release(model, XIDS) is None
    assert REMEDIATION_NAMESPACE not in exempt_namespaces(model.config, None)
    assert "no NVIDIA pool" in remediation_summary(model)


def test_the_shipped_stacks_choose_on_in_prod_dry_run_in_dev_and_off_for_amd() -> None:
    prod, dev, amd = stack_model("prod"), stack_model("dev"), stack_model("amd")
    assert values_of(prod)["global"]["dryRun"] is False
    assert values_of(dev)["global"]["dryRun"] is True
    assert remediation_release(amd, XIDS) is None


# ---------------------------------------------------------------- circuit breaker


@pytest.mark.parametrize(
    ("max_unhealthy", "max_count", "percentage"),
    [("25%", 2, 25), ("1", 2, 50), ("1", 7, 14), ("3", 7, 42), ("1", 200, 1), ("9", 2, 100), ("100%", 2, 100)],
)
def test_max_unhealthy_becomes_the_breakers_share_of_nvidia_nodes(max_unhealthy: str, max_count: int, percentage: int) -> None:
    pool = {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training"}
    pools = [{**pool, "maxCount": max_count}]
    model = model_of({"mode": "on", "maxUnhealthy": max_unhealthy}, **{"aks-gpu:gpuPools": pools})
    assert circuit_breaker_percentage(model) == percentage
    breaker = values_of(model)["fault-quarantine"]["circuitBreaker"]
    assert breaker == {"enabled": True, "percentage": percentage, "duration": "5m"}


def test_a_count_never_lets_more_nodes_go_than_it_says() -> None:
    # The breaker trips at percentage% of the nodes up; at every size up to maxCount the count is never exceeded.
    prod = stack_model("prod")
    share = circuit_breaker_percentage(prod)
    largest = sum(pool.config.max_count for pool in prod.pools_of("nvidia"))
    allowed = int(prod.config.remediation.max_unhealthy)
    for nodes in range(1, largest + 1):
        assert share * nodes / 100 <= allowed


@pytest.mark.parametrize("bad", ["0%", "101%", "-1", "one", "1.5"])
def test_max_unhealthy_that_is_no_count_or_percentage_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="maxUnhealthy"):
        model_of({"mode": "on", "maxUnhealthy": bad})


def test_the_window_is_the_breakers_duration() -> None:
    assert values_of(model_of({"mode": "on", "windowMinutes": 30}))["fault-quarantine"]["circuitBreaker"]["duration"] == "30m"


# ---------------------------------------------------------------- drain per workload type


def test_training_gets_time_to_checkpoint_inference_is_evicted_the_rest_finishes() -> None:
    workloads = [
        {"name": "team-train", "type": "training", "gpuQuota": 2},
        {"name": "team-serve", "type": "inference", "gpuQuota": 2},
        {"name": "team-lab", "type": "experiments", "gpuQuota": 2},
    ]
    pools = [
        {"name": f"p{kind[:4]}", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": kind, "maxCount": 2}
        for kind in ("training", "inference", "experiments")
    ]
    model = model_of({"mode": "on", "drainTimeoutMinutes": 90}, **{"aks-gpu:gpuPools": pools, "aks-gpu:workloads": workloads})
    drainer = values_of(model)["node-drainer"]
    assert drainer["userNamespaces"] == [
        {"name": "team-train", "mode": "DeleteAfterTimeout"},
        {"name": "team-serve", "mode": "Immediate"},
        {"name": "team-lab", "mode": "AllowCompletion"},
        {"name": "*", "mode": "AllowCompletion"},
    ]
    assert drainer["deleteAfterTimeoutMinutes"] == 90


def test_the_platform_and_aks_namespaces_are_never_drained() -> None:
    model = stack_model("prod")
    pattern = re.compile(values_of(model)["node-drainer"]["systemNamespaces"])
    for namespace in ("kube-system", "gpu-resources", REMEDIATION_NAMESPACE):
        assert pattern.fullmatch(namespace), namespace
    for workload in model.workloads:
        assert not pattern.fullmatch(workload.name), workload.name
    assert not pattern.fullmatch("gpu-resources-x")  # anchored: a prefix is no match


# ---------------------------------------------------------------- tolerations


def _tolerates_quarantine(tolerations: list[dict[str, str]]) -> bool:
    return any(t["key"] == QUARANTINE_TAINT_KEY and t["effect"] == QUARANTINE_TAINT_EFFECT for t in tolerations)


def test_every_platform_daemonset_tolerates_the_quarantine_taint() -> None:
    model = stack_model("prod")
    daemonsets = [m for m in [*plugin_manifests(model), *exporter_manifests(model)] if m["kind"] == "DaemonSet"]
    assert daemonsets
    for manifest in daemonsets:
        assert _tolerates_quarantine(manifest["spec"]["template"]["spec"]["tolerations"]), manifest["metadata"]["name"]
    operator = nvidia_operator_values(model, {})
    assert _tolerates_quarantine(operator["daemonsets"]["tolerations"])
    assert _tolerates_quarantine(values_of(model)["syslog-health-monitor"]["tolerations"])


def test_workload_pods_never_tolerate_the_quarantine_taint() -> None:
    model = stack_model("prod")
    for pool in model.pools:
        assert not _tolerates_quarantine([t.to_kube() for t in pool.tolerations]), pool.name
    for workload in model.workloads:
        assert not _tolerates_quarantine([t.to_kube() for t in workload.tolerations]), workload.name


def test_a_pool_may_not_set_the_quarantine_taint_itself() -> None:
    pools = [
        {
            "name": "gpu",
            "vendor": "nvidia",
            "vmSize": "Standard_NC24ads_A100_v4",
            "workload": "training",
            "maxCount": 2,
            "taints": [f"{QUARANTINE_TAINT_KEY}=fault:NoSchedule"],
        }
    ]
    with pytest.raises(ConfigError, match="taints"):
        model_of({"mode": "on"}, **{"aks-gpu:gpuPools": pools})


# ---------------------------------------------------------------- exemptions


def test_the_engines_namespace_is_exempt_while_it_runs() -> None:
    model = model_of({"mode": "dry-run"})
    assert REMEDIATION_NAMESPACE in exempt_namespaces(model.config, None)


def test_no_workload_may_take_the_engines_namespace() -> None:
    with pytest.raises(ConfigError, match=REMEDIATION_NAMESPACE):
        model_of({"mode": "on"}, **{"aks-gpu:workloads": [{"name": REMEDIATION_NAMESPACE, "type": "training", "gpuQuota": 2}]})


# ---------------------------------------------------------------- the values against the chart


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_shipped_values_match_the_charts_keys(stack: str) -> None:
    jsonschema.validate(values_of(stack_model(stack)), SCHEMA)


def test_the_chart_check_refuses_a_key_the_chart_does_not_know() -> None:
    values = copy.deepcopy(values_of(stack_model("prod")))
    values["fault-quarantine"]["circuitBreaker"]["maxNodes"] = 1
    with pytest.raises(jsonschema.ValidationError, match="maxNodes"):
        jsonschema.validate(values, SCHEMA)
    values = copy.deepcopy(values_of(stack_model("prod")))
    values["node-drainer"]["userNamespaces"][0]["mode"] = "Evict"
    with pytest.raises(jsonschema.ValidationError, match="Evict"):
        jsonschema.validate(values, SCHEMA)


# ---------------------------------------------------------------- the CEL the engine runs


def node(**conditions: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "aks-train-0", "labels": {"accelerator": "nvidia"}},
        "status": {"conditions": [{"type": kind, "status": status} for kind, status in conditions.items()]},
    }


def test_every_critical_npd_condition_has_a_policy_that_fires_only_while_true() -> None:
    policies = values_of(stack_model("prod"))["kubernetes-object-monitor"]["policies"]
    assert [p["healthEvent"]["errorCode"][0] for p in policies] == list(npd_condition_types())
    assert "UnhealthyNvidiaDCGMServices" in npd_condition_types()
    assert "GPUClockThrottling" not in npd_condition_types()  # a warning: alerted on, never quarantined
    for policy in policies:
        kind = policy["healthEvent"]["errorCode"][0]
        expression = policy["predicate"]["expression"]
        assert cel(expression, resource=node(**{kind: "True", "Ready": "True"}))
        assert not cel(expression, resource=node(**{kind: "False", "Ready": "True"}))
        assert not cel(expression, resource=node(Ready="True"))


def health_event(**fields: Any) -> dict[str, Any]:
    event = {"agent": "syslog-health-monitor", "componentClass": "GPU", "isFatal": False, "errorCode": [], "checkName": ""}
    event.update(fields)
    return event


def rule_matches(rule_set: dict[str, Any], event: dict[str, Any], node_object: dict[str, Any]) -> bool:
    for clause in rule_set["match"]["all"]:
        variables = {"event": event} if clause["kind"] == "HealthEvent" else {"node": node_object}
        if not cel(clause["expression"], **variables):
            return False
    return True


def test_the_quarantine_rules_fire_on_fatal_and_critical_xid_events_only() -> None:
    rule_sets = values_of(stack_model("prod"))["fault-quarantine"]["ruleSets"]
    syslog, npd = rule_sets
    healthy = node(Ready="True")
    assert rule_matches(syslog, health_event(isFatal=True, errorCode=["13"]), healthy)
    assert rule_matches(syslog, health_event(errorCode=["79"]), healthy)  # fallen off the bus: critical in our table
    assert not rule_matches(syslog, health_event(errorCode=["13"]), healthy)  # an application's own fault
    assert not rule_matches(syslog, health_event(isFatal=True, componentClass="NIC"), healthy)
    npd_event = health_event(agent="kubernetes-object-monitor", checkName="aks-npd-gpumissing", isFatal=True)
    assert rule_matches(npd, npd_event, healthy)
    assert not rule_matches(npd, {**npd_event, "checkName": "node-not-ready"}, healthy)
    opted_out = node(Ready="True")
    opted_out["metadata"]["labels"]["nvsentinel.dgxc.nvidia.com/managed"] = "false"
    assert not rule_matches(syslog, health_event(isFatal=True), opted_out)


def test_the_plan_shows_the_engine_and_its_configuration() -> None:
    line = remediation_summary(stack_model("prod"))
    assert "NVSentinel v1.21.0" in line and "mode on" in line and "14%" in line
    assert "gpu-training DeleteAfterTimeout" in line and "gpu-inference Immediate" in line
    remediation_values(stack_model("prod"), XIDS)  # builds without the release too
