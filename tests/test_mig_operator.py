"""GPU Operator mode with a MIG pool: who partitions the GPUs, and that the operator gets exactly the config the
pool's label names (issue: the pool got gpuInstanceProfile with driver None and an empty MIG default, so nothing
partitioned it and the smoke Job stayed Pending)."""

from __future__ import annotations

from typing import Any

import yaml

from aks_gpu.config.models import PlatformConfig
from aks_gpu.kube.gpu_operator import MIG_PARTED_CONFIG_MAP, nvidia_operator_values
from aks_gpu.monitoring.exporters import dcgm_operator_values
from aks_gpu.resolved.model import PlatformModel, resolve

INFER = {
    "name": "infer",
    "vendor": "nvidia",
    "vmSize": "Standard_NC24ads_A100_v4",
    "workload": "inference",
    "migProfile": "MIG1g",
}
TRAIN = {"name": "train", "vendor": "nvidia", "vmSize": "Standard_ND96asr_v4", "workload": "training", "migProfile": "MIG3g"}


def model(*pools: dict[str, Any], mode: str = "gpu-operator") -> PlatformModel:
    return resolve(PlatformConfig.model_validate({"gpuPools": list(pools), "devicePlugin": {"mode": mode}}))


def test_the_mig_manager_gets_a_config_for_every_label_it_will_read() -> None:
    platform = model(INFER, TRAIN)
    config = nvidia_operator_values(platform, dcgm_operator_values(platform))["migManager"]["config"]
    assert config["create"] is True and config["name"] == MIG_PARTED_CONFIG_MAP
    # Unlabelled nodes are left alone (an empty default is allowed by the ClusterPolicy CRD).
    assert config["default"] == ""
    parted = yaml.safe_load(config["data"]["config.yaml"])
    assert parted["version"] == "v1"
    for pool in platform.pools:
        name = pool.node_labels["nvidia.com/mig.config"]
        [layout] = parted["mig-configs"][name]
        # Every GPU of the node cut into as many instances as the catalog says fit (A100 80GB 1g.10gb: 7).
        assert layout == {"devices": "all", "mig-enabled": True, "mig-devices": {pool.mig_profile: pool.mig_instances_per_gpu}}
    assert parted["mig-configs"]["all-1g.10gb"][0]["mig-devices"] == {"1g.10gb": 7}
    assert parted["mig-configs"]["all-3g.20gb"][0]["mig-devices"] == {"3g.20gb": 2}


def test_the_schedulable_count_matches_what_the_mig_manager_makes() -> None:
    [pool] = model(INFER).pools
    assert pool.mig_partitioner == "gpu-operator" and pool.resource.count_per_node == 7


def test_pools_aks_partitions_ship_no_mig_config() -> None:
    aks_driver = {**INFER, "gpuDriver": "Install"}
    aks_managed = model(aks_driver)
    assert nvidia_operator_values(aks_managed, dcgm_operator_values(aks_managed))["migManager"]["config"] == {"default": ""}
    [pool] = model(INFER, mode="daemonset").pools
    assert pool.mig_partitioner == "aks" and "nvidia.com/mig.config" not in pool.node_labels
