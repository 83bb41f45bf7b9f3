"""`aksgpu local down` ends the Pulumi processes a killed run left: found by this stack's PULUMI_HOME in their
environment (inherited by the pulumi CLI and its plugins), and no other process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aks_gpu.local.engine import end_processes, pulumi_processes

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")


def sleeper(pulumi_home: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PULUMI_HOME": str(pulumi_home)}
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)


def test_the_processes_of_this_stacks_pulumi_home_are_found_and_ended(tmp_path: Path) -> None:
    ours, other = tmp_path / "prod" / "pulumi-home", tmp_path / "dev" / "pulumi-home"
    mine, theirs = sleeper(ours), sleeper(other)
    try:
        assert pulumi_processes(ours) == [mine.pid]
        assert end_processes(pulumi_processes(ours), timeout_s=5) == [mine.pid]
        assert mine.wait(timeout=5) is not None
        assert theirs.poll() is None
        assert pulumi_processes(ours) == []
    finally:
        for process in (mine, theirs):
            process.kill()
            process.wait(timeout=5)


def test_nothing_found_is_nothing_ended(tmp_path: Path) -> None:
    assert end_processes(pulumi_processes(tmp_path / "none")) == []


def test_a_controller_process_is_found_by_its_pid_file_and_stopped_once(tmp_path: Path) -> None:
    """Kueue's and Karpenter's processes (`local up` starts them, `status` shows them, `down` stops them)."""
    from aks_gpu.local.engine import _start_controller, process_pid, stop_process

    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    process = _start_controller(tmp_path / "controller.log", command, dict(os.environ))
    try:
        assert process_pid(tmp_path) == process.pid
        assert stop_process(tmp_path) is True
        assert process.wait(timeout=10) is not None
        assert process_pid(tmp_path) is None and stop_process(tmp_path) is False
    finally:
        process.kill()
        process.wait(timeout=5)


def test_a_controller_that_ends_before_it_is_ready_fails_up_naming_its_log(tmp_path: Path) -> None:
    from aks_gpu.local.engine import LocalError, _start_controller, _wait_ready, free_port

    log = tmp_path / "controller.log"
    command = [sys.executable, "-c", "import sys; print('no kubeconfig'); sys.exit(3)"]
    process = _start_controller(log, command, dict(os.environ))
    with pytest.raises(LocalError) as raised:
        _wait_ready("Karpenter", process, free_port(), 30, log)
    assert raised.value.exit_code == 1
    assert str(raised.value) == f"Karpenter exited (3); its log: {log}"
    assert "no kubeconfig" in log.read_text(encoding="utf-8")
