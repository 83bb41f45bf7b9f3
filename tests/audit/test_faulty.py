"""``gpu-node-faulty-schedulable``: a GPU node with a critical fault that still takes new GPU pods. Three states of the
same faulty node (schedulable, quarantined by the engine's taint, cordoned) and a healthy cluster, from the clean
prod snapshot of ``tests/audit/clusters.py`` edited one field at a time, as ``kubectl get nodes -o json`` shows them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.report import AuditReport
from aks_gpu.audit.stack import expectations
from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.naming import QUARANTINE_TAINT_EFFECT, QUARANTINE_TAINT_KEY, QUARANTINE_TAINT_VALUE
from aks_gpu.resolved.stack import validate_stack
from tests.audit.clusters import PROD, TRAIN_0, TRAIN_1, clean_snapshot, edited, find_node, npd_condition
from tests.conftest import HEALTH_FIXTURES_DIR, raw_stack

CLEAN = clean_snapshot()
STACK = expectations(PROD, "prod")
ID = "gpu-node-faulty-schedulable"


def state(*edits: Callable[[ClusterSnapshot], Any]) -> ClusterSnapshot:
    snapshot = edited(CLEAN)
    for edit in edits:
        edit(snapshot)
    return snapshot


def npd_true(kind: str, node: str = TRAIN_0) -> Callable[[ClusterSnapshot], None]:
    def edit(snapshot: ClusterSnapshot) -> None:
        conditions = find_node(snapshot, node)["status"]["conditions"]
        conditions[:] = [c for c in conditions if c["type"] != kind]
        conditions.append(npd_condition(kind, "True", kind, f"{kind} detected"))

    return edit


def smi(fixture: str, node: str = TRAIN_1) -> Callable[[ClusterSnapshot], None]:
    text = (HEALTH_FIXTURES_DIR / fixture).read_text(encoding="utf-8")
    return lambda snapshot: snapshot.smi.__setitem__(node, text)


def taint(key: str, value: str, effect: str, node: str = TRAIN_0) -> Callable[[ClusterSnapshot], None]:
    def edit(snapshot: ClusterSnapshot) -> None:
        find_node(snapshot, node)["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": effect})

    return edit


def cordon(node: str = TRAIN_0) -> Callable[[ClusterSnapshot], None]:
    return lambda snapshot: find_node(snapshot, node)["spec"].__setitem__("unschedulable", True)


def flagged(report: AuditReport) -> list[str]:
    return [finding.node or "" for finding in report.findings if finding.id == ID]


QUARANTINE = (QUARANTINE_TAINT_KEY, QUARANTINE_TAINT_VALUE, QUARANTINE_TAINT_EFFECT)


@pytest.mark.parametrize("stack", [None, STACK], ids=["without-stack", "with-stack"])
def test_a_healthy_cluster_has_no_faulty_node(stack: Any) -> None:
    report = run_audit(CLEAN, stack)
    assert flagged(report) == [] and ID in report.checked


@pytest.mark.parametrize("kind", ["XIDErrors", "GPUMissing", "NVLinkStatusInactive", "UnhealthyNvidiaDCGMServices"])
def test_a_true_npd_gpu_condition_on_a_schedulable_node_fails(kind: str) -> None:
    report = run_audit(state(npd_true(kind)), STACK)
    (finding,) = [f for f in report.findings if f.id == ID]
    assert (finding.severity, finding.node) == ("fail", TRAIN_0)
    assert f"Node Problem Detector {kind}=True" in finding.message and f"kubectl cordon {TRAIN_0}" in finding.message
    assert report.failed


def test_a_warning_condition_alone_is_no_fault_to_quarantine_for() -> None:
    assert flagged(run_audit(state(npd_true("GPUClockThrottling")), STACK)) == []


def test_a_critical_smi_finding_on_a_schedulable_node_fails() -> None:
    # gpud's real A10 nvidia-smi -q with a pending row remap (tests/fixtures/health/SOURCES.md, fixture 30).
    report = run_audit(state(smi("30_nvidia-smi-q_a10_535.129.03_row_remap_pending.txt")), STACK)
    (finding,) = [f for f in report.findings if f.id == ID]
    assert finding.node == TRAIN_1 and "row-remap-pending on GPU" in finding.message


def test_a_smi_warning_alone_is_no_fault() -> None:
    report = run_audit(state(smi("31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt")), STACK)
    assert flagged(report) == []


@pytest.mark.parametrize("stack", [None, STACK], ids=["without-stack", "with-stack"])
def test_a_quarantined_node_passes(stack: Any) -> None:
    report = run_audit(state(npd_true("XIDErrors"), taint(*QUARANTINE)), stack)
    assert flagged(report) == [] and ID in report.checked
    assert any(f.id == "gpu-condition" for f in report.findings)  # the fault itself is still reported


def test_a_cordoned_node_passes() -> None:
    assert flagged(run_audit(state(npd_true("GPUMissing"), cordon()), STACK)) == []


@pytest.mark.parametrize(
    ("key", "effect", "fenced"),
    [
        ("nvidia.com/gpu", "NoSchedule", False),  # every GPU pod tolerates the GPU taint
        ("kubernetes.azure.com/scalesetpriority", "NoSchedule", False),  # spot: pods there tolerate it
        ("sku", "NoSchedule", False),  # AKS's own walkthrough's GPU taint
        (QUARANTINE_TAINT_KEY, "PreferNoSchedule", False),  # asks, does not keep pods off
        ("node.example.com/broken", "NoExecute", True),  # a person's own quarantine taint
        (QUARANTINE_TAINT_KEY, "NoSchedule", True),
    ],
)
def test_which_taints_keep_gpu_work_off(key: str, effect: str, fenced: bool) -> None:
    report = run_audit(state(npd_true("XIDErrors"), taint(key, "x", effect)), STACK)
    assert (flagged(report) == []) is fenced


def test_with_the_stack_a_pools_own_taint_is_no_quarantine() -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:gpuPools"][0]["taints"] = ["team=ml:NoSchedule"]
    stack = expectations(validate_stack(raw, "test").model, "prod")
    own = state(npd_true("XIDErrors"), taint("team", "ml", "NoSchedule"))
    assert flagged(run_audit(own, stack)) == [TRAIN_0]
    # Without the stack the audit cannot tell a pool's taint from a quarantine: it gives the node the benefit.
    assert flagged(run_audit(own, None)) == []


def test_without_any_health_signal_it_is_not_checked() -> None:
    def strip(snapshot: ClusterSnapshot) -> None:
        snapshot.smi.clear()
        for node in snapshot.nodes:
            node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]

    report = run_audit(state(strip), STACK)
    assert ID not in report.checked and any(ID in gap.ids for gap in report.not_checked)


def test_amd_and_operator_pools_are_said_to_get_no_npd_gpu_checks() -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:devicePlugin"] = {"mode": "gpu-operator"}
    model = validate_stack(raw, "test").model
    stack = expectations(model, "prod")

    def strip(snapshot: ClusterSnapshot) -> None:
        for node in snapshot.nodes:
            node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]

    report = run_audit(state(strip), stack)
    reasons = [gap.reason for gap in report.not_checked if gap.ids == ("gpu-condition",)]
    assert any("runs no GPU check there" in reason for reason in reasons), reasons
