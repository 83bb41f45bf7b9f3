"""Every exit as documented, whatever the fault: an API server that accepts and never answers (2, in time, never
SIGABRT), a reader that closes the pipe (141, never 1), Ctrl-C at any moment (130, never a traceback), no usable temp
folder, environment the Pulumi SDK reads, and a plan interrupted or killed while it is written. Each runs the real
command line in a child process, as a user's shell would."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aks_gpu.cluster.retries import RetryPolicy
from aks_gpu.mock_engine import plan_files
from tests.cluster.fake_apiserver import silent_api_server
from tests.conftest import PROJECT_DIR

# The checkout's own package (components/) first: the environment may be shared with another checkout, whose
# editable install would otherwise be the one imported.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join((str(PROJECT_DIR / "components"), str(PROJECT_DIR)))}
ENV.pop("PULUMI_CONFIG", None)
ENV.pop("PULUMI_CONFIG_SECRET_KEYS", None)


def aksgpu(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aks_gpu.cli", *args], capture_output=True, text=True, timeout=240, env=env or ENV
    )


def test_an_api_server_that_never_answers_is_exit_2_within_the_bound(tmp_path: Path) -> None:
    # Before: the one-line error, then SIGABRT (134) as the interpreter shut down with a probe thread still in recv.
    timeout = 1.0
    with silent_api_server(tmp_path) as kubeconfig:
        for _ in range(3):
            started = time.monotonic()
            result = aksgpu("validate", "--stack", "dev", "--kubeconfig", str(kubeconfig), "--timeout", str(timeout))
            elapsed = time.monotonic() - started
            assert result.returncode == 2, (result.returncode, result.stderr[-500:])
            assert "no complete answer within" in result.stderr and "Traceback" not in result.stderr
            # One list call's worst case (every attempt and the waits between them), plus the command's start-up.
            policy = RetryPolicy(timeout_s=timeout, retries=2)
            assert elapsed < (policy.retries + 1) * timeout + policy.waits_s() + 30


def test_a_closed_pipe_is_141_on_the_rich_tables(tmp_path: Path) -> None:
    # rich's own handling exits 1 ("a check failed") for a passing run whose reader went away.
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write fails with EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "aks_gpu.cli", "catalog"], stdout=write_end, stderr=subprocess.PIPE, text=True, env=ENV
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert "Traceback" not in result.stderr


CLI_INIT = PROJECT_DIR / "components" / "aks_gpu" / "cli" / "__init__.py"
# The line of aks_gpu/cli/__init__.py that installs its Ctrl-C handler: a SIGINT before it meets the interpreter's
# own startup (site, runpy, the first imports), which no program can answer; on a loaded machine that window can
# outlast the first delay below.
HANDLER_LINE = next(
    number
    for number, line in enumerate(CLI_INIT.read_text().splitlines(), 1)
    if "signal.signal(signal.SIGINT, _interrupted_now)" in line
)
TRACEBACK_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def interrupted_before_the_cli_ran(stderr: str) -> bool:
    """Whether a traceback on ``stderr`` ends before the handler line: no frame of the package after it."""
    if "KeyboardInterrupt" not in stderr:
        return False
    ours = [(path, int(line)) for path, line in TRACEBACK_FRAME.findall(stderr) if "aks_gpu" in path]
    return all(Path(path) == CLI_INIT and line < HANDLER_LINE for path, line in ours)


def test_the_interpreters_startup_window_is_told_from_the_cli() -> None:
    startup = 'Traceback (most recent call last):\n  File "<frozen runpy>", line 112, in _get_module_details\nKeyboardInterrupt\n'
    assert interrupted_before_the_cli_ran(startup)
    early = f'Traceback:\n  File "{CLI_INIT}", line 6, in <module>\n    import signal\nKeyboardInterrupt\n'
    assert interrupted_before_the_cli_ran(early)
    late = f'Traceback:\n  File "{CLI_INIT}", line {HANDLER_LINE + 10}, in <module>\nKeyboardInterrupt\n'
    assert not interrupted_before_the_cli_ran(late)
    assert not interrupted_before_the_cli_ran("interrupted\n")


def test_ctrl_c_at_any_moment_is_130_without_a_traceback(tmp_path: Path) -> None:
    # From the imports to the asyncio loop of the mock engine: before, asyncio printed tracebacks and some runs went
    # on to write the plan and exit 0.
    for delay in (0.3, 0.8, 1.5, 3.0, 5.0):
        child = subprocess.Popen(
            [sys.executable, "-m", "aks_gpu.cli", "plan", "--stack", "dev", "--out", str(tmp_path / "plan")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=120)
        if child.returncode == 0:
            continue  # it had finished before the signal came: nothing to interrupt
        if interrupted_before_the_cli_ran(stderr):
            continue  # the interpreter was still starting (a loaded machine): not the command line's to answer
        assert child.returncode == 130, (delay, child.returncode, stderr[-500:])
        assert "Traceback" not in stderr and "interrupted" in stderr


NO_TEMP = """
import runpy, sys, tempfile
def none_usable():
    raise FileNotFoundError(2, "No usable temporary directory found")
