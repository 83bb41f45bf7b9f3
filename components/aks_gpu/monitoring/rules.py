"""The GPU health and waste alert rules as code. Pure: the resolved model in, rule groups out.

One builder, ``rule_groups``, feeds all three outputs, so they cannot drift apart: the Azure Monitor
PrometheusRuleGroups (``components/aks_gpu/monitoring/azure.py``), the Prometheus Operator's PrometheusRule
(``prometheus_rule_manifest``) and the rule file ``aksgpu rules`` prints (``rule_file``). The expression text is the
same in each, and the tests run it through Prometheus's own ``promtool``.

What the expressions read, and the scrape contract that makes it so:

- the GPU exporters' metrics under the names they publish with our counters/fields lists
  (``data/gpu_exporters.yaml``), scraped with ``honorLabels: false`` (the workload's pod is ``exported_pod``) and a
  ``node`` label from the exporter pod's node (``exporters.pod_monitor``);
- kube-state-metrics, whose metrics managed Prometheus keeps by default (``KUBE_STATE_METRICS``), with the node label
  ``aks-gpu/pool`` allowlisted (``POOL_LABEL_METRIC``): managed Prometheus gets it through the cluster's
  ``azureMonitorProfile.metrics.kubeStateMetrics.metricLabelsAllowlist``; a Prometheus of your own needs
  ``--metric-labels-allowlist=nodes=[aks-gpu/pool]`` on its kube-state-metrics, and ``GpuPoolLabelNotExported``
  fires while it is missing.

Severities: ``critical`` (a GPU is out of service or about to be: drain the node), ``warning`` (degraded, or money
burning), ``info`` (worth a look at the next review).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from aks_gpu.aks_facts import disruption_facts
from aks_gpu.gpu.health import GPU_CONDITIONS
from aks_gpu.naming import (
    GPU_NAMESPACE,
    POOL_LABEL,
    QUARANTINE_TAINT_KEY,
    QUOTA_NAME,
    REMEDIATION_NAMESPACE,
    Vendor,
    platform_object_name,
    vendor_resource,
)
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.resolved.targets import AMD_PLUGIN_DAEMONSET, NVIDIA_PLUGIN_DAEMONSET, vendor_mode

Severity = Literal["critical", "warning", "info"]

HEALTH_GROUP = platform_object_name("health")
WASTE_GROUP = platform_object_name("waste")
# Health is evaluated every minute; waste every 5 minutes (its windows are hours long, and every evaluation is a
# query managed Prometheus bills by the samples it reads).
HEALTH_INTERVAL_MINUTES = 1
WASTE_INTERVAL_MINUTES = 5
# "Rules per rule group: 20. This limit can't be increased." (Azure Monitor service limits, Prometheus metrics, "Alert
# and recording rules": MicrosoftDocs/azure-monitor-docs articles/azure-monitor/fundamentals/includes/
# azure-monitor-limits-metrics.md @3d725ffe, read 2026-12-02; https://learn.microsoft.com/azure/azure-monitor/
# fundamentals/service-limits#prometheus-metrics). Per-pool rules grow a group with the pools, so every group is cut
# into chunks of at most this many rules (``split_group``); the Prometheus Operator's PrometheusRule gets the same
# groups, so the three outputs stay one.
MAX_RULES_PER_GROUP = 20

# kube-state-metrics names a node label `label_<key>` with every character outside [a-zA-Z0-9_] as "_"
# (internal/store/utils.go, SanitizeLabelName and mapToPrometheusLabels, kubernetes/kube-state-metrics v2.20.0).
POOL_LABEL_METRIC = "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", POOL_LABEL)
# The kube-state-metrics metrics the rules read. Managed Prometheus keeps each of them under its default
# "minimal ingestion profile" (kubestateRegex_minimal_mac, otelcollector/shared/configmap/mp/
# tomlparser-default-targets-metrics-keep-list.go in Azure/prometheus-collector; kube_node_labels as kube_.*_labels).
KUBE_STATE_METRICS = frozenset(
    {
        "kube_node_status_allocatable",
        "kube_node_labels",
        "kube_node_spec_taint",
        "kube_pod_container_resource_requests",
        "kube_pod_status_phase",
        "kube_resourcequota",
        "kube_daemonset_status_number_ready",
        "kube_daemonset_status_desired_number_scheduled",
        # The AKS Node Problem Detector's node conditions, as kube-state-metrics exports every condition of a node
        # (labels node, condition, status "true"/"false"/"unknown"; docs/metrics/cluster/node-metrics.md in
        # kubernetes/kube-state-metrics); kept by managed Prometheus's minimal profile with the other kube_node_ series.
        "kube_node_status_condition",
    }
)
KSM_SOURCE = "kube-state-metrics (managed Prometheus's default kube-state-metrics target)"
DCGM_SOURCE = "DCGM exporter, counters file components/aks_gpu/data/gpu_exporters.yaml"
AMD_SOURCE = "ROCm device metrics exporter, fields in components/aks_gpu/data/gpu_exporters.yaml"
XID_TABLE = "components/aks_gpu/data/xid.yaml (NVIDIA's Xid catalog)"
# The device plugin DaemonSet each vendor and mode runs in gpu-resources: ours (resolved/targets.py), the NVIDIA GPU
# Operator's (assets/state-device-plugin/0500_daemonset.yaml: nvidia-device-plugin-daemonset) and the AMD GPU
# Operator's for its default DeviceConfig "default" (`<config>-device-plugin`, internal/controllers/
# device_config_reconciler.go in ROCm/gpu-operator v1.5.1).
DEVICE_PLUGIN_DAEMONSETS: dict[tuple[Vendor, str], str] = {
    ("nvidia", "daemonset"): NVIDIA_PLUGIN_DAEMONSET,
    ("nvidia", "gpu-operator"): NVIDIA_PLUGIN_DAEMONSET,
    ("amd", "daemonset"): AMD_PLUGIN_DAEMONSET,
    ("amd", "gpu-operator"): "default-device-plugin",
}
# DCGM_EXP_CLOCK_EVENTS_COUNT's clock_event values for HW slowdown, HW thermal slowdown, HW power brake and SW thermal
# slowdown (clock_events_collector.go in NVIDIA/dcgm-exporter 4.5.3-4.8.2).
THROTTLE_EVENTS = ("hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal")
# Alert annotations follow the conventions of Prometheus's alerting rules docs (summary, description:
# https://prometheus.io/docs/prometheus/latest/configuration/alerting_rules/#templating) and of the Prometheus Operator's
# runbooks (runbook_url: https://runbooks.prometheus-operator.dev/), read 2026-12-01. Each alert's runbook is a section
# of docs/runbooks.md, where the project's documentation is published.
RUNBOOK_BASE_URL = "https://github.com/aks-gpu/aks-gpu/blob/main/docs/runbooks.md"


@dataclass(frozen=True)
class AlertRule:
    alert: str
    expr: str
    for_minutes: int
    severity: Severity
    summary: str
    """One line, templated with the alert's labels (``{{ $labels.node }}``) and value (``{{ $value }}``)."""
    runbook: str
    """What to do."""
    source: str
    """Where each metric the expression reads comes from."""
    metrics: tuple[str, ...]
    """Every metric name the expression reads, exactly as published."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Static labels beyond ``severity`` (``pool`` for per-pool rules)."""

    @property
    def all_labels(self) -> dict[str, str]:
        return {"severity": self.severity, **self.labels}

    @property
    def runbook_url(self) -> str:
        """This alert's section of docs/runbooks.md (GitHub's anchor for a heading is its text in lower case)."""
        return f"{RUNBOOK_BASE_URL}#{self.alert.lower()}"

    @property
    def annotations(self) -> dict[str, str]:
        """Prometheus's conventional annotations, which Alertmanager templates and Grafana show: ``summary`` (one
        line), ``description`` (what to do, and what the expression reads) and ``runbook_url``."""
        return {
            "summary": self.summary,
            "description": f"{self.runbook.rstrip('.')}. Reads: {self.source}.",
            "runbook_url": self.runbook_url,
        }


