"""From a public component's ``args`` (TypedDicts, see ``components/aks_gpu/specs.py``) to the validated, resolved
model, with errors reported the way every Pulumi language understands them.

A bad arg raises ``ArgsError``: one ``pulumi.InputPropertiesError`` listing every problem with its property
path in camelCase (``workload.gpuQuota``, ``gpuPools[1].migProfile``: the names every language's SDK and
Pulumi YAML use), which is also a ``pulumi.RunError`` so a Python program stops with the message and no
traceback. Nothing is registered first. The component provider (``components/aks_gpu/package.py``) hands the
structured errors to the engine, which prints each property with its value
(pulumi/pulumi ``pkg/resource/deploy/source_eval.go`` ``errorToMessage``, v3.259.0).

Numbers: other languages reach the component over gRPC, where every number is a protobuf double, so ``8``
arrives as ``8.0``. Integral floats become ints before validation: messages and plans show ``8``.

Warnings of the rules (not errors) are logged with ``pulumi.log.warn``, once per run (by pool or workload name,
whatever its index in the args of the component that found it).

``GpuComponent.resolve_args`` (``components/aks_gpu/component.py``) calls these; a parent that resolved the whole stack
builds its children from the model instead (``GpuComponent.of``), so nothing here runs twice.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pulumi
from pydantic import BaseModel, ValidationError

from aks_gpu.config.loader import PROJECT, problems_from
from aks_gpu.config.models import PlatformConfig, StackConfig
from aks_gpu.config.problems import Problem
from aks_gpu.naming import LOCATION_KEY
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import checked_model

SpecModel = TypeVar("SpecModel", bound=BaseModel)


class ArgsError(pulumi.InputPropertiesError, pulumi.RunError):
    """A component's args are invalid. ``errors`` holds one ``{property_path, reason}`` per problem."""

    def __init__(self, component: str, problems: Sequence[tuple[str, str]]) -> None:
        self.component = component
        lines = "\n".join(f"  {path}: {reason}" for path, reason in problems)
        details: list[pulumi.InputPropertyErrorDetails] = [{"property_path": path, "reason": reason} for path, reason in problems]
        super().__init__(f"invalid args for {component}:\n{lines}", details)


def for_the_engine(error: pulumi.InputPropertiesError) -> pulumi.InputPropertiesError:
    """The same error as a plain ``InputPropertiesError``, for the component provider: its ``Construct`` answers a
    ``RunError`` with the bare message before it looks for property errors (pulumi 3.272.0
    ``pulumi/provider/server.py``), so the structured paths would be lost on an ``ArgsError``."""
    return pulumi.InputPropertiesError(error.message, error.errors)


# Set by the component provider (``components/aks_gpu/package.py``) in its own process: errors found after
# construction (in an apply, on values another stack passed as outputs) then reach the engine structured too.
_HOSTED_BY_PROVIDER = False


def serve_as_provider() -> None:
    global _HOSTED_BY_PROVIDER
    _HOSTED_BY_PROVIDER = True


def raised_later(error: ArgsError) -> Exception:
    """What to raise for ``error`` found inside an apply: the program's ``ArgsError``, or under the component
    provider the engine's ``InputPropertiesError``."""
    return for_the_engine(error) if _HOSTED_BY_PROVIDER else error


# ---------------------------------------------------------------- property paths


_SEGMENT = re.compile(r"\[(?P<index>\d+)\]|\.?(?P<name>[^.\[\]]+)")


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``X``, ``X | None`` or ``tuple[X, ...]``; None for anything else (a dict of
    labels, a string), below which keys are data, not field names."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, tuple, list):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def property_path(path: str, root: type[BaseModel] = StackConfig, renames: Mapping[str, str] | None = None) -> str:
    """A problem's key path (``aks-gpu:gpuPools[0].min_count``, as ``problems_from`` and the rules write it) as
    the property path of a component input (``gpuPools[0].minCount``): field names in camelCase along the
    models from ``root``, map keys and unknown keys as written. ``renames`` replaces a leading part
    (``{"gpuPools[0]": "pool"}`` for a component that takes one pool)."""
    rest = "location" if path == LOCATION_KEY else path.removeprefix(PROJECT).removeprefix(":")
    model: type[BaseModel] | None = root
    parts: list[str] = []
    position = 0
    while position < len(rest):
        found = _SEGMENT.match(rest, position)
        if found is None or model is None:
            # Below a map (labels, tags): the rest is a key, whatever it contains.
            parts.append(rest[position:] if rest[position] in ".[" else "." + rest[position:])
            break
        if found["index"] is not None:
            parts.append(f"[{found['index']}]")
        else:
            name = found["name"]
            field = next((f for n, f in model.model_fields.items() if name in (n, f.alias)), None)
            parts.append("." + (field.alias or name if field is not None else name))
            model = _model_in(field.annotation) if field is not None else None
        position = found.end()
    result = "".join(parts).removeprefix(".")
    for old, new in (renames or {}).items():
        if result == old or result.startswith((old + ".", old + "[")):
            result = new + result[len(old) :]
            break
    return result


def args_error(
    component: str, problems: Iterable[Problem], root: type[BaseModel] = StackConfig, renames: Mapping[str, str] | None = None
) -> ArgsError:
    """``ArgsError`` for the errors among ``problems`` (warnings are left out)."""
    return ArgsError(
        component, [(property_path(p.path, root, renames), p.message) for p in problems if p.severity == "error"]
    )


# ---------------------------------------------------------------- values as they arrive