tempfile._get_default_tempdir = none_usable
tempfile.tempdir = None
sys.argv = ["aksgpu", *sys.argv[1:]]
runpy.run_module("aks_gpu.cli", run_name="__main__")
"""


@pytest.mark.parametrize("args", [["--help"], ["plan", "--stack", "dev"]])
def test_no_usable_temp_folder_is_no_traceback(args: list[str], tmp_path: Path) -> None:
    # A read-only container: Python finds no temp folder, and Pulumi's import (dill) asks for one.
    extra = ["--out", str(tmp_path / "plan")] if args[0] == "plan" else []
    result = subprocess.run(
        [sys.executable, "-c", NO_TEMP, *args, *extra], capture_output=True, text=True, timeout=240, env=ENV
    )
    assert result.returncode == 0, result.stderr[-800:]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("key", ["aks-gpu:cluster", "aks-gpu:gpuPools", "aks-gpu:workloads"])
def test_secret_config_keys_from_the_environment_plan(key: str, tmp_path: Path) -> None:
    # The documented secrets path: before, exit 3 (AttributeError on a masked manifest's metadata).
    secret = {**ENV, "PULUMI_CONFIG_SECRET_KEYS": json.dumps([key])}
    result = aksgpu("plan", "--stack", "dev", "--out", str(tmp_path / "plan"), env=secret)
    assert result.returncode == 0, result.stderr[-800:]
    manifests = list((tmp_path / "plan" / "manifests").iterdir())
    assert manifests and all(path.suffix == ".yaml" for path in manifests)


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("PULUMI_CONFIG", '{"aks-gpu:bogus": "x"}', 0),
        ("PULUMI_CONFIG", "not json", 0),
        ("PULUMI_CONFIG_SECRET_KEYS", "not json", 2),
        ("PULUMI_CONFIG_SECRET_KEYS", '{"aks-gpu:cluster": true}', 2),
    ],
)
def test_stray_pulumi_environment_is_never_an_internal_error(name: str, value: str, code: int, tmp_path: Path) -> None:
    result = aksgpu("plan", "--stack", "dev", "--out", str(tmp_path / "plan"), env={**ENV, name: value})
    assert result.returncode == code, result.stderr[-800:]
    assert "internal error" not in result.stderr and name in result.stderr


# ---------------------------------------------------------------- the plan folder


def test_a_plan_interrupted_between_its_renames_keeps_the_previous_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "plan"
    out.mkdir()
    (out / plan_files.PLAN_FILE).write_text('{"resources": []}')
    staging = tmp_path / ".plan.1.x.new"
    staging.mkdir()
    real_rename = os.rename

    def interrupted(source: object, target: object) -> None:
        if Path(str(source)) == staging:
            raise KeyboardInterrupt
        real_rename(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plan_files._swap_in(staging, out)
    assert (out / plan_files.PLAN_FILE).read_text() == '{"resources": []}'
    assert not [path for path in tmp_path.iterdir() if path.name.endswith(".old")]


def test_folders_a_killed_plan_left_are_removed_by_the_next(tmp_path: Path) -> None:
    # A plan killed (SIGKILL) mid-write leaves its .new and .old folders; its process id in their names says so.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "plan"
    stray_new = tmp_path / f"{plan_files._stray_prefix(out, dead.pid)}abc.new"
    stray_old = tmp_path / f"{plan_files._stray_prefix(out, dead.pid)}def.old"
    mine = tmp_path / f"{plan_files._stray_prefix(out)}ghi.new"  # a running plan's (this process): kept
    for folder in (stray_new, stray_old, mine):
        folder.mkdir()
    plan_files._drop_strays(out)
    assert not stray_new.exists() and not stray_old.exists() and mine.exists()


# ---------------------------------------------------------------- files written beside and renamed


def _limited_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))  # Python ignores SIGXFSZ: a write past it is EFBIG


def test_a_write_cut_by_a_size_limit_leaves_the_previous_file_whole(tmp_path: Path) -> None:
    # Before: the file was truncated first, then written until the limit: a cut rule file, the old one gone.
    out = tmp_path / "rules.yaml"
    out.write_text("previous: rules\n")
    result = subprocess.run(
        [sys.executable, "-m", "aks_gpu.cli", "rules", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--out", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=240,
        preexec_fn=_limited_file_size,
    )
    assert result.returncode == 2, result.stderr[-500:]
    assert "cannot write" in result.stderr
    assert out.read_text() == "previous: rules\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["rules.yaml"]  # no temporary file left


def test_a_named_pipe_and_a_symlink_are_still_written_through(tmp_path: Path) -> None:
    from aks_gpu.output_files import write_atomically

    target = tmp_path / "real.html"
    target.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    write_atomically(link, b"new")
    assert link.is_symlink() and target.read_text() == "new"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="nobody reads"):
        write_atomically(fifo, b"x")
