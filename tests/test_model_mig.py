"""What a pool exposes to the scheduler, for every catalog GPU and MIG profile, against NVIDIA's MIG tables.

``schedulable_resource`` is the one function quotas, admission and validation use; this walks
``components/aks_gpu/data/gpu_catalog.yaml`` and checks every size x profile x strategy against an independent
transcription of the NVIDIA MIG user guide ("Supported MIG Profiles"):
https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html
"""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.catalog import Catalog, load_catalog
from aks_gpu.config.models import GpuPoolConfig
from aks_gpu.naming import Vendor
from aks_gpu.resolved.model import effective_time_slicing, schedulable_resource

# GPU instance profile per AKS gpuInstanceProfile (MIG<n>g -> the <n>g profile) and how many fit on one GPU.
NVIDIA_MIG_TABLES: dict[str, dict[str, tuple[str, int]]] = {
    "A100-40GB": {
        "MIG1g": ("1g.5gb", 7),
        "MIG2g": ("2g.10gb", 3),
        "MIG3g": ("3g.20gb", 2),
        "MIG4g": ("4g.20gb", 1),
        "MIG7g": ("7g.40gb", 1),
    },
    "A100-80GB": {
        "MIG1g": ("1g.10gb", 7),
        "MIG2g": ("2g.20gb", 3),
        "MIG3g": ("3g.40gb", 2),
        "MIG4g": ("4g.40gb", 1),
        "MIG7g": ("7g.80gb", 1),
    },
    "H100-80GB": {
        "MIG1g": ("1g.10gb", 7),
        "MIG2g": ("2g.20gb", 3),
        "MIG3g": ("3g.40gb", 2),
        "MIG4g": ("4g.40gb", 1),
        "MIG7g": ("7g.80gb", 1),
    },
    "H100-NVL-94GB": {
        "MIG1g": ("1g.12gb", 7),
        "MIG2g": ("2g.24gb", 3),
        "MIG3g": ("3g.47gb", 2),
        "MIG4g": ("4g.47gb", 1),
        "MIG7g": ("7g.94gb", 1),
    },
    "H200-141GB": {
        "MIG1g": ("1g.18gb", 7),
        "MIG2g": ("2g.35gb", 3),
        "MIG3g": ("3g.71gb", 2),
        "MIG4g": ("4g.71gb", 1),
        "MIG7g": ("7g.141gb", 1),
    },
}
# GPUs without MIG: a MIG profile on them is refused by the rules; they expose whole GPUs only.
# Without MIG in the catalog: no MIG hardware, or MIG AKS does not offer (gpuInstanceProfile is documented for A100,
# H100 and H200 only: https://learn.microsoft.com/azure/aks/gpu-multi-instance), or undocumented (confidential H100).
NO_MIG = {"T4", "A10", "MI300X", "GB200", "GB300", "RTX-PRO-6000-BSE", "H100-NVL-94GB-CC"}


def pool(vm_size: str, vendor: Vendor = "nvidia", **extra: Any) -> GpuPoolConfig:
    return GpuPoolConfig(name="p", vendor=vendor, vm_size=vm_size, workload="w", **extra)


def mig_cases(catalog: Catalog) -> list[tuple[str, str]]:
    return [
        (size.name, profile)
        for size in catalog.vm_sizes.values()
        if size.gpu.key in NVIDIA_MIG_TABLES
        for profile in NVIDIA_MIG_TABLES[size.gpu.key]
    ]


CATALOG = load_catalog()


def test_every_catalog_gpu_has_a_reference_row() -> None:
    """A GPU added to the catalog must be added here too, with its MIG table or as a GPU without MIG."""
    for key, model in CATALOG.gpu_models.items():
        if model.supports_mig:
            assert key in NVIDIA_MIG_TABLES, f"{key}: add its MIG table from the NVIDIA MIG user guide"
        else:
            assert key in NO_MIG, f"{key}: MIG-less GPUs are listed in NO_MIG"


@pytest.mark.parametrize(("gpu", "profile"), [(g, p) for g, table in NVIDIA_MIG_TABLES.items() for p in table])
def test_catalog_mig_table_matches_nvidia(gpu: str, profile: str) -> None:
    instance = CATALOG.gpu_models[gpu].mig[profile]
    assert (instance.profile, instance.max_instances) == NVIDIA_MIG_TABLES[gpu][profile]


