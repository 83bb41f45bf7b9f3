"""Every stack file in stacks/ validates, and the committed JSON Schema matches the models."""

from __future__ import annotations

import json

import pytest

from aks_gpu.config.schema import SCHEMA_FILE_NAME, stack_file_schema
from tests.conftest import STACK_NAMES, STACKS_DIR, stack_config


def test_the_three_environments_exist() -> None:
    assert {"dev", "prod"} <= set(STACK_NAMES)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_stack_file_validates(stack: str) -> None:
    config = stack_config(stack)
    assert config.cluster.name
    assert config.gpu_pools, "a GPU stack without GPU pools"


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_stack_file_points_editors_at_the_schema(stack: str) -> None:
    first_line = (STACKS_DIR / f"Pulumi.{stack}.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first_line == f"# yaml-language-server: $schema=./{SCHEMA_FILE_NAME}"


def test_committed_schema_matches_the_models() -> None:
    committed = json.loads((STACKS_DIR / SCHEMA_FILE_NAME).read_text(encoding="utf-8"))
    assert committed == stack_file_schema(), "run `make schema` to regenerate stacks/stack-config.schema.json"


def test_prod_mirrors_the_article_scenario() -> None:
    config = stack_config("prod")
    assert [w.name for w in config.workloads] == ["gpu-training", "gpu-inference"]
    assert config.admission.validation_actions == ("Deny",)


def test_dev_is_small_and_cheap() -> None:
    config = stack_config("dev")
    assert all(p.spot or p.min_count == 0 for p in config.gpu_pools)
    assert config.admission.validation_actions == ("Warn", "Audit")
