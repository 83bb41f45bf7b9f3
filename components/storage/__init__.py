"""Storage for GPU pools: local NVMe data disks as an ephemeral cache through Azure Container Storage.

``manifests`` is pure (no Pulumi), so ``components.model`` can use ``nvme_node_labels`` while the package
stays importable without Pulumi; the ``NvmeCache`` component loads on first use of its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.storage.manifests import nvme_node_labels, storage_class, storage_class_name, storage_pool, volume_snippet

if TYPE_CHECKING:
    from components.storage.nvme_cache import NvmeCache, NvmeCacheArgs

__all__ = [
    "NvmeCache",
    "NvmeCacheArgs",
    "nvme_node_labels",
    "storage_class",
    "storage_class_name",
    "storage_pool",
    "volume_snippet",
]


def __getattr__(name: str) -> Any:
    # Lazy: nvme_cache imports pulumi and components.model, which itself imports this package's manifests.
    if name in ("NvmeCache", "NvmeCacheArgs"):
        from components.storage import nvme_cache

        return getattr(nvme_cache, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
