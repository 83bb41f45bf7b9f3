"""The diagnostic readers grade real recorded outputs (tests/fixtures/diag/SOURCES.md) as an engineer would: a failed
test is unhealthy, a test DCGM could not run or skipped is inconclusive (never healthy), a Warn warns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aks_gpu.gpu.diag import BusBandwidth, Grade, combine, read_all_reduce, read_cuda_context, read_dcgm_diag, read_rvs
from aks_gpu.gpu.diag.detect import grade_output
from aks_gpu.gpu.diag.expectations import bus_bandwidth_for, diagnostic_images

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DIAG = FIXTURES / "diag"


def text(name: str) -> str:
    folder = DIAG if (DIAG / name).exists() else FIXTURES / "health"
    return (folder / name).read_text(encoding="utf-8")


def test_a_dcgm3_failure_on_every_gpu_names_them_all() -> None:
    # NVIDIA/DCGM#49's "Fail - All" (the fixtures of tests/fixtures/diag are graded by test_diag_corpus.py).
    graded = read_dcgm_diag(text("19_dcgmi-diag-r2_a100_pcie_fail_nvlink_down_warnings.txt"), level=2)
    assert str(graded) == "unhealthy: PCIe (all GPUs)"


def test_a_failed_pcie_test_keeps_what_dcgm_said() -> None:
    graded = read_dcgm_diag(text("19_dcgmi-diag-r2_a100_pcie_fail_nvlink_down_warnings.txt"))
    assert any("NvLink link 0 is currently down" in line for line in graded.evidence), graded.evidence


def test_skipped_plugins_are_inconclusive_never_healthy() -> None:
    graded = read_dcgm_diag(text("03_dcgmi-diag-r3_1gpu_dcgm4.4.2_all_skipped.txt"), level=3)
    assert graded.state == "inconclusive"
    assert "memory skipped" in graded.part and "targeted_stress skipped" in graded.part


def test_a_test_dcgm_could_not_run_is_inconclusive_not_a_gpu_fault() -> None:
    graded = read_dcgm_diag(text("04_dcgmi-diag-r2_4xv100_dcgm4.4.1_pcie_internal_error_excerpt.txt"))
    assert graded.state == "inconclusive" and graded.part.startswith("pcie could not run")
    # The wrapped message is one text again, its words whole.
    assert "exited with non-zero status 1" in graded.part


def test_an_error_instead_of_a_table_is_inconclusive_with_the_error() -> None:
    graded = read_dcgm_diag(text("05_dcgmi-diag-r3_dcgm4_no_plugin_dir_error.txt"))
    assert graded.state == "inconclusive" and "Unable to complete diagnostic" in graded.part


def test_dcgm3_json_is_read_past_its_stray_line_and_null_entries() -> None:
    recorded = text("06_dcgmi-diag-j_8gpu_dcgm3.1.0_pass.json.txt")
    assert str(read_dcgm_diag(recorded, level=1)) == "healthy"
    # It tested nothing past Deployment: as a level-2 result that is no proof.
    assert read_dcgm_diag(recorded, level=2).state == "inconclusive"


def test_a_json_failure_names_the_test_and_gpu() -> None:
    # The DCGM 3 document of fixture 06 with GPU 3's software result turned to FAIL (the rule, on the recorded shape).
    recorded = text("06_dcgmi-diag-j_8gpu_dcgm3.1.0_pass.json.txt")
    marker = '"gpu_ids" : 3,\n\t\t\t\t\t\t\t\t"status" : "PASS"'
    assert marker in recorded
    graded = read_dcgm_diag(recorded.replace(marker, marker.replace("PASS", "FAIL")))
    assert str(graded) == "unhealthy: software (GPU 3)"


def test_a_warn_warns_and_a_persistence_mode_failure_does_not_fail_the_node() -> None:
    recorded = text("01_dcgmi-diag-r2_8xa100_dcgm3.3.3_pass.txt")
    warned = recorded.replace("| GPU Memory                | Pass - All", "| GPU Memory                | Warn - All")
    graded = read_dcgm_diag(warned)
    assert graded.state == "healthy" and graded.warnings and "GPU Memory" in graded.warnings[0]
    persistence = recorded.replace(
        "| Persistence Mode          | Pass                                           |",
        "| Persistence Mode          | Fail                                           |\n"
        "| Warning                   | Persistence mode for GPU 0 is disabled.        |",
    )
    graded = read_dcgm_diag(persistence)
    assert graded.state == "healthy" and "Persistence mode" in graded.warnings[0]


@pytest.mark.parametrize(
    "name",
    ["20_deviceQuery_cuda-sample_error802.txt", "13_cuda-bandwidthTest_error802_system_not_yet_initialized.txt"],
)
def test_cuda_error_802_is_the_fabric_manager(name: str) -> None:
    graded = read_cuda_context(text(name), expected_gpus=8)
    assert graded.state == "unhealthy" and "fabric manager" in graded.part


def test_a_passing_device_query_on_every_gpu_is_healthy() -> None:
    recorded = text("21_deviceQuery_8xb200_cuda12.8_pass_excerpt.txt")
    assert str(read_cuda_context(recorded, expected_gpus=8)) == "healthy"
    assert str(read_cuda_context(recorded, expected_gpus=16)) == "unhealthy: CUDA sees 8 of 16 GPUs"


def test_a_cuda_image_newer_than_the_driver_is_inconclusive() -> None:
    output = "cudaGetDeviceCount returned 35\n-> CUDA driver version is insufficient for CUDA runtime version\nResult = FAIL\n"
    assert read_cuda_context(output).state == "inconclusive"


def test_cuda_counts_the_gpus_it_can_use() -> None:
    output = "Detected 7 CUDA Capable device(s)\n\nResult = PASS\n"
    assert str(read_cuda_context(output, expected_gpus=8)) == "unhealthy: CUDA sees 7 of 8 GPUs"
    assert str(read_cuda_context(output.replace("7 CUDA", "8 CUDA"), expected_gpus=8)) == "healthy"
    assert read_cuda_context("No CUDA GPUs are available").state == "unhealthy"
    assert read_cuda_context("").state == "inconclusive"


H100 = bus_bandwidth_for("standard_nd96isr_h100_v5")


def test_the_h100_figure_is_azures_own_threshold() -> None:
    assert H100 is not None and H100.busbw_gbps == 460.0 and H100.message_bytes == 16 << 30
    assert "azurehpc-health-checks" in H100.source


def test_a_clean_short_nccl_run_is_healthy_but_its_bandwidth_ungraded() -> None:
    graded = read_all_reduce(text("10_all_reduce_perf_8xh100_256M-2G_nvls.txt"), H100)
    assert graded.state == "healthy" and "not graded" in graded.warnings[0]


def test_nccl_bandwidth_is_graded_at_the_figures_size() -> None:
    # Fixture 10 with its largest row relabelled 16 GiB (the figure's size): its 470.73 GB/s passes 460, and the same
    # row below it fails naming the figure.
    recorded = text("10_all_reduce_perf_8xh100_256M-2G_nvls.txt")
    row = "2147483648     536870912     float     sum      -1   7983.5  268.99  470.73      0   7985.2  268.93  470.63      0"
    assert row in recorded
    at_16g = recorded.replace(row, row.replace("2147483648     536870912", "17179869184    4294967296"))
    assert read_all_reduce(at_16g, H100).state == "healthy"
    slow = at_16g.replace("470.73", "401.20").replace("470.63", "400.90")
    graded = read_all_reduce(slow, H100)
    assert graded.state == "unhealthy" and "401.2 GB/s" in graded.part and "460" in graded.part


def test_wrong_results_are_unhealthy_whatever_the_bandwidth() -> None:
    recorded = text("10_all_reduce_perf_8xh100_256M-2G_nvls.txt")
    row = "536870912     134217728     float     sum      -1   2157.5  248.83  435.46      0   2154.8  249.16  436.02      0"
    graded = read_all_reduce(recorded.replace(row, row[:-1] + "3"), None)
    assert graded.state == "unhealthy" and "wrong" in graded.part


def test_an_aborted_nccl_run_is_inconclusive() -> None:
    output = "# nThread 1 nGpus 8\nTest NCCL failure common.cu:1005 'unhandled system error'\n"
    assert read_all_reduce(output, H100).state == "inconclusive"


def test_a_node_verdict_lets_a_fault_outrank_what_could_not_run() -> None:
    fault = Grade("cuda-context", "unhealthy", "CUDA sees 7 of 8 GPUs")
    skipped = Grade("dcgm-diag", "inconclusive", "pcie skipped")
    assert str(combine("node", [skipped, fault])) == "unhealthy: cuda-context: CUDA sees 7 of 8 GPUs"
    assert combine("node", [skipped, Grade("nccl-all-reduce", "healthy")]).state == "inconclusive"
    assert combine("node", []).state == "inconclusive"


def test_every_diagnostic_image_names_its_source() -> None:
    images = diagnostic_images()
    assert set(images) == {"dcgm", "cuda_context", "nccl", "amd_test_runner"}
    assert all(image.source and image.tag for image in images.values())
    # A digest, where one is recorded, is a whole sha256 (a cut one would make the kubelet refuse the pod), and the
    # reference the pod runs is the digest, not the movable tag.
    pinned = [image for image in images.values() if image.digest]
    assert pinned, "DCGM's image is pinned by the GPU Operator's own digest"
    for image in pinned:
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", image.digest), image.digest
        assert image.reference == f"{image.image}@{image.digest}"
    assert images["dcgm"].digest
    assert BusBandwidth("x", 1, 1.0, "s").busbw_gbps == 1.0


def test_the_cuda_context_image_runs_on_every_driver_aks_installs() -> None:
    # A CUDA 13 deviceQuery needs driver 580 or later, and AKS's A10 sizes run the GRID 570 branch: there every check
    # would end in CUDA error 35, inconclusive, and no GPU could pass. The tag must name its CUDA version (the bare
    # `devicequery` does not say which), and a CUDA 12 one (driver 525 or later).
    tag = diagnostic_images()["cuda_context"].tag
    version = re.fullmatch(r"devicequery-cuda(\d+)\.(\d+)\.(\d+)", tag)
    assert version, tag
    assert int(version[1]) == 12, tag


# The DCGM 4 document as its schema states it (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json @72fa3fe, DCGM 4.6.0):
# results per entity_group/entity_id, warnings as objects, a test_summary per test, runtime_error when nothing ran.
DCGM4_FAIL = """{"DCGM Diagnostic": {"test_categories": [
  {"category": "Deployment", "tests": [{"name": "software", "test_summary": {"status": "Pass"},
    "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Pass"}]}]},
  {"category": "Hardware", "tests": [{"name": "memory", "test_summary": {"status": "Fail"},
    "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Fail",
                 "warnings": [{"error_category": 4, "error_id": 40, "error_severity": 2,
                               "warning": "Found 3 memory mismatches on GPU 1"}]}]}]}]},
  "version": "4.6.0"}"""


def test_a_dcgm4_json_failure_names_the_test_gpu_and_message() -> None:
    graded = read_dcgm_diag(DCGM4_FAIL, level=2)
    assert str(graded) == "unhealthy: memory (GPU 1)"
    assert "Found 3 memory mismatches on GPU 1" in graded.evidence[0]


def test_a_dcgm4_runtime_error_is_inconclusive() -> None:
    document = '{"DCGM Diagnostic": {"runtime_error": "Unable to open the plugin directory", "version": "4.6.0"}}'
    graded = read_dcgm_diag(document)
    assert graded.state == "inconclusive" and "Unable to open the plugin directory" in graded.part


def test_not_run_counts_as_not_proven() -> None:
    recorded = text("02_dcgmi-diag-r2_1gpu_dcgm4.4.2_pass.txt")
    not_run = recorded.replace(
        "| memory                    | Pass                                           |",
        "| memory                    | Not Run                                        |",
    )
    assert read_dcgm_diag(not_run, level=2).state == "inconclusive"


def test_dcgm46_per_gpu_warning_rows_are_read() -> None:
    # DCGM 4.6 names a per-entity message row "Warning: GPU<n>" (NVIDIA/DCGM dcgmi/Diag.cpp @72fa3fe), on the table of
    # fixture 02 with GPU0's memory test failed.
    recorded = text("02_dcgmi-diag-r2_1gpu_dcgm4.4.2_pass.txt").replace(
        "| memory                    | Pass                                           |\n"
        "|                           | GPU0: Pass                                     |",
        "| memory                    | Fail                                           |\n"
        "|                           | GPU0: Fail                                     |\n"
        "| Warning: GPU0             | Found 3 memory mismatches on GPU 0             |",
    )
    graded = read_dcgm_diag(recorded, level=2)
    assert str(graded) == "unhealthy: memory (GPU 0)"
    assert "Found 3 memory mismatches" in graded.evidence[0]


def test_dcgm3s_test_named_diagnostic_is_read_not_taken_for_the_header() -> None:
    # DCGM 3 names its GEMM test "Diagnostic", the header's own word: on fixture 46's level 3 table, that test failed on
    # GPU 0 is the failure, not a header row to skip (fixture 108 holds a real "Diagnostic | Fail - All").
    recorded = text("46_dcgmi-diag-r3-v_1xv100-pcie_dcgm3.3.9_pass_eud_skip.txt")
    failed = recorded.replace(
        "| Diagnostic                | Pass - All                                     |",
        "| Diagnostic                | Fail - GPU: 0                                  |",
    )
    assert failed != recorded
    assert str(read_dcgm_diag(failed, level=3)) == "unhealthy: Diagnostic (GPU 0)"


def test_a_run_printed_twice_says_each_finding_once() -> None:
    # Fixture 115: two Slurm tasks printed the same table: each skipped test is named once.
    graded = read_dcgm_diag(text("115_dcgmi-diag-r3_2xrtxpro6000_dcgm3.3.9_srun_all_skipped_twice.txt"), level=3)
    assert graded.state == "inconclusive"
    assert graded.part.count("PCIe skipped") == 1 and graded.part.count("EUD") == 0


# Fixture 101, DCGM 4.5.2's -j document of a GB10 (memory and pcie Pass), its memory test's result changed.
GB10 = "101_dcgmi-diag-r2-j_gb10_dcgm4.5.2_pass_plugins_allowed.json.txt"


def _gb10_memory(group: str, status: str) -> str:
    recorded = text(GB10)
    start, end = recorded.index('"name" : "memory"'), recorded.index('"name" : "pcie"')
    memory = recorded[start:end].replace('"entity_group" : "GPU"', f'"entity_group" : "{group}"')
    return recorded[:start] + memory.replace('"status" : "Pass"', f'"status" : "{status}"') + recorded[end:]


def test_a_dcgm4_entity_is_named_by_its_group() -> None:
    # DCGM 4 also tests CPUs: a result of entity_group "CPU" names the CPU, not a GPU of the same id
    # (NVIDIA/DCGM dcgmlib/src/dcgm_fields.cpp @72fa3fe, DcgmFieldsGetEntityGroupString).
    assert str(read_dcgm_diag(_gb10_memory("CPU", "Fail"), level=2)) == "unhealthy: memory (CPU 0)"
    assert str(read_dcgm_diag(_gb10_memory("GPU", "Fail"), level=2)) == "unhealthy: memory (GPU 0)"


def test_the_json_document_is_found_between_lines_that_hold_braces() -> None:
    # kubectl's and a shell's lines around the document, with braces of their own, are not the document.
    recorded = text(GB10)
    wrapped = (
        'I0111 12:46:41.342844 26441 warnings.go:110] "Warning: {spec.template} is deprecated"\n'
        + recorded
        + "root@dcgm-diag:/# echo ${?}\n226\n"
    )
    assert str(read_dcgm_diag(wrapped, level=2)) == "healthy"


def test_a_cut_dcgm4_document_still_counts_the_failure_it_holds() -> None:
    # A -j document cut after a failed test: DCGM 4 nests each result in an object of its own, so the failure is
    # found inside them; what the cut left out is not read.
    failed = _gb10_memory("GPU", "Fail")
    cut = failed[: failed.index('"category" : "Integration"')]
    graded = read_dcgm_diag(cut, level=2)
    assert (graded.state, graded.part) == ("unhealthy", "memory")


def test_a_dcgm4_test_wide_message_is_read_from_its_summary() -> None:
    # DCGM 4 puts a message about the whole test in test_summary: a pcie test DCGM could not run (its internal error)
    # whose GPU result still says Pass is a test that did not run, not a GPU fault.
    recorded = text(GB10)
    start = recorded.index('"name" : "pcie"')
    summary = recorded.index('"status" : "Pass"', recorded.index('"test_summary"', start))
    broken = (
        recorded[:summary]
        + '"status" : "Fail", "warnings" : [{"warning" : "There was an internal error during the test"}]'
        + recorded[summary + len('"status" : "Pass"') :]
    )
    graded = read_dcgm_diag(broken, level=2)
    assert graded.state == "inconclusive" and "pcie could not run" in graded.part


def test_nccl_rows_of_every_release_are_read() -> None:
    # Fixture 10's largest row as nccl-tests writes it in other releases (src/util.cu @a0b82b2): before the root
    # column, with the count of wrong elements as %6g (1e+06), and with -c 0 (N/A).
    recorded = text("10_all_reduce_perf_8xh100_256M-2G_nvls.txt")
    row = "2147483648     536870912     float     sum      -1   7983.5  268.99  470.73      0   7985.2  268.93  470.63      0"
    no_root = recorded.replace(row, row.replace("     sum      -1", "     sum"))
    assert read_all_reduce(no_root, None).state == "healthy"
    assert read_all_reduce(recorded.replace(row, row[:-1] + "1e+06"), None).state == "unhealthy"
    unchecked = recorded.replace(row, row.replace("470.73      0", "470.73    N/A").replace("470.63      0", "470.63    N/A"))
    assert read_all_reduce(unchecked, None).state == "healthy"


def test_nccl_runs_own_bandwidth_check_failing_is_unhealthy() -> None:
    recorded = text("10_all_reduce_perf_8xh100_256M-2G_nvls.txt")
    failed = recorded.replace("# Avg bus bandwidth    : 448.212", "# Avg bus bandwidth    : 448.212 FAILED")
    assert read_all_reduce(failed, None).state == "unhealthy"
    assert read_all_reduce(recorded.replace("448.212", "448.212 OK"), None).state == "healthy"


def test_rvs_summary_tables_are_graded_per_action() -> None:
    assert str(read_rvs(text("30_rvs_8xmi355x_rocm7.0.2_all_pass.txt"))) == "healthy"
    graded = read_rvs(text("31_rvs_2xmi210_rocm7.2.0_iet_gst_fail_excerpt.txt"))
    assert str(graded) == "unhealthy: IET (action_5, GPU 20068, 48932), GST (action_6)"
    assert any("Action failed to run successfully" in line for line in graded.evidence)


def test_rvs_that_found_no_supported_gpu_is_inconclusive() -> None:
    # ROCm/ROCmValidationSuite#1263: `rvs -m gst` on a GPU its platform table lacks.
    output = "RVS-ERROR [CLI] No platform support for the detected GPU or no GPU detected !\n"
    graded = read_rvs(output)
    assert graded.state == "inconclusive" and "No platform support" in graded.part


def test_rvs_result_lines_alone_are_read() -> None:
    # The per-module verdict lines of fixture 31, without the summary table (releases before 1.3 print only these).
    lines = [line for line in text("31_rvs_2xmi210_rocm7.2.0_iet_gst_fail_excerpt.txt").splitlines() if "[RESULT]" in line]
    assert str(read_rvs("\n".join(lines))) == "unhealthy: action_5, GPU 20068, 48932"


# vectorAdd prints `Failed to <step> (error code <cudaGetErrorString>)!` (cuda-samples Samples/0_Introduction/vectorAdd),
# helper_cuda.h's checkCudaErrors `CUDA error at <file>:<line> code=<n>(<name>) "<call>"`.
@pytest.mark.parametrize(
    ("output", "grade"),
    [
        (
            "Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime version)!",
            "inconclusive: the diagnostic image's CUDA is newer than the node's driver (CUDA error 35)",
        ),
        (
            "Failed to allocate device vector A (error code system not yet initialized)!",
            "unhealthy: CUDA error 802 system not yet initialized: the NVSwitch fabric manager is not running",
        ),
        (
            'CUDA error at vectorAdd.cu:60 code=209(cudaErrorNoKernelImageForDevice) "cudaGetLastError()"',
            "inconclusive: the program was not built for this GPU's architecture (CUDA error 209, no kernel image)",
        ),
    ],
)
def test_a_cuda_sample_error_is_graded_by_what_it_says_of_the_node(output: str, grade: str) -> None:
    assert str(read_cuda_context(output + "\n")) == grade


def test_another_programs_failure_is_no_cuda_fault() -> None:
    # A container runtime's error is not a CUDA sample's `Failed to ... (error code ...)`: nothing was tested.
    output = "Error response from daemon: failed to create task for container: OCI runtime create failed\n"
    assert read_cuda_context(output).state == "inconclusive"


def test_an_nccl_run_over_part_of_the_gpus_proves_nothing_of_the_rest() -> None:
    # Fixture 63: four ranks on one 4-GPU host; the same output from an 8-GPU VM tested only half of it.
    output = text("63_all_reduce_perf_4xa100-sxm4_g4_128M_pass_rst_indent.txt")
    assert read_all_reduce(output, None, expected_gpus=4).state == "healthy"
    graded = read_all_reduce(output, None, expected_gpus=8)
    assert str(graded) == "inconclusive: the run used 4 of the 8 GPUs on gpu01: the others were not tested"


def test_dcgmi_without_a_host_engine_is_told_and_inconclusive() -> None:
    # dcgmi's line when no nv-hostengine listens (dcgm-exporter runs DCGM embedded, so none does there).
    tool, graded = grade_output("Error: unable to establish a connection to the specified host: localhost\n")
    assert (tool, graded.state) == ("dcgm", "inconclusive")
    assert "did not run" in graded.part and "localhost" in graded.part


def test_a_later_rvs_pass_on_the_same_gpu_hides_no_failure() -> None:
    # Fixture 31's IET verdict lines for GPU 48932, then the same GPU's line again as a pass (a second action iteration).
    lines = [line for line in text("31_rvs_2xmi210_rocm7.2.0_iet_gst_fail_excerpt.txt").splitlines() if "48932] pass:" in line]
    graded = read_rvs("\n".join([*lines, lines[0].replace("FALSE", "TRUE")]))
    assert str(graded) == "unhealthy: action_5, GPU 48932"


def test_an_excerpt_with_only_its_last_rank_line_counts_every_rank() -> None:
    # Fixture 157 keeps only `Rank 71`: 72 ranks ran, more than an 8-GPU VM has, so the hosts are several.
    output = text("157_all_reduce_perf_72xgb200_nvl72_rank71_excerpt_pass.txt")
    assert read_all_reduce(output, bus_bandwidth_for("Standard_ND96isr_H100_v5"), expected_gpus=8).state == "healthy"
    # The same excerpt ending at `Rank 3`: at most four ranks, so at most four of an 8-GPU host's GPUs took part.
    fewer = read_all_reduce(output.replace("Rank 71", "Rank  3"), None, expected_gpus=8)
    assert str(fewer) == "inconclusive: the run had 4 ranks for the 8 GPUs of a host: the others were not tested"
    # Only rank 0 shown is one rank.
    assert read_all_reduce(output.replace("Rank 71", "Rank  0")).part.startswith("one rank")


@pytest.mark.parametrize(
    ("message", "state"),
    [("unknown error", "unhealthy"), ("system not yet initialized", "unhealthy"), ("out of memory", "inconclusive")],
)
def test_nccl_and_the_cuda_samples_grade_a_cuda_error_alike(message: str, state: str) -> None:
    # One table of CUDA's errors: nccl-tests' `Test CUDA failure` and vectorAdd's `(error code ...)` say the same.
    nccl = read_all_reduce(f"host: Test CUDA failure common.cu:730 '{message}'\n")
    sample = read_cuda_context(f"Failed to allocate device vector A (error code {message})!\n")
    assert (nccl.state, nccl.part) == (sample.state, sample.part)
    assert nccl.state == state


def test_amd_smi_is_a_fifth_tool_and_only_its_ras_read_can_pass(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.gpu.test_smi_cli import run

    read = "258_amd-smi_metric_ecc_ecc-blocks_changelog_zero_elided.txt"
    assert run(["smi", "diag", "--json", "--tool", "amd-smi", str(DIAG / read)]) == 0
    assert json.loads(capsys.readouterr().out)["tool"] == "amd-smi"
    # An uncorrectable count in the same read fails the GPU.
    failing = text(read).replace("TOTAL_UNCORRECTABLE_COUNT: 0", "TOTAL_UNCORRECTABLE_COUNT: 3")
    tool, graded = grade_output(failing)
    assert (tool, graded.state) == ("amd-smi", "unhealthy")
    # `amd-smi list` is amd-smi's too, but reads no counter: inconclusive, however it is asked for.
    listing = DIAG / "260_amd-smi_list_e_mi325x_vf_snipped_not_ras.txt"
    for flags in ([], ["--tool", "amd-smi"]):
        assert run(["smi", "diag", "--json", *flags, str(listing)]) == 1
        report = json.loads(capsys.readouterr().out)
        assert (report["tool"], report["state"]) == ("amd-smi", "inconclusive")
        assert report["part"].startswith("not a RAS read")


def test_p2p_bandwidth_latency_test_is_graded_by_its_end_and_its_cuda_errors() -> None:
    # Fixture 212 ends at its last matrix (the closing note not kept): complete. Cut inside that matrix, it is not.
    output = text("212_p2pBandwidthLatencyTest_2xrtx6000ada_peer_access_no_closing_note.txt")
    assert read_cuda_context(output).state == "healthy"
    cut = output[: output.rindex("   CPU")]
    assert read_cuda_context(cut).part.startswith("p2pBandwidthLatencyTest ended before its last matrix")
    # Its cudaCheckError line (`Cuda failure <file>:<line>: '<message>'`) ends the run: graded by the message, and one
    # the CUDA table does not know is still the sample's failure.
    assert read_cuda_context(cut + "Cuda failure p2pBandwidthLatencyTest.cu:233: 'unknown error'\n").part.startswith(
        "CUDA error 999"
    )
    failed = read_cuda_context(cut + "Cuda failure p2pBandwidthLatencyTest.cu:233: 'peer mapping resources exhausted'\n")
    assert str(failed).startswith("unhealthy: the CUDA sample failed: Cuda failure")


def test_rocminfo_is_graded_by_its_gpu_agents_and_its_end() -> None:
    from aks_gpu.gpu.diag.rocm import read_rocm_runtime

    listing = text("306_rocminfo_2xrx7900gre_rocm6.2_pass_excerpt.txt")
    assert read_rocm_runtime(listing).state == "healthy"
    # Cut before `*** Done ***`, the agents that would follow are unknown: inconclusive, and not "2 of 8" either.
    cut = listing[: listing.index("*** Done ***")]
    assert str(read_rocm_runtime(cut, 8)) == "inconclusive: rocminfo ended before its last line (cut off)"
    # A rocminfo that ran to its end with only CPU agents: the runtime sees no GPU.
    cpu_only = listing[: listing.index("*******\nAgent 2")] + "*** Done ***\n"
    assert str(read_rocm_runtime(cpu_only)) == "unhealthy: rocminfo lists no GPU: the ROCm runtime sees none"


@pytest.mark.parametrize(
    ("output", "state", "part"),
    [
        # rocminfo's group check (rocminfo.cc @c6f7a17) after a refused /dev/kfd: the user's, not the GPU's.
        (
            'ROCk module is loaded\nrocm-user is not member of "render" group, the default DRM access group.\n',
            "inconclusive",
            "not in /dev/kfd's group",
        ),
        ("ROCk module is NOT live, possibly no GPU devices\n", "unhealthy", "kernel driver (ROCk) is not loaded"),
        ("error: 'hipErrorInvalidDevice'(101) at square.cpp:61\n", "inconclusive", "a GPU the pod was not given"),
        ("RuntimeError: HIP error: invalid device function\n", "inconclusive", "hipErrorInvalidDeviceFunction, 98"),
        ("RuntimeError: HIP error: an illegal memory access was encountered\n", "unhealthy", "hipErrorIllegalAddress, 700"),
        (
            "Encountered HIP error (no ROCm-capable device is detected) at line 2 in file TransferBench.cpp\n",
            "unhealthy",
            "HIP sees no GPU",
        ),
        ("hipMalloc failed: hipErrorUnknown\n", "unhealthy", "hipErrorUnknown, 999"),
        # hipInfo's checkHipErrors prints the number: read by it where the message is not in the table.
        (
            'checkHipErrors() HIP API error = 0035 "driver version is insufficient for runtime version" from file <x>, line 9.\n',
            "inconclusive",
            "newer than the node's driver (hipErrorInsufficientDriver, 35)",
        ),
        ("Call returned HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid.\n", "inconclusive", "ISA"),
        (
            "HSA Error Found!  In file: rocm_bandwidth_test.cpp;   At line: 560\nError: HSA_STATUS_ERROR_EXCEPTION\n",
            "unhealthy",
            "HSA_STATUS_ERROR_EXCEPTION",
        ),
    ],
)
def test_the_rocm_runtime_errors_no_recorded_output_shows(output: str, state: str, part: str) -> None:
    from aks_gpu.gpu.diag.rocm import read_rocm_runtime

    tool, graded = grade_output(output)
    assert tool == "rocm"
    assert graded.state == state and part in graded.part, graded
    assert read_rocm_runtime(output) == graded


def test_a_rocm_fault_outranks_a_check_that_could_not_run() -> None:
    from aks_gpu.gpu.diag.rocm import read_rocm_runtime

    refused = text("303_rocminfo_docker_rocm-terminal_4xmi100_kfd_permission_denied.txt")
    fault = "Memory access fault by GPU node-2 (Agent handle: 0x1) on address 0x0. Reason: Page not present.\n"
    assert read_rocm_runtime(refused).state == "inconclusive"
    graded = read_rocm_runtime(refused + fault)
    assert graded.state == "unhealthy" and graded.part == "a GPU memory access fault on GPU node-2"


def test_hipinfo_and_transferbench_are_graded_by_their_ends() -> None:
    from aks_gpu.gpu.diag.rocm import read_rocm_runtime

    hipinfo = text("315_hipinfo_1xrx7900xtx_hip6.2_windows_flattened_pass.txt")
    # A status HIP's log prints in normal work is no error.
    logged = hipinfo + "\n:3:hip_stream.cpp :400 : 123 us: [pid:1 tid:0x1] hipStreamQuery: Returned hipErrorNotReady :\n"
    assert read_rocm_runtime(logged).state == "healthy"
    cut = hipinfo[: hipinfo.index("memInfo.free")]
    assert str(read_rocm_runtime(cut)) == "inconclusive: hipInfo ended before its last line (cut off)"
    transfers = text("314_transferbench_show_iterations_pass.txt")
    assert read_rocm_runtime(transfers[: transfers.index(" Aggregate")]).state == "inconclusive"
    assert read_rocm_runtime(transfers, 8).warnings == (
        "GPU count not checked: TransferBench's output does not say how many GPUs the runtime sees",
    )
    # The p2p preset ends each direction with its averages: cut before the last, it has not ended; its header counts
    # the GPUs.
    p2p = text("322_transferbench_p2p_8xmi350x_rocm7.0_pass.txt")
    assert (
        str(read_rocm_runtime(p2p[: p2p.rindex("Averages")]))
        == "inconclusive: TransferBench ended before its last line (cut off)"
    )
    assert str(read_rocm_runtime(p2p, 16)) == "unhealthy: ROCm sees 8 of 16 GPUs (TransferBench)"


def test_rocm_smi_driver_error_alone_stays_the_ras_readers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # rocm-smi's own driver error is amd-smi's output (its RAS read could not run: inconclusive, as amd_smi grades it);
    # asked as a runtime check (--tool rocm) the same line says the driver is not loaded: unhealthy.
    from tests.gpu.test_smi_cli import run

    saved = tmp_path / "rocm-smi.txt"
    saved.write_text("ERROR:root:Driver not initialized (amdgpu not found in modules)\n", encoding="utf-8")
    assert run(["smi", "diag", "--json", str(saved)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["tool"], report["state"]) == ("amd-smi", "inconclusive")
    assert run(["smi", "diag", "--json", "--tool", "rocm", str(saved)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["tool"], report["state"]) == ("rocm", "unhealthy")
    assert "driver (ROCk) is not loaded" in report["part"]


def test_a_passing_rocm_bandwidth_test_notes_what_it_did_not_prove() -> None:
    from aks_gpu.gpu.diag.rocm import read_rocm_runtime

    graded = read_rocm_runtime(text("308_rocm-bandwidth-test_2xmi50_rocm5.7.1_no_p2p_pass.txt"))
    assert graded.state == "healthy"
    assert graded.warnings == (
        "GPUs 1 and 2 have no peer access: their copies go through the host",
        "the copies' data were not checked (rocm-bandwidth-test checks them only with -v)",
    )


@pytest.mark.parametrize(
    ("cuda_message", "state"),
    [
        # The plugin's own CUDA needs a newer driver, or was not built for this GPU: it tested nothing.
        ("CUDA driver version is insufficient for CUDA runtime version", "inconclusive"),
        ("no kernel image is available for execution on the device", "inconclusive"),
        # The node's own CUDA faults stay failures of the GPUs.
        ("system not yet initialized", "unhealthy"),
        ("unknown error", "unhealthy"),
        ("CUDA-capable device(s) is/are busy or unavailable", "unhealthy"),
    ],
)
def test_a_dcgm_failure_is_graded_by_the_cuda_error_it_names(cuda_message: str, state: str) -> None:
    # NVIDIA/nccl-tests#264's level 3 run: GPU Memory "Fail - All" with cuInit's 'system not yet initialized' on every
    # GPU, the message swapped for other CUDA errors DCGM's plugins print the same way. The CUDA reader's one table
    # decides whose fault each is, as it does for deviceQuery and nccl-tests.
    run = text("07_dcgmi-diag-r3_8xh100_dcgm3.3.8_memory_fail_all_cuinit_802.txt")
    graded = read_dcgm_diag(run.replace("system not yet initialized", cuda_message), level=3)
    assert graded.state == state, str(graded)
    if state == "inconclusive":
        assert "GPU Memory could not run" in graded.part
