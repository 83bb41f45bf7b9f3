"""GPU metrics exporters and their scrape configuration as plain manifests. Pure: model in, dicts out.

- NVIDIA, ``devicePlugin.mode: daemonset``: one DCGM exporter DaemonSet, ``dcgm-exporter``, on every NVIDIA pool, with
  our counters file (``data/gpu_exporters.yaml``) in the ConfigMap ``dcgm-exporter-metrics``. ``gpu-operator``: the
  operator's own exporter, given the same counters file through its release values (``dcgm_operator_values``).
- AMD, ``amdMode: daemonset``: one ROCm device metrics exporter DaemonSet, ``amd-metrics-exporter``, on every AMD
  pool; ``gpu-operator``: the operator's (its DeviceConfig already enables it, kube/gpu_operator.py).
- Scraping: one PodMonitor per exporter, ``azmonitoring.coreos.com/v1`` for Azure Monitor managed Prometheus (the
  add-on's own copy of the Prometheus Operator CRDs, https://learn.microsoft.com/azure/azure-monitor/containers/
  prometheus-metrics-scrape-crd) or ``monitoring.coreos.com/v1`` for a Prometheus Operator. Every scrape keeps the
  exporter's own ``pod``/``namespace``/``container`` labels (the workload the GPU is allocated to) as
  ``exported_pod``/``exported_namespace``/``exported_container`` (``honorLabels: false``, Prometheus's rule for
  clashing target labels) and adds ``node`` from the pod's node: the contract the alert rules rely on.

Placement is the device plugin's: ``node_daemonset`` on the vendor's pools, tolerating exactly their taints.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from aks_gpu.config.models import MonitoringConfig
from aks_gpu.kube.node_daemonset import (
    empty_dir_volume,
    host_path_volume,
    node_access_rbac,
    node_daemonset,
    privileged_security_context,
    resources,
    root_security_context,
)
from aks_gpu.monitoring.exporter_pins import ExporterPins, dcgm_counters_csv, resolve_exporter_pins
from aks_gpu.naming import GPU_NAMESPACE, NAME_LABEL, PLATFORM_LABEL_PREFIX, Vendor, platform_object_name
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import app_labels, vendor_mode

DCGM_EXPORTER_NAME = "dcgm-exporter"
DCGM_COUNTERS_CONFIG_MAP = "dcgm-exporter-metrics"
# The key the GPU Operator's chart expects its dcgmExporter.config ConfigMap to hold (values.yaml, dcgmExporter.config);
# the standalone DaemonSet uses the same one.
DCGM_COUNTERS_KEY = "dcgm-metrics.csv"
DCGM_COUNTERS_DIR = "/etc/dcgm-exporter/aks-gpu"
# The operator's exporter pods (assets/state-dcgm-exporter/0800_daemonset.yaml in NVIDIA/gpu-operator v26.7.0).
OPERATOR_DCGM_LABELS = {"app": "nvidia-dcgm-exporter"}
OPERATOR_DCGM_CONFIG_MAP = platform_object_name("dcgm-exporter-metrics")
# The DCGM exporter reads GPU-to-pod assignments from the kubelet's pod-resources socket (its k8s mode).
# https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/#monitoring-device-plugin-resources
POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources"
COUNTERS_CHECKSUM_ANNOTATION = f"{PLATFORM_LABEL_PREFIX}exporter-config-sha256"

AMD_EXPORTER_NAME = "amd-metrics-exporter"
AMD_EXPORTER_CONFIG_MAP = "amd-metrics-exporter-config"
AMD_EXPORTER_CLUSTER_ROLE = platform_object_name("amd-metrics-exporter")
# Where the exporter reads config.json and writes its log, health socket and Slurm job files
# (pkg/exporter/globals/constants.go, cmd/exporter/main.go --log-file-path in ROCm/device-metrics-exporter v1.5.1).
AMD_CONFIG_DIR = "/etc/metrics"
AMD_WRITABLE_DIRS = {"log": "/var/log", "health": "/var/lib/amd-metrics-exporter", "slurm": "/var/run/exporter", "tmp": "/tmp"}
# The AMD GPU Operator's exporter for its default DeviceConfig ("default", helm-charts-k8s/templates/
# default-deviceconfig.yaml): pods labelled app.kubernetes.io/name=metrics-exporter and daemonset-name=<config>,
# port 5000 set through METRICS_EXPORTER_PORT with no container port declared (internal/metricsexporter/
# metricsexporter.go in ROCm/gpu-operator v1.5.1), so the PodMonitor names the port number.
OPERATOR_AMD_LABELS = {NAME_LABEL: "metrics-exporter", "daemonset-name": "default"}

AZURE_MONITOR_API = "azmonitoring.coreos.com/v1"
PROMETHEUS_OPERATOR_API = "monitoring.coreos.com/v1"
# "Please make sure to use the labelLimit, labelNameLengthLimit and labelValueLengthLimit specified in the templates so
# that they are not dropped during processing" (the managed add-on's limits: 63 labels, 511 and 1023 characters).
# https://learn.microsoft.com/azure/azure-monitor/containers/prometheus-metrics-scrape-crd
AZURE_MONITOR_LABEL_LIMITS = {"labelLimit": 63, "labelNameLengthLimit": 511, "labelValueLengthLimit": 1023}
NODE_TARGET_LABEL = "node"


def monitoring_on(model: PlatformModel) -> bool:
    return model.config.monitoring.enabled and bool(model.pools)


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- NVIDIA: DCGM exporter


def dcgm_counters_config_map(pins: ExporterPins) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": DCGM_COUNTERS_CONFIG_MAP,
            "namespace": GPU_NAMESPACE,
            "labels": {NAME_LABEL: DCGM_EXPORTER_NAME},
        },
        "data": {DCGM_COUNTERS_KEY: dcgm_counters_csv(pins.dcgm_counters)},
    }


def dcgm_exporter_daemonset(model: PlatformModel, pins: ExporterPins) -> dict[str, Any]:
    """The DCGM exporter on every NVIDIA pool, configured as the project's static manifest (dcgm-exporter.yaml).

    Root with SYS_ADMIN: "Required for profiling metrics (DCGM_FI_PROF_*)" (that manifest), which the idle rule reads
    on MIG slices. Its root filesystem stays writable: the NVIDIA container runtime writes the container's ld cache
    when it injects the driver libraries (as for the device plugin, kube/nvidia_plugin.py).
    """
    port = pins.dcgm_port
    probe = {"httpGet": {"path": pins.dcgm_health_path, "port": port}, "initialDelaySeconds": 45, "periodSeconds": 10}
    container = {
        "name": DCGM_EXPORTER_NAME,
        "image": pins.dcgm_image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "DCGM_EXPORTER_LISTEN", "value": f":{port}"},
            # Map GPUs to the pods they are allocated to (pod, namespace, container labels).
            {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
            {"name": "DCGM_EXPORTER_COLLECTORS", "value": f"{DCGM_COUNTERS_DIR}/{DCGM_COUNTERS_KEY}"},
            # Only this node's pods (internal/pkg/transformation/kubernetes.go), and the hostname label.
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
        ],
        "ports": [{"name": "metrics", "containerPort": port, "protocol": "TCP"}],
        "livenessProbe": probe,
        "readinessProbe": dict(probe),
        "securityContext": root_security_context(add_capabilities=["SYS_ADMIN"], read_only_root=False),
        # The static manifest asks 100m/128Mi and caps 200m/256Mi; an 8-GPU node with profiling fields needs more room.
        "resources": resources("100m", "128Mi", "500m", "512Mi"),
        "volumeMounts": [
            {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True},
            {"name": "counters", "mountPath": DCGM_COUNTERS_DIR, "readOnly": True},
        ],
    }
    return node_daemonset(
        name=DCGM_EXPORTER_NAME,
        selector=app_labels(DCGM_EXPORTER_NAME),
        pools=model.pools_of("nvidia"),
        containers=[container],
        volumes=[
            host_path_volume("pod-resources", POD_RESOURCES_DIR),
            {"name": "counters", "configMap": {"name": DCGM_COUNTERS_CONFIG_MAP}},
        ],
        # The exporter reads the counters file at start: a changed file rolls the pods.
        pod_annotations={COUNTERS_CHECKSUM_ANNOTATION: _checksum(dcgm_counters_csv(pins.dcgm_counters))},
    )


def dcgm_operator_values(model: PlatformModel) -> dict[str, Any]:
    """The GPU Operator release's ``dcgmExporter`` values: on, with our counters file, and no ServiceMonitor of its own
    (the chart's default, v26.7.0 values.yaml ``serviceMonitor.enabled: true``): GpuMonitoring's PodMonitor scrapes it,
    with the labels the rules expect, for either engine. With monitoring off: the exporter as the chart ships it."""
    if not model.config.monitoring.enabled:
        return {"enabled": True}
    pins = resolve_exporter_pins(model.config.monitoring)
    return {
        "enabled": True,
        "config": {"name": OPERATOR_DCGM_CONFIG_MAP, "create": True, "data": dcgm_counters_csv(pins.dcgm_counters)},
        "serviceMonitor": {"enabled": False},
    }


# ---------------------------------------------------------------- AMD: ROCm device metrics exporter


def amd_exporter_config(pins: ExporterPins) -> dict[str, Any]:
    """config.json (docs/configuration/configmap.md): our field list; the health service off, since it exists to
    label nodes and feed the device plugin (which would need node update rights): the alert rules watch the metrics."""
    return {
        "ServerPort": pins.amd_port,
        "CommonConfig": {"HealthService": {"Enable": False}},
        "GPUConfig": {"Fields": [field.field for field in pins.amd_fields]},
    }


def amd_exporter_config_map(pins: ExporterPins) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": AMD_EXPORTER_CONFIG_MAP,
            "namespace": GPU_NAMESPACE,
            "labels": {NAME_LABEL: AMD_EXPORTER_NAME},
        },
        "data": {"config.json": json.dumps(amd_exporter_config(pins), indent=2, sort_keys=True) + "\n"},
    }


def amd_exporter_rbac() -> list[dict[str, Any]]:
    """Read access to nodes and pods: the exporter looks up the pods its GPUs are allocated to (their UID) through the
    API server. Upstream's chart also grants node update and event create, for the health service turned off here."""
    labels = {NAME_LABEL: AMD_EXPORTER_NAME}
    objects = node_access_rbac(AMD_EXPORTER_NAME, AMD_EXPORTER_CLUSTER_ROLE, labels, ("get", "list", "watch"))
    role = next(o for o in objects if o["kind"] == "ClusterRole")
    role["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]})
    return objects


def amd_exporter_daemonset(model: PlatformModel, pins: ExporterPins) -> dict[str, Any]:
    """The ROCm device metrics exporter, privileged as upstream runs it (helm-charts/templates/daemonsets.yaml): it
    opens /dev/kfd and every GPU's render node without being allocated one. Its root filesystem stays writable: the
    exporter starts ROCm's gpuagent inside the container, which writes where the project does not document; the paths
    it is known to write (log, health socket, Slurm files) are emptyDirs, not the host paths the chart uses."""
    config_text = amd_exporter_config_map(pins)["data"]["config.json"]
    context = privileged_security_context()
    context["readOnlyRootFilesystem"] = False
    container = {
        "name": AMD_EXPORTER_NAME,
        "image": pins.amd_image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["-monitor-gpu=true", "-monitor-nic=false"],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "METRICS_EXPORTER_PORT", "value": str(pins.amd_port)},
        ],
        "ports": [{"name": "metrics", "containerPort": pins.amd_port, "protocol": "TCP"}],
        "securityContext": context,
        # The chart asks 500m/512M and caps 2 CPUs/4Gi.
        "resources": resources("500m", "512Mi", "2", "4Gi"),
        "volumeMounts": [
            {"name": "dev", "mountPath": "/dev"},
            {"name": "sys", "mountPath": "/sys", "readOnly": True},
            {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True},
            {"name": "config", "mountPath": AMD_CONFIG_DIR, "readOnly": True},
            *({"name": name, "mountPath": path} for name, path in AMD_WRITABLE_DIRS.items()),
        ],
    }
    return node_daemonset(
        name=AMD_EXPORTER_NAME,
        selector=app_labels(AMD_EXPORTER_NAME),
        pools=model.pools_of("amd"),
        containers=[container],
        volumes=[
            host_path_volume("dev", "/dev"),
            host_path_volume("sys", "/sys"),
            host_path_volume("pod-resources", POD_RESOURCES_DIR),
            {"name": "config", "configMap": {"name": AMD_EXPORTER_CONFIG_MAP}},
            *(empty_dir_volume(name, "64Mi") for name in AMD_WRITABLE_DIRS),
        ],
        service_account=AMD_EXPORTER_NAME,
        pod_annotations={COUNTERS_CHECKSUM_ANNOTATION: _checksum(config_text)},
    )


