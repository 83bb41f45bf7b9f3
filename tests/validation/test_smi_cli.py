"""``aksgpu smi parse``: the JSON it prints and its exit codes, through ``register`` on a parser of our own."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from components.cli import smi
from tests.conftest import SMI_FIXTURES_DIR


def fixture_path(name: str) -> Path:
    return SMI_FIXTURES_DIR / name


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aksgpu")
    smi.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    exit_code: int = args.handler(args)
    return exit_code


def test_parse_prints_the_report_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = run(["smi", "parse", str(fixture_path("06_nvidia-smi_table_h100pcie_525.125.06.txt"))])
    captured = capsys.readouterr()
    assert exit_code == 0
    assert json.loads(captured.out) == {
        "vendor": "nvidia",
        "driver_version": "525.125.06",
        "cuda_version": "12.0",
        "rocm_version": None,
        "gpus": [{"index": 0, "name": "NVIDIA H100 PCIe", "uuid": None, "memory_total_mib": 81559, "mig_mode": "Disabled"}],
        "mig_devices": [],
        "error": None,
    }
    assert captured.out.startswith('{\n  "vendor"')  # indented for people reading it
    assert captured.err == ""


def test_reported_error_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = run(["smi", "parse", str(fixture_path("63_error_nvml_mismatch_570.124.txt"))])
    report = json.loads(capsys.readouterr().out)
    assert exit_code == 1
    assert report["error"]["kind"] == "driver_library_mismatch"


def test_wrong_vendor_is_unrecognized_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    path = fixture_path("50_amd-smi_default_8xmi300x_rocm7.0.0.txt")
    exit_code = run(["smi", "parse", "--vendor", "nvidia", str(path)])
    assert exit_code == 1
    assert json.loads(capsys.readouterr().out)["error"]["kind"] == "unrecognized"


def test_reads_standard_input(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    data = fixture_path("50_amd-smi_default_8xmi300x_rocm7.0.0.txt").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    exit_code = run(["smi", "parse", "-"])
    report = json.loads(capsys.readouterr().out)
    assert exit_code == 0
    assert (report["vendor"], report["driver_version"], report["rocm_version"]) == ("amd", "6.12.12", "7.0.0")
    assert len(report["gpus"]) == 8


def test_a_stray_byte_does_not_stop_the_parse(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "smi.txt"
    source.write_bytes(b"\xff\xfe" + fixture_path("06_nvidia-smi_table_h100pcie_525.125.06.txt").read_bytes())
    assert run(["smi", "parse", str(source)]) == 0
    assert json.loads(capsys.readouterr().out)["driver_version"] == "525.125.06"


def test_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.txt"
    exit_code = run(["smi", "parse", str(missing)])
    captured = capsys.readouterr()
    assert exit_code == 2
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert str(missing) in captured.err


def test_unknown_vendor_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run(["smi", "parse", "--vendor", "intel", "-"])
    assert exit_info.value.code == 2
    assert "--vendor" in capsys.readouterr().err


def test_smi_without_a_subcommand_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        run(["smi"])
    assert exit_info.value.code == 2


def test_an_endless_input_is_refused_at_the_limit_not_held_in_memory(tmp_path, capsys, monkeypatch) -> None:
    from components.cli import main

    monkeypatch.setattr(smi, "MAX_INPUT_BYTES", 1 << 20)
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")
    assert main(["smi", "parse", str(link)]) == 2
    stderr = capsys.readouterr().err
    assert "zero.txt" in stderr and "over the 1 MiB limit" in stderr
