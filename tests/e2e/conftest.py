"""The real engines: one `aksgpu local` cluster per shipped stack, in a project folder of its own (the checkout's
Pulumi.yaml, stacks/ and .tools/), shared per session (conftest.Clusters) and always stopped and purged, even on failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import PROJECT_DIR
from tests.e2e.kube import Server

TOOLS = PROJECT_DIR / ".tools" / "bin"
# Every wait is bounded: one `local up` of a stack takes ~10 s here, a preview a few.
UP_TIMEOUT_S = 300
ENV = {**os.environ, "PYTHONPATH": str(PROJECT_DIR / "components")}


def run_aksgpu(cwd: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """The command line in a fresh process, as a user runs it in ``cwd``: its output captured, no input."""
    return subprocess.run(
        [sys.executable, "-m", "aks_gpu.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
        cwd=cwd,
        check=False,
        stdin=subprocess.DEVNULL,
    )


@dataclass
class LocalCluster:
    project: Path
    stack: str

    @property
    def kubeconfig(self) -> Path:
        return self.project / ".local" / self.stack / "kubeconfig"

    def aksgpu(self, *args: str, timeout: float = UP_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        where = ("--project-dir", str(self.project)) if args[0] == "local" else ()
        return run_aksgpu(self.project, *args, *where, timeout=timeout)

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TOOLS / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def json(self, *args: str) -> Any:
        done = self.kubectl(*args, "-o", "json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


def project_copy(
    root: Path, stack_files: tuple[Path, ...] = (), edits: Mapping[str, Callable[[dict[str, Any]], None]] | None = None
) -> Path:
    """A project folder: the project's Pulumi.yaml and tools, and its stacks/, or a stacks/ of ``stack_files`` alone,
    or (``edits``) a copy of its stacks/ with each named stack's config changed by its function."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", root / "Pulumi.yaml")
    if stack_files:
        (root / "stacks").mkdir()
        for stack_file in stack_files:
            shutil.copy(stack_file, root / "stacks" / stack_file.name)
    elif edits:
        shutil.copytree(PROJECT_DIR / "stacks", root / "stacks")
        for stack, edit in edits.items():
            path = root / "stacks" / f"Pulumi.{stack}.yaml"
            document = yaml.safe_load(path.read_text())
            edit(document["config"])
            path.write_text(yaml.safe_dump(document, sort_keys=False))
    else:
        (root / "stacks").symlink_to(PROJECT_DIR / "stacks")
    (root / ".tools").symlink_to(PROJECT_DIR / ".tools")
    return root


def until(what: str, check: Any, timeout: float = 120.0, every: float = 0.5) -> Any:
    """``check()``'s first truthy value, asked every ``every`` seconds; the test fails after ``timeout`` seconds
    (bench/queueing.py times with it, finer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"not within {timeout:.0f}s: {what}")


@pytest.fixture(scope="session", autouse=True)
def tools_built() -> None:
    if not (TOOLS / "kwokctl").exists():
        pytest.fail("no .tools/bin/kwokctl: run `make tools` (make e2e does)")


def started(tmp_path_factory: pytest.TempPathFactory, stack: str, nodes_per_pool: int = 1) -> Iterator[LocalCluster]:
    cluster = start(tmp_path_factory, stack, nodes_per_pool)
    try:
        yield cluster
    finally:
        stop(cluster)


def start(tmp_path_factory: pytest.TempPathFactory, stack: str, nodes_per_pool: int = 1) -> LocalCluster:
    """A stack's local cluster, up; stopped and purged again if `up` fails."""
    return start_in(project_copy(tmp_path_factory.mktemp(f"local-{stack}")), stack, nodes_per_pool)


def start_in(project: Path, stack: str, nodes_per_pool: int = 1) -> LocalCluster:
    """``start`` in a project folder prepared by the caller (its own stack files)."""
    cluster = LocalCluster(project, stack)
    try:
        done = cluster.aksgpu("local", "up", "--stack", stack, "--nodes-per-pool", str(nodes_per_pool))
        assert done.returncode == 0, done.stderr[-3000:]
    except BaseException:
        stop(cluster)
        raise
    cluster.first_up = done  # type: ignore[attr-defined]
    return cluster


def stop(cluster: LocalCluster) -> None:
    cluster.aksgpu("local", "down", "--stack", cluster.stack, "--purge", timeout=120)


class Clusters:
    """One local cluster per stack per session, shared by the modules that only read it or dry-run against it
    (test_admission_agrees, test_live_paths) and test_stacks, whose last tests destroy and stop it (it then
    releases it). A module that asks after the release gets a fresh one."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.running: dict[str, LocalCluster] = {}

    def get(self, stack: str) -> LocalCluster:
        if stack not in self.running:
            self.running[stack] = start(self.tmp_path_factory, stack)
        return self.running[stack]

    def release(self, stack: str) -> None:
        cluster = self.running.pop(stack, None)
        if cluster is not None:
            stop(cluster)

    def close(self) -> None:
        for stack in list(self.running):
            self.release(stack)


@pytest.fixture(scope="session")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    shared = Clusters(tmp_path_factory)
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture(scope="module")
def prod(clusters: Clusters) -> LocalCluster:
    """The prod stack's local cluster, shared by the modules that read or write objects on it (a module that needs a
    cluster of its own defines its own ``prod``)."""
    return clusters.get("prod")


@pytest.fixture(scope="module")
def server(prod: LocalCluster) -> Server:
    """The prod cluster's API server, as the admission tests ask it."""
    return Server(prod.kubeconfig)
