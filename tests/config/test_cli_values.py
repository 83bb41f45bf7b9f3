"""What ``pulumi config set --path`` stores: ``true``/``false`` become booleans and base-10 digits without a
leading zero become integers (pulumi/pulumi ``sdk/go/common/resource/config/object.go`` ``coerce``, v3.259.0),
and the program gets the object as JSON text in ``PULUMI_CONFIG``. String fields take them back as text, one
test per kind of key; what is still wrong stays refused with the key named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aks_gpu.config.models import GpuPoolConfig
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw

SOURCE = "stacks/Pulumi.test.yaml"
CLUSTER = {"resourceGroup": "rg-test", "name": "aks-test"}
POOL = {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training", "maxCount": 2}


def as_pulumi_hands_it_over(**overrides: Any) -> dict[str, Any]:
    """A raw config the way the Python language host passes it: structured values as JSON text."""
    return {key: json.dumps(value) if not isinstance(value, str) else value for key, value in minimal_raw(**overrides).items()}


def pool_after(**fields: Any) -> GpuPoolConfig:
    raw = as_pulumi_hands_it_over(**{"aks-gpu:gpuPools": [POOL | fields]})
    return validate_stack(raw, SOURCE).config.gpu_pools[0]


def test_a_scalar_string_key_takes_the_cli_integer() -> None:
    # pulumi config set --path 'aks-gpu:gpuPools[0].upgrade.maxSurge' 2
    assert pool_after(upgrade={"maxSurge": 2}).upgrade.max_surge == "2"


def test_list_items_take_cli_integers() -> None:
    # pulumi config set --path 'aks-gpu:gpuPools[0].zones[0]' 1 (and [1] 2)
    assert pool_after(zones=[1, 2]).zones == ("1", "2")
    raw = as_pulumi_hands_it_over(**{"aks-gpu:cluster": CLUSTER | {"systemPool": {"zones": [3]}}})
    assert validate_stack(raw, SOURCE).config.cluster.system_pool.zones == ("3",)


def test_map_values_take_cli_integers_and_booleans() -> None:
    # pulumi config set --path 'aks-gpu:gpuPools[0].labels.tier' 1 ; ... labels.preemptible true
    assert pool_after(labels={"tier": 1, "preemptible": True, "off": False}).labels == {
        "tier": "1",
        "preemptible": "true",
        "off": "false",
    }
    raw = as_pulumi_hands_it_over(**{"aks-gpu:cluster": CLUSTER | {"tags": {"costCenter": 4711}}})
    assert validate_stack(raw, SOURCE).config.cluster.tags == {"costCenter": "4711"}


def test_quantities_take_cli_integers() -> None:
    # pulumi config set --path 'aks-gpu:workloads[0].quota.cpu' 64
    workload = {"name": "team-a", "type": "training", "gpuQuota": 2, "quota": {"cpu": 64}, "defaultRequests": {"cpu": 1}}
    config = validate_stack(as_pulumi_hands_it_over(**{"aks-gpu:workloads": [workload]}), SOURCE).config.workloads[0]
    assert (config.quota.cpu, config.default_requests.cpu) == ("64", "1")


def test_a_version_takes_a_cli_integer() -> None:
    # pulumi config set --path 'aks-gpu:gpuPools[0].minDriverVersion' 570
    assert pool_after(minDriverVersion=570).min_driver_version == "570"


def test_what_the_text_does_not_allow_is_still_refused_with_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        pool_after(upgrade={"maxSurge": -1})
    [problem] = caught.value.errors
    assert problem.path == "aks-gpu:gpuPools[0].upgrade.maxSurge" and problem.message.startswith("'-1' is not allowed")
    with pytest.raises(ConfigError) as caught:
        pool_after(upgrade={"maxSurge": True})
    assert caught.value.errors[0].message.startswith("'true' is not allowed")


def test_number_fields_are_left_alone() -> None:
    # Only string fields read numbers back as text: a count given as text is still refused.
    with pytest.raises(ConfigError) as caught:
        pool_after(maxCount="two")
    assert caught.value.errors[0].path == "aks-gpu:gpuPools[0].maxCount"
