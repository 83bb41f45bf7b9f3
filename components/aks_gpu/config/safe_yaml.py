"""Reading YAML we are handed (a stack file, a kubeconfig): the way Pulumi reads it, with limits.

Pulumi reads stack files with Go's ``gopkg.in/yaml.v3`` (``sdk/go/common/workspace/project.go`` in
pulumi/pulumi) into untyped values, then into its config objects (``sdk/go/common/resource/config/object.go``).
PyYAML's ``safe_load`` follows YAML 1.1 instead, and the two disagree on plain scalars a stack file holds:

- ``yes``/``no``/``on``/``off`` are booleans in YAML 1.1; yaml.v3 reads them as strings unless the target is a
  typed bool (its README, "Compatibility"). Here only ``true``/``false`` (any case yaml.v3 knows) are booleans.
- ``13:30`` is the base-60 integer 810 in YAML 1.1: an unquoted maintenance ``startTime`` would silently
  become a number. YAML 1.2 and yaml.v3 have no base-60 numbers: here it is the string ``"13:30"``.
- A date (``2025-01-01``) becomes a ``datetime.date`` in PyYAML, which JSON cannot carry (the plan writer
  crashed on it); yaml.v3 gives an untyped value the text as written. Here it is that text.
- A key written twice in one mapping: PyYAML keeps the last, yaml.v3 refuses the file ("mapping key ...
  already defined at line N"). Here it is refused, with both lines.

Only what JSON (and Pulumi's config) can carry is accepted: strings, finite numbers, integers within 64 bits
(Pulumi keeps them as int64), booleans, null, lists and mappings with string keys. ``!!binary``, ``!!set``,
``!!omap``, ``!!pairs`` and custom tags are refused wherever they stand, including under keys this program does
not read, because the values of those keys still travel to Pulumi as JSON.

Limits, each named in the message when hit:

- ``MAX_DEPTH`` levels of nesting (a stack file needs about 6; 20,000 ``[`` overflowed Python's stack);
- ``MAX_NODES`` values once aliases are expanded: an alias is a reference, so a few lines
  (``a: &a [x, x, ...]``, ``b: &b [*a, *a, ...]``, ...) describe 10^8 values that every reader of the result
  (validation, the error message, the JSON writer) would walk one by one;
- no alias refers to the collection it stands in (a structure that contains itself).
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterator
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_DEPTH = 64
MAX_NODES = 100_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Longer than any int64 in any base YAML writes (0b and 64 digits), so int() never sees 4,300 digits.
_MAX_INT_TEXT = 70
# Messages quote a value at most this long (a YAML problem text, a key).
MAX_QUOTED = 80

_TAG = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL, SEQ, MAP, MERGE, TIMESTAMP = (
    _TAG + name for name in ("str", "int", "float", "bool", "null", "seq", "map", "merge", "timestamp")
)
_ALLOWED_TAGS = {STR, INT, FLOAT, BOOL, NULL, SEQ, MAP, TIMESTAMP}

Path = tuple[str | int, ...]


class YamlInputError(ValueError):
    """YAML we refuse: ``reason`` says what and which limit; ``line`` (1-based) and ``path`` (keys and list
    indexes from the top) say where, when known."""

    def __init__(self, reason: str, line: int | None = None, path: Path = ()) -> None:
        self.reason = reason
        self.line = line
        self.path = path
        super().__init__(reason + (f" (line {line})" if line else ""))


def quoted(text: str, limit: int = MAX_QUOTED) -> str:
    """``repr`` of at most ``limit`` characters of ``text``, marked when cut."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def describe_yaml_error(error: yaml.YAMLError) -> str:
    """What PyYAML says is wrong and where, without the copy of the offending line its ``str()`` carries:
    that line can hold a token or a key (a kubeconfig is YAML too)."""
    if isinstance(error, yaml.MarkedYAMLError):
        what = "; ".join(str(part) for part in (error.context, error.problem) if part) or "not valid YAML"
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"not valid YAML: {what[:200]}{where}"
    if isinstance(error, yaml.reader.ReaderError) and isinstance(error.character, int):
        return f"not valid YAML: character #x{error.character:04x} is not allowed (position {error.position})"
    return "not valid YAML"


