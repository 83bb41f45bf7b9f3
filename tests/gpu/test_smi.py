"""``aks_gpu.gpu.smi``: the real outputs in tests/fixtures/smi, then the edge cases around them."""

from __future__ import annotations

import json
from collections import Counter
from typing import Literal

import pytest

from aks_gpu.gpu.smi import (
    NVIDIA_CSV_QUERY_FIELDS,
    GpuInfo,
    MigDevice,
    MigProfile,
    SmiError,
    SmiReport,
    parse_mig_profiles,
    parse_smi,
    smi_command,
)
from tests.conftest import SMI_FIXTURES_DIR


def fixture_text(name: str) -> str:
    return (SMI_FIXTURES_DIR / name).read_text(encoding="utf-8")


def summary(report: SmiReport) -> dict[str, object]:
    """What a reader of the report sees, compact enough to write out per fixture."""
    return {
        "vendor": report.vendor,
        "driver": report.driver_version,
        "cuda": report.cuda_version,
        "rocm": report.rocm_version,
        "gpus": [(gpu.index, gpu.name, gpu.memory_total_mib, gpu.mig_mode) for gpu in report.gpus],
        "mig": dict(Counter((device.gpu_index, device.profile) for device in report.mig_devices)),
        "error": None if report.error is None else report.error.kind,
        "kernel": report.kernel_driver,
        "truncated": report.truncated,
    }


def expected(
    vendor: str | None,
    driver: str | None = None,
    cuda: str | None = None,
    rocm: str | None = None,
    gpus: list[tuple[int | None, str | None, int | None, str | None]] | None = None,
    mig: dict[tuple[int | None, str | None], int] | None = None,
    error: str | None = None,
    kernel: str | None = None,
    truncated: bool = False,
) -> dict[str, object]:
    return {
        "vendor": vendor,
        "driver": driver,
        "cuda": cuda,
        "rocm": rocm,
        "gpus": gpus or [],
        "mig": mig or {},
        "error": error,
        "kernel": kernel,
        "truncated": truncated,
    }


