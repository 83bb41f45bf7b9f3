"""GPU VM sizes and MIG tables, read from the one data file that holds them (``data/gpu_catalog.yaml``).

Pure: the file is read once and turned into frozen dataclasses; nothing here knows about Pulumi.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from aks_gpu.data_files import load_yaml
from aks_gpu.naming import Vendor

CpuArchitecture = Literal["x86_64", "arm64"]
MigProfileName = Literal["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"]

CATALOG_FILE = Path(__file__).parent / "data" / "gpu_catalog.yaml"


def vm_size_key(name: str) -> str:
    """What two VM size names are compared by: their letters without case, as Azure compares them (the compute API
    keeps the case a size was written in and matches it in any: "The VM size casing is generally case preserving based
    on what the customer had entered", https://github.com/Azure/azure-cli/issues/9238; "the Azure API is case
    insensitive", https://github.com/dask/dask-cloudprovider/pull/270). The one way sizes are compared here; the
    config reads a size as the data files spell it (``aks_facts.canonical_vm_size``)."""
    return name.lower()


@dataclass(frozen=True)
class MigInstance:
    """One GPU-instance profile: the name NVIDIA tools print (``1g.10gb``) and how many fit on one GPU."""

    profile: str
    max_instances: int


@dataclass(frozen=True)
class GpuModel:
    key: str
    vendor: Vendor
    product: str
    memory_gib: int
    mig: dict[str, MigInstance]
    source: str
    # The product names the driver reports for this model (a full-match, case-insensitive regular expression): what
    # the exporters put on each series (gpu_catalog.yaml, "product_names"); None where no name is its own.
    product_names: str | None = None

    @property
    def supports_mig(self) -> bool:
        return bool(self.mig)


@dataclass(frozen=True)
class NvmeDisks:
    disks: int
    capacity_gib: int


@dataclass(frozen=True)
class VmSize:
    name: str
    series: str
    gpu: GpuModel
    gpu_count: int
    nvme: NvmeDisks | None
    source: str
    caveats: tuple[str, ...] = field(default_factory=tuple)
    # The host CPU: arm64 for the Grace (GB200/GB300) sizes, where every image the pool runs must be arm64-capable.
    cpu_architecture: CpuArchitecture = "x86_64"
    # Whether the size's GPUs are connected by NVLink (every link inactive is then a fault, not a PCIe card without a
    # bridge); None where no source says (gpu_catalog.yaml, "nvlink").
    nvlink: bool | None = None

    @property
    def vendor(self) -> Vendor:
        return self.gpu.vendor


@dataclass(frozen=True)
class Catalog:
    gpu_models: dict[str, GpuModel]
    vm_sizes: dict[str, VmSize]
    # The AMD GPU sizes AKS supports for node pools (gpu_catalog.yaml `aks_amd_sizes`, with its source).
    aks_amd_sizes: frozenset[str] = frozenset()
    # Sizes no AKS pool can use (retired, or not supported on AKS): (full-match pattern, why), gpu_catalog.yaml.
    not_offered: tuple[tuple[str, str], ...] = ()
    # The temp (resource) disk per size in GiB, where its size page was read: where an ephemeral OS disk goes.
    temp_disk_gib: dict[str, int] = field(default_factory=dict)

    def temp_disk_of(self, name: str) -> int | None:
        key = vm_size_key(name)
        return next((gib for size, gib in self.temp_disk_gib.items() if vm_size_key(size) == key), None)

    def not_offered_reason(self, name: str) -> str | None:
        """Why AKS cannot run a pool of this size, or None when nothing says so."""
        for pattern, why in self.not_offered:
            if re.fullmatch(pattern, name, flags=re.IGNORECASE):
                return why
        return None

    def aks_supports_amd_size(self, name: str) -> bool:
        return vm_size_key(name) in {vm_size_key(size) for size in self.aks_amd_sizes}

    def gpu_facts(
        self, vm_size: str, gpu_model: str | None, gpu_count: int | None
    ) -> tuple[VmSize | None, GpuModel | None, int | None]:
        """The VM size, GPU model and GPUs per node of a pool: the catalog first, what the pool states second (for a
        size the catalog does not know, or to correct it)."""
        size = self.vm_size(vm_size)
        model = size.gpu if size else None
        count = size.gpu_count if size else None
        if gpu_model is not None:
            model = self.gpu_models.get(gpu_model, model)
        if gpu_count is not None:
            count = gpu_count
        return size, model, count

    def model_named(self, product_name: str) -> GpuModel | None:
        """The GPU model whose reported product name (``NVIDIA H100 80GB HBM3``) this is, or None."""
        name = " ".join(product_name.split())
        return next(
            (
                model
                for model in self.gpu_models.values()
                if model.product_names and re.fullmatch(model.product_names, name, flags=re.IGNORECASE)
            ),
            None,
        )

    def vm_size(self, name: str) -> VmSize | None:
        """Look a size up the way Azure compares them (``vm_size_key``)."""
        exact = self.vm_sizes.get(name)
        if exact is not None:
            return exact
        key = vm_size_key(name)
        return next((size for spelled, size in self.vm_sizes.items() if vm_size_key(spelled) == key), None)


def _build(raw: dict[str, Any]) -> Catalog:
    models = {
        key: GpuModel(
            key=key,
            vendor=entry["vendor"],
            product=entry["product"],
            memory_gib=int(entry["memory_gib"]),
            mig={name: MigInstance(**spec) for name, spec in (entry.get("mig") or {}).items()},
            source=entry["source"],
            product_names=entry.get("product_names"),
        )
        for key, entry in raw["gpu_models"].items()
    }
    sources: dict[str, str] = raw["sources"]
    sizes = {
        name: VmSize(
            name=name,
            series=entry["series"],
            gpu=models[entry["gpu_model"]],
            gpu_count=int(entry["gpu_count"]),
            nvme=NvmeDisks(**entry["nvme"]) if entry.get("nvme") else None,
            source=sources[entry["source"]],
            caveats=tuple(entry.get("caveats") or ()),
            cpu_architecture=entry.get("cpu_architecture", "x86_64"),
            nvlink=entry.get("nvlink"),
        )
        for name, entry in raw["vm_sizes"].items()
    }
    not_offered = tuple((str(entry["pattern"]), str(entry["why"])) for entry in raw.get("not_offered") or ())
    return Catalog(
        gpu_models=models,
        vm_sizes=sizes,
        aks_amd_sizes=frozenset(raw.get("aks_amd_sizes") or ()),
        not_offered=not_offered,
        temp_disk_gib={str(name): int(gib) for name, gib in (raw.get("temp_disk_gib") or {}).items()},
    )


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    return _build(load_yaml(CATALOG_FILE))
