"""Generated input for every SMI parser and the health reader (hypothesis, a bounded budget per test).

Three properties: no text makes them raise; what they report has the shape it promises (valid JSON, versions that
are versions, ids from the contract); and an output cut anywhere never yields a value the whole output does not
have (a timed-out exec keeps partial output: 470.82.01 must not come back as 470.8).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aks_gpu.gpu.health import FINDING_IDS, read_gpu_conditions, read_health, read_smi_and_health
from aks_gpu.gpu.smi import parse_mig_profiles, parse_smi
from aks_gpu.gpu.smi.text import decimal, integer, memory_mib, noise_line, total_memory_mib
from tests.conftest import HEALTH_FIXTURES_DIR, SMI_FIXTURES_DIR

# Deterministic (the same examples on every run and machine) and bounded: the suite stays fast on 2 cores.
BUDGET = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SMALL = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

FIXTURES = sorted(
    [path for path in SMI_FIXTURES_DIR.glob("*.txt")] + [path for path in HEALTH_FIXTURES_DIR.glob("*.txt")],
    key=lambda path: path.name,
)
_TEXTS = {path: path.read_text(encoding="utf-8") for path in FIXTURES}
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)+(-[0-9A-Za-z._+~-]+)?", re.ASCII)

# Text built from the pieces SMI outputs are made of, so generated input reaches deep into the parsers.
_PIECES = st.sampled_from(
    [
        "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |\n",
        "|=====+=====|\n", "+-----+-----+\n", "| 0  Tesla T4  Off | 00000000:00:1E.0 Off | 0 |\n",
        "|  1MiB / 15360MiB |\n", "==============NVSMI LOG==============\n", "Driver Version : 535.1\n",
        "GPU 00000000:53:00.0\n", "    ECC Errors\n", "        Volatile\n", "            DRAM Uncorrectable : 3\n",
        "    Remapped Rows\n", "        Pending : Yes\n", "<nvidia_smi_log>", "</nvidia_smi_log>", '<gpu id="00000000:01:00.0">',
        "</gpu>", "<product_name>A100</product_name>", "<fabric><state>In Progress</state></fabric>",
        "GPU 0: NVIDIA H100 (UUID: GPU-1)\n", "\tLink 0: 25 GB/s\n", "\tLink 1: <inactive>\n",
        "index, name, uuid, driver_version\n", "0, H100, GPU-63d1e50a-b952-d15c-0740-12bc14859142, 565.57.01\n",
        "pid, process_name, used_gpu_memory [MiB]\n", "GPU: 0\n", "    ASIC:\n", "        MARKET_NAME: MI300X\n",
        "    ECC:\n", "        TOTAL_UNCORRECTABLE_COUNT: 2\n",
        "AMDSMI Tool: 1 | ROCm version: 6.2.0 | amdgpu version: 6.8.0-1-x\n",
        "ROCm System Management Interface\n", "Driver version: 6.14.0-28-generic\n", "GPU[0]\t\t: VRAM Total Memory (B): 9\n",
        "[ 12.5] NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.\n", "kernel: NVRM: Xid (PCI:x): 99999999, \n",
        '[{"gpu": 0, "asic": {"market_name": "x"}, "vram": {"size": {"value": 1e999, "unit": "MB"}}}]\n',
        "        GPU0    GPU1    CPU Affinity\nGPU0     X      NV12    0-1\n", "\x1b[31m", "\r\n", "²", "9" * 50, " " * 30,
    ]
)  # fmt: skip
STRUCTURED = st.lists(st.one_of(_PIECES, st.text(max_size=40)), max_size=30).map("".join)


def check_report_shape(text: str) -> None:
    report = parse_smi(text)
    data = report.to_dict()
    json.dumps(data, allow_nan=False)
    assert (report.error is None) == (report.format is not None) or report.error is not None
    for found in (report.driver_version, report.cuda_version, report.rocm_version, report.kernel_driver):
        assert found is None or _VERSION.fullmatch(found), found
    for gpu in report.gpus:
        assert gpu.memory_total_mib is None or 0 <= gpu.memory_total_mib <= 1 << 40
        assert gpu.mig_mode in (None, "Enabled", "Disabled")


@BUDGET
@given(st.text(max_size=400))
def test_any_text_gives_a_report(text: str) -> None:
    check_report_shape(text)


@BUDGET
@given(STRUCTURED)
def test_text_made_of_smi_pieces_gives_a_report(text: str) -> None:
    check_report_shape(text)
    parse_mig_profiles(text)


@BUDGET
@given(STRUCTURED)
def test_the_health_reader_keeps_its_contract(text: str) -> None:
    report, health = read_smi_and_health(text)
    data = health.to_dict()
    json.dumps(data, allow_nan=False)
    assert set(health.checked) <= set(FINDING_IDS)
    assert list(health.checked) == [id_ for id_ in FINDING_IDS if id_ in health.checked]  # contract order
    for finding in health.findings:
        assert finding.id in health.checked  # no finding about what was not read
        assert finding.severity in ("critical", "warning") and finding.message
    assert health.critical == any(finding.severity == "critical" for finding in health.findings)
    assert (health.unreadable is None) == bool(health.checked or health.findings)
    assert report == parse_smi(text)  # the one pass reads what parse_smi reads


def _values(text: str) -> dict[str, object]:
    report = parse_smi(text)
    return {
        "driver": report.driver_version,
        "cuda": report.cuda_version,
        "rocm": report.rocm_version,
        "kernel": report.kernel_driver,
        "gpus": [(gpu.index, gpu.name, gpu.memory_total_mib, gpu.uuid, gpu.mig_mode, gpu.bus_id) for gpu in report.gpus],
    }


def _gpus_agree(cut: object, whole: object) -> bool:
    """Each GPU of the cut output is the whole output's GPU at that place, with some values not (yet) known."""
    assert isinstance(cut, list) and isinstance(whole, list)
    pairs = zip(cut, whole, strict=False)
    return len(cut) <= len(whole) and all(
        part is None or part == full for partial, complete in pairs for part, full in zip(partial, complete, strict=True)
    )


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIXTURES), st.floats(min_value=0, max_value=1))
def test_a_cut_output_never_reports_a_value_the_whole_does_not_have(path: Path, where: float) -> None:
    text = _TEXTS[path]
    whole = _values(text)
    cut = _values(text[: int(len(text) * where)])
    for key in ("driver", "cuda", "rocm", "kernel"):
        assert cut[key] in (None, whole[key]), (path.name, key, cut[key], whole[key])
    assert _gpus_agree(cut["gpus"], whole["gpus"]), (path.name, cut["gpus"])


