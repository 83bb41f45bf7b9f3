"""What the API server calls an object's kind: its REST resource (the plural a request and a denial name) and whether
it lives in a namespace. Pure, once the data file is read.

The well-known kinds are in ``components/aks_gpu/data/kubernetes_scopes.yaml`` with their sources; any other kind is
pluralised as the Kubernetes REST mapper guesses (k8s.io/apimachinery pkg/api/meta/restmapper.go,
``UnsafeGuessKindToResource``) and taken as namespaced, which is what a CRD's author usually chose.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from aks_gpu.data_files import load_yaml

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "kubernetes_scopes.yaml"
# restmapper.go's unpluralizedSuffixes: a kind ending so is its own plural.
UNPLURALIZED_SUFFIXES = ("endpoints",)
CLUSTER = "Cluster"


@dataclass(frozen=True)
class Kind:
    group: str
    kind: str
    plural: str
    namespaced: bool


@cache
def known_kinds() -> tuple[Kind, ...]:
    """The kinds of the data file, in its order."""
    return tuple(
        Kind(str(entry["group"]), str(entry["kind"]), str(entry["plural"]), str(entry["scope"]) != CLUSTER)
        for entry in load_yaml(DATA_FILE)["kinds"]
    )


@cache
def _by_key() -> dict[tuple[str, str], Kind]:
    return {(entry.group, entry.kind): entry for entry in known_kinds()}


def guess_plural(kind: str) -> str:
    """The REST mapper's guess (``UnsafeGuessKindToResource``): lower case; "...endpoints" as it is; a final "s" gets
    "es", a final "y" becomes "ies" (whatever comes before it: "Gateway" gives "gatewaies"); anything else gets "s"."""
    if not kind:
        return ""
    singular = kind.lower()
    if singular.endswith(UNPLURALIZED_SUFFIXES):
        return singular
    if singular.endswith("s"):
        return singular + "es"
    if singular.endswith("y"):
        return singular[:-1] + "ies"
    return singular + "s"


def kind_of(group: str, kind: str) -> Kind:
    """The kind as the API server serves it: from the data file, else guessed (namespaced)."""
    return _by_key().get((group, kind)) or Kind(group, kind, guess_plural(kind), True)


def default_group(kind: str) -> str:
    """The group of the first well-known kind of that name (an object written without apiVersion); "" when none."""
    return next((entry.group for entry in known_kinds() if entry.kind == kind), "")
