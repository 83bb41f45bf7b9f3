"""Planned disruption in the audit: a GPU node with an Azure scheduled event pending (the Node Problem Detector
condition VMEventScheduled) and one an upgrade left cordoned because it could not drain it
(kubernetes.azure.com/upgrade-status=Quarantined), as components/aks_gpu/data/disruption.yaml records them."""

from __future__ import annotations

from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.report import AuditReport
from aks_gpu.cluster.snapshot import ClusterSnapshot
from tests.audit.clusters import TRAIN_0, TRAIN_1, clean_snapshot, edited, find_node, npd_condition

CLEAN = clean_snapshot()


def with_event(status: str, reason: str, message: str, node: str = TRAIN_0) -> ClusterSnapshot:
    snapshot = edited(CLEAN)
    conditions = find_node(snapshot, node)["status"]["conditions"]
    conditions[:] = [c for c in conditions if c["type"] != "VMEventScheduled"]
    conditions.append(npd_condition("VMEventScheduled", status, reason, message))
    return snapshot


def found(report: AuditReport, finding: str) -> list[tuple[str, str]]:
    return [(f.node or "", f.message) for f in report.findings if f.id == finding]


def test_a_clean_cluster_has_no_disruption_finding_and_both_are_checked() -> None:
    report = run_audit(CLEAN)
    assert found(report, "node-vm-event-scheduled") == [] and found(report, "node-upgrade-blocked") == []
    assert {"node-vm-event-scheduled", "node-upgrade-blocked"} <= set(report.checked)


def test_a_pending_scheduled_event_warns_with_what_npd_says() -> None:
    # The condition as AKS's NPD writes it while no event is pending: no finding.
    quiet = run_audit(with_event("False", "NoVMEventScheduled", "VM has no scheduled event"))
    assert found(quiet, "node-vm-event-scheduled") == []
    report = run_audit(with_event("True", "VMEventScheduled", "Redeploy scheduled for Mon, 07 Dec 2026 05:00:00 GMT"))
    [(node, message)] = found(report, "node-vm-event-scheduled")
    assert node == TRAIN_0 and "Redeploy scheduled" in message and "still schedulable" in message
    assert "not live-migrated" in message and "checkpoint" in message
    assert all(f.severity == "warn" for f in report.findings if f.id == "node-vm-event-scheduled")


def test_a_node_an_upgrade_could_not_drain_warns() -> None:
    snapshot = edited(CLEAN)
    find_node(snapshot, TRAIN_1)["metadata"]["labels"]["kubernetes.azure.com/upgrade-status"] = "Quarantined"
    [(node, message)] = found(run_audit(snapshot), "node-upgrade-blocked")
    assert node == TRAIN_1 and "old node image" in message
    assert f"kubectl label node {TRAIN_1} kubernetes.azure.com/upgrade-status-" in message