@pytest.mark.parametrize(("vm_size", "profile"), mig_cases(CATALOG))
def test_single_strategy_exposes_whole_gpu_resource_times_slices(vm_size: str, profile: str) -> None:
    size = CATALOG.vm_sizes[vm_size]
    _, per_gpu = NVIDIA_MIG_TABLES[size.gpu.key][profile]
    resource = schedulable_resource(pool(vm_size, mig_profile=profile), "single", CATALOG)
    assert resource.name == "nvidia.com/gpu"
    assert resource.count_per_node == size.gpu_count * per_gpu


@pytest.mark.parametrize(("vm_size", "profile"), mig_cases(CATALOG))
def test_mixed_strategy_exposes_the_profile_resource(vm_size: str, profile: str) -> None:
    size = CATALOG.vm_sizes[vm_size]
    name, per_gpu = NVIDIA_MIG_TABLES[size.gpu.key][profile]
    resource = schedulable_resource(pool(vm_size, mig_profile=profile), "mixed", CATALOG)
    assert resource.name == f"nvidia.com/mig-{name}"
    assert resource.count_per_node == size.gpu_count * per_gpu


@pytest.mark.parametrize(
    ("vm_size", "profile", "strategy", "name", "count"),
    [
        ("Standard_ND96asr_v4", "MIG1g", "single", "nvidia.com/gpu", 56),
        ("Standard_NC24ads_A100_v4", "MIG1g", "mixed", "nvidia.com/mig-1g.10gb", 7),
        ("Standard_ND96isr_H100_v5", "MIG3g", "mixed", "nvidia.com/mig-3g.40gb", 16),
        ("Standard_ND96isr_H100_v5", "MIG3g", "single", "nvidia.com/gpu", 16),
        ("Standard_NC40ads_H100_v5", "MIG7g", "mixed", "nvidia.com/mig-7g.94gb", 1),
        ("Standard_ND96isr_H200_v5", "MIG2g", "mixed", "nvidia.com/mig-2g.35gb", 24),
    ],
)
def test_worked_examples(vm_size: str, profile: str, strategy: str, name: str, count: int) -> None:
    resource = schedulable_resource(pool(vm_size, mig_profile=profile), strategy, CATALOG)  # type: ignore[arg-type]
    assert (resource.name, resource.count_per_node) == (name, count)


@pytest.mark.parametrize("vm_size", sorted(n for n, s in CATALOG.vm_sizes.items() if s.gpu.key in NO_MIG))
def test_sizes_without_mig_expose_whole_gpus_of_their_vendor(vm_size: str) -> None:
    size = CATALOG.vm_sizes[vm_size]
    for strategy in ("single", "mixed"):
        resource = schedulable_resource(pool(vm_size, vendor=size.vendor), strategy, CATALOG)  # type: ignore[arg-type]
        assert resource.name == f"{size.vendor}.com/gpu"
        assert resource.count_per_node == size.gpu_count


@pytest.mark.parametrize(
    ("vm_size", "pool_replicas", "stack_replicas", "expected"),
    [
        ("Standard_NC4as_T4_v3", 4, None, 4),  # dev: one T4 shared four ways
        ("Standard_NC64as_T4_v3", None, 2, 8),  # stack default applies to a pool without its own setting
        ("Standard_NC64as_T4_v3", 3, 2, 12),  # the pool's own setting wins
        ("Standard_NC24ads_A100_v4", None, None, 1),  # no sharing: whole GPUs
    ],
)
def test_time_slicing_multiplies_whole_gpus(
    vm_size: str, pool_replicas: int | None, stack_replicas: int | None, expected: int
) -> None:
    config = pool(vm_size, time_slicing_replicas=pool_replicas)
    resource = schedulable_resource(config, "single", CATALOG, stack_replicas)
    assert (resource.name, resource.count_per_node) == ("nvidia.com/gpu", expected)


def test_stack_time_slicing_does_not_reach_mig_or_amd_pools() -> None:
    mig = pool("Standard_NC24ads_A100_v4", mig_profile="MIG1g")
    assert effective_time_slicing(mig, 4) is None
    assert schedulable_resource(mig, "single", CATALOG, 4).count_per_node == 7
    amd = pool("Standard_ND96isr_MI300X_v5", vendor="amd")
    assert effective_time_slicing(amd, 4) is None
    assert schedulable_resource(amd, "single", CATALOG, 4).count_per_node == 8