@SMALL
@given(st.sampled_from(FIXTURES), st.floats(min_value=0, max_value=1))
def test_a_cut_output_never_adds_a_health_finding_the_whole_does_not_have(path: Path, where: float) -> None:
    text = _TEXTS[path]
    whole = {(f.id, f.gpu) for f in read_health(text).findings}
    cut = {(f.id, f.gpu) for f in read_health(text[: int(len(text) * where)]).findings}
    # A cut may lose the line that named the GPU (the event stays, its GPU unnamed), never add a GPU or an id.
    unnamed = {(id_, None) for id_, _ in whole}
    assert cut <= whole | unnamed, (path.name, cut - whole)


@SMALL
@given(st.text(max_size=60))
def test_number_readers_never_raise_and_only_read_ascii_digits(text: str) -> None:
    number = integer(text)
    if number is not None:
        digits = text.strip()
        assert digits.isascii() and digits.isdigit() and int(digits) == number
    assert decimal(text) is None or abs(decimal(text) or 0) < 1e15
    memory_mib(text, "MiB")
    total_memory_mib(text)


_FIELDS = [
    ("index", lambda n: str(n)),
    ("name", lambda n: "NVIDIA H100 80GB HBM3"),
    ("uuid", lambda n: f"GPU-63d1e50a-b952-d15c-0740-12bc1485914{n}"),
    ("driver_version", lambda n: "565.57.01"),
    ("memory.total [MiB]", lambda n: "81559 MiB"),
    ("pci.bus_id", lambda n: f"00000000:{18 + n:02X}:00.0"),
    ("temperature.gpu", lambda n: "31"),
    ("clocks.sm [MHz]", lambda n: "1980 MHz"),
    ("ecc.errors.uncorrected.volatile.total", lambda n: "0"),
    ("pcie.link.width.current", lambda n: "16"),
    ("vgpu_driver_capability.heterogenous_multivGPU", lambda n: "No"),
]


_FIELD_CHOICE = st.permutations(_FIELDS).flatmap(lambda fields: st.tuples(st.just(fields), st.integers(2, len(fields))))


