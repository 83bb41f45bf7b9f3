"""The rule builder, on its own: the metric names are exactly the ones the exporters and kube-state-metrics publish,
every rule says what to do and where its data comes from, the per-pool numbers come from the model, and the critical
Xid codes are the SMI health table's."""

from __future__ import annotations

import re
from typing import Any

import pytest

from aks_gpu.config.models import MonitoringConfig
from aks_gpu.gpu.xid import critical_xid_codes, load_xid_catalog
from aks_gpu.monitoring.exporter_pins import default_exporter_pins
from aks_gpu.monitoring.rules import (
    KUBE_STATE_METRICS,
    POOL_LABEL_METRIC,
    AlertRule,
    iso_duration,
    prometheus_duration,
    prometheus_rule_manifest,
    rule_file,
    rule_groups,
    sanitized_resource,
)
from tests.conftest import ONCALL_ACTION_GROUP, STACK_NAMES, minimal_raw, stack_config, stack_model
from tests.monitoring.runbooks import RUNBOOKS, runbooks_markdown

FIXED_CODES = (48, 79)

# PromQL words that are not metric names, in the expressions we write.
KEYWORDS = {"or", "and", "unless", "by", "on", "without", "ignoring", "group_left", "group_right", "bool", "offset"}


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads: identifiers that are not inside a label matcher, not a function
    (followed by '('), not in a grouping list, not a keyword."""
    text = re.sub(r'"[^"]*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\boffset\s+\S+", "", text)
    names = set()
    for match in re.finditer(r"(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        if match.group(0) in KEYWORDS or rest.startswith("("):
            continue
        names.add(match.group(0))
    return names


def all_rules(stack: str, codes: tuple[int, ...] = FIXED_CODES) -> list[AlertRule]:
    return [rule for group in rule_groups(stack_model(stack), codes) for rule in group.rules]


def test_the_metric_name_reader_reads_metric_names() -> None:
    expr = 'max by (node) (kube_node_labels{a="x"}) * on (node) group_left () foo unless on () count(bar[5m] offset 1m) > 0'
    assert metric_names(expr) == {"kube_node_labels", "foo", "bar"}


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_metric_a_rule_reads_is_one_that_is_published(stack: str) -> None:
    pins = default_exporter_pins()
    published = pins.dcgm_metrics | pins.amd_metrics | KUBE_STATE_METRICS
    for rule in all_rules(stack):
        read = metric_names(rule.expr)
        assert read == set(rule.metrics), f"{rule.alert}: reads {sorted(read)}, declares {sorted(rule.metrics)}"
        assert read <= published, (
            f"{rule.alert}: {sorted(read - published)} is not published by the exporters or kube-state-metrics"
        )
        for metric in rule.metrics:
            assert metric in rule.source, f"{rule.alert}: its source does not name {metric}"


def test_the_counters_file_carries_every_dcgm_field_the_rules_need() -> None:
    pins = default_exporter_pins()
    needed = {m for stack in STACK_NAMES for r in all_rules(stack) for m in r.metrics if m.startswith("DCGM_")}
    assert needed <= pins.dcgm_metrics
    added = {c.field for c in pins.dcgm_counters if c.origin == "added"}
    # Each counter we add beyond the exporter's defaults is there for a rule.
    assert added <= needed, sorted(added - needed)
    # The named fields that the default counters file lacks.
    assert {"DCGM_FI_DEV_ROW_REMAP_PENDING", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_EXP_CLOCK_EVENTS_COUNT"} <= added
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_GPU_UTIL"} <= {
        c.field for c in pins.dcgm_counters if c.origin == "default"
    }


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_rule_has_a_severity_a_runbook_and_a_source(stack: str) -> None:
    rules = all_rules(stack)
    assert rules
    for rule in rules:
        assert rule.severity in ("critical", "warning", "info")
        assert rule.runbook.strip() and rule.source.strip() and rule.summary.strip(), rule.alert
        assert rule.all_labels["severity"] == rule.severity
        assert "{{" not in rule.runbook and "{{" not in rule.source, f"{rule.alert}: only the summary is templated"


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_annotations_follow_prometheus_conventions_and_each_runbook_url_has_its_section(stack: str) -> None:
    headings = {line[3:].strip().lower() for line in RUNBOOKS.read_text(encoding="utf-8").splitlines() if line.startswith("## ")}
    for rule in all_rules(stack):
        annotations = rule.annotations
        assert list(annotations) == ["summary", "description", "runbook_url"], rule.alert
        assert "{{" not in annotations["description"] and rule.runbook.rstrip(".") in annotations["description"]
        base, _, anchor = annotations["runbook_url"].partition("#")
        assert base == "https://github.com/aks-gpu/aks-gpu/blob/main/docs/runbooks.md"
        assert anchor in headings, f"{rule.alert}: no section in docs/runbooks.md"


def test_the_runbooks_page_is_what_the_rules_generate() -> None:
    assert RUNBOOKS.read_text(encoding="utf-8") == runbooks_markdown(), "regenerate: python -m tests.monitoring.runbooks"


def test_the_critical_xid_alert_uses_the_codes_it_is_given() -> None:
    (rule,) = [r for r in all_rules("prod") if r.alert == "GpuXidCritical"]
    assert rule.expr == "DCGM_FI_DEV_XID_ERRORS == 48 or DCGM_FI_DEV_XID_ERRORS == 79"
    (other,) = [r for r in all_rules("prod") if r.alert == "GpuXidError"]
    assert 'xid!~"48|79"' in other.expr
    with pytest.raises(ValueError, match="no critical Xid codes"):
        all_rules("prod", ())


def test_the_critical_xid_alert_and_the_smi_health_table_agree() -> None:
    """One table grades an Xid for `aksgpu smi health` and for the alert (components/aks_gpu/data/xid.yaml)."""
    codes = critical_xid_codes()
    (rule,) = [r for r in all_rules("prod", codes) if r.alert == "GpuXidCritical"]
    in_alert = sorted(int(code) for code in re.findall(r"== (\d+)", rule.expr))
    table = sorted(code for code, entry in load_xid_catalog().items() if entry.severity == "critical")
    assert in_alert == table
    assert 79 in in_alert and 48 in in_alert  # fallen off the bus; double-bit ECC
    assert 13 not in in_alert  # graphics engine exception: the application's


def test_gpu_missing_expects_what_the_pool_advertises() -> None:
    """Counts from the model: 8 H100s (train, and inferfull's whole GPUs); 7 MIG 1g slices of one A100 (single
    strategy); a T4 time-sliced 4 ways."""
    expected = {}
    for stack in ("prod", "dev", "amd"):
        for rule in all_rules(stack):
            if rule.alert == "GpuMissing":
                expected[rule.labels["pool"]] = int(re.search(r"\) < (\d+)", rule.expr).group(1))  # type: ignore[union-attr]
    assert expected == {"train": 8, "infer": 7, "inferfull": 8, "dev": 4, "mi300x": 8}
    (amd,) = [r for r in all_rules("amd") if r.alert == "GpuMissing"]
    assert 'resource="amd_com_gpu"' in amd.expr and f'{POOL_LABEL_METRIC}="mi300x"' in amd.expr


def test_mixed_mig_strategy_watches_the_mig_resource() -> None:
    raw = minimal_raw(
        **{
            "aks-gpu:gpuPools": [
                {
                    "name": "mig",
                    "vendor": "nvidia",
                    "vmSize": "Standard_NC24ads_A100_v4",
                    "workload": "inference",
                    "migProfile": "MIG2g",
                }
            ],
            "aks-gpu:workloads": [{"name": "team", "type": "inference", "gpuQuota": 3}],
            "aks-gpu:devicePlugin": {"migStrategy": "mixed"},
        }
    )
    from aks_gpu.resolved.stack import validate_stack

    model = validate_stack(raw, "test").model
    rules = {r.alert: r for g in rule_groups(model, FIXED_CODES) for r in g.rules}
    assert 'resource="nvidia_com_mig_2g_20gb"' in rules["GpuMissing"].expr
    assert ") < 3 or" in rules["GpuMissing"].expr  # three 2g.20gb slices per A100 80GB
    assert 'resource=~"requests.nvidia.com/mig-2g.20gb"' in rules["GpuQuotaUnused"].expr
    assert 'kube_pod_container_resource_requests{resource="nvidia_com_mig_2g_20gb"}' in rules["GpuNodeEmpty"].expr
    # The pool is tainted by its slice (naming.gpu_taint_key): the alerts on the monitoring itself find its nodes by it.
    gpu_nodes = 'kube_node_spec_taint{key=~"nvidia.com/gpu|nvidia.com/mig-2g.20gb", effect="NoSchedule"}'
    assert gpu_nodes in rules["GpuMetricsMissing"].expr


def test_empty_node_rule_follows_min_count_and_autoscaling() -> None:
    rules = [r for r in all_rules("prod") if r.alert == "GpuNodeEmpty"]
    by_pool = {r.labels["pool"]: r for r in rules}
    assert by_pool["train"].expr.endswith("> 0") and by_pool["infer"].expr.endswith("> 1")
    assert by_pool["inferfull"].expr.endswith("> 0")  # minCount 0: any idle whole-GPU inference node costs money
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"autoscaling": False, "count": 2, "minCount": 0}
    from aks_gpu.resolved.stack import validate_stack

    model = validate_stack(raw, "test").model
    assert [r for g in rule_groups(model, FIXED_CODES) for r in g.rules if r.alert == "GpuNodeEmpty"] == []


def test_thresholds_come_from_the_stack() -> None:
    raw = minimal_raw(
        **{
            "aks-gpu:monitoring": {
                "alerts": {"idleUtilizationPercent": 10, "idleMinutes": 90, "emptyNodeMinutes": 45},
                "azureMonitor": {"actionGroupIds": [ONCALL_ACTION_GROUP]},
            }
        }
    )
    from aks_gpu.resolved.stack import validate_stack

    model = validate_stack(raw, "test").model
    rules = {r.alert: r for g in rule_groups(model, FIXED_CODES) for r in g.rules}
    assert rules["GpuAllocatedIdle"].for_minutes == 90 and "< 10" in rules["GpuAllocatedIdle"].expr
    assert rules["GpuNodeEmpty"].for_minutes == 45


def test_no_pools_no_rules() -> None:
    raw = minimal_raw(**{"aks-gpu:gpuPools": [], "aks-gpu:workloads": []})
    from aks_gpu.resolved.stack import validate_stack

    assert rule_groups(validate_stack(raw, "test").model, FIXED_CODES) == ()


def test_device_plugin_rule_names_the_daemonset_each_mode_runs() -> None:
    def plugin_rule(mode: dict[str, Any]) -> str:
        raw = minimal_raw(**{"aks-gpu:devicePlugin": mode})
        from aks_gpu.resolved.stack import validate_stack

        model = validate_stack(raw, "test").model
        return next(r.expr for g in rule_groups(model, FIXED_CODES) for r in g.rules if r.alert == "GpuDevicePluginNotReady")

    assert 'daemonset=~"nvidia-device-plugin-daemonset"' in plugin_rule({"mode": "daemonset"})
    assert 'daemonset=~"nvidia-device-plugin-daemonset"' in plugin_rule({"mode": "gpu-operator"})
    (amd,) = [r for r in all_rules("amd") if r.alert == "GpuDevicePluginNotReady"]
    assert 'daemonset=~"amdgpu-device-plugin-daemonset"' in amd.expr


def test_durations() -> None:
    assert [prometheus_duration(m) for m in (0, 5, 15, 60, 90, 120)] == ["0m", "5m", "15m", "1h", "90m", "2h"]
    assert [iso_duration(m) for m in (1, 5, 60, 90, 1440)] == ["PT1M", "PT5M", "PT1H", "PT90M", "PT24H"]


def test_kube_state_metrics_names() -> None:
    # kube-state-metrics' SanitizeLabelName: every character outside [a-zA-Z0-9_] becomes "_".
    assert sanitized_resource("nvidia.com/gpu") == "nvidia_com_gpu"
    assert sanitized_resource("nvidia.com/mig-1g.10gb") == "nvidia_com_mig_1g_10gb"
    assert POOL_LABEL_METRIC == "label_aks_gpu_pool"


def test_rule_file_and_prometheus_rule_carry_the_same_groups() -> None:
    model = stack_model("amd")
    groups = rule_groups(model, FIXED_CODES)
    manifest = prometheus_rule_manifest(groups, model)
    assert manifest["spec"]["groups"] == rule_file(groups)["groups"]
    assert manifest["metadata"]["namespace"] == "monitoring"
    assert manifest["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_monitoring_defaults_are_on_and_managed_prometheus() -> None:
    config = stack_config("prod")
    # Everything at its default but who hears the alerts (stacks/Pulumi.prod.yaml: a receiver).
    assert config.monitoring.model_copy(update={"azure_monitor": MonitoringConfig().azure_monitor}) == MonitoringConfig()
    assert config.monitoring.azure_monitor.receivers
    assert config.monitoring.enabled and config.monitoring.engine == "azure-monitor"


# Remediation on needs its datastore (config/rules/monitoring.py).
REMEDIATION_ON = {"mode": "on", "datastore": "external-mongodb", "datastoreSecret": "nvsentinel-datastore"}


def largest_stack_raw() -> dict[str, Any]:
    """The most GPU pools a stack may have (99: AKS's 100 node pools per cluster, less the system pool), of both
    vendors, autoscaling, with remediation on and a quota per workload: every per-pool and optional rule there is."""
    pools: list[dict[str, Any]] = [
        {"name": f"nv{i:02d}", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training", "maxCount": 1}
        for i in range(50)
    ]
    pools += [
        {"name": f"amd{i:02d}", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "hpc", "maxCount": 1}
        for i in range(49)
    ]
    workloads = [{"name": "team-a", "type": "training", "gpuQuota": 2}, {"name": "team-b", "type": "hpc", "gpuQuota": 8}]
    return minimal_raw(**{"aks-gpu:gpuPools": pools, "aks-gpu:workloads": workloads, "aks-gpu:remediation": REMEDIATION_ON})


def test_no_rule_group_of_the_largest_stack_passes_azures_20_rules() -> None:
    from aks_gpu.monitoring.rules import HEALTH_GROUP, MAX_RULES_PER_GROUP, WASTE_GROUP
    from aks_gpu.resolved.stack import validate_stack

    model = validate_stack(largest_stack_raw(), "test").model
    assert len(model.pools) == 99
    groups = rule_groups(model, FIXED_CODES)
    # Azure Monitor: "Rules per rule group: 20. This limit can't be increased."
    assert max(len(g.rules) for g in groups) <= MAX_RULES_PER_GROUP == 20
    names = [g.name for g in groups]
    assert len(set(names)) == len(names)
    # Every pool keeps its GpuMissing and GpuNodeEmpty rule: splitting drops nothing.
    per_pool = [r.labels.get("pool", "") for g in groups for r in g.rules if r.alert in ("GpuMissing", "GpuNodeEmpty")]
    assert sorted(set(per_pool)) == sorted(p.name for p in model.pools) and len(per_pool) == 2 * 99
    # The first group of each kind keeps its name (and the deployed PrometheusRuleGroup its URN).
    assert names[0] == HEALTH_GROUP and WASTE_GROUP in names
    assert f"{HEALTH_GROUP}-2" in names and f"{WASTE_GROUP}-2" in names


def test_a_stack_that_fits_one_group_keeps_its_two_groups() -> None:
    from aks_gpu.monitoring.rules import HEALTH_GROUP, WASTE_GROUP

    assert [g.name for g in rule_groups(stack_model("prod"), FIXED_CODES)] == [HEALTH_GROUP, WASTE_GROUP]
