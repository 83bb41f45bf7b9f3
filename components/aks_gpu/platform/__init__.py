"""The components that compose several features: ``GpuPlatform`` (everything, from one stack's config) and
``GpuDevicePlugin`` (the device plugins with the post-deploy check that runs on them)."""

from aks_gpu.platform.device_plugin import GpuDevicePlugin, GpuDevicePluginArgs
from aks_gpu.platform.stack import GpuPlatform, stack_exports

__all__ = ["GpuDevicePlugin", "GpuDevicePluginArgs", "GpuPlatform", "stack_exports"]
