"""``aksgpu audit`` end to end: a snapshot folder on disk (and a live cluster behind the fake API server) in, exit
code, table, JSON and HTML out; usage and input errors; hostile names shown as written."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.cli import main
from aks_gpu.cli.common import out
from aks_gpu.cluster.inventory import NODE_IMAGE_LABEL
from aks_gpu.cluster.snapshot import ClusterSnapshot, read_snapshot, write_snapshot
from tests.audit.clusters import CLEAN_NODES, INFER_0, TRAIN_0, clean_snapshot, edited, find_node, gpu_nodes, workload_pod
from tests.cluster.fake_apiserver import FakeApiServer, FakeCluster
from tests.conftest import PROJECT_DIR

STACK = ["--stack", "prod", "--project-dir", str(PROJECT_DIR)]
HOSTILE_POD = '<script>alert("pod")</script><img src=x onerror=alert(1)>[bold red]ok[/bold red]'
HOSTILE_NAMESPACE = "[/x]ns-\x1b[31m-red"


def saved(snapshot: ClusterSnapshot, folder: Path) -> str:
    write_snapshot(snapshot, folder)
    return str(folder)


def untainted() -> ClusterSnapshot:
    snapshot = edited(clean_snapshot())
    find_node(snapshot, TRAIN_0)["spec"]["taints"] = []
    return snapshot


def hostile() -> ClusterSnapshot:
    """A pod with markup, HTML and a terminal escape in its name and namespace squatting on a GPU node."""
    snapshot = edited(clean_snapshot())
    pod = workload_pod(HOSTILE_NAMESPACE, HOSTILE_POD, TRAIN_0, {}, owner=("ReplicaSet", "web"))
    pod["spec"]["containers"][0]["resources"] = {}
    snapshot.pods.append(pod)
    return snapshot


# ---------------------------------------------------------------- exit codes, table, JSON


def test_a_clean_snapshot_passes_with_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = main(["audit", "--snapshot", saved(clean_snapshot(), tmp_path)])
    output = capsys.readouterr().out

    assert exit_code == 0
    assert "audit passed: nothing fails, 0 warning(s)" in output
    assert "3 GPU node(s) in 2 pool(s)" in output and "collected 2025-10-20T08:00:00Z" in output
    assert "Enforce GPU workload placement: no finding" in output
    # Only what nvidia-smi -q -x cannot show is not checked (an Xid is in the kernel log): said, not passed.
    assert "GPU health: no finding in what was checked" in output
    assert [line.split(":")[0].strip() for line in output.splitlines() if "not checked" in line] == [
        "not checked row-remap-failure, row-remap-pending, retired-pages-pending, xid, gpu-reset-required, nvlink-inactive, "
        "fabric-not-ready (1)",
        "not checked retired-pages-pending, xid, gpu-reset-required, nvlink-inactive (2)",
    ]


def test_a_cluster_without_gpu_nodes_is_nothing_to_audit_not_a_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A kubeconfig pointed at the wrong cluster: nothing fails, but no node practice may read as passed.
    snapshot = edited(clean_snapshot())
    snapshot.nodes[:] = [node for node in snapshot.nodes if node not in gpu_nodes(snapshot)]
    snapshot.pods[:] = [pod for pod in snapshot.pods if pod["spec"].get("nodeName") not in CLEAN_NODES]
    folder = saved(snapshot, tmp_path)

    assert main(["audit", "--snapshot", folder]) == 0
    output = capsys.readouterr().out
    assert "nothing to audit: no GPU node found" in output and "audit passed" not in output
    assert "Enforce GPU workload placement: no finding in what was checked" in output

    assert main(["audit", "--snapshot", folder, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    unjudged = {finding for gap in summary["notChecked"] if "no GPU node" in gap["reason"] for finding in gap["ids"]}
    node_findings = {"gpu-node-untainted", "gpu-squatter", "device-plugin-missing", "node-image-stale", "node-image-mixed"}
    assert node_findings | {"gpu-idle", "gpu-condition"} <= unjudged
    assert not unjudged & set(summary["checked"])


def test_a_failing_finding_exits_1_with_a_table_per_practice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = main(["audit", "--snapshot", saved(untainted(), tmp_path)])
    output = capsys.readouterr().out

    assert exit_code == 1
    assert "Enforce GPU workload placement" in output and "gpu-node-untainted" in output and TRAIN_0 in output
    assert "what to do (gpu-node-untainted)" in output
    assert "audit failed: 1 finding(s) fail, 0 warn" in output


def test_warnings_alone_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = edited(clean_snapshot())
    snapshot.pods[:] = [p for p in snapshot.pods if p["metadata"]["namespace"] != "gpu-inference"]

    assert main(["audit", "--snapshot", saved(snapshot, tmp_path)]) == 0
    assert "gpu-idle" in capsys.readouterr().out


def test_json_is_the_contract_and_nothing_else_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = main(["audit", "--snapshot", saved(untainted(), tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)

    assert exit_code == 1
    assert list(report) == ["findings", "summary"]
    assert report["findings"] == [
        {
            "id": "gpu-node-untainted",
            "severity": "fail",
            "node": TRAIN_0,
            "namespace": None,
            "pod": None,
            "message": report["findings"][0]["message"],
        }
    ]
    assert report["summary"]["gpuNodes"] == 3
    assert {gap["practice"] for gap in report["summary"]["notChecked"]} == {"health"}  # what -q -x cannot show
    assert [pool["pool"] for pool in report["summary"]["pools"]] == ["infer", "train"]


def test_with_the_stack_its_expectations_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = edited(clean_snapshot())
    find_node(snapshot, TRAIN_0)["spec"]["taints"] = [{"key": "sku", "value": "gpu", "effect": "NoSchedule"}]
    folder = saved(snapshot, tmp_path)

    assert main(["audit", "--snapshot", folder, "--json"]) == 0
    capsys.readouterr()
    assert main(["audit", "--snapshot", folder, "--json", *STACK]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["stack"] == "prod"
    assert [f["id"] for f in report["findings"]] == ["gpu-node-untainted"]
    assert {pool["pool"]: pool["expectedPerNode"] for pool in report["summary"]["pools"]} == {"infer": 7, "train": 8}


# ---------------------------------------------------------------- hostile names


def test_hostile_names_are_shown_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(out, "width", 600)  # one line per row, so a name is not folded across cells
    folder = saved(hostile(), tmp_path / "snap")
    assert main(["audit", "--snapshot", folder]) == 1
    terminal = capsys.readouterr().out

    assert "[bold red]ok[/bold red]" in terminal  # markup shown, not applied
    assert "[/x]ns-" in terminal and "\x1b[31m" not in terminal and "\\x1b" in terminal  # no terminal escape reaches it

    assert main(["audit", "--snapshot", folder, "--json"]) == 1
    finding = json.loads(capsys.readouterr().out)["findings"][0]
    assert (finding["id"], finding["pod"], finding["namespace"]) == ("gpu-squatter", HOSTILE_POD, HOSTILE_NAMESPACE)

    page = tmp_path / "audit.html"
    assert main(["audit", "--snapshot", folder, "--html", str(page), "--json"]) == 1
    html = page.read_text(encoding="utf-8")
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(&quot;pod&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html


# ---------------------------------------------------------------- HTML


def test_html_is_one_self_contained_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "report.html"
    exit_code = main(["audit", "--snapshot", saved(untainted(), tmp_path / "snap"), "--html", str(page)])
    output = capsys.readouterr().out

    assert exit_code == 1
    assert f"wrote {page}" in output
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    for outside in ("<script", "<link", "src=", "@import", "url(", "http://"):
        assert outside not in html, outside
    # Its only https addresses are links a reader may follow, never something the page loads.
    assert html.count("https://") == html.count('href="https://')
    assert "default-src 'none'" in html  # and the page itself forbids fetching anything
    assert 'data-id="gpu-node-untainted"' in html and "What to do:" in html


# ---------------------------------------------------------------- usage and input errors


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--snapshot", "snap", "--context", "prod"], "--kubeconfig and --context are for a live cluster"),
        (["--snapshot", "nowhere"], "no such snapshot folder (write one with `aksgpu audit collect --out nowhere`)"),
        (["--config-file", "x.yaml", "--snapshot", "snap"], "go with --stack NAME"),
        (["--snapshot", "snap", "--stack", "nosuchstack"], "nosuchstack"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_snapshot(clean_snapshot(), tmp_path / "snap")
    argv = [*argv, "--project-dir", str(PROJECT_DIR)] if "--stack" in argv else argv

    assert main(["audit", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_snapshot_that_cannot_be_read_exits_2_naming_file_and_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "snap"
    write_snapshot(clean_snapshot(), folder)
    pods = json.loads((folder / "pods.json").read_text(encoding="utf-8"))
    pods["items"][0]["spec"]["containers"] = {"name": "not a list"}
    (folder / "pods.json").write_text(json.dumps(pods), encoding="utf-8")

    assert main(["audit", "--snapshot", str(folder)]) == 2
    error = " ".join(capsys.readouterr().err.split())  # one line, however the console wrapped it
    assert "snap/pods.json: items[0] (Pod infer-job-0000-x7k2p): spec.containers must be a list, not an object" in error


def test_meta_json_that_is_no_rfc_3339_time_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "snap"
    write_snapshot(clean_snapshot(), folder)
    (folder / "meta.json").write_text('{"collectedAt": "2025-10-20 08:00"}', encoding="utf-8")

    assert main(["audit", "--snapshot", str(folder)]) == 2
    assert "meta.json: collectedAt: not an RFC 3339 time" in " ".join(capsys.readouterr().err.split())


def test_an_html_file_that_cannot_be_written_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = saved(clean_snapshot(), tmp_path / "snap")

    assert main(["audit", "--snapshot", folder, "--html", str(tmp_path / "no" / "such" / "dir" / "a.html")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["audit", "--snapshot", folder, "--html", str(tmp_path)]) == 2


# ---------------------------------------------------------------- live, through the fake API server


def fresh(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The clean cluster with node images built a week before now (a live audit's collectedAt is now)."""
    built = (datetime.now(UTC) - timedelta(days=7)).strftime("%Y%m.%d")
    for node in gpu_nodes(snapshot):
        node["metadata"]["labels"][NODE_IMAGE_LABEL] = f"AKSUbuntu-2204gen2containerd-{built}.0"
    return snapshot


