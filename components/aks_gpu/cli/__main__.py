"""``python -m aks_gpu.cli``: the aksgpu command line without an installed entry point."""

from aks_gpu.cli import entrypoint

entrypoint()
