"""Stand-in CustomResourceDefinitions for the kinds the in-cluster layer creates but does not own: the Prometheus
operator's PodMonitor and PrometheusRule (``monitoring.coreos.com``) and managed Prometheus's PodMonitor
(``azmonitoring.coreos.com``, which the AKS metrics add-on installs). A local control plane has neither, so
``aksgpu local`` defines them with an open schema (``x-kubernetes-preserve-unknown-fields``): the real server then
accepts and stores our objects, while their field-level checks stay the operators' own (not copied here). Pure.
"""

from __future__ import annotations

from typing import Any

from aks_gpu.config.models import PlatformConfig
from aks_gpu.naming import COMMON_LABELS, GPU_NAMESPACE, LOCAL_STAND_IN_ANNOTATION

# (group, kind, plural): the kinds our manifests use (monitoring/exporters.py, monitoring/rules.py).
STAND_IN_KINDS = (
    ("monitoring.coreos.com", "PodMonitor", "podmonitors"),
    ("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
    ("azmonitoring.coreos.com", "PodMonitor", "podmonitors"),
)
STAND_IN_ANNOTATION = LOCAL_STAND_IN_ANNOTATION


def stand_in_crds() -> list[dict[str, Any]]:
    return [_crd(group, kind, plural) for group, kind, plural in STAND_IN_KINDS]


def stand_in_namespaces(config: PlatformConfig) -> list[dict[str, Any]]:
    """The Prometheus operator's namespace, where the prometheus-operator engine puts its PodMonitors and rules: the
    operator's install makes it on a real cluster, and the stack does not (found by the real server: the amd stack's
    `monitoring` namespace did not exist)."""
    monitoring = config.monitoring
    namespace = monitoring.prometheus_operator.namespace
    if not monitoring.enabled or monitoring.engine != "prometheus-operator" or namespace == GPU_NAMESPACE:
        return []
    labels = {**COMMON_LABELS, STAND_IN_ANNOTATION.replace("/", "-"): "true"}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}]


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
