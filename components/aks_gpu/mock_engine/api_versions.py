"""The Azure REST API version each Azure resource of a plan is sent with, read from the installed pulumi-azure-native
SDK, against the versions the rules were checked on (``data/azure_api_versions.yaml``). I/O: reads SDK module files."""

from __future__ import annotations

import importlib
import re
import sys
from functools import cache
from pathlib import Path

from aks_gpu.aks_facts import checked_api_versions

AZURE_PREFIX = "azure-native:"
# Every typed azure-native resource class says it in its docstring: "Uses Azure REST API version 2025-09-01."
_API_VERSION = re.compile(r"Uses Azure REST API version (\d{4}-\d{2}-\d{2}(?:-preview)?)\.")


@cache
def installed_api_version(type_: str) -> str | None:
    """``azure-native:containerservice:AgentPool`` -> the API version its installed SDK class uses; None for other
    types or a class whose docstring does not say."""
    if not type_.startswith(AZURE_PREFIX):
        return None
    _, module, name = type_.split(":", 2)
    try:
        cls = getattr(importlib.import_module(f"pulumi_azure_native.{module}"), name)
        source = sys.modules[cls.__module__].__file__
    except (ImportError, AttributeError):
        return None
    if source is None:
        return None
    match = _API_VERSION.search(Path(source).read_text(encoding="utf-8"))
    return match.group(1) if match else None


def api_version_warnings(types: set[str]) -> list[str]:
    """A warning per Azure resource type whose installed API version is not the one the rules were checked on."""
    checked = checked_api_versions()
    warnings = []
    for type_ in sorted(t for t in types if t.startswith(AZURE_PREFIX)):
        installed, expected = installed_api_version(type_), checked.get(type_)
        if installed != expected:
            warnings.append(
                f"{type_} is sent with API version {installed or 'unknown'}, but the plan's rules were checked against "
                f"{expected or 'no version'} (components/aks_gpu/data/azure_api_versions.yaml): install "
                "pulumi-azure-native==3.29.0 (requirements.txt), or check the rules against the new version's spec"
            )
    return warnings