# What SOURCES.md says each fixture shows.
FIXTURES = {
    "02_nvidia-smi_table_8xh100_565.57.01.txt": expected(
        "nvidia", "565.57.01", "12.7", gpus=[(i, "NVIDIA H100 80GB HBM3", 81559, "Disabled") for i in range(8)]
    ),
    "04_nvidia-smi_table_4xa100_555.42.02.txt": expected(
        "nvidia", "555.42.02", "12.5", gpus=[(i, "NVIDIA A100-SXM4-80GB", 81920, "Disabled") for i in range(4)]
    ),
    # CUDA "N/A" inside the mig-manager container; the name is cut by nvidia-smi itself.
    "05_nvidia-smi_table_a100_470.82.01_gpu-operator.txt": expected(
        "nvidia", "470.82.01", None, gpus=[(0, "NVIDIA A100-PCI...", 40536, "Disabled")]
    ),
    "06_nvidia-smi_table_h100pcie_525.125.06.txt": expected(
        "nvidia", "525.125.06", "12.0", gpus=[(0, "NVIDIA H100 PCIe", 81559, "Disabled")]
    ),
    "07_nvidia-smi_table_550.90.07_gpud.txt": expected(
        "nvidia", "550.90.07", "12.4", gpus=[(i, "NVIDIA H100 80GB HBM3", 81559, "Disabled") for i in range(8)]
    ),
    # Windows (WDDM), timestamp first: the same GPU as fixture 10 read from another field order.
    "13_query-gpu_csv_win10_466.63_timestamp_first.txt": expected(
        "nvidia", "466.63", gpus=[(0, "NVIDIA GeForce RTX 2080 SUPER", 8192, None)]
    ),
    # Processes, not GPUs: the GPUs they run on are in `processes`.
    "14_query-compute-apps_csv_vgpu.txt": expected("nvidia"),
    "20_nvidia-smi-q_titanv_560.35.03.txt": expected("nvidia", "560.35.03", "12.6", gpus=[(0, "NVIDIA TITAN V", 12288, None)]),
    # gpud renamed some keys to make it invalid: what is left is read, nothing is guessed for the rest. It holds 1 of
    # the 8 GPUs "Attached GPUs" names: cut short.
    "21_nvidia-smi-q_h100_535.183.01_keys_renamed.txt": expected(
        "nvidia", "535.183.01", "12.2", gpus=[(0, "NVIDIA H100 80GB HBM3", None, "Disabled")], truncated=True
    ),
    # telegraf kept one of the four GPUs; -q -x lists MIG devices without their profile.
    "25_nvidia-smi-q-x_a100-sxm4_mig_535.54.03.xml.txt": expected(
        "nvidia", "535.54.03", "12.2", gpus=[(0, "NVIDIA A100-SXM4-80GB", 81920, "Enabled")], mig={(0, None): 4}
    ),
    "26_nvidia-smi-q-x_tesla-t4_515.105.01.xml.txt": expected(
        "nvidia", "515.105.01", "11.7", gpus=[(0, "Tesla T4", 15360, None)]
    ),
    "27_nvidia-smi-q-x_a10g_515.105.01.xml.txt": expected("nvidia", "515.105.01", "11.7", gpus=[(0, "NVIDIA A10G", 23028, None)]),
    "28_nvidia-smi-q-x_rtx3080_v13_595.58.03.xml.txt": expected(
        "nvidia", "595.58.03", "13.2", gpus=[(0, "NVIDIA GeForce RTX 3080", 10240, None)]
    ),
    "36_nvidia-smi_topo-m_4xh100_nv6_nics.txt": expected("nvidia", gpus=[(i, None, None, None) for i in range(4)]),
    "37_nvidia-smi_topo-m_2xrtx5090_phb_tabs.txt": expected("nvidia", gpus=[(0, None, None, None), (1, None, None, None)]),
    # mig.mode.current is "[N/A]" on a consumer GPU: unknown, not "Disabled".
    "10_query-gpu_csv_rtx2080super_465.27.txt": expected(
        "nvidia", "465.27", gpus=[(0, "NVIDIA GeForce RTX 2080 SUPER", 7979, None)]
    ),
    "12_query-gpu_csv_h100pcie_mig_enabled.txt": expected("nvidia", gpus=[(None, None, None, "Enabled")]),
    "30_nvidia-smi_L_8xh100_mig_7x1g.10gb.txt": expected(
        "nvidia",
        gpus=[(i, "NVIDIA H100 80GB HBM3", None, "Enabled") for i in range(8)],
        mig={(i, "1g.10gb"): 7 for i in range(8)},
    ),
    "32_nvidia-smi_L_rtx2080super_no_mig.txt": expected("nvidia", gpus=[(0, "NVIDIA GeForce RTX 2080 SUPER", None, None)]),
    "33_nvidia-smi_L_h100pcie_mig_mixed_profiles.txt": expected(
        "nvidia", gpus=[(0, "NVIDIA H100 PCIe", None, "Enabled")], mig={(0, "3g.40gb"): 1, (0, "1g.10gb"): 3}
    ),
    "40_nvidia-smi_mig_lgip_4xh100_80gb.txt": expected("nvidia", gpus=[(i, None, None, "Enabled") for i in range(4)]),
    "41_nvidia-smi_mig_lgip_a100_40gb_460.txt": expected("nvidia", gpus=[(0, None, None, "Enabled")]),
    # MIG is off on every GPU: an answer, not a driver failure.
    "42_nvidia-smi_mig_lgip_no_mig_enabled.txt": expected("nvidia"),
    "50_amd-smi_default_8xmi300x_rocm7.0.0.txt": expected(
        "amd", "6.12.12", rocm="7.0.0", gpus=[(i, "AMD Instinct MI300X", 196592, None) for i in range(8)]
    ),
    "51_amd-smi_static_mi300a_docs.txt": expected("amd", "6.10.10", gpus=[(0, "AMD Instinct MI300A", 96434, None)]),
    "52_amd-smi_list_2gpu_changelog.txt": expected("amd", gpus=[(0, None, None, None), (1, None, None, None)]),
    # The kernel release: the in-tree amdgpu driver has no version of its own, so no driver version is reported.
    "54_rocm-smi_showdriverversion_radeon680m.txt": expected("amd", kernel="6.14.0-28-generic"),
    "55_rocm-smi_showdriverversion_csv_kernel_el8.txt": expected("amd", kernel="4.18.0-348.12.2.el8_5.x86_64"),
    "53_amd-smi_version_rocm7.2.3_amdgpu_6.16.13.txt": expected("amd", "6.16.13", rocm="7.2.3"),
    # An excerpt that ends after the clock section: no "End of ROCm SMI Log", so it reads as cut short.
    "57_rocm-smi_a_driver_5.6.19_excerpt.txt": expected("amd", "5.6.19", gpus=[(0, None, None, None)], truncated=True),
    # Partitioned MI355X (DPX): rocm-smi lists each partition as a device, the table's rows are what it counts.
    "58_rocm-smi_concise_mi355x_dpx_excerpt.txt": expected("amd", gpus=[(i, None, None, None) for i in range(8)]),
    # The later banner, one row per item; "amdgpu Version: N/A" is no version; amd-smi cut the name itself.
    "59_amd-smi_default_radeon860m_amdgpu_na.txt": expected("amd", gpus=[(0, "...adeon 860M Graphics", 27017, None)]),
    # The published excerpt stops before VRAM.
    "56_amd-smi_static_mi350x_excerpt.txt": expected("amd", "6.18.3", gpus=[(0, "AMD Instinct MI350X", None, None)]),
    "60_error_nvidia-smi_failed_gpu-operator_driver_pod.txt": expected("nvidia", error="driver_not_loaded"),
    "61_error_nvidia-smi_failed_after_kernel_upgrade.txt": expected("nvidia", error="driver_not_loaded"),
    # 570.124 is the NVML library's version, not the loaded driver's: the driver stays unknown.
    "63_error_nvml_mismatch_570.124.txt": expected("nvidia", error="driver_library_mismatch"),
    # The pasted /proc/driver/nvidia/version names the kernel module that is loaded.
    "64_error_nvml_mismatch_with_proc_version.txt": expected("nvidia", "520.56.06", error="driver_library_mismatch"),
    "70_error_amd-smi_no_amdgpu_wsl.txt": expected("amd", error="driver_not_loaded"),
    # topo -m of an NC80adis_H100_v5 whose two GPUs lost their NVLink (SYS between them, Azure/azhpc-images#443).
    "38_nvidia-smi_topo-m_nc80adis_h100_no_nvlink.txt": expected("nvidia", gpus=[(0, None, None, None), (1, None, None, None)]),
    # A container that lost its device nodes: NVML's own error, with a kind, not "unrecognized".
    "65_error_nvml_unknown_error_after_daemon_reload.txt": expected("nvidia", error="nvml_init_failed"),
    # rocm-smi --json: one object per card, the name from "Card Series", VRAM in bytes.
    "66_rocm-smi_json_rx7900xt_productname_meminfo.txt": expected("amd", gpus=[(0, "Radeon RX 7900 XT", 20464, None)]),
    "67_rocm-smi_json_mi250x_productname.txt": expected(
        "amd", gpus=[(0, "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2", None, None)]
    ),
    # rocm-smi --csv of the same card: a "device," header and a "card0," row.
    "68_rocm-smi_csv_rx7900xt_productname_meminfo.txt": expected("amd", gpus=[(0, "Radeon RX 7900 XT", 20464, None)]),
    # A GPU that stopped answering: rocm-smi's errors around its concise row, which still counts it.
    "69_rocm-smi_concise_errors_unresponsive_gpu.txt": expected("amd", gpus=[(0, None, None, None)]),
    # ROCm 3.3's concise header began with "GPU" (not "Device"); its one row is GPU 1.
    "71_rocm-smi_concise_vega10_rocm3.3.txt": expected("amd", gpus=[(1, None, None, None)]),
    "72_rocm-smi_csv_rx6800_raphael_two_cards.txt": expected(
        "amd", gpus=[(0, "Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]", 16368, None), (1, "Raphael", 64, None)]
    ),
    # R570 on an H20-3e; the excerpt stops inside GPU 1's record: the whole record is read, and it says cut.
    "73_nvidia-smi_table_h20-3e_570.124.06_excerpt.txt": expected(
        "nvidia", "570.124.06", "12.8", gpus=[(0, "NVIDIA H20-3e", 143771, "Disabled")], truncated=True
    ),
    # The excerpt stops before GPU 0's closing rule: cut, and no record read whole.
    "74_nvidia-smi_table_v100s_450.51.05_excerpt.txt": expected("nvidia", "450.51.05", "11.0", truncated=True),
    # A field NVML could not read prints "[Unknown Error]": no value; the command line before the CSV is no row.
    "75_query-gpu_csv_unknown_error_field_rtx2080ti_442.19.txt": expected(
        "nvidia", gpus=[(None, "GeForce RTX 2080 Ti", None, None)]
    ),
    # Eight B200 on NVLink 5 (NV18 between each pair); the excerpt has the first four rows.
    "76_nvidia-smi_topo-m_8xb200_nv18_excerpt.txt": expected("nvidia", gpus=[(i, None, None, None) for i in range(4)]),
    "77_amd-smi_metric_usage_power_radeon_excerpt.txt": expected("amd", gpus=[(0, None, None, None)]),
    "78_nvidia-smi_topo-m_b300_nv18_excerpt.txt": expected("nvidia", gpus=[(0, None, None, None)]),
    # Sixteen NIC columns (NIC10 to NIC15 are wider words than the header spacing suggests).
    "79_nvidia-smi_topo-m_8xb200_16_nics_excerpt.txt": expected("nvidia", gpus=[(0, None, None, None), (1, None, None, None)]),
}


