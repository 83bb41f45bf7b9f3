"""The compute quota a stack needs (aks_gpu.azure.quota) and its facts (data/vm_quota_families.yaml): every size the
catalog knows is listed, known with its source or unknown, never guessed; the plan's needs follow from the facts and
the stack's pools."""

from __future__ import annotations

import pytest

from aks_gpu.azure.quota import (
    QuotaPlan,
    Usage,
    UsageShapeError,
    check_quota,
    load_quota_facts,
    quota_plan,
    read_usages,
)
from aks_gpu.catalog import load_catalog
from aks_gpu.config.models import CpuPoolConfig, SystemPool, surge_nodes
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw, stack_config

SHIPPED = ("dev", "prod", "amd")


def shipped_sizes() -> set[str]:
    """Every VM size a shipped stack's pools run: the system pool, the GPU pools and the CPU pools."""
    sizes: set[str] = set()
    for stack in SHIPPED:
        config = stack_config(stack)
        sizes.add(config.cluster.system_pool.vm_size)
        sizes |= {pool.vm_size for pool in config.gpu_pools} | {pool.vm_size for pool in config.cpu_pools}
    return sizes


def test_every_catalog_size_the_pool_defaults_and_the_shipped_sizes_have_quota_facts_or_say_unknown() -> None:
    facts = load_quota_facts()
    defaults = {SystemPool.model_fields["vm_size"].default, CpuPoolConfig.model_fields["vm_size"].default}
    wanted = {*load_catalog().vm_sizes, *defaults, *shipped_sizes()}
    assert wanted <= set(facts.sizes), f"sizes without quota facts: {sorted(wanted - set(facts.sizes))}"
    for name, entry in facts.sizes.items():
        known = entry.vcpus is not None and entry.family is not None
        unknown = entry.vcpus is None and entry.family is None and entry.local_name is None
        assert known or unknown, f"{name}: half known"
        assert (entry.source is not None) == known, f"{name}: a known fact names its source, an unknown one none"
        if known:
            assert entry.source and entry.source.startswith("https://"), name


def test_the_sizes_no_source_names_are_unknown_not_guessed() -> None:
    facts = load_quota_facts()
    unknown = sorted(name for name, entry in facts.sizes.items() if entry.vcpus is None)
    assert "Standard_ND128isrG5_GB300_v6" in unknown
    assert all("RTXPRO6000BSE" in name or "GB300" in name for name in unknown)


def test_a_size_not_in_the_facts_is_unknown_and_sizes_compare_without_case() -> None:
    facts = load_quota_facts()
    assert facts.size("standard_nd96isr_h100_v5").family == "standardNDSH100v5Family"
    assert facts.size("Standard_Made_Up_v9").vcpus is None


def test_prod_needs_the_h100_family_at_max_count_plus_its_surge_nodes() -> None:
    config = stack_config("prod")
    facts = load_quota_facts()
    plan = quota_plan(config)
    train = next(pool for pool in config.gpu_pools if pool.name == "train")
    inferfull = next(pool for pool in config.gpu_pools if pool.name == "inferfull")
    per_node = facts.size(train.vm_size).vcpus
    assert per_node == 96 and train.max_count == 4  # what the stack file says: 4 x ND96isr_H100_v5
    assert inferfull.vm_size == train.vm_size and inferfull.max_count == 2  # and 2 more for whole-GPU inference
    line = next(line for line in plan.lines if line.family == "standardNDSH100v5Family")
    assert line.local_name == "Standard NDSH100v5 Family vCPUs"
    # train: 4 nodes at maxCount, plus the one surge node of upgrade.maxSurge "1" while AKS upgrades the pool;
    # inferfull: 2 nodes at maxCount, plus the one surge node a pool that sets no upgrade gets (AKS's default).
    assert [(need.pool, need.nodes, need.surge) for need in plan.pools if need.quota.family == line.family] == [
        ("train", 4, 1),
        ("inferfull", 2, 1),
    ]
    assert line.vcpus == per_node * (4 + 1) + per_node * (2 + 1) == 768
    assert line.pools == ("train", "inferfull")


def test_the_regional_total_is_every_pool_family_summed() -> None:
    plan = quota_plan(stack_config("prod"))
    families = [line for line in plan.lines if line.kind == "family"]
    total = next(line for line in plan.lines if line.kind == "total")
    assert total.family == "cores" and total.local_name == "Total Regional vCPUs"
    assert total.vcpus == sum(line.vcpus for line in families)
    assert set(total.pools) == {"system", "train", "infer", "inferfull", "cpu"}
    # train 96 x (4 + 1) = 480, inferfull 96 x (2 + 1) = 288, infer 24 x (3 + 1) = 96, system 4 x (3 + 1) = 16,
    # cpu 8 x (3 + 1) = 32.
    assert total.vcpus == 912
    assert plan.location == "swedencentral"


def test_the_cpu_pool_draws_on_its_own_family_with_the_system_pool_at_max_count_plus_one_surge_node() -> None:
    config = stack_config("prod")
    cpu = config.cpu_pools[0]
    assert (cpu.vm_size, cpu.max_count) == ("Standard_D8ds_v5", 3)  # what the stack file says
    plan = quota_plan(config)
    need = next(need for need in plan.pools if need.pool == "cpu")
    # CPU pools are sent no upgradeSettings: AKS surges them by one node, like the system pool.
    assert (need.nodes, need.surge, need.vcpus) == (3, 1, 32)
    line = next(line for line in plan.lines if line.family == "standardDDSv5Family")
    assert line.local_name == "Standard DDSv5 Family vCPUs"
    # The system pool (Standard_D4ds_v5, 3 nodes + 1 surge: 16 vCPUs) is of the same family: one quota, 16 + 32.
    assert line.pools == ("system", "cpu") and line.vcpus == 48
    assert not plan.unknown


