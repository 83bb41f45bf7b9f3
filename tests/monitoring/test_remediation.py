"""Quarantine of faulty GPU nodes (aks-gpu:remediation, NVSentinel): the modes, the circuit breaker, the drain per
workload type, the tolerations of the quarantine taint, the admission exemption, and the values held to facts read
from the chart's own templates and code (components/aks_gpu/data/remediation.yaml, chart_facts). The CEL the engine
evaluates is run here through cel-python on node objects and health events shaped as NVSentinel documents them."""

from __future__ import annotations

import math
import re
from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from aks_gpu.config.problems import ConfigError
from aks_gpu.config.rules.monitoring import circuit_breaker_percentage
from aks_gpu.data_files import load_yaml
from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.kube.device_plugin import plugin_manifests
from aks_gpu.kube.gpu_operator import nvidia_operator_values
from aks_gpu.monitoring.exporters import exporter_manifests
from aks_gpu.monitoring.remediation import (
    PINS_FILE,
    engine_pin,
    npd_condition_types,
    remediation_release,
    remediation_summary,
    remediation_values,
)
from aks_gpu.naming import QUARANTINE_TAINT_EFFECT, QUARANTINE_TAINT_KEY, REMEDIATION_NAMESPACE
from aks_gpu.resolved.exemptions import exempt_namespaces
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw, stack_model

FACTS_FILE: dict[str, Any] = load_yaml(PINS_FILE)
FACTS: dict[str, Any] = FACTS_FILE["chart_facts"]
XIDS = critical_xid_codes()