# The format each fixture is recognised as (the report's `format`).
FORMATS = {
    "02": "nvidia-smi", "04": "nvidia-smi", "05": "nvidia-smi", "06": "nvidia-smi", "07": "nvidia-smi",
    "10": "nvidia-smi --query-gpu", "12": "nvidia-smi --query-gpu", "13": "nvidia-smi --query-gpu",
    "14": "nvidia-smi --query-compute-apps", "20": "nvidia-smi -q", "21": "nvidia-smi -q",
    "25": "nvidia-smi -q -x", "26": "nvidia-smi -q -x", "27": "nvidia-smi -q -x", "28": "nvidia-smi -q -x",
    "30": "nvidia-smi -L", "32": "nvidia-smi -L", "33": "nvidia-smi -L",
    "36": "nvidia-smi topo -m", "37": "nvidia-smi topo -m",
    "40": "nvidia-smi mig -lgip", "41": "nvidia-smi mig -lgip", "42": "nvidia-smi mig -lgip",
    "50": "amd-smi", "59": "amd-smi", "51": "amd-smi static/list", "52": "amd-smi static/list", "56": "amd-smi static/list",
    "53": "amd-smi version", "54": "rocm-smi", "55": "rocm-smi", "57": "rocm-smi", "58": "rocm-smi",
    "60": None, "61": None, "63": None, "64": None, "70": None,
    "38": "nvidia-smi topo -m", "65": None, "66": "rocm-smi --json", "67": "rocm-smi --json", "68": "rocm-smi", "69": "rocm-smi",
    "71": "rocm-smi", "72": "rocm-smi", "73": "nvidia-smi", "74": "nvidia-smi", "75": "nvidia-smi --query-gpu",
    "76": "nvidia-smi topo -m", "77": "amd-smi static/list", "78": "nvidia-smi topo -m", "79": "nvidia-smi topo -m",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FIXTURES), ids=lambda name: name.split("_")[0])
def test_fixture_format(name: str) -> None:
    assert parse_smi(fixture_text(name)).format == FORMATS[name.split("_")[0]]


def test_every_fixture_has_expectations() -> None:
    on_disk = {path.name for path in SMI_FIXTURES_DIR.glob("*.txt")}
    assert on_disk == set(FIXTURES), "a fixture was added or removed: write down what it shows"


@pytest.mark.parametrize("name", sorted(FIXTURES), ids=lambda name: name.split("_")[0])
def test_fixture(name: str) -> None:
    assert summary(parse_smi(fixture_text(name))) == FIXTURES[name]


def vendor_of(name: str) -> Literal["nvidia", "amd"]:
    vendor = FIXTURES[name]["vendor"]
    assert vendor in ("nvidia", "amd"), f"every fixture comes from one vendor's tool, not {vendor!r}"
    return "nvidia" if vendor == "nvidia" else "amd"


