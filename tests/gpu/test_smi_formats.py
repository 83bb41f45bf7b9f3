"""``parse_smi`` on the wider family of outputs and on hostile input: cut outputs, garbage, huge numbers, traps that
once gave a confident wrong answer. Real fixtures where there are some (tests/fixtures/*/SOURCES.md)."""

from __future__ import annotations

import json

import pytest

from aks_gpu.gpu.smi import GpuProcess, NvLink, TopologyLink, parse_mig_profiles, parse_smi
from aks_gpu.gpu.smi.text import MAX_LINE_CHARS
from tests.conftest import HEALTH_FIXTURES_DIR, SMI_FIXTURES_DIR


def smi_fixture(name: str) -> str:
    return (SMI_FIXTURES_DIR / name).read_text(encoding="utf-8")


def health_fixture(name: str) -> str:
    return (HEALTH_FIXTURES_DIR / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------- cut short: truncated, never a shorter value


def test_a_table_cut_inside_the_driver_version_reports_no_driver() -> None:
    # 470.82.01 cut after "470.8": the exec timed out mid-banner. 470.8 must not come out as the driver.
    full = smi_fixture("05_nvidia-smi_table_a100_470.82.01_gpu-operator.txt")
    cut = full[: full.index("470.82.01") + len("470.8")]
    report = parse_smi(cut)
    assert report.vendor == "nvidia" and report.format == "nvidia-smi"
    assert report.truncated is True
    assert report.driver_version is None
    assert report.error is None


def test_a_table_cut_inside_a_gpu_record_keeps_the_whole_records() -> None:
    full = smi_fixture("02_nvidia-smi_table_8xh100_565.57.01.txt")
    lines = full.splitlines(keepends=True)
    fourth_gpu = next(n for n, line in enumerate(lines) if line.startswith("|   3  NVIDIA"))
    report = parse_smi("".join(lines[: fourth_gpu + 2]))  # two of the GPU's three rows
    assert report.truncated is True
    assert report.driver_version == "565.57.01"
    assert [gpu.index for gpu in report.gpus] == [0, 1, 2]


def test_a_whole_table_without_its_final_line_end_is_not_cut() -> None:
    # gpud's file ends without "\n" after the closing rule: a rule or a closed row is whole by itself.
    report = parse_smi(smi_fixture("07_nvidia-smi_table_550.90.07_gpud.txt"))
    assert report.truncated is False and len(report.gpus) == 8


def test_a_csv_cut_inside_its_last_field_drops_that_row() -> None:
    text = "index, name, driver_version\n0, NVIDIA A100 80GB PCIe, 470.82.01\n1, NVIDIA A100 80GB PCIe, 470.8"
    report = parse_smi(text)
    assert report.truncated is True
    assert [gpu.index for gpu in report.gpus] == [0]
    assert report.driver_version == "470.82.01"


def test_query_text_cut_mid_line_drops_the_cut_line() -> None:
    full = smi_fixture("20_nvidia-smi-q_titanv_560.35.03.txt")
    cut = full[: full.index("Driver Version") + len("Driver Version                            : 560.3")]
    report = parse_smi(cut)
    assert report.format == "nvidia-smi -q" and report.truncated is True
    assert report.driver_version is None


def test_xml_without_its_end_is_truncated_and_keeps_the_complete_gpus() -> None:
    full = smi_fixture("25_nvidia-smi-q-x_a100-sxm4_mig_535.54.03.xml.txt")
    report = parse_smi(full[: full.index("<fabric>")])  # cut inside the only <gpu>
    assert report.format == "nvidia-smi -q -x" and report.truncated is True
    assert report.driver_version == "535.54.03"
    assert report.gpus == ()  # the cut GPU is not read at all


def test_malformed_xml_inside_a_closed_document_is_unrecognized() -> None:
    full = smi_fixture("26_nvidia-smi-q-x_tesla-t4_515.105.01.xml.txt")
    broken = full.replace("<uuid>", "<uuid><nested>", 1)
    report = parse_smi(broken)
    assert report.error is not None and report.error.kind == "unrecognized"


def test_xml_with_a_doctype_after_the_root_start_is_refused() -> None:
    # An entity can only be declared before the root element; the parser never sees the prolog.
    text = '<nvidia_smi_log><!DOCTYPE x [<!ENTITY a "b">]><driver_version>&a;</driver_version></nvidia_smi_log>'
    report = parse_smi(text)
    assert report.error is not None and report.error.kind == "unrecognized"


def test_an_lgip_row_cut_in_its_sm_count_is_not_read() -> None:
    rows = smi_fixture("40_nvidia-smi_mig_lgip_4xh100_80gb.txt")
    first_row = next(line for line in rows.splitlines() if "MIG 1g.10gb " in line)
    assert parse_mig_profiles(first_row[: first_row.rindex("16") + 1]) == ()  # "... 1" of "16"


# ---------------------------------------------------------------- the confident wrong answers of issue #19


def test_a_kubectl_error_under_a_name_header_is_no_gpu() -> None:
    text = 'name\nError from server (NotFound): pods "nvidia-device-plugin-x" not found\n'
    report = parse_smi(text)
    assert report.gpus == ()
    assert report.error is not None and report.error.kind == "unrecognized"


def test_a_gpu_colon_zero_line_is_no_amd_gpu() -> None:
    for vendor in ("auto", "amd"):
        report = parse_smi("GPU: 0\nstatus: ok\n", vendor)  # type: ignore[arg-type]
        assert report.gpus == () and report.error is not None and report.error.kind == "unrecognized"


def test_a_garbage_banner_reports_no_driver() -> None:
    text = "| NVIDIA-SMI x   Driver Version: ../../etc/passwd   CUDA Version: $(id)  |\n"
    report = parse_smi(text)
    assert "passwd" not in json.dumps(report.to_dict()).replace(report.error.message if report.error else "", "")
    assert report.driver_version is None and report.cuda_version is None


def test_versions_must_have_the_shape_of_a_version() -> None:
    text = "index, name, driver_version\n0, NVIDIA A100, 550.54.15; rm -rf /\n"
    assert parse_smi(text).driver_version is None


def test_amd_smi_version_with_a_kernel_release_is_no_driver_version() -> None:
    # No published `amd-smi version` of an in-tree driver was found; rocm-smi prints the same case in fixtures
    # 54 and 55, and its README documents it. The line below follows amd-smi's format (fixture 53).
    text = (
        "AMDSMI Tool: 25.4.2+aca1101 | AMDSMI Library version: 25.4.0 | ROCm version: 6.4.1 | "
        "amdgpu version: 6.8.0-51-generic | amd_hsmp version: N/A\n"
    )
    report = parse_smi(text)
    assert report.driver_version is None
    assert report.kernel_driver == "6.8.0-51-generic"
    assert report.rocm_version == "6.4.1"


def test_amd_smi_version_cut_reads_the_fields_before_the_cut() -> None:
    full = smi_fixture("53_amd-smi_version_rocm7.2.3_amdgpu_6.16.13.txt").rstrip("\n")
    report = parse_smi(full[: full.index("6.16.13") + 4])  # "amdgpu version: 6.16"
    assert report.rocm_version == "7.2.3"
    assert report.driver_version is None and report.truncated is True


# ---------------------------------------------------------------- input that used to crash the run


@pytest.mark.parametrize(
    "text",
    [
        "index, name\n0, " + "x" * (200 * 1024) + "\n",  # over the csv module's 128 KiB field limit
        "index, memory.total [MiB]\n0, " + "9" * 400 + "\n",  # 400 digits
        "index, name\n" + "9" * 4400 + ", A100\n",  # past Python's 4,300-digit int limit
        "index, name\n\u00b2, NVIDIA A100\n",  # a superscript digit: isdigit() is True, int() refuses it
        '[{"gpu": 0, "asic": {"market_name": "MI300X"}, "vram": {"size": {"value": NaN, "unit": "MB"}}}]',
        '[{"gpu": 0, "asic": {"market_name": "MI300X"}, "vram": {"size": {"value": 1e999, "unit": "MB"}}}]',
        '[{"gpu": 0, "vram": {"size": {"value": ' + "9" * 400 + ', "unit": "MB"}}}]',
        "[" * 100_000 + "]" * 100_000,  # nested deeper than the recursion limit
        '{"gpu_data": ' + "[" * 50_000,
        "<nvidia_smi_log>" + "<a>" * 50_000 + "</nvidia_smi_log>",
        "| NVIDIA-SMI 1   Driver Version: 550.54.15   CUDA Version: 12.4 |\n|"
        + "9" * 20_000 + "MiB / " + "9" * 20_000 + "MiB |\n",
    ],
    ids=["csv-long-field", "400-digits", "4400-digit-index", "superscript", "nan", "1e999", "400-digit-json", "deep-json",
         "deep-json-cut", "deep-xml", "huge-memory-cell"],
)  # fmt: skip
def test_hostile_input_gives_a_report_not_an_exception(text: str) -> None:
    report = parse_smi(text)
    json.dumps(report.to_dict(), allow_nan=False)  # what `aksgpu smi parse` prints stays valid JSON
    for gpu in report.gpus:
        assert gpu.memory_total_mib is None or 0 <= gpu.memory_total_mib <= 1 << 40
        assert gpu.index is None or 0 <= gpu.index < 100_000


def test_a_20000_digit_memory_cell_and_20000_space_name_cell_parse_in_one_pass() -> None:
    # Once 41 s and 12 s: the regular expressions backtracked over the runs. Now the cells are split.
    digits = "9" * 20_000
    spaces = " " * 20_000
    text = (
        "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |\n"
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
        "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
        "|===============================+======================+======================|\n"
        f"|   0{spaces}Tesla T4{spaces}Off | 00000000:00:1E.0 Off |                    0 |\n"
        f"| N/A   36C    P0    38W / 300W |{digits}MiB / {digits}MiB |      0%      Default |\n"
        "+-------------------------------+----------------------+----------------------+\n"
    )
    report = parse_smi(text)
    assert report.driver_version == "550.54.15"
    assert [(gpu.index, gpu.name, gpu.memory_total_mib) for gpu in report.gpus] == [(0, "Tesla T4", None)]


def test_a_line_over_the_limit_is_named_in_the_message() -> None:
    report = parse_smi("x" * (MAX_LINE_CHARS + 1) + "\n")
    assert report.error is not None and "longer than 64 KiB" in report.error.message


def test_terminal_colours_and_crlf_do_not_change_the_reading() -> None:
    full = smi_fixture("20_nvidia-smi-q_titanv_560.35.03.txt")
    coloured = "\x1b[1m\x1b[32m" + full.replace("\n", "\r\n").replace("Product Name", "\x1b[0mProduct Name")
    assert parse_smi(coloured).gpus == parse_smi(full).gpus
    assert parse_smi(coloured).driver_version == "560.35.03"


# ---------------------------------------------------------------- the rest of the family


def test_query_text_reads_the_same_as_its_xml() -> None:
    # gpud's H100 -q (text) and the same fields as -q -x name them; the text reader walks indentation.
    report = parse_smi(health_fixture("31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt"))
    assert report.format == "nvidia-smi -q" and report.driver_version == "535.161.08" and report.cuda_version == "12.2"
    assert [(gpu.name, gpu.memory_total_mib, gpu.mig_mode) for gpu in report.gpus] == [
        ("NVIDIA H100 80GB HBM3", 81559, "Disabled")
    ] * 8
    assert report.gpus[0].bus_id == "00000000:19:00.0"
    assert report.gpus[0].uuid is not None and report.gpus[0].uuid.startswith("GPU-")


def test_compute_apps_are_processes_with_their_gpu() -> None:
    report = parse_smi(smi_fixture("14_query-compute-apps_csv_vgpu.txt"))
    assert report.processes == (
        GpuProcess("GPU-d0180485-9584-433c-6782-c335d5df2cb3", None, "vgpu", None),
        GpuProcess("GPU-777ead31-954e-837f-590f-6c4974d8e571", None, "vgpu", None),
        GpuProcess("GPU-777ead31-954e-837f-590f-6c4974d8e571", None, "vgpu", None),
    )


def test_compute_apps_with_no_process_is_an_answer() -> None:
    report = parse_smi("pid, process_name, used_gpu_memory [MiB]\n")
    assert report.format == "nvidia-smi --query-compute-apps" and report.processes == () and report.error is None


def test_compute_apps_with_memory_units() -> None:
    text = (
        "pid, process_name, gpu_uuid, used_gpu_memory [MiB]\n"
        "4242, python, GPU-63d1e50a-b952-d15c-0740-12bc14859142, 10436 MiB\n"
    )
    assert parse_smi(text).processes == (GpuProcess("GPU-63d1e50a-b952-d15c-0740-12bc14859142", 4242, "python", 10436),)


def test_csv_fields_in_any_order_with_unknown_fields_ignored() -> None:
    text = (
        "vgpu_driver_capability.heterogenous_multivGPU, pcie.link.width.current, uuid, clocks.sm [MHz], index, driver_version\n"
        "No, 16, GPU-63d1e50a-b952-d15c-0740-12bc14859142, 1980 MHz, 3, 565.57.01\n"
    )
    report = parse_smi(text)
    assert report.driver_version == "565.57.01"
    assert [(gpu.index, gpu.uuid) for gpu in report.gpus] == [(3, "GPU-63d1e50a-b952-d15c-0740-12bc14859142")]


def test_nvlink_status_lists_each_link() -> None:
    report = parse_smi(health_fixture("33_nvidia-smi-nvlink-s_v100_links_inactive.txt"))
    assert report.format == "nvidia-smi nvlink -s"
    assert [(gpu.index, gpu.name, gpu.uuid) for gpu in report.gpus] == [(3, "Tesla V100-SXM2-32GB", None)]  # UUID "..."
    assert [link for link in report.nvlinks if link.state == "inactive"] == [
        NvLink(3, 3, "inactive", None),
        NvLink(3, 5, "inactive", None),
    ]
    assert NvLink(3, 0, "active", 25.781) in report.nvlinks


def test_nvlink_status_of_eight_a100() -> None:
    report = parse_smi(health_fixture("04_nvidia-smi-nvlink-status_a100x8_healthy.txt"))
    assert len(report.gpus) == 8 and len(report.nvlinks) == 96
    assert {link.state for link in report.nvlinks} == {"active"} and {link.speed_gb_s for link in report.nvlinks} == {25.0}


def test_topology_reads_nvlink_counts_between_gpus() -> None:
    report = parse_smi(smi_fixture("36_nvidia-smi_topo-m_4xh100_nv6_nics.txt"))
    assert len(report.topology) == 12  # 4 GPUs x 3 peers
    assert {link.nvlinks for link in report.topology} == {6}
    assert TopologyLink(2, 0, "NV6", 6) in report.topology


def test_topology_with_tabs_and_pcie_only() -> None:
    report = parse_smi(smi_fixture("37_nvidia-smi_topo-m_2xrtx5090_phb_tabs.txt"))
    assert report.topology == (TopologyLink(0, 1, "PHB", None), TopologyLink(1, 0, "PHB", None))


def test_rocm_smi_several_sections_driver_anywhere_count_from_the_table() -> None:
    # `rocm-smi` (concise table, fixture 58) and `rocm-smi -a` (fixture 57) saved into one file: the driver
    # version comes from wherever its section stands, the GPU count from the table, not from the GPU[0] lines.
    concise = smi_fixture("58_rocm-smi_concise_mi355x_dpx_excerpt.txt")
    text = concise + "\n" + smi_fixture("57_rocm-smi_a_driver_5.6.19_excerpt.txt")
    report = parse_smi(text)
    assert report.driver_version == "5.6.19"
    assert [gpu.index for gpu in report.gpus] == list(range(8))


def test_rocm_smi_reads_vram_total_in_bytes() -> None:
    text = (
        "============================ ROCm System Management Interface ============================\n"
        "================================== Memory Usage (Bytes) ==================================\n"
        "GPU[0]\t\t: VRAM Total Memory (B): 206141652992\n"
        "GPU[0]\t\t: VRAM Total Used Memory (B): 297050112\n"
    )
    assert [(gpu.index, gpu.memory_total_mib) for gpu in parse_smi(text).gpus] == [(0, 196592)]


def test_the_newer_amd_smi_banner_without_a_version() -> None:
    report = parse_smi(smi_fixture("59_amd-smi_default_radeon860m_amdgpu_na.txt"))
    assert report.driver_version is None and report.kernel_driver is None and report.error is None
    assert report.gpus[0].bus_id == "0000:c5:00.0"