def kubeconfig(server: FakeApiServer, folder: Path) -> str:
    path = folder / "kubeconfig"
    path.write_text(server.kubeconfig_text(), encoding="utf-8")
    return str(path)


def test_a_live_audit_reads_the_cluster_without_exec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster.from_snapshot(fresh(edited(clean_snapshot())))
    with FakeApiServer(cluster) as server:
        exit_code = main(["audit", "--kubeconfig", kubeconfig(server, tmp_path), "--json"])
        report = json.loads(capsys.readouterr().out)
        requests = list(server.stats.requests)

    assert exit_code == 0
    assert report["findings"] == []
    assert report["summary"]["gpuNodes"] == 3
    # Read-only without a stack: no exec, so SMI health is reported as not checked, with the count of nodes.
    assert not any(request.endswith("/exec") for request in requests)
    (gap,) = report["summary"]["notChecked"]
    assert gap["practice"] == "health" and gap["count"] == 3 and "smi/<node>.txt" in gap["reason"]
    assert datetime.now(UTC) - datetime.fromisoformat(report["summary"]["collectedAt"]) < timedelta(minutes=5)


def test_a_live_audit_with_the_stack_runs_the_smi_command_and_judges_its_health(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = FakeCluster.from_snapshot(fresh(edited(clean_snapshot())))
    with FakeApiServer(cluster) as server:
        exit_code = main(["audit", "--kubeconfig", kubeconfig(server, tmp_path), "--json", *STACK])
        report = json.loads(capsys.readouterr().out)
        attempts = dict(server.stats.exec_attempts)

    assert exit_code == 0, report["findings"]
    # Every node's SMI output was read and judged: only what nvidia-smi -q -x cannot show is left (Xid, NVLink...).
    assert [gap for gap in report["summary"]["notChecked"] if "does not show what these need" not in gap["reason"]] == []
    assert {"ecc-uncorrectable", "hw-slowdown"} <= set(report["summary"]["checked"])
    assert sorted(attempts) == sorted(CLEAN_NODES)


def test_files_the_auditor_may_not_list_are_not_checked_and_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster.from_snapshot(fresh(edited(clean_snapshot())))
    cluster.forbidden.add("/apis/networking.k8s.io/v1/networkpolicies")
    cluster.forbidden.add("/api/v1/events")
    cluster.resourcequotas = None  # a server without the API answers 404
    with FakeApiServer(cluster) as server:
        exit_code = main(["audit", "--kubeconfig", kubeconfig(server, tmp_path), "--json"])
        summary = json.loads(capsys.readouterr().out)["summary"]

    assert exit_code == 0
    reasons = [gap["reason"] for gap in summary["notChecked"] if gap["practice"] == "isolation"]
    assert any(reason.startswith("resourcequotas.json is not in the snapshot (HTTP 404") for reason in reasons)
    assert any(reason.startswith("networkpolicies.json is not in the snapshot (HTTP 403") for reason in reasons)
    assert "gpu-pod-unfenced" not in summary["checked"]
    (gap,) = [gap for gap in summary["notChecked"] if gap["practice"] == "disruption"]
    assert gap["reason"].startswith("events.json is not in the snapshot (HTTP 403")
    assert "node-auto-repaired" in gap["ids"] and "node-auto-repaired" not in summary["checked"]
    assert summary["autoRepairs"] is None


def test_an_unreachable_cluster_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t0ken-value"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        ),
        encoding="utf-8",
    )

    assert main(["audit", "--kubeconfig", str(path), "--context", "c"]) == 2
    error = capsys.readouterr().err
    assert "cannot read the cluster" in error and "t0ken-value" not in error