@pytest.mark.parametrize("name", sorted(FIXTURES), ids=lambda name: name.split("_")[0])
def test_fixture_with_its_vendor_named(name: str) -> None:
    assert summary(parse_smi(fixture_text(name), vendor_of(name))) == FIXTURES[name]


@pytest.mark.parametrize("name", sorted(FIXTURES), ids=lambda name: name.split("_")[0])
def test_fixture_with_the_other_vendor_named_is_unrecognized(name: str) -> None:
    other: Literal["nvidia", "amd"] = "amd" if vendor_of(name) == "nvidia" else "nvidia"
    report = parse_smi(fixture_text(name), other)
    assert report.vendor is None
    assert report.error is not None and report.error.kind == "unrecognized"


def test_list_output_carries_gpu_and_mig_uuids() -> None:
    report = parse_smi(fixture_text("30_nvidia-smi_L_8xh100_mig_7x1g.10gb.txt"))
    assert report.gpus[0].uuid == "GPU-63d1e50a-b952-d15c-0740-12bc14859142"
    assert report.gpus[7].uuid == "GPU-882ebfab-da98-c41e-357c-47272c0d560d"
    assert report.mig_devices[0] == MigDevice(0, "1g.10gb", "MIG-4d0efb7d-0970-51d9-b761-0686be6b8af3")
    assert report.mig_devices[-1] == MigDevice(7, "1g.10gb", "MIG-bc03b921-4d24-573e-9d4b-1cdc47b1f4b4")
    assert len({device.uuid for device in report.mig_devices}) == 56


def test_list_output_keeps_mixed_profiles_in_device_order() -> None:
    report = parse_smi(fixture_text("33_nvidia-smi_L_h100pcie_mig_mixed_profiles.txt"))
    assert [device.profile for device in report.mig_devices] == ["3g.40gb", "1g.10gb", "1g.10gb", "1g.10gb"]
    assert report.mig_devices[0].uuid == "MIG-da06d78f-7534-56a0-a062-62fef012be91"
    assert report.gpus[0].uuid == "GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02"


def test_query_csv_reads_uuid_among_115_fields() -> None:
    report = parse_smi(fixture_text("10_query-gpu_csv_rtx2080super_465.27.txt"))
    assert report.gpus[0].uuid == "GPU-1937b558-347d-0f30-105b-893b98985668"


def test_amd_list_does_not_report_a_redacted_uuid() -> None:
    report = parse_smi(fixture_text("52_amd-smi_list_2gpu_changelog.txt"))
    assert [gpu.uuid for gpu in report.gpus] == [None, None]


def test_mismatch_message_names_the_nvml_library_version() -> None:
    report = parse_smi(fixture_text("63_error_nvml_mismatch_570.124.txt"))
    assert report.error is not None
    assert "Driver/library version mismatch" in report.error.message
    assert "570.124" in report.error.message


def test_driver_not_loaded_message_is_the_tool_line() -> None:
    report = parse_smi(fixture_text("70_error_amd-smi_no_amdgpu_wsl.txt"))
    assert report.error == SmiError(
        "driver_not_loaded", "ERROR: Unable to get devices, driver not initialized (amdgpu not found in modules)"
    )


def test_mig_profiles_of_four_h100() -> None:
    profiles = parse_mig_profiles(fixture_text("40_nvidia-smi_mig_lgip_4xh100_80gb.txt"))
    assert len(profiles) == 28
    assert [(p.profile_id, p.profile) for p in profiles if p.gpu_index == 3] == [
        (19, "1g.10gb"),
        (20, "1g.10gb+me"),
        (15, "1g.20gb"),
        (14, "2g.20gb"),
        (9, "3g.40gb"),
        (5, "4g.40gb"),
        (0, "7g.80gb"),
    ]
    assert profiles[0] == MigProfile(0, "1g.10gb", 19, 7, 7, 9984, 16)  # 9.75 GiB
    assert profiles[6] == MigProfile(0, "7g.80gb", 0, 1, 1, 81152, 132)  # 79.25 GiB
    assert all(p.instances_free == p.instances_total for p in profiles)  # all free


def test_mig_profiles_of_the_narrow_a100_layout() -> None:
    profiles = parse_mig_profiles(fixture_text("41_nvidia-smi_mig_lgip_a100_40gb_460.txt"))
    assert [(p.profile_id, p.profile, p.instances_total) for p in profiles] == [
        (19, "1g.5gb", 7),
        (14, "2g.10gb", 3),
        (9, "3g.20gb", 2),
        (5, "4g.20gb", 1),
        (0, "7g.40gb", 1),
    ]
    assert profiles[0].memory_mib == 4864  # 4.75 GiB


def test_no_mig_profiles_when_none_is_enabled() -> None:
    assert parse_mig_profiles(fixture_text("42_nvidia-smi_mig_lgip_no_mig_enabled.txt")) == ()


# --- nvidia-smi tables beyond the fixtures ------------------------------------------------------------

