"""The findings registry is the one list: the table of docs/audit.md, the CLI help and the HTML report are rendered from it."""

from __future__ import annotations

import pytest

from aks_gpu.audit.registry import CHECKS, FINDING_IDS, PRACTICES, help_text, markdown_table
from aks_gpu.cli import main
from aks_gpu.gpu.health import FINDING_IDS as HEALTH_FINDING_IDS
from tests.conftest import PROJECT_DIR

# The contract of issue 15: these ids, these severities.
CONTRACT = {
    "gpu-node-untainted": "fail",
    "gpu-squatter": "fail",
    "gpu-pod-unfenced": "warn",
    "node-image-stale": "warn",
    "node-image-mixed": "warn",
    "gpu-idle": "warn",
    "device-plugin-missing": "fail",
}


def test_the_contract_ids_and_severities() -> None:
    severities = {check.id: check.severity for check in CHECKS}
    assert {finding: severities[finding] for finding in CONTRACT} == CONTRACT
    assert set(HEALTH_FINDING_IDS) <= set(FINDING_IDS)  # the SMI health findings, as `aksgpu smi health` names them
    assert len(FINDING_IDS) == len(set(FINDING_IDS))


def test_every_practice_has_checks_and_every_check_a_practice() -> None:
    practices = {practice.id for practice in PRACTICES}
    assert {check.practice for check in CHECKS} == practices


def test_the_docs_table_is_the_registry() -> None:
    docs = (PROJECT_DIR / "docs" / "audit.md").read_text(encoding="utf-8")
    assert markdown_table() in docs, "docs/audit.md's table is out of date: paste aks_gpu.audit.registry.markdown_table()"


def test_the_cli_help_lists_every_finding(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    help_page = capsys.readouterr().out

    assert help_text() in help_page
    for finding in FINDING_IDS:
        assert finding in help_page
