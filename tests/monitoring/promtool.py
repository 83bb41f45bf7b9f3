"""Prometheus's own promtool, run on the rules we generate: `check rules` and `test rules` (its rule unit tests).

promtool comes from Debian's `prometheus` package (the Makefile's promtool target installs it for root, as in CI).
Without it the tests fail, with the command to install it: a rule check that silently skips proves nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

INSTALL_HINT = "apt-get install --no-install-recommends prometheus (or `make promtool`), or set AKSGPU_PROMTOOL"


def promtool() -> str:
    """``$AKSGPU_PROMTOOL``, else ``promtool`` on PATH; fails the test when there is none."""
    configured = os.environ.get("AKSGPU_PROMTOOL")
    found = shutil.which(configured) if configured else shutil.which("promtool")
    if not found:
        where = f"AKSGPU_PROMTOOL={configured} is not an executable" if configured else "promtool is not installed"
        pytest.fail(f"{where}: {INSTALL_HINT}")
    return found


def run(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def write_yaml(path: Path, document: Any) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=1000), encoding="utf-8")
    return path


def check_rules(rule_file: Path) -> subprocess.CompletedProcess[str]:
    return run(["check", "rules", rule_file.name], rule_file.parent)


def test_rules(test_file: Path) -> subprocess.CompletedProcess[str]:
    return run(["test", "rules", test_file.name], test_file.parent)


test_rules.__test__ = False  # type: ignore[attr-defined]  # a helper, not a pytest test
