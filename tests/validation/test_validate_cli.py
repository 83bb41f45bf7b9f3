"""``aksgpu validate``: exit codes, the JSON it prints, the table, the snapshot path end to end, and the
live path with the probe replaced by a fake (the real probe has its own tests against a fake API server)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.cli import validate
from aks_gpu.cluster import probe
from aks_gpu.cluster.snapshot import ClusterSnapshot, write_snapshot
from aks_gpu.resolved.targets import plugin_targets
from tests.cluster.snapshots import edited, find_node, healthy_snapshot, node_name, nodes_in_every_pool
from tests.conftest import PROJECT_DIR, stack_model

PROD = stack_model("prod")
STACK = ["--stack", "prod", "--project-dir", str(PROJECT_DIR)]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="aksgpu")
    validate.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def run(argv: list[str]) -> int:
    args = parse(argv)
    exit_code: int = args.handler(args)
    return exit_code


def healthy() -> ClusterSnapshot:
    """2 train nodes, 1 infer node, 1 inferfull node: a node in every pool, so every check runs."""
    return edited(healthy_snapshot(PROD, plugin_targets(PROD), nodes_in_every_pool(PROD, 1, train=2)))


def saved(snapshot: ClusterSnapshot, folder: Path) -> str:
    write_snapshot(snapshot, folder)
    return str(folder)


# ---------------------------------------------------------------- --snapshot


def test_a_healthy_snapshot_exits_0_and_prints_the_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = run(["validate", *STACK, "--snapshot", saved(healthy(), tmp_path), "--json"])
    captured = capsys.readouterr()

    assert exit_code == 0
    report = json.loads(captured.out)  # stdout holds the JSON and nothing else
    assert list(report) == ["passed", "checks"]
    assert report["passed"] is True
    assert all(list(check) == ["id", "pool", "node", "status", "message"] for check in report["checks"])
    assert {check["status"] for check in report["checks"]} == {"pass"}
    assert {(check["pool"], check["node"]) for check in report["checks"]} == {
        ("train", None),
        ("train", node_name("train", 0)),
        ("train", node_name("train", 1)),
        ("infer", None),
        ("infer", node_name("infer", 0)),
        ("inferfull", None),
        ("inferfull", node_name("inferfull", 0)),
    }
    assert "rror" not in captured.err


def test_a_failed_check_exits_1_and_says_which(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = healthy()
    del find_node(snapshot, node_name("infer", 0))["status"]["allocatable"]["nvidia.com/gpu"]
    exit_code = run(["validate", *STACK, "--snapshot", saved(snapshot, tmp_path), "--json"])
    report = json.loads(capsys.readouterr().out)

    assert exit_code == 1
    assert report["passed"] is False
    assert [(c["id"], c["node"]) for c in report["checks"] if c["status"] == "fail"] == [
        ("gpu-schedulable", node_name("infer", 0))
    ]


def test_warnings_alone_still_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = healthy()
    find_node(snapshot, node_name("train", 0))["spec"]["unschedulable"] = True
    assert run(["validate", *STACK, "--snapshot", saved(snapshot, tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is True
    assert [c["status"] for c in report["checks"] if c["status"] != "pass"] == ["warn"]


def test_the_table_shows_every_node_and_the_problems_with_their_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = healthy()
    snapshot.smi.pop(node_name("train", 1))
    snapshot.exec_errors[node_name("train", 1)] = "timed out after 30 s"
    # --wide: the table (prod's pools, inferfull's node names among them, need 171 columns; the list layout is tested
    # apart), whatever the width of the terminal the tests run in.
    exit_code = run(["validate", *STACK, "--snapshot", saved(snapshot, tmp_path), "--wide"])
    output = capsys.readouterr().out

    assert exit_code == 1
    for node in (node_name("train", 0), node_name("train", 1), node_name("infer", 0), node_name("inferfull", 0)):
        assert node in output
    assert "FAIL" in output
    assert f"train/{node_name('train', 1)} smi-error: could not run `nvidia-smi -q -x`: timed out after 30 s" in output
    assert "train: " in output and "1 fail" in output
    assert "validation failed: 1 check(s) failed" in output
    # Passing results are counted, not listed, unless asked for.
    assert "driver 565.57.01 >= minDriverVersion" not in output


def test_verbose_lists_the_passing_results_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["validate", *STACK, "--snapshot", saved(healthy(), tmp_path), "--verbose"]) == 0
    output = capsys.readouterr().out
    assert f"train/{node_name('train', 0)} driver-version: driver 565.57.01 >= minDriverVersion 550.54" in output
    assert "validation passed" in output


# ---------------------------------------------------------------- exit 2


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        (["collect"], "collect needs --out DIR"),
        (["collect", "--out", "x", "--snapshot", "y"], "--snapshot is for checking a saved one"),
        (["collect", "--out", "x", "--json"], "collect runs no checks"),
        (["--out", "x"], "--out is for `aksgpu validate collect`"),
        (["--snapshot", "x", "--kubeconfig", "k", "--context", "c"], "--kubeconfig, --context: for a live cluster"),
        (["--snapshot", "does-not-exist"], "(write one with `aksgpu validate collect --stack prod --out does-not-exist`)"),
    ],
)
def test_usage_errors_exit_2(
    extra: list[str], complaint: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["validate", *STACK, *extra]) == 2
    captured = capsys.readouterr()
    assert complaint in " ".join(captured.err.split())
    assert captured.out == ""


def test_a_broken_snapshot_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = saved(healthy(), tmp_path)
    (tmp_path / "nodes.json").write_text("[1, 2]", encoding="utf-8")
    assert run(["validate", *STACK, "--snapshot", folder, "--json"]) == 2
    assert "nodes.json" in capsys.readouterr().err


def test_an_invalid_stack_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "Pulumi.prod.yaml"
    text = (
        (PROJECT_DIR / "stacks" / "Pulumi.prod.yaml")
        .read_text(encoding="utf-8")
        .replace("migProfile: MIG1g", "migProfile: MIG9g")
    )
    bad.write_text(text, encoding="utf-8")
    assert run(["validate", *STACK, "--config-file", str(bad), "--snapshot", saved(healthy(), tmp_path / "snap")]) == 2
    assert "migProfile" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--concurrency", "0"], ["--concurrency", "many"], ["--timeout", "-1"], ["collect-all"]])
def test_bad_flag_values_are_argparse_errors(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parse(["validate", *STACK, *flag])
    assert raised.value.code == 2


def test_collect_and_check_parse_with_flags_before_or_after_the_action() -> None:
    assert parse(["validate", "collect", "--stack", "prod", "--out", "d"]).action == "collect"
    assert parse(["validate", "--stack", "prod", "collect", "--out", "d"]).action == "collect"
    checking = parse(["validate", "--stack", "prod", "--snapshot", "d"])
    assert checking.action is None
    assert checking.snapshot == Path("d")


# ---------------------------------------------------------------- the live path, probe faked


class FakeProbe:
    def __init__(self, snapshot: ClusterSnapshot | None = None, error: Exception | None = None) -> None:
        self.snapshot = snapshot
        self.error = error
        self.calls: list[dict[str, Any]] = []

    def __call__(self, model: Any, targets: Any, **kwargs: Any) -> ClusterSnapshot:
        self.calls.append({"pools": [pool.name for pool in model.pools], "targets": sorted(targets), **kwargs})
        if self.error is not None:
            raise self.error
        assert self.snapshot is not None
        for done in range(len(self.snapshot.smi) + 1):
            kwargs["progress"](done, len(self.snapshot.smi))
        return self.snapshot


def test_live_defaults_come_from_the_stack_validation_config(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeProbe(healthy())
    monkeypatch.setattr(probe, "collect_snapshot", fake)
    assert run(["validate", *STACK, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    (call,) = fake.calls
    assert call["pools"] == ["train", "infer", "inferfull"]
    assert call["targets"] == ["infer", "inferfull", "train"]
    assert (call["kubeconfig"], call["context"]) == (None, None)
    settings = PROD.config.validation
    assert (call["concurrency"], call["timeout_s"], call["retries"]) == (
        settings.concurrency,
        float(settings.exec_timeout_seconds),
        settings.retries,
    )


def test_live_flags_override_the_defaults(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeProbe(healthy())
    monkeypatch.setattr(probe, "collect_snapshot", fake)
    argv = ["validate", *STACK, "--kubeconfig", "/k", "--context", "aks-gpu-prod", "--concurrency", "4", "--timeout", "7.5"]
    assert run(argv) == 0
    (call,) = fake.calls
    assert (call["kubeconfig"], call["context"], call["concurrency"], call["timeout_s"]) == ("/k", "aks-gpu-prod", 4, 7.5)


def test_a_cluster_that_cannot_be_read_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    reason = "cannot read the cluster at https://aks-gpu-prod.hcp.example: HTTP 403: forbidden"
    monkeypatch.setattr(probe, "collect_snapshot", FakeProbe(error=probe.ProbeError(reason)))
    assert run(["validate", *STACK, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "HTTP 403: forbidden" in captured.err


def test_collect_then_check_the_snapshot_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    live = healthy()
    live.smi.pop(node_name("train", 1))
    live.exec_errors[node_name("train", 1)] = "node NotReady (KubeletNotReady)"
    monkeypatch.setattr(probe, "collect_snapshot", FakeProbe(live))
    folder = tmp_path / "snap"

    assert run(["validate", "collect", *STACK, "--out", str(folder)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"wrote 7 file(s) to {folder}" in said  # 3 lists, 3 outputs (train, infer, inferfull), 1 error
    assert "3 SMI output(s), 1 exec error(s)" in said
    assert (folder / "smi" / f"{node_name('train', 1)}.error").is_file()

    monkeypatch.setattr(probe, "collect_snapshot", FakeProbe(error=AssertionError("the offline check must not probe")))
    assert run(["validate", *STACK, "--snapshot", str(folder), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert [(c["id"], c["node"]) for c in failed] == [("smi-error", node_name("train", 1))]
    assert "node NotReady (KubeletNotReady)" in failed[0]["message"]


def test_a_pool_with_no_nodes_yet_is_said_not_checked_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Prod as first deployed: only infer keeps a node (minCount 1); train and inferfull scale from zero.
    snapshot = edited(healthy_snapshot(PROD, plugin_targets(PROD), {"infer": 1}))
    assert run(["validate", *STACK, "--snapshot", saved(snapshot, tmp_path)]) == 0
    output = " ".join(capsys.readouterr().out.split())
    assert "train (pool) gpu-schedulable: not checked: no nodes yet" in output
    assert "inferfull (pool) gpu-schedulable: not checked: no nodes yet" in output
    # gpu-schedulable and driver-consistency, for each of the two pools.
    assert "validation passed: nothing failed; 4 check(s) not checked" in output
