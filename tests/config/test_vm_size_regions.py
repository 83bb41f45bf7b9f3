"""Whether the stack's region offers each pool's VM size (config/rules/limits.py, refusal `vm-size-not-in-region`) and
the record it is judged on (data/vm_size_regions.yaml): refused where the record is complete, a warning naming the
`az vm list-skus` that settles it where it is partial or missing, and nothing where the region is recorded."""

from __future__ import annotations

from typing import Any

from aks_gpu.aks_facts import azure_locations, kubernetes_calendar, vm_size_regions
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


# The major Azure regions: those a recorded `az account list-locations` marks "Recommended" (metadata.regionCategory;
# Azure/karpenter-provider-azure pkg/fake/locations.json at 4185d876), less the canary eastus2euap and the two no source
# here prices or lists sizes for (belgiumcentral, denmarkeast), and the large US regions it marks "Other".
MAJOR_REGIONS = (
    "australiaeast", "austriaeast", "brazilsouth", "canadacentral", "centralindia", "centralus", "chilecentral",
    "eastasia", "eastus", "eastus2", "francecentral", "germanywestcentral", "indonesiacentral", "israelcentral",
    "italynorth", "japaneast", "japanwest", "koreacentral", "malaysiawest", "mexicocentral", "newzealandnorth",
    "northcentralus", "northeurope", "norwayeast", "polandcentral", "qatarcentral", "southafricanorth",
    "southcentralus", "southeastasia", "spaincentral", "swedencentral", "switzerlandnorth", "uaenorth", "uksouth",
    "westeurope", "westus", "westus2", "westus3",
)  # fmt: skip


def test_a_shipped_stack_moved_to_any_major_region_plans_without_a_word_about_the_default_sizes() -> None:
    # issue 40 A7: aks-gpu's own defaults (Standard_D4ds_v5 for the system pool, Standard_D8ds_v5 for the CPU pools)
    # warned outside swedencentral, westus and eastus. Each shipped stack has a system pool and a CPU pool of them.
    for stack in ("dev", "prod", "amd"):
        for region in MAJOR_REGIONS:
            raw = raw_stack(stack)
            raw["azure-native:location"] = region
            errors, warnings = problems(raw)
            said = [m for m in (*errors, *warnings) if "systemPool" in m or "cpuPools" in m]
            assert said == [], (stack, region, said)


def test_every_major_region_is_a_recorded_azure_region_so_its_name_plans_without_a_warning() -> None:
    # indonesiacentral, malaysiawest, newzealandnorth, austriaeast and chilecentral warned as unknown names.
    assert sorted(set(MAJOR_REGIONS) - azure_locations()) == []


# ---------------------------------------------------------------- the rule


def test_a_complete_record_without_the_location_is_refused_at_the_pool_naming_the_regions_that_offer_it() -> None:
    # westindia is an Azure region (data/azure_locations.yaml), and not one where az vm list-skus --all listed
    # Standard_NC24ads_A100_v4 on 2026-08-13, nor one Azure's retail prices priced it in on 2026-06-18.
    errors, _ = problems(with_location("westindia"))
    assert len(errors) == 1, errors
    error = errors[0]
    assert error.startswith("aks-gpu:gpuPools[0].vmSize: Standard_NC24ads_A100_v4 is not offered in westindia")
    assert "2026-06-18" in error and "swedencentral" in error and "centralindia" in error and error.endswith(TAG)
    assert "az vm list-skus --location westindia --size Standard_NC24ads_A100_v4 --all --output table" in error


def test_a_recorded_region_passes_whatever_its_spelling() -> None:
    for location in ("swedencentral", "Sweden Central"):
        raw = with_location(location)
        raw["aks-gpu:gpuPools"][0]["vmSize"] = "standard_nc24ads_a100_v4"
        errors, warnings = problems(raw)
        # The one warning: the size is read in the catalog's spelling (tests/config/test_vm_size_spelling.py).
        assert errors == [] and [w.split(":")[1] for w in warnings] == ["gpuPools[0].vmSize"], location


def test_a_partial_record_without_the_location_is_a_warning_that_says_so_and_how_to_check() -> None:
    raw = with_location("eastus")
    raw["aks-gpu:gpuPools"][0]["vmSize"] = "Standard_ND96isr_H200_v5"
    errors, warnings = problems(raw)
    assert errors == [] and len(warnings) == 1, warnings
    warning = warnings[0]
    assert warning.startswith("aks-gpu:gpuPools[0].vmSize: Standard_ND96isr_H200_v5 is not confirmed in eastus")
    assert "partial" in warning and "polandcentral" in warning
    assert "`az vm list-skus --location eastus --size Standard_ND96isr_H200_v5 --all --output table`" in warning


def test_a_size_with_no_record_is_a_warning_too_never_silence() -> None:
    # One the file lists with no regions found, and one it does not list at all.
    raw = minimal_raw(**{"aks-gpu:cpuPools": [{"name": "cpu", "vmSize": "Standard_E8ds_v5"}]})
    raw["aks-gpu:gpuPools"][0]["vmSize"] = "Standard_ND128isr_GB300_v6"
    errors, warnings = problems(raw)
    assert errors == []
    assert [w.split(":", 2)[1] for w in warnings] == ["gpuPools[0].vmSize", "cpuPools[0].vmSize"]
    for warning, size in zip(warnings, ("Standard_ND128isr_GB300_v6", "Standard_E8ds_v5"), strict=True):
        assert f"whether {size} is offered in swedencentral is not recorded" in warning
        assert f"az vm list-skus --location swedencentral --size {size} --all --output table" in warning


def test_the_system_and_cpu_pools_are_checked_at_their_own_keys() -> None:
    # belgiumcentral: a region (data/azure_locations.yaml) no source here records the default sizes in, so the
    # warning stays, and says why.
    raw = with_location("belgiumcentral", **{"aks-gpu:cpuPools": [{"name": "cpu"}]})
    _, warnings = problems(raw)
    paths = sorted(w.split(": ", 1)[0] for w in warnings)
    assert paths == ["aks-gpu:cluster.systemPool.vmSize", "aks-gpu:cpuPools[0].vmSize"]
    assert all("is not confirmed in belgiumcentral" in w for w in warnings)


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


def test_the_shipped_stacks_plan_without_a_word_about_their_sizes_in_their_region() -> None:
    # The amd stack's Standard_ND96isr_MI300X_v5 was unconfirmed in swedencentral until Azure's retail prices named it.
    for stack in ("dev", "prod", "amd"):
        assert problems(raw_stack(stack)) == ([], []), stack
