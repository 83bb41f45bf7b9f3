"""Turn a stack's raw config (from a stack file or Pulumi's runtime config) into a validated ``StackConfig``.

This module is the only one that knows how config keys are spelled in a stack file (``aks-gpu:gpuPools``,
``azure-native:location``). Every problem comes back with the stack file and the key path a user edits.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import re
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from aks_gpu.catalog import Catalog, load_catalog, vm_size_key
from aks_gpu.config import safe_yaml
from aks_gpu.config.encrypted import SECRET, Encrypted, with_placeholders
from aks_gpu.config.models import (
    CLUSTER_NAME_PATTERN,
    DNS_LABEL_PATTERN,
    ENCRYPTED_ERROR,
    LEADING_ZERO_ERROR,
    POOL_NAME_PATTERN,
    RESOURCE_GROUP_PATTERN,
    TAINT_PATTERN,
    PlatformConfig,
    StackConfig,
    takes_text,
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
    return {str(key): value for key, value in config.items()}


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
) -> tuple[StackConfig | None, list[Problem], Pruning]:
    """A stack's raw config map as a ``StackConfig``, with every problem of its keys: the models' own and the rules
    across keys (``config/rules/``), in one pass, as a compiler reports. A value the models refuse is set aside (its
    key left to its default, or its list item left out) and the rest validated again, so the rules still judge every
    key that is right; what they would say of a value set aside is held back (``Pruning``). The config is None only
    when a required key has no value to check the rest with (``cluster``, ``azure-native:location``).

    An encrypted value (``secure:``, ``aks_gpu.config.encrypted``) stands as a ``[secret]`` placeholder: a text field
    takes it unchecked; a field whose value a rule needs gets a warning naming the key and its default in its place
    (a ``stand_in`` problem), or, with no default, an error. ``today`` is the day the Kubernetes version is checked
    against the AKS calendar: the real date unless a test fixes one. The rules that need the resolved model come on
    top (``aks_gpu.resolved.stack.validate_stack``, which everything loading a stack calls; it places their problems
    with the ``Pruning`` too)."""
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
        if namespace != PROJECT:
            # Another provider's value goes to Pulumi as written: an ambiguous number in it is refused here (ours are
            # refused by the models, where they stand).
            ambiguous = safe_yaml.leading_zero_numbers(value)
            problems.extend(Problem(_dotted(key, where), number.message) for where, number in ambiguous)
        if key == LOCATION_KEY:
            document["location"] = with_placeholders(value)
        elif namespace == PROJECT:
            if name not in known:
                nearest = did_you_mean(name, known)
                problems.append(Problem(key, "unknown key" + (nearest or f"; {PROJECT} keys are: {', '.join(sorted(known))}")))
                continue
            document[name] = with_placeholders(value)
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

    config, checked, pruning = _validated(document)
    problems.extend(checked)
    if config is not None:
        day = today or dt.date.today()
        variant = check_rules(pruning.variant, catalog, today=day) if pruning.variant is not None else None
        problems.extend(pruning.placed(check_rules(config, catalog, today=day), variant))
    return config, problems, pruning


# How many times the rest of a stack is validated again after setting aside what failed: each round sets aside at least
# one value, and a value set aside can only make its object fail as a whole (then set aside in the next round).
MAX_ROUNDS = 8
_GONE = object()


@dataclass(frozen=True)
class Pruning:
    """What ``read_config`` set aside to validate the rest of a stack: the key paths of values the models refused
    (``removed``, as written, list indices included), the list items left out (``kept``: for each list, the index as
    written of each item left), and the encrypted placeholders (``encrypted``)."""

    removed: tuple[tuple[str | int, ...], ...] = ()
    kept: Mapping[tuple[str | int, ...], tuple[int, ...]] = dataclass_field(default_factory=dict)
    encrypted: tuple[tuple[str | int, ...], ...] = ()
    # The validated rest with other values in the keys set aside (``_variant``), or None.
    variant: StackConfig | None = None
    # The texts of the list items left out whole (a pool's name, its workload type), and the list items as written
    # that hold one of them too (the workloads of that type): a problem that names such a text, or of such an item, may
    # be about the item left out (a workload type no pool serves, a quota no pool can fill) and is held back.
    left_out_texts: frozenset[str] = frozenset()
    related: frozenset[tuple[str | int, ...]] = frozenset()

    def placed(self, problems: list[Problem], variant: list[Problem] | None = None) -> list[Problem]:
        """The rules' problems of the validated rest, with the key paths as written (a list item after one left out
        keeps its index). Held back: a problem of a value set aside (the rule judged the default in its place), and
        one that the rules do not find in the ``variant`` too (``variant``: their problems there), since it depends
        on a value set aside; a problem of an encrypted value, or that quotes one, becomes one warning that it is not
        checked offline."""
        placed: list[Problem] = []
        unchecked: dict[str, Problem] = {}
        shared = {(problem.path, problem.message) for problem in variant} if variant is not None else None
        for problem in problems:
            if shared is not None and (problem.path, problem.message) not in shared:
                continue
            if any(re.search(rf"\b{re.escape(text)}\b", problem.message) for text in self.left_out_texts):
                continue
            if SECRET in problem.message:
                unchecked.setdefault(problem.path, Problem(problem.path, UNCHECKED_SECRET, "warning"))
                continue
            loc = self.original(_loc_of(problem.path))
            if loc is None:
                placed.append(problem)
                continue
            if any(loc[: len(removed)] == removed for removed in self.removed) or loc[:2] in self.related:
                continue
            secret = next((where for where in self.encrypted if loc[: len(where)] == where), None)
            if secret is not None:
                path = key_path(secret)
                unchecked.setdefault(path, Problem(path, UNCHECKED_SECRET, "warning"))
                continue
            follows = self.original(_loc_of(problem.follows)) if problem.follows else None
            placed.append(
                dataclasses.replace(
                    problem, path=key_path(loc), follows=key_path(follows) if follows is not None else problem.follows
                )
            )
        return placed + list(unchecked.values())

    def original(self, loc: tuple[str | int, ...] | None) -> tuple[str | int, ...] | None:
        """``loc`` in the validated rest, as written in the stack file (the index of a list item after one left out)."""
        if loc is None:
            return None
        written: list[str | int] = []
        for part in loc:
            kept = self.kept.get(tuple(written))
            if isinstance(part, int) and kept is not None and part < len(kept):
                part = kept[part]
            written.append(part)
        return tuple(written)


UNCHECKED_SECRET = (
    "a rule checks this value, and it is or depends on one that is encrypted (`secure:`, set by `pulumi config set"
    " --secret`): no offline command can read it, so it is not checked here; `pulumi preview` checks it"
)
_ENCRYPTED_NEEDED = (
    "its value is encrypted (`secure:`, set by `pulumi config set --secret`) and the rules need it ({what}), which no"
    " offline command can read"
)
STAND_IN = _ENCRYPTED_NEEDED + (
    ": not checked here, and the other keys are checked with its default ({default}) in its place; `pulumi preview`"
    " reads and checks it"
)
NO_STAND_IN = (
    _ENCRYPTED_NEEDED + ", and it has no default to check the rest with: give it in clear, or check the stack with"
    " `pulumi preview`"
)


def _validated(document: dict[str, Any]) -> tuple[StackConfig | None, list[Problem], Pruning]:
    """``document`` validated; what fails is set aside (``_set_aside_at``) and the rest validated again, up to
    ``MAX_ROUNDS`` times. The problems are those of the document as written: the first round's (later rounds only
    find what follows from a value set aside)."""
    tree: Any = document  # copied before the first value is set aside
    encrypted = tuple(_encrypted_locs(document, ()))
    problems: list[Problem] = []
    removed: list[tuple[str | int, ...]] = []
    kept: dict[tuple[str | int, ...], tuple[int, ...]] = {}
    for round_ in range(MAX_ROUNDS):
        kept = {}
        current = _without_gone(tree, (), kept) if removed else document
        try:
            config = StackConfig.model_validate(current, by_alias=True, by_name=False)
        except ValidationError as exc:
            if round_ == 0:
                problems.extend(problems_from(exc))
            for error in exc.errors(include_url=False):
                loc = Pruning(kept=kept).original(tuple(part for part in error["loc"] if not _is_union_tag(part)))
                assert loc is not None
                point = _set_aside_at(tree, loc)
                if error["type"] == ENCRYPTED_ERROR and round_ == 0:
                    problems.append(_encrypted_problem(loc, point))
                if point == ():
                    return None, problems, Pruning(tuple(removed), kept, encrypted)
                if point not in removed:
                    tree = tree if removed else copy.deepcopy(document)
                    removed.append(point)
                    _remove(tree, point)
            continue
        for loc, written, read in _respelled(config, current, ()):
            message = RESPELLED.format(written=shown(written), read=shown(read))
            problems.append(Problem(key_path(Pruning(kept=kept).original(loc) or loc), message, "warning"))
        variant = _variant(tree, removed)
        texts = frozenset(_left_out_texts(document, removed))
        related = frozenset(_items_holding(document, texts))
        words = frozenset(text for _, text in texts)
        return config, problems, Pruning(tuple(removed), kept, encrypted, variant, words, related)
    return None, problems, Pruning(tuple(removed), kept, encrypted)


def _variant(tree: Any, removed: list[tuple[str | int, ...]]) -> StackConfig | None:
    """The validated rest again, with another value than its default in each key set aside (``_other_value``); None
    when no key set aside has another value, or the other values do not validate. A rule's problem that the two
    configs do not share depends on a value set aside, and is held back (``Pruning.placed``)."""
    if not removed:
        return None
    other = copy.deepcopy(tree)
    changed = False
    for point in removed:
        field = _field_at(point) if not isinstance(point[-1], int) else None
        value = _other_value(field) if field is not None else _NO_VALUE
        if value is _NO_VALUE:
            continue
        node = other
        for part in point[:-1]:
            node = node[part]
        if isinstance(node, dict):
            node[point[-1]] = value
            changed = True
    if not changed:
        return None
    try:
        return StackConfig.model_validate(_without_gone(other, (), {}), by_alias=True, by_name=False)
    except ValidationError:
        return None


_NO_VALUE = object()
# A text of an object left out this short (a zone "1") names nothing in particular.
MIN_LEFT_OUT_TEXT = 3


def _left_out_texts(document: dict[str, Any], removed: list[tuple[str | int, ...]]) -> Iterator[tuple[str, str]]:
    """(list, text) for each free text directly in a list item left out whole (``gpuPools[1]``: its name, vmSize,
    workload type; not a fixed choice such as its vendor, which names nothing)."""
    for point in removed:
        if not isinstance(point[-1], int):
            continue
        node: Any = document
        for part in point:
            node = node[part]
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            field = _field_at((*point, key))
            if isinstance(value, str) and len(value) >= MIN_LEFT_OUT_TEXT and field is not None and takes_text(field.annotation):
                yield str(point[0]), value


def _items_holding(document: dict[str, Any], texts: frozenset[tuple[str, str]]) -> Iterator[tuple[str | int, ...]]:
    """The items of the other top-level lists (``workloads[0]`` for a pool left out) with one of ``texts`` in them."""
    for key, items in document.items():
        theirs = {text for where, text in texts if where != key}
        if isinstance(items, list) and theirs:
            for index, item in enumerate(items):
                if isinstance(item, dict) and any(isinstance(value, str) and value in theirs for value in item.values()):
                    yield (key, index)


def _other_value(field: FieldInfo) -> Any:
    """A value for ``field`` other than its default, as a stack file would write it: another choice, the other switch
    value, a bound of a number; ``_NO_VALUE`` for a text or a list (no value is sure to pass its checks)."""
    default = field.get_default()
    annotation = field.annotation
    members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(members) == 1:
        annotation = members[0]
    if typing.get_origin(annotation) is typing.Literal:
        return next((choice for choice in typing.get_args(annotation) if choice != default), _NO_VALUE)
    if annotation is bool:
        return not default
    if annotation in (int, float):
        bounds = [getattr(item, name, None) for item in field.metadata for name in ("ge", "le", "gt", "lt")]
        numbers = [bound for bound in bounds if isinstance(bound, int | float) and bound != default]
        return max(numbers) if numbers else (default or 0) + 1
    return _NO_VALUE


RESPELLED = (
    "{written} is read as {read}, the spelling of the GPU catalog and the region records (Azure compares VM sizes"
    " without case): one spelling for the pool, its nodes' instance-type label, the admission policy and every check;"
    " write it so"
)


def _respelled(value: Any, written: Any, loc: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str, str]]:
    """(where, as written, as read) for each VM size the models read in another letter case (``VmSizeName``)."""
    if isinstance(value, BaseModel) and isinstance(written, dict):
        for name, field in type(value).model_fields.items():
            key = field.alias or name
            if key in written:
                yield from _respelled(getattr(value, name), written[key], (*loc, key))
    elif isinstance(value, tuple) and isinstance(written, list):
        for index, (item, as_written) in enumerate(zip(value, written, strict=False)):
            yield from _respelled(item, as_written, (*loc, index))
    elif isinstance(value, str) and isinstance(written, str) and value != written and vm_size_key(value) == vm_size_key(written):
        yield loc, written, value


def _encrypted_problem(loc: tuple[str | int, ...], point: tuple[str | int, ...]) -> Problem:
    field = _field_at(loc)
    what = _what_a_field_takes(field.annotation if field is not None else None)
    if point == loc and field is not None and not field.is_required():
        return Problem(key_path(loc), STAND_IN.format(what=what, default=shown(field.get_default())), "warning", stand_in=True)
    return Problem(key_path(loc), NO_STAND_IN.format(what=what))


def _what_a_field_takes(annotation: Any) -> str:
    """``one of Free, Standard, Premium``, ``a number``, ``true or false``; else ``its structure``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        annotation = members[0] if len(members) == 1 else annotation
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(str(choice) for choice in typing.get_args(annotation))
    return {int: "a number", float: "a number", bool: "true or false"}.get(annotation, "its structure")


