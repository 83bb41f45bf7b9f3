"""`make setup` (tools/setup-venv) names each step before it starts and times it when it ends: creating the
virtualenv, updating pip, pip installing the N requirements, installing the project. pip itself runs quietly, as
before, with the same arguments.

A stand-in interpreter takes the place of python3 and of the virtualenv's python: it records each call and installs
nothing, so no network and no real virtualenv are needed."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

from tests.conftest import PROJECT_DIR

SETUP_VENV = PROJECT_DIR / "tools" / "setup-venv"

# `python -m venv DIR` makes DIR/bin/python, a copy of this script; every call is recorded in $CALLS.
FAKE_PYTHON = r"""#!/usr/bin/env bash
set -eu
if [ "${1:-}" = --version ]; then echo "Python 3.12.9"; exit 0; fi
echo "$*" >>"$CALLS"
case "$*" in *"${FAIL_ON:-never}"*) echo "ERROR: No matching distribution" >&2; exit 1 ;; esac
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"
  cp "$0" "$3/bin/python"
fi
"""


def setup_venv(tmp_path: Path, *args: str, fail_on: str = "never") -> tuple[subprocess.CompletedProcess[str], list[str]]:
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON, encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    calls = tmp_path / "calls"
    calls.touch()
    environment = {**os.environ, "PYTHON": str(python), "CALLS": str(calls), "FAIL_ON": fail_on}
    run = subprocess.run(
        [str(SETUP_VENV), str(tmp_path / "venv"), *args],
        cwd=PROJECT_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return run, calls.read_text(encoding="utf-8").splitlines()


def requirement_count(path: Path) -> int:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return sum(1 for line in lines if line and not line.startswith("#"))


def test_each_step_is_named_and_timed_and_pip_is_asked_as_before(tmp_path: Path) -> None:
    run, calls = setup_venv(tmp_path, "requirements.txt", "--editable")
    assert run.returncode == 0, run.stderr
    venv = tmp_path / "venv"
    count = requirement_count(PROJECT_DIR / "requirements.txt")
    assert count > 10
    steps = [
        f"creating {venv} (Python 3.12.9)",
        f"updating pip in {venv}",
        f"pip installing {count} requirements of requirements.txt into {venv}",
        f"installing this project into {venv} (editable)",
    ]
    lines = run.stdout.splitlines()
    assert [re.sub(r" \.\.\. done in \d+s$", "", line) for line in lines[:-1]] == [f"setup: {s}" for s in steps]
    assert re.fullmatch(rf"setup: {re.escape(str(venv))} ready in \d+s", lines[-1])
    assert calls == [
        f"-m venv {venv}",
        "-m pip install --quiet --upgrade pip",
        "-m pip install --quiet -r requirements.txt",
        "-m pip install --quiet --no-deps -e .",
    ]


def test_an_existing_venv_is_kept_and_without_editable_the_project_is_not_installed(tmp_path: Path) -> None:
    setup_venv(tmp_path, "requirements-checkov.txt")
    run, calls = setup_venv(tmp_path, "requirements-checkov.txt")
    assert run.returncode == 0, run.stderr
    assert "creating" not in run.stdout and "installing this project" not in run.stdout
    assert f"setup: pip installing 1 requirement of requirements-checkov.txt into {tmp_path / 'venv'} ... done" in run.stdout
    assert calls[-2:] == ["-m pip install --quiet --upgrade pip", "-m pip install --quiet -r requirements-checkov.txt"]


def test_a_failing_step_says_so_and_stops(tmp_path: Path) -> None:
    run, calls = setup_venv(tmp_path, "requirements.txt", "--editable", fail_on="-r requirements.txt")
    assert run.returncode == 1
    assert re.search(
        r"^setup: pip installing \d+ requirements of requirements.txt into .* \.\.\. FAILED after \d+s", run.stdout, re.M
    )
    assert "ERROR: No matching distribution" in run.stderr
    assert "installing this project" not in run.stdout and "ready" not in run.stdout
    assert calls[-1] == "-m pip install --quiet -r requirements.txt"
