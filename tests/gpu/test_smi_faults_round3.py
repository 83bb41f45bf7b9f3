"""Faults the health reader once called healthy, and outputs the parsers once read wrong, each on a real output
(tests/fixtures/health and tests/fixtures/smi, SOURCES.md names each one's origin; issue 26).

Where no public output shows the case whole, the test takes a real output and changes the one thing the case is
about (a prefix before each line, a cut after the header, a record replaced by the real ERR! record), and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aks_gpu.audit.engine import run_audit
from aks_gpu.cli import main
from aks_gpu.gpu.health import Finding, HealthReport, nvlink_expected_for, read_health, read_smi_and_health
from aks_gpu.gpu.smi import parse_smi
from aks_gpu.naming import INSTANCE_TYPE_LABEL
from aks_gpu.resolved.targets import plugin_targets
from aks_gpu.validation.checks import run_checks
from tests.audit.clusters import PROD, TRAIN_0, clean_snapshot, edited, find_node
from tests.conftest import HEALTH_FIXTURES_DIR, SMI_FIXTURES_DIR


def health_fixture(name: str) -> str:
    return (HEALTH_FIXTURES_DIR / name).read_text(encoding="utf-8")


def smi_fixture(name: str) -> str:
    return (SMI_FIXTURES_DIR / name).read_text(encoding="utf-8")


def ids(report: HealthReport) -> list[tuple[str, str, str | None]]:
    return [(f.id, f.severity, f.gpu) for f in report.findings]


def critical(report: HealthReport, id_: str) -> list[Finding]:
    return [f for f in report.findings if f.id == id_ and f.severity == "critical"]


ERR_RECORD = "38_nvidia-smi_table_err_gpu_a100_gsp_timeout_excerpt.txt"
H100_TABLE = "02_nvidia-smi_table_8xh100_565.57.01.txt"
DCGMI_ALL_DOWN = "06_dcgmi-nvlink-link-status_all_down.txt"


def table_with_err_record() -> str:
    """The real 8x H100 table with its GPU 1 record replaced by the real ERR! record of fixture 38 (GPU 5 there).

    Fixture 38's layout is the 79-column one of drivers before 530; the H100 table is the wider one, so the record is
    re-spaced to the wide layout's cell widths, each cell's words as printed.
    """
    lines = smi_fixture(H100_TABLE).splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("|   1  NVIDIA H100"))
    widths = [len(cell) for cell in lines[start].strip()[1:-1].split("|")]
    err = [line for line in health_fixture(ERR_RECORD).splitlines() if "ERR!" in line]

    def respaced(line: str) -> str:
        cells = line.strip()[1:-1].split("|")
        return "|" + "|".join(cell.strip().rjust(width - 1) + " " for cell, width in zip(cells, widths, strict=True)) + "|"

    replaced = [respaced(line) for line in err]
    return "\n".join(lines[:start] + replaced + lines[start + 3 :]) + "\n"


# ---------------------------------------------------------------- ERR! cells


def test_a_gpu_whose_cells_read_err_is_lost_never_healthy() -> None:
    report = read_health(health_fixture(ERR_RECORD))
    assert ids(report) == [("gpu-lost", "critical", "00000000:91:00.0")]  # GPU 4 in the same excerpt reads fine
    assert "nvidia-smi cannot read GPU 5" in report.findings[0].message


def test_parse_never_names_a_gpu_err_and_health_fails_it_in_a_whole_table() -> None:
    text = table_with_err_record()
    report = parse_smi(text)
    assert report.error is None and len(report.gpus) == 8
    assert [gpu.name for gpu in report.gpus if gpu.bus_id == "00000000:91:00.0"] == [None]  # "ERR!" is no name
    assert all(gpu.name != "ERR!" for gpu in report.gpus)
    health = read_health(text)
    assert critical(health, "gpu-lost") and health.critical
    # Its ECC count read ERR!: not checked for that GPU, and said so; the other seven were read.
    assert [(n.id, n.gpu) for n in health.not_checked] == [("ecc-uncorrectable", "00000000:91:00.0")]
    assert "ecc-uncorrectable" in health.checked


def test_one_field_that_reads_err_is_a_warning_not_a_lost_gpu() -> None:
    report = read_health(health_fixture("39_nvidia-smi_table_err_power_v100_excerpt.txt"))
    assert ids(report) == [("gpu-lost", "warning", "00008ED0:00:00.0")]
    assert not report.critical and not report.healthy


# ---------------------------------------------------------------- reset required


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("40_dmesg_nv_err_reset_required_gsp_alloc.txt", None),  # the log names no GPU
        ("41_talos_kern_gsp_timeout_xid154_gpu_reset_required.txt", "0000:0b:00"),
        ("42_dmesg_gsp_wpr2_already_up_may_need_reset.txt", "0000:a1:00.0"),  # named on the lines around it
    ],
)
def test_the_driver_saying_a_gpu_needs_a_reset_is_critical(name: str, gpu: str | None) -> None:
    report = read_health(health_fixture(name))
    assert [(f.id, f.gpu) for f in critical(report, "gpu-reset-required")] == [("gpu-reset-required", gpu)]


def test_xid_154_alone_stays_a_warning_its_reset_action_is_the_critical_part() -> None:
    report = read_health(health_fixture("41_talos_kern_gsp_timeout_xid154_gpu_reset_required.txt"))
    assert ("xid", "warning", "0000:0b:00") in ids(report)  # the catalog's grade of the code itself


def test_nvidia_smi_q_recovery_action_reset_is_critical_none_is_checked() -> None:
    # The 535 -q of fixture 31 predates the field: it is added to its first GPU as R570's -q prints it.
    text = health_fixture("31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt")
    assert "gpu-reset-required" not in read_health(text).checked
    first_gpu = text.index("    Product Name")
    with_field = text[:first_gpu] + "    GPU Recovery Action                   : {}\n" + text[first_gpu:]
    reset = read_health(with_field.replace("{}", "Reset", 1))
    assert [f.gpu for f in critical(reset, "gpu-reset-required")] == ["00000000:19:00.0"]
    fine = read_health(with_field.replace("{}", "None", 1))
    assert "gpu-reset-required" in fine.checked and not critical(fine, "gpu-reset-required")


def test_unable_to_determine_the_handle_names_the_gpu_without_a_space() -> None:
    report = read_health(health_fixture("45_nvidia-smi_device_handle_unknown_error_tesla_p4.txt"))
    assert ids(report) == [("gpu-lost", "critical", "0000:07:00.0")]


# ---------------------------------------------------------------- NVLink on an NVLink size


def test_the_catalog_knows_which_sizes_are_nvlink_connected() -> None:
    assert nvlink_expected_for("Standard_ND96isr_H100_v5") is True
    assert nvlink_expected_for("standard_nd96isr_h200_v5") is True  # Azure compares sizes without case
    assert nvlink_expected_for("Standard_ND128isr_NDR_GB200_v6") is True
    assert nvlink_expected_for("Standard_NC4as_T4_v3") is None  # no source says: unknown, not "no"
    assert nvlink_expected_for("Standard_Unknown") is None and nvlink_expected_for(None) is None


@pytest.mark.parametrize(
    ("size", "severity", "exit_code"),
    [("Standard_ND96isr_H100_v5", "critical", 1), ("Standard_NC4as_T4_v3", "warning", 0), (None, "warning", 0)],
)
def test_smi_health_vm_size_makes_all_links_down_critical_on_an_nvlink_size(
    size: str | None, severity: str, exit_code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["smi", "health", str(HEALTH_FIXTURES_DIR / DCGMI_ALL_DOWN)] + (["--vm-size", size] if size else [])
    assert main(args) == exit_code
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert {(f["id"], f["severity"]) for f in findings} == {("nvlink-inactive", severity)}


def test_topology_without_nvlink_on_an_nvlink_size_is_critical() -> None:
    text = smi_fixture("38_nvidia-smi_topo-m_nc80adis_h100_no_nvlink.txt")
    assert read_health(text, vm_size="Standard_NC80adis_H100_v5").critical
    assert [f.gpu for f in read_health(text, vm_size="Standard_NC80adis_H100_v5").findings] == ["0", "1"]
    # Elsewhere a PCIe path between GPUs is no finding, and topo -m alone gives no health data.
    assert read_health(text).unreadable is not None


# ---------------------------------------------------------------- outputs read wrong


KUBECTL = "2026-11-30T08:15:02.123456789Z "
JOURNAL = "Nov 30 08:15:02 aks-gpu-12345678-vmss000000 rocm-smi[4242]: "


@pytest.mark.parametrize("name", ["57_rocm-smi_a_driver_5.6.19_excerpt.txt", "58_rocm-smi_concise_mi355x_dpx_excerpt.txt"])
@pytest.mark.parametrize("prefix", [KUBECTL, JOURNAL], ids=["kubectl-timestamps", "journald"])
def test_rocm_smi_with_a_line_prefix_reads_as_without(name: str, prefix: str) -> None:
    text = smi_fixture(name)
    prefixed = "".join(prefix + line for line in text.splitlines(keepends=True))
    whole, read = parse_smi(text), parse_smi(prefixed)
    assert read.gpus == whole.gpus and read.driver_version == whole.driver_version and read.error is None


@pytest.mark.parametrize("name", ["57_rocm-smi_a_driver_5.6.19_excerpt.txt", "58_rocm-smi_concise_mi355x_dpx_excerpt.txt"])
def test_rocm_smi_with_a_prefix_it_does_not_know_is_an_error_never_zero_gpus(name: str) -> None:
    prefixed = "".join("pod/rocm-smi-x7k2p | " + line for line in smi_fixture(name).splitlines(keepends=True))
    report = parse_smi(prefixed)
    # With a banner to recognise it by, rocm-smi whose rows cannot be read (57); without one, no known format (58).
    assert report.error is not None and report.error.kind in ("unreadable", "unrecognized") and report.gpus == ()
    assert report.error.kind == "unreadable" or report.format is None


def test_amd_smi_with_kubectl_timestamps_reads_as_without() -> None:
    text = smi_fixture("51_amd-smi_static_mi300a_docs.txt")
    prefixed = "".join(KUBECTL + line for line in text.splitlines(keepends=True))
    assert parse_smi(prefixed).gpus == parse_smi(text).gpus != ()


def test_a_kernel_log_from_journalctl_with_its_prefix_is_read() -> None:
    # Fixture 14 is journalctl -k as posted ("kernel: NVRM: ..."); with journald's whole prefix it reads the same.
    text = health_fixture("14_journalctl-k_xid45_after_xid149_xid145_nvlink.txt")
    prefixed = "".join("Nov 30 08:15:02 node-0 " + line for line in text.splitlines(keepends=True))
    assert ids(read_health(prefixed)) == ids(read_health(text)) != []


def test_nvml_unknown_error_has_its_kind() -> None:
    report = parse_smi(smi_fixture("65_error_nvml_unknown_error_after_daemon_reload.txt"))
    assert report.vendor == "nvidia" and report.error is not None and report.error.kind == "nvml_init_failed"
    assert report.error.message == "Failed to initialize NVML: Unknown Error"


@pytest.mark.parametrize("lines", [2, 3, 6, 7])
def test_a_table_cut_after_its_header_is_truncated_never_complete_with_zero_gpus(
    lines: int, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    # `nvidia-smi | head -n N` of the real 8x H100 table, cut inside the banner or the header.
    text = "".join(smi_fixture(H100_TABLE).splitlines(keepends=True)[:lines])
    report = parse_smi(text)
    assert report.format == "nvidia-smi" and report.gpus == () and report.truncated
    health = read_health(text)
    assert not health.healthy


def test_a_table_cut_inside_its_records_reads_the_whole_ones_and_is_not_healthy(capsys: pytest.CaptureFixture[str]) -> None:
    text = "".join(smi_fixture(H100_TABLE).splitlines(keepends=True)[:16])
    report, health = read_smi_and_health(text)
    assert report.truncated and len(report.gpus) == 2
    assert health.incomplete is not None and not health.healthy and not health.critical


def test_rocm_smi_json_and_csv_are_read() -> None:
    json_report = parse_smi(smi_fixture("66_rocm-smi_json_rx7900xt_productname_meminfo.txt"))
    csv_report = parse_smi(smi_fixture("68_rocm-smi_csv_rx7900xt_productname_meminfo.txt"))
    assert json_report.format == "rocm-smi --json" and json_report.gpus == csv_report.gpus
    assert json_report.gpus[0].memory_total_mib == 21458059264 // (1024 * 1024)


def test_query_gpu_csv_with_vgpu_capability_fields() -> None:
    # The field names --help-query-gpu lists for R535+ vGPU capabilities (netdata/netdata#15755 quotes them), with
    # dots and capitals inside; the row is the shape nvidia-smi prints for them.
    header = (
        "index, name, vgpu_driver_capability.heterogenous_multivGPU, vgpu_device_capability.fractional_multiVgpu, "
        "vgpu_device_capability.heterogeneous_timeSlice_sizes, memory.total [MiB]"
    )
    report = parse_smi(f"{header}\n0, NVIDIA A10, No, Yes, No, 23028 MiB\n")
    assert report.format == "nvidia-smi --query-gpu" and [(g.index, g.name, g.memory_total_mib) for g in report.gpus] == [
        (0, "NVIDIA A10", 23028)
    ]


@pytest.mark.parametrize(
    ("name", "gpus"),
    [
        ("43_dmesg_amdgpu_mi300x_athub_uncorrectable_aca.txt", ["0000:1c:00.0", "0000:42:00.0", "0000:55:00.0"]),
        ("44_dmesg_amdgpu_mi50_athub_uncorrectable_gpu_reset.txt", ["0000:e3:00.0"]),
    ],
)
def test_amdgpu_kernel_uncorrectable_ras_is_ras_uncorrectable(name: str, gpus: list[str]) -> None:
    report = read_health(health_fixture(name))
    assert report.unreadable is None and [f.gpu for f in critical(report, "ras-uncorrectable")] == gpus


def test_an_aca_bank_without_an_uncorrected_bit_is_no_finding() -> None:
    # Fixture 43's bank with its STATUS changed to VAL|EN|MISCV only (a corrected error).
    log = health_fixture("43_dmesg_amdgpu_mi300x_athub_uncorrectable_aca.txt")
    lines = [line for line in log.splitlines() if "0000:55" in line]
    corrected = "\n".join(lines).replace("0x98000800003e0000", "0x98000000003e0000") + "\n"
    assert read_health(corrected, "amd").findings == ()


def test_rocm_smi_saying_it_has_no_data_is_never_healthy() -> None:
    report = read_health(health_fixture("46_rocm-smi_json_showrasinfo_no_data_mi300a.txt"))
    assert report.unreadable is not None and not report.healthy


# ---------------------------------------------------------------- validate, audit and smi health agree


@pytest.mark.parametrize(
    ("size", "verdict"),
    [("Standard_ND96isr_H100_v5", "critical"), ("Standard_NC4as_T4_v3", "warning")],
    ids=["nvlink-size", "size-without-a-source"],
)
def test_validate_audit_and_smi_health_agree_on_the_same_node(
    size: str, verdict: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One train node whose saved output is the real dcgmi all-links-down of fixture 06, its instance-type label set.
    text = health_fixture(DCGMI_ALL_DOWN)
    snapshot = edited(clean_snapshot())
    snapshot.smi[TRAIN_0] = text
    find_node(snapshot, TRAIN_0)["metadata"]["labels"][INSTANCE_TYPE_LABEL] = size

    [validated] = [r for r in run_checks(PROD, plugin_targets(PROD), snapshot) if r.id == "gpu-health" and r.node == TRAIN_0]
    audited = [f for f in run_audit(snapshot, None).findings if f.node == TRAIN_0 and f.id == "nvlink-inactive"]
    (tmp_path / "out.txt").write_text(text, encoding="utf-8")
    exit_code = main(["smi", "health", "--vm-size", size, str(tmp_path / "out.txt")])
    severities = {f["severity"] for f in json.loads(capsys.readouterr().out)["findings"]}

    expected = {"critical": ("fail", 1), "warning": ("warn", 0)}[verdict]
    assert (validated.status, exit_code) == expected and severities == {verdict}
    assert audited and {finding.severity for finding in audited} == {expected[0]}


def test_fabric_completed_with_insufficient_resources_is_not_ready() -> None:
    # The Fabric block Azure/azhpc-images#506 quotes (State Completed, Status Insufficient Resources, a node Azure's
    # image validation now fails), in place of the first H100's own block in gpud's real 8x H100 -q.
    h100 = health_fixture("31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt")
    block = (
        "    Fabric\n        State                             : Completed\n"
        "        Status                            : Success\n"
    )
    excerpt = health_fixture("47_nvidia-smi-q_fabric_completed_insufficient_resources_excerpt.txt")
    report = read_health(h100.replace(block, excerpt, 1))
    assert [(f.id, f.gpu) for f in critical(report, "fabric-not-ready")] == [("fabric-not-ready", "00000000:19:00.0")]
    assert "'Insufficient Resources'" in critical(report, "fabric-not-ready")[0].message


def test_a_vm_size_the_catalog_does_not_know_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["smi", "health", "--vm-size", "Standard_Made_Up_v9", str(HEALTH_FIXTURES_DIR / DCGMI_ALL_DOWN)]) == 0
    assert "does not say whether this size's GPUs are NVLink-connected" in capsys.readouterr().err


# ---------------------------------------------------------------- the wider corpus


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # NVLink5: the driver names Fatal or Nonfatal in the line; Fatal is critical, Nonfatal stays a warning.
        (
            "48_kmsg_xid149_xid145_xid94_nvlink5_netir.txt",
            [
                ("xid", "critical", "0000:00:00"),
                ("xid", "critical", "0019:01:00"),
                ("xid", "warning", "0000:9b:00"),
                ("xid", "warning", "0018:01:00"),
            ],
        ),
        (
            "49_kmsg_xid144_saw_nonfatal_xid149_netir_fatal.txt",
            [("xid", "critical", "0000:00:00"), ("xid", "warning", "0000:01:00")],
        ),
        (
            "50_dmesg_pcie_aer_surprise_down_xid79_tesla.txt",
            [("xid", "critical", "0000:02:00"), ("gpu-lost", "critical", "0000:02:00")],
        ),
        # journald's "Apr 19 13:16:41 Kyrios kernel: " before each line.
        ("51_journalctl_xid120_gsp_task_exception_575.51.02.txt", [("xid", "critical", "0000:02:00")]),
        ("52_dmesg_xid32_xid31_laptop.txt", [("xid", "warning", "0000:01:00"), ("xid", "warning", "0000:01:00")]),
        ("53_nvidia-smi-a_device_handle_unknown_error.txt", [("gpu-lost", "critical", "0000:09:00.0")]),
    ],
)
def test_real_kernel_logs_and_smi_errors_are_graded(name: str, expected: list[tuple[str, str, str | None]]) -> None:
    assert ids(read_health(health_fixture(name))) == expected


def test_eight_b200_on_nvlink_are_checked_and_healthy_on_an_nvlink_size() -> None:
    report = read_health(smi_fixture("76_nvidia-smi_topo-m_8xb200_nv18_excerpt.txt"), vm_size="Standard_ND128isr_NDR_GB200_v6")
    assert report.findings == () and report.checked == ("nvlink-inactive",) and report.healthy


# ---------------------------------------------------------------- --query-gpu / --query-remapped-rows CSV
# No published output of these queries with a header was found: the rows below are written in the layout of the
# queries Azure's HPC health checks run (Azure/azurehpc-health-checks customTests/azure_gpu_ecc.nhc @0e0a1ac2), with
# the field names nvidia-smi's --help-query-gpu lists, and say so.

REMAPPED_ROWS = (
    "gpu_bus_id, remapped_rows.pending, remapped_rows.failure, remapped_rows.uncorrectable\n"
    "00000000:07:00.0, 0, 0, 0\n"
    "00000000:0B:00.0, 1, 0, 4\n"
)
ECC = (
    "index, pci.bus_id, ecc.errors.uncorrected.volatile.sram, ecc.errors.uncorrected.aggregate.sram, "
    "ecc.errors.uncorrected.volatile.dram, ecc.errors.uncorrected.aggregate.dram\n"
    "0, 00000000:07:00.0, 0, 0, 0, 0\n"
    "1, 00000000:0B:00.0, 0, 0, 0, 2\n"
    "2, 00000000:48:00.0, 0, 0, 3, 3\n"
)


def test_query_remapped_rows_csv_is_read_for_health() -> None:
    report, health = read_smi_and_health(REMAPPED_ROWS)
    assert [gpu.bus_id for gpu in report.gpus] == ["00000000:07:00.0", "00000000:0B:00.0"]
    assert ids(health) == [("row-remap-pending", "critical", "00000000:0B:00.0")]
    assert {"row-remap-failure", "row-remap-pending"} <= set(health.checked)


def test_query_gpu_ecc_csv_volatile_is_critical_aggregate_a_warning() -> None:
    health = read_health(ECC)
    assert ids(health) == [
        ("ecc-uncorrectable", "critical", "00000000:48:00.0"),
        ("ecc-uncorrectable", "warning", "00000000:0B:00.0"),
    ]
    assert health.checked == ("ecc-uncorrectable",)


def test_a_query_of_every_field_on_a_consumer_gpu_checks_what_it_shows() -> None:
    # The real all-fields query of an RTX 2080 SUPER: its throttle reasons are read, its ECC fields are [N/A] and
    # so not claimed as checked.
    health = read_health(smi_fixture("10_query-gpu_csv_rtx2080super_465.27.txt"))
    assert health.checked == ("hw-slowdown",) and health.findings == ()
    assert read_health(smi_fixture("13_query-gpu_csv_win10_466.63_timestamp_first.txt")).checked == ("hw-slowdown",)


def test_validate_warns_naming_the_gpu_whose_ecc_cell_reads_err() -> None:
    # The real 8x H100 table with GPU 1's ECC cell alone printed as ERR!: nothing critical, so validate's gpu-health
    # warns and names the GPU and what was not checked (the entry names one GPU: it is no per-node finding).
    lines = smi_fixture(H100_TABLE).splitlines()
    row = next(n for n, line in enumerate(lines) if line.startswith("|   1  NVIDIA H100"))
    head, ecc, tail = lines[row].rsplit("|", 2)[0], lines[row].rsplit("|", 2)[1], ""
    lines[row] = f"{head}|{'ERR! '.rjust(len(ecc))}|{tail}"
    snapshot = edited(clean_snapshot())
    snapshot.smi[TRAIN_0] = "\n".join(lines) + "\n"
    [result] = [r for r in run_checks(PROD, plugin_targets(PROD), snapshot) if r.id == "gpu-health" and r.node == TRAIN_0]
    assert result.status == "warn"
    assert "1 (00000000:2A:00.0): ecc-uncorrectable not checked" in result.message