def _encrypted_locs(value: Any, loc: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, Encrypted):
        yield loc
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _encrypted_locs(child, (*loc, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _encrypted_locs(child, (*loc, index))


def _set_aside_at(tree: Any, loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Where to set aside the value a pydantic error at ``loc`` is about, so that the rest validates: the deepest key
    with a default (left to it), list item (left out) or key no model names (a misspelt key, a map's entry) on the way
    to it; ``()`` where only a required top-level key is (nothing can stand in for the cluster)."""
    reachable: list[str | int] = []
    node = tree
    for part in loc:
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node) and node[part] is not _GONE
        if not (in_list or (isinstance(node, dict) and part in node)):
            break
        node = node[part]
        reachable.append(part)
    for end in range(len(reachable), 0, -1):
        point = tuple(reachable[:end])
        if isinstance(point[-1], int):
            return point
        field = _field_at(point)
        if field is None or not field.is_required():
            return point
    return ()


def _remove(tree: Any, point: tuple[str | int, ...]) -> None:
    node = tree
    for part in point[:-1]:
        node = node[part]
    last = point[-1]
    if isinstance(node, list) and isinstance(last, int):
        node[last] = _GONE  # kept in place, so the indices as written stay valid
    else:
        node.pop(last, None)


def _without_gone(value: Any, loc: tuple[str | int, ...], kept: dict[tuple[str | int, ...], tuple[int, ...]]) -> Any:
    """``value`` without the list items set aside; ``kept`` records, for each list that lost items, the index as
    written of each item left."""
    if isinstance(value, dict):
        return {key: _without_gone(child, (*loc, key), kept) for key, child in value.items()}
    if isinstance(value, list):
        left = tuple(index for index, child in enumerate(value) if child is not _GONE)
        if len(left) != len(value):
            kept[loc] = left
        return [_without_gone(value[index], (*loc, index), kept) for index in left]
    return value


_PATH_PART = re.compile(r"\[(\d+)\]|\.([^.\[]+)")


def _loc_of(path: str) -> tuple[str | int, ...] | None:
    """``aks-gpu:gpuPools[1].migProfile`` -> ``('gpuPools', 1, 'migProfile')``; None for a path that is not a key of
    this program's (a foreign key, ``(file)``)."""
    if path == LOCATION_KEY:
        return ("location",)
    if not path.startswith(f"{PROJECT}:"):
        return None
    rest = path.removeprefix(f"{PROJECT}:")
    head = re.match(r"[^.\[]+", rest)
    if head is None:
        return None
    loc: list[str | int] = [head.group()]
    for match in _PATH_PART.finditer(rest, head.end()):
        loc.append(int(match.group(1)) if match.group(1) is not None else match.group(2))
    return tuple(loc)


def _field_at(loc: tuple[str | int, ...]) -> FieldInfo | None:
    """The model field a key path names (``('gpuPools', 0, 'vmSize')``), or None (a map's entry, an unknown key)."""
    model: Any = StackConfig
    field: FieldInfo | None = None
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        model = _model_in(field.annotation)
    return field


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
        if kind == ENCRYPTED_ERROR:
            continue  # said by read_config, as a warning where a default can stand in
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
        elif kind == LEADING_ZERO_ERROR:
            message = error["msg"]
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
