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
