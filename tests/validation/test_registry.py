"""The check registry is the one list: the CheckId type, the CLI help and the table of docs/validation.md are rendered from it."""

from __future__ import annotations

import typing

import pytest

from aks_gpu.cli import main
from aks_gpu.validation.registry import CHECK_IDS, CHECKS, CheckId, help_text, markdown_table
from tests.conftest import PROJECT_DIR


def test_every_check_id_has_one_entry_in_order() -> None:
    assert typing.get_args(CheckId) == CHECK_IDS
    assert all(check.scope in ("pool", "node", "pool, node") and check.passes_when for check in CHECKS)


def test_the_docs_table_is_the_registry() -> None:
    docs = (PROJECT_DIR / "docs" / "validation.md").read_text(encoding="utf-8")
    assert markdown_table() in docs, "docs/validation.md's table is stale: paste aks_gpu.validation.registry.markdown_table()"


def test_the_cli_help_lists_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    help_page = capsys.readouterr().out
    assert help_text() in help_page
