"""Every real diagnostic output of tests/fixtures/diag is graded by `aksgpu smi diag` as its row in SOURCES.md says an
expert grades it (the table is the one expectation file: a fixture is added with its row), and no reader ever raises
or calls a cut-off failure healthy, whatever the text."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aks_gpu.catalog import load_catalog
from aks_gpu.gpu.diag.detect import TOOLS, grade_output
from aks_gpu.gpu.diag.expectations import bus_bandwidth_for
from tests.conftest import FIXTURES_DIR
from tests.gpu.test_smi_cli import run  # `aksgpu smi ...` in process

DIAG = FIXTURES_DIR / "diag"
_ROW = re.compile(r"^\| (\d[^ |]*) \|(.*)\|$", re.MULTILINE)
_GRADE = re.compile(r"(?:with `([^`]*)`: )?`((?:healthy|unhealthy|inconclusive)[^`]*)`")


@dataclass(frozen=True)
class Expected:
    file: str
    tool: str | None
    flags: tuple[str, ...]
    state: str
    part: str  # a substring of the grade's part ("" where only the state is said)

    @property
    def id(self) -> str:
        return f"{self.file[:40]}{' ' + ' '.join(self.flags) if self.flags else ''}"


def _expectations() -> list[Expected]:
    found = []
    for name, rest in _ROW.findall((DIAG / "SOURCES.md").read_text(encoding="utf-8")):
        cells = [cell.strip() for cell in rest.split(" | ")]
        tool, grades = cells[-2], cells[-1]
        for flags, grade in _GRADE.findall(grades):
            state, _, part = grade.partition(": ")
            found.append(Expected(name, None if tool == "-" else tool, tuple(shlex.split(flags)), state, part))
    return found


EXPECTED = _expectations()


def test_every_fixture_has_its_row_and_every_row_its_file() -> None:
    files = {path.name for path in DIAG.iterdir() if path.name != "SOURCES.md"}
    rows = {expected.file for expected in EXPECTED}
    assert files and files == rows, (sorted(files - rows), sorted(rows - files))
    # At least one grade each, and every family and state is held.
    assert {e.tool for e in EXPECTED} == {*TOOLS, None}
    assert {e.state for e in EXPECTED} == {"healthy", "unhealthy", "inconclusive"}


@pytest.mark.parametrize("expected", EXPECTED, ids=[e.id for e in EXPECTED])
def test_smi_diag_grades_each_real_output_as_an_expert(expected: Expected, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["smi", "diag", "--json", *expected.flags, str(DIAG / expected.file)])
    report = json.loads(capsys.readouterr().out)
    assert report["tool"] == expected.tool
    assert report["tool_detected"] is (expected.tool is not None)
    assert (report["state"], expected.part in report["part"]) == (expected.state, True), report
    assert code == (0 if expected.state == "healthy" else 1)
    if expected.state != "healthy":
        assert report["part"], "a grade that is not healthy says what failed or why"


def _grade(text: str, expected: Expected) -> str:
    """The state ``smi diag`` gives ``text`` with the expectation's flags (without the command line's file I/O)."""
    flags = dict(zip(expected.flags[::2], expected.flags[1::2], strict=True))
    size = flags.get("--vm-size")
    found = load_catalog().vm_size(size) if size else None
    gpus = found.gpu_count if found else None
    level = int(flags["--level"]) if "--level" in flags else None
    bandwidth = bus_bandwidth_for(size) if size else None
    return grade_output(text, expected.tool, level=level, expected_gpus=gpus, bandwidth=bandwidth)[1].state  # type: ignore[arg-type]


def _cuts(text: str) -> list[int]:
    """Every line end, and a cut inside lines every few characters (about 200 a fixture)."""
    ends = [match.end() for match in re.finditer("\n", text)]
    return sorted(set(ends + list(range(1, len(text), max(1, len(text) // 200)))))


FAILURES = [e for e in EXPECTED if e.state == "unhealthy"]


@pytest.mark.parametrize("expected", FAILURES, ids=[e.id for e in FAILURES])
def test_a_cut_off_failure_is_never_healthy(expected: Expected) -> None:
    text = (DIAG / expected.file).read_text(encoding="utf-8")
    healthy = [cut for cut in _cuts(text) if _grade(text[:cut], expected) == "healthy"]
    assert healthy == [], f"healthy when cut at {healthy[:3]}: {text[: healthy[0]][-200:]!r}" if healthy else ""


@pytest.mark.parametrize("path", sorted(p for p in DIAG.iterdir() if p.name != "SOURCES.md"), ids=lambda p: p.name[:40])
def test_no_reader_raises_on_any_cut_of_any_fixture(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    bandwidth = bus_bandwidth_for("Standard_ND96isr_H100_v5")
    for cut in _cuts(text)[::3]:
        for tool in TOOLS:  # every reader, through the one dispatch: a new tool is covered when it is added
            grade_output(text[:cut], tool, expected_gpus=8, bandwidth=bandwidth)


_PIECES = st.sampled_from(
    [
        "| Diagnostic                | Result                                         |\n",
        "|-----  Deployment  --------+------------------------------------------------|\n",
        "| GPU Memory                | Pass - GPUs: 1, 2                              |\n",
        "|                           | Fail - GPU: 0                                  |\n",
        "| Error                     | GPU 3 has uncorrectable memory errors and row  |\n",
        "|                           | GPU0: Fail                                     |\n",
        "+---------------------------+------------------------------------------------+\n",
        '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "x", "results": [',
        '{"gpu_id": "0", "status": "Fail"}]}]}]}}\n',
        "# nThread 1 nGpus 8\n",
        "#  Rank  0 Group  0 Pid 1 on host device  0 [0x00] NVIDIA H100\n",
        "   536870912     134217728     float     sum      -1   2157.5  248.83  435.46      0   2154.8  249.16  436.02      0\n",
        "       65536          8192   float    16.57    1.98    1.98  0e+00    13.83    2.37    2.37  0e+00\n",
        "# Out of bounds values : 0 OK\n",
        "Test NCCL failure common.cu:1005 'unhandled system error'\n",
        "cudaGetDeviceCount returned 802\n-> system not yet initialized\n",
        "Detected 8 CUDA Capable device(s)\n",
        "Result = PASS\n",
        "Verification error @ element 0: val = nan, ref = 0.000000\n",
        "[RESULT] [1.0] [action_1] [GPU:: 3] pass: FALSE\n",
        "| action_1                         | GST            | PASS            |\n",
        "RVS-ERROR [GST] [x] Action failed to run successfully.\n",
        "ROCk module is loaded\n",
        "Unable to open /dev/kfd read-write: Permission denied\n",
        "==========\nHSA Agents\n==========\n",
        "  Device Type:             GPU\n",
        "*** Done ***\n",
        "Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x0. Reason: Page not present\n",
        "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!\n",
        "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES\n",
        "          RocmBandwidthTest Version: 2.6.0\n          Device: 1,  AMD Radeon Graphics\n",
        "          Data Path Validation\n          D/D       0           1\n          1         FAIL        PASS\n",
        "device#                           0\nName:                             AMD Instinct MI300X\n",
        " Transfer 00      |  33.520 GB/s |    2.002 ms |\n Aggregate (CPU)  |  29.349 GB/s |\n",
    ]
)
_TEXT = st.one_of(st.text(max_size=400), st.lists(st.one_of(_PIECES, st.text(max_size=40)), max_size=20).map("".join))


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT)
def test_no_reader_raises_on_any_text(text: str) -> None:
    for tool in (None, *TOOLS):
        _, grade = grade_output(text, tool, level=2, expected_gpus=8, bandwidth=bus_bandwidth_for("Standard_ND96isr_H100_v5"))  # type: ignore[arg-type]
        assert grade.state in ("healthy", "unhealthy", "inconclusive")
        assert grade.state == "healthy" or grade.part


def test_an_output_no_reader_knows_is_never_healthy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    unknown = tmp_path / "hipinfo.txt"
    unknown.write_text("All tests passed.\nResult: OK\n", encoding="utf-8")
    assert run(["smi", "diag", "--json", str(unknown)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["tool"], report["state"]) == (None, "inconclusive")
    # Told which tool it is, the reader still finds no result in it.
    assert run(["smi", "diag", "--json", "--tool", "cuda", str(unknown)]) == 1
    assert json.loads(capsys.readouterr().out)["state"] == "inconclusive"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(["smi", "diag", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
    present = DIAG / "22_deviceQuery_8xh100_cuda12.4_pass.txt"
    assert run(["smi", "diag", "--vm-size", "Standard_Nope_v9", str(present)]) == 2
    assert "not a GPU VM size" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        run(["smi", "diag", "--tool", "hipinfo", str(present)])
    assert stopped.value.code == 2


def test_people_get_a_table_of_the_grade(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["smi", "diag", str(DIAG / "44_dcgmi-diag-r2_memory_fail_gpu0_thermal_violations_excerpt.txt")]) == 1
    shown = capsys.readouterr().out
    assert "unhealthy" in shown and "GPU Memory (GPU 0)" in shown and "Thermal violations" in shown