def load(text: str, *, refuse_leading_zero_numbers: bool = False) -> Any:
    """The single YAML document in ``text`` as plain values; raises ``YamlInputError`` for what we refuse and
    ``yaml.YAMLError`` for what is not YAML (render it with ``describe_yaml_error``). With
    ``refuse_leading_zero_numbers`` (a Pulumi stack file) an unquoted ``010`` is refused: see ``_LEADING_ZERO``."""
    loader = _StackFileLoader(text) if refuse_leading_zero_numbers else _Loader(text)
    try:
        return loader.get_single_data()
    except RecursionError:  # a defence: MAX_DEPTH stops nesting long before Python's stack
        raise YamlInputError(f"nested too deeply (the limit is {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()


def check_value(value: Any, path: Path = ()) -> None:
    """The same rules for a value that arrived as JSON (Pulumi hands structured config to the program as JSON
    text): nesting, size, finite numbers, 64-bit integers, string keys. Raises ``YamlInputError``."""
    count = 0
    stack: list[tuple[Any, Path, int]] = [(value, path, 1)]
    while stack:
        item, where, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise YamlInputError(f"holds more than {MAX_NODES:,} values (the limit)", path=path)
        if depth > MAX_DEPTH:
            raise YamlInputError(f"nested deeper than {MAX_DEPTH} levels (the limit)", path=where)
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                raise YamlInputError("an integer outside the 64-bit range Pulumi config holds", path=where)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise YamlInputError(_NOT_FINITE, path=where)
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise YamlInputError(f"a key must be a string, not {type(key).__name__}", path=where)
                stack.append((child, (*where, key), depth + 1))
        elif isinstance(item, list):
            stack.extend((child, (*where, index), depth + 1) for index, child in enumerate(item))
        else:
            raise YamlInputError(f"a {type(item).__name__} value is not allowed (only what JSON can carry)", path=where)


_NOT_FINITE = "not a finite number: NaN and infinity cannot be written in JSON, so Pulumi cannot carry them"


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with yaml.v3's reading of plain scalars, the tree checked before construction."""

    yaml_implicit_resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._composed = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        # The composer recurses once per level: stop before Python's stack does.
        self._depth += 1
        # And it reads every value before the tree is checked: stop at the limit (an alias counts once here, as
        # written; the tree check counts it expanded), not after composing a 1 MiB file's 500,000 values.
        self._composed += 1
        try:
            if self._composed > MAX_NODES:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise YamlInputError(f"holds more than {MAX_NODES:,} values (the limit)", mark.line + 1)
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise YamlInputError(f"nested deeper than {MAX_DEPTH} levels (the limit)", mark.line + 1)
            node: Node | None = super().compose_node(parent, index)  # type: ignore[no-untyped-call]
            return node
        finally:
            self._depth -= 1

    def construct_document(self, node: Node) -> Any:
        _TreeCheck().run(node)
        return super().construct_document(node)  # type: ignore[no-untyped-call]


def _construct_int(loader: yaml.SafeLoader, node: ScalarNode) -> int:
    return _int_value(str(loader.construct_scalar(node)), node, ())


def _construct_text(loader: yaml.SafeLoader, node: ScalarNode) -> str:
    return str(loader.construct_scalar(node))


# Plain scalars as yaml.v3 resolves them (YAML 1.2 core schema): bool, int, float and null; no base 60, no
# implicit timestamps, no "=" value key. Leading-zero numbers such as 0777 or 08, read differently by YAML
# 1.1 (octal), YAML 1.2 (decimal) and yaml.v3 (octal, or a float), stay strings rather than guess.
for _first, _resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items():
    _kept = [(tag, regexp) for tag, regexp in _resolvers if tag in (NULL, MERGE)]
    if _kept:
        _Loader.yaml_implicit_resolvers[_first] = _kept
_Loader.add_implicit_resolver(BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_implicit_resolver(
    INT, re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+)$"), list("-+0123456789")
)
_Loader.add_implicit_resolver(
    FLOAT,
    re.compile(
        r"^(?:[-+]?(?:\.[0-9][0-9_]*|(?:0|[1-9][0-9_]*)(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
_Loader.add_constructor(INT, _construct_int)
_Loader.add_constructor(TIMESTAMP, _construct_text)

# An unquoted number with a leading zero (``maxCount: 010``) inside a structured stack config value: the Pulumi CLI
# decodes those with yaml.v3 into Go values, which resolves it with strconv.ParseInt(text, 0, 64) (gopkg.in/yaml.v3
# resolve.go: "Octals from the 1.1 spec, spelled as 0777, are still decoded by default in v3"), so 010 is octal 8
# there, while a reader of YAML 1.2 (and pydantic, from the text) takes 10. The plan must show what `pulumi up`
# deploys: the ambiguity is refused instead of guessed. A config key's own scalar value (``config: {k: 0777}``,
# depth 2) is kept as the text written: Pulumi's config.Value unmarshals a scalar into a string first, and yaml.v3
# gives a string target the text as written.
_LEADING_ZERO_TAG = "tag:aks-gpu,2026:leading-zero-number"
_TEXT_DEPTH = 2
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?$")


class _StackFileLoader(_Loader):
    """``_Loader``, reading the unquoted leading-zero numbers yaml.v3 and YAML 1.2 read differently as
    ``LeadingZeroNumber``, which the config refuses where it stands."""


class LeadingZeroNumber(str):
    """An unquoted number with a leading zero inside a structured stack config value (``maxCount: 010``), kept as
    written: Pulumi reads it as octal, other readers as decimal, so the config models refuse it where it stands
    (``aks_gpu.config.models``), beside every other mistake of the file, never guessing its value."""

    line: int | None

    def __new__(cls, text: str, line: int | None = None) -> LeadingZeroNumber:
        number = super().__new__(cls, text)
        number.line = line
        return number

    def __reduce__(self) -> tuple[type[LeadingZeroNumber], tuple[str, int | None]]:
        return LeadingZeroNumber, (str(self), self.line)

    @property
    def message(self) -> str:
        return _leading_zero_message(str(self)) + (f" (line {self.line})" if self.line else "")


def leading_zero_numbers(value: Any, path: Path = ()) -> Iterator[tuple[Path, LeadingZeroNumber]]:
    """Where ``value`` holds a ``LeadingZeroNumber``, and which."""
    if isinstance(value, LeadingZeroNumber):
        yield path, value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from leading_zero_numbers(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from leading_zero_numbers(child, (*path, index))


def _construct_leading_zero(loader: yaml.SafeLoader, node: ScalarNode) -> LeadingZeroNumber:
    return LeadingZeroNumber(str(loader.construct_scalar(node)), node.start_mark.line + 1)


def _leading_zero_message(text: str) -> str:
    return (
        f"the number {text[:MAX_QUOTED]} has a leading zero: Pulumi reads it as octal (010 is 8), other YAML readers as"
        " decimal (10); write the number without the zero, or quote it if it is text"
    )


_StackFileLoader.add_implicit_resolver(_LEADING_ZERO_TAG, _LEADING_ZERO, list("-+0"))
_StackFileLoader.add_constructor(_LEADING_ZERO_TAG, _construct_leading_zero)


def _int_value(text: str, node: Node, path: Path) -> int:
    line = node.start_mark.line + 1
    digits = text.replace("_", "")
    if len(digits) > _MAX_INT_TEXT:
        raise YamlInputError("an integer outside the 64-bit range Pulumi config holds", line, path)
    try:
        value = int(digits, 0)
    except ValueError:
        raise YamlInputError(f"not an integer: {quoted(text)}", line, path) from None
    if not INT64_MIN <= value <= INT64_MAX:
        raise YamlInputError("an integer outside the 64-bit range Pulumi config holds", line, path)
    return value


class _TreeCheck:
    """One walk over the composed tree, aliases followed: tags, keys, numbers, size and depth once expanded."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}
        self.heights: dict[int, int] = {}
        self.open: set[int] = set()

    def run(self, root: Node) -> None:
        self.visit(root, (), 1)

    def visit(self, node: Node, path: Path, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in self.sizes:
            size, height = self.sizes[key], self.heights[key]
            if depth - 1 + height > MAX_DEPTH:
                raise YamlInputError(
                    f"nested deeper than {MAX_DEPTH} levels once its aliases are expanded (the limit)", _line(node), path
                )
            return size, height
        line = _line(node)
        if key in self.open:
            raise YamlInputError("an alias refers to the collection it stands in (a structure that contains itself)", line, path)
        if depth > MAX_DEPTH:
            raise YamlInputError(f"nested deeper than {MAX_DEPTH} levels once its aliases are expanded (the limit)", line, path)
        tag = node.tag
        if tag == _LEADING_ZERO_TAG and len(path) <= _TEXT_DEPTH:
            node.tag = tag = STR  # a config key's own value: Pulumi keeps the text as written
        if tag not in _ALLOWED_TAGS and tag != _LEADING_ZERO_TAG:
            raise YamlInputError(
                f"the YAML tag {_short_tag(tag)} is not allowed: a value here is a string, number, boolean, null,"
                " list or mapping (what JSON carries)",
                line,
                path,
            )
        size, height = 1, 1
        if isinstance(node, ScalarNode):
            self.scalar(node, path)
        else:
            self.open.add(key)
            children: list[tuple[Node, Path]] = []
            if isinstance(node, SequenceNode):
                children = [(child, (*path, index)) for index, child in enumerate(node.value)]
            elif isinstance(node, MappingNode):
                children = self.mapping(node, path)
            for child, child_path in children:
                child_size, child_height = self.visit(child, child_path, depth + 1)
                size += child_size
                height = max(height, child_height + 1)
                if size > MAX_NODES:
                    raise YamlInputError(
                        f"expands to more than {MAX_NODES:,} values once its aliases (*name) are expanded (the limit)",
                        line,
                        path,
                    )
            self.open.discard(key)
        self.sizes[key], self.heights[key] = size, height
        return size, height

    def scalar(self, node: ScalarNode, path: Path) -> None:
        text = str(node.value)
        if node.tag == INT:
            _int_value(text, node, path)
        elif node.tag == FLOAT:
            try:
                value = float(text.replace("_", "").lower().replace(".inf", "inf").replace(".nan", "nan"))
            except ValueError:
                raise YamlInputError(f"not a number: {quoted(text)}", _line(node), path) from None
            if not math.isfinite(value):
                raise YamlInputError(_NOT_FINITE, _line(node), path)
        elif node.tag == BOOL and text.lower() not in yaml.SafeLoader.bool_values:
            raise YamlInputError(f"not a boolean: {quoted(text)}", _line(node), path)

    def mapping(self, node: MappingNode, path: Path) -> list[tuple[Node, Path]]:
        seen: dict[Hashable, int] = {}
        children: list[tuple[Node, Path]] = []
        for key_node, value_node in node.value:
            line = _line(key_node)
            if not isinstance(key_node, ScalarNode) or key_node.tag not in (STR, MERGE):
                kind = "a list or mapping" if not isinstance(key_node, ScalarNode) else _KIND.get(key_node.tag, "not a string")
                hint = f": quote it ({quoted(str(key_node.value))})" if isinstance(key_node, ScalarNode) else ""
                raise YamlInputError(f"a key must be a string, this one is {kind}{hint}", line, path)
            name = str(key_node.value)
            if name in seen:
                raise YamlInputError(
                    f"duplicate key {quoted(name)}: written on line {seen[name]} and again on line {line}; YAML allows a key"
                    " once per mapping (Pulumi refuses the file; PyYAML would silently keep the last)",
                    line,
                    (*path, name),
                )
            seen[name] = line
            if key_node.tag == MERGE:
                # A merge key's value is a mapping (or a list of them) whose keys join this one.
                children.append((value_node, path))
            else:
                children.append((value_node, (*path, name)))
        return children


_KIND = {INT: "a number", FLOAT: "a number", BOOL: "a boolean", NULL: "null"}


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _short_tag(tag: str) -> str:
    return ("!!" + tag.removeprefix(_TAG)) if tag.startswith(_TAG) else quoted(tag, 40)
