"""The alert rules under Prometheus's own promtool: every stack's rule file passes `promtool check rules`, and each
alert is unit-tested with `promtool test rules` on input series shaped as the exporters and kube-state-metrics publish
them: it fires when it should (with the labels and the summary a person reads) and stays quiet on a healthy series.

The expected labels and summaries below are written by hand, not derived from the rule objects: promtool's template
expansion is what is checked. Only the static annotations (description, runbook_url) are taken from the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.monitoring.rules import AlertRule, RuleGroup, rule_file, rule_groups
from tests.conftest import STACK_NAMES, stack_model
from tests.monitoring import promtool

# Node names as AKS gives them (aks-<pool>-<id>-vmss<instance>); what matters is that they match across series.
TRAIN_NODE = "aks-train-10000000-vmss000000"
TRAIN_NODE_2 = "aks-train-10000000-vmss000001"
INFER_NODE = "aks-infer-20000000-vmss000000"
INFER_NODE_2 = "aks-infer-20000000-vmss000001"
AMD_NODE = "aks-mi300x-30000000-vmss000000"
DEV_NODE = "aks-dev-40000000-vmss000000"
KSM = {"job": "kube-state-metrics", "instance": "10.244.0.9:8080"}

# One H100 as the DCGM exporter publishes it, scraped by GpuMonitoring's PodMonitor (target labels namespace, pod,
# instance, job; node from the pod's node).
H100 = {
    "gpu": "0",
    "UUID": "GPU-4ab1c2d3-0000-0000-0000-000000000000",
    "device": "nvidia0",
    "modelName": "NVIDIA H100 80GB HBM3",
    "DCGM_FI_DRIVER_VERSION": "550.54.15",
    "node": TRAIN_NODE,
    "namespace": "gpu-resources",
    "pod": "dcgm-exporter-7kx2p",
    "instance": "10.244.1.5:9400",
    "job": "gpu-resources/dcgm-exporter",
}
TRAINER = {"exported_pod": "trainer-0", "exported_namespace": "gpu-training", "exported_container": "trainer"}
# A MIG slice of the inference pool's A100: DCGM labels the instance with GPU_I_ID / GPU_I_PROFILE.
A100_SLICE = {
    **H100,
    "UUID": "GPU-9f00aa11-0000-0000-0000-000000000000",
    "modelName": "NVIDIA A100 80GB PCIe",
    "node": INFER_NODE,
    "GPU_I_ID": "7",
    "GPU_I_PROFILE": "1g.10gb",
}
MI300X = {
    "gpu_id": "0",
    "serial_number": "692251001124",
    "card_model": "MI300X",
    "hostname": AMD_NODE,
    "node": AMD_NODE,
    "namespace": "gpu-resources",
    "pod": "amd-metrics-exporter-q8wz1",
    "instance": "10.244.2.7:5000",
    "job": "gpu-resources/amd-metrics-exporter",
}


def series(metric: str, labels: Mapping[str, str], values: str) -> dict[str, str]:
    inner = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


def pool_node(node: str, pool: str, minutes: int = 120) -> dict[str, str]:
    return series("kube_node_labels", {**KSM, "node": node, "label_aks_gpu_pool": pool}, f"1x{minutes}")


def gpu_taint(node: str, vendor: str = "nvidia", minutes: int = 120) -> dict[str, str]:
    labels = {**KSM, "node": node, "key": f"{vendor}.com/gpu", "value": "present", "effect": "NoSchedule"}
    return series("kube_node_spec_taint", labels, f"1x{minutes}")


def npd(node: str, condition: str, status: str, minutes: int = 30) -> dict[str, str]:
    """A node condition as kube-state-metrics exports it: one series per status, 1 on the current one. ``status``
    is the current one ("true", "false" or "unknown")."""
    return series("kube_node_status_condition", {**KSM, "node": node, "condition": condition, "status": status},
                  f"1x{minutes}")


def allocatable(node: str, resource: str, count: int, minutes: int = 120) -> dict[str, str]:
    labels = {**KSM, "node": node, "resource": resource, "unit": "integer"}
    return series("kube_node_status_allocatable", labels, f"{count}x{minutes}")


def gpu_pod(node: str, pod: str, phase: str = "Running", minutes: int = 120) -> list[dict[str, str]]:
    """A pod requesting one GPU on ``node`` and its phase series, as kube-state-metrics publishes them."""
    owner = {**KSM, "namespace": "gpu-training", "pod": pod, "uid": f"uid-{pod}"}
    requests = {**owner, "container": "trainer", "node": node, "resource": "nvidia_com_gpu", "unit": "integer"}
    phases = [
        series("kube_pod_status_phase", {**owner, "phase": name}, f"{1 if name == phase else 0}x{minutes}")
        for name in ("Pending", "Running", "Succeeded", "Failed")
    ]
    return [series("kube_pod_container_resource_requests", requests, f"1x{minutes}"), *phases]


@dataclass(frozen=True)
class Case:
    """One promtool unit test: input series, and the alerts ``alert`` has at ``eval_minutes`` (none: quiet)."""

    stack: str
    alert: str
    name: str
    input_series: list[dict[str, str]]
    eval_minutes: int
    expected: list[tuple[dict[str, str], str]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.stack}-{self.alert}-{self.name}"


def fires(*alerts: tuple[dict[str, str], str]) -> list[tuple[dict[str, str], str]]:
    return list(alerts)


CASES: list[Case] = [
    # ---------------------------------------------------------------- Xid
    Case("prod", "GpuXidCritical", "xid-79-fallen-off-the-bus",
         [series("DCGM_FI_DEV_XID_ERRORS", H100, "0x5 79x20")], 10,
         fires(({**H100, "severity": "critical"},
                f"GPU 0 on {TRAIN_NODE} last reported Xid 79, which takes a GPU out of service"))),
    Case("prod", "GpuXidCritical", "xid-13-is-not-critical",
         [series("DCGM_FI_DEV_XID_ERRORS", H100, "0x5 13x20")], 10),
    Case("prod", "GpuXidCritical", "no-xid", [series("DCGM_FI_DEV_XID_ERRORS", H100, "0x30")], 10),
    Case("prod", "GpuXidError", "xid-13-in-the-window",
         [series("DCGM_EXP_XID_ERRORS_COUNT", {**H100, "xid": "13", "window_size_in_ms": "300000"}, "1x10")], 5,
         fires(({**H100, "xid": "13", "window_size_in_ms": "300000", "severity": "warning"},
                f"GPU 0 on {TRAIN_NODE} reported Xid 13 in the last 5 minutes"))),
    Case("prod", "GpuXidError", "critical-xid-and-empty-window",
         [series("DCGM_EXP_XID_ERRORS_COUNT", {**H100, "xid": "79", "window_size_in_ms": "300000"}, "1x10"),
          series("DCGM_EXP_XID_ERRORS_COUNT", {**H100, "gpu": "1", "window_size_in_ms": "300000"}, "0x10")], 5),
    # ---------------------------------------------------------------- memory
    Case("prod", "GpuEccUncorrectable", "two-dbe",
         [series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", H100, "0x5 2x10")], 10,
         fires(({**H100, "severity": "critical"},
                f"GPU 0 on {TRAIN_NODE} has 2 uncorrectable ECC errors since its driver loaded"))),
    Case("prod", "GpuEccUncorrectable", "none", [series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", H100, "0x20")], 10),
    Case("prod", "GpuRowRemapFailure", "failed",
         [series("DCGM_FI_DEV_ROW_REMAP_FAILURE", H100, "0x5 1x10")], 10,
         fires(({**H100, "severity": "critical"}, f"GPU 0 on {TRAIN_NODE} failed to remap a memory row"))),
    Case("prod", "GpuRowRemapFailure", "healthy", [series("DCGM_FI_DEV_ROW_REMAP_FAILURE", H100, "0x20")], 10),
    Case("prod", "GpuRowRemapPending", "pending",
         [series("DCGM_FI_DEV_ROW_REMAP_PENDING", H100, "0x5 1x10")], 10,
         fires(({**H100, "severity": "critical"}, f"GPU 0 on {TRAIN_NODE} has a memory row remap pending a GPU reset"))),
    Case("prod", "GpuRowRemapPending", "healthy", [series("DCGM_FI_DEV_ROW_REMAP_PENDING", H100, "0x20")], 10),
    Case("dev", "GpuRetiredPagesPending", "t4-pending",
         [series("DCGM_FI_DEV_RETIRED_PENDING", {**H100, "modelName": "Tesla T4", "node": DEV_NODE}, "0x5 1x10")], 10,
         fires(({**H100, "modelName": "Tesla T4", "node": DEV_NODE, "severity": "critical"},
                f"GPU 0 on {DEV_NODE} has memory pages pending retirement"))),
    Case("dev", "GpuRetiredPagesPending", "healthy", [series("DCGM_FI_DEV_RETIRED_PENDING", H100, "0x20")], 10),
    # ---------------------------------------------------------------- NVLink
    Case("prod", "GpuNvlinkErrors", "crc-errors-keep-rising",
         [series("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", H100, "0+2x40")], 32,
         fires(({**H100, "severity": "warning"}, f"NVLink CRC or replay errors keep rising on GPU 0 of {TRAIN_NODE}"))),
    Case("prod", "GpuNvlinkErrors", "a-burst-that-stopped",
         [series("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", H100, "0x5 9x35")], 32),
    Case("prod", "GpuNvlinkErrors", "flat", [series("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", H100, "7x40")], 32),
    Case("prod", "GpuNvlinkRecovery", "a-link-retrained",
         [series("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", H100, "0x10 1x30")], 20,
         fires(({**H100, "severity": "critical"},
                f"An NVLink of GPU 0 on {TRAIN_NODE} had to recover in the last 15 minutes"))),
    Case("prod", "GpuNvlinkRecovery", "flat", [series("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", H100, "3x30")], 20),
    # ---------------------------------------------------------------- clocks
    Case("prod", "GpuClocksThrottled", "hw-thermal-sustained",
         [series("DCGM_EXP_CLOCK_EVENTS_COUNT", {**H100, "clock_event": "hw_thermal", "window_size_in_ms": "300000"},
                 "4x30")], 20,
         fires(({**H100, "clock_event": "hw_thermal", "window_size_in_ms": "300000", "severity": "warning"},
                f"GPU 0 on {TRAIN_NODE} has been slowed down (hw_thermal) for 15m"))),
    Case("prod", "GpuClocksThrottled", "power-cap-and-a-short-slowdown",
         [series("DCGM_EXP_CLOCK_EVENTS_COUNT", {**H100, "clock_event": "power_cap", "window_size_in_ms": "300000"}, "4x30"),
          series("DCGM_EXP_CLOCK_EVENTS_COUNT", {**H100, "gpu": "1", "clock_event": "hw_slowdown", "window_size_in_ms": "300000"},
                 "4x9 0x20")], 20),
    # ---------------------------------------------------------------- GPUs missing (counts from the model)
    Case("prod", "GpuMissing", "a-gpu-gone-and-a-node-with-none",
         [pool_node(TRAIN_NODE, "train"), allocatable(TRAIN_NODE, "nvidia_com_gpu", 7),
          pool_node(TRAIN_NODE_2, "train")], 15,
         fires(({"node": TRAIN_NODE, "pool": "train", "severity": "critical"},
                f"{TRAIN_NODE} of pool train advertises 7 nvidia.com/gpu, not 8"),
               ({"node": TRAIN_NODE_2, "pool": "train", "severity": "critical"},
                f"{TRAIN_NODE_2} of pool train advertises 0 nvidia.com/gpu, not 8"))),
    Case("prod", "GpuMissing", "a-mig-slice-gone",
         [pool_node(INFER_NODE, "infer"), allocatable(INFER_NODE, "nvidia_com_gpu", 6)], 15,
         fires(({"node": INFER_NODE, "pool": "infer", "severity": "critical"},
                f"{INFER_NODE} of pool infer advertises 6 nvidia.com/gpu, not 7"))),
    Case("prod", "GpuMissing", "all-there-mig-counted-in-slices",
         [pool_node(TRAIN_NODE, "train"), allocatable(TRAIN_NODE, "nvidia_com_gpu", 8),
          pool_node(INFER_NODE, "infer"), allocatable(INFER_NODE, "nvidia_com_gpu", 7)], 15),
    Case("prod", "GpuMissing", "a-new-node-registering",
         [pool_node(TRAIN_NODE, "train"), series("kube_node_status_allocatable",
          {**KSM, "node": TRAIN_NODE, "resource": "nvidia_com_gpu", "unit": "integer"}, "_x3 8x20")], 5),
    Case("dev", "GpuMissing", "time-slicing-not-applied",
         [pool_node(DEV_NODE, "dev"), allocatable(DEV_NODE, "nvidia_com_gpu", 1)], 15,
         fires(({"node": DEV_NODE, "pool": "dev", "severity": "critical"},
                f"{DEV_NODE} of pool dev advertises 1 nvidia.com/gpu, not 4"))),
    Case("amd", "GpuMissing", "an-mi300x-gone",
         [pool_node(AMD_NODE, "mi300x"), allocatable(AMD_NODE, "amd_com_gpu", 7)], 15,
         fires(({"node": AMD_NODE, "pool": "mi300x", "severity": "critical"},
                f"{AMD_NODE} of pool mi300x advertises 7 amd.com/gpu, not 8"))),
    # ---------------------------------------------------------------- device plugin
    Case("prod", "GpuDevicePluginNotReady", "one-pod-not-ready",
         [series("kube_daemonset_status_number_ready",
                 {**KSM, "namespace": "gpu-resources", "daemonset": "nvidia-device-plugin-daemonset"}, "1x30"),
          series("kube_daemonset_status_desired_number_scheduled",
                 {**KSM, "namespace": "gpu-resources", "daemonset": "nvidia-device-plugin-daemonset"}, "2x30")], 20,
         fires(({**KSM, "namespace": "gpu-resources", "daemonset": "nvidia-device-plugin-daemonset",
                 "severity": "critical"},
                "Device plugin nvidia-device-plugin-daemonset: 1 pods ready, fewer than it should run"))),
    Case("prod", "GpuDevicePluginNotReady", "all-ready-and-another-daemonset",
         [series("kube_daemonset_status_number_ready",
                 {**KSM, "namespace": "gpu-resources", "daemonset": "nvidia-device-plugin-daemonset"}, "2x30"),
          series("kube_daemonset_status_desired_number_scheduled",
                 {**KSM, "namespace": "gpu-resources", "daemonset": "nvidia-device-plugin-daemonset"}, "2x30"),
          series("kube_daemonset_status_number_ready",
                 {**KSM, "namespace": "gpu-resources", "daemonset": "dcgm-exporter"}, "0x30"),
          series("kube_daemonset_status_desired_number_scheduled",
                 {**KSM, "namespace": "gpu-resources", "daemonset": "dcgm-exporter"}, "1x30")], 20),
    Case("amd", "GpuDevicePluginNotReady", "rocm-plugin-down",
         [series("kube_daemonset_status_number_ready",
                 {**KSM, "namespace": "gpu-resources", "daemonset": "amdgpu-device-plugin-daemonset"}, "0x30"),
          series("kube_daemonset_status_desired_number_scheduled",
                 {**KSM, "namespace": "gpu-resources", "daemonset": "amdgpu-device-plugin-daemonset"}, "1x30")], 20,
         fires(({**KSM, "namespace": "gpu-resources", "daemonset": "amdgpu-device-plugin-daemonset",
                 "severity": "critical"},
                "Device plugin amdgpu-device-plugin-daemonset: 0 pods ready, fewer than it should run"))),
    # ---------------------------------------------------------------- blind spots
    Case("prod", "GpuMetricsMissing", "gpu-node-without-exporter",
         [gpu_taint(TRAIN_NODE), gpu_taint(TRAIN_NODE_2), series("DCGM_FI_DEV_GPU_TEMP", H100, "40x30")], 20,
         fires(({"node": TRAIN_NODE_2, "severity": "warning"},
                f"GPU node {TRAIN_NODE_2} sends no GPU metrics: its health alerts cannot fire"))),
    Case("amd", "GpuMetricsMissing", "mi300x-node-without-exporter", [gpu_taint(AMD_NODE, "amd")], 20,
         fires(({"node": AMD_NODE, "severity": "warning"},
                f"GPU node {AMD_NODE} sends no GPU metrics: its health alerts cannot fire"))),
    Case("amd", "GpuMetricsMissing", "exporter-there",
         [gpu_taint(AMD_NODE, "amd"), series("gpu_gfx_activity", MI300X, "0x30")], 20),
    Case("prod", "GpuPoolLabelNotExported", "kube-state-metrics-without-the-allowlist", [gpu_taint(TRAIN_NODE)], 35,
         fires(({"severity": "warning"},
                "kube-state-metrics exports no aks-gpu/pool node label: the per-pool GPU alerts see no pool"))),
    Case("prod", "GpuPoolLabelNotExported", "label-exported", [gpu_taint(TRAIN_NODE), pool_node(TRAIN_NODE, "train")], 35),
    # ---------------------------------------------------------------- waste: idle allocated GPUs
    Case("prod", "GpuAllocatedIdle", "training-pod-idle-for-an-hour",
         [series("DCGM_FI_DEV_GPU_UTIL", {**H100, **TRAINER}, "0x80")], 65,
         fires(({**H100, **TRAINER, "severity": "warning"},
                f"A GPU on {TRAIN_NODE} allocated to gpu-training/trainer-0 stayed below 5% utilisation for 1h"))),
    Case("prod", "GpuAllocatedIdle", "mig-slice-idle",
         [series("DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                 {**A100_SLICE, "exported_pod": "llm-0", "exported_namespace": "gpu-inference", "exported_container": "vllm"},
                 "0.01x80")], 65,
         fires(({**A100_SLICE, "exported_pod": "llm-0", "exported_namespace": "gpu-inference", "exported_container": "vllm",
                 "severity": "warning"},
                f"A GPU on {INFER_NODE} allocated to gpu-inference/llm-0 stayed below 5% utilisation for 1h"))),
    Case("prod", "GpuAllocatedIdle", "unallocated-busy-and-a-break",
         [series("DCGM_FI_DEV_GPU_UTIL", H100, "0x80"),
          series("DCGM_FI_DEV_GPU_UTIL", {**H100, "gpu": "1", **TRAINER}, "85x80"),
          series("DCGM_FI_DEV_GPU_UTIL", {**H100, "gpu": "2", **TRAINER}, "0x30 60x1 0x49"),
          series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {**A100_SLICE, "exported_pod": "llm-0"}, "0.6x80")], 65),
    Case("amd", "GpuAllocatedIdle", "mi300x-idle",
         [series("gpu_gfx_activity", {**MI300X, **TRAINER}, "1x80")], 65,
         fires(({**MI300X, **TRAINER, "severity": "warning"},
                f"A GPU on {AMD_NODE} allocated to gpu-training/trainer-0 stayed below 5% utilisation for 1h"))),
    # ---------------------------------------------------------------- waste: empty nodes above minCount
    Case("prod", "GpuNodeEmpty", "train-node-without-gpu-pods",
         [pool_node(TRAIN_NODE, "train")], 35,
         fires(({"pool": "train", "severity": "warning"},
                "1 node(s) of pool train ran no GPU pod for 30m while the pool is above its minCount 0"))),
    Case("prod", "GpuNodeEmpty", "finished-pods-hold-no-gpu",
         [pool_node(TRAIN_NODE, "train"), *gpu_pod(TRAIN_NODE, "trainer-0", phase="Succeeded")], 35,
         fires(({"pool": "train", "severity": "warning"},
                "1 node(s) of pool train ran no GPU pod for 30m while the pool is above its minCount 0"))),
    Case("prod", "GpuNodeEmpty", "train-node-busy", [pool_node(TRAIN_NODE, "train"), *gpu_pod(TRAIN_NODE, "trainer-0")], 35),
    Case("prod", "GpuNodeEmpty", "infer-idle-at-its-minimum", [pool_node(INFER_NODE, "infer")], 35),
    Case("prod", "GpuNodeEmpty", "infer-idle-above-its-minimum",
         [pool_node(INFER_NODE, "infer"), pool_node(INFER_NODE_2, "infer"), *gpu_pod(INFER_NODE_2, "llm-0")], 35,
         fires(({"pool": "infer", "severity": "warning"},
                "1 node(s) of pool infer ran no GPU pod for 30m while the pool is above its minCount 1"))),
    # ---------------------------------------------------------------- waste: quota far above use
    Case("prod", "GpuQuotaUnused", "training-uses-two-of-32",
         [series("kube_resourcequota", {**KSM, "namespace": "gpu-training", "resourcequota": "gpu-quota",
                                        "resource": "requests.nvidia.com/gpu", "type": "used"}, "2x120"),
          series("kube_resourcequota", {**KSM, "namespace": "gpu-training", "resourcequota": "gpu-quota",
                                        "resource": "requests.nvidia.com/gpu", "type": "hard"}, "32x120")], 90,
         fires(({"namespace": "gpu-training", "resource": "requests.nvidia.com/gpu", "severity": "info"},
                "gpu-training requested at most 6% of its requests.nvidia.com/gpu quota in 24h"))),
    Case("prod", "GpuQuotaUnused", "a-peak-in-the-window-and-a-namespace-of-others",
         [series("kube_resourcequota", {**KSM, "namespace": "gpu-training", "resourcequota": "gpu-quota",
                                        "resource": "requests.nvidia.com/gpu", "type": "used"}, "30x10 2x110"),
          series("kube_resourcequota", {**KSM, "namespace": "gpu-training", "resourcequota": "gpu-quota",
                                        "resource": "requests.nvidia.com/gpu", "type": "hard"}, "32x120"),
          series("kube_resourcequota", {**KSM, "namespace": "someone-else", "resourcequota": "gpu-quota",
                                        "resource": "requests.nvidia.com/gpu", "type": "used"}, "0x120"),
          series("kube_resourcequota", {**KSM, "namespace": "someone-else", "resourcequota": "gpu-quota",
                                        "resource": "requests.nvidia.com/gpu", "type": "hard"}, "8x120")], 90),
    # ---------------------------------------------------------------- AKS Node Problem Detector conditions
    Case("prod", "GpuNodeConditionCritical", "xid-errors-true",
         [npd(TRAIN_NODE, "XIDErrors", "true"), npd(TRAIN_NODE, "GPUMissing", "false")], 5,
         fires(({**KSM, "node": TRAIN_NODE, "condition": "XIDErrors", "status": "true", "severity": "critical"},
                f"AKS Node Problem Detector reports XIDErrors on {TRAIN_NODE}"))),
    Case("prod", "GpuNodeConditionCritical", "dcgm-services-down",
         [npd(INFER_NODE, "UnhealthyNvidiaDCGMServices", "true")], 5,
         fires(({**KSM, "node": INFER_NODE, "condition": "UnhealthyNvidiaDCGMServices", "status": "true",
                 "severity": "critical"},
                f"AKS Node Problem Detector reports UnhealthyNvidiaDCGMServices on {INFER_NODE}"))),
    Case("prod", "GpuNodeConditionCritical", "all-false-and-a-non-gpu-condition-true",
         [*(npd(TRAIN_NODE, kind, "false") for kind in ("GPUMissing", "XIDErrors", "NVLinkStatusInactive",
                                                        "IBLinkFlapping", "UnhealthyNvidiaDevicePlugin")),
          npd(TRAIN_NODE, "XIDErrors", "unknown"), npd(TRAIN_NODE, "KernelDeadlock", "true")], 5),
    Case("prod", "GpuNodeConditionWarning", "throttled-for-long",
         [npd(TRAIN_NODE, "GPUClockThrottling", "true", 30)], 20,
         fires(({**KSM, "node": TRAIN_NODE, "condition": "GPUClockThrottling", "status": "true", "severity": "warning"},
                f"AKS Node Problem Detector reports GPUClockThrottling on {TRAIN_NODE}"))),
    Case("prod", "GpuNodeConditionWarning", "throttled-briefly",
         [series("kube_node_status_condition",
                 {**KSM, "node": TRAIN_NODE, "condition": "GPUClockThrottling", "status": "true"}, "1x5 0x20")], 20),
    # ---------------------------------------------------------------- quarantine (remediation.mode on)
    Case("prod", "GpuNodeQuarantined", "tainted-by-the-engine",
         [series("kube_node_spec_taint", {**KSM, "node": TRAIN_NODE, "key": "aks-gpu/gpu-quarantine", "value": "fault",
                                          "effect": "NoSchedule"}, "1x10"), gpu_taint(TRAIN_NODE)], 5,
         fires(({"node": TRAIN_NODE, "severity": "warning"},
                f"GPU node {TRAIN_NODE} is quarantined: no new GPU work lands there until it is repaired"))),
    Case("prod", "GpuNodeQuarantined", "only-the-gpu-taint", [gpu_taint(TRAIN_NODE)], 5),
    # ---------------------------------------------------------------- planned disruption (Azure Scheduled Events)
    Case("prod", "GpuNodeVmEventScheduled", "redeploy-scheduled-on-a-gpu-node",
         [npd(TRAIN_NODE, "VMEventScheduled", "true", 10), gpu_taint(TRAIN_NODE)], 5,
         fires(({"node": TRAIN_NODE, "severity": "warning"},
                f"Azure scheduled a maintenance event on GPU node {TRAIN_NODE}: its jobs stop when it runs "
                "(GPU VMs are not live-migrated)"))),
    Case("prod", "GpuNodeVmEventScheduled", "no-event-or-not-a-gpu-node",
         [npd(TRAIN_NODE, "VMEventScheduled", "false", 10), gpu_taint(TRAIN_NODE),
          npd("aks-system-50000000-vmss000000", "VMEventScheduled", "true", 10)], 5),
    # ---------------------------------------------------------------- AMD health
    Case("amd", "AmdGpuEccUncorrectable", "three-uncorrectable",
         [series("gpu_ecc_uncorrect_total", MI300X, "0x5 3x10")], 10,
         fires(({**MI300X, "severity": "critical"}, f"AMD GPU 0 on {AMD_NODE} has 3 uncorrectable ECC errors"))),
    Case("amd", "AmdGpuEccUncorrectable", "none", [series("gpu_ecc_uncorrect_total", MI300X, "0x20")], 10),
]  # fmt: skip


def _groups(stack: str) -> tuple[RuleGroup, ...]:
    return rule_groups(stack_model(stack), critical_xid_codes())


def _rule(groups: tuple[RuleGroup, ...], alert: str, labels: Mapping[str, str]) -> AlertRule:
    candidates = [r for g in groups for r in g.rules if r.alert == alert]
    for rule in candidates:
        if all(labels.get(key) == value for key, value in rule.labels.items()):
            return rule
    raise AssertionError(f"no rule {alert} with labels {dict(labels)}")


def _test_file(case: Case, groups: tuple[RuleGroup, ...]) -> dict[str, Any]:
    expected = []
    for labels, summary in case.expected:
        rule = _rule(groups, case.alert, labels)
        expected.append({"exp_labels": labels, "exp_annotations": {**rule.annotations, "summary": summary}})
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": case.input_series,
                "alert_rule_test": [{"eval_time": f"{case.eval_minutes}m", "alertname": case.alert, "exp_alerts": expected}],
            }
        ],
    }


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_alert_fires_or_stays_quiet(case: Case, tmp_path: Path) -> None:
    groups = _groups(case.stack)
    promtool.write_yaml(tmp_path / "rules.yaml", rule_file(groups))
    test_file = promtool.write_yaml(tmp_path / "test.yaml", _test_file(case, groups))
    done = promtool.test_rules(test_file)
    assert done.returncode == 0, f"promtool test rules:\n{done.stdout}\n{done.stderr}"


def test_every_alert_of_every_stack_has_a_firing_and_a_quiet_case() -> None:
    alerts = {r.alert for stack in STACK_NAMES for g in _groups(stack) for r in g.rules}
    firing = {c.alert for c in CASES if c.expected}
    quiet = {c.alert for c in CASES if not c.expected}
    assert sorted(alerts - firing) == [], "alerts without a case where they fire"
    assert sorted(alerts - quiet) == [], "alerts without a case where they stay quiet"
    assert {c.alert for c in CASES} <= alerts


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stacks_rule_file_passes_promtool_check(stack: str, tmp_path: Path) -> None:
    groups = _groups(stack)
    assert groups, f"stack {stack} has GPU pools but no alert rules"
    done = promtool.check_rules(promtool.write_yaml(tmp_path / "rules.yaml", rule_file(groups)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {sum(len(g.rules) for g in groups)} rules found" in done.stdout


def test_promtool_refuses_what_it_should(tmp_path: Path) -> None:
    """The checks have teeth: a broken expression fails `check rules`, a wrong expectation fails `test rules`."""
    groups = _groups("prod")
    broken = rule_file(groups)
    broken["groups"][0]["rules"][0]["expr"] = "DCGM_FI_DEV_XID_ERRORS == == 79"
    done = promtool.check_rules(promtool.write_yaml(tmp_path / "broken.yaml", broken))
    assert done.returncode != 0 and "parse error" in (done.stdout + done.stderr)

    quiet = next(c for c in CASES if c.alert == "GpuXidCritical" and not c.expected)
    wrong = Case(quiet.stack, quiet.alert, "wrong", quiet.input_series, quiet.eval_minutes,
                 fires(({**H100, "severity": "critical"}, "anything")))  # fmt: skip
    promtool.write_yaml(tmp_path / "rules.yaml", rule_file(groups))
    done = promtool.test_rules(promtool.write_yaml(tmp_path / "test.yaml", _test_file(wrong, groups)))
    assert done.returncode != 0
