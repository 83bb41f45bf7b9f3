"""The "Choose AKS Automatic or AKS Standard" practice: GPU NodePools of node auto-provisioning, judged for their taint,
their limits and whether Karpenter may take a node from under a running job; nodes counted under their NodePool."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from aks_gpu.aks_facts import kubernetes_calendar
from aks_gpu.audit.engine import run_audit
from aks_gpu.azure.node_provisioning import azure_node_class_ref, node_pool_manifest
from aks_gpu.cluster.inventory import read_gpu_nodes
from aks_gpu.cluster.snapshot import NODEPOOLS_FILE, ClusterSnapshot, read_snapshot
from aks_gpu.resolved.model import resolve
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw

NAP_IDS = {"nap-gpu-nodepool-untainted", "nap-gpu-nodepool-unbounded", "nap-gpu-nodepool-disrupts-jobs"}


def platform_nodepool() -> dict[str, Any]:
    raw = copy.deepcopy(minimal_raw())
    raw["aks-gpu:cluster"]["sku"] = "Automatic"
    [pool] = resolve(validate_stack(raw, "s", today=kubernetes_calendar().read_on).config).pools
    return node_pool_manifest(pool, azure_node_class_ref(pool))


# The NodePool of the AKS docs' managed-GPU example (articles/aks/aks-managed-gpu-nodes.md, MicrosoftDocs/azure-aks-docs
# @fb060abe): GPU sizes by sku-family N, no taint, no limits, Karpenter's default disruption.
DOCS_EXAMPLE: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "managed-gpu-np"},
    "spec": {
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "managed-gpu-class"},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.azure.com/sku-family", "operator": "In", "values": ["N"]},
                    {"key": "karpenter.azure.com/sku-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
                ]
            }
        },
    },
}
# NAP's own default NodePool (node-auto-provisioning-node-pools.md): D-family CPU nodes, not a GPU NodePool.
DEFAULT_NODEPOOL: dict[str, Any] = {
    "metadata": {"name": "default"},
    "spec": {
        "template": {"spec": {"requirements": [{"key": "karpenter.azure.com/sku-family", "operator": "In", "values": ["D"]}]}}
    },
}


def audit(nodepools: list[dict[str, Any]] | None) -> Any:
    return run_audit(ClusterSnapshot(nodes=[], daemonsets=[], pods=[], smi={}, exec_errors={}, nodepools=nodepools))


def test_the_platforms_own_nodepool_passes() -> None:
    report = audit([platform_nodepool(), DEFAULT_NODEPOOL])
    assert set(report.checked) >= NAP_IDS
    assert [f.id for f in report.findings if f.id in NAP_IDS] == []


def test_the_docs_example_is_untainted_unbounded_and_disrupts_jobs() -> None:
    report = audit([DOCS_EXAMPLE])
    found = {f.id: f.message for f in report.findings if f.id in NAP_IDS}
    assert set(found) == NAP_IDS
    assert "expireAfter 720h" in found["nap-gpu-nodepool-disrupts-jobs"]
    assert "WhenEmptyOrUnderutilized" in found["nap-gpu-nodepool-disrupts-jobs"]


def test_without_the_file_the_practice_is_not_checked() -> None:
    report = audit(None)
    assert not NAP_IDS & set(report.checked)
    assert any(set(gap.ids) == NAP_IDS for gap in report.not_checked)


def test_the_file_is_read_from_a_snapshot(tmp_path: Path) -> None:
    for name in ("nodes.json", "daemonsets.json", "pods.json"):
        (tmp_path / name).write_text('{"items": []}', encoding="utf-8")
    (tmp_path / NODEPOOLS_FILE).write_text(json.dumps({"items": [DOCS_EXAMPLE]}), encoding="utf-8")
    snapshot = read_snapshot(tmp_path)
    assert snapshot.nodepools == [DOCS_EXAMPLE]


def test_a_nap_node_belongs_to_its_nodepool() -> None:
    node = {
        "metadata": {
            "name": "aks-gpu-abcde",
            "labels": {"karpenter.sh/nodepool": "aks-gpu-gpu"},
        },
        "status": {"capacity": {"nvidia.com/gpu": "1"}, "allocatable": {"nvidia.com/gpu": "1"}},
    }
    [gpu_node] = read_gpu_nodes([node])
    assert gpu_node.pool == "aks-gpu-gpu"