def model_of(remediation: dict[str, Any] | None = None, **overrides: Any) -> PlatformModel:
    raw = minimal_raw(**overrides)
    if remediation is not None:
        datastore = {"datastore": "external-mongodb", "datastoreSecret": "nvsentinel-datastore"}
        raw["aks-gpu:remediation"] = {**datastore, **remediation} if remediation.get("mode", "off") != "off" else remediation
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
    ("max_unhealthy", "max_count", "percentage"),  # minCount 0: the breaker is off, the share still computed
    [("25%", 2, 25), ("1", 2, 50), ("1", 7, 14), ("3", 7, 42), ("1", 200, 1), ("9", 2, 100), ("100%", 2, 100)],
)
def test_max_unhealthy_becomes_the_breakers_share_of_nvidia_nodes(max_unhealthy: str, max_count: int, percentage: int) -> None:
    pool = {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training"}
    pools = [{**pool, "maxCount": max_count}]
    model = model_of({"mode": "on", "maxUnhealthy": max_unhealthy}, **{"aks-gpu:gpuPools": pools})
    assert circuit_breaker_percentage(model.config) == percentage
    breaker = values_of(model)["fault-quarantine"]["circuitBreaker"]
    assert breaker == {"enabled": False, "percentage": percentage, "duration": "5m"}


def test_a_count_never_lets_more_nodes_go_than_it_says() -> None:
    # The breaker trips at percentage% of the nodes up; at every size up to maxCount the count is never exceeded.
    prod = stack_model("prod")
    share = circuit_breaker_percentage(prod.config)
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


# ---------------------------------------------------------------- the values against the chart's own templates and code
# Each fact is read from NVSentinel's templates and Go code, with its file and line, in components/aks_gpu/data/
# remediation.yaml (chart_facts).


def test_the_release_renders_no_podmonitor_aks_managed_prometheus_cannot_take() -> None:
    fact = FACTS["pod_monitor"]
    assert fact["chart_default"] is True and fact["api_version"].startswith("monitoring.coreos.com/")
    for stack in ("prod", "dev"):
        assert values_of(stack_model(stack))["podMonitor"] == {"enabled": False}, stack


def test_the_pin_is_a_release_and_the_values_leave_platform_connector_auth_to_the_chart() -> None:
    """v1.19.0 is the release NVSentinel's release workflow registered (chart_facts, nvsentinel in the data file); the
    pin before, v1.21.0, was the bundled psmdb-operator's version. Publisher authentication (global.platformConnectorAuth)
    came after v1.19.0 and is on by default where it exists: the platform's values never set it, so they neither name a
    key the pinned chart lacks nor turn off what a later chart turns on."""
    fact = FACTS["platform_connector_auth"]
    assert engine_pin().version == "v1.19.0" and fact["in_pinned_chart"] is False
    assert fact["chart_default_enabled"] is True and fact["key"] == "global.platformConnectorAuth"
    for stack in ("prod", "dev"):
        assert "platformConnectorAuth" not in values_of(stack_model(stack))["global"], stack


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_shipped_stacks_give_nvsentinel_a_datastore_its_modules_connect_to(stack: str) -> None:
    values = values_of(stack_model(stack))
    datastore = values["global"]["datastore"]
    assert datastore["provider"] in FACTS["datastore"]["providers"]
    # External MongoDB: the chart refuses to render without the Secret's name, and the modules take MONGODB_URI from it.
    assert values["global"]["mongodbStore"] == {"enabled": False}
    assert datastore["credentialsFromSecret"]["name"] == stack_model(stack).config.remediation.datastore_secret
    assert datastore["tls"]["enabled"] is True
    for module in ("fault-quarantine", "node-drainer"):
        assert values[module]["clientCertMountPath"] == "", module
    assert values["platformConnector"]["mongodbStore"]["clientCertMountPath"] == ""


def test_the_in_cluster_store_needs_cert_manager_and_turns_the_chart_store_on() -> None:
    with pytest.raises(ConfigError, match="certManagerInstalled"):
        model_of({"mode": "on", "datastore": "mongodb-store"})
    values = values_of(model_of({"mode": "on", "datastore": "mongodb-store", "certManagerInstalled": True}))
    assert values["global"]["mongodbStore"] == {"enabled": True}
    assert "datastore" not in values["global"]


@pytest.mark.parametrize("mode", ["dry-run", "on"])
def test_a_stack_without_a_datastore_is_refused_naming_the_key(mode: str) -> None:
    raw = minimal_raw()
    raw["aks-gpu:remediation"] = {"mode": mode}
    with pytest.raises(ConfigError, match=r"aks-gpu:remediation\.datastore"):
        validate_stack(raw, "test")
    raw["aks-gpu:remediation"] = {"mode": mode, "datastore": "external-mongodb"}
    with pytest.raises(ConfigError, match=r"aks-gpu:remediation\.datastoreSecret"):
        validate_stack(raw, "test")


def test_the_kernel_log_monitor_has_pods_on_every_aks_driver_pool() -> None:
    # The monitor's DaemonSet selects driver.installed=true, kata.enabled=false, which the labeler sets with
    # assumeDriverInstalled on nodes labelled nvidia.com/gpu.present=true: every NVIDIA pool of both stacks has that
    # label and our accelerator label (the monitor's own nodeSelector).
    fact = FACTS["labeler"]
    for stack in ("prod", "dev"):
        model = stack_model(stack)
        values = values_of(model)
        assert values["global"]["labeler"] == {"enabled": True}
        assert values["labeler"]["assumeDriverInstalled"] is True
        selector = values["syslog-health-monitor"]["nodeSelector"]
        for pool in model.pools_of("nvidia"):
            assert pool.node_labels.get(fact["gpu_present_label"]) == "true", pool.name
            assert all(pool.node_labels.get(key) == value for key, value in selector.items()), pool.name


def test_no_gpu_present_label_without_the_engine_or_on_operator_driver_pools() -> None:
    assert "nvidia.com/gpu.present" not in model_of({"mode": "off"}).pools[0].node_labels
    operator = model_of({"mode": "on"}, **{"aks-gpu:devicePlugin": {"mode": "gpu-operator"}})
    assert all("nvidia.com/gpu.present" not in pool.node_labels for pool in operator.pools_of("nvidia"))


def test_every_pod_of_the_release_can_be_created_and_scheduled_on_aks() -> None:
    # No RuntimeClass AKS lacks (the metadata collector's default), and the datastore setup Job tolerates the system pool.
    values = values_of(stack_model("prod"))
    assert values["metadata-collector"]["runtimeClassName"] == ""
    assert {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"} in values["global"][
        "systemNodeTolerations"
    ]


def _halts_on_first_cordon(nodes: int, percentage: int) -> bool:
    # NVSentinel's rule, as its code states it (chart_facts.circuit_breaker): tripped once recent >= ceil(nodes * p / 100).
    assert FACTS["circuit_breaker"]["threshold"] == "ceil(nodes * percentage / 100)"
    return math.ceil(nodes * percentage / 100) <= 1


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_no_shipped_breaker_halts_the_engine_on_its_first_cordon(stack: str) -> None:
    model = stack_model(stack)
    breaker = values_of(model)["fault-quarantine"]["circuitBreaker"]
    fewest = max(1, sum(pool.config.min_count for pool in model.pools_of("nvidia")))
    largest = sum(pool.config.max_count for pool in model.pools_of("nvidia"))
    if breaker["enabled"]:
        assert not any(_halts_on_first_cordon(n, breaker["percentage"]) for n in range(fewest, largest + 1))
    else:
        assert _halts_on_first_cordon(fewest, breaker["percentage"])
        assert "circuit breaker off" in remediation_summary(model)


def test_a_breaker_that_would_not_halt_on_the_first_cordon_stays_on() -> None:
    pools = [{"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training"}]
    model = model_of({"mode": "on", "maxUnhealthy": "25%"}, **{"aks-gpu:gpuPools": [{**pools[0], "minCount": 8, "maxCount": 10}]})
    breaker = values_of(model)["fault-quarantine"]["circuitBreaker"]
    assert breaker["enabled"] is True and not _halts_on_first_cordon(8, breaker["percentage"])


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
    # maxUnhealthy "1" of prod's 9 NVIDIA nodes at maxCount (train 4, infer 3, inferfull 2): 11%, rounded down.
    assert "NVSentinel v1.19.0" in line and "mode on" in line and "11%" in line
    assert "gpu-training DeleteAfterTimeout" in line and "gpu-inference Immediate" in line
    remediation_values(stack_model("prod"), XIDS)  # builds without the release too


# ---------------------------------------------------------------- which pools get AKS's NPD GPU conditions


def test_the_plan_names_the_pools_with_and_without_npd_gpu_conditions() -> None:
    """Since 2026-03-04 AKS runs its NPD GPU checks on every NVIDIA pool on the driver it installs, MIG pools included
    (gpu-health-monitoring.md, azure-aks-docs fc55528da), not on two sizes only."""
    from aks_gpu.monitoring.remediation import npd_coverage

    prod = npd_coverage(stack_model("prod"))
    assert prod is not None and "clock throttling" in prod
    assert "train (Standard_ND96isr_H100_v5)" in prod and "infer (Standard_NC24ads_A100_v4, MIG)" in prod
    assert "not on" not in prod
    dev = npd_coverage(stack_model("dev"))
    assert dev is not None and "on dev (Standard_NC4as_T4_v3)" in dev
    # No NVIDIA pool: nothing to say (the AMD pools' alerts are in the monitoring line).
    assert npd_coverage(stack_model("amd")) is None


def test_a_grid_pool_gets_the_grid_licence_check_in_the_plan() -> None:
    from aks_gpu.monitoring.remediation import npd_coverage

    raw = minimal_raw(**{"azure-native:location": "spaincentral"})
    viz = {"name": "viz", "vendor": "nvidia", "vmSize": "Standard_NV36ads_A10_v5", "workload": "training", "maxCount": 2}
    raw["aks-gpu:gpuPools"] = [viz]
    line = npd_coverage(validate_stack(raw, "test").model)
    assert line is not None and "viz (Standard_NV36ads_A10_v5, with the GRID licence check)" in line


def test_a_pool_without_the_aks_driver_never_gets_them_and_without_the_engine_only_alerts_watch() -> None:
    from aks_gpu.monitoring.remediation import npd_coverage

    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"vmSize": "Standard_ND96isr_H100_v5", "gpuDriver": "None", "maxCount": 2}
    raw["aks-gpu:devicePlugin"] = {"mode": "gpu-operator"}
    line = npd_coverage(validate_stack(raw, "test").model)
    assert line is not None and "on no pool" in line and "gpu (gpuDriver None)" in line
    assert "the DCGM alerts watch" in line and "kernel-log" not in line, "remediation is off in this stack"


