"""Facts in components/aks_gpu/data/gpu_catalog.yaml and arm64_support.yaml that rules depend on, pinned to their sources."""

from __future__ import annotations

import pytest

from aks_gpu.aks_facts import arm64_support, kubernetes_calendar
from aks_gpu.catalog import Catalog
from aks_gpu.config.models import SmokeJobConfig
from aks_gpu.config.problems import ConfigError
from aks_gpu.kube.plugin_pins import default_pins
from aks_gpu.monitoring.exporter_pins import default_exporter_pins
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw


def test_nvme_capacities_follow_the_aks_nvme_guide(catalog: Catalog) -> None:
    # https://learn.microsoft.com/azure/aks/best-practices-storage-nvme: 894 GiB per NC A100 v4 disk, 28,610 GiB on ND v5.
    for name, disks, gib in [
        ("Standard_NC24ads_A100_v4", 1, 894),
        ("Standard_NC48ads_A100_v4", 2, 1788),
        ("Standard_NC96ads_A100_v4", 4, 3576),
        ("Standard_ND96isr_H100_v5", 8, 28610),
        ("Standard_ND96isr_H200_v5", 8, 28610),
    ]:
        nvme = catalog.vm_sizes[name].nvme
        assert nvme is not None and (nvme.disks, nvme.capacity_gib) == (disks, gib), name


@pytest.mark.parametrize("size", ["Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "Standard_NCC40ads_H100_v5"])
def test_no_nvme_cache_where_no_source_shows_nvme_disks(size: str) -> None:
    raw = minimal_raw(
        **{"aks-gpu:gpuPools": [{"name": "gpu", "vendor": "nvidia", "vmSize": size, "workload": "training", "nvmeCache": True}]}
    )
    with pytest.raises(ConfigError) as caught:
        validate_stack(raw, "test", today=kubernetes_calendar().read_on)
    assert any(p.path == "aks-gpu:gpuPools[0].nvmeCache" and "no local NVMe" in p.message for p in caught.value.errors)


def test_the_current_sizes_are_known(catalog: Catalog) -> None:
    grace = ["Standard_ND128isr_NDR_GB200_v6", "Standard_ND128isr_GB300_v6", "Standard_ND128isrG5_GB300_v6"]
    for name in grace:
        size = catalog.vm_sizes[name]
        assert size.cpu_architecture == "arm64" and size.gpu_count == 4 and size.nvme is not None
    assert catalog.vm_sizes["Standard_NC128ds_xl_RTXPRO6000BSE_v6"].gpu.memory_gib == 96
    assert catalog.vm_sizes["Standard_NCC40ads_H100_v5"].gpu.mig == {}
    # AKS documents MIG on A100, H100 and H200 only.
    assert all(not catalog.vm_sizes[name].gpu.mig for name in grace)
    assert all(size.cpu_architecture == "x86_64" for name, size in catalog.vm_sizes.items() if name not in grace)


def test_every_size_names_its_size_page(catalog: Catalog) -> None:
    for size in catalog.vm_sizes.values():
        assert size.source.startswith("https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/"), size.name


def test_the_arm64_data_speaks_of_the_pins_the_platform_deploys() -> None:
    """Bumping a pin without checking the new one for arm64 fails here, not on a Grace node."""
    facts, pins = arm64_support(), default_pins()
    assert facts["nvidia-device-plugin"].image == pins.nvidia_device_plugin_image
    assert (facts["nvidia-gpu-operator"].chart, facts["nvidia-gpu-operator"].version) == (
        pins.nvidia_gpu_operator.chart,
        pins.nvidia_gpu_operator.version,
    )
    assert facts["smoke-job-cuda"].image == SmokeJobConfig().image
    assert facts["dcgm-exporter"].image == default_exporter_pins().dcgm_image
