"""The live probe against a fake API server on loopback: what a user of ``aksgpu validate`` (live) or of the
deploy hook would see from a cluster with healthy, hanging, failing and missing pieces."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.cluster import client_config, list_calls, pod_exec, probe, retries
from aks_gpu.cluster.pod_exec import exit_note
from aks_gpu.cluster.probe import ProbeError, collect_snapshot, pool_selector
from aks_gpu.cluster.retries import RetryPolicy, is_transient, list_phase_budget_s
from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import PluginTarget
from aks_gpu.validation.checks import run_checks
from tests.cluster.fake_apiserver import ExecBehaviour, FakeApiServer, FakeCluster, Faults
from tests.cluster.snapshots import edited, fixture_text, healthy_snapshot, node_name, pods_on, set_not_ready, without

FAST: dict[str, Any] = {"timeout_s": 5.0, "retries": 2, "backoff_s": 0.01}


@pytest.fixture(scope="module")
def cluster_state(model: PlatformModel, targets: dict[str, PluginTarget]) -> ClusterSnapshot:
    """A healthy prod cluster: 2 training nodes (8x H100, a real nvidia-smi output), 3 inference nodes (MIG)."""
    return healthy_snapshot(model, targets, {"train": 2, "infer": 3})


@contextmanager
def serving(cluster: FakeCluster, exec_delay_s: float = 0.0) -> Iterator[FakeApiServer]:
    with FakeApiServer(cluster, exec_delay_s=exec_delay_s) as server:
        yield server
    assert server.stats.errors == [], "the fake API server itself failed"


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
    monkeypatch.setattr(list_calls, "LIST_PAGE_SIZE", 2)
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
    assert is_transient(pod_exec.ExecTimeoutError(1.0, ""))


# ---------------------------------------------------------------- faults: every wait is bounded


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The probe's waits between retries, recorded instead of slept."""
    delays: list[float] = []
    monkeypatch.setattr(retries, "_sleep", delays.append)
    return delays


def faulty(cluster_state: ClusterSnapshot, **faults: Any) -> FakeCluster:
    cluster = FakeCluster.from_snapshot(cluster_state)
    cluster.faults = Faults(**faults)
    return cluster


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_of_an_hour_is_capped(status: int, model, targets, cluster_state, slept) -> None:
    cluster = faulty(cluster_state, list_status=status, list_status_times=1, retry_after="3600")
    started = time.monotonic()
    with serving(cluster) as server:
        live = collect(model, targets, server)
    assert len(live.smi) == 5  # the throttled list was retried and the run went on
    assert slept == [retries.MAX_RETRY_AFTER_S]  # not 3600
    assert server.stats.list_requests == 1 + 1 + 1 + 1  # nodes twice (429, then answered), daemonsets, pods
    assert time.monotonic() - started < 10


def test_a_persistent_429_is_tried_exactly_retries_plus_one_times(model, targets, cluster_state, slept) -> None:
    with (
        serving(faulty(cluster_state, list_status=429, retry_after="3600")) as server,
        pytest.raises(ProbeError, match=r"HTTP 429.*after 3 attempts"),
    ):
        collect(model, targets, server, retries=2)
    # One retry layer: urllib3's own (3 more per request, each sleeping the Retry-After) is off.
    assert server.stats.list_requests == 3
    assert slept == [retries.MAX_RETRY_AFTER_S] * 2


def test_an_exec_handshake_that_is_never_answered_times_out(model, targets, cluster_state) -> None:
    started = time.monotonic()
    with serving(faulty(cluster_state, exec_silent_handshake=True)) as server:
        live = collect(model, targets, server, timeout_s=0.5, retries=1)
    assert time.monotonic() - started < 8
    assert live.smi == {}
    assert set(live.exec_errors) == set(cluster_state.smi)
    assert all("timed out" in note and "after 2 attempts" in note for note in live.exec_errors.values())
    assert all(count == 2 for count in server.stats.exec_attempts.values())


def test_exec_output_dripped_a_byte_at_a_time_is_cut_at_the_timeout(model, targets, cluster_state) -> None:
    node = node_name("train", 0)
    cluster = FakeCluster.from_snapshot(cluster_state)
    cluster.behaviours[node] = ExecBehaviour(stdout=cluster_state.smi[node], drip_s=0.2)
    started = time.monotonic()
    with serving(cluster) as server:
        live = collect(model, targets, server, timeout_s=0.5, retries=0)
    assert time.monotonic() - started < 6
    assert "timed out after 0.5 s" in live.exec_errors[node]
    assert server.stats.exec_attempts[node] == 1
    assert len(live.smi) == 4 and node not in live.smi