@dataclass(frozen=True)
class RuleGroup:
    name: str
    interval_minutes: int
    rules: tuple[AlertRule, ...]


# ---------------------------------------------------------------- durations


def prometheus_duration(minutes: int) -> str:
    """Prometheus's duration syntax: ``90m``, ``2h``."""
    return f"{minutes // 60}h" if minutes and minutes % 60 == 0 else f"{minutes}m"


def iso_duration(minutes: int) -> str:
    """ISO 8601, as PrometheusRuleGroup's ``interval`` and ``for`` take them (``PT5M``, ``PT1H``)."""
    return f"PT{minutes // 60}H" if minutes and minutes % 60 == 0 else f"PT{minutes}M"


# ---------------------------------------------------------------- PromQL pieces


def sanitized_resource(resource: str) -> str:
    """A resource name as kube-state-metrics puts it in ``resource`` of node and pod metrics (SanitizeLabelName):
    ``nvidia.com/gpu`` -> ``nvidia_com_gpu``. kube_resourcequota keeps the raw name."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def alternatives(values: Iterable[object]) -> str:
    """A regex alternation for a label matcher; values are label-safe (codes, names we chose)."""
    return "|".join(str(v) for v in values)


def pool_nodes(pool: ResolvedPool) -> str:
    """The pool's nodes (value 1, label ``node``), from the node label kube-state-metrics exports."""
    return f'max by (node) (kube_node_labels{{{POOL_LABEL_METRIC}="{pool.name}"}})'


def gpu_pods_running(resource: str) -> str:
    """Per node: running pods that request ``resource`` (kube-state-metrics counts a finished pod's requests too)."""
    requests = f'kube_pod_container_resource_requests{{resource="{sanitized_resource(resource)}"}} > 0'
    running = 'kube_pod_status_phase{phase="Running"} == 1'
    return f"max by (node) (({requests}) and on (namespace, pod) ({running}))"


