"""What a GPU node costs a month, from the dated price tables of ``components/aks_gpu/data/gpu_prices.yaml`` (or a team's
own rates in the same format, ``parse_prices``): the one source of the audit's idle cost and the advice's savings. Pure
but for reading that file once."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.catalog import vm_size_key
from aks_gpu.data_files import load_yaml
from aks_gpu.naming import INSTANCE_TYPE_LABEL

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "gpu_prices.yaml"
# The node labels Kubernetes sets from the cloud provider: the VM size and the region.
# https://kubernetes.io/docs/reference/labels-annotations-taints/#nodekubernetesioinstance-type
INSTANCE_TYPE_LABELS = (INSTANCE_TYPE_LABEL, "beta.kubernetes.io/instance-type")
# https://kubernetes.io/docs/reference/labels-annotations-taints/#topologykubernetesioregion
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


@dataclass(frozen=True)
class PriceTable:
    region: str
    read: date
    source: str
    prices: dict[str, float]  # VM size (lower case) -> hourly price


@dataclass(frozen=True)
class Prices:
    currency: str
    hours_per_month: int
    tables: dict[str, PriceTable]  # region -> its table

    def hourly(self, region: str | None, vm_size: str | None) -> tuple[float, PriceTable] | None:
        """The hourly list price of one VM of ``vm_size`` in ``region``, with the table it comes from; None where no
        table has it."""
        table = self.tables.get((region or "").lower())
        if table is None or not vm_size:
            return None
        hourly = table.prices.get(vm_size_key(vm_size))
        return (hourly, table) if hourly is not None else None

    def monthly(self, region: str | None, vm_size: str | None) -> tuple[float, PriceTable] | None:
        """The monthly list price (``hourly`` times ``hours_per_month``), with the table it comes from."""
        found = self.hourly(region, vm_size)
        return (found[0] * self.hours_per_month, found[1]) if found is not None else None


class PriceFileError(ValueError):
    """A price file (``--prices FILE``) not in the format of ``gpu_prices.yaml``; the message says where."""


def parse_prices(document: Any, where: str) -> Prices:
    """The price tables of a document in the format of ``gpu_prices.yaml`` (currency, hours_per_month, tables of region,
    read, source and prices by VM size); ``PriceFileError`` naming ``where`` and the entry otherwise."""
    if not isinstance(document, dict):
        raise PriceFileError(f"{where}: not a mapping with currency, hours_per_month and tables")
    try:
        currency, hours = str(document["currency"]), int(document["hours_per_month"])
        entries = document["tables"]
    except (KeyError, TypeError, ValueError) as error:
        raise PriceFileError(f"{where}: needs currency, hours_per_month (a whole number) and tables ({error})") from None
    if not isinstance(entries, list) or hours <= 0:
        raise PriceFileError(f"{where}: tables must be a list and hours_per_month above 0")
    tables: dict[str, PriceTable] = {}
    for index, entry in enumerate(entries):
        try:
            read = entry["read"] if isinstance(entry["read"], date) else date.fromisoformat(str(entry["read"]))
            prices = {vm_size_key(str(size)): float(price) for size, price in entry["prices"].items()}
            table = PriceTable(
                region=str(entry["region"]), read=read, source=" ".join(str(entry["source"]).split()), prices=prices
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise PriceFileError(
                f"{where}: table {index + 1} needs region, read (a date), source and prices (VM size: hourly price) ({error})"
            ) from None
        if any(not math.isfinite(price) or price < 0 for price in prices.values()):
            raise PriceFileError(f"{where}: table {index + 1} ({table.region}) has a price that is not a number of 0 or more")
        tables[table.region.lower()] = table
    return Prices(currency=currency, hours_per_month=hours, tables=tables)


@cache
def load_prices() -> Prices:
    return parse_prices(load_yaml(DATA_FILE), str(DATA_FILE))


def first_label(labels: Mapping[str, str] | None, keys: tuple[str, ...]) -> str | None:
    return next((labels[key] for key in keys if labels and labels.get(key)), None)
