"""Turn a stack's raw config (from a stack file or Pulumi's runtime config) into a validated ``StackConfig``.

This module is the only one that knows how config keys are spelled in a stack file (``aks-gpu:gpuPools``,
``azure-native:location``). Every problem comes back with the stack file and the key path a user edits.
"""

from __future__ import annotations

import datetime as dt
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from aks_gpu.catalog import Catalog, load_catalog
from aks_gpu.config import safe_yaml
from aks_gpu.config.models import (
    CLUSTER_NAME_PATTERN,
    DNS_LABEL_PATTERN,
    POOL_NAME_PATTERN,
    RESOURCE_GROUP_PATTERN,
    TAINT_PATTERN,
    PlatformConfig,
    StackConfig,
)
from aks_gpu.config.problems import (
    MAX_MESSAGE_SHOWN,
    ConfigError,
    Problem,
    clipped,
    did_you_mean,
    edit_distance,
    nearest_name,
    shown,
)
from aks_gpu.config.rules import check_rules
from aks_gpu.input_files import InputFileError, decode_utf8, read_bounded
from aks_gpu.naming import CONFIG_NAMESPACE, LOCATION_KEY

PROJECT = CONFIG_NAMESPACE
# Namespaces whose keys belong to other providers; we pass them through untouched.
FOREIGN_NAMESPACES = ("azure-native", "kubernetes", "pulumi")
# A stack file is a few KB (prod: 3 KB; 200 GPU pools: 60 KB). Past this it is not a stack file.
MAX_STACK_FILE_BYTES = 1 << 20

_PATTERN_HINTS = {
    POOL_NAME_PATTERN: "AKS pool names are a lowercase letter then up to 11 lowercase letters or digits",
    DNS_LABEL_PATTERN: "must be a DNS label: lowercase letters, digits and '-', at most 63, alphanumeric at both ends",
    CLUSTER_NAME_PATTERN: "AKS cluster names are 1-63 letters, digits, '-' or '_', alphanumeric at both ends",
    RESOURCE_GROUP_PATTERN: "resource group names are 1-90 letters, digits, '-', '_', '.', '(' or ')', not ending in '.'",
    TAINT_PATTERN: "taints are written key=value:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute, and a "
    "value of up to 63 letters, digits, '-', '_' and '.' that starts and ends with a letter or digit (or none)",
}


# The project file, as the Pulumi CLI finds it: "Pulumi.yaml" or "Pulumi.yml" (https://www.pulumi.com/docs/iac/concepts/projects/,
# read 2026-12-01).
PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
# "stackConfigDir: Config directory location relative to the location of Pulumi.yaml" (optional); without it the stack
# files sit beside the project file (https://www.pulumi.com/docs/reference/pulumi-yaml/, read 2026-12-01).
STACK_CONFIG_DIR_KEY = "stackConfigDir"


