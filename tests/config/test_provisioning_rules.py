"""AKS Automatic and node auto-provisioning in the config: which pools are NodePools, and what a NodePool cannot carry."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aks_gpu.aks_facts import kubernetes_calendar
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.model import resolve
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw

ON = kubernetes_calendar().read_on


def automatic_raw(**pool: Any) -> dict[str, Any]:
    raw = copy.deepcopy(minimal_raw())
    raw["aks-gpu:cluster"]["sku"] = "Automatic"
    raw["aks-gpu:gpuPools"][0].update(pool)
    return raw


def test_a_pool_on_automatic_is_a_nodepool_without_saying_so() -> None:
    config = validate_stack(automatic_raw(), "s", today=ON).config
    assert config.cluster.node_auto_provisioning
    assert [pool.provisioning for pool in resolve(config).pools] == ["nap"]


def test_a_pool_on_standard_stays_an_agent_pool() -> None:
    config = validate_stack(minimal_raw(), "s", today=ON).config
    assert not config.cluster.node_auto_provisioning
    assert [pool.provisioning for pool in resolve(config).pools] == ["agentPool"]


def test_standard_with_nap_takes_nap_pools() -> None:
    raw = minimal_raw()
    raw["aks-gpu:cluster"]["nodeProvisioning"] = "Auto"
    raw["aks-gpu:gpuPools"][0]["provisioning"] = "nap"
    config = validate_stack(raw, "s", today=ON).config
    assert [pool.provisioning for pool in resolve(config).pools] == ["nap"]


@pytest.mark.parametrize(
    ("pool", "key"),
    [
        ({"migProfile": "MIG3g"}, "migProfile"),
        ({"spot": True}, "spot"),
        ({"nvmeCache": True}, "nvmeCache"),
        ({"zones": ["1"]}, "zones"),
        ({"autoscaling": False, "count": 1}, "autoscaling"),
        ({"minCount": 1}, "minCount"),
    ],
)
def test_what_a_nodepool_cannot_carry_is_refused_not_dropped(pool: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_stack(automatic_raw(**pool), "s", today=ON)
    assert f"aks-gpu:gpuPools[0].{key}" in [problem.path for problem in caught.value.errors]
