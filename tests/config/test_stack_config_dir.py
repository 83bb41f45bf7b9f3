"""The stack commands find a stack's file where the Pulumi CLI does: ``stackConfigDir`` of the project's Pulumi.yaml
(relative to it), else beside Pulumi.yaml (https://www.pulumi.com/docs/reference/pulumi-yaml/, read 2026-12-01)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aks_gpu.cli import main
from aks_gpu.config.loader import stack_file_path
from tests.conftest import PROJECT_DIR, STACKS_DIR


def project(tmp_path: Path, project_file: str, stack_folder: str) -> Path:
    """A Pulumi project of its own (this repository's program) with the dev stack's file in ``stack_folder``."""
    root = tmp_path / "platform"
    (root / stack_folder).mkdir(parents=True, exist_ok=True)
    shutil.copy(PROJECT_DIR / "__main__.py", root / "__main__.py")
    (root / "Pulumi.yaml").write_text(project_file, encoding="utf-8")
    shutil.copy(STACKS_DIR / "Pulumi.dev.yaml", root / stack_folder / "Pulumi.team.yaml")
    return root


def test_plan_reads_the_stack_from_the_projects_stack_config_dir(tmp_path: Path) -> None:
    root = project(tmp_path, "name: aks-gpu\nruntime: python\nstackConfigDir: config/stacks\n", "config/stacks")
    out = tmp_path / "plan"
    assert main(["plan", "--stack", "team", "--project-dir", str(root), "--out", str(out)]) == 0
    resources = json.loads((out / "resources.json").read_text(encoding="utf-8"))["resources"]
    assert any(r["type"] == "azure-native:containerservice:AgentPool" for r in resources)


def test_without_stack_config_dir_the_stack_file_is_beside_the_project_file(tmp_path: Path) -> None:
    root = project(tmp_path, "name: aks-gpu\nruntime: python\n", ".")
    assert main(["plan", "--stack", "team", "--project-dir", str(root), "--out", str(tmp_path / "plan")]) == 0
    assert stack_file_path(root, "team") == root / "Pulumi.team.yaml"


def test_this_repository_keeps_its_stacks_where_its_project_file_says() -> None:
    assert stack_file_path(PROJECT_DIR, "prod") == STACKS_DIR / "Pulumi.prod.yaml"


def test_a_missing_stack_names_the_file_looked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, "name: aks-gpu\nruntime: python\nstackConfigDir: config\n", "config")
    assert main(["plan", "--stack", "prod", "--project-dir", str(root), "--out", str(tmp_path / "plan")]) == 2
    error = capsys.readouterr().err
    assert "Pulumi.prod.yaml" in error and "config" in error and "no such stack file" in error


@pytest.mark.parametrize(
    ("project_file", "named"),
    [("name: aks-gpu\nstackConfigDir: [stacks]\n", "stackConfigDir"), ("name: aks-gpu\nstackConfigDir: stacks\n  bad: [\n", "")],
    ids=["not-a-folder", "not-yaml"],
)
def test_an_unreadable_project_file_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], project_file: str, named: str
) -> None:
    root = project(tmp_path, project_file, "stacks")
    assert main(["plan", "--stack", "team", "--project-dir", str(root), "--out", str(tmp_path / "plan")]) == 2
    error = capsys.readouterr().err
    assert "Pulumi.yaml" in error and named in error
