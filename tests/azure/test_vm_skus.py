"""Reading the Microsoft.Compute skus list (aks_gpu.azure.vm_skus): which of the pools' VM sizes a subscription is
offered in a region, as `az vm list-skus --location L --all` shows them."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.azure.vm_skus import SkuShapeError, read_skus, size_offers


def vm(name: str, *restrictions: dict[str, Any], location: str = "SwedenCentral") -> dict[str, Any]:
    return {
        "resourceType": "virtualMachines",
        "name": name,
        "locations": [location],
        "locationInfo": [{"location": location, "zones": ["3", "1"]}],
        "restrictions": list(restrictions),
    }


def test_sizes_and_regions_compare_without_case_and_each_size_is_judged_once_for_all_its_pools() -> None:
    skus = read_skus([vm("Standard_D8ds_v5"), {"resourceType": "disks", "name": "Standard_D8ds_v5", "locations": ["x"]}])
    [offer] = size_offers([("cpua", "standard_d8ds_v5"), ("cpub", "Standard_D8DS_v5")], skus, "swedencentral")
    assert (offer.vm_size, offer.pools, offer.offer, offer.zones) == ("standard_d8ds_v5", ("cpua", "cpub"), "offered", ("1", "3"))


def test_a_size_listed_in_another_region_only_is_not_in_this_one() -> None:
    skus = read_skus([vm("Standard_NC24ads_A100_v4", location="westeurope")])
    [offer] = size_offers([("gpu", "Standard_NC24ads_A100_v4")], skus, "swedencentral")
    assert offer.offer == "not in region" and not offer.offered


def test_a_location_restriction_given_by_its_values_alone_still_closes_the_region() -> None:
    # As the API documents `values`: the locations where the SKU is restricted, for a Location restriction.
    restriction = {"type": "Location", "values": ["swedencentral"], "reasonCode": "QuotaId"}
    skus = read_skus([vm("Standard_ND96isr_H100_v5", restriction)])
    [offer] = size_offers([("gpu", "Standard_ND96isr_H100_v5")], skus, "swedencentral")
    assert offer.offer == "restricted" and offer.restrictions[0].reason == "QuotaId"


@pytest.mark.parametrize(
    "rows",
    [
        {"value": []},
        [{"resourceType": "virtualMachines"}],
        [{"resourceType": "virtualMachines", "name": "Standard_D4ds_v5", "locations": "swedencentral"}],
        [{"resourceType": "virtualMachines", "name": "Standard_D4ds_v5", "restrictions": [{"restrictionInfo": []}]}],
        [{"resourceType": "virtualMachines", "name": "Standard_D4ds_v5", "locationInfo": [{"zones": [1]}]}],
    ],
)
def test_a_skus_list_of_the_wrong_shape_is_refused(rows: Any) -> None:
    with pytest.raises(SkuShapeError):
        read_skus(rows)
