"""The live probe against a fake API server on loopback: what a user of ``aksgpu validate`` (live) or of the
deploy hook would see from a cluster with healthy, hanging, failing and missing pieces."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from components.kube.plugin_targets import PluginTarget
from components.model import PlatformModel
from components.validation import probe
from components.validation.checks import run_checks
from components.validation.probe import ProbeError, collect_snapshot, exit_note, is_transient, pool_selector
from components.validation.snapshot import ClusterSnapshot
from tests.validation.fake_apiserver import ExecBehaviour, FakeApiServer, FakeCluster
from tests.validation.snapshots import edited, fixture_text, healthy_snapshot, node_name, pods_on, set_not_ready, without

FAST: dict[str, Any] = {"timeout_s": 5.0, "retries": 2, "backoff_s": 0.01}


@pytest.fixture(scope="module")
def cluster_state(model: PlatformModel, targets: dict[str, PluginTarget]) -> ClusterSnapshot:
    """A healthy prod cluster: 2 training nodes (8x H100, a real nvidia-smi output), 3 inference nodes (MIG)."""
    return healthy_snapshot(model, targets, {"train": 2, "infer": 3})


@contextmanager
def serving(cluster: FakeCluster, exec_delay_s: float = 0.0) -> Iterator[FakeApiServer]:
    with FakeApiServer(cluster, exec_delay_s=exec_delay_s) as server:
        yield server


def collect(model: PlatformModel, targets: dict[str, PluginTarget], server: FakeApiServer, **options: Any) -> ClusterSnapshot:
    return collect_snapshot(model, targets, kubeconfig_text=server.kubeconfig_text(), **(FAST | options))


def gpu_node_names(snapshot: ClusterSnapshot) -> set[str]:
    return {n["metadata"]["name"] for n in snapshot.nodes if n["metadata"]["name"].startswith(("aks-train", "aks-infer"))}


# ---------------------------------------------------------------- the healthy path


def test_every_gpu_node_is_collected_and_the_checks_pass(model, targets, cluster_state) -> None:
    with serving(FakeCluster.from_snapshot(cluster_state)) as server:
        live = collect(model, targets, server)

    assert {n["metadata"]["name"] for n in live.nodes} == gpu_node_names(cluster_state)  # the system node is not a GPU node
    assert live.smi == cluster_state.smi
    assert live.exec_errors == {}
    assert {p["metadata"]["name"] for p in live.pods} == {
        p["metadata"]["name"] for p in cluster_state.pods if p["metadata"]["namespace"] == "gpu-resources"
    }
    assert {d["metadata"]["name"] for d in live.daemonsets} == {d["metadata"]["name"] for d in cluster_state.daemonsets}
    # The article's command, in the plugin pod of each node.
    assert sorted(server.stats.exec_commands) == sorted(targets[n.split("-")[1]].smi_command for n in live.smi)
    failures = [r for r in run_checks(model, targets, live) if r.status == "fail"]
    assert failures == []


def test_nodes_are_listed_by_the_pool_label_and_pages_are_followed(model, targets, cluster_state, monkeypatch) -> None:
    monkeypatch.setattr(probe, "LIST_PAGE_SIZE", 2)
    with serving(FakeCluster.from_snapshot(cluster_state)) as server:
        live = collect(model, targets, server)
    assert len(live.nodes) == 5
    assert server.stats.requests.count("GET /api/v1/nodes") == 3  # 2 + 2 + 1
    assert pool_selector(["train", "infer"]) == "aks-gpu/pool in (infer,train)"


def test_progress_counts_every_node_up_to_the_total(model, targets, cluster_state) -> None:
    state = edited(cluster_state)
    set_not_ready(state, node_name("train", 0), "KubeletNotReady", "PLEG is not healthy")
    calls: list[tuple[int, int]] = []
    with serving(FakeCluster.from_snapshot(state)) as server:
        collect(model, targets, server, progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (1, 5)  # the NotReady node needs no exec: done at once
    assert calls[-1] == (5, 5)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


# ---------------------------------------------------------------- what goes wrong on one node


def test_a_hanging_exec_times_out_and_every_other_node_completes(model, targets, cluster_state) -> None:
    hung = node_name("infer", 1)
    cluster = FakeCluster.from_snapshot(cluster_state)
    cluster.behaviours[hung] = ExecBehaviour(hang=True)
    with serving(cluster) as server:
        live = collect(model, targets, server, timeout_s=0.3, retries=1)

    assert "timed out after 0.3 s" in live.exec_errors[hung]
    assert "after 2 attempts" in live.exec_errors[hung]
    assert server.stats.exec_attempts[hung] == 2  # the first try and one retry
    assert hung not in live.smi
    assert {node: live.smi[node] for node in live.smi} == {n: t for n, t in cluster_state.smi.items() if n != hung}
    smi_results = {r.node: r for r in run_checks(model, targets, live) if r.id == "smi-error"}
    assert smi_results[hung].status == "fail" and "timed out" in smi_results[hung].message


def test_transient_exec_failures_are_retried_with_backoff(model, targets, cluster_state) -> None:
    flaky, broken = node_name("train", 0), node_name("train", 1)
    cluster = FakeCluster.from_snapshot(cluster_state)
    cluster.behaviours[flaky] = ExecBehaviour(stdout=cluster_state.smi[flaky], fail_first=2)
    cluster.behaviours[broken] = ExecBehaviour(stdout=cluster_state.smi[broken], fail_first=10)
    with serving(cluster) as server:
        live = collect(model, targets, server, retries=2)

    assert server.stats.exec_attempts[flaky] == 3
    assert live.smi[flaky] == cluster_state.smi[flaky] and flaky not in live.exec_errors
    assert server.stats.exec_attempts[broken] == 3
    assert "500" in live.exec_errors[broken] and "after 3 attempts" in live.exec_errors[broken]


def test_a_failing_smi_keeps_its_output_and_exit_code(model, targets, cluster_state) -> None:
    node = node_name("train", 1)
    output = fixture_text("60_error_nvidia-smi_failed_gpu-operator_driver_pod.txt")
    cluster = FakeCluster.from_snapshot(cluster_state)
    cluster.behaviours[node] = ExecBehaviour(stdout=output, exit_code=9)
    with serving(cluster) as server:
        live = collect(model, targets, server)

    assert live.smi[node] == output
    assert live.exec_errors[node] == "command exited with code 9"
    assert server.stats.exec_attempts[node] == 1  # the command's own failure is an answer, not a glitch
    result = next(r for r in run_checks(model, targets, live) if r.id == "smi-error" and r.node == node)
    assert result.status == "fail" and "driver_not_loaded" in result.message


def test_stderr_is_captured_with_stdout(model, targets, cluster_state) -> None:
    node = node_name("infer", 0)
    cluster = FakeCluster.from_snapshot(cluster_state)
    cluster.behaviours[node] = ExecBehaviour(
        stdout="", stderr="Failed to initialize NVML: Driver/library version mismatch\n", exit_code=18
    )
    with serving(cluster) as server:
        live = collect(model, targets, server)
    assert "Driver/library version mismatch" in live.smi[node]


def test_a_container_without_the_tool_is_an_exec_error(model, targets, cluster_state) -> None:
    node = node_name("infer", 2)
    cluster = FakeCluster.from_snapshot(cluster_state)
    cluster.behaviours[node] = ExecBehaviour(missing_command=True)
    with serving(cluster) as server:
        live = collect(model, targets, server)
    assert node not in live.smi
    assert "executable file not found" in live.exec_errors[node]


def test_not_ready_nodes_and_missing_or_broken_pods_are_recorded_not_exec_d(model, targets, cluster_state) -> None:
    not_ready, no_pod, crashing = node_name("train", 0), node_name("infer", 0), node_name("infer", 1)
    state = edited(cluster_state)
    set_not_ready(state, not_ready, "NodeStatusUnknown", "Kubelet stopped posting node status.")
    state = replace(state, pods=without(state.pods, lambda p: p["spec"].get("nodeName") == no_pod))
    for pod in pods_on(state, crashing):
        waiting = {"name": "x", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        pod["status"] = {"phase": "Pending", "containerStatuses": [waiting]}
    with serving(FakeCluster.from_snapshot(state)) as server:
        live = collect(model, targets, server)

    assert "NotReady" in live.exec_errors[not_ready] and "Kubelet stopped posting node status." in live.exec_errors[not_ready]
    assert "no device plugin pod on this node" in live.exec_errors[no_pod]
    assert "Pending (CrashLoopBackOff)" in live.exec_errors[crashing]
    assert not {not_ready, no_pod, crashing} & set(server.stats.exec_attempts)
    assert len(live.smi) == 2


# ---------------------------------------------------------------- concurrency


@pytest.mark.parametrize("concurrency", [1, 3])
def test_execs_in_flight_never_exceed_the_concurrency(model, targets, concurrency) -> None:
    state = healthy_snapshot(model, targets, {"train": 6, "infer": 6})
    with serving(FakeCluster.from_snapshot(state), exec_delay_s=0.05) as server:
        live = collect(model, targets, server, concurrency=concurrency)
    assert len(live.smi) == 12
    assert 1 <= server.stats.max_in_flight <= concurrency


def test_ctrl_c_stops_the_probe_instead_of_running_the_queued_execs(model, targets) -> None:
    state = healthy_snapshot(model, targets, {"train": 6, "infer": 6})
    cluster = FakeCluster.from_snapshot(state)
    second = node_name("train", 1)
    cluster.behaviours[second] = ExecBehaviour(hang=True)  # still running when Ctrl-C comes

    def interrupt(done: int, total: int) -> None:
        if done:
            raise KeyboardInterrupt

    with serving(cluster) as server, pytest.raises(KeyboardInterrupt):
        collect(model, targets, server, concurrency=1, timeout_s=2.0, retries=0, progress=interrupt)
    # The first exec, and at most the one the worker had already taken up; none of the ten still queued.
    assert node_name("train", 0) in server.stats.exec_attempts
    assert set(server.stats.exec_attempts) <= {node_name("train", 0), second}


# ---------------------------------------------------------------- kubeconfig and an unreachable cluster


def test_kubeconfig_file_context_and_env_are_honoured(model, targets, cluster_state, tmp_path: Path, monkeypatch) -> None:
    with serving(FakeCluster.from_snapshot(cluster_state)) as server:
        document = json.loads(server.kubeconfig_text("fake"))
        # The current context points at nothing; only the named one reaches the server.
        document["clusters"].append({"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}})
        document["contexts"].append({"name": "dead", "context": {"cluster": "dead", "user": "fake-user"}})
        document["current-context"] = "dead"
        path = tmp_path / "config"
        path.write_text(json.dumps(document), encoding="utf-8")

        live = collect_snapshot(model, targets, kubeconfig=str(path), context="fake", **FAST)
        assert len(live.smi) == 5

        monkeypatch.setenv("KUBECONFIG", str(path))
        live = collect_snapshot(model, targets, context="fake", **FAST)
        assert len(live.smi) == 5


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_an_unreachable_api_server_is_one_readable_error(model, targets) -> None:
    kubeconfig = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "x",
            "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
            "users": [{"name": "x", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        }
    )
    with pytest.raises(ProbeError, match=r"cannot read the cluster at http://127\.0\.0\.1:\d+"):
        collect_snapshot(model, targets, kubeconfig_text=kubeconfig, retries=1, backoff_s=0.01, timeout_s=2)


def test_a_broken_kubeconfig_is_a_probe_error(model, targets, tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="not a kubeconfig"):
        collect_snapshot(model, targets, kubeconfig_text="just text")
    with pytest.raises(ProbeError, match="cannot load a kubeconfig"):
        collect_snapshot(model, targets, kubeconfig=str(tmp_path / "missing"))


# ---------------------------------------------------------------- the pure pieces


def test_exit_status_reading() -> None:
    assert exit_note('{"metadata":{},"status":"Success"}') is None
    failure = {"status": "Failure", "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": "9"}]}}
    assert exit_note(json.dumps(failure)) == "command exited with code 9"
    assert exit_note("") == "the exec ended without an exit status"


def test_refusals_are_not_retried_but_glitches_are() -> None:
    from kubernetes.client.exceptions import ApiException

    assert is_transient(ApiException(status=0, reason="Handshake status 500 Internal Server Error"))
    assert is_transient(ApiException(status=0, reason="[Errno 111] Connection refused"))
    assert is_transient(ApiException(status=503, reason="Service Unavailable"))
    assert not is_transient(ApiException(status=0, reason="Handshake status 403 Forbidden"))
    assert not is_transient(ApiException(status=404, reason="Not Found"))
    assert is_transient(probe.ExecTimeoutError(1.0, ""))
