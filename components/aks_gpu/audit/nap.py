"""The "Choose AKS Automatic or AKS Standard" practice: GPU capacity that node auto-provisioning (Karpenter, AKS
Automatic's and Standard's NAP) brings up is a ``NodePool``, not an agent pool, and the article's placement and
lifecycle rules hold for it too ("These platform defaults don't replace workload-level best practices such as placement
controls"). Each GPU NodePool is judged on what its nodes will be: the GPU taint (``nap-gpu-nodepool-untainted``), a
bound on what it may start (``nap-gpu-nodepool-unbounded``) and whether Karpenter may take a node from under a running
job (``nap-gpu-nodepool-disrupts-jobs``). Pure.

The NodePool fields are karpenter.sh/v1's (components/aks_gpu/data/karpenter.yaml, with their source): Karpenter's own
defaults are consolidationPolicy WhenEmptyOrUnderutilized and expireAfter 720h (sigs.k8s.io/karpenter@v1.14.1
pkg/apis/crds/karpenter.sh_nodepools.yaml), and expiry is forceful: it does not wait for budgets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aks_gpu.aks_facts import karpenter_facts
from aks_gpu.audit.judging import Run
from aks_gpu.audit.registry import checks_of
from aks_gpu.catalog import load_catalog
from aks_gpu.cluster.snapshot import NODEPOOLS_FILE
from aks_gpu.naming import INSTANCE_TYPE_LABEL, MIG_RESOURCE_PREFIX, VENDORS, vendor_resource

PRACTICE = "automatic"
IDS = tuple(finding for check in checks_of(PRACTICE) for finding in check.finding_ids)
KARPENTER_DEFAULT_EXPIRY = "720h"
# The sku-family of Azure's GPU sizes (N: NC, ND, NV), as the AKS docs' NAP GPU example asks for it
# (articles/aks/aks-managed-gpu-nodes.md, `karpenter.azure.com/sku-family In [N]`).
GPU_SKU_FAMILY = "N"
GPU_RESOURCES = frozenset(vendor_resource(vendor) for vendor in VENDORS)


def _requirements(pool: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = ((pool.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [r for r in spec.get("requirements") or () if isinstance(r, Mapping)]


def is_gpu_nodepool(pool: Mapping[str, Any]) -> bool:
    """Whether the NodePool can only bring GPU nodes: it asks for a GPU manufacturer or count, the N family, or VM
    sizes the GPU catalog knows."""
    labels = karpenter_facts()["labels"]
    catalog = load_catalog()
    for requirement in _requirements(pool):
        key, operator, values = requirement.get("key"), requirement.get("operator"), requirement.get("values") or []
        if operator not in ("In", "Exists", "Gt"):
            continue
        if key in (labels["sku_gpu_manufacturer"], labels["sku_gpu_count"]):
            return True
        if key == labels["sku_family"] and values and all(value == GPU_SKU_FAMILY for value in values):
            return True
        if key in (INSTANCE_TYPE_LABEL, labels["sku_name"]) and values and all(catalog.vm_size(str(v)) for v in values):
            return True
    return False


def _gpu_tainted(pool: Mapping[str, Any]) -> bool:
    spec = ((pool.get("spec") or {}).get("template") or {}).get("spec") or {}
    for taint in spec.get("taints") or ():
        key, effect = str(taint.get("key") or ""), taint.get("effect")
        if effect not in ("NoSchedule", "NoExecute"):
            continue
        if key in GPU_RESOURCES or key.startswith(MIG_RESOURCE_PREFIX) or (key == "sku" and taint.get("value") == "gpu"):
            return True
    return False


def _bounded(pool: Mapping[str, Any]) -> bool:
    limits = (pool.get("spec") or {}).get("limits") or {}
    return "nodes" in limits or any(key in GPU_RESOURCES for key in limits)


def _disrupts_jobs(pool: Mapping[str, Any]) -> list[str]:
    spec = pool.get("spec") or {}
    disruption = spec.get("disruption") or {}
    reasons = []
    policy = disruption.get("consolidationPolicy") or "WhenEmptyOrUnderutilized"
    shielded = any(
        str(budget.get("nodes")) == "0" and "Underutilized" in (budget.get("reasons") or ["Underutilized"])
        for budget in disruption.get("budgets") or ()
    )
    if policy != "WhenEmpty" and not shielded:
        reasons.append(f"consolidationPolicy {policy} moves pods off nodes that still run them")
    expiry = ((spec.get("template") or {}).get("spec") or {}).get("expireAfter") or KARPENTER_DEFAULT_EXPIRY
    if expiry != "Never":
        reasons.append(f"expireAfter {expiry} replaces every node at that age, running jobs or not (expiry ignores budgets)")
    return reasons


def judge_nap(run: Run, nodepools: Sequence[Mapping[str, Any]] | None) -> None:
    if nodepools is None:
        run.gap(PRACTICE, IDS, f"{NODEPOOLS_FILE} was not collected (no karpenter.sh NodePools API, or no right to list it)")
        return
    run.checked.update(IDS)
    for pool in nodepools:
        if not is_gpu_nodepool(pool):
            continue
        name = str((pool.get("metadata") or {}).get("name"))
        if not _gpu_tainted(pool):
            run.add(
                "nap-gpu-nodepool-untainted",
                "fail",
                f"GPU NodePool {name}: its nodes get no GPU taint, so general pods may land on them",
                "Add spec.template.spec.taints [{key: nvidia.com/gpu, value: present, effect: NoSchedule}] (amd.com/gpu "
                "for AMD) and the matching toleration to GPU pods",
            )
        if not _bounded(pool):
            run.add(
                "nap-gpu-nodepool-unbounded",
                "warn",
                f"GPU NodePool {name}: no limits, so Karpenter starts GPU VMs for as long as pods are pending",
                "Set spec.limits: nodes (and nvidia.com/gpu) to what the team's quota and budget allow",
            )
        reasons = _disrupts_jobs(pool)
        if reasons:
            run.add(
                "nap-gpu-nodepool-disrupts-jobs",
                "warn",
                f"GPU NodePool {name}: " + "; ".join(reasons),
                "For training, set spec.disruption.consolidationPolicy WhenEmpty, a budget {nodes: '0', reasons: "
                "[Underutilized, Drifted]} and spec.template.spec.expireAfter Never",
            )
