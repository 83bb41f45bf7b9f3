"""What an AKS node of a VM size offers pods (aks_facts.node_resources, data/node_resources.yaml), checked against the
examples and table of AKS's "Node resource reservations" page and the default OS disk sizing of its storage concepts."""

from __future__ import annotations

import pytest

from aks_gpu.aks_facts import kube_reserved_cpu_millicores, node_resources, node_rules, os_disk_gib
from aks_gpu.catalog import load_catalog
from aks_gpu.config.models import CpuPoolConfig, SystemPool
from tests.conftest import STACK_NAMES, stack_config

KI_PER_GIB = 1024 * 1024


@pytest.mark.parametrize(("cores", "millicores"), [(1, 60), (2, 100), (4, 140), (8, 180), (16, 260), (32, 420), (64, 740)])
def test_the_cpu_reservation_is_the_pages_table(cores: int, millicores: int) -> None:
    assert kube_reserved_cpu_millicores(cores) == millicores


def test_between_and_past_the_table_the_cpu_reservation_follows_its_line() -> None:
    # Every row from 4 cores on is 100m + 10m per core: 24 vCPUs (NC24ads_A100_v4) and 96 (ND96isr_H100_v5) too.
    assert kube_reserved_cpu_millicores(24) == 340
    assert kube_reserved_cpu_millicores(96) == 1060
    assert kube_reserved_cpu_millicores(128) == 1380


def memory_reserved_mib(size: str, pods: int) -> int:
    found = node_resources(size, pods)
    assert found is not None
    return (int(found.capacity["memory"][:-2]) - int(found.allocatable["memory"][:-2])) // 1024


def test_memory_reserves_20_mib_per_pod_plus_50_and_the_eviction_threshold() -> None:
    # The page's first example: 30 pods reserve 20 x 30 + 50 = 650, and 100 Mi more for the eviction rule.
    assert memory_reserved_mib("Standard_D8ds_v5", 30) == 650 + 100


def test_memory_reservation_is_capped_at_a_quarter_of_the_memory() -> None:
    # The page's second example (4 GB, 70 pods: 25% is less than 20 x 70 + 50); D4ds_v5's 16 GiB at 250 pods: 4 GiB.
    assert memory_reserved_mib("Standard_D4ds_v5", 250) == 16 * 1024 // 4 + 100


@pytest.mark.parametrize(("vcpus", "gib"), [(4, 128), (8, 256), (24, 512), (96, 1024)])
def test_a_managed_os_disk_is_sized_by_vcpus(vcpus: int, gib: int) -> None:
    assert os_disk_gib(vcpus, "Managed", None, 2816) == gib


def test_an_os_disk_of_no_type_is_the_temp_disk_from_128_gib() -> None:
    assert os_disk_gib(8, None, None, 300) == 300
    assert os_disk_gib(2, None, None, 75) == 128  # too small a temp disk: the managed default
    assert os_disk_gib(8, None, 100, 300) == 100  # the size asked wins


def test_a_size_without_figures_has_no_computed_node() -> None:
    assert node_resources("Standard_Unrecorded_v9", 30) is None


def test_sizes_compare_without_case() -> None:
    lower, catalog = node_resources("standard_nd96isr_h100_v5", 30), node_resources("Standard_ND96isr_H100_v5", 30)
    assert lower is not None and catalog is not None and lower.allocatable == catalog.allocatable


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_size_a_shipped_stack_or_a_default_uses_has_figures(stack: str) -> None:
    config = stack_config(stack)
    sizes = {config.cluster.system_pool.vm_size, *(p.vm_size for p in config.gpu_pools), *(p.vm_size for p in config.cpu_pools)}
    sizes |= {SystemPool().vm_size, CpuPoolConfig(name="cpu").vm_size}
    assert [size for size in sorted(sizes) if node_rules().size(size) is None] == []


def test_a_temp_disk_is_recorded_once() -> None:
    catalog = load_catalog()
    twice = [name for name, figures in node_rules().sizes.items() if figures.temp_disk_gib and catalog.temp_disk_of(name)]
    assert twice == []
