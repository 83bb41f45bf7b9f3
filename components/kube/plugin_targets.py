"""Where the GPU device plugin pods run and what each GPU pool exposes once they do. Pure: no Pulumi.

The post-deploy validation imports ``plugin_targets`` to find, per pool, the pods to exec ``nvidia-smi`` /
``amd-smi`` into and the resource count to expect; ``GpuDevicePlugin`` uses the same names and placement
helpers to build those pods, so the two cannot drift apart.

One DaemonSet per vendor agent serves every pool of its vendor (``nvidia-device-plugin-daemonset``,
``amdgpu-device-plugin-daemonset``...): the validation finds a pool's pods by the DaemonSet's pod labels and
narrows them to the pool's nodes with ``node_selector``.

Placement is derived from the pools, never written by hand: a plugin pod tolerates exactly the taints its
pools carry (vendor taint, user taints, the spot taint AKS adds) and is pinned to its pools by their label.
The AKS walkthrough's DaemonSet tolerates ``sku=gpu`` while the best-practices article taints
``nvidia.com/gpu``; a hard-coded toleration like that leaves the GPUs of a pool unschedulable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from components.model import POOL_LABEL, MigStrategy, PlatformModel, ResolvedPool, Vendor
from components.validation.smi import smi_command

Mode = Literal["daemonset", "gpu-operator"]

# Everything GpuDevicePlugin installs lives in this namespace (the admission policy exempts it by default).
NAMESPACE = "gpu-resources"

NAME_LABEL = "app.kubernetes.io/name"

# Per agent: the app name its pods are labelled (and selected) by, its DaemonSet's name, its main container.
NVIDIA_PLUGIN_NAME = "nvidia-device-plugin"
# The name the contract and NVIDIA's static manifest give the plugin DaemonSet:
# https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/static/nvidia-device-plugin.yml
NVIDIA_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"
NVIDIA_PLUGIN_CONTAINER = "nvidia-device-plugin-ctr"
AMD_PLUGIN_NAME = "amdgpu-device-plugin"
# As ROCm's static manifest names it: https://github.com/ROCm/k8s-device-plugin/blob/master/k8s-ds-amdgpu-dp.yaml
AMD_PLUGIN_DAEMONSET = "amdgpu-device-plugin-daemonset"
AMD_PLUGIN_CONTAINER = "amdgpu-device-plugin"
AMD_LABELLER_NAME = "amdgpu-node-labeller"
# The ROCm plugin image carries no amd-smi, so AMD nodes get a small probe pod that does.
AMD_SMI_NAME = "amd-smi"
AMD_SMI_CONTAINER = "amd-smi"

# What the NVIDIA GPU Operator names its device plugin pods and container (assets/state-device-plugin):
# https://github.com/NVIDIA/gpu-operator/blob/main/assets/state-device-plugin/0500_daemonset.yaml
OPERATOR_NVIDIA_PLUGIN_LABELS = {"app": "nvidia-device-plugin-daemonset"}
OPERATOR_NVIDIA_PLUGIN_CONTAINER = "nvidia-device-plugin"


@dataclass(frozen=True)
class PluginTarget:
    """One GPU pool as the device plugin serves it.

    ``pod_labels`` selects the pods to exec ``smi_command`` into (container ``container``) in ``namespace``;
    those pods are shared by every pool of the vendor (one DaemonSet, ours or the GPU Operator's), so
    ``node_selector`` narrows them to this pool's nodes. ``resource_name`` x ``count_per_node`` is what every node
    of the pool advertises; ``mig_strategy`` is the strategy in force for a MIG pool (None for a pool without MIG).
    """

    namespace: str
    pod_labels: dict[str, str]
    container: str
    smi_command: list[str]
    resource_name: str
    count_per_node: int | None
    mig_strategy: MigStrategy | None
    node_selector: dict[str, str]
    vendor: Vendor
    mode: Mode


def vendor_mode(model: PlatformModel, vendor: Vendor) -> Mode:
    plugin = model.config.device_plugin
    return plugin.mode if vendor == "nvidia" else plugin.amd_mode


def probes_enabled(model: PlatformModel) -> bool:
    """The amd-smi probe pods exist only for the post-deploy validation."""
    return model.config.validation.on_deploy != "off"


def app_labels(app: str) -> dict[str, str]:
    """The selector of an agent's pods, on every pool it serves (a DaemonSet's selector is immutable: keep stable)."""
    return {NAME_LABEL: app}


def plugin_target(model: PlatformModel, pool: ResolvedPool) -> PluginTarget:
    mode = vendor_mode(model, pool.vendor)
    if pool.vendor == "nvidia" and mode == "daemonset":
        labels, container = app_labels(NVIDIA_PLUGIN_NAME), NVIDIA_PLUGIN_CONTAINER
    elif pool.vendor == "nvidia":
        labels, container = dict(OPERATOR_NVIDIA_PLUGIN_LABELS), OPERATOR_NVIDIA_PLUGIN_CONTAINER
    elif probes_enabled(model):
        labels, container = app_labels(AMD_SMI_NAME), AMD_SMI_CONTAINER
    else:
        labels, container = app_labels(AMD_PLUGIN_NAME), AMD_PLUGIN_CONTAINER
    return PluginTarget(
        namespace=NAMESPACE,
        pod_labels=labels,
        container=container,
        smi_command=smi_command(pool.vendor),
        resource_name=pool.resource.name,
        count_per_node=pool.resource.count_per_node,
        mig_strategy=model.mig_strategy if pool.mig_profile else None,
        node_selector=dict(pool.node_selector),
        vendor=pool.vendor,
        mode=mode,
    )


def plugin_targets(model: PlatformModel) -> dict[str, PluginTarget]:
    """Per GPU pool: the plugin pods to probe and what the pool must expose."""
    return {pool.name: plugin_target(model, pool) for pool in model.pools}


# ---------------------------------------------------------------- placement


def tolerations_for(pools: Iterable[ResolvedPool]) -> list[dict[str, str]]:
    """Every taint the pools' nodes carry, as tolerations (first occurrence wins, order kept)."""
    seen: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for pool in pools:
        for toleration in pool.tolerations:
            spec = toleration.to_kube()
            seen.setdefault(tuple(sorted(spec.items())), spec)
    return list(seen.values())


def node_affinity_for(pools: Iterable[ResolvedPool]) -> dict[str, Any]:
    """Required node affinity on the pool label: the pods land on these pools' nodes and nowhere else."""
    names = sorted({pool.name for pool in pools})
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": names}]}]
            }
        }
    }
