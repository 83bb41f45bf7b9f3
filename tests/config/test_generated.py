"""The config models are the one source: the component args TypedDicts, the key table of docs/config.md and both JSON schemas
are generated from them, stay in step with them, and carry each key's description."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from aks_gpu.config import generate, models
from aks_gpu.config.schema import stack_file_schema
from tests.conftest import PROJECT_DIR


@pytest.mark.parametrize("path", sorted(generate.outputs(), key=str), ids=lambda p: p.name)
def test_the_committed_file_is_what_the_models_generate(path: Any) -> None:
    assert path.read_text(encoding="utf-8") == generate.outputs()[path], f"{path.name} is stale: run make schema"


def test_every_field_of_every_model_is_described() -> None:
    missing = [
        f"{model.__name__}.{name}"
        for model in generate.config_models()
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert not missing


def _properties(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        for name, value in (schema.get("properties") or {}).items():
            yield f"{path}.{name}", value
        for key, value in schema.items():
            if key != "properties":
                yield from _properties(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for item in schema:
            yield from _properties(item, path)


def _undescribed(schema: Any, defs: dict[str, Any]) -> list[str]:
    """Properties with no description of their own nor of the definition they point at."""

    def described(value: dict[str, Any]) -> bool:
        if value.get("description"):
            return True
        ref = value.get("$ref") or next((item.get("$ref") for item in value.get("anyOf", []) if "$ref" in item), None)
        return bool(ref and defs.get(ref.rsplit("/", 1)[-1], {}).get("description"))

    return [path for path, value in _properties(schema) if not described(value)]


def test_the_editor_schema_describes_every_key() -> None:
    schema = stack_file_schema()
    assert not _undescribed(schema, schema["$defs"])
    # the same words as the models
    pool = schema["$defs"]["GpuPoolConfig"]["properties"]["migProfile"]
    assert pool["description"] == models.GpuPoolConfig.model_fields["mig_profile"].description


def test_the_component_schema_describes_every_input_with_the_models_words() -> None:
    schema = json.loads((PROJECT_DIR / "components" / "aks_gpu" / "schema.json").read_text(encoding="utf-8"))
    pool = schema["types"]["aks-gpu:index:GpuPoolSpec"]["properties"]
    assert pool["migProfile"]["description"].startswith(models.GpuPoolConfig.model_fields["mig_profile"].description)
    assert "One of: MIG1g, MIG2g, MIG3g, MIG4g, MIG7g." in pool["migProfile"]["description"]
    spec_types = {name: t for name, t in schema["types"].items() if name.endswith("Spec")}
    missing = [f"{t}.{p}" for t, d in spec_types.items() for p, v in d.get("properties", {}).items() if not v.get("description")]
    assert not missing
    # one line each: the inference copies a docstring as written
    assert not [p for t in spec_types.values() for p in t.get("properties", {}).values() if "\n" in p["description"]]


def test_the_readme_lists_every_key_once() -> None:
    table = generate.key_table()
    assert "`aks-gpu:gpuPools[].migProfile`" in table and "`MIG1g`, `MIG2g`" in table
    assert "`aks-gpu:workloads[].gpuQuota`" in table and "| required |" in table
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == len(set(rows)) > 120


def test_a_field_that_takes_an_output_is_an_input_in_the_args() -> None:
    from aks_gpu import specs

    hints = specs.WorkloadSpec.__annotations__
    assert hints["name"] == pulumi.Input[str] and hints["gpu_quota"] == pulumi.Input[int]  # type: ignore[misc]
    assert str(hints["pod_security"]) == "typing.NotRequired[str]" and specs.GpuPoolSpec.__annotations__["name"] is str
