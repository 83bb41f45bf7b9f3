"""Stand-in CustomResourceDefinitions for the kinds the in-cluster layer creates but does not own: the Prometheus
operator's PodMonitor and PrometheusRule (``monitoring.coreos.com``), managed Prometheus's PodMonitor
(``azmonitoring.coreos.com``, which the AKS metrics add-on installs), and node auto-provisioning's NodePool
(``karpenter.sh``) and AKSNodeClass (``karpenter.azure.com``), which AKS installs with NAP (the NodePool and
AKSNodeClass objects are held to their CRDs' facts by tests/azure/test_node_provisioning.py instead). A local control
plane has none of them, so
``aksgpu local`` defines them with an open schema (``x-kubernetes-preserve-unknown-fields``): the real server then
accepts and stores our objects, while their field-level checks stay the operators' own (not copied here). Pure.
"""

from __future__ import annotations

from typing import Any

from aks_gpu.config.models import PlatformConfig
from aks_gpu.naming import COMMON_LABELS, GPU_NAMESPACE, LOCAL_STAND_IN_ANNOTATION

# (group, version, kind, plural, scope): the kinds our manifests use (monitoring/exporters.py, monitoring/rules.py,
# azure/node_provisioning.py).
STAND_IN_KINDS = (
    ("monitoring.coreos.com", "v1", "PodMonitor", "podmonitors", "Namespaced"),
    ("monitoring.coreos.com", "v1", "PrometheusRule", "prometheusrules", "Namespaced"),
    ("azmonitoring.coreos.com", "v1", "PodMonitor", "podmonitors", "Namespaced"),
    ("karpenter.sh", "v1", "NodePool", "nodepools", "Cluster"),
    ("karpenter.azure.com", "v1beta1", "AKSNodeClass", "aksnodeclasses", "Cluster"),
)
STAND_IN_ANNOTATION = LOCAL_STAND_IN_ANNOTATION


def stand_in_crds(real_node_pools: bool = False) -> list[dict[str, Any]]:
    """The stand-ins; with ``real_node_pools`` (a NAP stack, whose Karpenter installs Karpenter's own CRDs,
    local/karpenter.py) without the NodePool's."""
    left_out = {("karpenter.sh", "NodePool")} if real_node_pools else set()
    return [_crd(*kind) for kind in STAND_IN_KINDS if (kind[0], kind[2]) not in left_out]


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


def _crd(group: str, version: str, kind: str, plural: str, scope: str) -> dict[str, Any]:
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
            "scope": scope,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
