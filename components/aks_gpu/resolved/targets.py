"""Where each GPU pool's SMI command runs, and what the pool exposes once its device plugin does. Pure: no Pulumi.

The post-deploy validation reads ``plugin_targets`` to find, per pool, the pods to exec ``nvidia-smi`` / ``amd-smi``
into and the resource count to expect; the device plugin builders (``components/aks_gpu/kube/``) name and label those pods
with the same constants, so the two cannot drift apart.

One DaemonSet per vendor agent serves every pool of its vendor (``nvidia-device-plugin-daemonset``,
``amdgpu-device-plugin-daemonset``...): the validation finds a pool's pods by the DaemonSet's pod labels and narrows
them to the pool's nodes with ``node_selector``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aks_gpu.naming import GPU_NAMESPACE, NAME_LABEL, Vendor
from aks_gpu.resolved.model import MigStrategy, PlatformModel, ResolvedPool

Mode = Literal["daemonset", "gpu-operator"]

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


def smi_command(vendor: Vendor) -> list[str]:
    """The command the live validator runs in the device plugin pod, for the checks to read.

    NVIDIA: ``nvidia-smi -q -x`` in every driver prints, in one call, what every check reads: the driver and
    CUDA versions, each GPU's name, UUID, memory and MIG mode and its MIG devices, and the health counters
    (ECC, row remapping, retired pages, clock event reasons, PCIe link width, fabric state). XML, because its
    element names do not move when a column is added to the table (nvsmi_device_v12/v13 DTDs).

    AMD: ``amd-smi static --json`` gives the amdgpu driver version and, per GPU, the market name and VRAM size
    (ROCm 6.0 and later; fixtures 51 and 56 show the same data as text), and ``amd-smi metric --ecc --json`` after
    it the RAS error counts the health check reads. Two commands need a shell: the probe image (a ROCm image)
    has one. The ROCm version is left unknown; the driver version is what the checks compare.
    """
    if vendor == "nvidia":
        return ["nvidia-smi", "-q", "-x"]
    return ["sh", "-c", "amd-smi static --json; amd-smi metric --ecc --json"]


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
        namespace=GPU_NAMESPACE,
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
