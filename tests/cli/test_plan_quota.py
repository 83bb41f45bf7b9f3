"""`aksgpu plan` prints the compute quota the stack needs: per family and the regional total, with how to request it."""

from __future__ import annotations

from pathlib import Path

import pytest

from aks_gpu.azure.quota import QUOTA_REQUEST_DOC, load_quota_facts, quota_plan
from aks_gpu.cli import main
from tests.conftest import PROJECT_DIR, stack_config


def test_plan_prints_each_family_the_total_and_how_to_request_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", "prod", "--out", str(tmp_path), "--project-dir", str(PROJECT_DIR), "--wide"]) == 0
    printed = capsys.readouterr().out
    h100 = load_quota_facts().size("Standard_ND96isr_H100_v5")
    lines = printed.splitlines()
    at = next(index for index, line in enumerate(lines) if "standardNDSH100v5Family" in line and "│" in line)
    row, below = lines[at], lines[at + 1]
    # One family, two pools of 96 vCPUs a node: train 4 nodes at maxCount plus 1 surge node, inferfull 2 plus 1.
    assert f"train (Standard_ND96isr_H100_v5: 4+1 x {h100.vcpus})" in row and "Standard NDSH100v5 Family vCPUs" in row
    assert f"{(5 + 3) * (h100.vcpus or 0)}" in row
    assert f"inferfull (Standard_ND96isr_H100_v5: 2+1 x {h100.vcpus})" in below and "standardNDSH100v5Family" not in below
    total = next(line.vcpus for line in quota_plan(stack_config("prod")).lines if line.kind == "total")
    assert any("Total Regional vCPUs" in line and str(total) in line for line in printed.splitlines())
    assert QUOTA_REQUEST_DOC in printed
    assert "az quota update --resource-name 'standardNDSH100v5Family'" in printed
    assert "/locations/swedencentral" in printed
    # The CPU pool (3 + 1 surge nodes of 8 vCPUs) shares the system pool's DDSv5 family: 16 + 32 vCPUs in one request.
    assert "cpu (Standard_D8ds_v5: 3+1 x 8)" in printed
    assert "az quota update --resource-name 'standardDDSv5Family'" in printed and "value=<used + 48>" in printed