def gpu_taint_selector(model: PlatformModel) -> str:
    """The GPU nodes by their GPU taint: the vendors' and, under the mixed MIG strategy, a sliced pool's own."""
    keys = alternatives(sorted({vendor_resource(v) for v in model.vendors} | {pool.gpu_taint.key for pool in model.pools}))
    return f'kube_node_spec_taint{{key=~"{keys}", effect="NoSchedule"}}'


# ---------------------------------------------------------------- health


def nvidia_health_rules(model: PlatformModel, critical_xid_codes: Sequence[int]) -> list[AlertRule]:
    codes = sorted(set(critical_xid_codes))
    if not codes:
        raise ValueError("no critical Xid codes: the Xid table lost its critical entries")
    critical = " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {code}" for code in codes)
    throttle_minutes = model.config.monitoring.alerts.throttle_minutes
    return [
        AlertRule(
            alert="GpuXidCritical",
            expr=critical,
            for_minutes=0,
            severity="critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} last reported Xid {{ $value }}, "
            "which takes a GPU out of service",
            runbook="Cordon and drain the node, then reset the GPU (reboot or reimage the node); "
            "if the Xid recurs on the same GPU, open an Azure support case for the hardware.",
            source=f"DCGM_FI_DEV_XID_ERRORS (the last Xid, {DCGM_SOURCE}); critical codes from {XID_TABLE}",
            metrics=("DCGM_FI_DEV_XID_ERRORS",),
        ),
        AlertRule(
            alert="GpuXidError",
            expr=f'DCGM_EXP_XID_ERRORS_COUNT{{xid!~"{alternatives(codes)}"}} > 0',
            for_minutes=0,
            severity="warning",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} reported Xid {{ $labels.xid }} in the last 5 minutes",
            runbook="Look the Xid up in NVIDIA's Xid catalog; most of these codes point at the application "
            "(restart it, check its CUDA code); `aksgpu smi health` on the node's `nvidia-smi -q` and kernel log grades it.",
            source=f"DCGM_EXP_XID_ERRORS_COUNT (Xids per code in the exporter's 5-minute window, {DCGM_SOURCE}); "
            f"codes graded critical in {XID_TABLE} are left to GpuXidCritical",
            metrics=("DCGM_EXP_XID_ERRORS_COUNT",),
        ),
        AlertRule(
            alert="GpuEccUncorrectable",
            expr="DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0",
            for_minutes=0,
            severity="critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} has {{ $value }} uncorrectable ECC errors "
            "since its driver loaded",
            runbook="Cordon and drain the node and reset the GPU so the memory row is remapped (reboot the node); "
            "if uncorrectable errors return, open an Azure support case.",
            source=f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (volatile double-bit ECC errors, {DCGM_SOURCE})",
            metrics=("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
        ),
        AlertRule(
            alert="GpuRowRemapFailure",
            expr="DCGM_FI_DEV_ROW_REMAP_FAILURE > 0",
            for_minutes=0,
            severity="critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} failed to remap a memory row",
            runbook="The GPU has no spare rows left: drain the node, take it out of service and open an Azure "
            "support case to replace the hardware.",
            source=f"DCGM_FI_DEV_ROW_REMAP_FAILURE ({DCGM_SOURCE})",
            metrics=("DCGM_FI_DEV_ROW_REMAP_FAILURE",),
        ),
        AlertRule(
            alert="GpuRowRemapPending",
            expr="DCGM_FI_DEV_ROW_REMAP_PENDING > 0",
            for_minutes=0,
            severity="critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} has a memory row remap pending a GPU reset",
            runbook="Cordon and drain the node and reset the GPU (reboot the node) so the pending remap takes effect.",
            source=f"DCGM_FI_DEV_ROW_REMAP_PENDING ({DCGM_SOURCE})",
            metrics=("DCGM_FI_DEV_ROW_REMAP_PENDING",),
        ),
        AlertRule(
            alert="GpuRetiredPagesPending",
            expr="DCGM_FI_DEV_RETIRED_PENDING > 0",
            for_minutes=0,
            severity="critical",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} has memory pages pending retirement",
            runbook="Cordon and drain the node and reset the GPU (reboot the node) so the pages are retired.",
            source=f"DCGM_FI_DEV_RETIRED_PENDING (GPUs before Ampere retire pages, {DCGM_SOURCE})",
            metrics=("DCGM_FI_DEV_RETIRED_PENDING",),
        ),
        AlertRule(
            alert="GpuNvlinkErrors",
            expr=" or ".join(
                f"increase({metric}[15m]) > 0"
                for metric in (
                    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                )
            ),
            for_minutes=15,
            severity="warning",
            summary="NVLink CRC or replay errors keep rising on GPU {{ $labels.gpu }} of {{ $labels.node }}",
            runbook="The link corrects them by replaying, at a bandwidth cost; if they keep rising, drain the node "
            "and reboot it, and open an Azure support case if they come back.",
            source=f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, "
            f"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL ({DCGM_SOURCE})",
            metrics=(
                "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            ),
        ),
        AlertRule(
            alert="GpuNvlinkRecovery",
            expr="increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL[15m]) > 0",
            for_minutes=0,
            severity="critical",
            summary="An NVLink of GPU {{ $labels.gpu }} on {{ $labels.node }} had to recover in the last 15 minutes",
            runbook="Multi-GPU jobs on this node stall or fail while a link retrains: drain the node and reboot it; "
            "if it recurs, open an Azure support case (NVIDIA's Xid 74 workflow).",
            source=f"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL ({DCGM_SOURCE})",
            metrics=("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",),
        ),
        AlertRule(
            alert="GpuClocksThrottled",
            expr=f'DCGM_EXP_CLOCK_EVENTS_COUNT{{clock_event=~"{alternatives(THROTTLE_EVENTS)}"}} > 0',
            for_minutes=throttle_minutes,
            severity="warning",
            summary="GPU {{ $labels.gpu }} on {{ $labels.node }} has been slowed down ({{ $labels.clock_event }}) "
            f"for {prometheus_duration(throttle_minutes)}",
            runbook="HW slowdown, thermal slowdown or power brake cut the clocks by half or more: check the GPU's "
            "temperature and power (DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE); if it persists on an idle or "
            "cool GPU, drain the node and open an Azure support case.",
            source=f"DCGM_EXP_CLOCK_EVENTS_COUNT (clock event reasons in the exporter's 5-minute window, {DCGM_SOURCE})",
            metrics=("DCGM_EXP_CLOCK_EVENTS_COUNT",),
        ),
    ]