# 79-column layout (R470): two GPUs in MIG mode, one with a mode change pending ("Disabled*").
NARROW_GPU_TABLE = """\
Wed Jun  1 09:14:02 2022
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.129.06   Driver Version: 470.129.06   CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  NVIDIA A100-SXM...  On   | 00000000:07:00.0 Off |                   On |
| N/A   31C    P0    61W / 400W |     13MiB / 40536MiB |     N/A      Default |
|                               |                      |              Enabled |
+-------------------------------+----------------------+----------------------+
|   1  NVIDIA A100-SXM...  On   | 00000000:0F:00.0 Off |                   On |
| N/A   30C    P0    52W / 400W |      0MiB / 40536MiB |     N/A      Default |
|                               |                      |            Disabled* |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| MIG devices:                                                                |
+------------------+----------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |
|      ID  ID  Dev |           BAR1-Usage | SM     Unc| CE  ENC  DEC  OFA  JPG|
|                  |                      |        ECC|                       |
|==================+======================+===========+=======================|
"""
NARROW_MIG_DEVICES = """\
|  0    1   0   0  |      6MiB / 20096MiB | 42      0 |  3   0    2    0    0 |
|                  |      0MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+
|  0    2   0   1  |      7MiB / 20096MiB | 42      0 |  3   0    2    0    0 |
|                  |      0MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+
"""
NARROW_NO_MIG_DEVICES = """\
|  No MIG devices found                                                       |
+-----------------------------------------------------------------------------+
"""
NARROW_PROCESSES = """\

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|  No running processes found                                                 |
+-----------------------------------------------------------------------------+
"""
NARROW_TABLE_WITH_MIG = NARROW_GPU_TABLE + NARROW_MIG_DEVICES + NARROW_PROCESSES

# The wider layout (R530 and later), MIG devices table right under the GPU table without a blank line.
WIDE_TABLE_WITH_MIG = """\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.161.08             Driver Version: 535.161.08   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA A100 80GB PCIe          On  | 00000001:00:00.0 Off |                   On |
| N/A   38C    P0              66W / 300W |     87MiB / 81920MiB |     N/A      Default |
|                                         |                      |              Enabled |
+-----------------------------------------+----------------------+----------------------+
+---------------------------------------------------------------------------------------+
| MIG devices:                                                                          |
+------------------+--------------------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |                   Memory-Usage |        Vol|      Shared           |
|      ID  ID  Dev |                     BAR1-Usage | SM     Unc| CE ENC DEC OFA JPG    |
|                  |                                |        ECC|                       |
|==================+================================+===========+=======================|
|  0    3   0   0  |              12MiB /  9856MiB  | 14      0 |  1   0    1    0    0 |
|                  |               0MiB / 16383MiB  |           |                       |
+------------------+--------------------------------+-----------+-----------------------+
|  0    4   0   1  |              12MiB /  9856MiB  | 14      0 |  1   0    1    0    0 |
|                  |               0MiB / 16383MiB  |           |                       |
+------------------+--------------------------------+-----------+-----------------------+
|  0    5   0   2  |              12MiB /  9856MiB  | 14      0 |  1   0    1    0    0 |
|                  |               0MiB / 16383MiB  |           |                       |
+------------------+--------------------------------+-----------+-----------------------+
"""


def test_narrow_table_with_mig_devices() -> None:
    report = parse_smi(NARROW_TABLE_WITH_MIG)
    assert summary(report) == expected(
        "nvidia",
        "470.129.06",
        "11.4",
        gpus=[(0, "NVIDIA A100-SXM...", 40536, "Enabled"), (1, "NVIDIA A100-SXM...", 40536, "Disabled")],
        mig={(0, None): 2},  # the table shows neither profile nor UUID
    )
    assert all(device.uuid is None for device in report.mig_devices)


def test_wide_table_with_mig_devices_right_below() -> None:
    assert summary(parse_smi(WIDE_TABLE_WITH_MIG)) == expected(
        "nvidia", "535.161.08", "12.2", gpus=[(0, "NVIDIA A100 80GB PCIe", 81920, "Enabled")], mig={(0, None): 3}
    )


def test_table_saying_no_mig_devices_found() -> None:
    report = parse_smi(NARROW_GPU_TABLE + NARROW_NO_MIG_DEVICES + NARROW_PROCESSES)
    assert report.mig_devices == ()
    assert [gpu.mig_mode for gpu in report.gpus] == ["Enabled", "Disabled"]


def test_consumer_gpu_shows_mig_mode_as_unknown() -> None:
    text = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.120                Driver Version: 550.120        CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0  On |                  Off |
|  0%   41C    P8             19W /  450W |     512MiB /  24564MiB |      2%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
"""
    assert summary(parse_smi(text))["gpus"] == [(0, "NVIDIA GeForce RTX 4090", 24564, None)]


def test_table_without_a_mig_column_leaves_mig_mode_unknown() -> None:
    # Drivers before R450 print two rows per GPU and no "MIG M." header.
    text = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 418.87.01    Driver Version: 418.87.01    CUDA Version: 10.1     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |                    0 |
| N/A   36C    P0    38W / 300W |      0MiB / 16130MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""
    report = parse_smi(text)
    assert summary(report)["gpus"] == [(0, "Tesla V100-SXM2...", 16130, None)]
    assert report.driver_version == "418.87.01"


def test_table_behind_a_prompt_and_kubectl_notices() -> None:
    text = (
        "user@jumpbox:~$ kubectl exec -n kube-system ds/nvidia-device-plugin-daemonset -- nvidia-smi\n"
        'Defaulted container "nvidia-device-plugin-ctr" out of: nvidia-device-plugin-ctr\n'
        + WIDE_TABLE_WITH_MIG
        + "command terminated with exit code 0\n"
    )
    assert parse_smi(text) == parse_smi(WIDE_TABLE_WITH_MIG)


def test_table_with_windows_line_endings() -> None:
    assert parse_smi(WIDE_TABLE_WITH_MIG.replace("\n", "\r\n")) == parse_smi(WIDE_TABLE_WITH_MIG)


# --- nvidia-smi --query-gpu CSV -----------------------------------------------------------------------


def test_csv_with_header_and_no_units() -> None:
    # With nounits the header keeps "[MiB]" and the values lose it.
    text = """\
