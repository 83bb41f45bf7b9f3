"""Storage for GPU pools: local NVMe data disks as an ephemeral cache through Azure Container Storage. ``manifests``
holds the pure builders, ``nvme_cache`` the ``NvmeCache`` component."""