def amd_health_rules() -> list[AlertRule]:
    return [
        AlertRule(
            alert="AmdGpuEccUncorrectable",
            expr="gpu_ecc_uncorrect_total > 0",
            for_minutes=0,
            severity="critical",
            summary="AMD GPU {{ $labels.gpu_id }} on {{ $labels.node }} has {{ $value }} uncorrectable ECC errors",
            runbook="Cordon and drain the node and reboot it; if uncorrectable errors return, open an Azure support case.",
            source=f"gpu_ecc_uncorrect_total ({AMD_SOURCE})",
            metrics=("gpu_ecc_uncorrect_total",),
        )
    ]


def gpu_missing_rule(pool: ResolvedPool) -> AlertRule | None:
    """Fewer GPUs allocatable than the pool's nodes should advertise (count from the model: MIG slices and
    time-slicing included), or none at all; None when the pool's GPU count is unknown."""
    expected = pool.resource.count_per_node
    if not expected:
        return None
    resource = f'kube_node_status_allocatable{{resource="{sanitized_resource(pool.resource.name)}"}}'
    nodes = pool_nodes(pool)
    expr = (
        f"(max by (node) ({resource}) * on (node) group_left () {nodes}) < {expected}"
        f" or ({nodes} * 0 unless on (node) {resource})"
    )
    return AlertRule(
        alert="GpuMissing",
        expr=expr,
        for_minutes=10,
        severity="critical",
        summary=f"{{{{ $labels.node }}}} of pool {pool.name} advertises {{{{ $value }}}} {pool.resource.name}, not {expected}",
        runbook="A GPU fell off the bus or the device plugin lost it: run `aksgpu validate` (or `nvidia-smi` in the "
        "node's device plugin pod); drain the node and reboot or reimage it; if a GPU stays missing, open an Azure support case.",
        source=f"kube_node_status_allocatable and kube_node_labels ({KSM_SOURCE}); expected count: the pool's VM size "
        "(components/aks_gpu/data/gpu_catalog.yaml) under its MIG and time-slicing settings",
        metrics=("kube_node_status_allocatable", "kube_node_labels"),
        labels={"pool": pool.name},
    )


def device_plugin_rule(model: PlatformModel) -> AlertRule:
    names = sorted({DEVICE_PLUGIN_DAEMONSETS[(v, vendor_mode(model, v))] for v in model.vendors})
    selector = f'{{namespace="{GPU_NAMESPACE}", daemonset=~"{alternatives(names)}"}}'
    return AlertRule(
        alert="GpuDevicePluginNotReady",
        expr=f"kube_daemonset_status_number_ready{selector} < kube_daemonset_status_desired_number_scheduled{selector}",
        for_minutes=15,
        severity="critical",
        summary="Device plugin {{ $labels.daemonset }}: {{ $value }} pods ready, fewer than it should run",
        runbook="GPU nodes without a ready plugin pod advertise no GPUs: `kubectl -n gpu-resources get pods -o wide` for "
        "the failing pod and its logs (driver not loaded, config error), then `aksgpu validate`.",
        source=f"kube_daemonset_status_number_ready, kube_daemonset_status_desired_number_scheduled ({KSM_SOURCE})",
        metrics=("kube_daemonset_status_number_ready", "kube_daemonset_status_desired_number_scheduled"),
    )


