"""GPU outputs, round 4 (issue 35): field names as the driver prints them, capitals inside the first part too."""

from __future__ import annotations

from aks_gpu.gpu.smi import parse_smi
from tests.conftest import SMI_FIXTURES_DIR


def test_a_query_gpu_header_with_a_field_named_in_camel_case_is_read() -> None:
    # A real --query-gpu CSV (465.27, tests/fixtures/smi/SOURCES.md) with one column added the way driver 580
    # names it, `dramEncryption.mode.current`: capitals inside the first part of the name. The one changed thing.
    header, row = (SMI_FIXTURES_DIR / "10_query-gpu_csv_rtx2080super_465.27.txt").read_text(encoding="utf-8").splitlines()[:2]
    report = parse_smi(f"{header}, dramEncryption.mode.current\n{row}, Disabled\n")
    assert report.format == "nvidia-smi --query-gpu"
    assert [(g.index, g.name, g.memory_total_mib) for g in report.gpus] == [(0, "NVIDIA GeForce RTX 2080 SUPER", 7979)]
