"""The ROCm device plugin, its node labeller and the amd-smi probe as plain manifests. Pure: model in, dicts out.

devicePlugin.amdMode daemonset: one ROCm plugin DaemonSet, ``amdgpu-device-plugin-daemonset``, on every AMD pool
(``amd.com/gpu``; the plugin has no per-pool config) and one node labeller for all AMD pools (it labels nodes with
GPU family, VRAM, device id...).
Both need the amdgpu driver on the node: AKS installs none (the pools run ``gpuProfile.driver: None``), so the
node image must carry it, or the AMD GPU Operator (amdMode gpu-operator) installs it.

In either mode, while post-deploy validation is on, one small probe DaemonSet (``amd-smi``) runs on every AMD
pool, its container with amd-smi: the ROCm plugin image (Alpine/UBI with the plugin binary) has none, and the validation
reads the driver version with amd-smi. The probe reuses ``validation.smokeJob.amdImage`` (a ROCm image).

Upstream manifests: https://github.com/ROCm/k8s-device-plugin/tree/master/helm/amd-gpu/templates
"""

from __future__ import annotations

from typing import Any

from aks_gpu.kube.node_daemonset import (
    KUBELET_DEVICE_PLUGINS,
    empty_dir_volume,
    host_path_volume,
    node_access_rbac,
    node_daemonset,
    privileged_security_context,
    resources,
    root_security_context,
)
from aks_gpu.naming import NAME_LABEL, platform_object_name
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.resolved.targets import (
    AMD_LABELLER_NAME,
    AMD_PLUGIN_CONTAINER,
    AMD_PLUGIN_DAEMONSET,
    AMD_PLUGIN_NAME,
    AMD_SMI_CONTAINER,
    AMD_SMI_NAME,
    app_labels,
    probes_enabled,
)

LABELLER_CLUSTER_ROLE = platform_object_name("amdgpu-node-labeller")


def plugin_daemonset(pools: tuple[ResolvedPool, ...], image: str) -> dict[str, Any]:
    """The ROCm plugin: runs as root (kubelet socket directory) and only reads sysfs to find the GPUs."""
    container = {
        "name": AMD_PLUGIN_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # The image's own command logs to stderr, so the root filesystem can stay read-only.
        "securityContext": root_security_context(),
        "resources": resources("50m", "64Mi", "500m", "256Mi"),
        "volumeMounts": [
            {"name": "device-plugins", "mountPath": KUBELET_DEVICE_PLUGINS},
            {"name": "sys", "mountPath": "/sys", "readOnly": True},
        ],
    }
    return node_daemonset(
        name=AMD_PLUGIN_DAEMONSET,
        selector=app_labels(AMD_PLUGIN_NAME),
        pools=pools,
        containers=[container],
        volumes=[host_path_volume("device-plugins", KUBELET_DEVICE_PLUGINS), host_path_volume("sys", "/sys")],
    )


def labeller_rbac() -> list[dict[str, Any]]:
    """The labeller writes labels on its own node: read and update nodes, nothing else."""
    labels = {NAME_LABEL: AMD_LABELLER_NAME}
    return node_access_rbac(AMD_LABELLER_NAME, LABELLER_CLUSTER_ROLE, labels, ("get", "list", "watch", "update", "patch"))


def labeller_daemonset(pools: tuple[ResolvedPool, ...], image: str) -> dict[str, Any]:
    """The node labeller, privileged as upstream runs it: it opens the GPU device nodes to read their properties."""
    container = {
        "name": AMD_LABELLER_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "workingDir": "/root",
        "command": ["./k8s-node-labeller"],
        # -logtostderr keeps the labeller from writing log files, so its root filesystem can be read-only.
        "args": ["-vram", "-cu-count", "-simd-count", "-device-id", "-family", "-logtostderr=true"],
        "env": [{"name": "DS_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "securityContext": privileged_security_context(),
        "resources": resources("10m", "32Mi", "200m", "128Mi"),
        "volumeMounts": [
            {"name": "sys", "mountPath": "/sys", "readOnly": True},
            {"name": "dev", "mountPath": "/dev"},
        ],
    }
    return node_daemonset(
        name=AMD_LABELLER_NAME,
        selector=app_labels(AMD_LABELLER_NAME),
        pools=pools,
        containers=[container],
        volumes=[host_path_volume("sys", "/sys"), host_path_volume("dev", "/dev")],
        service_account=AMD_LABELLER_NAME,
    )


def smi_probe_daemonset(pools: tuple[ResolvedPool, ...], image: str) -> dict[str, Any]:
    """A pod per AMD node that only waits, for the validation to exec ``amd-smi`` into.

    Privileged because amd-smi opens /dev/kfd and the render nodes of every GPU without being allocated one
    (allocating one would take a GPU away from the workloads).
    """
    container = {
        "name": AMD_SMI_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sleep", "infinity"],
        "securityContext": privileged_security_context(),
        "resources": resources("10m", "32Mi", "500m", "256Mi"),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return node_daemonset(
        name=AMD_SMI_NAME,
        selector=app_labels(AMD_SMI_NAME),
        pools=pools,
        containers=[container],
        volumes=[empty_dir_volume("tmp")],
    )


def amd_manifests(model: PlatformModel, plugin_image: str, labeller_image: str) -> list[dict[str, Any]]:
    pools = model.pools_of("amd")
    if not pools:
        return []
    manifests: list[dict[str, Any]] = []
    if model.config.device_plugin.amd_mode == "daemonset":
        manifests += [plugin_daemonset(pools, plugin_image), *labeller_rbac(), labeller_daemonset(pools, labeller_image)]
    if probes_enabled(model):
        manifests.append(smi_probe_daemonset(pools, model.config.validation.smoke_job.amd_image))
    return manifests
