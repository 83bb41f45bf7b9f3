"""AMD's diagnostics graded as an engineer would, on real published outputs (tests/fixtures/diag/SOURCES.md): the GPU
test runner's result summaries (its Events, as the AMD GPU Operator's docs print them), RVS's own output, and amd-smi's
RAS counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aks_gpu.gpu.diag.amd_smi import read_amd_smi_ras
from aks_gpu.gpu.diag.amd_test_runner import read_amd_rvs, read_test_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "grade"),
    [
        (
            "diag/32_test-runner_events_gst_single_rvs_fail.txt",
            "unhealthy: gpustress-41000-fp32-false (GPU 42924), gst-1215Tflops-4K4K8K-rand-fp8 (GPU 42924)",
        ),
        (
            "diag/33_test-runner_event_gst_single_rvs_fail.json.txt",
            "unhealthy: gpustress-41000-fp32-false (GPU 35824), gst-1215Tflops-4K4K8K-rand-fp8 (GPU 35824)",
        ),
        ("diag/34_test-runner_events_agfhc_2gpu_pass.txt", "healthy"),
        ("diag/35_test-runner_events_agfhc_hbm_bw_fail.txt", "unhealthy: hbm_bw (GPU 2)"),
        # RVS's own summary table, as the diagnostic pod's rvs prints it.
        ("diag/30_rvs_8xmi355x_rocm7.0.2_all_pass.txt", "healthy"),
        ("diag/31_rvs_2xmi210_rocm7.2.0_iet_gst_fail_excerpt.txt", "unhealthy: IET (action_5, GPU 20068, 48932), GST (action_6)"),
    ],
)
def test_the_test_runners_results_and_rvs_output_are_graded_by_their_actions(name: str, grade: str) -> None:
    graded = read_amd_rvs(text(name))
    assert str(graded) == grade and graded.tool == "rvs"


def test_rvs_output_is_not_taken_for_a_test_runner_result() -> None:
    assert read_test_runner(text("diag/30_rvs_8xmi355x_rocm7.0.2_all_pass.txt")) is None


# The summary of fixture 34 (two GPUs, every action a success) with one iteration or action changed: the test runner's
# other results, on the recorded shape.
PASSED = json.loads(text("diag/34_test-runner_events_agfhc_2gpu_pass.txt").split("   ")[-1])


def summary(**changes: object) -> str:
    iteration = {**PASSED[0], **changes}
    return json.dumps([iteration])


def test_a_timed_out_iteration_proves_nothing() -> None:
    graded = read_amd_rvs(summary(status="timed_out"))
    assert graded.state == "inconclusive" and "timed out: iteration 1" in graded.part
    hung = {"0": {**PASSED[0]["suitesResult"]["0"], "gfx_dgemm": "timedout"}}
    assert str(read_amd_rvs(summary(suitesResult=hung))) == "inconclusive: timed out: gfx_dgemm (GPU 0)"


def test_an_iteration_without_results_is_not_a_pass() -> None:
    # What the test runner reports when RVS did not run or its JSON could not be parsed: no suitesResult at all.
    graded = read_amd_rvs('[{"number":1,"status":"completed"}]')
    assert graded.state == "inconclusive" and "iteration 1 gave no result" in graded.part


def test_skipped_actions_are_inconclusive_and_a_failure_outranks_them() -> None:
    skipped = {"0": {**PASSED[0]["suitesResult"]["0"], "xgmi_a2a": "skipped"}}
    assert str(read_amd_rvs(summary(suitesResult=skipped))) == "inconclusive: not run: xgmi_a2a (GPU 0) skipped"
    both = {"0": {**skipped["0"], "hbm_bw": "failure"}}
    assert str(read_amd_rvs(summary(suitesResult=both))) == "unhealthy: hbm_bw (GPU 0)"


def test_amd_smi_counters_without_an_uncorrectable_error_are_healthy() -> None:
    # amd-smi metric -k on an MI300X: 2 correctable UMC errors, none uncorrectable.
    assert str(read_amd_smi_ras(text("health/09_amd-smi-metric-ecc_mi300x_umc_correctable.txt"))) == "healthy"


def test_an_uncorrectable_ras_error_fails_the_node() -> None:
    recorded = text("health/09_amd-smi-metric-ecc_mi300x_umc_correctable.txt")
    graded = read_amd_smi_ras(recorded.replace("UNCORRECTABLE_COUNT: 0", "UNCORRECTABLE_COUNT: 1"))
    assert graded.state == "unhealthy" and graded.part == "ras-uncorrectable"
    assert "uncorrectable RAS error" in graded.evidence[0]


def test_amd_smi_that_cannot_reach_the_driver_is_inconclusive() -> None:
    graded = read_amd_smi_ras(text("smi/70_error_amd-smi_no_amdgpu_wsl.txt"))
    assert graded.state == "inconclusive" and "driver not initialized" in graded.part
