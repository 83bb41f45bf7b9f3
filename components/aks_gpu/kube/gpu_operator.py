"""The NVIDIA and AMD GPU Operators as Helm releases (devicePlugin.mode / amdMode: gpu-operator). Pure.

Values are derived from the pools like the DaemonSets are: the operands tolerate every taint the pools carry,
the operators' own Deployments tolerate the AKS system pool's ``CriticalAddonsOnly`` taint (every node of this
cluster is tainted: the system pool so, the GPU pools with their vendor taint), and the driver is installed by
the operator only for pools where AKS installs none.

NVIDIA values: https://github.com/NVIDIA/gpu-operator/blob/main/deployments/gpu-operator/values.yaml
AMD values:    https://github.com/ROCm/gpu-operator/blob/main/helm-charts-k8s/templates/default-deviceconfig.yaml
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from aks_gpu.kube.nvidia_plugin import config_text, pool_configs
from aks_gpu.kube.plugin_pins import ChartPin, PluginPins
from aks_gpu.naming import ACCELERATOR_LABEL, GPU_NAMESPACE, platform_object_name
from aks_gpu.resolved.model import MIG_CONFIG_PREFIX, SYSTEM_POOL_TOLERATION, PlatformModel, tolerations_for


def system_pool_tolerations() -> list[dict[str, str]]:
    """The system pool's CriticalAddonsOnly=true:NoSchedule (components/aks_gpu/azure/cluster.py), tolerated."""
    return [SYSTEM_POOL_TOLERATION.to_kube()]


NVIDIA_RELEASE = "gpu-operator"
AMD_RELEASE = "amd-gpu-operator"
NVIDIA_PLUGIN_CONFIG_MAP = "nvidia-device-plugin-configs"
DEFAULT_PLUGIN_CONFIG = "default"
# The mig-parted configs for pools the operator partitions (model.mig_partitioner == "gpu-operator"); the chart
# creates the ConfigMap from migManager.config.data (deployments/gpu-operator/templates/mig_config.yaml).
MIG_PARTED_CONFIG_MAP = platform_object_name("mig-parted-config")


def mig_parted_config(model: PlatformModel) -> dict[str, Any] | None:
    """One "all-<profile>" config per MIG profile the operator partitions, in mig-parted's `version: v1` format
    (NVIDIA/gpu-operator assets/state-mig-manager/0400_configmap.yaml), plus all-disabled; None without such pools."""
    counts = {
        pool.mig_profile: pool.mig_instances_per_gpu
        for pool in model.pools_of("nvidia")
        if pool.mig_partitioner == "gpu-operator" and pool.mig_profile and pool.mig_instances_per_gpu
    }
    if not counts:
        return None
    configs: dict[str, Any] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for profile, count in sorted(counts.items()):
        configs[f"{MIG_CONFIG_PREFIX}{profile}"] = [{"devices": "all", "mig-enabled": True, "mig-devices": {profile: count}}]
    return {"version": "v1", "mig-configs": configs}


@dataclass(frozen=True)
class ReleaseSpec:
    """One Helm release: what ``helm install <name> <repo>/<chart> --version <version> -n <namespace>`` takes."""

    name: str
    chart: ChartPin
    namespace: str
    values: dict[str, Any]


