"""A command run outside any project (a pip-installed ``aksgpu`` in an empty folder): the project is found from the
working folder only, never from where the package was loaded (site-packages, or this checkout), and without one the
command says which flag to give (exit 2). Issue 35."""

from __future__ import annotations

from pathlib import Path

import pytest

from aks_gpu.cli import main
from aks_gpu.cli.common import find_project_dir
from tests.conftest import PROJECT_DIR, STACKS_DIR


def test_no_project_is_found_outside_one(tmp_path: Path) -> None:
    # Before: the checkout the package was loaded from (site-packages once installed).
    assert find_project_dir(tmp_path) is None
    (tmp_path / "Pulumi.yaml").write_text("name: team\nruntime: python\n", encoding="utf-8")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    assert find_project_dir(tmp_path / "deep" / "er") == tmp_path.resolve()


@pytest.mark.parametrize("command", [["rules", "--stack", "prod"], ["plan", "--stack", "prod"]])
def test_a_stack_command_outside_a_project_says_project_dir_or_config_file(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "no Pulumi project here" in err and "--project-dir DIR" in err and "--config-file FILE" in err
    assert str(PROJECT_DIR) not in err.replace(str(tmp_path), "")  # nothing of the package's own folder
    assert captured.out == ""


def test_a_stack_file_given_outside_a_project_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["rules", "--stack", "prod", "--config-file", str(STACKS_DIR / "Pulumi.prod.yaml")]) == 0
    assert "groups:" in capsys.readouterr().out


def test_plan_of_a_stack_file_outside_a_project_asks_for_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--stack", "prod", "--config-file", str(STACKS_DIR / "Pulumi.prod.yaml")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "holds no Pulumi program (__main__.py) to plan: give --project-dir DIR" in err
    assert not (tmp_path / "build").exists()
