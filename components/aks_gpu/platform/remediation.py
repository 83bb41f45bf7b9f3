"""The quarantine engine in the cluster: NVSentinel's namespace and Helm release, from the pure builder
(``components/aks_gpu/monitoring/remediation.py``). Nothing with ``remediation.mode: off`` or without NVIDIA pools."""

from __future__ import annotations

import pulumi

from aks_gpu.component import kube_resource
from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.monitoring.remediation import namespace_manifest, remediation_release
from aks_gpu.platform.charts import chart_release
from aks_gpu.resolved.model import PlatformModel


def remediation_resources(name: str, model: PlatformModel, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The namespace and the release, children of ``opts.parent``; empty when nothing is deployed."""
    spec = remediation_release(model, critical_xid_codes())
    if spec is None:
        return []
    namespace = kube_resource(f"{name}-namespace", namespace_manifest(), opts)
    release = chart_release(f"{name}-release", spec, namespace, opts)
    return [namespace, release]