# Defence in depth where the operator owns the container toolkit: the toolkit ignores NVIDIA_VISIBLE_DEVICES from
# unprivileged containers, and the device plugin passes the allocated GPUs as volume mounts instead, so a pod cannot
# ask for GPUs by environment variable (or inherit "all" from a CUDA base image). Options of the toolkit's
# config.toml and of the device plugin:
# https://github.com/NVIDIA/nvidia-container-toolkit/tree/main/cmd/nvidia-container-runtime#configuration,
# https://github.com/NVIDIA/k8s-device-plugin#configuration-option-details (DEVICE_LIST_STRATEGY).
TOOLKIT_HARDENING = [
    {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
    {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"},
]
DEVICE_LIST_HARDENING = [{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}]


def device_list_hardening(model: PlatformModel) -> bool:
    """Volume mounts need the toolkit to accept them on every node the one plugin DaemonSet serves: only when the
    operator installs the toolkit on every NVIDIA pool (no pool with an AKS-managed driver and toolkit)."""
    pools = model.pools_of("nvidia")
    return bool(pools) and all(pool.gpu_driver == "None" for pool in pools)


def nvidia_operator_values(model: PlatformModel, dcgm_exporter: Mapping[str, Any]) -> dict[str, Any]:
    """The NVIDIA GPU Operator's values; ``dcgm_exporter`` is its DCGM exporter's, which continuous validation
    configures (``aks_gpu.monitoring.exporters.dcgm_operator_values``)."""
    pools = model.pools_of("nvidia")
    # AKS-managed drivers and operator-managed drivers exclude each other on a node
    # (https://azure.github.io/aks-rdma-infiniband/configurations/gpu-drivers): the operator installs the driver
    # and the container toolkit only when some pool has AKS install none.
    operator_driver = any(pool.gpu_driver == "None" for pool in pools)
    # Per-pool plugin configs, picked per node by the nvidia.com/device-plugin.config label (plugin_node_labels),
    # as in daemonset mode; the default (for a node without the label) is the pools' common config when they
    # share one.
    configs = pool_configs(pools, model)
    distinct = set(configs.values())
    default = next(iter(distinct)) if len(distinct) == 1 else config_text({"version": "v1", "flags": {"migStrategy": "none"}})
    gpu_tolerations = tolerations_for(model.pools)
    return {
        "operator": {"tolerations": system_pool_tolerations()},
        "daemonsets": {"priorityClassName": "system-node-critical", "tolerations": tolerations_for(pools)},
        "mig": {"strategy": model.mig_strategy},
        "driver": {"enabled": operator_driver},
        "toolkit": {"enabled": operator_driver, **({"env": TOOLKIT_HARDENING} if device_list_hardening(model) else {})},
        "devicePlugin": {
            "enabled": True,
            **({"env": DEVICE_LIST_HARDENING} if device_list_hardening(model) else {}),
            "config": {
                "create": True,
                "name": NVIDIA_PLUGIN_CONFIG_MAP,
                "default": DEFAULT_PLUGIN_CONFIG,
                "data": {DEFAULT_PLUGIN_CONFIG: default, **configs},
            },
        },
        # MIG manager on, but with no default MIG config: unlabelled nodes keep the partitions AKS made from
        # the pool's gpuInstanceProfile instead of getting "all-disabled" (the CRD allows "" for this):
        # https://github.com/NVIDIA/gpu-operator/blob/main/api/nvidia/v1/clusterpolicy_types.go
        # Pools whose driver the operator owns are partitioned by the MIG manager from their nvidia.com/mig.config
        # label (components/aks_gpu/resolved/model.py), against the configs shipped here.
        "migManager": {"enabled": True, "config": mig_manager_config(model)},
        # GPU metrics with the counters the alert rules read, scraped by GpuMonitoring (components/aks_gpu/monitoring/).
        "dcgmExporter": dict(dcgm_exporter),
        # NFD labels the GPU nodes the operands select; its workers must reach every GPU pool (AMD pools too,
        # when this NFD also serves the AMD operator), its master and GC run on the system pool.
        "node-feature-discovery": {
            "worker": {"tolerations": gpu_tolerations},
            "master": {"tolerations": system_pool_tolerations()},
            "gc": {"tolerations": system_pool_tolerations()},
        },
    }


def mig_manager_config(model: PlatformModel) -> dict[str, Any]:
    parted = mig_parted_config(model)
    if parted is None:
        return {"default": ""}
    text = yaml.safe_dump(parted, sort_keys=False, default_flow_style=False)
    return {"default": "", "create": True, "name": MIG_PARTED_CONFIG_MAP, "data": {"config.yaml": text}}


def amd_operator_values(model: PlatformModel, install_nfd: bool) -> dict[str, Any]:
    pools = model.pools_of("amd")

    def tolerations() -> list[dict[str, str]]:
        return tolerations_for(pools)

    operator_driver = any(pool.gpu_driver == "None" for pool in pools)
    nfd: dict[str, Any] = {"enabled": install_nfd}
    if install_nfd:
        nfd |= {
            "worker": {"tolerations": tolerations()},
            "master": {"tolerations": system_pool_tolerations()},
            "gc": {"tolerations": system_pool_tolerations()},
        }
    return {
        "node-feature-discovery": nfd,
        "kmm": {"enabled": True},
        "installdefaultNFDRule": True,
        "crds": {"defaultCR": {"install": True, "upgrade": True}},
        "deviceConfig": {
            "spec": {
                # Every AMD pool carries accelerator=amd (components/aks_gpu/resolved/model.py): exactly the nodes to manage.
                "selector": {ACCELERATOR_LABEL: "amd"},
                # The out-of-tree amdgpu driver needs the inbox module blacklisted; KMM pushes the image it builds to
                # devicePlugin.amdDriverImage (the rules refuse the mode without it, and without cert-manager).
                "driver": {
                    "enable": operator_driver,
                    "blacklist": operator_driver,
                    "tolerations": tolerations(),
                    **(
                        {"image": model.config.device_plugin.amd_driver_image}
                        if model.config.device_plugin.amd_driver_image
                        else {}
                    ),
                },
                "devicePlugin": {
                    "devicePluginTolerations": tolerations(),
                    "enableNodeLabeller": True,
                    "nodeLabellerTolerations": tolerations(),
                },
                "metricsExporter": {"enable": True, "tolerations": tolerations()},
            }
        },
    }


def operator_releases(model: PlatformModel, pins: PluginPins, dcgm_exporter: Mapping[str, Any]) -> list[ReleaseSpec]:
    """The operator releases the stack asks for (NVIDIA first: its NFD also serves the AMD operator); ``dcgm_exporter``
    is the NVIDIA operator's DCGM exporter values."""
    plugin = model.config.device_plugin
    releases = []
    nvidia = bool(model.pools_of("nvidia")) and plugin.mode == "gpu-operator"
    if nvidia:
        values = nvidia_operator_values(model, dcgm_exporter)
        releases.append(ReleaseSpec(NVIDIA_RELEASE, pins.nvidia_gpu_operator, GPU_NAMESPACE, values))
    if model.pools_of("amd") and plugin.amd_mode == "gpu-operator":
        # One NFD per cluster: two releases would both own NFD's CRDs and Helm refuses the second.
        values = amd_operator_values(model, install_nfd=not nvidia)
        releases.append(ReleaseSpec(AMD_RELEASE, pins.amd_gpu_operator, GPU_NAMESPACE, values))
    return releases