def test_a_command_that_prints_without_end_is_stopped_at_the_output_limit(
    model, targets, cluster_state, monkeypatch
) -> None:
    # The client keeps whatever an exec prints: before, 3 GB within the exec's timeout.
    monkeypatch.setattr(pod_exec, "MAX_EXEC_OUTPUT_BYTES", 1 << 20)
    flooding = node_name("train", 0)
    cluster = FakeCluster.from_snapshot(cluster_state)
    cluster.behaviours[flooding] = ExecBehaviour(flood_bytes=256 << 20)
    started = time.monotonic()
    with serving(cluster) as server:
        live = collect(model, targets, server, timeout_s=20)
    assert time.monotonic() - started < 15
    assert "printed more than 1 MiB" in live.exec_errors[flooding]
    assert flooding not in live.smi
    assert server.stats.exec_attempts[flooding] == 1  # not retried
    assert len(live.smi) == 4  # the other nodes ran as usual


def test_a_list_that_drips_a_byte_a_second_is_given_up_at_the_timeout(model, targets, cluster_state) -> None:
    started = time.monotonic()
    with (
        serving(faulty(cluster_state, list_drip_s=1.0)) as server,
        pytest.raises(ProbeError, match=r"the node list: .*within 0\.8 s|the node list: .*deadline"),
    ):
        collect(model, targets, server, timeout_s=0.8, retries=1)
    assert time.monotonic() - started < 6  # two attempts of 0.8 s, not one byte a second for the whole list
    assert server.stats.list_requests == 2


def test_a_list_without_end_is_given_up_at_the_list_phase_deadline(model, targets, cluster_state) -> None:
    # Every page on time (0.05 s, a 0.5 s timeout), but always one more: without a bound on the phase, 1,000 pages.
    started = time.monotonic()
    with (
        serving(faulty(cluster_state, list_endless_s=0.05)) as server,
        pytest.raises(ProbeError, match=r"the node list: the lists had not ended when the list phase's deadline passed"),
    ):
        collect(model, targets, server, timeout_s=0.5, retries=0, margin_s=0.5)
    budget = list_phase_budget_s(RetryPolicy(timeout_s=0.5, retries=0), margin_s=0.5)
    assert budget == 5.5
    assert time.monotonic() - started < budget + 3
    assert 20 < server.stats.list_requests < 1000


def test_a_reset_connection_is_retried_then_one_readable_error(model, targets, cluster_state) -> None:
    with (
        serving(faulty(cluster_state, list_reset=True)) as server,
        pytest.raises(ProbeError, match=r"cannot read the cluster at http://127\.0\.0\.1:\d+: .*after 3 attempts") as error,
    ):
        collect(model, targets, server, retries=2)
    assert server.stats.list_requests == 3
    assert "\n" not in str(error.value)


def test_a_reset_exec_connection_fails_that_node_with_the_reason(model, targets, cluster_state) -> None:
    with serving(faulty(cluster_state, exec_reset=True)) as server:
        live = collect(model, targets, server, retries=1)
    assert live.smi == {} and len(live.exec_errors) == 5
    assert all("after 2 attempts" in note for note in live.exec_errors.values())


def test_a_throttled_exec_upgrade_is_retried_with_backoff(model, targets, cluster_state, slept) -> None:
    with serving(faulty(cluster_state, exec_status=429, retry_after="3600")) as server:
        live = collect(model, targets, server, retries=2, concurrency=1)
    assert all(count == 3 for count in server.stats.exec_attempts.values())
    assert all("429" in note for note in live.exec_errors.values())
    assert max(slept) <= retries.MAX_RETRY_AFTER_S


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<html>502 Bad Gateway</html>", "the node list: the answer is not JSON"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"items": [{"metadata": "aks-train-0"}]}', "items[0] (Node): metadata must be an object"),
        (b'{"items": ["x"]}', 'items[0] is the string "x", not a Node object'),
        (b'{"items": {}}', "'items' is not a list"),
        (b'{"items": [], "metadata": {"continue": 5}}', "continue token"),
    ],
)
def test_an_answer_that_is_not_what_kubernetes_sends_is_one_readable_error(
    body: bytes, expected: str, model, targets, cluster_state
) -> None:
    with serving(faulty(cluster_state, list_body=body)) as server, pytest.raises(ProbeError) as error:
        collect(model, targets, server, retries=2)
    assert expected in str(error.value)
    assert server.stats.list_requests == 1  # garbage is not retried