index, name, uuid, memory.total [MiB], mig.mode.current
0, NVIDIA A100 80GB PCIe, GPU-4c6a2b7e-1f0d-8e3b-9a52-7d1e0c3f6a81, 81920, Enabled
1, NVIDIA A100 80GB PCIe, GPU-0b2d9e44-6a1c-3f7e-8d05-c9e2a1b4f730, 81920, Disabled
"""
    report = parse_smi(text)
    assert summary(report)["gpus"] == [
        (0, "NVIDIA A100 80GB PCIe", 81920, "Enabled"),
        (1, "NVIDIA A100 80GB PCIe", 81920, "Disabled"),
    ]
    assert report.gpus[1].uuid == "GPU-0b2d9e44-6a1c-3f7e-8d05-c9e2a1b4f730"


@pytest.mark.parametrize(
    "row",
    [
        "0, NVIDIA H100 80GB HBM3, GPU-63d1e50a-b952-d15c-0740-12bc14859142, 565.57.01, 81559 MiB, Disabled",
        "0, NVIDIA H100 80GB HBM3, GPU-63d1e50a-b952-d15c-0740-12bc14859142, 565.57.01, 81559, Disabled",
    ],
    ids=["units", "nounits"],
)
def test_csv_without_header_in_the_documented_column_order(row: str) -> None:
    assert NVIDIA_CSV_QUERY_FIELDS == ("index", "name", "uuid", "driver_version", "memory.total", "mig.mode.current")
    report = parse_smi(row + "\n")
    assert report.error is None
    assert report.driver_version == "565.57.01"
    assert report.gpus == (GpuInfo(0, "NVIDIA H100 80GB HBM3", "GPU-63d1e50a-b952-d15c-0740-12bc14859142", 81559, "Disabled"),)


def test_csv_without_header_in_another_order_is_not_guessed() -> None:
    report = parse_smi("NVIDIA H100 80GB HBM3, 81559, 0\nNVIDIA H100 80GB HBM3, 81559, 1\n")
    assert report.error is not None and report.error.kind == "unrecognized"
    assert report.gpus == ()


def test_csv_followed_by_kubectl_exit_notice() -> None:
    text = "uuid\nGPU-63d1e50a-b952-d15c-0740-12bc14859142\ncommand terminated with exit code 137\n"
    report = parse_smi(text)
    assert [gpu.uuid for gpu in report.gpus] == ["GPU-63d1e50a-b952-d15c-0740-12bc14859142"]


# --- nvidia-smi -q -x ----------------------------------------------------------------------------------

# Element names from NVIDIA's nvsmi_device_v12.dtd; values as an A100 80GB PCIe node in MIG mode prints them.
XML_TWO_A100 = """\
<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
	<timestamp>Tue Mar  4 10:12:44 2025</timestamp>
	<driver_version>550.144.03</driver_version>
	<cuda_version>12.4</cuda_version>
	<attached_gpus>2</attached_gpus>
	<gpu id="00000001:00:00.0">
		<product_name>NVIDIA A100 80GB PCIe</product_name>
		<product_brand>NVIDIA</product_brand>
		<product_architecture>Ampere</product_architecture>
		<display_mode>Disabled</display_mode>
		<display_active>Disabled</display_active>
		<persistence_mode>Enabled</persistence_mode>
		<addressing_mode>None</addressing_mode>
		<mig_mode>
			<current_mig>Enabled</current_mig>
			<pending_mig>Enabled</pending_mig>
		</mig_mode>
		<mig_devices>
			<mig_device>
				<index>0</index>
				<gpu_instance_id>1</gpu_instance_id>
				<compute_instance_id>0</compute_instance_id>
				<device_attributes>
					<shared>
						<multiprocessor_count>42</multiprocessor_count>
						<copy_engine_count>3</copy_engine_count>
						<encoder_count>0</encoder_count>
						<decoder_count>2</decoder_count>
						<ofa_count>0</ofa_count>
						<jpg_count>0</jpg_count>
					</shared>
				</device_attributes>
				<fb_memory_usage>
					<total>40192 MiB</total>
					<reserved>0 MiB</reserved>
					<used>107 MiB</used>
					<free>40085 MiB</free>
				</fb_memory_usage>
			</mig_device>
			<mig_device>
				<index>1</index>
				<gpu_instance_id>5</gpu_instance_id>
				<compute_instance_id>0</compute_instance_id>
				<fb_memory_usage>
					<total>19968 MiB</total>
					<reserved>0 MiB</reserved>
					<used>71 MiB</used>
					<free>19897 MiB</free>
				</fb_memory_usage>
			</mig_device>
		</mig_devices>
		<accounting_mode>Disabled</accounting_mode>
		<driver_model>
			<current_dm>N/A</current_dm>
			<pending_dm>N/A</pending_dm>
		</driver_model>
		<serial>1652222012345</serial>
		<uuid>GPU-4c6a2b7e-1f0d-8e3b-9a52-7d1e0c3f6a81</uuid>
		<minor_number>0</minor_number>
		<pci>
			<pci_bus>00</pci_bus>
			<pci_device>00</pci_device>
			<pci_domain>0001</pci_domain>
			<pci_bus_id>00000001:00:00.0</pci_bus_id>
		</pci>
		<fb_memory_usage>
			<total>81920 MiB</total>
			<reserved>659 MiB</reserved>
			<used>249 MiB</used>
			<free>81012 MiB</free>
		</fb_memory_usage>
	</gpu>
	<gpu id="00000002:00:00.0">
		<product_name>NVIDIA A100 80GB PCIe</product_name>
		<mig_mode>
			<current_mig>Disabled</current_mig>
			<pending_mig>Disabled</pending_mig>
		</mig_mode>
		<mig_devices>
			None
		</mig_devices>
		<uuid>GPU-0b2d9e44-6a1c-3f7e-8d05-c9e2a1b4f730</uuid>
		<minor_number>1</minor_number>
		<fb_memory_usage>
			<total>81920 MiB</total>
			<reserved>659 MiB</reserved>
			<used>4 MiB</used>
			<free>81257 MiB</free>
		</fb_memory_usage>
	</gpu>
