"""Unrendered templates and placeholders in a manifest, which ``aksgpu admission check`` reports as not evaluated
instead of deciding them. Pure: text and objects in, findings out.

A chart's template (``{{ .Values.gpus }}``), a file meant for ``envsubst`` (``${NAMESPACE}``), a sample's
``<your-namespace>`` or a value a tool fills in later (``FILLED_BY_VALIDATOR``) is not what will reach the API
server. Deciding it would judge a namespace nobody will use, or refuse a quantity nobody will send: the check says
what to render first. Only the fields a decision reads are looked at: the object's name, generateName and namespace,
and the resource names and quantities of its containers (``resources.limits`` and ``requests`` anywhere in it, pod
templates of custom resources included). A placeholder elsewhere (an image, a command) decides nothing here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# What each kind of placeholder looks like, and what renders it.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a Go/Helm template", re.compile(r"\{\{.*?\}\}|\{\{")),
    ("an environment variable for envsubst", re.compile(r"\$\{[^}]*\}|\$\(\s*[A-Za-z_]\w*\s*\)|\$[A-Z_][A-Z0-9_]*")),
    ("a placeholder to replace", re.compile(r"<[^<>\s][^<>]*>")),
    # All capitals with an underscore (FILLED_BY_VALIDATOR, YOUR_NAMESPACE) or a capitalised word standing alone
    # (CHANGEME, TODO): never a Kubernetes name (lower case) nor a quantity (digits first).
    ("a placeholder to replace", re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|^[A-Z]{3,}$")),
)
METADATA_FIELDS = ("name", "generateName", "namespace")
MAX_SHOWN = 60
TEMPLATE_START = "{{"


def placeholder_kind(value: str) -> str | None:
    """What kind of placeholder ``value`` holds, or None when it holds none."""
    for kind, pattern in _PATTERNS:
        if pattern.search(value):
            return kind
    return None


def _shown(value: str) -> str:
    return repr(value if len(value) <= MAX_SHOWN else value[: MAX_SHOWN - 3] + "...")


def _resources(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """(path, value) of every resource name and quantity under a ``resources`` mapping's limits and requests."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            at = f"{where}.{key}" if where else str(key)
            if key == "resources" and isinstance(item, Mapping):
                for part in ("limits", "requests"):
                    amounts = item.get(part)
                    if isinstance(amounts, Mapping):
                        for name, amount in amounts.items():
                            yield f"{at}.{part}", name
                            yield f"{at}.{part}[{name}]", amount
            else:
                yield from _resources(item, at)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _resources(item, f"{where}[{index}]")


def placeholders(obj: Mapping[str, Any]) -> list[str]:
    """Each placeholder in the fields a decision reads, as ``<path>: <value> (<kind>)``."""
    found: list[str] = []
    metadata = obj.get("metadata")
    fields: list[tuple[str, Any]] = []
    if isinstance(metadata, Mapping):
        fields += [(f"metadata.{name}", metadata.get(name)) for name in METADATA_FIELDS]
    fields += list(_resources(obj.get("spec"), "spec"))
    for where, value in fields:
        text = value if isinstance(value, str) else None
        kind = placeholder_kind(text) if text is not None else None
        if kind is not None and text is not None:
            found.append(f"{where}: {_shown(text)} ({kind})")
    return found


def unrendered_template(text: str) -> int | None:
    """The line (from 1) of the first Go/Helm template action in ``text``, or None: for a file that is not valid
    YAML, the likely reason (``{{- if .Values.gpu }}`` on a line of its own is no YAML)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if TEMPLATE_START in line and not line.lstrip().startswith("#"):
            return number
    return None


RENDER_FIRST = "render it first (helm template, kustomize build, envsubst) and check what it renders"
