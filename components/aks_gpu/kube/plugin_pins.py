"""The pinned device plugin images and GPU operator charts (``data/device_plugins.yaml``), with stack overrides.

Pure: the file is read once; nothing here knows about Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from aks_gpu.config.models import DevicePluginConfig
from aks_gpu.data_files import load_yaml

PINS_FILE = Path(__file__).resolve().parents[1] / "data" / "device_plugins.yaml"


@dataclass(frozen=True)
class ChartPin:
    repo: str
    chart: str
    version: str


@dataclass(frozen=True)
class PluginPins:
    nvidia_device_plugin_image: str
    nvidia_gpu_operator: ChartPin
    amd_device_plugin_image: str
    amd_node_labeller_image: str
    amd_gpu_operator: ChartPin


@dataclass(frozen=True)
class PluginHealthChecks:
    """How the NVIDIA device plugin takes a faulty GPU out of allocatable (``nvidia.health_checks``)."""

    disable_env: str
    enable_env: str
    ignored_xids: tuple[int, ...]
    """Xids the plugin never marks a GPU unhealthy for ("application errors")."""


@lru_cache(maxsize=1)
def plugin_health_checks() -> PluginHealthChecks:
    checks: dict[str, Any] = load_yaml(PINS_FILE)["nvidia"]["health_checks"]
    return PluginHealthChecks(checks["disable_env"], checks["enable_env"], tuple(checks["ignored_xids"]))


@lru_cache(maxsize=1)
def default_pins() -> PluginPins:
    raw: dict[str, Any] = load_yaml(PINS_FILE)
    nvidia, amd = raw["nvidia"], raw["amd"]
    return PluginPins(
        nvidia_device_plugin_image=nvidia["device_plugin_image"],
        nvidia_gpu_operator=ChartPin(**nvidia["gpu_operator"]),
        amd_device_plugin_image=amd["device_plugin_image"],
        amd_node_labeller_image=amd["node_labeller_image"],
        amd_gpu_operator=ChartPin(**amd["gpu_operator"]),
    )


def resolve_pins(config: DevicePluginConfig) -> PluginPins:
    """The pins with the stack's overrides applied (an override replaces the whole image reference)."""
    pins = default_pins()
    return PluginPins(
        nvidia_device_plugin_image=config.nvidia_image or pins.nvidia_device_plugin_image,
        nvidia_gpu_operator=ChartPin(
            repo=pins.nvidia_gpu_operator.repo,
            chart=pins.nvidia_gpu_operator.chart,
            version=config.gpu_operator_chart_version or pins.nvidia_gpu_operator.version,
        ),
        amd_device_plugin_image=config.amd_image or pins.amd_device_plugin_image,
        amd_node_labeller_image=pins.amd_node_labeller_image,
        amd_gpu_operator=ChartPin(
            repo=pins.amd_gpu_operator.repo,
            chart=pins.amd_gpu_operator.chart,
            version=config.amd_operator_chart_version or pins.amd_gpu_operator.version,
        ),
    )