# ---------------------------------------------------------------- scraping


def scrape_targets(model: PlatformModel) -> dict[Vendor, tuple[dict[str, str], dict[str, Any]]]:
    """Per vendor with pools: the exporter pods' labels and the endpoint port (by name, or by number for the AMD
    operator's exporter, which declares no container port)."""
    targets: dict[Vendor, tuple[dict[str, str], dict[str, Any]]] = {}
    pins = resolve_exporter_pins(model.config.monitoring)
    if model.pools_of("nvidia"):
        labels = app_labels(DCGM_EXPORTER_NAME) if vendor_mode(model, "nvidia") == "daemonset" else dict(OPERATOR_DCGM_LABELS)
        targets["nvidia"] = (labels, {"port": "metrics"})
    if model.pools_of("amd"):
        if vendor_mode(model, "amd") == "daemonset":
            targets["amd"] = (app_labels(AMD_EXPORTER_NAME), {"port": "metrics"})
        else:
            targets["amd"] = (dict(OPERATOR_AMD_LABELS), {"portNumber": pins.amd_port})
    return targets


def pod_monitor(vendor: Vendor, model: PlatformModel) -> dict[str, Any]:
    monitoring: MonitoringConfig = model.config.monitoring
    pod_labels, port = scrape_targets(model)[vendor]
    azure = monitoring.engine == "azure-monitor"
    name = DCGM_EXPORTER_NAME if vendor == "nvidia" else AMD_EXPORTER_NAME
    endpoint: dict[str, Any] = {
        **port,
        "path": "/metrics",
        "interval": f"{monitoring.scrape_interval_seconds}s",
        # Stated, not defaulted: the rules read the workload's pod as exported_pod.
        "honorLabels": False,
        "relabelings": [
            {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": NODE_TARGET_LABEL, "action": "replace"}
        ],
    }
    spec: dict[str, Any] = {
        **(AZURE_MONITOR_LABEL_LIMITS if azure else {}),
        "selector": {"matchLabels": dict(pod_labels)},
        "namespaceSelector": {"matchNames": [GPU_NAMESPACE]},
        "podMetricsEndpoints": [endpoint],
    }
    namespace = GPU_NAMESPACE if azure else monitoring.prometheus_operator.namespace
    labels = {NAME_LABEL: name, **({} if azure else monitoring.prometheus_operator.labels)}
    return {
        "apiVersion": AZURE_MONITOR_API if azure else PROMETHEUS_OPERATOR_API,
        "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def exporter_manifests(model: PlatformModel) -> list[dict[str, Any]]:
    """The exporters GpuMonitoring deploys itself (the operators run theirs) and every PodMonitor; empty when
    monitoring is off or the stack has no GPU pools."""
    if not monitoring_on(model):
        return []
    pins = resolve_exporter_pins(model.config.monitoring)
    manifests: list[dict[str, Any]] = []
    if model.pools_of("nvidia") and vendor_mode(model, "nvidia") == "daemonset":
        manifests += [dcgm_counters_config_map(pins), dcgm_exporter_daemonset(model, pins)]
    if model.pools_of("amd") and vendor_mode(model, "amd") == "daemonset":
        manifests += [amd_exporter_config_map(pins), *amd_exporter_rbac(), amd_exporter_daemonset(model, pins)]
    manifests += [pod_monitor(vendor, model) for vendor in scrape_targets(model)]
    return manifests


def monitoring_summary(model: PlatformModel, rule_counts: dict[str, int]) -> list[str]:
    """What ``aksgpu plan`` says about monitoring: the engine, who runs which exporter where, the rule groups."""
    if not model.pools:
        return []
    monitoring = model.config.monitoring
    if not monitoring.enabled:
        return ["monitoring: off (aks-gpu:monitoring.enabled false): no exporters, no alert rules"]
    engine = "Azure Monitor managed Prometheus" if monitoring.engine == "azure-monitor" else "a Prometheus Operator"
    exporters = []
    agents: tuple[tuple[Vendor, str], ...] = (("nvidia", DCGM_EXPORTER_NAME), ("amd", AMD_EXPORTER_NAME))
    for vendor, name in agents:
        pools = model.pools_of(vendor)
        if pools:
            runner = "" if vendor_mode(model, vendor) == "daemonset" else " (the GPU Operator's)"
            exporters.append(f"{name}{runner} on {', '.join(p.name for p in pools)}")
    groups = ", ".join(f"{group} ({count} alerts)" for group, count in rule_counts.items())
    return [f"monitoring: {engine}; {'; '.join(exporters)}; rule groups {groups}"]
