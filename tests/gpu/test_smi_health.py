"""``aks_gpu.gpu.health``: every finding id on a real output where one is published (tests/fixtures/health,
tests/fixtures/smi), else on a real output with the one value changed that the finding reads; the Xid table; the
AKS Node Problem Detector conditions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aks_gpu.gpu.health import (
    FINDING_IDS,
    GPU_CONDITIONS,
    Finding,
    HealthReport,
    read_gpu_conditions,
    read_health,
    read_smi_and_health,
)
from aks_gpu.gpu.xid import CATALOG_URL, XidCatalogError, critical_xid_codes, load_xid_catalog, parse_xid_catalog
from tests.conftest import HEALTH_FIXTURES_DIR, SMI_FIXTURES_DIR


def health_fixture(name: str) -> str:
    return (HEALTH_FIXTURES_DIR / name).read_text(encoding="utf-8")


def smi_fixture(name: str) -> str:
    return (SMI_FIXTURES_DIR / name).read_text(encoding="utf-8")


def ids(report: HealthReport) -> list[tuple[str, str, str | None]]:
    return [(finding.id, finding.severity, finding.gpu) for finding in report.findings]


T4_XML = "26_nvidia-smi-q-x_tesla-t4_515.105.01.xml.txt"
A10_REMAP = "30_nvidia-smi-q_a10_535.129.03_row_remap_pending.txt"
H100_TEXT = "31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt"


# ---------------------------------------------------------------- real outputs, each finding


def test_row_remap_pending_on_a_real_a10() -> None:
    report = read_health(health_fixture(A10_REMAP))
    assert ids(report) == [("row-remap-pending", "critical", "00000000:07:00.0")]
    assert "4 row(s) remapped" in report.findings[0].message and "reboot" in report.findings[0].message
    assert report.critical
    # What the -q output allowed to judge on an A10 (no NVSwitch fabric: its state is N/A).
    assert report.checked == (
        "ecc-uncorrectable",
        "row-remap-failure",
        "row-remap-pending",
        "gpu-lost",
        "hw-slowdown",
        "pcie-degraded",
    )


def test_hw_slowdown_and_power_brake_on_eight_real_h100() -> None:
    report = read_health(health_fixture(H100_TEXT))
    assert [finding.id for finding in report.findings] == ["hw-slowdown"] * 8
    assert all(finding.severity == "warning" for finding in report.findings)
    assert "HW slowdown, HW power brake active" in report.findings[0].message
    assert not report.critical
    assert "fabric-not-ready" in report.checked  # the fabric is Completed / Success on these HGX H100


def test_fabric_not_ready_with_the_real_in_progress_block() -> None:
    # The Fabric block a GPU Operator user posted (driver 580, state In Progress), in place of the first H100's
    # own (Completed / Success) in gpud's real 8x H100 output.
    h100 = health_fixture(H100_TEXT)
    block = (
        "    Fabric\n        State                             : Completed\n"
        "        Status                            : Success\n"
    )
    assert block in h100
    spliced = h100.replace(block, health_fixture("34_nvidia-smi-q_fabric_in_progress_580.159.04_excerpt.txt"), 1)
    report = read_health(spliced)
    fabric = [finding for finding in report.findings if finding.id == "fabric-not-ready"]
    assert [(f.severity, f.gpu) for f in fabric] == [("critical", "00000000:19:00.0")]
    assert "'In Progress'" in fabric[0].message and "nvidia-fabricmanager" in fabric[0].message


def test_xid_severity_comes_from_the_catalog() -> None:
    report = read_health(health_fixture("15_dmesg_xid13_sm_warp_exception_xid109_ctx_switch_timeout.txt"))
    assert ids(report) == [("xid", "critical", "0000:cb:00"), ("xid", "warning", "0000:cb:00")]
    critical, warning = report.findings
    assert critical.message.startswith("Xid 109 (ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR")
    assert "drain the node and reset the GPU" in critical.message and CATALOG_URL in critical.message
    assert warning.message.startswith("Xid 13 (") and ", 3 times" in warning.message  # three lines, one finding
    assert report.checked == ("xid", "gpu-lost", "gpu-reset-required")


def test_xid_45_follows_the_nvlink_errors_before_it() -> None:
    report = read_health(health_fixture("14_journalctl-k_xid45_after_xid149_xid145_nvlink.txt"))
    assert {finding.gpu for finding in report.findings} == {"0000:dc:00", "0000:ed:00", "0000:ba:00", "0000:97:00"}
    assert all(f.severity == "warning" and "act on the Xid that preceded it" in f.message for f in report.findings)


def test_xid_119_gsp_timeout_is_critical() -> None:
    report = read_health(health_fixture("32_dmesg_xid119_gsp_rpc_timeout.txt"))
    assert ids(report) == [("xid", "critical", "0000:9b:00")]
    assert "GSP_RPC_TIMEOUT" in report.findings[0].message


def test_xid_79_is_an_xid_and_a_lost_gpu() -> None:
    report = read_health(health_fixture("37_kernel_xid79_fallen_off_the_bus.txt"))
    assert ids(report) == [("xid", "critical", "0000:44:00"), ("gpu-lost", "critical", "0000:44:00")]
    assert "restart the VM" in report.findings[0].message


@pytest.mark.parametrize(
    "name",
    [
        "37_kernel_xid79_fallen_off_the_bus.txt",
        "32_dmesg_xid119_gsp_rpc_timeout.txt",
        "35_nvidia-smi_gpu_is_lost.txt",
        "18_nvidia-smi_no_devices_found_rminitadapter_failed.txt",
    ],
)
def test_a_log_without_its_final_line_end_keeps_its_last_finding(name: str) -> None:
    # A line pasted from a ticket or written with `echo -n` has no line end: the Xid or lost GPU on the last line
    # must not vanish while the log is still called checked.
    text = health_fixture(name)
    whole = read_health(text)
    assert whole.findings
    assert whole.critical and read_health(text.rstrip("\n")) == whole


def test_a_last_line_cut_inside_the_xid_code_is_not_read() -> None:
    # "Xid (...): 7" may be the start of 79 (or 74): no code is read from it, and the input is not called checked.
    report = read_health("[ 1843.308145] NVRM: Xid (PCI:0000:9b:00): 7")
    assert report.findings == () and report.unreadable is not None
    report = read_health("[ 1843.308145] NVRM: Xid (PCI:0000:9b:00): 79, pid=1")
    assert ids(report) == [("xid", "critical", "0000:9b:00")]


def test_a_gpu_fallen_off_the_bus_without_an_xid() -> None:
    report = read_health(health_fixture("36_dmesg_fallen_off_the_bus_without_xid.txt"))
    assert ids(report) == [("gpu-lost", "critical", "0000:b3:00.0")]  # the address is on the line before


def test_nvidia_smi_saying_gpu_is_lost() -> None:
    report = read_health(health_fixture("35_nvidia-smi_gpu_is_lost.txt"))
    assert ids(report) == [("gpu-lost", "critical", "0000:02:00.0")]
    assert report.checked == ("gpu-lost",)


def test_a_gpu_the_driver_could_not_initialise_is_lost_not_healthy() -> None:
    # nvidia-smi's "No devices were found" with the kernel's RmInitAdapter failure beside it: the GPU is unusable.
    report = read_health(health_fixture("18_nvidia-smi_no_devices_found_rminitadapter_failed.txt"))
    assert ids(report) == [("gpu-lost", "critical", "0000:01:00.0")]
    assert "could not initialise" in report.findings[0].message and "rm_init_adapter failed" in report.findings[0].message
    assert report.critical


@pytest.mark.parametrize(
    "name",
    [
        "13_cuda-bandwidthTest_error802_system_not_yet_initialized.txt",
        "19_dcgmi-diag-r2_a100_pcie_fail_nvlink_down_warnings.txt",
        "20_dcgmi-health-c_a100-pcie_nvlink_failure.txt",
        "21_k8s-node-condition_nvsentinel_GpuNvlinkWatch_gb300.txt",
        "22_kubectl-describe-node_labels_autopilot_dcgm_row_remap_evict.txt",
    ],
)
def test_fault_reports_in_formats_it_does_not_read_are_unreadable_never_healthy(name: str) -> None:
    # Real fault outputs of other tools (a CUDA error, dcgmi diag and health, node conditions and labels): the
    # reader must say it cannot judge them (exit 2), not report them healthy (exit 0).
    report = read_health(health_fixture(name))
    assert report.unreadable is not None and report.checked == () and report.findings == ()


def test_two_of_six_nvlinks_inactive_on_a_real_v100() -> None:
    report = read_health(health_fixture("33_nvidia-smi-nvlink-s_v100_links_inactive.txt"))
    assert ids(report) == [("nvlink-inactive", "critical", "3")]
    assert "link(s) 3, 5 of 6 inactive" in report.findings[0].message


def test_healthy_nvlinks_are_checked_with_no_finding() -> None:
    report = read_health(health_fixture("04_nvidia-smi-nvlink-status_a100x8_healthy.txt"))
    assert report.findings == () and report.checked == ("nvlink-inactive",)


@pytest.mark.parametrize(("expected", "severity"), [(None, "warning"), (True, "critical")])
def test_every_link_down_depends_on_whether_the_size_has_nvlink(expected: bool | None, severity: str) -> None:
    # dcgmi on two GPUs with all 18 links down: a PCIe GPU without a bridge shows the same (see fixture 20).
    report = read_health(health_fixture("06_dcgmi-nvlink-link-status_all_down.txt"), nvlink_expected=expected)
    assert ids(report) == [("nvlink-inactive", severity, "0"), ("nvlink-inactive", severity, "1")]


def test_every_link_down_is_no_finding_where_the_size_has_no_nvlink() -> None:
    report = read_health(health_fixture("06_dcgmi-nvlink-link-status_all_down.txt"), nvlink_expected=False)
    assert report.findings == () and report.checked == ("nvlink-inactive",)


def test_amd_correctable_ecc_only_is_checked_and_healthy() -> None:
    report = read_health(health_fixture("09_amd-smi-metric-ecc_mi300x_umc_correctable.txt"))
    assert report.findings == () and report.checked == ("ras-uncorrectable",)


def test_amd_uncorrectable_block_errors() -> None:
    correctable_only = health_fixture("09_amd-smi-metric-ecc_mi300x_umc_correctable.txt")
    text = correctable_only.replace("UNCORRECTABLE_COUNT: 0", "UNCORRECTABLE_COUNT: 3")
    report = read_health(text)
    assert ids(report) == [("ras-uncorrectable", "critical", None)]
    assert "3 uncorrectable RAS error(s) in block UMC" in report.findings[0].message


def test_amd_smi_metric_ecc_json_with_totals() -> None:
    # The keys amd-smi's metric --ecc writes (amdsmi_cli/amdsmi_commands.py: total_correctable_count, ...).
    document = [
        {"gpu": 0, "ecc": {"total_correctable_count": 2, "total_uncorrectable_count": 0, "total_deferred_count": 0}},
        {"gpu": 1, "ecc": {"total_correctable_count": 0, "total_uncorrectable_count": 5, "total_deferred_count": 0}},
    ]
    report = read_health(json.dumps(document, indent=4))
    assert ids(report) == [("ras-uncorrectable", "critical", "1")]


def test_rocm_smi_ras_info_table() -> None:
    # The layout rocm-smi's showRasInfo prints (rocm_smi_lib python_smi_tools/rocm_smi.py: printTableLog);
    # no published output with errors was found.
    text = (
        "============================ ROCm System Management Interface ============================\n"
        "======================================= RAS Info =======================================\n"
        "\nGPU[0]: \tRAS INFO\n"
        "         Block       Status    Correctable Error  Uncorrectable Error  \n"
        "           UMC       ENABLED                  0                    2  \n"
        "          SDMA       ENABLED                  0                    0  \n"
        "___________________________________________________________________________\n"
    )
    report = read_health(text)
    assert ids(report) == [("ras-uncorrectable", "critical", "0")]
    assert "block UMC (status ENABLED)" in report.findings[0].message


# ---------------------------------------------------------------- one value changed in a real output


def only(report: HealthReport, finding_id: str) -> list[tuple[str, str, str | None]]:
    return [item for item in ids(report) if item[0] == finding_id]


def test_a_narrow_pcie_link_on_real_cloud_gpus() -> None:
    # Both telegraf outputs (a T4 and an A10G, bus 00:1E.0) run their x16 link at x8, the T4 at P0.
    for name in (T4_XML, "27_nvidia-smi-q-x_a10g_515.105.01.xml.txt"):
        report = read_health(smi_fixture(name))
        assert ids(report) == [("pcie-degraded", "warning", "00000000:00:1E.0")]
        assert "x8 of x16" in report.findings[0].message and "idle" in report.findings[0].message


def test_volatile_uncorrectable_ecc_is_critical() -> None:
    a100 = smi_fixture("25_nvidia-smi-q-x_a100-sxm4_mig_535.54.03.xml.txt")
    volatile = a100.index("<ecc_errors>")
    text = a100[:volatile] + a100[volatile:].replace("<dram_uncorrectable>0<", "<dram_uncorrectable>2<", 1)
    assert only(read_health(a100), "ecc-uncorrectable") == []
    report = read_health(text)
    assert ids(report) == [("ecc-uncorrectable", "critical", "00000000:01:00.0")]
    assert report.findings[0].message.startswith("2 uncorrectable ECC error(s) since the driver loaded (dram_uncorrectable 2)")


def test_aggregate_uncorrectable_ecc_only_is_a_warning() -> None:
    a100 = smi_fixture("25_nvidia-smi-q-x_a100-sxm4_mig_535.54.03.xml.txt")
    aggregate = a100.index("<aggregate>")
    text = a100[:aggregate] + a100[aggregate:].replace("<dram_uncorrectable>0<", "<dram_uncorrectable>7<", 1)
    assert ids(read_health(text)) == [("ecc-uncorrectable", "warning", "00000000:01:00.0")]


def test_pending_page_retirement_is_critical() -> None:
    t4 = smi_fixture(T4_XML)
    assert "retired-pages-pending" in read_health(t4).checked and only(read_health(t4), "retired-pages-pending") == []
    text = t4.replace("<pending_retirement>No</pending_retirement>", "<pending_retirement>Yes</pending_retirement>")
    assert only(read_health(text), "retired-pages-pending") == [("retired-pages-pending", "critical", "00000000:00:1E.0")]


def test_row_remap_failure_is_critical() -> None:
    text = health_fixture(A10_REMAP).replace("Remapping Failure Occurred        : No", "Remapping Failure Occurred        : Yes")
    assert ids(read_health(text)) == [
        ("row-remap-failure", "critical", "00000000:07:00.0"),
        ("row-remap-pending", "critical", "00000000:07:00.0"),
    ]


def test_the_default_table_volatile_ecc_column() -> None:
    table = smi_fixture("04_nvidia-smi_table_4xa100_555.42.02.txt")
    healthy = read_health(table)
    assert healthy.findings == () and healthy.checked == ("ecc-uncorrectable", "gpu-lost")


# ---------------------------------------------------------------- what was not read is not claimed


def test_a_t4_checks_what_its_xml_shows() -> None:
    report = read_health(smi_fixture(T4_XML))
    # Turing: no row remapper (remapped_rows N/A) and no NVSwitch fabric, so those are not claimed.
    assert report.checked == ("ecc-uncorrectable", "retired-pages-pending", "gpu-lost", "hw-slowdown", "pcie-degraded")


def test_a_consumer_gpu_without_ecc_does_not_claim_ecc() -> None:
    report = read_health(smi_fixture("28_nvidia-smi-q-x_rtx3080_v13_595.58.03.xml.txt"))
    assert "ecc-uncorrectable" not in report.checked


@pytest.mark.parametrize(
    "name",
    [
        "30_nvidia-smi_L_8xh100_mig_7x1g.10gb.txt",
        # A --query-gpu CSV of the GPUs' identity only (its all-fields sibling 10 shows throttle reasons: read now).
        "12_query-gpu_csv_h100pcie_mig_enabled.txt",
        "50_amd-smi_default_8xmi300x_rocm7.0.0.txt",
    ],
)
def test_an_output_with_no_health_data_is_unreadable_not_healthy(name: str) -> None:
    report = read_health(smi_fixture(name))
    assert report.findings == () and report.checked == ()
    assert report.unreadable is not None and "shows no GPU health data" in report.unreadable


def test_an_amd_kernel_log_says_nothing_about_xids() -> None:
    report = read_health(health_fixture("11_dmesg_amdgpu_ring_gfx_timeout_gpu_reset.txt"))
    assert report.checked == () and report.unreadable is not None


def test_a_kernel_log_named_nvidia_is_checked_for_xids_even_without_nvrm_lines() -> None:
    report = read_health("[Fri Aug 30 11:11:22 2024] nvidia-peermem nv_get_p2p_free_callback:127 ERROR\n", "nvidia")
    assert report.findings == () and report.checked == ("xid", "gpu-lost", "gpu-reset-required")


def test_unknown_xid_codes_are_warnings_with_the_catalog() -> None:
    report = read_health("kernel: NVRM: Xid (PCI:0000:18:00): 999, pid=1, name=x, something new\n")
    assert ids(report) == [("xid", "warning", "0000:18:00")]
    assert "not in NVIDIA's Xid catalog" in report.findings[0].message


def test_one_pass_gives_the_report_and_the_health() -> None:
    report, health = read_smi_and_health(smi_fixture(T4_XML))
    assert report.format == "nvidia-smi -q -x" and report.gpus[0].name == "Tesla T4"
    assert health.checked[0] == "ecc-uncorrectable"


def test_the_json_contract() -> None:
    report = read_health(health_fixture(A10_REMAP))
    data = report.to_dict()
    assert list(data) == ["findings", "checked", "not_checked", "incomplete"]
    assert list(data["findings"][0]) == ["id", "severity", "gpu", "message"]  # type: ignore[index]
    assert set(FINDING_IDS) == {
        "ecc-uncorrectable",
        "row-remap-failure",
        "row-remap-pending",
        "retired-pages-pending",
        "xid",
        "gpu-lost",
        "gpu-reset-required",
        "hw-slowdown",
        "pcie-degraded",
        "nvlink-inactive",
        "fabric-not-ready",
        "ras-uncorrectable",
    }
    assert Finding("xid", "warning", None, "m").to_dict() == {"id": "xid", "severity": "warning", "gpu": None, "message": "m"}


# ---------------------------------------------------------------- the Xid table


def test_the_xid_table_grades_by_nvidias_immediate_action() -> None:
    catalog = load_xid_catalog()
    assert catalog[79].immediate == "RESTART_BM" and catalog[79].severity == "critical"
    assert catalog[48].severity == "critical" and catalog[95].severity == "critical" and catalog[46].severity == "critical"
    for code in (13, 31, 43, 45, 63, 92, 94):
        assert catalog[code].severity == "warning", code
    for entry in catalog.values():
        assert entry.source == CATALOG_URL and entry.description and entry.mnemonic and entry.action
        assert entry.description != "Unused"
    assert critical_xid_codes() == tuple(sorted(c for c, e in catalog.items() if e.immediate in {
        "RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR", "CHECK_MECHANICALS"}))  # fmt: skip


def test_a_broken_xid_table_is_refused() -> None:
    with pytest.raises(XidCatalogError, match="bucket"):
        parse_xid_catalog({"buckets": {}, "xids": [{"code": 1, "immediate": "RESET_GPU"}]})
    with pytest.raises(XidCatalogError, match="twice"):
        bucket = {"RESET_GPU": {"severity": "critical", "action": "a"}}
        parse_xid_catalog({"buckets": bucket, "xids": [{"code": 1, "immediate": "RESET_GPU"}] * 2})
    with pytest.raises(XidCatalogError, match="severity 'fatal'"):
        bucket = {"RESET_GPU": {"severity": "critical", "action": "a"}}
        parse_xid_catalog({"buckets": bucket, "xids": [{"code": 1, "immediate": "RESET_GPU", "severity": "fatal"}]})


# ---------------------------------------------------------------- Node Problem Detector conditions


def node_with(conditions: Any) -> dict[str, Any]:
    return {"metadata": {"name": "aks-train-31415926-vmss000000"}, "status": {"conditions": conditions}}


def npd(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": "2025-06-01T03:57:41Z"}


def test_gpu_conditions_are_read_and_others_ignored() -> None:
    node = node_with(
        [
            {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            npd("KubeletProblem", "False", "KubeletIsUp", "kubelet service is up"),
            npd("XIDErrors", "True", "XIDErrors", "XID errors present in kernel log"),
            npd("GPUMissing", "False", "GPUMissing", "Observed GPU count matches expected GPU count"),
            npd("GPUClockThrottling", "True", "GPUClockThrottling", "Problematic GPU clock throttling detected"),
        ]
    )
    conditions = read_gpu_conditions(node)
    assert [(c.type, c.active, c.severity) for c in conditions] == [
        ("XIDErrors", True, "critical"),
        ("GPUMissing", False, "critical"),
        ("GPUClockThrottling", True, "warning"),
    ]
    assert conditions[0].message == "XID errors present in kernel log" and conditions[0].last_transition == "2025-06-01T03:57:41Z"


def test_the_gpu_condition_types_aks_documents() -> None:
    assert {"GPUMissing", "XIDErrors", "NVLinkStatusInactive", "IBLinkFlapping"} <= set(GPU_CONDITIONS)
    assert "GPUXIDErrors" in GPU_CONDITIONS  # the name the GPU health page uses for the same check


@pytest.mark.parametrize(
    "node",
    [{}, {"status": "x"}, {"status": {"conditions": "x"}}, node_with(["x", 3, None]), node_with([{"type": ["GPUMissing"]}])],
    ids=["empty", "string-status", "string-conditions", "junk-entries", "list-type"],
)
def test_any_node_shape_reads_without_error(node: dict[str, Any]) -> None:
    assert read_gpu_conditions(node) == ()
