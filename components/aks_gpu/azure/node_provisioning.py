"""A NAP GPU pool as Kubernetes objects: a Karpenter ``NodePool`` (karpenter.sh/v1) and its ``AKSNodeClass``
(karpenter.azure.com/v1beta1), each field and enum from ``data/karpenter.yaml`` (read from the CRDs). Pure.

The NodePool's nodes carry exactly the taint and labels an agent pool's nodes carry (``ResolvedPool.taints`` and
``node_labels``), so the workload namespaces' selectors and tolerations, the admission policy and every placement rule
work unchanged. Requirements pin the pool's VM size (``node.kubernetes.io/instance-type``, as a node reports it) and
its GPU manufacturer and count (``karpenter.azure.com/sku-gpu-*``); limits stop it at ``maxCount`` nodes and their GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from aks_gpu.aks_facts import karpenter_facts
from aks_gpu.naming import ARCH_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, POOL_TAG, nap_object_name, vendor_resource
from aks_gpu.resolved.model import ResolvedPool

# Training jobs hold their GPUs for days and do not survive a move: no voluntary disruption other than removing an
# empty node (budgets of 0 nodes for Underutilized and Drifted), and nodes never expire (expiry is forceful in
# Karpenter v1 and ignores budgets). WhenEmptyOrUnderutilized (stateless serving) moves one node at a time.
Consolidation = Literal["WhenEmpty", "WhenEmptyOrUnderutilized"]


@dataclass(frozen=True)
class NodeClassRef:
    group: str
    kind: str
    name: str

    def to_kube(self) -> dict[str, str]:
        return {"group": self.group, "kind": self.kind, "name": self.name}


def azure_node_class_ref(pool: ResolvedPool) -> NodeClassRef:
    facts = karpenter_facts()["node_class"]
    return NodeClassRef(str(facts["group"]), str(facts["kind"]), nap_object_name(pool.name))


def image_family(pool: ResolvedPool) -> str:
    """The AKSNodeClass imageFamily of the pool's osSku: Ubuntu (the node image of the cluster's version) or AzureLinux."""
    family = pool.config.os_sku
    if family not in karpenter_facts()["node_class"]["image_families"]:
        raise ValueError(f"{family!r} is not an AKSNodeClass imageFamily")
    return family


def node_class_manifest(pool: ResolvedPool, tags: dict[str, str] | None = None) -> dict[str, Any]:
    """The pool's AKSNodeClass: image family, OS disk, max pods, who installs the GPU driver, Azure tags (the managed
    GPU experience's tag where the pool asks for it)."""
    facts = karpenter_facts()
    spec: dict[str, Any] = {
        "imageFamily": image_family(pool),
        "maxPods": pool.config.max_pods,
        # gpu.mode Driver: AKS installs the driver (agent pools' gpuProfile.driver Install); None where the GPU
        # Operator owns it, or AMD (AKS installs NVIDIA drivers only).
        "gpu": {"mode": "Driver" if pool.gpu_driver == "Install" else "None"},
        "tags": {**(tags or {}), POOL_TAG: pool.name},
    }
    if pool.config.os_disk_size_gb is not None:
        spec["osDiskSizeGB"] = pool.config.os_disk_size_gb
    if pool.config.managed_gpu:
        tag = facts["managed_gpu_tag"]
        spec["tags"][str(tag["key"])] = str(tag["value"])
    return {
        "apiVersion": f"{facts['node_class']['group']}/{facts['node_class']['version']}",
        "kind": facts["node_class"]["kind"],
        "metadata": {"name": nap_object_name(pool.name)},
        "spec": spec,
    }


def requirements(pool: ResolvedPool) -> list[dict[str, Any]]:
    """What a node of the pool must be: Linux on amd64, on-demand, of the pool's VM size, GPU manufacturer and count
    (the Azure provider's labels)."""
    facts = karpenter_facts()
    labels = facts["labels"]
    out: list[dict[str, Any]] = [
        {"key": ARCH_LABEL, "operator": "In", "values": ["amd64"]},
        {"key": OS_LABEL, "operator": "In", "values": ["linux"]},
        {"key": facts["node_pool"]["capacity_type_label"], "operator": "In", "values": ["on-demand"]},
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [pool.config.vm_size]},
    ]
    out.append({"key": labels["sku_gpu_manufacturer"], "operator": "In", "values": [pool.vendor]})
    if pool.gpus_per_node is not None:
        out.append({"key": labels["sku_gpu_count"], "operator": "In", "values": [str(pool.gpus_per_node)]})
    return out


def disruption(consolidation: Consolidation, consolidate_after_minutes: int) -> dict[str, Any]:
    """WhenEmpty (the default, training): only empty nodes go, ``consolidate_after_minutes`` after their last pod; a
    node under a running job is never taken for consolidation or drift. WhenEmptyOrUnderutilized: one node at a time."""
    after = f"{consolidate_after_minutes}m"
    keep_running = [{"nodes": "0", "reasons": ["Underutilized", "Drifted"]}]
    budgets = keep_running if consolidation == "WhenEmpty" else [{"nodes": "1"}]
    return {"consolidationPolicy": consolidation, "consolidateAfter": after, "budgets": budgets}


def node_pool_manifest(pool: ResolvedPool, node_class: NodeClassRef) -> dict[str, Any]:
    """The pool's Karpenter NodePool."""
    facts = karpenter_facts()["node_pool"]
    nap = pool.config.nap
    limits: dict[str, str] = {str(facts["node_limit_key"]): str(pool.config.max_count)}
    if pool.gpus_per_node is not None:
        # Karpenter counts an instance type's capacity as its provider reports it: whole GPUs, before any MIG or
        # time-slicing the device plugin adds.
        limits[vendor_resource(pool.vendor)] = str(pool.config.max_count * pool.gpus_per_node)
    return {
        "apiVersion": f"{facts['group']}/{facts['version']}",
        "kind": facts["kind"],
        "metadata": {"name": nap_object_name(pool.name)},
        "spec": {
            "template": {
                "metadata": {"labels": dict(pool.node_labels)},
                "spec": {
                    "nodeClassRef": node_class.to_kube(),
                    "requirements": requirements(pool),
                    "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints],
                    "expireAfter": "Never",
                },
            },
            "disruption": disruption(nap.consolidation, nap.consolidate_after_minutes),
            "limits": limits,
        },
    }
