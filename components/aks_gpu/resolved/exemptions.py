"""Which namespaces the GPU placement policy leaves alone: derived from what the stack installs. Pure: a resolved
fact of the stack, read by the admission policy builder and by the rule that no workload takes such a name.

The facts (what runs in each namespace, why it must not be denied, and the sources) live in
``components/aks_gpu/data/admission_exemptions.yaml``; this module only decides which of them apply to a stack, and adds
the user's ``admission.exemptNamespaces``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.config.models import PlatformConfig
from aks_gpu.data_files import load_yaml

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "admission_exemptions.yaml"
USER_REASON = "listed in admission.exemptNamespaces"


@dataclass(frozen=True)
class Exemption:
    namespace: str
    reason: str  # what runs there, in one line
    installed_by: str


@cache
def _catalog() -> dict[str, dict[str, Any]]:
    raw: dict[str, Any] = load_yaml(DATA_FILE)
    namespaces: dict[str, dict[str, Any]] = raw["namespaces"]
    return namespaces


def remediation_runs(config: PlatformConfig) -> bool:
    """The quarantine engine is deployed: remediation.mode dry-run or on, on a stack with NVIDIA pools (its monitors
    read NVIDIA signals, and AKS runs no Node Problem Detector GPU check on AMD pools, whose driver is never AKS's)."""
    return config.remediation.mode != "off" and any(pool.vendor == "nvidia" for pool in config.gpu_pools)


def _applies(when: str, config: PlatformConfig, network_policy: str | None) -> bool:
    key, _, value = (part.strip() for part in when.partition(":"))
    if key == "always":
        return True
    if key == "networkPolicy":
        return network_policy == value
    if key == "storage":
        return config.storage.flavour == value and any(pool.nvme_cache for pool in config.gpu_pools)
    if key == "remediation" and value == "deployed":
        return remediation_runs(config)
    raise ValueError(f"{DATA_FILE.name}: unknown condition {when!r}")


def derived_exemptions(config: PlatformConfig, network_policy: str | None) -> tuple[Exemption, ...]:
    """The namespaces AKS or this stack runs agents in, for this config (``network_policy`` is the cluster's,
    None when unknown, e.g. for the admission component alone)."""
    return tuple(
        Exemption(namespace=name, reason=" ".join(str(entry["why"]).split()), installed_by=str(entry["installed_by"]))
        for name, entry in _catalog().items()
        if _applies(str(entry["when"]), config, network_policy)
    )


def exemptions(config: PlatformConfig, network_policy: str | None) -> tuple[Exemption, ...]:
    """Derived exemptions first, then the user's list (each namespace once)."""
    found = {item.namespace: item for item in derived_exemptions(config, network_policy)}
    for name in config.admission.exempt_namespaces:
        found.setdefault(name, Exemption(namespace=name, reason=USER_REASON, installed_by="you"))
    return tuple(found.values())


def exempt_namespaces(config: PlatformConfig, network_policy: str | None) -> tuple[str, ...]:
    return tuple(item.namespace for item in exemptions(config, network_policy))