def plain_numbers(value: Any) -> Any:
    """``value`` with integral floats as ints, all the way down (gRPC carries every number as a double)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: plain_numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain_numbers(item) for item in value]
    return value


def is_output(value: Any) -> bool:
    """An Output or another value that is only known later (an awaitable)."""
    return isinstance(value, pulumi.Output) or inspect.isawaitable(value)


def outputs_in(value: Any, path: str = "") -> Iterator[str]:
    """The key paths (snake_case, as given) inside ``value`` that hold an Output."""
    if is_output(value):
        yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from outputs_in(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from outputs_in(item, f"{path}[{index}]")


def require_plain(
    args: Mapping[str, Any],
    component: str,
    keys: Iterable[str],
    root: type[BaseModel] = StackConfig,
    renames: Mapping[str, str] | None = None,
) -> None:
    """Refuse an Output among ``args[key]`` for ``keys``: these settings decide which resources exist and are
    checked against each other before anything is registered, so they must be known then."""
    found = [path for key in keys if key in args for path in outputs_in(args[key], key)]
    if found:
        reason = "must be a plain value, not an output: the rules check it against the other settings first"
        raise ArgsError(component, [(property_path(path, root, renames), reason) for path in found])


# ---------------------------------------------------------------- warnings, once per run

_REPORTED: contextvars.ContextVar[set[tuple[str, ...]] | None] = contextvars.ContextVar("aks_gpu_reported", default=None)
_ITEM = re.compile(rf"^{PROJECT}:(?P<list>gpuPools|gpu_pools|workloads)\[(?P<index>\d+)\](?P<rest>.*)$")


def _warning_key(problem: Problem, config: PlatformConfig) -> tuple[str, ...]:
    """What a warning is about: a pool or workload by name (a child sees it at another index), else its path."""
    found = _ITEM.match(problem.path)
    if found:
        items: Sequence[Any] = config.workloads if found["list"] == "workloads" else config.gpu_pools
        index = int(found["index"])
        if index < len(items):
            return (found["list"].replace("gpu_pools", "gpuPools"), str(items[index].name), found["rest"], problem.message)
    return (problem.path, problem.message)


def log_warnings(problems: Iterable[Problem], config: PlatformConfig, render: Callable[[Problem], str]) -> None:
    """``pulumi.log.warn`` each warning among ``problems`` not yet logged in this run."""
    reported = _REPORTED.get()
    if reported is None:
        reported = set()
        _REPORTED.set(reported)
    for problem in problems:
        if problem.severity != "warning":
            continue
        key = _warning_key(problem, config)
        if key not in reported:
            reported.add(key)
            pulumi.log.warn(render(problem))


def _warn_as(component: str, root: type[BaseModel], renames: Mapping[str, str] | None = None) -> Callable[[Problem], str]:
    return lambda p: f"{component}: {property_path(p.path, root, renames)}: {p.message}"


# ---------------------------------------------------------------- args -> model


def checked(
    config: PlatformConfig, component: str, root: type[BaseModel], renames: Mapping[str, str] | None = None
) -> PlatformModel:
    """The model of ``config`` after every rule: errors raise, warnings are logged."""
    # The Kubernetes version is checked against the AKS release calendar as of today, as the loader does.
    model, problems = checked_model(config, today=dt.date.today())
    if any(p.severity == "error" for p in problems):
        raise args_error(component, problems, root, renames)
    log_warnings(problems, config, _warn_as(component, root, renames))
    return model


def platform_model(
    args: Mapping[str, Any],
    component: str,
    own_keys: frozenset[str] = frozenset(),
    renames: Mapping[str, str] | None = None,
) -> PlatformModel:
    """The platform model of the in-cluster sections among ``args``; ``own_keys`` are the component's other
    args. Any other key is refused: a misspelt section must not silently fall back to the defaults."""
    unknown = sorted(set(args) - set(PlatformConfig.model_fields) - own_keys)
    if unknown:
        allowed = ", ".join(sorted(property_path(key, PlatformConfig) for key in {*PlatformConfig.model_fields, *own_keys}))
        raise ArgsError(component, [(property_path(key, PlatformConfig), f"unknown key; allowed: {allowed}") for key in unknown])
    require_plain(args, component, PlatformConfig.model_fields, PlatformConfig, renames)
    sections = {key: plain_numbers(value) for key, value in args.items() if key in PlatformConfig.model_fields}
    try:
        config = PlatformConfig.model_validate(sections)
    except ValidationError as exc:
        raise args_error(component, problems_from(exc), PlatformConfig, renames) from None
    return checked(config, component, PlatformConfig, renames)


def stack_model(args: Mapping[str, Any], component: str) -> PlatformModel:
    """The platform model of a whole stack given as a ``StackSpec``."""
    config = validated(StackConfig, args, component)
    return checked(config, component, StackConfig)


def validated(model: type[SpecModel], value: Any, component: str, at: str = "") -> SpecModel:
    """One spec object (a cluster, a workload) validated by its pydantic model; ``at`` is the input that
    holds it (``cluster``), so problem paths start there."""
    found = list(outputs_in(value))
    if found:
        reason = "must be a plain value, not an output: it decides what is created and how it is named"
        raise ArgsError(component, [(_joined(at, property_path(path, model)), reason) for path in found])
    try:
        return model.model_validate(plain_numbers(value))
    except ValidationError as exc:
        problems = problems_from(exc)
        raise ArgsError(
            component, [(_joined(at, property_path(p.path, model)), p.message) for p in problems if p.severity == "error"]
        ) from None


def _joined(at: str, path: str) -> str:
    if not at:
        return path
    return at + (path if path.startswith("[") or not path else "." + path)