def test_the_exec_phase_ends_by_its_deadline_whatever_an_exec_does(model, targets, cluster_state, monkeypatch) -> None:
    stuck = node_name("infer", 2)
    release = threading.Event()
    real_run_exec = pod_exec.run_exec

    def run_exec(core: Any, job: pod_exec.ExecJob, timeout_s: float) -> pod_exec.ExecResult:
        if job.node == stuck:
            release.wait(30)  # a wait nothing below bounds: only the run's deadline can end it
        return real_run_exec(core, job, timeout_s)

    monkeypatch.setattr(probe, "run_exec", run_exec)
    started = time.monotonic()
    try:
        with serving(FakeCluster.from_snapshot(cluster_state)) as server:
            live = collect(model, targets, server, timeout_s=0.2, retries=0, margin_s=0.5)
    finally:
        release.set()
    budget = retries.exec_phase_budget_s(5, 16, retries.RetryPolicy(timeout_s=0.2, retries=0), 0.5)
    assert time.monotonic() - started < budget + 3
    assert "had not finished when the probe's deadline passed" in live.exec_errors[stuck]
    assert len(live.smi) == 4


def test_the_exec_phase_budget_is_nodes_over_concurrency_times_one_nodes_worst_case() -> None:
    policy = retries.RetryPolicy(timeout_s=30, retries=2)
    per_node = 3 * (2 * 30 + pod_exec.WATCHDOG_GRACE_S) + 2 * retries.MAX_RETRY_AFTER_S
    assert policy.job_budget_s() == per_node
    assert retries.exec_phase_budget_s(1000, 16, policy) == 63 * per_node + retries.RUN_MARGIN_S


# ---------------------------------------------------------------- no secret in any message

TOKEN = "s3cr3t-b3arer-t0ken-0123456789abcdef"


def kubeconfig_with(server: str, token: str = TOKEN) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": server}}],
        "users": [{"name": "x", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
    }


@pytest.mark.parametrize(
    "text",
    [
        # A YAML error on the token's line: PyYAML's own message quotes that line.
        f"apiVersion: v1\nusers:\n- name: x\n  user: {{token: {TOKEN}, : }}\n",
        f"users:\n- user:\n    token: {TOKEN}\n  \tname: x\n",
        f"users: [{{user: {{token: '{TOKEN}'}}}}, *nothing]\n",
        # Shapes the kubernetes client trips over.
        json.dumps({**kubeconfig_with("http://127.0.0.1:9"), "users": [{"name": "x", "user": {"token": [TOKEN]}}]}),
        json.dumps({**kubeconfig_with("http://127.0.0.1:9"), "users": TOKEN}),
        json.dumps({**kubeconfig_with("http://127.0.0.1:9"), "contexts": [{"name": "x", "context": TOKEN}]}),
    ],
)
def test_a_broken_kubeconfig_never_echoes_its_token(text: str, model, targets) -> None:
    with pytest.raises(ProbeError) as error:
        collect_snapshot(model, targets, kubeconfig_text=text, retries=0, timeout_s=1)
    assert TOKEN not in str(error.value) and TOKEN[:12] not in str(error.value)


def test_a_token_the_http_client_refuses_is_not_echoed(model, targets, cluster_state) -> None:
    # A newline in the token: http.client's ValueError quotes the header value.
    token = TOKEN + "\nX-Injected: 1"
    with serving(FakeCluster.from_snapshot(cluster_state)) as server, pytest.raises(ProbeError) as error:
        collect_snapshot(model, targets, kubeconfig_text=json.dumps(kubeconfig_with(server.url, token)), retries=0)
    assert TOKEN not in str(error.value)


def test_exec_failure_notes_never_carry_the_token(model, targets, cluster_state, monkeypatch) -> None:
    def leaky(core: Any, job: pod_exec.ExecJob, timeout_s: float) -> pod_exec.ExecResult:
        raise OSError(f"proxy refused Authorization: Bearer {TOKEN}")

    monkeypatch.setattr(probe, "run_exec", leaky)
    with serving(FakeCluster.from_snapshot(cluster_state)) as server:
        live = collect_snapshot(model, targets, kubeconfig_text=json.dumps(kubeconfig_with(server.url)), retries=0, timeout_s=2)
    assert len(live.exec_errors) == 5
    assert all(TOKEN not in note and "[redacted]" in note for note in live.exec_errors.values())


# ---------------------------------------------------------------- redirects and kubeconfig files that are not files


@contextmanager
def recording_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Another host a hostile API server redirects to: it records every request's headers and answers 200."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict[str, str]] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            body = b'{"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_redirected_list_is_not_followed_and_the_token_stays_home(model, targets, cluster_state) -> None:
    with recording_server() as (elsewhere, seen):
        cluster = faulty(cluster_state, list_redirect_to=elsewhere)
        with serving(cluster) as server, pytest.raises(ProbeError, match="HTTP 307") as error:
            collect_snapshot(model, targets, kubeconfig_text=json.dumps(kubeconfig_with(server.url)), retries=2, timeout_s=2)
    assert seen == []
    assert TOKEN not in str(error.value)
    assert server.stats.list_requests == 1  # a redirect is an answer, not a glitch: not retried


def test_a_redirected_exec_is_not_followed_and_the_token_stays_home(model, targets, cluster_state) -> None:
    # CVE-2022-3172: an aggregated API server can redirect a client, with its credentials, to any URL.
    # websocket-client follows up to 3 redirects with the same headers, Authorization included.
    with recording_server() as (elsewhere, seen):
        # ws:// as a hostile server would write it (websocket-client refuses an http:// target by itself).
        cluster = faulty(cluster_state, exec_redirect_to=elsewhere.replace("http://", "ws://"))
        with serving(cluster) as server:
            live = collect_snapshot(
                model, targets, kubeconfig_text=json.dumps(kubeconfig_with(server.url)), retries=2, timeout_s=2, backoff_s=0.01
            )
    assert seen == [], f"the exec followed a redirect to another host and sent it {seen[0].get('authorization')!r}"
    assert len(live.exec_errors) == 5 and not live.smi
    assert all("redirect" in note and "not followed" in note and TOKEN not in note for note in live.exec_errors.values())
    assert all(count == 1 for count in server.stats.exec_attempts.values())  # not retried


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "huge", "utf16"])
def test_a_kubeconfig_that_is_not_a_readable_file_is_refused_at_once(
    kind: str, model, targets, tmp_path: Path, monkeypatch
) -> None:
    path = tmp_path / "config"
    if kind == "fifo":
        os.mkfifo(path)  # opened for reading by the kubernetes client, it would wait for a writer for ever
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "huge":
        path.write_bytes(b"users: [" + b"{}, " * (client_config.MAX_KUBECONFIG_BYTES // 4) + b"]\n")
    else:
        path.write_bytes(json.dumps(kubeconfig_with("http://127.0.0.1:9")).encode("utf-16"))
    started = time.monotonic()
    with pytest.raises(ProbeError, match=f"cannot load a kubeconfig from {path}") as error:
        collect_snapshot(model, targets, kubeconfig=str(path), retries=0, timeout_s=1)
    assert time.monotonic() - started < 5
    expected = {"fifo": "named pipe", "device": "character device", "folder": "folder", "huge": "limit", "utf16": "UTF-16"}
    assert expected[kind] in str(error.value)
    # The same from $KUBECONFIG, one of its paths.
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "absent"), str(path)]))
    with pytest.raises(ProbeError, match=expected[kind]):
        collect_snapshot(model, targets, retries=0, timeout_s=1)


