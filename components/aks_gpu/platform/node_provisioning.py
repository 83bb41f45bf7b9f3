"""The NAP GPU pools in the cluster: one AKSNodeClass and one Karpenter NodePool per pool with provisioning nap, from the
pure builder (``components/aks_gpu/azure/node_provisioning.py``), through the cluster's Kubernetes provider. Karpenter
(node auto-provisioning, AKS's) then brings and removes the pool's nodes; no agent pool exists for them."""

from __future__ import annotations

from collections.abc import Callable

import pulumi

from aks_gpu.azure.node_provisioning import NodeClassRef, azure_node_class_ref, node_class_manifest, node_pool_manifest
from aks_gpu.component import kube_resource
from aks_gpu.naming import PACKAGE_NAME
from aks_gpu.resolved.model import PlatformModel, ResolvedPool

# The node class a NAP NodePool names: the pool's AKSNodeClass on Azure (`aksgpu local` names kwok's instead).
NodeClassOf = Callable[[ResolvedPool], NodeClassRef]


def nap_pool_resources(
    name: str, model: PlatformModel, opts: pulumi.ResourceOptions, node_class_of: NodeClassOf = azure_node_class_ref
) -> list[pulumi.Resource]:
    """The node classes and NodePools, children of ``opts.parent``; each NodePool after its node class, naming the
    node class ``node_class_of`` gives it."""
    cluster = model.cluster
    tags = {"managed-by": PACKAGE_NAME, **(dict(cluster.tags) if cluster is not None else {})}
    created: list[pulumi.Resource] = []
    for pool in model.pools:
        if not pool.nap:
            continue
        node_class = kube_resource(f"{name}-{pool.name}-nodeclass", node_class_manifest(pool, tags), opts)
        node_pool = kube_resource(
            f"{name}-{pool.name}-nodepool",
            node_pool_manifest(pool, node_class_of(pool)),
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[node_class])),
        )
        created += [node_class, node_pool]
    return created
