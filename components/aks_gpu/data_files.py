"""Reading the data files of ``components/aks_gpu/data/`` (the catalog, the AKS calendar, the pins...): facts the project
writes itself, so they are read with libyaml's safe loader where PyYAML has it (the same YAML, several times faster
than the pure-Python loader; a command that reads three of them gains a tenth of a second), else the pure one. Input
a user or a cluster hands over is read by ``components/aks_gpu/config/safe_yaml.py`` instead, by Pulumi's rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_LOADER)
