"""Node labels a GPU pool needs when the NVIDIA GPU Operator manages it. Pure; config in, labels out.

Kept free of ``components.model`` so that ``resolve_pool`` can merge these into a pool's node labels.

- ``nvidia.com/device-plugin.config=<pool>`` makes the operator's device plugin pick this pool's config from the
  ConfigMap GpuDevicePlugin fills (one key per pool), so pools can differ in time-slicing.
- On a pool where AKS installs the driver (``gpuDriver: Install``), ``nvidia.com/gpu.deploy.driver=false`` and
  ``nvidia.com/gpu.deploy.container-toolkit=false`` keep the operator's driver and toolkit off it: AKS-managed
  and operator-managed drivers exclude each other on a node
  (https://azure.github.io/aks-rdma-infiniband/configurations/gpu-drivers). The operator schedules each operand
  by such ``nvidia.com/gpu.deploy.<operand>`` labels
  (https://github.com/NVIDIA/gpu-operator/blob/main/assets/state-device-plugin/0500_daemonset.yaml).
"""

from __future__ import annotations

from components.config.models import GpuPoolConfig, StackConfig

DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
DEPLOY_DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"
DEPLOY_TOOLKIT_LABEL = "nvidia.com/gpu.deploy.container-toolkit"


def operator_node_labels(pool: GpuPoolConfig, config: StackConfig) -> dict[str, str]:
    if pool.vendor != "nvidia" or config.device_plugin.mode != "gpu-operator":
        return {}
    labels = {DEVICE_PLUGIN_CONFIG_LABEL: pool.name}
    if pool.gpu_driver == "Install":
        labels |= {DEPLOY_DRIVER_LABEL: "false", DEPLOY_TOOLKIT_LABEL: "false"}
    return labels
