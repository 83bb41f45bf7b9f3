"""Planned disruption in the audit: a GPU node with an Azure scheduled event pending (the Node Problem Detector
condition VMEventScheduled) and one an upgrade left cordoned because it could not drain it
(kubernetes.azure.com/upgrade-status=Quarantined), as components/aks_gpu/data/disruption.yaml records them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.report import AuditReport
from aks_gpu.audit.stack import expectations
from aks_gpu.cluster.snapshot import ClusterSnapshot, SnapshotError, read_snapshot, write_snapshot
from tests.audit.clusters import (
    INFER_0,
    PROD,
    REBOOT_END,
    REBOOT_START,
    SYSTEM_0,
    TRAIN_0,
    TRAIN_1,
    clean_snapshot,
    edited,
    find_node,
    node_event,
    npd_condition,
)

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


# ---------------------------------------------------------------- the events on the nodes (events.json)
#
# Scheduled events as AKS's Node Problem Detector writes them, in the shapes recorded on real AKS nodes
# (components/aks_gpu/data/disruption.yaml, scheduled_events: a Reboot on a node whose kubelet was stopped, 2024-12-06;
# a spot eviction, maksim-paskal/aks-node-termination-handler#98; an IMDS timeout under PreemptScheduled), and AKS node
# auto-repair's events with the reasons and messages of node-auto-repair.md:86-104. Times moved to the snapshot's hour.
NPD_CONDITION_SOURCE = "custom-scheduledevents-consolidated-condition-plugin-monitor"
NPD_EVENT_SOURCE = "custom-scheduledevents-consolidated-plugin-monitor"
REBOOT_ANNOUNCED = (
    "Reboot Scheduled: Mon, 20 Oct 2025 07:40:55 GMT. DurationInSeconds: -1. Virtual machine is going to be restarted "
    "as requested by authorized user. For more information, see https://aka.ms/aks/scheduledevents."
)
SCHEDULED = [
    node_event(
        TRAIN_0,
        "VMEventScheduled",
        f'Node condition VMEventScheduled is now: True, reason: VMEventScheduled, message: "{REBOOT_ANNOUNCED}"',
        NPD_CONDITION_SOURCE,
        "2025-10-20T07:25:41Z",
    ),
    node_event(
        TRAIN_0,
        "RebootScheduled",
        REBOOT_ANNOUNCED.removeprefix("Reboot "),
        NPD_EVENT_SOURCE,
        "2025-10-20T07:39:12Z",
        count=14,
        first="2025-10-20T07:26:03Z",
    ),
]
IMDS_TIMEOUT = node_event(
    TRAIN_0,
    "PreemptScheduled",
    "IMDS query failed, exit code: 28\nConnection timed out after 24 seconds.",
    "custom-scheduledevents-consolidated-preempt-plugin-monitor",
    "2025-10-20T07:50:02Z",
)
REPAIR = "aks-auto-repair"


def with_events(events: list[dict[str, Any]], condition: tuple[str, str, str] | None = None) -> ClusterSnapshot:
    snapshot = with_event(*condition) if condition else edited(CLEAN)
    return replace(snapshot, events=events)


def test_a_pending_event_carries_the_npd_events_as_its_evidence() -> None:
    report = run_audit(with_events(SCHEDULED, ("True", "VMEventScheduled", REBOOT_ANNOUNCED)))
    [(node, message)] = found(report, "node-vm-event-scheduled")
    assert node == TRAIN_0
    assert "events: RebootScheduled x14, VMEventScheduled" in message
    assert 'RebootScheduled at 2025-10-20T07:39:12Z from custom-scheduledevents-consolidated-plugin-monitor' in message
    assert found(report, "node-vm-event-recent") == []


def test_an_event_announced_and_gone_warns_that_the_node_was_touched() -> None:
    report = run_audit(with_events(SCHEDULED, ("False", "NoVMEventScheduled", "VM has no scheduled event")))
    assert found(report, "node-vm-event-scheduled") == []
    [(node, message)] = found(report, "node-vm-event-recent")
    assert node == TRAIN_0 and "has run (or was cancelled)" in message and "RebootScheduled x14" in message
    assert "aksgpu validate --stack <stack> --deep --node aks-train-31415926-vmss000000" in message
    assert all(f.severity == "warn" for f in report.findings)


def test_a_plugin_failure_under_a_scheduled_event_reason_is_no_event() -> None:
    # NPD emits the rule's reason when its IMDS query fails: "PreemptScheduled" with no preemption behind it.
    report = run_audit(with_events([IMDS_TIMEOUT]))
    assert found(report, "node-vm-event-recent") == [] and report.findings == ()


def test_one_auto_repair_warns_with_the_action_the_time_and_the_check_to_run() -> None:
    events = [
        node_event(TRAIN_1, "NodeRebootStart", REBOOT_START, REPAIR, "2025-10-20T07:31:00Z", type_="Normal"),
        node_event(TRAIN_1, "NodeRebootEnd", REBOOT_END, REPAIR, "2025-10-20T07:36:40Z", type_="Normal"),
    ]
    report = run_audit(with_events(events), expectations(PROD, "prod"))
    [finding] = [f for f in report.findings if f.id == "node-auto-repaired"]
    assert (finding.node, finding.severity) == (TRAIN_1, "warn")
    assert "took aks-train-31415926-vmss000001 back (reboot)" in finding.message
    assert f"last: NodeRebootEnd at 2025-10-20T07:36:40Z from aks-auto-repair: \"{REBOOT_END}\"" in finding.message
    assert f"aksgpu validate --stack prod --deep --node {TRAIN_1}" in finding.remedy
    assert report.summary()["autoRepairs"] == {"gpuNodes": 1, "otherNodes": 0}


FIRST_REBOOT = "2025-10-20T07:09:00Z"


def test_a_node_repaired_twice_in_the_window_fails_also_when_the_server_aggregated_the_repeat() -> None:
    # The second NodeRebootStart carries the same message: the API server counts it on the first (count 2).
    events = [
        node_event(INFER_0, "NodeRebootStart", REBOOT_START, REPAIR, "2025-10-20T07:44:00Z", count=2, first=FIRST_REBOOT),
        node_event(INFER_0, "NodeRebootEnd", REBOOT_END, REPAIR, "2025-10-20T07:49:30Z", count=2, first="2025-10-20T07:14:10Z"),
        node_event(INFER_0, "NodeReimageStart", REBOOT_START.replace("reboot", "reimage"), REPAIR, "2025-10-20T07:55:00Z"),
    ]
    report = run_audit(with_events(events))
    [finding] = [f for f in report.findings if f.id == "node-auto-repaired"]
    assert (finding.node, finding.severity) == (INFER_0, "fail") and report.failed
    assert "back 2 times in the window (reboot x2, reimage)" in finding.message
    assert "NodeReimageStart at 2025-10-20T07:55:00Z" in finding.message and "support case" in finding.remedy


def test_a_failed_repair_fails_with_the_error_aks_gave() -> None:
    error = (
        "Node auto-repair reimage action failed due to an operation failure. See error details here: ARM ErrorCode: "
        "VMExtensionProvisioningError"
    )
    events = [node_event(TRAIN_0, "NodeReimageError", error, REPAIR, "2025-10-20T07:58:00Z")]
    report = run_audit(with_events(events))
    [finding] = [f for f in report.findings if f.id == "node-auto-repair-failed"]
    assert (finding.node, finding.severity) == (TRAIN_0, "fail")
    assert "could not reimage" in finding.message and "VMExtensionProvisioningError" in finding.message


def test_other_nodes_events_old_events_and_other_sources_are_not_judged() -> None:
    events = [
        # A CPU node's repair: counted, not judged.
        node_event(SYSTEM_0, "NodeRebootStart", REBOOT_START, REPAIR, "2025-10-20T07:31:00Z"),
        # A GPU node's repair two days before the snapshot: outside the window.
        node_event(TRAIN_0, "NodeRebootStart", REBOOT_START, REPAIR, "2025-10-18T07:31:00Z"),
        # The same reason from another writer than AKS node auto-repair (anyone who may create events).
        node_event(TRAIN_1, "NodeRebootError", "reboot failed", "my-operator", "2025-10-20T07:31:00Z"),
    ]
    report = run_audit(with_events(events))
    assert report.findings == ()
    assert report.summary()["autoRepairs"] == {"gpuNodes": 0, "otherNodes": 1}
    assert {"node-vm-event-recent", "node-auto-repaired", "node-auto-repair-failed"} <= set(report.checked)


def test_without_events_json_the_event_checks_are_not_checked_with_the_collectors_reason() -> None:
    snapshot = replace(edited(CLEAN), events=None, not_collected={"events.json": "HTTP 403: Forbidden"})
    report = run_audit(snapshot)
    [gap] = [gap for gap in report.not_checked if gap.practice == "disruption"]
    assert gap.ids == ("node-vm-event-recent", "node-auto-repaired", "node-auto-repair-failed")
    assert "events.json is not in the snapshot (HTTP 403: Forbidden)" in gap.reason
    assert "node-auto-repaired" not in report.checked and "node-vm-event-scheduled" in report.checked
    assert report.summary()["autoRepairs"] is None


def test_an_event_of_the_wrong_shape_is_refused_naming_the_file_the_event_and_the_field(tmp_path: Path) -> None:
    write_snapshot(with_events([]), tmp_path)
    bad = node_event(TRAIN_0, "NodeRebootStart", REBOOT_START, REPAIR, "2025-10-20T07:31:00Z")
    bad["count"] = "2"
    (tmp_path / "events.json").write_text(json.dumps({"kind": "List", "items": [bad]}), encoding="utf-8")
    with pytest.raises(SnapshotError, match=r"events.json: items\[0\] \(Event aks-train-31415926-vmss000000\.\w+\): count"):
        read_snapshot(tmp_path)
