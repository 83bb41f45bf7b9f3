"""A stack's config, validated and resolved once: what the program, the command line and the components build from.

``validate_stack`` reads a raw config map (a stack file's ``config:``, or Pulumi's runtime config) with the models and
the rules over its keys (``aks_gpu.config``), resolves it against the catalog, and runs the rules that need the
model (``rules``). Every problem of all three comes back at once, in one ``ConfigError`` naming the file and the keys.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aks_gpu.catalog import Catalog, load_catalog
from aks_gpu.config.loader import read_config, read_sections
from aks_gpu.config.models import PlatformConfig, StackConfig
from aks_gpu.config.problems import ConfigError, Problem, causes_once
from aks_gpu.config.rules import check_rules
from aks_gpu.resolved.model import PlatformModel, resolve
from aks_gpu.resolved.rules import model_rules


@dataclass(frozen=True)
class ValidatedStack:
    """A stack that passed every rule: its config, its resolved model, the warnings found on the way, and where it came
    from (the stack file, for messages)."""

    config: StackConfig
    model: PlatformModel
    warnings: tuple[Problem, ...]
    source: str


def validate_stack(
    raw: Mapping[str, Any], source: str, catalog: Catalog | None = None, today: dt.date | None = None
) -> ValidatedStack:
    """Validate and resolve a stack's raw config map. Raises ``ConfigError`` listing every error at once (and the
    warnings after them). ``today``: the day the Kubernetes version is checked against the AKS calendar."""
    catalog = catalog or load_catalog()
    config, problems, pruning = read_config(raw, catalog, today)
    model = resolve(config, catalog) if config is not None else None
    if model is not None:
        variant = model_rules(resolve(pruning.variant, catalog)) if pruning.variant is not None else None
        problems += pruning.placed(model_rules(model), variant)
    problems = causes_once(problems)
    errors = [p for p in problems if p.severity == "error"]
    if errors or config is None or model is None:
        raise ConfigError(source, errors + [p for p in problems if p.severity == "warning"])
    return ValidatedStack(config=config, model=model, warnings=tuple(problems), source=source)


def checked_model(
    config: PlatformConfig, catalog: Catalog | None = None, today: dt.date | None = None
) -> tuple[PlatformModel, list[Problem]]:
    """A validated config's model and every problem the rules find in it (for a component given its sections)."""
    catalog = catalog or load_catalog()
    model = resolve(config, catalog)
    return model, causes_once([*check_rules(config, catalog, today=today or dt.date.today()), *model_rules(model)])


def validate_sections(
    values: Mapping[str, Any], source: str, catalog: Catalog | None = None, today: dt.date | None = None
) -> PlatformModel:
    """The model of the in-cluster sections a component was given (``gpu_pools``, ``workloads``, ...), checked by the
    same models and rules as a stack file. Raises ``ConfigError`` on the first pass that fails."""
    config, problems = read_sections(values)
    if config is None:
        raise ConfigError(source, problems)
    model, problems = checked_model(config, catalog, today)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ConfigError(source, errors)
    return model
