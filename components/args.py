"""From a public component's ``args`` (TypedDicts, see ``components/specs.py``) to the validated, resolved
model, with errors reported the Pulumi way: a ``RunError`` listing every problem, and nothing registered."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, TypeVar, cast

import pulumi
from pydantic import BaseModel, ValidationError

from components.catalog import load_catalog
from components.config.loader import problems_from, validate_sections
from components.config.models import PlatformConfig, StackConfig
from components.config.problems import ConfigError
from components.config.rules import check_rules
from components.model import PlatformModel, resolve
from components.specs import PlatformSpec

SpecModel = TypeVar("SpecModel", bound=BaseModel)


def _run_error(component: str, problems: ConfigError) -> pulumi.RunError:
    lines = "\n".join(f"  {p.path}: {p.message}" for p in problems.errors)
    return pulumi.RunError(f"invalid args for {component}:\n{lines}")


def platform_model(args: Mapping[str, Any], component: str, own_keys: frozenset[str] = frozenset()) -> PlatformModel:
    """The platform model of the in-cluster sections among ``args``; ``own_keys`` are the component's other
    args. Any other key is refused: a misspelt section must not silently fall back to the defaults."""
    unknown = sorted(set(args) - set(PlatformConfig.model_fields) - own_keys)
    if unknown:
        allowed = ", ".join(sorted({*PlatformConfig.model_fields, *own_keys}))
        raise pulumi.RunError(f"invalid args for {component}:\n  unknown key(s) {', '.join(unknown)}; allowed: {allowed}")
    sections = {key: value for key, value in args.items() if key in PlatformConfig.model_fields}
    try:
        return resolve(validate_sections(sections, component))
    except ConfigError as exc:
        raise _run_error(component, exc) from None


def stack_model(args: Mapping[str, Any], component: str) -> PlatformModel:
    """The platform model of a whole stack given as a ``StackSpec``."""
    config = validated(StackConfig, args, component)
    errors = [p for p in check_rules(config, load_catalog(), today=dt.date.today()) if p.severity == "error"]
    if errors:
        raise _run_error(component, ConfigError(component, errors))
    return resolve(config)


def platform_sections(config: PlatformConfig) -> PlatformSpec:
    """The in-cluster sections of a validated config in spec form, for the components that take them."""
    dumped: dict[str, Any] = config.model_dump(include=set(PlatformConfig.model_fields), exclude_defaults=True)
    return cast(PlatformSpec, dumped)


def validated(model: type[SpecModel], value: Any, component: str) -> SpecModel:
    """One spec object (a cluster, a workload) validated by its pydantic model."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise _run_error(component, ConfigError(component, problems_from(exc))) from None


def spec_of(config: BaseModel) -> Any:
    """A validated config object back in spec form (snake_case keys, defaults left out), to hand to a child."""
    return config.model_dump(exclude_defaults=True)