def npd_condition_rules(model: PlatformModel, conditions: Mapping[str, str]) -> list[AlertRule]:
    """The AKS Node Problem Detector GPU conditions (``conditions``: type -> "critical" or "warning", the grades of
    components/aks_gpu/gpu/health/conditions.py) while True on a node. Only where AKS runs those checks: pools whose GPU driver
    AKS installs. Pools with gpuDriver None (the NVIDIA GPU Operator's driver, every AMD pool) get no AKS NPD GPU
    check (https://learn.microsoft.com/azure/aks/gpu-health-monitoring, Limitations), so no rule for them."""
    if not any(pool.gpu_driver != "None" for pool in model.pools):
        return []
    remediation = model.config.remediation.mode
    acts = (
        f"NVSentinel quarantines the node (remediation.mode {remediation}): check that `kubectl get node <node>` shows "
        "it cordoned and tainted; "
        if remediation == "on"
        else "Cordon the node (`kubectl cordon`), drain it, "
    )
    source = f"kube_node_status_condition ({KSM_SOURCE}); the conditions the AKS Node Problem Detector sets on GPU nodes"
    rules = []
    for severity, alert in (("critical", "GpuNodeConditionCritical"), ("warning", "GpuNodeConditionWarning")):
        kinds = sorted(kind for kind, grade in conditions.items() if grade == severity)
        if not kinds:
            continue
        runbook = (
            acts + "then reboot or reimage it (`az vmss reimage --instance-ids` in the node resource group) as the "
            "condition's reason says; if it recurs, open an Azure support case for the hardware."
            if severity == "critical"
            else "Check the GPU's temperature and power (`nvidia-smi -q -d PERFORMANCE`); if it lasts on a cool, idle "
            "GPU, drain the node and open an Azure support case."
        )
        rules.append(
            AlertRule(
                alert=alert,
                expr=f'kube_node_status_condition{{condition=~"{alternatives(kinds)}", status="true"}} == 1',
                for_minutes=0 if severity == "critical" else 15,
                severity=cast(Severity, severity),
                summary="AKS Node Problem Detector reports {{ $labels.condition }} on {{ $labels.node }}",
                runbook=runbook,
                source=source,
                metrics=("kube_node_status_condition",),
            )
        )
    return rules


def quarantine_rule(model: PlatformModel) -> AlertRule | None:
    """A node the quarantine engine took out of service: someone must repair it (reboot, reimage, support case)."""
    if model.config.remediation.mode != "on" or not model.pools_of("nvidia"):
        return None
    return AlertRule(
        alert="GpuNodeQuarantined",
        expr=f'max by (node) (kube_node_spec_taint{{key="{QUARANTINE_TAINT_KEY}"}})',
        for_minutes=0,
        severity="warning",
        summary="GPU node {{ $labels.node }} is quarantined: no new GPU work lands there until it is repaired",
        runbook=f"Read why on the node (`kubectl describe node`: NVSentinel's cordon-reason label and events; its logs "
        f"in {REMEDIATION_NAMESPACE}); reboot or reimage the node. The engine lifts the quarantine when the fault clears; "
        "a reimaged node comes back without the taint.",
        source=f"kube_node_spec_taint ({KSM_SOURCE}); the taint components/aks_gpu/naming.py names",
        metrics=("kube_node_spec_taint",),
    )


def scheduled_event_rule(model: PlatformModel) -> AlertRule:
    """An Azure scheduled event pending on a GPU node (AKS's Node Problem Detector condition VMEventScheduled,
    components/aks_gpu/data/disruption.yaml): GPU VMs are never live-migrated, so a Reboot, Redeploy or Terminate stops
    the jobs on the node. Warned at once: the notice comes minutes ahead, the time a job has to checkpoint."""
    condition = disruption_facts().scheduled_event_condition
    return AlertRule(
        alert="GpuNodeVmEventScheduled",
        expr=f'max by (node) (kube_node_status_condition{{condition="{condition}", status="true"}} == 1) '
        f"and on (node) max by (node) ({gpu_taint_selector(model)})",
        for_minutes=0,
        severity="warning",
        summary="Azure scheduled a maintenance event on GPU node {{ $labels.node }}: its jobs stop when it runs "
        "(GPU VMs are not live-migrated)",
        runbook=f"Read the event's type and time in the node's {condition} condition (`kubectl describe node`); have the "
        "jobs on it checkpoint now and drain the node before the event (`kubectl drain --ignore-daemonsets "
        "--delete-emptydir-data`) so they restart elsewhere; AKS itself cordons and drains only for Redeploy and "
        "Preempt (docs/disruption.md).",
        source=f"kube_node_status_condition and kube_node_spec_taint ({KSM_SOURCE}); the condition the AKS Node "
        "Problem Detector sets from Azure Scheduled Events, on the nodes with a GPU taint",
        metrics=("kube_node_status_condition", "kube_node_spec_taint"),
    )


def exporter_presence(vendors: Sequence[Vendor]) -> tuple[str, tuple[str, ...]]:
    parts = {"nvidia": "max by (node) (DCGM_FI_DEV_GPU_TEMP)", "amd": "max by (node) (gpu_gfx_activity)"}
    metrics = {"nvidia": "DCGM_FI_DEV_GPU_TEMP", "amd": "gpu_gfx_activity"}
    return " or ".join(parts[v] for v in vendors), tuple(metrics[v] for v in vendors)


