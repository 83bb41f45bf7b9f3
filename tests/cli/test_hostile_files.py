"""Files a user hands ``aksgpu`` that earlier attacks missed: each ends in exit 2 with a message naming the
file and what is wrong with it, never an internal error (exit 3), a crash of the interpreter or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aks_gpu.cli import main
from aks_gpu.input_files import InputFileError, decode_utf8
from tests.conftest import PROJECT_DIR

DEEP = 100_000  # far past Python's recursion limit and libyaml's composer stack


def run_cli(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``aksgpu`` in a fresh interpreter: a segmentation fault must show as what it is, not kill the suite."""
    return subprocess.run(
        [sys.executable, "-m", "aks_gpu.cli", *argv],
        cwd=PROJECT_DIR,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[" * DEEP + b"]" * DEEP, "nested deeper than 64 levels"),
        (b'{"a":' * DEEP + b"1" + b"}" * DEEP, "nested deeper than 64 levels"),
        (b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {priority: " + b"9" * 5000 + b"}\n", "digits"),
    ],
    ids=["deep-list", "deep-json", "5000-digit-integer"],
)
def test_admission_check_refuses_deep_nesting_and_huge_numbers_with_exit_2(
    content: bytes, expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "pods.yaml"
    path.write_bytes(content)
    result = run_cli("admission", "check", "--stack", "dev", str(path))
    stderr = result.stderr.decode()
    assert result.returncode == 2, (result.returncode, stderr[-500:])
    assert str(path) in stderr and expected in stderr
    assert "Traceback" not in stderr and "internal error" not in stderr


def test_a_stack_file_that_is_a_symlink_loop_is_refused_not_an_internal_error(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop.name)
    assert main(["plan", "--stack", "dev", "--config-file", str(loop), "--out", str(tmp_path / "out")]) == 2
    stderr = capsys.readouterr().err
    assert "loop.yaml" in stderr and "internal error" not in stderr


def test_a_project_dir_that_is_a_symlink_loop_is_refused_not_an_internal_error(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "project"
    loop.symlink_to(loop.name)
    assert main(["plan", "--stack", "dev", "--project-dir", str(loop), "--out", str(tmp_path / "out")]) == 2
    assert "internal error" not in capsys.readouterr().err


def test_a_nul_byte_in_a_short_file_is_binary_not_utf16() -> None:
    with pytest.raises(InputFileError, match="NUL byte"):
        decode_utf8(b"a: 1\x00\n")
    with pytest.raises(InputFileError, match="UTF-16"):
        decode_utf8("config:\n  aks-gpu:cluster: x\n".encode("utf-16-le"))


def test_smi_parse_of_a_stdin_that_never_ends_is_given_up_not_waited_on(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from aks_gpu.cli import smi as smi_cli

    read_end, write_end = os.pipe()  # the write end stays open: a writer that never finishes
    monkeypatch.setattr(smi_cli, "_PIPE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(sys, "stdin", os.fdopen(read_end, "r"))
    try:
        os.write(write_end, b"Driver Version")
        assert main(["smi", "parse", "-"]) == 2
    finally:
        os.close(write_end)
    assert "standard input did not end within 0.5 s" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["symlink-loop", "under-a-file"])
def test_plan_out_that_cannot_be_a_folder_is_exit_2(kind: str, tmp_path: Path, capsys) -> None:
    if kind == "symlink-loop":
        out = tmp_path / "loop"
        out.symlink_to(out.name)
    else:
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "plan"
    assert main(["plan", "--stack", "dev", "--out", str(out)]) == 2
    stderr = capsys.readouterr().err
    assert "cannot write the plan" in stderr and "internal error" not in stderr


def test_smi_health_of_one_over_long_line_says_so_not_that_the_file_is_empty(tmp_path: Path, capsys) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"x" * (300 << 10))
    assert main(["smi", "health", str(path)]) == 2
    stderr = " ".join(capsys.readouterr().err.split())
    assert "longer than 64 KiB" in stderr and "it is empty" not in stderr


@pytest.mark.parametrize("command", ["rules", "audit"])
def test_an_output_that_is_a_named_pipe_nobody_reads_is_refused_not_waited_on(command: str, tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    if command == "rules":
        argv = ["rules", "--stack", "prod", "--out", str(fifo)]
    else:
        snapshot = tmp_path / "snap"
        snapshot.mkdir()
        for name in ("nodes.json", "daemonsets.json", "pods.json"):
            (snapshot / name).write_text('{"items": []}', encoding="utf-8")
        argv = ["audit", "--snapshot", str(snapshot), "--html", str(fifo)]
    result = run_cli(*argv)  # before: blocked in open() for ever, waiting for a reader
    assert result.returncode == 2, result.stderr.decode()[-400:]
    assert "named pipe that nobody reads" in " ".join(result.stderr.decode().split())


def test_an_output_encoding_without_the_characters_is_not_an_internal_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    command = [sys.executable, "-m", "aks_gpu.cli", "catalog"]
    result = subprocess.run(command, cwd=PROJECT_DIR, env=env, capture_output=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr.decode()[-400:]
