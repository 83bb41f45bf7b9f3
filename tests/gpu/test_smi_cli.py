"""``aksgpu smi parse`` and ``aksgpu smi health``: the JSON they print and their exit codes, through ``register`` on a
parser of our own."""

from __future__ import annotations

import argparse
import io
import json
import os
import threading
from pathlib import Path

import pytest

from aks_gpu.cli import smi
from tests.conftest import HEALTH_FIXTURES_DIR, SMI_FIXTURES_DIR


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
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H100 PCIe",
                "uuid": None,
                "memory_total_mib": 81559,
                "mig_mode": "Disabled",
                "bus_id": "00000000:01:00.0",
            }
        ],
        "mig_devices": [],
        "error": None,
        "format": "nvidia-smi",
        "truncated": False,
        "kernel_driver": None,
        "processes": [],
        "nvlinks": [],
        "topology": [],
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


def test_a_directory_or_a_device_is_refused_not_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for source in (tmp_path, Path("/dev/zero")):
        assert run(["smi", "parse", str(source)]) == 2
        assert "not a regular file or a pipe" in capsys.readouterr().err


def test_a_pipe_is_read_like_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    # `aksgpu smi parse <(kubectl exec ... -- nvidia-smi)`: the shell hands over /dev/fd/N, the read end of a pipe
    # whose write end it already holds, and the command writes while we read. The same here: the write end is
    # open before the read starts, so an early read waits for the data instead of seeing end of file.
    read_end, write_end = os.pipe()
    text = (SMI_FIXTURES_DIR / "06_nvidia-smi_table_h100pcie_525.125.06.txt").read_bytes()

    def write() -> None:
        with os.fdopen(write_end, "wb") as writer:
            writer.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert run(["smi", "parse", f"/dev/fd/{read_end}"]) == 0
    finally:
        writer.join(timeout=10)
        os.close(read_end)
    assert json.loads(capsys.readouterr().out)["driver_version"] == "525.125.06"


def test_a_named_pipe_nobody_writes_to_is_empty_input_not_a_hang(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert run(["smi", "health", str(fifo)]) == 2
    assert "it is empty" in capsys.readouterr().err


# ---------------------------------------------------------------- smi health


def test_health_with_a_critical_finding_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    path = HEALTH_FIXTURES_DIR / "30_nvidia-smi-q_a10_535.129.03_row_remap_pending.txt"
    exit_code = run(["smi", "health", str(path)])
    data = json.loads(capsys.readouterr().out)
    assert exit_code == 1
    assert list(data) == ["findings", "checked", "not_checked", "incomplete"]
    assert [(f["id"], f["severity"], f["gpu"]) for f in data["findings"]] == [
        ("row-remap-pending", "critical", "00000000:07:00.0")
    ]
    assert list(data["findings"][0]) == ["id", "severity", "gpu", "message"]


def test_health_with_warnings_only_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    path = HEALTH_FIXTURES_DIR / "31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt"
    assert run(["smi", "health", str(path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {f["severity"] for f in data["findings"]} == {"warning"}
    assert "hw-slowdown" in data["checked"]


def test_health_reads_standard_input(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    data = (HEALTH_FIXTURES_DIR / "37_kernel_xid79_fallen_off_the_bus.txt").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert run(["smi", "health", "--vendor", "nvidia", "-"]) == 1
    assert [f["id"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["xid", "gpu-lost"]


def test_health_of_an_input_it_cannot_judge_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    exit_code = run(["smi", "health", str(fixture_path("30_nvidia-smi_L_8xh100_mig_7x1g.10gb.txt"))])
    captured = capsys.readouterr()
    assert exit_code == 2
    assert json.loads(captured.out) == {"findings": [], "checked": [], "not_checked": [], "incomplete": None}
    assert "shows no GPU health data" in captured.err and "nvidia-smi -q" in captured.err


def test_health_of_a_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(["smi", "health", str(tmp_path / "none.txt")]) == 2
    assert capsys.readouterr().out == ""
