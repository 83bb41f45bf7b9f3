"""Whether a subscription is offered each pool's VM size in the stack's region, from the Microsoft.Compute skus list.
Pure: the list (already read by ``aksgpu preflight``) and the pools in, one verdict per VM size out.

The list is what ``az vm list-skus --location L --all`` prints: "GET https://management.azure.com/subscriptions/
{subscriptionId}/providers/Microsoft.Compute/skus?api-version=2021-07-01&$filter={$filter}", each SKU with its
``resourceType``, ``name``, ``locations``, ``locationInfo`` (the zones) and ``restrictions``; "Only location filter is
supported currently" (https://learn.microsoft.com/rest/api/compute/resource-skus/list). A restriction has a ``type``
(Location or Zone), ``values``, ``restrictionInfo`` (``locations``, ``zones``) and a ``reasonCode``: QuotaId or
NotAvailableForSubscription. A Location restriction means the region has the size but this subscription cannot
create it there ("The requested size for resource ... is currently not available in location ... for subscription",
https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-sku-not-available); a Zone restriction
only closes the zones it names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from aks_gpu.catalog import vm_size_key

VIRTUAL_MACHINES = "virtualMachines"
# What to do about a restricted size: the page's "Solution" (ask Azure support for the size, or another region or size).
SKU_NOT_AVAILABLE_DOC = "https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-sku-not-available"

Offer = Literal["offered", "restricted", "not in region"]


class SkuShapeError(ValueError):
    """The skus response is not the list the API documents."""


@dataclass(frozen=True)
class Restriction:
    type: str  # Location or Zone
    reason: str  # QuotaId or NotAvailableForSubscription
    locations: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sku:
    """One virtualMachines SKU of the list, in one region (the list is filtered by location)."""

    name: str
    locations: tuple[str, ...]
    zones: tuple[str, ...] = ()
    restrictions: tuple[Restriction, ...] = ()


@dataclass(frozen=True)
class SizeOffer:
    """A VM size the stack's pools run, in the stack's region, for the subscription: ``offered``; ``restricted`` (the
    region has it, the subscription may not create it there: a Location restriction); ``not in region``."""

    vm_size: str
    pools: tuple[str, ...]
    offer: Offer
    zones: tuple[str, ...] = ()
    restrictions: tuple[Restriction, ...] = field(default=())

    @property
    def offered(self) -> bool:
        return self.offer == "offered"


def _given(value: Any, default: Any) -> Any:
    """A field's value, or ``default`` where it is absent or null (an empty list is not absent: it is checked)."""
    return default if value is None else value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SkuShapeError(f"{where} is not a list of strings")
    return tuple(value)


def _objects(value: Any, where: str, field: str) -> Iterator[dict[str, Any]]:
    """The objects of a list field, in order (absent or null: none); ``SkuShapeError`` at the first that is not one."""
    listed = _given(value, [])
    if not isinstance(listed, list):
        raise SkuShapeError(f"{where}: {field} is not a list")
    for item in listed:
        if not isinstance(item, dict):
            raise SkuShapeError(f"{where}: {field} holds a non-object")
        yield item


def read_skus(rows: Any) -> list[Sku]:
    """The virtualMachines SKUs of a skus list's ``value`` rows (other resource types, disks and the like, are left
    out); ``SkuShapeError`` naming the first virtualMachines row that is not one."""
    if not isinstance(rows, list):
        raise SkuShapeError("not a skus list (a `value` list)")
    skus: list[Sku] = []
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or row.get("resourceType") != VIRTUAL_MACHINES:
            continue
        name = row.get("name")
        if not isinstance(name, str):
            raise SkuShapeError(f"value[{index}] has no name")
        where = f"value[{index}] ({name[:80]})"
        zones: list[str] = []
        for info in _objects(row.get("locationInfo"), where, "locationInfo"):
            zones += _strings(info.get("zones"), f"{where}: locationInfo zones")
        restrictions: list[Restriction] = []
        for item in _objects(row.get("restrictions"), where, "restrictions"):
            info = _given(item.get("restrictionInfo"), {})
            if not isinstance(info, dict):
                raise SkuShapeError(f"{where}: restrictionInfo is not an object")
            kind = str(item.get("type") or "")
            locations = _strings(info.get("locations"), f"{where}: restrictionInfo locations")
            if not locations and kind.lower() == "location":
                # "values: ... If the restriction type is set to location. This would be different locations where the
                # SKU is restricted" (the API's ResourceSkuRestrictions).
                locations = _strings(item.get("values"), f"{where}: restriction values")
            restrictions.append(
                Restriction(
                    type=kind,
                    reason=str(item.get("reasonCode") or ""),
                    locations=locations,
                    zones=_strings(info.get("zones"), f"{where}: restrictionInfo zones"),
                )
            )
        locations = _strings(row.get("locations"), f"{where}: locations")
        skus.append(Sku(name, locations, tuple(sorted(set(zones))), tuple(restrictions)))
    return skus


def size_offers(pools: Iterable[tuple[str, str]], skus: Iterable[Sku], location: str) -> list[SizeOffer]:
    """One verdict per VM size of ``pools`` (pool name, VM size), in the order the pools come; sizes, locations and
    restriction locations compare without case, as ARM compares them."""
    place = location.lower()
    by_name: dict[str, Sku] = {}
    for sku in skus:
        if place in (name.lower() for name in sku.locations):
            by_name.setdefault(vm_size_key(sku.name), sku)
    names: dict[str, list[str]] = {}
    spelled: dict[str, str] = {}
    for pool, size in pools:
        names.setdefault(vm_size_key(size), []).append(pool)
        spelled.setdefault(vm_size_key(size), size)
    offers: list[SizeOffer] = []
    for key, pool_names in names.items():
        found = by_name.get(key)
        if found is None:
            offers.append(SizeOffer(spelled[key], tuple(pool_names), "not in region"))
            continue
        here = tuple(r for r in found.restrictions if not r.locations or place in (name.lower() for name in r.locations))
        closed = any(r.type.lower() == "location" for r in here)
        offers.append(SizeOffer(spelled[key], tuple(pool_names), "restricted" if closed else "offered", found.zones, here))
    return offers