def test_every_cpu_pool_counts_even_on_an_adopted_cluster() -> None:
    raw = minimal_raw()
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], "existing": True}
    raw["aks-gpu:cpuPools"] = [{"name": "cpua", "maxCount": 2}, {"name": "cpub", "vmSize": "Standard_D4ds_v5", "maxCount": 5}]
    plan = quota_plan(validate_stack(raw, "test").config)
    line = next(line for line in plan.lines if line.family == "standardDDSv5Family")
    # cpua: the default Standard_D8ds_v5, 8 x (2 + 1) = 24; cpub: 4 x (5 + 1) = 24. The adopted system pool is not sized.
    assert line.pools == ("cpua", "cpub") and line.vcpus == 48


def test_spot_pools_draw_on_the_regional_spot_quota_and_surge_nothing() -> None:
    config = stack_config("dev")
    spot = [pool for pool in config.gpu_pools if pool.spot]
    assert spot, "the dev stack runs a spot pool"
    plan = quota_plan(config)
    line = next(line for line in plan.lines if line.kind == "spot")
    assert line.family == "lowPriorityCores"
    facts = load_quota_facts()
    assert line.vcpus == sum((facts.size(pool.vm_size).vcpus or 0) * pool.max_count for pool in spot)
    total = next(line for line in plan.lines if line.kind == "total")
    assert not set(total.pools) & {pool.name for pool in spot}


@pytest.mark.parametrize(("surge", "nodes", "extra"), [("1", 4, 1), ("0", 4, 0), ("33%", 4, 2), ("100%", 3, 3), ("10%", 1, 1)])
def test_a_percentage_surge_rounds_a_partial_node_up(surge: str, nodes: int, extra: int) -> None:
    assert surge_nodes(surge, nodes) == extra


def test_max_unavailable_without_max_surge_needs_no_spare_quota() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0]["upgrade"] = {"maxUnavailable": "1"}
    plan = quota_plan(validate_stack(raw, "test").config)
    gpu = next(need for need in plan.pools if need.pool == "gpu")
    assert gpu.surge == 0 and gpu.vcpus == 24 * 2


def test_an_adopted_cluster_sizes_only_its_own_pools() -> None:
    raw = minimal_raw()
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], "existing": True}
    plan = quota_plan(validate_stack(raw, "test").config)
    assert [need.pool for need in plan.pools] == ["gpu"]


def test_a_size_without_facts_is_named_and_makes_the_total_a_lower_bound() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0]["vmSize"] = "Standard_NC128ds_xl_RTXPRO6000BSE_v6"
    raw["aks-gpu:gpuPools"][0]["vendor"] = "nvidia"
    plan = quota_plan(validate_stack(raw, "test").config)
    assert [need.pool for need in plan.unknown] == ["gpu"]
    total = next(line for line in plan.lines if line.kind == "total")
    assert total.unknown == ("gpu",)


def test_request_commands_name_each_family_and_the_region_never_the_total() -> None:
    plan = quota_plan(stack_config("prod"))
    commands = plan.request_commands("11111111-2222-3333-4444-555555555555")
    assert len(commands) == len([line for line in plan.lines if line.kind != "total"])
    assert all("/locations/swedencentral" in command for command in commands)
    assert not any("'cores'" in command for command in commands)
    # One request for the H100 family, both pools of that size together (train 480 + inferfull 288).
    assert any("value=<used + 768>" in command and "standardNDSH100v5Family" in command for command in commands)


# ---------------------------------------------------------------- against a subscription's usage


def _usage_of(plan: QuotaPlan, free: int) -> list[Usage]:
    return [Usage(line.family, line.local_name or "", 10, 10 + line.vcpus + free) for line in plan.lines]


def test_enough_when_what_is_free_covers_the_need_and_short_by_one_vcpu() -> None:
    plan = quota_plan(stack_config("prod"))
    assert {check.verdict for check in check_quota(plan, _usage_of(plan, 0))} == {"enough"}
    short = check_quota(plan, _usage_of(plan, -1))
    assert {check.verdict for check in short} == {"short"}
    assert all(check.free == check.line.vcpus - 1 for check in short)


def test_family_names_compare_without_case_and_a_missing_family_is_not_offered() -> None:
    plan = quota_plan(stack_config("prod"))
    usages = [Usage(u.name.upper(), u.local_name, u.used, u.limit) for u in _usage_of(plan, 0)]
    usages = [u for u in usages if u.name != "STANDARDNDSH100V5FAMILY"]
    verdicts = {check.line.family: check.verdict for check in check_quota(plan, usages)}
    assert verdicts["standardNDSH100v5Family"] == "not offered"
    assert verdicts["cores"] == "enough"


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"value": {}},
        {"value": [{"name": "cores"}]},
        {"value": [{"name": {"value": "cores"}, "currentValue": "1", "limit": 2}]},
        {"value": [{"name": {"value": "cores"}, "currentValue": True, "limit": 2}]},
    ],
)
def test_a_usages_response_of_the_wrong_shape_is_refused(document: object) -> None:
    with pytest.raises(UsageShapeError):
        read_usages(document)
