"""What every Kubernetes object of the platform has in common, applied in one place. Pure: no Pulumi.

The builders (device plugins, exporters, namespaces, policies, storage, smoke Jobs) return manifests with the labels
that mean something to them; ``labelled`` adds the platform's common labels (``aks_gpu.naming.COMMON_LABELS``) to
the object and to the pods of a workload template. ``aks_gpu.component.kube_resource`` applies it to every
manifest it registers, so no object can be created without them, and the command line applies it to what it prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aks_gpu.naming import COMMON_LABELS

Manifest = dict[str, Any]


def with_common_labels(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with the common labels added (a label the object sets itself is kept)."""
    return {**metadata, "labels": {**COMMON_LABELS, **(metadata.get("labels") or {})}}


def labelled(manifest: Manifest, lift: Callable[[Any, Callable[[Any], Any]], Any] | None = None) -> Manifest:
    """``manifest`` with the common labels on its metadata and, for a workload (DaemonSet, Job...), on its pod
    template. ``lift(value, f)`` applies ``f`` to a value that is only known later (a Pulumi output: ``kube_resource``
    passes one); plain values are changed in place of a copy."""

    def apply(value: Any, change: Callable[[Any], Any]) -> Any:
        if isinstance(value, Mapping):
            return change(value)
        return lift(value, change) if lift is not None else value

    result = dict(manifest)
    result["metadata"] = apply(manifest.get("metadata") or {}, with_common_labels)
    spec = manifest.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("template"), Mapping):
        template = spec["template"]
        result["spec"] = {**spec, "template": {**template, "metadata": with_common_labels(template.get("metadata") or {})}}
    return result
