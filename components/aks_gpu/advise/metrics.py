"""The exporter series the advice reads, and the labels it needs on each: the DCGM exporter's and the ROCm device
metrics exporter's, as they emit them (both listed, with their sources, in components/aks_gpu/data/gpu_exporters.yaml;
the label names read in their sources: tests/fixtures/advise/SOURCES.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from aks_gpu.naming import Vendor

# The daily summaries the recording rules keep: a day's peak and its 95th percentile.
Summary = Literal["max", "p95"]


@dataclass(frozen=True)
class ExporterMetrics:
    vendor: Vendor
    memory_used: str  # MiB of GPU memory in use
    # The activity metrics, best first, each with the factor that makes it a share of time (0-1): the profiling
    # field (graphics engine active) where the exporter has it, else the coarser utilisation percentage.
    activity: tuple[tuple[str, float], ...]
    model_labels: tuple[str, ...]  # the product name the driver reports
    host_labels: tuple[str, ...]  # the node
    gpu_labels: tuple[str, ...]  # which GPU of the node, the first present
    mig_labels: tuple[str, ...] = ()  # the MIG instance profile, on a series of a MIG instance
    instance_labels: tuple[str, ...] = ()  # which MIG instance of the GPU, on a series of a MIG instance
    # Where an activity series is itself a summary (a recorded daily p95), the series of its peaks, for the idle test.
    activity_peaks: tuple[tuple[str, str], ...] = ()

    @property
    def metric_names(self) -> tuple[str, ...]:
        return (self.memory_used, *(name for name, _ in self.activity), *(peak for _, peak in self.activity_peaks))

    def summarised(self, name: Callable[[str, Summary], str]) -> ExporterMetrics:
        """The same exporter read through its recorded daily summaries (``name(metric, "max" | "p95")``): memory's
        daily peaks, activity's daily p95s, and activity's daily peaks for the idle test."""
        return replace(
            self,
            memory_used=name(self.memory_used, "max"),
            activity=tuple((name(metric, "p95"), factor) for metric, factor in self.activity),
            activity_peaks=tuple((name(metric, "p95"), name(metric, "max")) for metric, _ in self.activity),
        )


# dcgm-exporter: internal/pkg/rendermetrics/render_metrics.go (gpu, UUID, pci_bus_id, device, modelName,
# GPU_I_PROFILE / GPU_I_ID on a MIG instance, Hostname at tag 4.5.3-4.8.2 and `hostname` after it), the pod attributes
# in internal/pkg/transformation/const.go (pod, namespace, container). Units: FB_USED in MiB, GPU_UTIL in percent,
# the DCGM_FI_PROF_* fields a share of time (0-1).
DCGM = ExporterMetrics(
    vendor="nvidia",
    memory_used="DCGM_FI_DEV_FB_USED",
    activity=(("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1.0), ("DCGM_FI_PROF_SM_ACTIVE", 1.0), ("DCGM_FI_DEV_GPU_UTIL", 0.01)),
    model_labels=("modelName",),
    host_labels=("Hostname", "hostname", "node"),
    gpu_labels=("UUID", "uuid", "gpu"),
    mig_labels=("GPU_I_PROFILE",),
    instance_labels=("GPU_I_ID",),
)
# ROCm device-metrics-exporter v1.5.1: pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go (the mandatory labels gpu_id,
# card_model, serial_number, pod, namespace, container, hostname, registered in lower case); units in
# docs/configuration/metricslist.md: GPU_USED_VRAM in MB (read as MiB, as amd-smi reports it), GPU_GFX_ACTIVITY in
# percent.
AMD = ExporterMetrics(
    vendor="amd",
    memory_used="gpu_used_vram",
    activity=(("gpu_gfx_activity", 0.01),),
    model_labels=("card_model",),
    host_labels=("hostname", "node"),
    gpu_labels=("serial_number", "gpu_id"),
)
EXPORTERS = (DCGM, AMD)
# Activity DCGM does not report for a MIG instance (it reads 0 there): the utilisation percentage. NVIDIA's answer in
# https://github.com/NVIDIA/dcgm-exporter/issues/216 ("no plans to support DCGM_FI_DEV_GPU_UTIL for MIG instances";
# DCGM_FI_PROF_GR_ENGINE_ACTIVE instead).
NO_MIG_ACTIVITY = "DCGM_FI_DEV_GPU_UTIL"
# The workload's labels. Scraped with honor_labels false (as GpuMonitoring scrapes), Prometheus renames the exporter's
# own pod/namespace/container to exported_* because the target has labels of those names (the exporter's pod):
# https://prometheus.io/docs/prometheus/latest/configuration/configuration/#scrape_config (honor_labels).
WORKLOAD_LABELS = ("namespace", "pod", "container")
EXPORTED_PREFIX = "exported_"
# kube-state-metrics' owner of each pod (optional input: without it the owner is read off the pod's name).
# https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/pod-metrics.md
POD_OWNER_METRIC = "kube_pod_owner"
# kube-state-metrics' labels of each node (optional input): its VM size and region, for the prices, where the stack is
# not named. https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/cluster/node-metrics.md
NODE_LABELS_METRIC = "kube_node_labels"
# The series read for their labels only: their samples say nothing the advice uses.
LABELS_ONLY = (POD_OWNER_METRIC, NODE_LABELS_METRIC)
# The exporters' own DaemonSets, whose pod a scrape puts on every series as the target's `pod` (and which is never the
# workload): the GPU Operator's (app nvidia-dcgm-exporter, assets/state-dcgm-exporter/0800_daemonset.yaml in
# NVIDIA/gpu-operator v26.7.0), and GpuMonitoring's own (components/aks_gpu/monitoring/exporters.py: dcgm-exporter,
# amd-metrics-exporter). kube_pod_owner's DaemonSet kind says the same of any other exporter.
EXPORTER_DAEMONSETS = frozenset({"nvidia-dcgm-exporter", "dcgm-exporter", "amd-metrics-exporter"})
ALL_METRICS = tuple(name for exporter in EXPORTERS for name in exporter.metric_names)
# Kueue's ClusterQueue gauges, each labelled cohort, cluster_queue, flavor and resource (sigs.k8s.io/kueue@v0.17.0
# pkg/metrics/metrics.go: ClusterQueueResourceUsage, ClusterQueueResourceNominalQuota; Subsystem "kueue"): read with
# --stack on a stack with aks-gpu:queueing (advise/queues.py). Their borrowing and lending limits are the stack's own.
KUEUE_USAGE_METRIC = "kueue_cluster_queue_resource_usage"
KUEUE_NOMINAL_METRIC = "kueue_cluster_queue_nominal_quota"
KUEUE_METRICS = (KUEUE_NOMINAL_METRIC, KUEUE_USAGE_METRIC)
