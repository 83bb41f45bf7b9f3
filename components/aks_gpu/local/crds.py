"""Stand-in CustomResourceDefinitions for the kinds the in-cluster layer creates but does not own: the Prometheus
operator's PodMonitor and PrometheusRule (``monitoring.coreos.com``) and managed Prometheus's PodMonitor
(``azmonitoring.coreos.com``, which the AKS metrics add-on installs). A local control plane has neither, so
``aksgpu local`` defines them with an open schema (``x-kubernetes-preserve-unknown-fields``): the real server then
accepts and stores our objects, while their field-level checks stay the operators' own (not copied here). Pure.
"""

from __future__ import annotations

from typing import Any

from aks_gpu.naming import COMMON_LABELS

# (group, kind, plural): the kinds our manifests use (monitoring/exporters.py, monitoring/rules.py).
STAND_IN_KINDS = (
    ("monitoring.coreos.com", "PodMonitor", "podmonitors"),
    ("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
    ("azmonitoring.coreos.com", "PodMonitor", "podmonitors"),
)
STAND_IN_ANNOTATION = "aks-gpu/stand-in"


def stand_in_crds() -> list[dict[str, Any]]:
    return [_crd(group, kind, plural) for group, kind, plural in STAND_IN_KINDS]


def _crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "labels": dict(COMMON_LABELS),
            "annotations": {STAND_IN_ANNOTATION: "an open-schema stand-in of the operator's CRD, for aksgpu local"},
        },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
