"""Tables never cut a value people copy: in a narrow terminal a long VM size, node image or taint wraps (no "…"),
and ``--wide`` prints each row on one line whatever the terminal's width."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aks_gpu.cli import common, main
from tests.conftest import PROJECT_DIR
from tests.examples.example_snapshots import EXAMPLES_DIR

FAULTY = str(EXAMPLES_DIR / "faulty")
STALE_IMAGE = "AKSUbuntu-2204gen2containerd-202506.10.0"


@pytest.fixture
def narrow_terminal() -> Iterator[None]:
    before = common.out._width
    common.out.width = 70
    yield
    common.out.width = before  # type: ignore[assignment]


@pytest.mark.usefixtures("narrow_terminal")
@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "--snapshot", FAULTY],
        ["catalog"],
        ["plan", "--stack", "prod", "--project-dir", str(PROJECT_DIR)],
    ],
    ids=lambda argv: argv[0],
)
def test_a_narrow_terminal_wraps_and_never_cuts(argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    extra = ["--out", str(tmp_path / "plan")] if argv[0] == "plan" else []
    main([*argv, *extra])
    output = capsys.readouterr().out
    assert "…" not in output


@pytest.mark.usefixtures("narrow_terminal")
def test_wide_prints_each_row_whole_however_narrow_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--snapshot", FAULTY, "--wide"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(STALE_IMAGE in line and "infer" in line and "nvidia" in line for line in lines)
    assert "…" not in "\n".join(lines)
    assert max(len(line) for line in lines) > 200  # each finding's message on its row's one line
    # and the next command has the terminal's width again
    assert main(["audit", "--snapshot", FAULTY]) == 1
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 70