def test_validate_collect_writes_every_file_the_audit_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live = fresh(edited(clean_snapshot()))
    # A pod of another team on a GPU node, outside the device plugin namespaces: collect must save it too.
    squatter = workload_pod("web", "frontend-7d9c8b6f5-q2w8r", INFER_0, {}, owner=("ReplicaSet", "frontend-7d9c8b6f5"))
    squatter["spec"]["containers"][0]["resources"] = {}
    live.pods.append(squatter)
    folder = tmp_path / "snap"
    with FakeApiServer(FakeCluster.from_snapshot(live)) as server:
        assert main(["validate", "collect", *STACK, "--kubeconfig", kubeconfig(server, tmp_path), "--out", str(folder)]) == 0
    capsys.readouterr()

    files = sorted(path.name for path in folder.iterdir() if path.is_file())
    assert files == [
        "clusterqueues.json",
        "daemonsets.json",
        "events.json",
        "meta.json",
        "namespaces.json",
        "networkpolicies.json",
        "nodepools.json",
        "nodes.json",
        "pods.json",
        "resourcequotas.json",
        "workloads.json",
    ]
    snapshot = read_snapshot(folder)
    # The fake API server has no karpenter.sh API (404): no node auto-provisioning, so no NodePool; no Kueue either.
    assert snapshot.nodepools == []
    assert (snapshot.clusterqueues, snapshot.workloads) == ([], [])
    assert snapshot.collected_at is not None and len(snapshot.smi) == 3
    assert main(["audit", "--snapshot", str(folder), "--json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["id"], f["pod"]) for f in findings] == [("gpu-squatter", "frontend-7d9c8b6f5-q2w8r")]
    # and the same folder still validates as before
    assert main(["validate", *STACK, "--snapshot", str(folder), "--json"]) == 0


def test_two_collections_of_one_cluster_differ_only_in_the_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = FakeCluster.from_snapshot(fresh(edited(clean_snapshot())))
    with FakeApiServer(cluster) as server:
        config = kubeconfig(server, tmp_path)
        for name in ("a", "b"):
            assert main(["validate", "collect", *STACK, "--kubeconfig", config, "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()

    def tree(folder: Path) -> dict[str, Any]:
        return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}

    a, b = tree(tmp_path / "a"), tree(tmp_path / "b")
    assert set(a) == set(b)
    assert [name for name in a if a[name] != b[name]] in ([], ["meta.json"])
    # meta.json holds nothing but the time and the cluster it was read from
    assert sorted(json.loads(a["meta.json"])) == ["cluster", "collectedAt"]
    assert json.loads(a["meta.json"])["cluster"] == json.loads(b["meta.json"])["cluster"]


def test_a_snapshot_without_the_optional_files_still_audits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = replace(clean_snapshot(), namespaces=None, resourcequotas=None, networkpolicies=None, collected_at=None)
    folder = saved(bare, tmp_path)

    assert main(["audit", "--snapshot", folder]) == 0
    output = capsys.readouterr().out
    # The four files' gaps, and the two of what nvidia-smi -q -x cannot show (as on a full snapshot).
    assert sum(line.startswith("  not checked ") for line in output.splitlines()) == 4 + 2
    assert "resourcequotas.json is not in the snapshot" in output and "meta.json is not in the snapshot" in output