def blind_spot_rules(model: PlatformModel) -> list[AlertRule]:
    """Alerts on the monitoring itself: a rule that sees nothing must not look like a healthy GPU."""
    vendors = model.vendors
    presence, presence_metrics = exporter_presence(vendors)
    gpu_nodes = f"max by (node) ({gpu_taint_selector(model)})"
    labelled = f'kube_node_labels{{{POOL_LABEL_METRIC}!=""}}'
    return [
        AlertRule(
            alert="GpuMetricsMissing",
            expr=f"{gpu_nodes} unless on (node) ({presence})",
            for_minutes=15,
            severity="warning",
            summary="GPU node {{ $labels.node }} sends no GPU metrics: its health alerts cannot fire",
            runbook="Check the exporter pod on the node (`kubectl -n gpu-resources get pods -o wide`) and the scrape "
            "targets (managed Prometheus: the ama-metrics target page; Prometheus Operator: Status > Targets).",
            source=f"kube_node_spec_taint ({KSM_SOURCE}, the vendor taint every GPU pool carries); "
            f"{', '.join(presence_metrics)} (the exporters)",
            metrics=("kube_node_spec_taint", *presence_metrics),
        ),
        AlertRule(
            alert="GpuPoolLabelNotExported",
            expr=f"count({gpu_taint_selector(model)}) > 0 unless on () count({labelled}) > 0",
            for_minutes=30,
            severity="warning",
            summary=f"kube-state-metrics exports no {POOL_LABEL} node label: the per-pool GPU alerts see no pool",
            runbook=f"Add {POOL_LABEL} to kube-state-metrics' node label allowlist (--metric-labels-allowlist="
            f"nodes=[{POOL_LABEL}]; managed Prometheus: the cluster's azureMonitorProfile.metrics.kubeStateMetrics, which "
            "aks-gpu sets).",
            source=f"kube_node_spec_taint, kube_node_labels ({KSM_SOURCE})",
            metrics=("kube_node_spec_taint", "kube_node_labels"),
        ),
    ]


# ---------------------------------------------------------------- waste


def idle_rule(model: PlatformModel) -> AlertRule:
    alerts = model.config.monitoring.alerts
    percent, minutes = alerts.idle_utilization_percent, alerts.idle_minutes
    parts: list[str] = []
    metrics: list[str] = []
    sources: list[str] = []
    if model.pools_of("nvidia"):
        # MIG slices have no DCGM_FI_DEV_GPU_UTIL; their graphics engine activity (0-1) carries GPU_I_ID.
        parts += [
            f'DCGM_FI_DEV_GPU_UTIL{{exported_pod!=""}} < {percent}',
            f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{exported_pod!="", GPU_I_ID!=""}} * 100 < {percent}',
        ]
        metrics += ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
        sources.append(f"DCGM_FI_DEV_GPU_UTIL, DCGM_FI_PROF_GR_ENGINE_ACTIVE on MIG slices ({DCGM_SOURCE})")
    if model.pools_of("amd"):
        parts.append(f'gpu_gfx_activity{{exported_pod!=""}} < {percent}')
        metrics.append("gpu_gfx_activity")
        sources.append(f"gpu_gfx_activity ({AMD_SOURCE})")
    return AlertRule(
        alert="GpuAllocatedIdle",
        expr=" or ".join(f"({part})" for part in parts),
        for_minutes=minutes,
        severity="warning",
        summary="A GPU on {{ $labels.node }} allocated to {{ $labels.exported_namespace }}/{{ $labels.exported_pod }} "
        f"stayed below {percent}% utilisation for {prometheus_duration(minutes)}",
        runbook="Ask the owner whether the pod still needs its GPU (a notebook left open, a job waiting on data); "
        "scale it down or delete it, or give it a time-sliced or MIG pool.",
        source="; ".join(sources) + "; the pod is the exporter's own pod label (exported_pod)",
        metrics=tuple(metrics),
    )


def empty_node_rule(pool: ResolvedPool, model: PlatformModel) -> AlertRule | None:
    """Nodes of an autoscaling pool that run no GPU pod while the pool is above its minCount: the autoscaler should
    have removed them (after 10 minutes by default), so something keeps them. None for pools without autoscaling."""
    if not pool.config.autoscaling:
        return None
    minutes = model.config.monitoring.alerts.empty_node_minutes
    nodes = pool_nodes(pool)
    idle = f"count({nodes} unless on (node) {gpu_pods_running(pool.resource.name)}) > 0"
    expr = f"{idle} and on () count({nodes}) > {pool.config.min_count}"
    return AlertRule(
        alert="GpuNodeEmpty",
        expr=expr,
        for_minutes=minutes,
        severity="warning",
        summary=f"{{{{ $value }}}} node(s) of pool {pool.name} ran no GPU pod for {prometheus_duration(minutes)} "
        f"while the pool is above its minCount {pool.config.min_count}",
        runbook="The cluster autoscaler keeps a node it cannot drain: look for pods without a controller, pods with "
        "local storage or a PodDisruptionBudget on the node, or the scale-down-disabled annotation "
        "(`kubectl describe node`, the autoscaler's status ConfigMap in kube-system).",
        source=f"kube_node_labels, kube_pod_container_resource_requests, kube_pod_status_phase ({KSM_SOURCE}); "
        "minCount from the stack",
        metrics=("kube_node_labels", "kube_pod_container_resource_requests", "kube_pod_status_phase"),
        labels={"pool": pool.name},
    )


