"""What an idle GPU node costs a month, from the dated price tables of ``components/aks_gpu/data/gpu_prices.yaml``. Pure
but for reading that file once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path

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

    def monthly(self, region: str | None, vm_size: str | None) -> tuple[float, PriceTable] | None:
        """The monthly list price of one VM of ``vm_size`` in ``region``, with the table it comes from; None where no
        table has it."""
        table = self.tables.get((region or "").lower())
        if table is None or not vm_size:
            return None
        hourly = table.prices.get(vm_size_key(vm_size))
        return (hourly * self.hours_per_month, table) if hourly is not None else None


@cache
def load_prices() -> Prices:
    document = load_yaml(DATA_FILE)
    tables = {
        str(entry["region"]).lower(): PriceTable(
            region=str(entry["region"]),
            read=entry["read"] if isinstance(entry["read"], date) else date.fromisoformat(str(entry["read"])),
            source=" ".join(str(entry["source"]).split()),
            prices={vm_size_key(str(size)): float(price) for size, price in entry["prices"].items()},
        )
        for entry in document["tables"]
    }
    return Prices(currency=str(document["currency"]), hours_per_month=int(document["hours_per_month"]), tables=tables)


def first_label(labels: Mapping[str, str] | None, keys: tuple[str, ...]) -> str | None:
    return next((labels[key] for key in keys if labels and labels.get(key)), None)
