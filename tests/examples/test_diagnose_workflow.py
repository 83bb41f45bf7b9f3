"""The example diagnostic schedule (examples/ci/gpu-diagnose.yml): valid for GitHub Actions (actionlint), weekly in a
maintenance window, signed in without a secret, and its `aksgpu` command line the real parser accepts, with the
flags the schedule's path needs (docs/remediation.md: --deep, a level of 2 or 3, --quarantine)."""

from __future__ import annotations

import re
import shlex
import subprocess
from typing import Any

import yaml

from aks_gpu.cli import build_parser
from tests.conftest import PROJECT_DIR
from tests.examples.test_ci_workflow import actionlint

WORKFLOW = PROJECT_DIR / "examples" / "ci" / "gpu-diagnose.yml"


def workflow() -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return document


def steps() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = workflow()["jobs"]["diagnose"]["steps"]
    return found


def test_actionlint_finds_nothing() -> None:
    done = subprocess.run([actionlint(), "-no-color", str(WORKFLOW)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_runs_weekly_and_by_hand() -> None:
    on = workflow()[True]  # YAML 1.1 reads the bare key `on` as True
    (schedule,) = on["schedule"]
    _minute, _hour, day, month, weekday = schedule["cron"].split()
    assert re.fullmatch(r"[0-6]", weekday) and day == month == "*", schedule
    assert on["workflow_dispatch"]["inputs"]["level"]["options"] == ["2", "3"]


def test_it_signs_in_without_a_secret() -> None:
    assert workflow()["permissions"]["id-token"] == "write"
    assert "secrets." not in WORKFLOW.read_text(encoding="utf-8")


def test_its_aksgpu_command_line_is_the_schedules_path() -> None:
    lines = [
        shlex.split(line.split(">")[0])
        for step in steps()
        for line in str(step.get("run", "")).splitlines()
        if line.strip().startswith("aksgpu ")
    ]
    (line,) = lines
    words = [word.replace("$STACK", "prod").replace("$LEVEL", "2") for word in line[1:]]
    args = build_parser().parse_args(words)  # argparse exits (SystemExit 2) on a flag it does not know
    assert args.deep and args.quarantine and args.level == 2 and args.json
