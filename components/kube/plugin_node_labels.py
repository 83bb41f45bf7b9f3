"""Node labels the device plugin setup needs on a GPU pool's nodes. Pure: config in, labels out.

Kept free of ``components.model`` so that ``resolve_pool`` can merge these into a pool's node labels (AKS puts
them on every node of the pool through the agent pool's ``nodeLabels``).

- ``nvidia.com/device-plugin.config=<pool>`` on every NVIDIA pool, in both modes. The device plugin's
  config-manager (run by our ``nvidia-device-plugin-daemonset``, or by the GPU Operator's) reads this label on its
  own node and gives the plugin the ConfigMap file of that name; ``GpuDevicePlugin`` keys its ConfigMap by pool
  name. That is how one DaemonSet serves pools whose configs differ (a MIG pool, a time-sliced pool).
  https://github.com/NVIDIA/k8s-device-plugin/blob/main/cmd/config-manager/main.go (the label it watches)
- GPU Operator mode, on a pool where AKS installs the driver (``gpuDriver: Install``):
  ``nvidia.com/gpu.deploy.driver=false`` and ``nvidia.com/gpu.deploy.container-toolkit=false`` keep the
  operator's driver and toolkit off it: AKS-managed and operator-managed drivers exclude each other on a node
  (https://azure.github.io/aks-rdma-infiniband/configurations/gpu-drivers). The operator schedules each operand
  by such ``nvidia.com/gpu.deploy.<operand>`` labels
  (https://github.com/NVIDIA/gpu-operator/blob/main/assets/state-device-plugin/0500_daemonset.yaml).
"""

from __future__ import annotations

from components.config.models import GpuPoolConfig, PlatformConfig

# The keys live in components/naming.py with every other label the platform puts on GPU nodes.
from components.naming import DEPLOY_DRIVER_LABEL as DEPLOY_DRIVER_LABEL
from components.naming import DEPLOY_TOOLKIT_LABEL as DEPLOY_TOOLKIT_LABEL
from components.naming import DEVICE_PLUGIN_CONFIG_LABEL as DEVICE_PLUGIN_CONFIG_LABEL


def plugin_config_name(pool: GpuPoolConfig) -> str:
    """The name of the pool's device plugin config: its ConfigMap key and its nodes' label value."""
    return pool.name


def plugin_node_labels(pool: GpuPoolConfig, config: PlatformConfig) -> dict[str, str]:
    if pool.vendor != "nvidia":
        return {}
    labels = {DEVICE_PLUGIN_CONFIG_LABEL: plugin_config_name(pool)}
    if config.device_plugin.mode == "gpu-operator" and pool.gpu_driver == "Install":
        labels |= {DEPLOY_DRIVER_LABEL: "false", DEPLOY_TOOLKIT_LABEL: "false"}
    return labels
