"""The node labels a GPU pool's nodes carry beyond placement, for the agents that read them. Pure: config in, labels
out. ``resolve_pool`` merges them into a pool's node labels (AKS puts them on every node of the pool through the agent
pool's ``nodeLabels``); the keys are in ``components/aks_gpu/naming.py``.

- ``nvidia.com/device-plugin.config=<pool>`` on every NVIDIA pool, in both device plugin modes. The device plugin's
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
- With the quarantine engine deployed (remediation.mode dry-run or on), on an NVIDIA pool where AKS installs the
  driver: ``nvidia.com/gpu.present=true``. NVSentinel's kernel-log monitor schedules only on nodes its labeler marks
  ``nvsentinel.dgxc.nvidia.com/driver.installed=true``, which it does beside a GPU Operator driver pod or, with
  ``assumeDriverInstalled``, on nodes carrying this label (components/aks_gpu/data/remediation.yaml, labeler). AKS
  runs no GPU Feature Discovery, so without it the monitor has no pod on these pools.
- Azure Container Storage v1 runs its I/O engine only on nodes labelled ``acstor.azure.com/io-engine=acstor``
  (https://learn.microsoft.com/azure/storage/container-storage/use-container-storage-with-local-disk-version-1);
  v2 needs no label.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from aks_gpu.config.models import CpuPoolConfig, GpuPoolConfig, PlatformConfig
from aks_gpu.naming import (
    DEPLOY_DRIVER_LABEL,
    DEPLOY_TOOLKIT_LABEL,
    DEVICE_PLUGIN_CONFIG_LABEL,
    GPU_PRESENT_LABEL,
    POOL_LABEL,
    V1_IO_ENGINE_LABEL,
    serves_label,
)
from aks_gpu.resolved.exemptions import remediation_runs

V1_IO_ENGINE_VALUE = "acstor"


def plugin_config_name(pool: GpuPoolConfig) -> str:
    """The name of the pool's device plugin config: its ConfigMap key and its nodes' label value."""
    return pool.name


def plugin_node_labels(pool: GpuPoolConfig, config: PlatformConfig) -> dict[str, str]:
    if pool.vendor != "nvidia":
        return {}
    labels = {DEVICE_PLUGIN_CONFIG_LABEL: plugin_config_name(pool)}
    if config.device_plugin.mode == "gpu-operator" and pool.gpu_driver == "Install":
        labels |= {DEPLOY_DRIVER_LABEL: "false", DEPLOY_TOOLKIT_LABEL: "false"}
    if remediation_runs(config) and pool.effective_gpu_driver(config.device_plugin.mode) == "Install":
        labels |= {GPU_PRESENT_LABEL: "true"}
    return labels


def nvme_node_labels(flavour: Literal["v2", "v1"]) -> dict[str, str]:
    """The extra node labels an NVMe-cache pool needs: v1's I/O-engine label, nothing for v2."""
    if flavour == "v1":
        return {V1_IO_ENGINE_LABEL: V1_IO_ENGINE_VALUE}
    return {}


def cpu_pool_labels(pool: CpuPoolConfig, workload_types: Iterable[str]) -> dict[str, str]:
    """The CPU pool's node labels: its name, and every workload type it serves (all of the stack's)."""
    return {POOL_LABEL: pool.name, **{serves_label(kind): "true" for kind in sorted(set(workload_types))}}
