"""Whether the stack's region offers each pool's VM size (config/rules/limits.py, refusal `vm-size-not-in-region`) and
the record it is judged on (data/vm_size_regions.yaml): refused where the record is complete, a warning naming the
`az vm list-skus` that settles it where it is partial or missing, and nothing where the region is recorded."""

from __future__ import annotations

from typing import Any

from aks_gpu.aks_facts import kubernetes_calendar, vm_size_regions
from aks_gpu.catalog import load_catalog
from aks_gpu.config.models import CpuPoolConfig, SystemPool
from aks_gpu.config.problems import ConfigError, Problem
from aks_gpu.config.rules.limits import LOCATION_NAME
from aks_gpu.resolved.stack import validate_stack
from tests.azure.test_quota import shipped_sizes
from tests.conftest import minimal_raw, raw_stack

ON = kubernetes_calendar().read_on
TAG = "[refusal vm-size-not-in-region]"


def problems(raw: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings) about VM sizes in regions, each rendered as `path: message`."""
    found: list[Problem]
    try:
        found = list(validate_stack(raw, "stacks/Pulumi.test.yaml", today=ON).warnings)
    except ConfigError as caught:
        found = list(caught.problems)
    rendered = [(p.severity, f"{p.path}: {p.message}") for p in found if p.path.endswith("vmSize")]
    return [m for s, m in rendered if s == "error"], [m for s, m in rendered if s == "warning"]


def with_location(location: str, **overrides: Any) -> dict[str, Any]:
    return minimal_raw(**{"azure-native:location": location, **overrides})


# ---------------------------------------------------------------- the record


def test_every_size_the_pools_can_run_has_an_entry() -> None:
    facts = vm_size_regions()
    defaults = {SystemPool.model_fields["vm_size"].default, CpuPoolConfig.model_fields["vm_size"].default}
    wanted = {*load_catalog().vm_sizes, *defaults, *shipped_sizes()}
    assert sorted(size for size in wanted if facts.get(size) is None) == []


def test_every_recorded_list_names_real_region_names_its_source_and_a_day_before_it_was_read() -> None:
    facts = vm_size_regions()
    for entry in facts.sizes.values():
        if entry.coverage == "none":
            assert not entry.regions and entry.source is None, entry.size
            continue
        assert entry.regions and entry.source and entry.source.startswith("https://"), entry.size
        assert entry.as_of is not None and entry.as_of <= facts.read_on, entry.size
        assert all(LOCATION_NAME.fullmatch(region) for region in entry.regions), entry.size


def test_an_entry_of_several_sources_names_each() -> None:
    # The CPU pools' default size: its regions come from several sources, every one a URL.
    entry = vm_size_regions().get(CpuPoolConfig.model_fields["vm_size"].default)
    assert entry is not None and len(entry.sources) > 1 and entry.source == entry.sources[0]
    assert all(source.startswith("https://") for source in entry.sources)


def test_the_default_sizes_plan_without_a_warning_outside_swedencentral_where_a_source_confirms_them() -> None:
    # issue 40 A7: aks-gpu's own defaults (Standard_D4ds_v5, Standard_D8ds_v5) in westus, as AKS listed them there.
    raw = with_location("westus", **{"aks-gpu:cpuPools": [{"name": "cpu"}]})
    assert [w for w in problems(raw)[1] if "systemPool" in w or "cpuPools" in w] == []


# ---------------------------------------------------------------- the rule


def test_a_complete_record_without_the_location_is_refused_at_the_pool_naming_the_regions_that_offer_it() -> None:
    # westindia is an Azure region (data/azure_locations.yaml), and not one where az vm list-skus --all listed
    # Standard_NC24ads_A100_v4 on 2026-08-13.
    errors, _ = problems(with_location("westindia"))
    assert len(errors) == 1, errors
    error = errors[0]
    assert error.startswith("aks-gpu:gpuPools[0].vmSize: Standard_NC24ads_A100_v4 is not offered in westindia")
    assert "2026-08-13" in error and "swedencentral" in error and "centralindia" in error and error.endswith(TAG)
    assert "az vm list-skus --location westindia --size Standard_NC24ads_A100_v4 --all --output table" in error


def test_a_recorded_region_passes_whatever_its_spelling() -> None:
    for location in ("swedencentral", "Sweden Central"):
        raw = with_location(location)
        raw["aks-gpu:gpuPools"][0]["vmSize"] = "standard_nc24ads_a100_v4"
        errors, warnings = problems(raw)
        # The one warning: the size is read in the catalog's spelling (tests/config/test_vm_size_spelling.py).
        assert errors == [] and [w.split(":")[1] for w in warnings] == ["gpuPools[0].vmSize"], location


def test_a_partial_record_without_the_location_is_a_warning_that_says_so_and_how_to_check() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0]["vmSize"] = "Standard_ND96isr_H200_v5"
    errors, warnings = problems(raw)
    assert errors == [] and len(warnings) == 1, warnings
    warning = warnings[0]
    assert warning.startswith("aks-gpu:gpuPools[0].vmSize: Standard_ND96isr_H200_v5 is not confirmed in swedencentral")
    assert "partial" in warning and "polandcentral" in warning
    assert "`az vm list-skus --location swedencentral --size Standard_ND96isr_H200_v5 --all --output table`" in warning


def test_a_size_with_no_record_is_a_warning_too_never_silence() -> None:
    # One the file lists with no regions found, and one it does not list at all.
    raw = minimal_raw(**{"aks-gpu:cpuPools": [{"name": "cpu", "vmSize": "Standard_E8ds_v5"}]})
    raw["aks-gpu:gpuPools"][0]["vmSize"] = "Standard_NC16ads_A10_v4"
    errors, warnings = problems(raw)
    assert errors == []
    assert [w.split(":", 2)[1] for w in warnings] == ["gpuPools[0].vmSize", "cpuPools[0].vmSize"]
    for warning, size in zip(warnings, ("Standard_NC16ads_A10_v4", "Standard_E8ds_v5"), strict=True):
        assert f"whether {size} is offered in swedencentral is not recorded" in warning
        assert f"az vm list-skus --location swedencentral --size {size} --all --output table" in warning


def test_the_system_and_cpu_pools_are_checked_at_their_own_keys() -> None:
    raw = with_location("westindia", **{"aks-gpu:cpuPools": [{"name": "cpu"}]})
    _, warnings = problems(raw)
    paths = sorted(w.split(": ", 1)[0] for w in warnings)
    assert paths == ["aks-gpu:cluster.systemPool.vmSize", "aks-gpu:cpuPools[0].vmSize"]
    assert all("is not confirmed in westindia" in w for w in warnings)


def test_an_adopted_cluster_s_system_pool_and_a_given_cluster_s_pools_are_not_azure_s_to_place() -> None:
    cluster = {"resourceGroup": "rg-test", "name": "aks-test"}
    errors, warnings = problems(with_location("westindia", **{"aks-gpu:cluster": {**cluster, "existing": True}}))
    # The GPU pool is still the stack's to create: its refusal stays.
    assert len(errors) == 1 and not [w for w in warnings if "systemPool" in w]
    assert problems(with_location("westindia", **{"aks-gpu:cluster": {**cluster, "kubeconfig": "kc.yaml"}})) == ([], [])


def test_a_name_that_is_no_region_is_refused_once_not_once_per_pool() -> None:
    errors, warnings = problems(with_location("sweden-central"))
    assert errors == [] and warnings == []  # the location's own refusal is at azure-native:location


# ---------------------------------------------------------------- the shipped stacks


def test_the_shipped_stacks_plan_and_only_the_amd_pool_is_unconfirmed_in_its_region() -> None:
    for stack in ("dev", "prod"):
        assert problems(raw_stack(stack)) == ([], []), stack
    errors, warnings = problems(raw_stack("amd"))
    # Standard_ND96isr_MI300X_v5: the record (francecentral, westus) is partial and lacks swedencentral.
    assert errors == [] and len(warnings) == 1 and "Standard_ND96isr_MI300X_v5 is not confirmed in swedencentral" in warnings[0]