</nvidia_smi_log>
"""


def test_xml_query() -> None:
    report = parse_smi(XML_TWO_A100)
    assert summary(report) == expected(
        "nvidia",
        "550.144.03",
        "12.4",
        gpus=[(0, "NVIDIA A100 80GB PCIe", 81920, "Enabled"), (1, "NVIDIA A100 80GB PCIe", 81920, "Disabled")],
        mig={(0, None): 2},  # <mig_device> names no profile
    )
    assert [gpu.uuid for gpu in report.gpus] == [
        "GPU-4c6a2b7e-1f0d-8e3b-9a52-7d1e0c3f6a81",
        "GPU-0b2d9e44-6a1c-3f7e-8d05-c9e2a1b4f730",
    ]


def test_xml_of_a_gpu_without_mig_and_cuda_unknown() -> None:
    text = (
        'Defaulted container "nvidia-device-plugin-ctr" out of: nvidia-device-plugin-ctr\n'
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        "<nvidia_smi_log>\n<driver_version>535.183.01</driver_version>\n<cuda_version>N/A</cuda_version>\n"
        '<attached_gpus>1</attached_gpus>\n<gpu id="00000001:00:00.0">\n<product_name>Tesla T4</product_name>\n'
        "<mig_mode>\n<current_mig>N/A</current_mig>\n<pending_mig>N/A</pending_mig>\n</mig_mode>\n"
        "<uuid>GPU-2f6c3a1e-9d4b-7c80-e5a2-1b3d4c5e6f70</uuid>\n"
        "<fb_memory_usage>\n<total>15360 MiB</total>\n</fb_memory_usage>\n</gpu>\n</nvidia_smi_log>\n"
    )
    assert summary(parse_smi(text)) == expected("nvidia", "535.183.01", None, gpus=[(0, "Tesla T4", 15360, None)])


def test_truncated_xml_is_unrecognized() -> None:
    report = parse_smi(XML_TWO_A100[: len(XML_TWO_A100) // 2] + "</nvidia_smi_log>\n")
    assert report.error is not None and report.error.kind == "unrecognized"


# --- amd-smi --json --------------------------------------------------------------------------------------

AMD_STATIC_GPU = {
    "gpu": 0,
    "asic": {
        "market_name": "AMD Instinct MI300X",
        "vendor_id": "0x1002",
        "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
        "device_id": "0x74a1",
        "num_compute_units": 304,
        "target_graphics_version": "gfx942",
    },
    "bus": {"bdf": "0000:0c:00.0", "max_pcie_width": 16, "slot_type": "OAM"},
    "driver": {"name": "amdgpu", "version": "6.10.5"},
    "board": {"product_name": "AMD Instinct MI300X OAM", "manufacturer_name": "AMD"},
    "partition": {"compute_partition": "SPX", "memory_partition": "NPS1", "partition_id": 0},
    "vram": {"type": "HBM", "vendor": "N/A", "size": {"value": 196592, "unit": "MB"}, "bit_width": 8192},
}


def test_amd_static_json_as_a_bare_list() -> None:
    second = {**AMD_STATIC_GPU, "gpu": 1, "bus": {"bdf": "0000:22:00.0"}}
    report = parse_smi(json.dumps([AMD_STATIC_GPU, second], indent=4))
    assert summary(report) == expected(
        "amd", "6.10.5", gpus=[(0, "AMD Instinct MI300X", 196592, None), (1, "AMD Instinct MI300X", 196592, None)]
    )


def test_amd_static_json_wrapped_in_gpu_data_with_trailing_noise() -> None:
    text = json.dumps({"gpu_data": [AMD_STATIC_GPU]}, indent=4) + "\ncommand terminated with exit code 1\n"
    assert summary(parse_smi(text)) == expected("amd", "6.10.5", gpus=[(0, "AMD Instinct MI300X", 196592, None)])


def test_amd_static_json_with_vram_in_gb() -> None:
    gpu = {**AMD_STATIC_GPU, "vram": {"size": {"value": 192, "unit": "GB"}}}
    assert parse_smi(json.dumps([gpu])).gpus[0].memory_total_mib == 192 * 1024


def test_amd_list_json() -> None:
    listed = [
        {"gpu": 0, "bdf": "0000:0c:00.0", "uuid": "a4ff74a1-0000-1000-80a9-d2e1c9f0a5d3", "kfd_id": 45412},
        {"gpu": 1, "bdf": "0000:22:00.0", "uuid": "3dff74a1-0000-1000-8034-97b2e6c1d0f8", "kfd_id": 59881},
    ]
    report = parse_smi(json.dumps(listed, indent=4))
    assert report.vendor == "amd" and report.error is None
    assert [(gpu.index, gpu.uuid) for gpu in report.gpus] == [
        (0, "a4ff74a1-0000-1000-80a9-d2e1c9f0a5d3"),
        (1, "3dff74a1-0000-1000-8034-97b2e6c1d0f8"),
    ]


def test_json_that_is_not_amd_smi_is_unrecognized() -> None:
    report = parse_smi('{"items": [{"kind": "Pod"}]}')
    assert report.error is not None and report.error.kind == "unrecognized"


# --- amd-smi version, rocm-smi, errors ----------------------------------------------------------------------


def test_amd_smi_version_with_the_amdgpu_version() -> None:
    text = (
        "AMDSMI Tool: 26.0.2+39589fda | AMDSMI Library version: 26.0.2 | ROCm version: 7.0.2 | "
        "amdgpu version: 6.14.14 | amd_hsmp version: N/A\n"
    )
    assert summary(parse_smi(text)) == expected("amd", "6.14.14", rocm="7.0.2")


def test_amd_smi_version_before_the_amdgpu_field() -> None:
    text = "AMDSMI Tool: 24.6.2+2b02a07 | AMDSMI Library version: 24.6.2 | ROCm version: 6.2.0\n"
    assert summary(parse_smi(text)) == expected("amd", None, rocm="6.2.0")


def test_amd_smi_version_after_driver_errors_is_still_an_error() -> None:
    # amd-smi under WSL logs the driver errors and then prints its version line anyway.
    text = (
        "ERROR:root:Unable to get devices, driver not initialized (amdgpu not found in modules)\n"
        "ERROR:root:Unable to detect any GPU devices, check amdgpu version and module status "
        "(sudo modprobe amdgpu)\n"
        "AMDSMI Tool: 26.1.0+b5522cc8 | AMDSMI Library version: 26.1.0 | ROCm version: N/A\n"
    )
    assert summary(parse_smi(text)) == expected("amd", error="driver_not_loaded")


def test_rocm_smi_without_the_driver() -> None:
    assert parse_smi("ERROR:root:Driver not initialized (amdgpu not found in modules)\n").error == SmiError(
        "driver_not_loaded", "ERROR:root:Driver not initialized (amdgpu not found in modules)"
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("No devices were found\n", "no_devices"),
        (
            "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
            "Display Driver is properly installed and present in your system.\n",
            "driver_not_loaded",
        ),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "driver_library_mismatch"),
    ],
)
def test_nvidia_errors(text: str, kind: str) -> None:
    report = parse_smi("$ nvidia-smi\n" + text)
    assert report.vendor == "nvidia"
    assert report.error is not None and report.error.kind == kind
    assert report.error.message == text.strip()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n   \n",
        "$ nvidia-smi\n",
        'Defaulted container "nvidia-device-plugin-ctr" out of: nvidia-device-plugin-ctr\ncommand terminated with exit code 1\n',
    ],
    ids=["empty", "blank", "prompt-only", "kubectl-notices-only"],
)
def test_nothing_to_read_is_unrecognized(text: str) -> None:
    report = parse_smi(text)
    assert report == SmiReport(None, None, None, None, (), (), SmiError("unrecognized", "the output is empty"))


def test_unknown_text_is_unrecognized_and_quoted() -> None:
    report = parse_smi("bash: nvidia-smi: command not found\n")
    assert report.vendor is None and report.gpus == ()
    assert report.error is not None and report.error.kind == "unrecognized"
    assert "bash: nvidia-smi: command not found" in report.error.message


def test_unknown_vendor_is_refused() -> None:
    with pytest.raises(ValueError, match="vendor"):
        parse_smi("No devices were found", "intel")  # type: ignore[arg-type]


# --- the report's JSON shape and the live command ---------------------------------------------------------


def test_to_dict_is_the_documented_json_shape() -> None:
    report = parse_smi(fixture_text("33_nvidia-smi_L_h100pcie_mig_mixed_profiles.txt"))
    data = report.to_dict()
    assert list(data) == [
        "vendor",
        "driver_version",
        "cuda_version",
        "rocm_version",
        "gpus",
        "mig_devices",
        "error",
        "format",
        "truncated",
        "kernel_driver",
        "processes",
        "nvlinks",
        "topology",
    ]
    assert data["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA H100 PCIe",
            "uuid": "GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02",
            "memory_total_mib": None,
            "mig_mode": "Enabled",
            "bus_id": None,
        }
    ]
    assert data["mig_devices"] == [
        {"gpu_index": 0, "profile": "3g.40gb", "uuid": "MIG-da06d78f-7534-56a0-a062-62fef012be91"},
        {"gpu_index": 0, "profile": "1g.10gb", "uuid": "MIG-8aa1fc52-9818-58ec-bc64-8f0cae121bb4"},
        {"gpu_index": 0, "profile": "1g.10gb", "uuid": "MIG-42fa9c93-1430-5ccc-b623-c02fb93b7f5a"},
        {"gpu_index": 0, "profile": "1g.10gb", "uuid": "MIG-6d96b431-44ba-5360-80b0-9359561c927d"},
    ]
    assert data["error"] is None
    assert json.loads(json.dumps(data)) == data


def test_to_dict_of_an_error() -> None:
    data = parse_smi(fixture_text("61_error_nvidia-smi_failed_after_kernel_upgrade.txt")).to_dict()
    assert data["gpus"] == [] and data["mig_devices"] == []
    assert data["error"] == {
        "kind": "driver_not_loaded",
        "message": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.",
    }


def test_smi_commands() -> None:
    # One exec per node serves the driver, count, MIG and health checks.
    assert smi_command("nvidia") == ["nvidia-smi", "-q", "-x"]
    assert smi_command("amd") == ["sh", "-c", "amd-smi static --json; amd-smi metric --ecc --json"]
