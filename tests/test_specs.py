"""The TypedDict specs (what public components take) and the pydantic models (the rules) name the same keys."""

from __future__ import annotations

import typing
from typing import Any

import pulumi
import pytest
from pydantic import BaseModel

from aks_gpu import specs
from aks_gpu.config import models

PAIRS: list[tuple[type[Any], type[BaseModel]]] = [
    (specs.StackSpec, models.StackConfig),
    (specs.PlatformSpec, models.PlatformConfig),
]


def nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = nested_model(arg)
        if found is not None:
            return found
    return None


def nested_spec(annotation: Any) -> Any:
    if typing.is_typeddict(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        found = nested_spec(arg)
        if found is not None:
            return found
    return None


def walk(spec: Any, model: type[BaseModel], path: str, seen: list[str]) -> None:
    # pulumi.Input[T] refers to "Output" by name.
    hints = typing.get_type_hints(spec, localns=vars(pulumi.output))
    fields = model.model_fields
    assert set(hints) == set(fields), f"{path}: spec {sorted(set(hints) ^ set(fields))} differ from {model.__name__}"
    required = {name for name, field in fields.items() if field.is_required()}
    assert set(spec.__required_keys__) == required, f"{path}: required keys differ from {model.__name__}"
    seen.append(spec.__name__)
    for name, field in fields.items():
        inner_model = nested_model(field.annotation)
        inner_spec = nested_spec(hints[name])
        assert (inner_model is None) == (inner_spec is None), f"{path}.{name}: one side is nested, the other is not"
        if inner_model is not None:
            walk(inner_spec, inner_model, f"{path}.{name}", seen)


@pytest.mark.parametrize(("spec", "model"), PAIRS)
def test_specs_mirror_the_models(spec: Any, model: type[BaseModel]) -> None:
    seen: list[str] = []
    walk(spec, model, spec.__name__, seen)
    assert len(seen) > 10


def test_a_stack_file_validates_through_its_spec_shape() -> None:
    from tests.conftest import stack_config

    config = stack_config("prod")
    as_spec = config.model_dump(exclude_defaults=True)
    assert models.StackConfig.model_validate(as_spec) == config
