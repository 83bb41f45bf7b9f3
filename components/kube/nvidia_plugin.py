"""The NVIDIA device plugin as plain manifests (devicePlugin.mode: daemonset). Pure: model in, dicts out.

One DaemonSet per NVIDIA pool rather than one for all: the plugin reads a single config file, and pools differ
in what that file must say (a MIG pool exposes its slices under the stack's MIG strategy and may not be
time-sliced; a shared pool time-slices with its own replica count). A DaemonSet per pool gives every node the
config of its own pool, grants SYS_ADMIN only where MIG needs it, and lets the validation select one pool's
plugin pods by label.

The plugin runs as root: it creates its socket in the kubelet's root-owned device-plugins directory and opens
the GPU device nodes through NVML. Its root filesystem stays writable because the NVIDIA container runtime
writes the container's ld cache (/etc/ld.so.cache) when it injects the driver libraries into it
(https://github.com/NVIDIA/nvidia-container-toolkit/pull/1326).
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from components.kube.node_daemonset import (
    KUBELET_DEVICE_PLUGINS,
    host_path_volume,
    node_daemonset,
    resources,
    root_security_context,
)
from components.kube.plugin_targets import (
    COMMON_LABELS,
    NAMESPACE,
    NVIDIA_PLUGIN_CONTAINER,
    NVIDIA_PLUGIN_NAME,
    pool_pod_labels,
)
from components.model import PlatformModel, ResolvedPool, vendor_resource

CONFIG_MAP_NAME = "nvidia-device-plugin-config"
CONFIG_DIR = "/etc/nvidia-device-plugin"
CONFIG_CHECKSUM_ANNOTATION = "aks-gpu/plugin-config-sha256"


def plugin_config(pool: ResolvedPool, model: PlatformModel) -> dict[str, Any]:
    """The device plugin's config file for one pool (format ``version: v1``).

    https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/customizing.md
    MIG pools expose their slices under the stack's strategy; a pool without MIG says ``none``, which is what
    its GPUs are. ``failOnInitError`` makes a node without a working driver crash-loop visibly instead of
    running a plugin that advertises nothing.
    """
    config: dict[str, Any] = {
        "version": "v1",
        "flags": {"migStrategy": model.mig_strategy if pool.mig_profile else "none", "failOnInitError": True},
    }
    if pool.time_slicing_replicas:
        config["sharing"] = {
            "timeSlicing": {"resources": [{"name": vendor_resource("nvidia"), "replicas": pool.time_slicing_replicas}]}
        }
    return config


def config_text(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def config_key(pool: ResolvedPool) -> str:
    return f"{pool.name}.yaml"


def config_map(pools: tuple[ResolvedPool, ...], model: PlatformModel) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIG_MAP_NAME,
            "namespace": NAMESPACE,
            "labels": {**COMMON_LABELS, "app.kubernetes.io/name": NVIDIA_PLUGIN_NAME},
        },
        "data": {config_key(pool): config_text(plugin_config(pool, model)) for pool in pools},
    }


def plugin_env(pool: ResolvedPool) -> list[dict[str, str]]:
    env = [
        {"name": "CONFIG_FILE", "value": f"{CONFIG_DIR}/config.yaml"},
        # The NVIDIA container runtime injects the driver (NVML, nvidia-smi) into containers that ask for
        # it; the image sets these too, spelled out here because the validation execs nvidia-smi in this pod.
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
    ]
    if pool.mig_profile:
        # The plugin watches MIG devices through the MIG monitor capability. Azure Linux MIG pools need it
        # asked for; NVIDIA's chart sets it whenever a MIG strategy is in use, so every MIG pool gets it:
        # https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/helm/nvidia-device-plugin/templates/_helpers.tpl
        env.append({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"})
    return env


def plugin_daemonset(pool: ResolvedPool, model: PlatformModel, image: str) -> dict[str, Any]:
    text = config_text(plugin_config(pool, model))
    # The MIG monitor device needs CAP_SYS_ADMIN (the toolkit checks the bounding set); only MIG pools get it.
    capabilities = ["SYS_ADMIN"] if pool.mig_profile else []
    container = {
        "name": NVIDIA_PLUGIN_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": plugin_env(pool),
        "securityContext": root_security_context(add_capabilities=capabilities, read_only_root=False),
        "resources": resources("50m", "64Mi", "500m", "256Mi"),
        "volumeMounts": [
            {"name": "device-plugins", "mountPath": KUBELET_DEVICE_PLUGINS},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        ],
    }
    volumes = [
        host_path_volume("device-plugins", KUBELET_DEVICE_PLUGINS),
        {"name": "config", "configMap": {"name": CONFIG_MAP_NAME, "items": [{"key": config_key(pool), "path": "config.yaml"}]}},
    ]
    return node_daemonset(
        name=f"{NVIDIA_PLUGIN_NAME}-{pool.name}",
        selector=pool_pod_labels(NVIDIA_PLUGIN_NAME, pool),
        pools=(pool,),
        containers=[container],
        volumes=volumes,
        # The plugin reads its config only at start: a changed config rolls the pods through this checksum.
        pod_annotations={CONFIG_CHECKSUM_ANNOTATION: hashlib.sha256(text.encode()).hexdigest()},
    )


def nvidia_manifests(model: PlatformModel, image: str) -> list[dict[str, Any]]:
    """The ConfigMap and one plugin DaemonSet per NVIDIA pool; nothing when the GPU Operator owns the plugin."""
    pools = model.pools_of("nvidia")
    if not pools or model.config.device_plugin.mode != "daemonset":
        return []
    return [config_map(pools, model), *(plugin_daemonset(pool, model, image) for pool in pools)]