def quota_rule(model: PlatformModel) -> AlertRule | None:
    """Workload namespaces whose peak GPU requests over the window stay far below their GPU quota."""
    quotas = {w.name: w.quota_key for w in model.workloads if w.quota_key and w.config.gpu_quota > 0}
    if not quotas:
        return None
    alerts = model.config.monitoring.alerts
    window, percent = alerts.quota_window_hours, alerts.quota_used_below_percent
    selector = (
        f'resourcequota="{QUOTA_NAME}", namespace=~"{alternatives(sorted(quotas))}", '
        f'resource=~"{alternatives(sorted(set(quotas.values())))}"'
    )
    used = f'max by (namespace, resource) (max_over_time(kube_resourcequota{{{selector}, type="used"}}[{window}h]))'
    hard = f'max by (namespace, resource) (kube_resourcequota{{{selector}, type="hard"}} > 0)'
    return AlertRule(
        alert="GpuQuotaUnused",
        expr=f"{used} / {hard} * 100 < {percent}",
        for_minutes=60,
        severity="info",
        summary=f'{{{{ $labels.namespace }}}} requested at most {{{{ $value | printf "%.0f" }}}}% of its '
        f"{{{{ $labels.resource }}}} quota in {window}h",
        runbook="The GPU quota (and the pool capacity sized for it) sits unused: lower the namespace's gpuQuota in "
        "the stack file, or the pool's maxCount, so the reserved GPU quota can go where it is used.",
        source=f"kube_resourcequota ({KSM_SOURCE}, the ResourceQuota {QUOTA_NAME} of each workload namespace)",
        metrics=("kube_resourcequota",),
    )


# ---------------------------------------------------------------- the groups


def rule_groups(model: PlatformModel, critical_xid_codes: Sequence[int]) -> tuple[RuleGroup, ...]:
    """The stack's alert rules; empty without GPU pools. ``critical_xid_codes`` come from the Xid table
    (``aks_gpu.gpu.xid.critical_xid_codes()``), the same one the SMI health reader grades with; the NPD
    conditions and their grades from the table the audit and validate read (``gpu.health.GPU_CONDITIONS``)."""
    npd_conditions = {kind: condition.severity for kind, condition in GPU_CONDITIONS.items()}
    if not model.pools:
        return ()
    health: list[AlertRule] = []
    if model.pools_of("nvidia"):
        health += nvidia_health_rules(model, critical_xid_codes)
    if model.pools_of("amd"):
        health += amd_health_rules()
    health += [rule for pool in model.pools if (rule := gpu_missing_rule(pool)) is not None]
    health.append(device_plugin_rule(model))
    health += npd_condition_rules(model, npd_conditions)
    if (quarantined := quarantine_rule(model)) is not None:
        health.append(quarantined)
    health.append(scheduled_event_rule(model))
    health += blind_spot_rules(model)
    waste: list[AlertRule] = [idle_rule(model)]
    waste += [rule for pool in model.pools if (rule := empty_node_rule(pool, model)) is not None]
    if (quota := quota_rule(model)) is not None:
        waste.append(quota)
    return (
        *split_group(HEALTH_GROUP, HEALTH_INTERVAL_MINUTES, health),
        *split_group(WASTE_GROUP, WASTE_INTERVAL_MINUTES, waste),
    )


def split_group(name: str, interval_minutes: int, rules: Sequence[AlertRule]) -> list[RuleGroup]:
    """``rules`` as groups of at most MAX_RULES_PER_GROUP: the first keeps ``name`` (so a stack that fits in one group
    keeps its PrometheusRuleGroup and its URN), the next are ``<name>-2``, ``<name>-3``, ... Rules keep their order,
    the pool-independent ones first, so adding a pool moves only per-pool rules between groups."""
    chunks = [tuple(rules[i : i + MAX_RULES_PER_GROUP]) for i in range(0, len(rules), MAX_RULES_PER_GROUP)] or [()]
    return [
        RuleGroup(name if index == 0 else f"{name}-{index + 1}", interval_minutes, chunk) for index, chunk in enumerate(chunks)
    ]


# ---------------------------------------------------------------- recording rules for `aksgpu advise`


@dataclass(frozen=True)
class RecordingRule:
    record: str
    expr: str
    metric: str
    """The exporter metric the expression reads, exactly as published."""


@dataclass(frozen=True)
class RecordingGroup:
    name: str
    interval_minutes: int
    rules: tuple[RecordingRule, ...]


