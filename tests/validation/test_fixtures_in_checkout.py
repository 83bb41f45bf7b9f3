"""The real outputs the parser and health tests read live in the repository, each with its source: a clone passes
on its own, with nothing beside it (`.ci/run` proves it on a fresh clone; this keeps the cheap part in every run)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import FIXTURES_DIR, HEALTH_FIXTURES_DIR, PROJECT_DIR, SMI_FIXTURES_DIR

# The folder the outputs once came from, beside the checkout. Spelled in two pieces so this file does not match.
_OUTSIDE = re.compile(r"\.\./" + r"shared\b|/shared/" + r"fixtures\b")


def test_the_fixture_folders_are_inside_the_checkout() -> None:
    for folder in (FIXTURES_DIR, SMI_FIXTURES_DIR, HEALTH_FIXTURES_DIR):
        assert folder.resolve().is_relative_to(PROJECT_DIR.resolve()) and folder.is_dir(), folder


def test_no_test_bench_doc_or_example_reads_the_folder_beside_the_checkout() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "tests", "bench", "docs", "examples", "README.md", "Makefile", ".ci"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "tests/conftest.py" in tracked  # the scan sees the files it is meant to
    offenders = []
    for name in tracked:
        path = PROJECT_DIR / name
        if path.suffix in {".py", ".md", ".yaml", ".yml", ".json", ".sh", ""} and path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            offenders += [f"{name}: {match.group(0)}" for match in _OUTSIDE.finditer(text)]
    assert offenders == []


@pytest.mark.parametrize("folder", [SMI_FIXTURES_DIR, HEALTH_FIXTURES_DIR], ids=["smi", "health"])
def test_every_fixture_has_its_source_row_and_every_row_its_file(folder: Path) -> None:
    files = {path.name for path in folder.glob("*.txt")}
    sources = (folder / "SOURCES.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| ([0-9][^ |]*\.txt) \|", sources, flags=re.MULTILINE))
    assert files and files == rows, (sorted(files - rows), sorted(rows - files))
