"""NVIDIA's Xid catalog as data: ``components/aks_gpu/data/xid.yaml`` (sources and the severity rule are in that file).

Pure apart from reading the packaged data file once; no Pulumi. The GPU health reader reads it to grade each Xid
in a kernel log; alert rules read ``critical_xid_codes()`` so that an alert and a validation agree on what is
critical.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, cast

from aks_gpu.data_files import load_yaml

Severity = Literal["critical", "warning"]
CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
XID_FILE = Path(__file__).resolve().parents[1] / "data" / "xid.yaml"


@dataclass(frozen=True)
class XidEntry:
    code: int
    mnemonic: str  # NVIDIA's name, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    description: str  # "GPU has fallen off the bus"
    immediate: str  # NVIDIA's immediate resolution bucket, "RESTART_BM" ("" where the catalog gives none)
    investigatory: str  # NVIDIA's investigatory resolution bucket
    severity: Severity  # ours, from the immediate bucket (xid.yaml states the rule)
    action: str  # what to do on AKS
    source: str = CATALOG_URL


class XidCatalogError(ValueError):
    """The packaged xid.yaml does not have the shape this module reads (a packaging or editing mistake)."""


@cache
def load_xid_catalog() -> dict[int, XidEntry]:
    """Every Xid code the catalog documents, by code."""
    return parse_xid_catalog(load_yaml(XID_FILE))


def parse_xid_catalog(document: Any) -> dict[int, XidEntry]:
    shaped = isinstance(document, dict) and isinstance(document.get("buckets"), dict)
    if not shaped or not isinstance(document.get("xids"), list):
        raise XidCatalogError("xid.yaml: expected 'buckets' (a mapping) and 'xids' (a list)")
    buckets: dict[str, tuple[Severity, str]] = {}
    for name, bucket in document["buckets"].items():
        severity = bucket.get("severity") if isinstance(bucket, dict) else None
        action = bucket.get("action") if isinstance(bucket, dict) else None
        if severity not in ("critical", "warning") or not isinstance(action, str):
            raise XidCatalogError(f"xid.yaml: bucket {name!r} needs a severity (critical or warning) and an action")
        buckets[str(name)] = (cast(Severity, severity), action)
    source = str(document.get("source") or CATALOG_URL)
    catalog: dict[int, XidEntry] = {}
    for row in document["xids"]:
        if not isinstance(row, dict) or not isinstance(row.get("code"), int) or isinstance(row.get("code"), bool):
            raise XidCatalogError(f"xid.yaml: an entry without an integer code: {row!r}")
        immediate = str(row.get("immediate") or "")
        if immediate not in buckets:
            raise XidCatalogError(f"xid.yaml: Xid {row['code']} names the bucket {immediate!r}, which 'buckets' lacks")
        severity, action = buckets[immediate]
        code = int(row["code"])
        # A row may override its bucket's severity, but only with one the readers know.
        override = row.get("severity", severity)
        if override not in ("critical", "warning"):
            raise XidCatalogError(f"xid.yaml: Xid {code} has severity {override!r}; it must be critical or warning")
        if code in catalog:
            raise XidCatalogError(f"xid.yaml: Xid {code} is listed twice")
        catalog[code] = XidEntry(
            code=code,
            mnemonic=str(row.get("mnemonic") or ""),
            description=str(row.get("description") or ""),
            immediate=immediate,
            investigatory=str(row.get("investigatory") or ""),
            severity=cast(Severity, override),
            action=action,
            source=source,
        )
    return catalog


def xid_entry(code: int) -> XidEntry | None:
    return load_xid_catalog().get(code)


def critical_xid_codes() -> tuple[int, ...]:
    """The Xid codes graded critical, ascending: the ones that take a GPU out of service."""
    return tuple(sorted(code for code, entry in load_xid_catalog().items() if entry.severity == "critical"))