ADVICE_GROUP = platform_object_name("advice")
# Each evaluation records the last day's peak and 95th percentile of every GPU a pod holds, so the advice over a week
# reads one sample per series a day (`query_range` with step=1d) instead of 2,016 raw 5-minute samples: 288 times fewer.
# Hourly, so a Prometheus restart or a missed evaluation loses an hour's freshness, never a day. Prometheus's naming
# convention for recording rules is level:metric:operations
# (https://prometheus.io/docs/practices/rules/#naming-and-aggregation); the level `gpu_pod` says the exporter's
# per-GPU, per-pod labels are all kept (no aggregation).
ADVICE_INTERVAL_MINUTES = 60
ADVICE_WINDOW = "1d"
ADVICE_LEVEL = "gpu_pod"
AdviceStatistic = Literal["max", "p95"]
ADVICE_STATISTICS: tuple[AdviceStatistic, ...] = ("max", "p95")
# The series the advice reads per vendor (memory used, then activity), as the exporters publish them with our counters
# and fields lists (data/gpu_exporters.yaml): DCGM's framebuffer in MiB, graphics engine activity (0-1) and the coarser
# GPU_UTIL (percent) for GPUs without profiling metrics; the ROCm exporter's VRAM used and graphics activity (percent).
ADVICE_METRICS: dict[Vendor, tuple[str, ...]] = {
    "nvidia": ("DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"),
    "amd": ("gpu_used_vram", "gpu_gfx_activity"),
}


def advice_record_name(metric: str, statistic: AdviceStatistic) -> str:
    """The recorded series of one exporter metric's daily statistic: ``gpu_pod:DCGM_FI_DEV_FB_USED:max_over_time_1d``."""
    operation = "max_over_time" if statistic == "max" else "quantile95_over_time"
    return f"{ADVICE_LEVEL}:{metric}:{operation}_{ADVICE_WINDOW}"


def advice_recording_rule(metric: str, statistic: AdviceStatistic) -> RecordingRule:
    # Only series a pod holds (exported_pod, the workload's pod under honor_labels false, as the alert rules read it):
    # a GPU no pod holds is the audit's idle-node finding, not a workload to right-size.
    selector = f'{metric}{{exported_pod!=""}}[{ADVICE_WINDOW}]'
    expr = f"max_over_time({selector})" if statistic == "max" else f"quantile_over_time(0.95, {selector})"
    return RecordingRule(record=advice_record_name(metric, statistic), expr=expr, metric=metric)


def advice_recording_groups(model: PlatformModel) -> tuple[RecordingGroup, ...]:
    """The recording group that keeps the daily peaks `aksgpu advise` needs, for the vendors of the stack's pools;
    empty without GPU pools."""
    vendors = [vendor for vendor in ADVICE_METRICS if model.pools_of(vendor)]
    rules = tuple(
        advice_recording_rule(metric, statistic)
        for vendor in vendors
        for metric in ADVICE_METRICS[vendor]
        for statistic in ADVICE_STATISTICS
    )
    return (RecordingGroup(ADVICE_GROUP, ADVICE_INTERVAL_MINUTES, rules),) if rules else ()


# ---------------------------------------------------------------- renderers


def prometheus_rule(rule: AlertRule) -> dict[str, Any]:
    body: dict[str, Any] = {"alert": rule.alert, "expr": rule.expr}
    if rule.for_minutes:
        body["for"] = prometheus_duration(rule.for_minutes)
    body["labels"] = rule.all_labels
    body["annotations"] = rule.annotations
    return body


def prometheus_groups(groups: Sequence[RuleGroup], recording: Sequence[RecordingGroup] = ()) -> list[dict[str, Any]]:
    return [
        {"name": g.name, "interval": prometheus_duration(g.interval_minutes), "rules": [prometheus_rule(r) for r in g.rules]}
        for g in groups
    ] + [
        {
            "name": g.name,
            "interval": prometheus_duration(g.interval_minutes),
            "rules": [{"record": r.record, "expr": r.expr} for r in g.rules],
        }
        for g in recording
    ]


def rule_file(groups: Sequence[RuleGroup], recording: Sequence[RecordingGroup] = ()) -> dict[str, Any]:
    """A Prometheus rule file (https://prometheus.io/docs/prometheus/latest/configuration/alerting_rules/), with the
    recording groups after the alert groups
    (https://prometheus.io/docs/prometheus/latest/configuration/recording_rules/)."""
    return {"groups": prometheus_groups(groups, recording)}


PROMETHEUS_RULE_NAME = platform_object_name("alerts")


def prometheus_rule_manifest(
    groups: Sequence[RuleGroup], model: PlatformModel, recording: Sequence[RecordingGroup] = ()
) -> dict[str, Any]:
    """The Prometheus Operator's PrometheusRule (monitoring.coreos.com/v1): ``spec.groups`` is a rule file's groups."""
    operator = model.config.monitoring.prometheus_operator
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": PROMETHEUS_RULE_NAME,
            "namespace": operator.namespace,
            "labels": {**operator.labels},
        },
        "spec": {"groups": prometheus_groups(groups, recording)},
    }
