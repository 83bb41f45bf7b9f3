"""``aksgpu audit collect``: a snapshot of a cluster aks-gpu did not build, with no stack, written for ``aksgpu audit
--snapshot`` to read; the SMI command run in the pods the vendors' manifests label (the fake API server stands in
for the cluster)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from aks_gpu.aks_facts import disruption_facts
from aks_gpu.cli import main
from aks_gpu.cluster.smi_pods import known_smi_pods
from aks_gpu.cluster.snapshot import read_snapshot, rfc3339
from tests.audit.clusters import CLEAN_NODES, INFER_0, REBOOT_START, TRAIN_0, clean_snapshot, edited, node_event
from tests.audit.test_cli import fresh, kubeconfig
from tests.cluster.fake_apiserver import FakeApiServer, FakeCluster

PREEMPT_PLUGIN = "custom-scheduledevents-consolidated-preempt-plugin-monitor"

GPU_OPERATOR_DRIVER = {"app": "nvidia-driver-daemonset"}


def test_collect_without_a_stack_saves_what_the_audit_reads_and_smi_health_is_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = FakeCluster.from_snapshot(fresh(edited(clean_snapshot())))
    folder = tmp_path / "snap"
    with FakeApiServer(cluster) as server:
        assert main(["audit", "collect", "--out", str(folder), "--kubeconfig", kubeconfig(server, tmp_path)]) == 0
        attempts = dict(server.stats.exec_attempts)
        url = server.url
    printed = " ".join(capsys.readouterr().out.split())
    assert "3 GPU node(s)" in printed and "3 SMI output(s)" in printed
    assert f"audit it with: aksgpu audit --snapshot {folder}" in printed
    # The plugin pods carry the Helm chart's app.kubernetes.io/name=nvidia-device-plugin: found with no stack.
    assert sorted(attempts) == sorted(CLEAN_NODES)
    saved = read_snapshot(folder)
    assert sorted(saved.smi) == sorted(CLEAN_NODES) and saved.exec_errors == {}
    assert saved.cluster == {"context": "fake", "server": url}

    assert main(["audit", "--snapshot", str(folder), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    # SMI health judged on every node: only what nvidia-smi -q -x cannot show is left unchecked.
    assert [gap for gap in summary["notChecked"] if "does not show what these need" not in gap["reason"]] == []
    assert {"ecc-uncorrectable", "hw-slowdown"} <= set(summary["checked"])
    assert summary["cluster"] == {"context": "fake", "server": url}


def test_the_gpu_operator_driver_pod_is_preferred_and_any_namespace_is_searched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = fresh(edited(clean_snapshot()))
    plugin = next(
        pod
        for pod in snapshot.pods
        if pod["spec"]["nodeName"] == TRAIN_0 and "controller-revision-hash" in pod["metadata"]["labels"]
    )
    driver = json.loads(json.dumps(plugin))
    driver["metadata"].update(name="nvidia-driver-daemonset-abcde", namespace="gpu-operator", labels=dict(GPU_OPERATOR_DRIVER))
    snapshot.pods.append(driver)
    with FakeApiServer(FakeCluster.from_snapshot(snapshot)) as server:
        assert main(["audit", "collect", "--out", str(tmp_path / "snap"), "--kubeconfig", kubeconfig(server, tmp_path)]) == 0
        execs = [request for request in server.stats.requests if request.endswith("/exec")]
    assert "GET /api/v1/namespaces/gpu-operator/pods/nvidia-driver-daemonset-abcde/exec" in execs
    assert not any(plugin["metadata"]["name"] in request for request in execs)


def test_a_node_with_no_known_pod_gets_the_reason_and_its_health_is_not_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = fresh(edited(clean_snapshot()))
    snapshot.pods[:] = [
        pod
        for pod in snapshot.pods
        if not (pod["spec"].get("nodeName") == INFER_0 and "controller-revision-hash" in pod["metadata"]["labels"])
    ]
    folder = tmp_path / "snap"
    with FakeApiServer(FakeCluster.from_snapshot(snapshot)) as server:
        assert main(["audit", "collect", "--out", str(folder), "--kubeconfig", kubeconfig(server, tmp_path)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"no SMI output {INFER_0}: no pod that can run the SMI command on this node" in printed
    note = (folder / "smi" / f"{INFER_0}.error").read_text(encoding="utf-8")
    assert all(agent.selector in note for agent in known_smi_pods())

    assert main(["audit", "--snapshot", str(folder), "--json"]) == 0
    gaps = json.loads(capsys.readouterr().out)["summary"]["notChecked"]
    assert any(gap["practice"] == "health" and gap["count"] == 1 and INFER_0 in gap["reason"] for gap in gaps)


def test_collect_has_its_own_help_and_needs_out(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["audit", "collect", "--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    assert (
        help_text.startswith("usage: aksgpu audit collect") and "--snapshot DIR  " not in help_text and "--html" not in help_text
    )
    with pytest.raises(SystemExit) as exit_info:
        main(["audit", "collect"])
    assert exit_info.value.code == 2
    assert "--out" in capsys.readouterr().err
    assert main(["audit", "--json", "collect", "--out", "snap"]) == 2
    assert "--json: for `aksgpu audit`; collect saves a snapshot and judges nothing" in capsys.readouterr().err


def test_an_unreachable_cluster_is_exit_2_and_nothing_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
        encoding="utf-8",
    )
    assert main(["audit", "collect", "--out", str(tmp_path / "snap"), "--kubeconfig", str(config)]) == 2
    assert "cannot read the cluster" in capsys.readouterr().err
    assert not (tmp_path / "snap" / "nodes.json").exists()


def test_collect_keeps_the_newest_node_events_the_audit_reads_and_the_audit_judges_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)

    def ago(minutes: int) -> str:
        return rfc3339(now - timedelta(minutes=minutes))

    facts = disruption_facts()
    snapshot = fresh(edited(clean_snapshot()))
    start = REBOOT_START
    # More announcements of one reason on one GPU node than the collector keeps, each its own scheduled time (so the API
    # server did not aggregate them): the newest per_reason stay, and an older one of another reason is not displaced.
    plugin = "custom-scheduledevents-consolidated-plugin-monitor"
    flood = [
        node_event(TRAIN_0, "RebootScheduled", f"Scheduled: {ago(n - 10)}. DurationInSeconds: -1.", plugin, ago(n))
        for n in range(1, facts.events_per_reason + 9)
    ]
    freeze = node_event(TRAIN_0, "FreezeScheduled", f"Scheduled: {ago(50)}. DurationInSeconds: 9.", plugin, ago(55))
    kept_repair = node_event(INFER_0, "NodeRebootStart", start, "aks-auto-repair", ago(20), type_="Normal")
    kubelet = node_event(INFER_0, "NodeReady", f"Node {INFER_0} status is now: NodeReady", "kubelet", ago(5), type_="Normal")
    on_pod = node_event(INFER_0, "NodeRebootStart", start, "aks-auto-repair", ago(3))
    on_pod["involvedObject"] = {"kind": "Pod", "name": "train-0", "namespace": "gpu-training"}
    snapshot = replace(snapshot, events=[*flood, freeze, kept_repair, kubelet, on_pod])
    folder = tmp_path / "snap"
    with FakeApiServer(FakeCluster.from_snapshot(snapshot)) as server:
        assert main(["audit", "collect", "--out", str(folder), "--kubeconfig", kubeconfig(server, tmp_path)]) == 0
        asked = [request for request in server.stats.requests if "/api/v1/events" in request]
    capsys.readouterr()

    assert asked, "the events were not listed"
    saved = read_snapshot(folder).events or []
    by_node = {node: [e["message"] for e in saved if e["involvedObject"]["name"] == node] for node in (TRAIN_0, INFER_0)}
    # The newest per_reason of TRAIN_0's reboots, minutes 1..per_reason ago, and its freeze; INFER_0's repair, not its
    # kubelet event nor a Pod's.
    kept = [e["message"] for e in (*flood[: facts.events_per_reason], freeze)]
    assert sorted(by_node[TRAIN_0]) == sorted(kept)
    assert by_node[INFER_0] == [start] and all(e["involvedObject"]["kind"] == "Node" for e in saved)

    assert main(["audit", "--snapshot", str(folder), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    found = sorted((f["id"], f["node"], f["severity"]) for f in report["findings"])
    assert found == [("node-auto-repaired", INFER_0, "warn"), ("node-vm-event-recent", TRAIN_0, "warn")]
    assert report["summary"]["autoRepairs"] == {"gpuNodes": 1, "otherNodes": 0}


def test_a_flood_of_events_the_audit_does_not_count_cannot_push_a_repair_out_of_the_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whoever may create events can write them on any node, under any reason and source: a flood of events the audit
    would not count (another writer's NodeRebootError, a scheduled-event plugin's IMDS failures, each its own message
    so the API server does not aggregate them), newer than AKS's failed repair on the same GPU node, must not push that
    repair out of what the collector keeps."""
    now = datetime.now(UTC).replace(microsecond=0)
    snapshot = fresh(edited(clean_snapshot()))
    error = "Node auto-repair reboot action failed due to an operation failure. See error details here: OperationNotAllowed"
    real = node_event(TRAIN_0, "NodeRebootError", error, "aks-auto-repair", rfc3339(now - timedelta(minutes=40)))
    flood = [
        node_event(TRAIN_0, reason, f"{message} ({n})", source, rfc3339(now - timedelta(minutes=30, seconds=-n)))
        for n in range(32)
        for reason, message, source in (
            ("NodeRebootError", "reboot failed", "my-operator"),
            ("PreemptScheduled", "IMDS query failed, exit code: 28", PREEMPT_PLUGIN),
        )
    ]
    # Nor can events on nodes that do not exist fill it.
    ghosts = [node_event(f"ghost-{n}", "NodeRebootStart", REBOOT_START, "aks-auto-repair", rfc3339(now)) for n in range(50)]
    snapshot = replace(snapshot, events=[real, *flood, *ghosts])
    folder = tmp_path / "snap"
    with FakeApiServer(FakeCluster.from_snapshot(snapshot)) as server:
        assert main(["audit", "collect", "--out", str(folder), "--kubeconfig", kubeconfig(server, tmp_path)]) == 0
    capsys.readouterr()

    saved = read_snapshot(folder).events or []
    assert [event["message"] for event in saved] == [error]
    assert main(["audit", "--snapshot", str(folder), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(f["id"], f["node"]) for f in report["findings"]] == [("node-auto-repair-failed", TRAIN_0)]