# ---------------------------------------------------------------- the kubeconfig's credential plugin


def test_a_credential_plugin_that_waits_for_a_person_is_stopped_when_no_one_is_there(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # kubelogin's default (devicecode) login waits for a person; in CI nobody answers. The client itself would wait
    # for ever on the plugin; stdout is not a terminal here, so the plugin gets EXEC_PLUGIN_TIMEOUT_S.
    monkeypatch.setattr(client_config, "EXEC_PLUGIN_TIMEOUT_S", 0.5)
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": sys.executable,
                        "args": ["-c", "import time; time.sleep(60)"],
                        "interactiveMode": "IfAvailable",
                    }
                },
            }
        ],
    }
    started = time.monotonic()
    with caplog.at_level(logging.ERROR), pytest.raises(ProbeError, match=r"had not answered after 0\.5 s and was stopped"):
        client_config.load_client_configuration(kubeconfig_text=json.dumps(kubeconfig))
    assert time.monotonic() - started < 10
    assert caplog.text == ""  # said once, in the error, not logged by the client as well


def test_a_read_timeout_that_beats_the_wait_is_told_as_the_wait_would_tell_it() -> None:
    # The socket's read timeout and the list call's wait are the same length: on a loaded machine the read timeout
    # fires first, and a server that never answered was told as "Read timed out" instead of the documented words.
    import urllib3

    def times_out() -> None:
        raise urllib3.exceptions.ReadTimeoutError(None, "/api/v1/nodes", "Read timed out. (read timeout=1.0)")  # type: ignore[arg-type]

    with pytest.raises(retries.DeadlineError, match="list nodes: no complete answer within 1 s"):
        retries.call_within(1.0, times_out, "list nodes")
    with pytest.raises(retries.DeadlineError, match="no complete answer within 1 s"):
        retries.call_within(1.0, lambda: (_ for _ in ()).throw(TimeoutError("timed out")), "list nodes")
    # Any other error is the caller's as it was.
    with pytest.raises(ConnectionRefusedError):
        retries.call_within(1.0, lambda: (_ for _ in ()).throw(ConnectionRefusedError()), "list nodes")