def test_the_npd_facts_agree_with_the_conditions_read_and_the_docs() -> None:
    from aks_gpu.gpu.health import GPU_CONDITIONS
    from tests.conftest import PROJECT_DIR

    checks = FACTS_FILE["npd_gpu_checks"]["checks"]
    by_check: dict[str, set[str]] = {}
    for name, condition in GPU_CONDITIONS.items():
        by_check.setdefault(condition.check, set()).add(name)
    assert by_check == {check: set(entry["names"]) for check, entry in checks.items()}
    assert {entry["where"] for entry in checks.values()} == {"all", "managed", "grid"}
    # Every spelling seen is read: the two AKS pages' and the one AKS's own Xid e2e waits for.
    assert by_check["xid"] == {"XIDErrors", "GPUXIDErrors", "XIDError"}
    assert by_check["grid-licence"] == {"NVIDIAGRIDStatusInvalid", "NVIDIA GRID Status Invalid"}
    assert GPU_CONDITIONS["GPUClockThrottling"].severity == "warning"
    assert all(GPU_CONDITIONS[name].severity == "critical" for name in by_check["xid"] | by_check["grid-licence"])
    text = (PROJECT_DIR / "docs" / "remediation.md").read_text(encoding="utf-8")
    section = text.split("## Which pools get AKS's NPD GPU conditions", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{name}`" in section for name in GPU_CONDITIONS)
    assert "fc55528da" in section and "two sizes only" not in section


def test_every_spelling_of_a_critical_condition_quarantines_and_alerts() -> None:
    from aks_gpu.monitoring.rules import npd_condition_rules

    policies = values_of(stack_model("prod"))["kubernetes-object-monitor"]["policies"]
    quarantined = {policy["healthEvent"]["errorCode"][0] for policy in policies}
    assert {"XIDError", "NVIDIAGRIDStatusInvalid", "NVIDIA GRID Status Invalid"} <= quarantined
    spaced = next(p for p in policies if p["healthEvent"]["errorCode"][0] == "NVIDIA GRID Status Invalid")
    assert cel(spaced["predicate"]["expression"], resource=node(**{"NVIDIA GRID Status Invalid": "True"}))
    from aks_gpu.gpu.health import GPU_CONDITIONS

    grades = {kind: condition.severity for kind, condition in GPU_CONDITIONS.items()}
    critical, warning = npd_condition_rules(stack_model("prod"), grades)

    def matched(expr: str) -> set[str]:
        pattern = re.search(r'condition=~"([^"]+)"', expr)
        assert pattern is not None, expr
        return {name for name in GPU_CONDITIONS if re.fullmatch(pattern[1], name)}

    assert matched(critical.expr) == {name for name, grade in grades.items() if grade == "critical"}
    assert {"XIDError", "NVIDIA GRID Status Invalid"} <= matched(critical.expr)
    assert matched(warning.expr) == {"GPUClockThrottling"}
