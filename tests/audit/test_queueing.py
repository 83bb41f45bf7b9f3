"""The queueing practice: Kueue's ClusterQueues and Workloads read from a snapshot or a live cluster (what waits and
why, who borrows and who lends, whose nominal GPUs idle while another team of its cohort borrows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.report import AuditReport
from aks_gpu.cli import main
from aks_gpu.cluster.snapshot import ClusterSnapshot, SnapshotError, read_snapshot, write_snapshot
from tests.audit.clusters import clean_snapshot, edited
from tests.audit.queues import NO_FLAVOR, cluster_queue, workload
from tests.audit.test_cli import fresh, kubeconfig
from tests.cluster.fake_apiserver import FakeApiServer, FakeCluster

QUEUE_IDS = {"queue-workload-pending", "queue-gpus-borrowed", "queue-nominal-idle"}


def audit(clusterqueues: list[dict[str, Any]] | None, workloads: list[dict[str, Any]] | None) -> AuditReport:
    snapshot = ClusterSnapshot(
        nodes=[], daemonsets=[], pods=[], smi={}, exec_errors={}, clusterqueues=clusterqueues, workloads=workloads
    )
    return run_audit(snapshot)


def found(report: AuditReport) -> list[tuple[str, str | None]]:
    return [(f.id, f.namespace) for f in report.findings if f.id in QUEUE_IDS]


def message(report: AuditReport, id_: str) -> str:
    (finding,) = [f for f in report.findings if f.id == id_]
    return finding.message


def test_a_team_borrowing_the_idle_gpus_of_another_is_said_with_its_lender() -> None:
    queues = [
        cluster_queue("team-a", "training", 8, 12, borrowing_limit=8),
        cluster_queue("team-b", "training", 8, 4),
        cluster_queue("serving", "inference", 4, 4, flavor="infer"),
    ]
    report = audit(queues, [workload("team-a", "job-big", 4, 3, admitted_to="team-a")])

    assert found(report) == [("queue-gpus-borrowed", "team-a"), ("queue-nominal-idle", "team-b")]
    borrowed = message(report, "queue-gpus-borrowed")
    assert "borrows 4 nvidia.com/gpu on flavor train: 12 reserved of 8 nominal, borrowingLimit 8" in borrowed
    assert "lent by the idle quota of team-b (4)" in borrowed
    idle = message(report, "queue-nominal-idle")
    assert (
        "leaves 4 of its 8 nominal nvidia.com/gpu on flavor train unreserved and lends all of it, while team-a borrows 4" in idle
    )
    assert "lendingLimit" in idle.split(". ", 1)[1]


def test_the_summary_gives_each_queues_gpus_borrowed_and_lendable() -> None:
    queues = [
        cluster_queue("team-a", "training", 8, 12, borrowing_limit=8),
        cluster_queue("team-b", "training", 8, 4, lending_limit=2),
    ]
    report = audit(queues, [workload("team-b", "job-waiting", 8, 1)])

    rows = {row["clusterQueue"]: row for row in report.to_dict()["summary"]["queues"]}
    assert rows["team-a"] == {
        "clusterQueue": "team-a",
        "cohort": "training",
        "flavor": "train",
        "resource": "nvidia.com/gpu",
        "nominal": 8,
        "reserved": 12,
        "borrowed": 4,
        "lendable": 0,
        "borrowingLimit": 8,
        "lendingLimit": None,
        "pendingWorkloads": 0,
    }
    # team-b leaves 4 of its 8 unreserved, and lends at most 2 of them.
    b = rows["team-b"]
    assert (b["reserved"], b["borrowed"], b["lendable"], b["lendingLimit"], b["pendingWorkloads"]) == (4, 0, 2, 2, 1)
    assert audit(None, None).to_dict()["summary"]["queues"] == []


def test_a_pending_workload_gives_kueues_reason_and_its_gpus() -> None:
    queues = [cluster_queue("team-a", "training", 8, 8, pending=1), cluster_queue("team-b", "training", 8, 0, lending_limit=0)]
    workloads = [
        workload("team-a", "job-running", 8, 1, admitted_to="team-a"),
        workload("team-a", "job-waiting", 8, 2),
    ]
    report = audit(queues, workloads)

    assert found(report) == [("queue-workload-pending", "team-a"), ("queue-nominal-idle", "team-b")]
    pending = message(report, "queue-workload-pending")
    assert pending.startswith("Workload job-waiting (16 nvidia.com/gpu; LocalQueue default, ClusterQueue team-a) waits for quota")
    assert f"QuotaReserved False, Pending: {NO_FLAVOR}" in pending
    # Its idle quota is what team-a lacks, and its lendingLimit of 0 keeps it from lending any.
    idle = message(report, "queue-nominal-idle")
    assert (
        "leaves 8 of its 8 nominal" in idle and "lends at most 0 (lendingLimit), while team-a has 1 Workload(s) waiting" in idle
    )


def test_finished_and_admitted_workloads_do_not_wait() -> None:
    finished = workload("team-a", "job-done", 8, 1)
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"})
    report = audit(
        [cluster_queue("team-a", "training", 8, 8)], [finished, workload("team-a", "job-on", 8, 1, admitted_to="team-a")]
    )

    assert found(report) == []
    assert set(report.checked) >= QUEUE_IDS


def test_idle_quota_of_another_type_is_not_what_a_borrower_could_have() -> None:
    # Types are cohorts of their own: inference's idle GPUs are no training team's to borrow.
    queues = [
        cluster_queue("team-a", "training", 8, 16),
        cluster_queue("team-b", "training", 8, 0),
        cluster_queue("serving", "inference", 4, 0, flavor="infer"),
    ]
    report = audit(queues, [])

    assert found(report) == [("queue-gpus-borrowed", "team-a"), ("queue-nominal-idle", "team-b")]


def test_without_the_files_the_queues_are_not_checked_and_without_kueue_nothing_is_found() -> None:
    absent = audit(None, None)
    assert not QUEUE_IDS & set(absent.checked)
    assert [gap.practice for gap in absent.not_checked if QUEUE_IDS & set(gap.ids)] == ["queueing"]

    no_workloads = audit([cluster_queue("team-a", "training", 8, 0)], None)
    assert "queue-workload-pending" not in no_workloads.checked
    assert {"queue-gpus-borrowed", "queue-nominal-idle"} <= set(no_workloads.checked)

    no_kueue = audit([], [])
    assert found(no_kueue) == [] and set(no_kueue.checked) >= QUEUE_IDS


def test_a_quota_that_is_no_quantity_names_its_queue() -> None:
    queue = cluster_queue("team-a", "training", 8, 0)
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "eight"
    with pytest.raises(SnapshotError, match=r"clusterqueues.json: ClusterQueue team-a flavor train nvidia.com/gpu nominalQuota"):
        audit([queue], [])


def test_a_clusterqueue_of_the_wrong_shape_is_refused_on_reading(tmp_path: Path) -> None:
    snapshot = ClusterSnapshot(nodes=[], daemonsets=[], pods=[], smi={}, exec_errors={}, clusterqueues=[], workloads=[])
    write_snapshot(snapshot, tmp_path)
    bad = cluster_queue("team-a", "training", 8, 0)
    bad["status"]["flavorsReservation"] = {"name": "train"}
    (tmp_path / "clusterqueues.json").write_text(json.dumps({"items": [bad]}), encoding="utf-8")
    with pytest.raises(SnapshotError, match=r"clusterqueues.json: items\[0\] \(ClusterQueue team-a\): status.flavorsReservation"):
        read_snapshot(tmp_path)


def test_a_live_audit_reads_kueues_queues_and_says_what_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster.from_snapshot(fresh(edited(clean_snapshot())))
    cluster.clusterqueues = [cluster_queue("team-a", "training", 8, 8, pending=1), cluster_queue("team-b", "training", 8, 8)]
    cluster.workloads = [workload("team-a", "job-waiting", 8, 2)]
    with FakeApiServer(cluster) as server:
        exit_code = main(["audit", "--kubeconfig", kubeconfig(server, tmp_path), "--json"])
        report = json.loads(capsys.readouterr().out)

    assert exit_code == 0  # warnings only
    assert [(f["id"], f["namespace"]) for f in report["findings"]] == [("queue-workload-pending", "team-a")]


def test_a_live_audit_without_kueue_finds_nothing_and_one_refused_is_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = FakeCluster.from_snapshot(fresh(edited(clean_snapshot())))  # no Kueue: its API answers 404
    with FakeApiServer(cluster) as server:
        main(["audit", "--kubeconfig", kubeconfig(server, tmp_path), "--json"])
        summary = json.loads(capsys.readouterr().out)["summary"]
    assert set(summary["checked"]) >= QUEUE_IDS

    cluster.clusterqueues, cluster.workloads = [], []
    cluster.forbidden.add("/apis/kueue.x-k8s.io/v1beta2/workloads")
    with FakeApiServer(cluster) as server:
        main(["audit", "--kubeconfig", kubeconfig(server, tmp_path), "--json"])
        summary = json.loads(capsys.readouterr().out)["summary"]
    assert "queue-workload-pending" not in summary["checked"]
    (gap,) = [gap for gap in summary["notChecked"] if "queue-workload-pending" in gap["ids"]]
    assert gap["reason"].startswith("workloads.json is not in the snapshot (HTTP 403")
