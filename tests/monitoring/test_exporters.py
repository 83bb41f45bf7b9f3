"""The exporters and their scrape configuration, as built (pure): placed exactly like the device plugin, carrying the
counters the rules read, scraped with the labels the rules expect, for both engines and both plugin modes."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from aks_gpu.kube.device_plugin import plugin_manifests
from aks_gpu.kube.gpu_operator import operator_releases
from aks_gpu.kube.plugin_pins import resolve_pins
from aks_gpu.monitoring.exporter_pins import dcgm_counters_csv, default_exporter_pins
from aks_gpu.monitoring.exporters import (
    COUNTERS_CHECKSUM_ANNOTATION,
    DCGM_COUNTERS_DIR,
    DCGM_COUNTERS_KEY,
    dcgm_operator_values,
    exporter_manifests,
)
from aks_gpu.naming import QUARANTINE_TAINT_KEY
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import ONCALL_ACTION_GROUP, minimal_raw, stack_model

# The Prometheus types the exporter accepts in the counters file's second column (promMetricType in
# internal/pkg/counters/variables.go of NVIDIA/dcgm-exporter), plus "label" for fields published as labels.
EXPORTER_TYPES = {"gauge", "counter", "histogram", "summary", "label"}


def model_of(**overrides: Any) -> PlatformModel:
    return validate_stack(minimal_raw(**overrides), "test").model


def by_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def pod_spec(daemonset: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return spec


def plugin_daemonset(model: PlatformModel, name: str) -> dict[str, Any]:
    return next(m for m in plugin_manifests(model) if m["kind"] == "DaemonSet" and m["metadata"]["name"] == name)


@pytest.mark.parametrize(
    ("stack", "exporter", "plugin"),
    [
        ("prod", "dcgm-exporter", "nvidia-device-plugin-daemonset"),
        ("amd", "amd-metrics-exporter", "amdgpu-device-plugin-daemonset"),
    ],
)
def test_exporters_are_placed_exactly_like_the_device_plugin(stack: str, exporter: str, plugin: str) -> None:
    model = stack_model(stack)
    (daemonset,) = [m for m in by_kind(exporter_manifests(model), "DaemonSet") if m["metadata"]["name"] == exporter]
    reference = pod_spec(plugin_daemonset(model, plugin))
    assert pod_spec(daemonset)["affinity"] == reference["affinity"]
    assert pod_spec(daemonset)["tolerations"] == reference["tolerations"]
    assert daemonset["metadata"]["namespace"] == "gpu-resources"


def test_a_spot_pool_and_a_user_taint_are_tolerated() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"spot": True, "taints": ["team=ml:NoSchedule"]}
    model = validate_stack(raw, "test").model
    (daemonset,) = by_kind(exporter_manifests(model), "DaemonSet")
    keys = {t["key"] for t in pod_spec(daemonset)["tolerations"]}
    # And the quarantine taint: a quarantined node keeps its exporter (components/aks_gpu/resolved/model.py).
    assert keys == {"nvidia.com/gpu", "team", "kubernetes.azure.com/scalesetpriority", QUARANTINE_TAINT_KEY}


def test_the_counters_file_is_what_the_exporter_reads() -> None:
    manifests = exporter_manifests(stack_model("prod"))
    (config_map,) = by_kind(manifests, "ConfigMap")
    (daemonset,) = by_kind(manifests, "DaemonSet")
    text = config_map["data"][DCGM_COUNTERS_KEY]
    # The exporter reads it with Go's encoding/csv, '#' comments, three fields a line, fields trimmed.
    rows = [row for row in csv.reader(io.StringIO(text)) if row and not row[0].startswith("#")]
    assert all(len(row) == 3 for row in rows)
    fields = [row[0].strip() for row in rows]
    assert {row[1].strip() for row in rows} <= EXPORTER_TYPES
    assert len(fields) == len(set(fields))
    assert set(fields) == {c.field for c in default_exporter_pins().dcgm_counters}
    container = pod_spec(daemonset)["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DCGM_EXPORTER_COLLECTORS"] == f"{DCGM_COUNTERS_DIR}/{DCGM_COUNTERS_KEY}"
    assert env["DCGM_EXPORTER_KUBERNETES"] == "true"
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == DCGM_COUNTERS_DIR)
    volume = next(v for v in pod_spec(daemonset)["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": 9400}


def test_a_changed_counters_file_rolls_the_exporter() -> None:
    pins = default_exporter_pins()
    (daemonset,) = by_kind(exporter_manifests(stack_model("prod")), "DaemonSet")
    checksum = daemonset["spec"]["template"]["metadata"]["annotations"][COUNTERS_CHECKSUM_ANNOTATION]
    import hashlib

    assert checksum == hashlib.sha256(dcgm_counters_csv(pins.dcgm_counters).encode()).hexdigest()
    assert checksum != hashlib.sha256(dcgm_counters_csv(pins.dcgm_counters[:-1]).encode()).hexdigest()


def test_gpu_operator_mode_configures_the_operators_exporter() -> None:
    model = model_of(**{"aks-gpu:devicePlugin": {"mode": "gpu-operator"}})
    manifests = exporter_manifests(model)
    assert by_kind(manifests, "DaemonSet") == [], "the operator runs its own exporter"
    (monitor,) = by_kind(manifests, "PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == {"app": "nvidia-dcgm-exporter"}
    (release,) = operator_releases(model, resolve_pins(model.config.device_plugin), dcgm_operator_values(model))
    values = release.values["dcgmExporter"]
    assert values["enabled"] is True
    assert values["config"]["create"] is True and values["config"]["data"] == dcgm_counters_csv(
        default_exporter_pins().dcgm_counters
    )
    # Our PodMonitor scrapes it; the chart's own ServiceMonitor would scrape it twice.
    assert values["serviceMonitor"] == {"enabled": False}


def test_monitoring_off_leaves_the_operators_exporter_as_shipped() -> None:
    model = model_of(**{"aks-gpu:devicePlugin": {"mode": "gpu-operator"}, "aks-gpu:monitoring": {"enabled": False}})
    assert exporter_manifests(model) == []
    assert dcgm_operator_values(model) == {"enabled": True}


def test_pod_monitors_for_managed_prometheus() -> None:
    (monitor,) = by_kind(exporter_manifests(stack_model("prod")), "PodMonitor")
    assert monitor["apiVersion"] == "azmonitoring.coreos.com/v1"
    spec = monitor["spec"]
    # The add-on drops scrapes over these limits unless the CR states them (the scrape CRD page).
    assert (spec["labelLimit"], spec["labelNameLengthLimit"], spec["labelValueLengthLimit"]) == (63, 511, 1023)
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics" and endpoint["honorLabels"] is False and endpoint["interval"] == "30s"
    assert endpoint["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}
    ]
    assert spec["namespaceSelector"] == {"matchNames": ["gpu-resources"]}


def test_pod_monitors_for_a_prometheus_operator() -> None:
    (monitor,) = by_kind(exporter_manifests(stack_model("amd")), "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert "labelLimit" not in monitor["spec"]
    assert monitor["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "amd-metrics-exporter"}


def test_the_amd_operators_exporter_is_scraped_by_port_number() -> None:
    raw = minimal_raw(
        **{
            "aks-gpu:gpuPools": [
                {"name": "mi", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "training", "maxCount": 2}
            ],
            # What the AMD GPU Operator needs on AKS (the config rules refuse it otherwise).
            "aks-gpu:devicePlugin": {
                "amdMode": "gpu-operator",
                "certManagerInstalled": True,
                "amdDriverImage": "myregistry.azurecr.io/amdgpu-driver",
            },
        }
    )
    manifests = exporter_manifests(validate_stack(raw, "test").model)
    assert by_kind(manifests, "DaemonSet") == []
    (monitor,) = by_kind(manifests, "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["portNumber"] == 5000 and "port" not in endpoint
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "metrics-exporter",
        "daemonset-name": "default",
    }


def test_the_amd_exporter_reads_our_field_list_and_keeps_host_paths_read_only() -> None:
    import json

    manifests = exporter_manifests(stack_model("amd"))
    config_map = next(m for m in by_kind(manifests, "ConfigMap") if m["metadata"]["name"] == "amd-metrics-exporter-config")
    config = json.loads(config_map["data"]["config.json"])
    assert config["GPUConfig"]["Fields"] == [f.field for f in default_exporter_pins().amd_fields]
    assert config["CommonConfig"]["HealthService"] == {"Enable": False}
    (daemonset,) = by_kind(manifests, "DaemonSet")
    container = pod_spec(daemonset)["containers"][0]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/sys"]["readOnly"] and mounts["/var/lib/kubelet/pod-resources"]["readOnly"]
    host_paths = {v["hostPath"]["path"] for v in pod_spec(daemonset)["volumes"] if "hostPath" in v}
    # Upstream mounts /var/lib/amd-metrics-exporter and /var/run/exporter from the host; here they are emptyDirs.
    assert host_paths == {"/dev", "/sys", "/var/lib/kubelet/pod-resources"}
    (role,) = by_kind(manifests, "ClusterRole")
    assert all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in role["rules"])


def test_image_overrides() -> None:
    heard = {"actionGroupIds": [ONCALL_ACTION_GROUP]}
    monitoring = {"dcgmExporterImage": "registry.example/dcgm-exporter:custom", "azureMonitor": heard}
    model = model_of(**{"aks-gpu:monitoring": monitoring})
    (daemonset,) = by_kind(exporter_manifests(model), "DaemonSet")
    assert pod_spec(daemonset)["containers"][0]["image"] == "registry.example/dcgm-exporter:custom"


def test_pins_carry_the_versions_and_sources() -> None:
    pins = default_exporter_pins()
    assert pins.dcgm_image == "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"
    assert pins.amd_image == "docker.io/rocm/device-metrics-exporter:v1.5.1"
    assert all(counter.why for counter in pins.dcgm_counters if counter.origin == "added")
    assert all(field.metric == field.field.lower() for field in pins.amd_fields)
