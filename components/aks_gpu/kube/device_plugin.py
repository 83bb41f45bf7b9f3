"""What makes ``<vendor>.com/gpu`` schedulable on every GPU pool of the stack, as plain manifests. Pure: no Pulumi.

``plugin_manifests`` gathers the NVIDIA (``nvidia_plugin``) and AMD (``amd_plugin``) objects, namespace first;
``gpu_operator.operator_releases`` the Helm releases of the operators. One DaemonSet per agent serves every pool of its
vendor (``nvidia-device-plugin-daemonset``, ``amdgpu-device-plugin-daemonset``, ...). ``target_output`` is what the
``GpuDevicePlugin`` component (``components/aks_gpu/platform/device_plugin.py``) exports per pool: where the plugin pods run and
what the pool then advertises.
"""

from typing import Any, NotRequired, TypedDict

from aks_gpu.kube.amd_plugin import amd_manifests
from aks_gpu.kube.nvidia_plugin import nvidia_manifests
from aks_gpu.kube.plugin_pins import resolve_pins
from aks_gpu.naming import GPU_NAMESPACE
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import PluginTarget


def namespace_manifest() -> dict[str, Any]:
    """The plugins' namespace. Pod Security ``privileged``: a device plugin mounts hostPath (the kubelet's
    device-plugins directory, /sys), which ``baseline`` refuses; nothing but GPU node agents runs here."""
    labels = {"pod-security.kubernetes.io/enforce": "privileged"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GPU_NAMESPACE, "labels": labels}}


def plugin_manifests(model: PlatformModel) -> list[dict[str, Any]]:
    """Every Kubernetes object the stack's device plugin setup needs, namespace first. Empty without GPU pools."""
    if not model.pools:
        return []
    pins = resolve_pins(model.config.device_plugin)
    return [
        namespace_manifest(),
        *nvidia_manifests(model, pins.nvidia_device_plugin_image),
        *amd_manifests(model, pins.amd_device_plugin_image, pins.amd_node_labeller_image),
    ]


class PluginTargetOutput(TypedDict):
    """Where a pool's plugin pods run and what the pool then advertises. camelCase keys, as every language and the
    stack's ``devicePlugin`` output spell them."""

    namespace: str
    podLabels: dict[str, str]
    container: str
    smiCommand: list[str]
    resourceName: str
    countPerNode: int
    nodeSelector: dict[str, str]
    vendor: str
    mode: str
    migStrategy: NotRequired[str]


def target_output(target: PluginTarget) -> PluginTargetOutput:
    output: PluginTargetOutput = {
        "namespace": target.namespace,
        "podLabels": dict(target.pod_labels),
        "container": target.container,
        "smiCommand": list(target.smi_command),
        "resourceName": target.resource_name,
        "countPerNode": target.count_per_node or 0,
        "nodeSelector": dict(target.node_selector),
        "vendor": target.vendor,
        "mode": target.mode,
    }
    if target.mig_strategy is not None:
        output["migStrategy"] = target.mig_strategy
    return output
