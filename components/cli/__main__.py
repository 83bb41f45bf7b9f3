"""``python -m components.cli``: the aksgpu command line without an installed entry point."""

from components.cli import entrypoint

entrypoint()
