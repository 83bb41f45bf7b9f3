"""tools/capture-gpu-diagnostics: the one prepared script a session lent a GPU machine runs to record real vendor
diagnostic outputs as fixtures (issue 43's Proof). Without a GPU here, what is tested is what the script promises on
any machine: a check the machine lacks is recorded as not run and never fails the capture, each check that runs has
its output in its own file and its exit status in PROVENANCE.txt, and at most 8 files come back (the device tool's
limit). Stand-ins for nvidia-smi and dcgmi stand for a machine that has them; the outputs they print are the corpus's
own real recordings."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR

CAPTURE = PROJECT_DIR / "tools" / "capture-gpu-diagnostics"
FIXTURES = PROJECT_DIR / "tests" / "fixtures"
NVIDIA_SMI_Q = FIXTURES / "health" / "31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt"
DEVICE_TOOL_FILE_LIMIT = 8


def stand_in(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/usr/bin/env bash\n" + script, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def capture(tmp_path: Path, bin_dir: Path | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    path = os.environ["PATH"] if bin_dir is None else f"{bin_dir}:{os.environ['PATH']}"
    run = subprocess.run(
        [str(CAPTURE), "run", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        timeout=120,
        check=False,
    )
    return run, out


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has an NVIDIA driver")
def test_a_machine_without_a_gpu_records_that_nothing_ran_and_succeeds(tmp_path: Path) -> None:
    run, out = capture(tmp_path)
    assert run.returncode == 0, run.stderr
    provenance = (out / "PROVENANCE.txt").read_text(encoding="utf-8")
    assert "not run: no nvidia-smi on this machine" in provenance
    assert [path.name for path in out.iterdir()] == ["PROVENANCE.txt"]


@pytest.mark.skipif(shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists(), reason="nvcc here")
def test_each_check_the_machine_has_is_captured_with_its_exit_status(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(
        bin_dir,
        "nvidia-smi",
        f"""case "$*" in
  *--query-gpu=index,name*) echo "index, name, pci.device_id, driver_version, vbios_version"
                            echo "0, NVIDIA H100 80GB HBM3, 0x233010DE, 580.159.04, 96.00.99.00.01" ;;
  *--query-gpu=index*) echo 0 ;;
  -q) cat {NVIDIA_SMI_Q} ;;
esac
""",
    )
    # dcgmi with no host engine to talk to: its own error is the capture, and its exit status is kept.
    stand_in(bin_dir, "dcgmi", 'echo "Error: unable to establish a connection to the specified host: localhost"\nexit 1\n')
    run, out = capture(tmp_path, bin_dir)
    assert run.returncode == 0, run.stderr
    provenance = (out / "PROVENANCE.txt").read_text(encoding="utf-8")
    assert "# gpu: 0, NVIDIA H100 80GB HBM3, 0x233010DE, 580.159.04" in provenance
    lines = {line.split()[0]: line for line in provenance.splitlines() if line and not line.startswith("#")}
    assert "exit 0" in lines["nvidia-smi-q"]
    assert (out / "nvidia-smi-q.txt").read_text(encoding="utf-8") == NVIDIA_SMI_Q.read_text(encoding="utf-8")
    # No compiler here: the CUDA samples and nccl-tests are recorded as not run, with why.
    assert "not run: no nvcc" in lines["deviceQuery"] and "not run: no nvcc" in lines["vectorAdd"]
    assert "not run" in lines["all_reduce_perf"]
    assert "exit 1" in lines["dcgmi-diag-r1-j"] and "exit 1" in lines["dcgmi-diag-r2"]
    assert "unable to establish a connection" in (out / "dcgmi-diag-r2.txt").read_text(encoding="utf-8")
    assert len(list(out.iterdir())) <= DEVICE_TOOL_FILE_LIMIT


def test_prepare_without_the_vendor_sources_says_what_to_fetch(tmp_path: Path) -> None:
    run = subprocess.run(
        [str(CAPTURE), "prepare"],
        capture_output=True,
        text=True,
        env={**os.environ, "AKS_GPU_MIRRORS": str(tmp_path)},
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert "fetch github:NVIDIA/cuda-samples" in run.stderr


def test_a_wrong_call_is_a_usage_error() -> None:
    run = subprocess.run([str(CAPTURE), "capture"], capture_output=True, text=True, timeout=30, check=False)
    assert run.returncode == 2 and "usage:" in run.stderr
