"""What the stack runs in the cluster, as ``aksgpu admission check`` compares a manifest to it. Pure.

Every object the in-cluster layer deploys from the model (the device plugins and their namespace, the admission
policies, each workload namespace's objects), the device plugin images the stack runs, and the system namespaces the
policies leave out (:class:`aks_gpu.admission.platform_warnings.Platform`).
"""

from __future__ import annotations

from aks_gpu.admission.platform_warnings import Platform, image_path
from aks_gpu.admission.policy import render_policy, system_namespaces
from aks_gpu.admission.workload_pods import group_of
from aks_gpu.kube.device_plugin import plugin_manifests
from aks_gpu.kube.plugin_pins import resolve_pins
from aks_gpu.kube.team_role import team_role_manifest
from aks_gpu.kube.workload_manifests import workload_manifests
from aks_gpu.resolved.exemptions import derived_exemptions
from aks_gpu.resolved.model import PlatformModel


def platform(model: PlatformModel) -> Platform:
    gpu_resources = sorted({pool.resource.name for pool in model.pools})
    manifests = [*plugin_manifests(model), *render_policy(model), team_role_manifest()]
    for workload in model.workloads:
        manifests += workload_manifests(workload.config, workload.resource_name, gpu_resources, workload.kube_tolerations)
    objects = frozenset(
        (
            group_of(manifest),
            str(manifest["kind"]),
            str(manifest["metadata"].get("namespace") or ""),
            str(manifest["metadata"]["name"]),
        )
        for manifest in manifests
    )
    pins = resolve_pins(model.config.device_plugin)
    images = tuple(dict.fromkeys(image_path(image) for image in (pins.nvidia_device_plugin_image, pins.amd_device_plugin_image)))
    cluster = model.cluster
    derived = {item.namespace for item in derived_exemptions(model.config, cluster.network_policy if cluster else None)}
    system = {name: text for name, text in system_namespaces(model).items() if name in derived}
    return Platform(objects=objects, plugin_images=images, system=system, gpu_resources=tuple(gpu_resources))
