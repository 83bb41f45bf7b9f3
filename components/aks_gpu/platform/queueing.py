"""The queueing engine's resources in a stack (aks-gpu:queueing): Kueue's namespace, its own Helm chart, and the
queues (kube/kueue.py) once the chart has installed their CRDs and the webhooks that check them; the queues alone with
``installChart: false`` (Kueue runs already)."""

from __future__ import annotations

from typing import Any

import pulumi

from aks_gpu.component import kube_resource
from aks_gpu.kube.kueue import kueue_namespace_manifest, kueue_release, queue_manifests
from aks_gpu.platform.charts import chart_release
from aks_gpu.resolved.model import PlatformModel


def queueing_resources(
    name: str, model: PlatformModel, opts: pulumi.ResourceOptions, after: list[pulumi.Resource]
) -> list[pulumi.Resource]:
    """The namespace, the release and the queues, children of ``opts.parent``; empty without queueing. ``after``:
    the workload namespaces, where the LocalQueues go."""
    queueing, spec = model.config.queueing, kueue_release(model)
    if queueing is None or spec is None:
        return []
    engine: list[pulumi.Resource] = []
    if queueing.install_chart:
        namespace = kube_resource(f"{name}-namespace", kueue_namespace_manifest(), opts)
        release = chart_release(f"{name}-release", spec, namespace, opts)
        engine = [namespace, release]
    queues = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[*engine[1:], *after]))
    objects = [kube_resource(_resource_name(name, manifest), manifest, queues) for manifest in queue_manifests(model)]
    return [*engine, *objects]


def _resource_name(name: str, manifest: dict[str, Any]) -> str:
    # Each LocalQueue is named default: its namespace tells them apart.
    meta = manifest["metadata"]
    where = f"{meta['namespace']}-" if "namespace" in meta else ""
    return f"{name}-{manifest['kind'].lower()}-{where}{meta['name']}"