def stack_config_dir(project_dir: Path) -> Path:
    """The folder of a project's stack files: its project file's ``stackConfigDir`` (relative to the project), else the
    project folder itself, as the Pulumi CLI reads them. A project file that cannot be read is a ``ConfigError``."""
    project_file = next((project_dir / name for name in PROJECT_FILES if (project_dir / name).is_file()), None)
    if project_file is None:
        return project_dir
    source = str(project_file)
    try:
        document = safe_yaml.load(decode_utf8(read_bounded(project_file, MAX_STACK_FILE_BYTES)))
    except InputFileError as exc:
        raise ConfigError(source, [Problem("(file)", str(exc))]) from None
    except safe_yaml.YamlInputError as exc:
        where = f" (line {exc.line})" if exc.line else ""
        raise ConfigError(source, [Problem(_document_path(exc.path), exc.reason + where)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, [Problem("(file)", safe_yaml.describe_yaml_error(exc))]) from None
    configured = document.get(STACK_CONFIG_DIR_KEY) if isinstance(document, dict) else None
    if configured is None:
        return project_dir
    if not isinstance(configured, str) or not configured.strip():
        raise ConfigError(source, [Problem(STACK_CONFIG_DIR_KEY, "must be a folder, relative to the project file")])
    return project_dir / configured


def stack_file_path(project_dir: Path, stack: str) -> Path:
    """``Pulumi.<stack>.yaml`` in the project's stack config folder (``stack_config_dir``)."""
    return stack_config_dir(project_dir) / f"Pulumi.{stack}.yaml"


def load_stack_file(path: Path) -> dict[str, Any]:
    """The ``config:`` map of a Pulumi stack file, keys as written (``aks-gpu:cluster``).

    The file is read as Pulumi reads it (``safe_yaml``), within ``MAX_STACK_FILE_BYTES``; anything else (a
    folder, a pipe, a device, another encoding, a duplicate key, a value JSON cannot carry, a limit hit) is a
    ``ConfigError`` naming the file and, where there is one, the key and line."""
    source = str(path)
    try:
        text = decode_utf8(read_bounded(path, MAX_STACK_FILE_BYTES))
    except InputFileError as exc:
        reason = "no such stack file" if str(exc) == "no such file" else str(exc)
        raise ConfigError(source, [Problem("(file)", reason)]) from None
    try:
        document = safe_yaml.load(text, refuse_leading_zero_numbers=True)
    except safe_yaml.YamlInputError as exc:
        where = f" (line {exc.line})" if exc.line else ""
        raise ConfigError(source, [Problem(_document_path(exc.path), exc.reason + where)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, [Problem("(file)", safe_yaml.describe_yaml_error(exc))]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(source, [Problem("(file)", "a stack file is a YAML mapping with a `config:` key")])
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(source, [Problem("config", "must be a mapping of `namespace:key` to values")])
    encrypted = [
        Problem(_dotted(str(key), path), _ENCRYPTED.format(key=key))
        for key, value in config.items()
        if str(key).startswith(f"{PROJECT}:")
        for path in _secure_values(value, ())
    ]
    if encrypted:
        raise ConfigError(source, encrypted)
    return {str(key): value for key, value in config.items()}


# `pulumi config set --secret` writes a value as {secure: <ciphertext>} (with --path, at that place inside the key):
# pulumi/pulumi sdk/go/common/resource/config/value.go, the "secure" object form. Only Pulumi, with the stack's
# secrets provider, can decrypt it.
_ENCRYPTED = (
    "the value is encrypted (`secure:`, written by `pulumi config set --secret`) and this offline reader holds no key"
    " to decrypt it: `pulumi preview` reads it; to plan offline, use a copy of the stack file with the value in clear"
    " (a placeholder will do) and PULUMI_CONFIG_SECRET_KEYS='[\"{key}\"]' so it is handled as a secret"
)


def _secure_values(value: Any, path: tuple[str | int, ...]) -> list[tuple[str | int, ...]]:
    """Where ``value`` holds Pulumi's encrypted form ``{secure: "..."}``."""
    if isinstance(value, dict):
        if set(value) == {"secure"} and isinstance(value["secure"], str):
            return [path]
        return [found for key, child in value.items() for found in _secure_values(child, (*path, str(key)))]
    if isinstance(value, list):
        return [found for index, child in enumerate(value) for found in _secure_values(child, (*path, index))]
    return []


def _document_path(path: tuple[str | int, ...]) -> str:
    """Where in a stack file: ``('config', 'aks-gpu:gpuPools', 0, 'vmSize')`` -> ``aks-gpu:gpuPools[0].vmSize``."""
    if path[:1] == ("config",) and len(path) > 1:
        return _dotted(str(path[1]), path[2:])
    if path:
        return _dotted(str(path[0]), path[1:])
    return "(file)"


def _dotted(head: str, rest: tuple[str | int, ...]) -> str:
    text = head
    for part in rest:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def read_config(
    raw: Mapping[str, Any], catalog: Catalog | None = None, today: dt.date | None = None
) -> tuple[StackConfig | None, list[Problem]]:
    """A stack's raw config map as a ``StackConfig`` (None when its shape is wrong), with every problem of its keys:
    the models' own and the rules across keys (``config/rules/``). ``today`` is the day the Kubernetes version is
    checked against the AKS calendar: the real date unless a test fixes one. The rules that need the resolved model
    come on top (``aks_gpu.resolved.stack.validate_stack``, which everything loading a stack calls)."""
    catalog = catalog or load_catalog()
    problems: list[Problem] = []
    document: dict[str, Any] = {}
    known = {_alias(name) for name in StackConfig.model_fields} - {"location"}
    for key, value in raw.items():
        namespace, _, name = key.partition(":")
        try:
            if namespace == PROJECT and name in known:
                value = _decode(value)
            # What arrived as JSON (Pulumi's runtime config) gets the limits a stack file gets from safe_yaml;
            # every value, ours or a foreign key's, travels on to Pulumi as JSON.
            safe_yaml.check_value(value)
        except safe_yaml.YamlInputError as exc:
            problems.append(Problem(_dotted(key, exc.path), exc.reason))
            continue
        if key == LOCATION_KEY:
            document["location"] = value
        elif namespace == PROJECT:
            if name not in known:
                nearest = did_you_mean(name, known)
                problems.append(Problem(key, "unknown key" + (nearest or f"; {PROJECT} keys are: {', '.join(sorted(known))}")))
                continue
            document[name] = value
        elif namespace not in FOREIGN_NAMESPACES and name and edit_distance(namespace.lower(), PROJECT) <= 2:
            # "aksgpu:workloads" is a typo of this program's namespace, not another provider's key: as a warning, the
            # workloads it holds would be dropped and the stack planned without them.
            right = f"{PROJECT}:{name}" if name in known else f"{PROJECT}:{nearest_name(name, known) or name}"
            problems.append(
                Problem(key, f"config namespace '{namespace}' is not read by this program; did you mean `{right}`?")
            )
        elif namespace not in FOREIGN_NAMESPACES and name:
            problems.append(Problem(key, f"config namespace '{namespace}' is not read by this program", "warning"))
    cluster = document.get("cluster")
    if "location" not in document and isinstance(cluster, dict) and cluster.get("location"):
        # cluster.location may stand in for the provider's location.
        document["location"] = cluster["location"]

    config: StackConfig | None = None
    try:
        config = StackConfig.model_validate(document, by_alias=True, by_name=False)
    except ValidationError as exc:
        problems.extend(problems_from(exc))
    if config is not None:
        problems.extend(check_rules(config, catalog, today=today or dt.date.today()))
    return config, problems


def read_sections(values: Mapping[str, Any]) -> tuple[PlatformConfig | None, list[Problem]]:
    """The in-cluster sections a component was given (``gpu_pools``, ``workloads``, ...) as a ``PlatformConfig``, by
    the same models as a stack file (the rules come with ``aks_gpu.resolved.stack.checked_model``)."""
    try:
        return PlatformConfig.model_validate(dict(values)), []
    except ValidationError as exc:
        return None, problems_from(exc)


def _decode(value: Any) -> Any:
    """Pulumi's runtime hands structured config over as JSON text; a stack file gives it as YAML. Text that is
    not JSON stays text (the model then says what was expected)."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except RecursionError:
            raise safe_yaml.YamlInputError(f"nested deeper than {safe_yaml.MAX_DEPTH} levels (the limit)") from None
        except ValueError:  # not JSON, or an integer beyond Python's 4,300-digit limit
            return value
    return value


def _alias(field_name: str) -> str:
    alias = StackConfig.model_fields[field_name].alias
    return alias or field_name


def key_path(loc: tuple[int | str, ...]) -> str:
    """``('gpuPools', 1, 'migProfile')`` -> ``aks-gpu:gpuPools[1].migProfile``."""
    if not loc:
        return PROJECT
    head, *rest = loc
    path = LOCATION_KEY if head == "location" else f"{PROJECT}:{head}"
    for part in rest:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def problems_from(exc: ValidationError) -> list[Problem]:
    """One problem per pydantic error, with the key path a user edits and what is allowed there."""
    problems = []
    errors = exc.errors(include_url=False)
    locs = [tuple(part for part in error["loc"] if not _is_union_tag(part)) for error in errors]
    missing = {loc for loc, error in zip(locs, errors, strict=True) if error["type"] == "missing"}
    # A misspelt required key ("namespac" for "namespace") is one mistake: the unknown key says what it should be and
    # that it is required, and the required key it stands for is not reported again.
    misspelt = {
        (*loc[:-1], name)
        for loc, error in zip(locs, errors, strict=True)
        if error["type"] == "extra_forbidden" and loc
        for name in [nearest_name(str(loc[-1]), _allowed_keys(loc[:-1]))]
        if name is not None and (*loc[:-1], name) in missing
    }
    for loc, error in zip(locs, errors, strict=True):
        kind = error["type"]
        given = error.get("input")
        if kind == "missing":
            if loc in misspelt:
                continue
            message = "is required"
        elif kind == "extra_forbidden":
            allowed = _allowed_keys(loc[:-1])
            # The nearest key, as a compiler suggests one, rather than a list of every key allowed here.
            suggestion = did_you_mean(str(loc[-1]), allowed) if loc else ""
            name = nearest_name(str(loc[-1]), allowed) if loc else None
            required = f" (`{name}` is required)" if name is not None and (*loc[:-1], name) in misspelt else ""
            message = "unknown key" + (suggestion or (f"; allowed here: {', '.join(allowed)}" if allowed else "")) + required
        elif kind == "string_type" and isinstance(given, int | float) and not isinstance(given, bool) and loc:
            # `kubernetesVersion: 1.30` unquoted is YAML's number 1.3: say so, not "should be a valid string".
            meant = f"{given}0" if isinstance(given, float) else str(given)
            dropped = f" (YAML drops a trailing zero: {meant} unquoted is {given})" if isinstance(given, float) else ""
            message = (
                f"{shown(given)} is not allowed: it must be text, and YAML read the unquoted value as the number "
                f"{shown(given)}{dropped}; put it in quotes as you mean it: {loc[-1]}: \"{meant}\""
                + (f" for {meant}" if isinstance(given, float) else "")
            )
        elif kind == "string_pattern_mismatch":
            pattern = (error.get("ctx") or {}).get("pattern", "")
            hint = _PATTERN_HINTS.get(pattern, f"must match {pattern}")
            message = f"{shown(given)} is not allowed: {hint}"
        elif kind == "value_error":
            # A validator's own sentence, without pydantic's "Value error, " in front of it.
            message = f"{shown(given)} is not allowed: {error['msg'].removeprefix('Value error, ')}"
        else:
            message = f"{shown(given)} is not allowed: {error['msg']}"
        problems.append(Problem(key_path(loc), clipped(message, MAX_MESSAGE_SHOWN)))
    return problems


def _is_union_tag(part: int | str) -> bool:
    # pydantic inserts the member type name (e.g. 'str', 'int') into locs of union fields.
    return isinstance(part, str) and (part.islower() and part in {"str", "int", "float", "bool", "none"})


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys a user may write at ``loc``, read off the models so the message never goes stale."""
    model: Any = StackConfig
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return []
        model = _model_in(field.annotation)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return sorted((f.alias or n) for n, f in model.model_fields.items())
    return []


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside ``X``, ``X | None`` or ``tuple[X, ...]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, tuple, list):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
