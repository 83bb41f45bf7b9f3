"""The config's enum values are spelled exactly as pulumi_azure_native.containerservice spells them."""

from __future__ import annotations

import typing
from enum import Enum
from typing import Any

import pytest
from pulumi_azure_native import containerservice as cs

from aks_gpu.config import models


def literal_values(annotation: Any) -> set[str]:
    values: set[str] = set()
    for arg in typing.get_args(annotation) or ():
        values |= literal_values(arg)
    if typing.get_origin(annotation) is typing.Literal:
        values |= set(typing.get_args(annotation))
    return values


def field_values(model: type[models.ConfigModel], field: str) -> set[str]:
    return literal_values(model.model_fields[field].annotation)


def enum_values(enum: type[Enum]) -> set[str]:
    return {member.value for member in enum}


@pytest.mark.parametrize(
    ("model", "field", "enum"),
    [
        (models.GpuPoolConfig, "mig_profile", cs.GPUInstanceProfile),
        (models.GpuPoolConfig, "gpu_driver", cs.GPUDriver),
        (models.GpuPoolConfig, "os_disk_type", cs.OSDiskType),
        (models.GpuPoolConfig, "spot_eviction_policy", cs.ScaleSetEvictionPolicy),
        (models.ClusterConfig, "upgrade_channel", cs.UpgradeChannel),
        (models.ClusterConfig, "node_os_upgrade_channel", cs.NodeOSUpgradeChannel),
        (models.ClusterConfig, "network_policy", cs.NetworkPolicy),
        (models.ClusterConfig, "sku_tier", cs.ManagedClusterSKUTier),
        (models.MaintenanceWindow, "day_of_week", cs.WeekDay),
    ],
)
def test_config_values_are_provider_enum_values(model: type[models.ConfigModel], field: str, enum: type[Enum]) -> None:
    ours = field_values(model, field)
    assert ours, f"{model.__name__}.{field} has no literal values"
    assert ours <= enum_values(enum), f"not in {enum.__name__}: {ours - enum_values(enum)}"


def test_mig_profiles_cover_every_provider_value() -> None:
    assert field_values(models.GpuPoolConfig, "mig_profile") == enum_values(cs.GPUInstanceProfile)


def test_os_skus_are_provider_values() -> None:
    assert field_values(models.GpuPoolConfig, "os_sku") <= enum_values(cs.OSSKU)