@BUDGET
@given(_FIELD_CHOICE, st.integers(1, 4))
def test_query_gpu_csv_in_any_field_order(chosen: tuple[list[tuple[str, object]], int], gpus: int) -> None:
    fields, count = chosen
    fields = fields[:count]
    header = ", ".join(name for name, _ in fields)
    rows = [", ".join(make(n) for _, make in fields) for n in range(gpus)]  # type: ignore[operator]
    report = parse_smi("\n".join([header, *rows]) + "\n")
    names = [name.split(" ")[0] for name, _ in fields]
    if not set(names) & {"index", "name", "uuid", "driver_version", "memory.total", "pci.bus_id"}:
        assert report.error is not None  # no field it knows: nothing is guessed from the others
        return
    assert report.error is None and len(report.gpus) == gpus
    for n, gpu in enumerate(report.gpus):
        assert gpu.index == (n if "index" in names else None)
        assert gpu.uuid == (f"GPU-63d1e50a-b952-d15c-0740-12bc1485914{n}" if "uuid" in names else None)
        assert gpu.memory_total_mib == (81559 if "memory.total" in names else None)
    assert report.driver_version == ("565.57.01" if "driver_version" in names else None)


_CONDITION = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["GPUMissing", "XIDErrors", "Ready", "x"]),
        "status": st.sampled_from(["True", "False", "Unknown", ""]),
    },
    optional={
        "reason": st.text(max_size=10),
        "message": st.one_of(st.text(max_size=20), st.integers()),
        "lastTransitionTime": st.none(),
    },
)
_JUNK = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=5)), lambda inner: st.lists(inner, max_size=3), max_leaves=8
)
_CONDITIONS = st.one_of(_JUNK, st.lists(st.one_of(_CONDITION, _JUNK), max_size=6))


@BUDGET
@given(_CONDITIONS, st.one_of(st.just("conditions"), st.text(max_size=4)))
def test_node_conditions_of_any_shape(conditions: object, key: str) -> None:
    for condition in read_gpu_conditions({"status": {key: conditions}}):
        assert condition.type in ("GPUMissing", "XIDErrors") and condition.active == (condition.status == "True")


# ---------------------------------------------------------------- one rule for every reader (issue 26)
#
# An output in a format a reader recognises that is not read whole is never "healthy" and never "0 GPUs": what was
# not read is named (the report's truncated or error, the health report's incomplete or not_checked).


@SMALL
@given(st.sampled_from(FIXTURES), st.floats(min_value=0.02, max_value=0.995))
def test_an_output_cut_inside_a_line_is_never_healthy_and_never_zero_gpus(path: Path, where: float) -> None:
    text = _TEXTS[path]
    at = int(len(text) * where)
    # Inside a line: the cut leaves a partial last line (a cut at a line end is a shorter output for most formats).
    assume(0 < at < len(text) and text[at - 1] != "\n" and text[at] != "\n" and text[:at].strip())
    # A cut inside a shell prompt or kubectl's notice after the output cuts nothing of the output.
    assume(not noise_line(text[:at].rsplit("\n", 1)[-1]))
    whole_report, _ = read_smi_and_health(text)
    report, health = read_smi_and_health(text[:at])
    assert not health.healthy, (path.name, at, health)
    if whole_report.gpus and report.format == whole_report.format:
        assert report.gpus or report.truncated or report.error is not None, (path.name, at)


_PREFIXES = {
    "kubectl-timestamps": "2026-11-30T08:15:02.123456789Z ",
    "journald": "Nov 30 08:15:02 aks-gpu-12345678-vmss000000 collector[4242]: ",
    # Parallel shells (issue 35): pdsh and clush print "host: ", others "host out: "; over journald's too.
    "pdsh": "aks-gpu-12345678-vmss000000: ",
    "host-out": "nid005113 out: ",
    "pdsh-over-journald": "nid005113: Nov 30 08:15:02 nid005113 collector[4242]: ",
}


@pytest.mark.parametrize("prefix", sorted(_PREFIXES))
@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: path.name.split("_")[0] + path.parent.name[0])
def test_a_log_collectors_line_prefix_changes_nothing_read(path: Path, prefix: str) -> None:
    text = _TEXTS[path]
    prefixed = "".join(_PREFIXES[prefix] + line for line in text.splitlines(keepends=True))
    whole, read = read_smi_and_health(text), read_smi_and_health(prefixed)
    assert (read[0].format, read[0].gpus, read[0].driver_version, read[0].truncated) == (
        whole[0].format,
        whole[0].gpus,
        whole[0].driver_version,
        whole[0].truncated,
    ), path.name
    assert (read[0].error is None) == (whole[0].error is None), path.name
    assert {(f.id, f.severity, f.gpu) for f in read[1].findings} == {(f.id, f.severity, f.gpu) for f in whole[1].findings}
    assert read[1].healthy == whole[1].healthy, path.name
