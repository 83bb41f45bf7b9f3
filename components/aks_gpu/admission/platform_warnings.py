"""What in a manifest would take the platform's place, for ``aksgpu admission check``'s warnings. Pure.

The API server admits such objects (the policies leave system namespaces alone, and nothing forbids a second
device plugin), so they are warnings, not denials:

- an object the stack deploys itself (its device plugin DaemonSet, a workload namespace's ResourceQuota, the
  admission policies): applying it replaces the platform's own, until the stack's next update puts that back;
- a second GPU device plugin (a container running a device plugin image the stack runs, NVIDIA's
  ``k8s-device-plugin`` or ROCm's, from any registry; NVIDIA's GPU Operator ``ClusterPolicy``, which deploys one):
  two plugins on a node advertise the same GPUs twice and fight over their health;
- a workload (a Pod, or an object that creates Pods) in a system namespace the policies leave out
  (``kube-system``, ``gpu-resources``...): nothing checks its GPU placement there, and the namespace is AKS's or
  the platform's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aks_gpu.admission.workload_pods import PodOf, group_of

CONTAINER_LISTS = ("containers", "initContainers")
# NVIDIA's GPU Operator: a ClusterPolicy makes it deploy the driver, toolkit and device plugin on every GPU node.
# https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html
GPU_OPERATOR_POLICY = ("nvidia.com", "ClusterPolicy")


@dataclass(frozen=True)
class Platform:
    """What the stack runs in the cluster, as the warnings compare it."""

    # (API group, kind, namespace or "", name) of every object the stack deploys
    objects: frozenset[tuple[str, str, str, str]] = frozenset()
    # the device plugin images the stack runs, as repository paths without registry and tag (nvidia/k8s-device-plugin)
    plugin_images: tuple[str, ...] = ()
    # the system namespaces the policies leave out, each described (aks_gpu.admission.policy.system_namespaces)
    system: Mapping[str, str] = field(default_factory=dict)
    # the GPU resources the stack's pools offer (nvidia.com/gpu...)
    gpu_resources: tuple[str, ...] = ()


def image_path(image: str) -> str:
    """An image reference's repository path: no registry host (a first segment with a dot or a port, or
    ``localhost``), no tag, no digest (``nvcr.io/nvidia/k8s-device-plugin:v0.17.0`` is ``nvidia/k8s-device-plugin``)."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    if ":" in name[slash + 1 :]:
        name = name[: slash + 1] + name[slash + 1 :].split(":", 1)[0]
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        name = rest
    return name


def _runs_plugin(image: str, plugins: Sequence[str]) -> bool:
    path = image_path(image)
    return any(path == plugin or path.endswith("/" + plugin) for plugin in plugins)


def _plugin_containers(pod: Mapping[str, Any], plugins: Sequence[str]) -> list[str]:
    spec = pod.get("spec") or {}
    found = []
    for field_name in CONTAINER_LISTS:
        for container in spec.get(field_name) or ():
            image = container.get("image") if isinstance(container, Mapping) else None
            if isinstance(image, str) and _runs_plugin(image, plugins):
                found.append(f"container {container.get('name')} ({image})")
    return found


def warnings(obj: Mapping[str, Any], namespace: str, pods: Sequence[PodOf], platform: Platform) -> list[str]:
    """The warnings for one object (``namespace``: where the server puts it, "" for a cluster-scoped object;
    ``pods``: the Pods it will have created, or the Pod itself)."""
    metadata = obj.get("metadata") or {}
    kind, name = str(obj.get("kind", "")), str(metadata.get("name") or "")
    found = []
    where = f" in {namespace}" if namespace else ""
    if (group_of(obj), kind, namespace, name) in platform.objects:
        found.append(
            f"the stack deploys {kind} {name}{where} itself: applying this replaces the platform's own object, and the "
            "stack's next update puts its own back"
        )
    else:
        plugins = [entry for pod in pods for entry in _plugin_containers(pod.pod, platform.plugin_images)]
        if plugins:
            found.append(
                f"{', '.join(dict.fromkeys(plugins))} runs a GPU device plugin: the stack runs its own on every GPU pool, "
                "and a second one advertises the same GPUs again; remove it, or change the stack's devicePlugin"
            )
        if (group_of(obj), kind) == GPU_OPERATOR_POLICY:
            found.append(
                "a ClusterPolicy makes NVIDIA's GPU Operator deploy a driver, toolkit and device plugin on every GPU node: "
                "the stack runs its device plugin already (devicePlugin.mode: gpu-operator installs the operator itself)"
            )
    if pods and namespace in platform.system:
        found.append(
            f"{platform.system[namespace]}: the stack's policies leave it alone, so nothing checks this workload's "
            "GPU placement; run workloads in a workload namespace"
        )
    return found
