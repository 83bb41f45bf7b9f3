"""GPU outputs, round 4 (issue 35): field names as the driver prints them, capitals inside the first part too; a
parallel shell's host before each line; what the output says about the hardware (SXM has NVLink); one GPU listed
twice."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aks_gpu.gpu.health import read_health
from aks_gpu.gpu.smi import parse_smi
from tests.conftest import HEALTH_FIXTURES_DIR, SMI_FIXTURES_DIR
from tests.gpu.test_smi_cli import run


def test_a_query_gpu_header_with_a_field_named_in_camel_case_is_read() -> None:
    # A real --query-gpu CSV (465.27, tests/fixtures/smi/SOURCES.md) with one column added the way driver 580
    # names it, `dramEncryption.mode.current`: capitals inside the first part of the name. The one changed thing.
    header, row = (SMI_FIXTURES_DIR / "10_query-gpu_csv_rtx2080super_465.27.txt").read_text(encoding="utf-8").splitlines()[:2]
    report = parse_smi(f"{header}, dramEncryption.mode.current\n{row}, Disabled\n")
    assert report.format == "nvidia-smi --query-gpu"
    assert [(g.index, g.name, g.memory_total_mib) for g in report.gpus] == [(0, "NVIDIA GeForce RTX 2080 SUPER", 7979)]


# ---------------------------------------------------------------- a parallel shell's host before each line

_SMI_TEXTS = {path.name: path.read_text(encoding="utf-8") for path in sorted(SMI_FIXTURES_DIR.glob("*.txt"))}
_WITH_GPUS = sorted(name for name, text in _SMI_TEXTS.items() if parse_smi(text).gpus)


def _prefixed(text: str, *prefixes: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(prefixes[number % len(prefixes)] + line for number, line in enumerate(lines))


def test_aksgpu_smi_parse_reads_a_rocm_smi_output_pdsh_prefixed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The case: rocm-smi's concise table through a parallel shell, "nid005113 out: " before each line. It read
    # as 0 GPUs and no error; read now as the tool printed it. (Every fixture, each prefix: test_smi_properties.py.)
    source = tmp_path / "rocm-smi.txt"
    source.write_text(_prefixed(_SMI_TEXTS["58_rocm-smi_concise_mi355x_dpx_excerpt.txt"], "nid005113 out: "), encoding="utf-8")
    assert run(["smi", "parse", str(source)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], len(report["gpus"]), report["error"]) == ("rocm-smi", 8, None)


@pytest.mark.parametrize("name", _WITH_GPUS)
@pytest.mark.parametrize(
    "prefixes",
    [("nodea: ", "nodeb: "), ("nid005113 out: ", "nid005113 out: ", ""), ("[1] ",), ("| ",)],
    ids=["two-hosts", "one-line-without", "bracket", "bar"],
)
def test_an_output_with_gpus_never_reads_as_0_gpus_silently_whatever_the_prefix(name: str, prefixes: tuple[str, ...]) -> None:
    # Prefixes that are not read off (two hosts interleaved, a line without the host, shapes no collector prints):
    # the output is then either unrecognized, or recognized and says that its GPU rows could not be read.
    report = parse_smi(_prefixed(_SMI_TEXTS[name], *prefixes))
    assert report.gpus or report.error is not None or report.truncated, (name, report)


def test_a_rocm_smi_driver_version_alone_still_reads_with_no_gpu_and_no_error() -> None:
    for name in ("54_rocm-smi_showdriverversion_radeon680m.txt", "55_rocm-smi_showdriverversion_csv_kernel_el8.txt"):
        report = parse_smi(_SMI_TEXTS[name])
        assert (report.format, report.gpus, report.error) == ("rocm-smi", (), None)
        assert parse_smi(_prefixed(_SMI_TEXTS[name], "nodea: ", "nodeb: ")).error is not None


def test_a_dmesg_without_timestamps_is_no_host_output() -> None:
    # "NVRM: Xid ..." on every line has the shape of "host: ": the kernel's tag is not read off as a host.
    text = (HEALTH_FIXTURES_DIR / "48_kmsg_xid149_xid145_xid94_nvlink5_netir.txt").read_text(encoding="utf-8")
    assert len(read_health(text).findings) == 4


# ---------------------------------------------------------------- what the output says about the hardware

_NVLINK_FIXTURES = ("04_nvidia-smi-nvlink-status_a100x8_healthy.txt", "33_nvidia-smi-nvlink-s_v100_links_inactive.txt")


def _all_links_inactive(text: str) -> str:
    return re.sub(r"Link ([0-9]+): [0-9.]+ GB/s", r"Link \1: <inactive>", text)


@pytest.mark.parametrize("name", _NVLINK_FIXTURES)
def test_all_links_inactive_on_an_sxm_module_is_critical_without_a_vm_size(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A100-SXM4-80GB and V100-SXM2-32GB: SXM modules sit on NVLink baseboards; the name says so, no --vm-size needed.
    source = tmp_path / name
    source.write_text(_all_links_inactive((HEALTH_FIXTURES_DIR / name).read_text(encoding="utf-8")), encoding="utf-8")
    assert run(["smi", "health", str(source)]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert findings and {(f["id"], f["severity"]) for f in findings} == {("nvlink-inactive", "critical")}
    assert all("SXM module" in f["message"] for f in findings)


@pytest.mark.parametrize("name", _NVLINK_FIXTURES)
def test_all_links_inactive_on_a_name_that_says_nothing_stays_a_warning(name: str) -> None:
    text = _all_links_inactive((HEALTH_FIXTURES_DIR / name).read_text(encoding="utf-8"))
    pcie = re.sub(r"-SXM[0-9]-", " PCIe ", text)
    assert {f.severity for f in read_health(pcie).findings} == {"warning"}
    assert {f.severity for f in read_health(pcie, vm_size="Standard_ND96asr_v4").findings} == {"critical"}


# ---------------------------------------------------------------- one GPU listed twice

_WITH_BUS_IDS = sorted(
    name for name, text in _SMI_TEXTS.items() if sum(1 for gpu in parse_smi(text).gpus if gpu.bus_id) >= 2
)


def test_there_are_fixtures_of_every_vendor_with_bus_ids() -> None:
    assert {parse_smi(_SMI_TEXTS[name]).vendor for name in _WITH_BUS_IDS} == {"nvidia", "amd"}


@pytest.mark.parametrize("name", _WITH_BUS_IDS)
def test_one_gpu_listed_twice_is_read_once_and_said(name: str) -> None:
    text = _SMI_TEXTS[name]
    whole = parse_smi(text)
    first, second = [gpu.bus_id for gpu in whole.gpus if gpu.bus_id][:2]
    assert first is not None and second is not None
    report = parse_smi(text.replace(second, first))
    assert len(report.gpus) == len(whole.gpus) - 1, name
    assert report.error is not None and report.error.kind == "duplicate_gpu", name
    assert first in report.error.message and "twice" in report.error.message


def test_aksgpu_smi_parse_says_a_gpu_was_listed_twice(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = _SMI_TEXTS["02_nvidia-smi_table_8xh100_565.57.01.txt"]
    bus_ids = [gpu.bus_id for gpu in parse_smi(text).gpus if gpu.bus_id]
    source = tmp_path / "smi.txt"
    source.write_text(text.replace(bus_ids[1], bus_ids[0]), encoding="utf-8")
    assert run(["smi", "parse", str(source)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert len(report["gpus"]) == 7
    assert report["error"]["kind"] == "duplicate_gpu"
    assert f"{bus_ids[0]} (as GPU 0 and again as GPU 1)" in report["error"]["message"]
