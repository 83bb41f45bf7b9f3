"""aks-gpu: Microsoft's GPU best practices for AKS as Pulumi components.

The public components and their args types are importable from the top::

    from aks_gpu import GpuPlatform, GpuNodePool, GpuWorkloadNamespace, GpuWorkloadNamespaceArgs

They load on first use (PEP 562 ``__getattr__``): ``import aks_gpu`` alone, which every ``aksgpu`` command does, loads
no Pulumi SDK, so the light commands stay light (tests/test_light_commands.py). Type checkers see the imports below.

The folders read like the feature list: ``config`` (stack config and its rules), ``catalog`` (GPU VM facts),
``resolved`` (what each pool exposes), ``azure`` (cluster and GPU pools), ``kube`` (what runs in the cluster),
``validation`` (post-deploy checks), ``platform`` (all of it composed), ``testing`` (mocks for a consumer's unit tests)
and ``cli`` (``aksgpu``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"

if TYPE_CHECKING:
    from aks_gpu.admission.component import GpuAdmissionPolicy, GpuAdmissionPolicyArgs
    from aks_gpu.azure.cluster import GpuCluster, GpuClusterArgs
    from aks_gpu.azure.node_pool import GpuNodePool, GpuNodePoolArgs
    from aks_gpu.kube.workload_manifests import PoolOutput, TolerationSpec
    from aks_gpu.kube.workload_namespace import GpuWorkloadNamespace, GpuWorkloadNamespaceArgs
    from aks_gpu.monitoring.component import GpuMonitoring, GpuMonitoringArgs
    from aks_gpu.platform.device_plugin import GpuDevicePlugin, GpuDevicePluginArgs
    from aks_gpu.platform.stack import GpuPlatform
    from aks_gpu.specs import ClusterSpec, GpuPoolSpec, PlatformSpec, StackSpec, WorkloadSpec
    from aks_gpu.specs import StackSpec as GpuPlatformArgs
    from aks_gpu.storage.nvme_cache import NvmeCache, NvmeCacheArgs
    from aks_gpu.validation.smoke import GpuValidation, GpuValidationArgs

# name -> (module, attribute): what ``from aks_gpu import <name>`` loads.
_PUBLIC: dict[str, tuple[str, str]] = {
    "GpuPlatform": ("aks_gpu.platform.stack", "GpuPlatform"),
    "GpuPlatformArgs": ("aks_gpu.specs", "StackSpec"),
    "GpuCluster": ("aks_gpu.azure.cluster", "GpuCluster"),
    "GpuClusterArgs": ("aks_gpu.azure.cluster", "GpuClusterArgs"),
    "GpuNodePool": ("aks_gpu.azure.node_pool", "GpuNodePool"),
    "GpuNodePoolArgs": ("aks_gpu.azure.node_pool", "GpuNodePoolArgs"),
    "GpuDevicePlugin": ("aks_gpu.platform.device_plugin", "GpuDevicePlugin"),
    "GpuDevicePluginArgs": ("aks_gpu.platform.device_plugin", "GpuDevicePluginArgs"),
    "GpuWorkloadNamespace": ("aks_gpu.kube.workload_namespace", "GpuWorkloadNamespace"),
    "GpuWorkloadNamespaceArgs": ("aks_gpu.kube.workload_namespace", "GpuWorkloadNamespaceArgs"),
    "GpuAdmissionPolicy": ("aks_gpu.admission.component", "GpuAdmissionPolicy"),
    "GpuAdmissionPolicyArgs": ("aks_gpu.admission.component", "GpuAdmissionPolicyArgs"),
    "NvmeCache": ("aks_gpu.storage.nvme_cache", "NvmeCache"),
    "NvmeCacheArgs": ("aks_gpu.storage.nvme_cache", "NvmeCacheArgs"),
    "GpuValidation": ("aks_gpu.validation.smoke", "GpuValidation"),
    "GpuValidationArgs": ("aks_gpu.validation.smoke", "GpuValidationArgs"),
    "GpuMonitoring": ("aks_gpu.monitoring.component", "GpuMonitoring"),
    "GpuMonitoringArgs": ("aks_gpu.monitoring.component", "GpuMonitoringArgs"),
    # The stack file's sections, as the args above nest them (snake_case keys).
    "StackSpec": ("aks_gpu.specs", "StackSpec"),
    "PlatformSpec": ("aks_gpu.specs", "PlatformSpec"),
    "ClusterSpec": ("aks_gpu.specs", "ClusterSpec"),
    "GpuPoolSpec": ("aks_gpu.specs", "GpuPoolSpec"),
    "WorkloadSpec": ("aks_gpu.specs", "WorkloadSpec"),
    # What the platform's `pools` output holds per pool, and a toleration as the pools and namespaces pass it.
    "PoolOutput": ("aks_gpu.kube.workload_manifests", "PoolOutput"),
    "TolerationSpec": ("aks_gpu.kube.workload_manifests", "TolerationSpec"),
}

# Spelled out for linters and type checkers; tests/test_library.py keeps it the same as _PUBLIC.
__all__ = [
    "ClusterSpec",
    "GpuAdmissionPolicy",
    "GpuAdmissionPolicyArgs",
    "GpuCluster",
    "GpuClusterArgs",
    "GpuDevicePlugin",
    "GpuDevicePluginArgs",
    "GpuMonitoring",
    "GpuMonitoringArgs",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "GpuPlatform",
    "GpuPlatformArgs",
    "GpuPoolSpec",
    "GpuValidation",
    "GpuValidationArgs",
    "GpuWorkloadNamespace",
    "GpuWorkloadNamespaceArgs",
    "NvmeCache",
    "NvmeCacheArgs",
    "PlatformSpec",
    "PoolOutput",
    "StackSpec",
    "TolerationSpec",
    "WorkloadSpec",
    "__version__",
]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'aks_gpu' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
