"""What kube-apiserver's CEL environment refuses when a ValidatingAdmissionPolicy is created, checked offline.

The API server compiles every matchCondition, variable, validation expression and messageExpression of a policy
when it is created or updated (``pkg/apis/admissionregistration/validation/validation.go``) with the base CEL
environment of its compatibility version (``staging/src/k8s.io/apiserver/pkg/cel/environment/base.go``; a server of
minor N validates new expressions with N-1). Beyond parsing and type-checking, that environment applies AST
validators from 1.29 on (``cel.ASTValidators(ValidateDurationLiterals, ValidateTimestampLiterals,
ValidateRegexLiterals, ValidateHomogeneousAggregateLiterals)``), and each version enables its own set of libraries.
Neither of the evaluating engines applies those rules, so a policy both engines run can still be refused by every
real server; this module applies them:

- type-checking: cel-cpp's checker (``cel-expr-python``) under the Kubernetes declarations: ``object``,
  ``oldObject``, ``params`` dynamic, ``request`` and ``namespaceObject`` with their declared types
  (``pkg/admission/plugin/cel/compile.go`` ``BuildRequestType``/``BuildNamespaceType``), each ``variables.<name>``
  with the type its own expression checked to (``composition.go`` adds every compiled variable as a typed field);
- homogeneous aggregate literals as cel-go's validator walks the checked AST (``cel/validator.go``): every element
  of a list literal, every key and every value of a map literal, of one equivalent type (``dyn`` is not equivalent
  to ``string``), literals inside a ``format`` call exempt;
- duration, timestamp and regex literals: a constant argument of ``duration``, ``timestamp`` or ``matches`` that
  does not parse is ``invalid <function> argument``;
- the functions and macros each compatibility version enables, from ``components/aks_gpu/data/kubernetes_cel.yaml``.

The messages are cel-go's (``ERROR: <input>:<line>:<column>: ...``); the verdicts were compared with the real
environment (cel-go v0.26.0 with k8s.io/apiserver v0.36.3) on the corpus under ``tests/fixtures/kubernetes_cel``.
What cel-cpp cannot type-check (a library it does not carry) is refused here, marked so: conservative, never a
policy the server refuses passing as fine.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.data_files import load_yaml

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "kubernetes_cel.yaml"
INPUT = "<input>"


# ---------------------------------------------------------------- protobuf wire format (CheckedExpr)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message: ints for varints and fixed, bytes for length-delimited."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 1:
            value, at = int.from_bytes(data[at : at + 8], "little"), at + 8
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at : at + size], at + size
        elif wire == 5:
            value, at = int.from_bytes(data[at : at + 4], "little"), at + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# ---------------------------------------------------------------- CEL types (cel.expr.Type)

_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}


@dataclass(frozen=True)
class CelType:
    """A checked type, named as cel-go's ``FormatCELType`` prints it."""

    name: str
    parameters: tuple[CelType, ...] = ()

    def __str__(self) -> str:
        if not self.parameters:
            return self.name
        return f"{self.name}({', '.join(str(p) for p in self.parameters)})"

    def equivalent(self, other: CelType) -> bool:
        """cel-go's ``Type.IsEquivalentType``: the same kind and name, and equivalent parameters."""
        return (
            self.name == other.name
            and len(self.parameters) == len(other.parameters)
            and all(a.equivalent(b) for a, b in zip(self.parameters, other.parameters, strict=True))
        )


DYN = CelType("dyn")


def _type(data: bytes) -> CelType:
    for number, _, value in _fields(data):
        if number == 1:
            return DYN
        if number == 2:
            return CelType("null")
        if number == 3:
            return CelType(_PRIMITIVES.get(value, "dyn"))
        if number == 4:
            return CelType("wrapper", (CelType(_PRIMITIVES.get(value, "dyn")),))
        if number == 5:
            return CelType(_WELL_KNOWN.get(value, "dyn"))
        if number == 6:
            element = next((_type(v) for n, _, v in _fields(value) if n == 1), DYN)
            return CelType("list", (element,))
        if number == 7:
            parts = {n: _type(v) for n, _, v in _fields(value)}
            return CelType("map", (parts.get(1, DYN), parts.get(2, DYN)))
        if number == 9:
            return CelType(value.decode())
        if number == 10:
            return DYN  # an unresolved type parameter: dyn once checking ends
        if number == 11:
            return CelType("type", (_type(value),) if value else ())
        if number == 12:
            return CelType("*error*")
        if number == 14:
            abstract = dict((n, v) for n, _, v in _fields(value) if n == 1)
            params = tuple(_type(v) for n, _, v in _fields(value) if n == 2)
            return CelType(abstract.get(1, b"").decode(), params)
    return DYN


# ---------------------------------------------------------------- the checked AST (cel.expr.Expr)


@dataclass
class Node:
    """One expression of the AST: its id, kind and children, plus what the validators read."""

    id: int
    kind: str  # const, ident, select, call, list, map, comprehension
    children: list[Node] = field(default_factory=list)
    function: str = ""
    member: bool = False
    constant: Any = None
    optional_indices: tuple[int, ...] = ()
    # map entries: (entry id, key, value, optional)
    entries: list[tuple[Node, Node, bool]] = field(default_factory=list)


def _constant(data: bytes) -> Any:
    for number, _, value in _fields(data):
        if number == 6:
            return value.decode("utf-8", "replace")
        if number == 7:
            return value
        if number == 2:
            return bool(value)
        if number == 3:
            return _signed(value)
        return None
    return None


def _expr(data: bytes) -> Node:
    node = Node(id=0, kind="const")
    for number, _, value in _fields(data):
        if number == 2:
            node.id = _signed(value)
        elif number == 3:
            node.kind, node.constant = "const", _constant(value)
        elif number == 4:
            node.kind = "ident"
            node.constant = next((v.decode() for n, _, v in _fields(value) if n == 1), "")
        elif number == 5:
            node.kind = "select"
            node.children = [_expr(v) for n, _, v in _fields(value) if n == 1]
            node.function = next((v.decode() for n, _, v in _fields(value) if n == 2), "")
        elif number == 6:
            node.kind = "call"
            for n, _, v in _fields(value):
                if n == 1:
                    node.children.insert(0, _expr(v))
                    node.member = True
                elif n == 2:
                    node.function = v.decode()
                elif n == 3:
                    node.children.append(_expr(v))
        elif number == 7:
            node.kind = "list"
            optional: list[int] = []
            for n, wire, v in _fields(value):
                if n == 1:
                    node.children.append(_expr(v))
                elif n == 2:
                    optional += [_varint(v, i)[0] for i in _offsets(v)] if wire == 2 else [v]
            node.optional_indices = tuple(optional)
        elif number == 8:
            node.kind = "map"
            for n, _, v in _fields(value):
                if n == 2:
                    node.entries.append(_entry(v))
            node.children = [part for key, val, _ in node.entries for part in (key, val)]
        elif number == 9:
            node.kind = "comprehension"
            node.children = [_expr(v) for n, _, v in _fields(value) if n in (2, 4, 5, 6, 7)]
    return node


def _offsets(packed: bytes) -> Iterator[int]:
    at = 0
    while at < len(packed):
        yield at
        _, at = _varint(packed, at)


def _entry(data: bytes) -> tuple[Node, Node, bool]:
    key, value, optional = Node(0, "const"), Node(0, "const"), False
    for number, _, raw in _fields(data):
        if number == 3:
            key = _expr(raw)
        elif number == 4:
            value = _expr(raw)
        elif number == 5:
            optional = bool(raw)
    return key, value, optional


@dataclass
class CheckedExpression:
    root: Node
    types: dict[int, CelType]
    positions: dict[int, int]
    line_offsets: tuple[int, ...]

    def location(self, node_id: int) -> tuple[int, int]:
        """cel-go's ``locationByID``: 1-based line, and the column as cel-go reports it (offset + 1 on line 1)."""
        offset = self.positions.get(node_id, 0)
        line, column = 1, offset
        for line_offset in self.line_offsets:
            if line_offset < offset:
                line, column = line + 1, offset - line_offset
            else:
                break
        return line, column + 1 if line == 1 else column


def _checked(serialized: bytes) -> CheckedExpression:
    # cel-expr-python serialises a google.protobuf.Any holding a cel.expr.CheckedExpr (or a ParsedExpr unchecked).
    wrapper = {n: v for n, _, v in _fields(serialized)}
    payload = wrapper.get(2, b"")
    parsed = b"ParsedExpr" in wrapper.get(1, b"")
    # CheckedExpr: type_map 3, expr 4, source_info 5; ParsedExpr: expr 2, source_info 3.
    expr_field, info_field = (2, 3) if parsed else (4, 5)
    root, types, positions = Node(0, "const"), {}, {}
    line_offsets: tuple[int, ...] = ()
    for number, _, value in _fields(payload):
        if number == 3 and not parsed:  # type_map entry
            entry = {n: v for n, _, v in _fields(value)}
            types[_signed(entry.get(1, 0))] = _type(entry.get(2, b""))
        elif number == expr_field:
            root = _expr(value)
        elif number == info_field:
            for n, wire, v in _fields(value):
                if n == 3:
                    line_offsets = tuple(_varint(v, i)[0] for i in _offsets(v)) if wire == 2 else (*line_offsets, v)
                elif n == 4:
                    entry = {k: x for k, _, x in _fields(v)}
                    positions[_signed(entry.get(1, 0))] = entry.get(2, 0)
    return CheckedExpression(root, types, positions, line_offsets)


def _walk(node: Node, parents: tuple[Node, ...] = ()) -> Iterator[tuple[Node, tuple[Node, ...]]]:
    yield node, parents
    for child in node.children:
        yield from _walk(child, (*parents, node))


# ---------------------------------------------------------------- the versioned environment


@dataclass(frozen=True)
class Library:
    name: str
    introduced: tuple[int, int]
    removed: tuple[int, int] | None
    functions: frozenset[str]
    offline: bool  # cel-cpp type-checks it here
    three_argument_macros: frozenset[str] = frozenset()


@cache
def libraries() -> tuple[Library, ...]:
    data = load_yaml(DATA_FILE)
    return tuple(
        Library(
            name=entry["name"],
            introduced=_version(entry["introduced"]),
            removed=_version(entry["removed"]) if entry.get("removed") else None,
            functions=frozenset(entry.get("functions", ())),
            offline=bool(entry.get("offline", False)),
            three_argument_macros=frozenset(entry.get("three_argument_macros", ())),
        )
        for entry in data["libraries"]
    )


def compat_versions() -> tuple[str, ...]:
    """The compatibility versions the stacks' policies must compile under (data file, ``compat_versions``)."""
    return tuple(str(v) for v in load_yaml(DATA_FILE)["compat_versions"])


def _version(text: Any) -> tuple[int, int]:
    major, minor = str(text).split(".")[:2]
    return int(major), int(minor)


def _enabled(library: Library, compat: tuple[int, int]) -> bool:
    return library.introduced <= compat and (library.removed is None or compat < library.removed)


# ---------------------------------------------------------------- cel-cpp declarations


_ROOTS = ("object", "oldObject", "params")


@cache
def _descriptor_pool() -> Any:
    """``request`` and ``namespaceObject`` as the API server declares them (compile.go), as protobuf messages so
    that cel-cpp types their fields (``request.operation`` is a string, not dyn)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    field_proto = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="aks_gpu_kubernetes_cel.proto", package="kubernetes", syntax="proto3")
    proto.dependency.extend(["google/protobuf/timestamp.proto", "google/protobuf/struct.proto"])

    def message(name: str, fields: Sequence[tuple[str, str, bool]]) -> None:
        msg = proto.message_type.add(name=name)
        for number, (field_name, kind, repeated) in enumerate(fields, start=1):
            entry = msg.field.add(name=field_name, number=number, json_name=field_name)
            entry.label = field_proto.LABEL_REPEATED if repeated else field_proto.LABEL_OPTIONAL
            if kind == "string":
                entry.type = field_proto.TYPE_STRING
            elif kind == "bool":
                entry.type = field_proto.TYPE_BOOL
            elif kind == "int":
                entry.type = field_proto.TYPE_INT64
            else:
                entry.type, entry.type_name = field_proto.TYPE_MESSAGE, kind

    gvk = [("group", "string", False), ("version", "string", False), ("kind", "string", False)]
    gvr = [("group", "string", False), ("version", "string", False), ("resource", "string", False)]
    message("GroupVersionKind", gvk)
    message("GroupVersionResource", gvr)
    message(
        "UserInfo",
        [
            ("username", "string", False),
            ("uid", "string", False),
            ("groups", "string", True),
            ("extra", ".google.protobuf.Struct", False),
        ],
    )
    message(
        "AdmissionRequest",
        [
            ("kind", ".kubernetes.GroupVersionKind", False),
            ("resource", ".kubernetes.GroupVersionResource", False),
            ("subResource", "string", False),
            ("requestKind", ".kubernetes.GroupVersionKind", False),
            ("requestResource", ".kubernetes.GroupVersionResource", False),
            ("requestSubResource", "string", False),
            ("name", "string", False),
            ("namespace", "string", False),
            ("operation", "string", False),
            ("userInfo", ".kubernetes.UserInfo", False),
            ("dryRun", "bool", False),
            ("options", ".google.protobuf.Value", False),
        ],
    )
    labels = proto.message_type.add(name="NamespaceMetadata")
    for number, (field_name, kind, repeated) in enumerate(
        [
            ("name", "string", False),
            ("generateName", "string", False),
            ("namespace", "string", False),
            ("UID", "string", False),
            ("creationTimestamp", ".google.protobuf.Timestamp", False),
            ("deletionGracePeriodSeconds", "int", False),
            ("deletionTimestamp", ".google.protobuf.Timestamp", False),
            ("generation", "int", False),
            ("resourceVersion", "string", False),
            ("finalizers", "string", True),
        ],
        start=1,
    ):
        entry = labels.field.add(name=field_name, number=number, json_name=field_name)
        entry.label = field_proto.LABEL_REPEATED if repeated else field_proto.LABEL_OPTIONAL
        entry.type = {"string": field_proto.TYPE_STRING, "int": field_proto.TYPE_INT64}.get(kind, field_proto.TYPE_MESSAGE)
        if entry.type == field_proto.TYPE_MESSAGE:
            entry.type_name = kind
    for number, map_name in ((11, "labels"), (12, "annotations")):
        entry_type = labels.nested_type.add(name=map_name.capitalize() + "Entry")
        entry_type.options.map_entry = True
        entry_type.field.add(name="key", number=1, type=field_proto.TYPE_STRING, label=field_proto.LABEL_OPTIONAL)
        entry_type.field.add(name="value", number=2, type=field_proto.TYPE_STRING, label=field_proto.LABEL_OPTIONAL)
        labels.field.add(
            name=map_name,
            number=number,
            json_name=map_name,
            label=field_proto.LABEL_REPEATED,
            type=field_proto.TYPE_MESSAGE,
            type_name=f".kubernetes.NamespaceMetadata.{entry_type.name}",
        )
    message("NamespaceSpec", [("finalizers", "string", True)])
    message(
        "NamespaceCondition",
        [
            ("status", "string", False),
            ("type", "string", False),
            ("lastTransitionTime", ".google.protobuf.Timestamp", False),
            ("message", "string", False),
            ("reason", "string", False),
        ],
    )
    message("NamespaceStatus", [("conditions", ".kubernetes.NamespaceCondition", True), ("phase", "string", False)])
    message(
        "Namespace",
        [
            ("metadata", ".kubernetes.NamespaceMetadata", False),
            ("spec", ".kubernetes.NamespaceSpec", False),
            ("status", ".kubernetes.NamespaceStatus", False),
        ],
    )
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import struct_pb2, timestamp_pb2

    for dependency in (timestamp_pb2, struct_pb2):
        pool.AddSerializedFile(dependency.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    return pool


def _quantity_functions(cel: Any) -> list[Any]:
    """The Kubernetes quantity library's declarations (k8s.io/apiserver/pkg/cel/library/quantity.go), on an opaque
    ``kubernetes.Quantity`` as the server has it; declared only to type-check (never run)."""
    quantity = cel.Type.AbstractType("kubernetes.Quantity")
    string, boolean, integer, double = cel.Type.STRING, cel.Type.BOOL, cel.Type.INT, cel.Type.DOUBLE

    def decl(name: str, result: Any, parameters: list[Any], member: bool, suffix: str = "") -> Any:
        overload = cel.Overload(f"k8s_{name}{suffix}", result, parameters, is_member=member, impl=lambda *_: None)
        return cel.FunctionDecl(name, [overload])

    return [
        decl("quantity", quantity, [string], member=False),
        decl("isQuantity", boolean, [string], member=False),
        decl("sign", integer, [quantity], member=True),
        decl("isGreaterThan", boolean, [quantity, quantity], member=True),
        decl("isLessThan", boolean, [quantity, quantity], member=True),
        decl("compareTo", integer, [quantity, quantity], member=True),
        cel.FunctionDecl(
            "add",
            [
                cel.Overload("k8s_add_quantity", quantity, [quantity, quantity], is_member=True, impl=lambda *_: None),
                cel.Overload("k8s_add_int", quantity, [quantity, integer], is_member=True, impl=lambda *_: None),
            ],
        ),
        cel.FunctionDecl(
            "sub",
            [
                cel.Overload("k8s_sub_quantity", quantity, [quantity, quantity], is_member=True, impl=lambda *_: None),
                cel.Overload("k8s_sub_int", quantity, [quantity, integer], is_member=True, impl=lambda *_: None),
            ],
        ),
        decl("asInteger", integer, [quantity], member=True),
        decl("asApproximateFloat", double, [quantity], member=True),
        decl("isInteger", boolean, [quantity], member=True),
    ]


@cache
def _environment(variables: tuple[tuple[str, str], ...]) -> Any:
    """A cel-cpp checking environment with the Kubernetes roots and the policy's typed ``variables`` (each given by
    the signature of its checked type)."""
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_optional, ext_strings

    declared: dict[str, Any] = {name: cel.Type.DYN for name in _ROOTS}
    declared["request"] = cel.Type("kubernetes.AdmissionRequest")
    declared["namespaceObject"] = cel.Type("kubernetes.Namespace")
    declared |= {f"variables.{name}": _from_signature(cel, signature) for name, signature in variables}
    return cel.NewEnv(
        descriptor_pool=_descriptor_pool(),
        variables=declared,
        # strings v2: what base.go enables from 1.29 (ext.Strings(ext.StringsVersion(2))).
        extensions=[ext_strings.ExtStrings(version=2), ext_optional.ExtOptional()],
        functions=_quantity_functions(cel),
    )


# ---------------------------------------------------------------- the rules


@dataclass(frozen=True)
class CompileError:
    """One refusal, as the API server words it: ``<field>: Invalid value: ...: compilation failed: ERROR: ...``."""

    field: str  # e.g. spec.variables[20].expression
    line: int
    column: int
    message: str
    conservative: bool = False  # refused because this checker cannot type-check it, not because the server would

    @property
    def error(self) -> str:
        return f"ERROR: {INPUT}:{self.line}:{self.column}: {self.message}"

    def __str__(self) -> str:
        return f"{self.field}: compilation failed: {self.error}" + (" (not checked offline)" if self.conservative else "")


_CPP_ERROR = re.compile(r"ERROR: [^:]*:(\d+):(\d+): (.*)")
_UNDECLARED = re.compile(r"undeclared reference to '([^']+)'")
_DURATION = re.compile(r"-?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+|-?0")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})")


def check_expression(
    source: str, compat: str, field_path: str, variables: Mapping[str, Any] | None = None
) -> tuple[list[CompileError], Any]:
    """Compile one expression as the server of compatibility version ``compat`` would. The errors (empty: it
    compiles) and its checked type (a cel-cpp type, or None) for the variables after it."""
    version = _version(compat)
    from cel_expr_python import cel

    gated = _version_gate(source, version, field_path)
    if gated:
        return gated, None
    typed = tuple(sorted((name, _signature(kind)) for name, kind in (variables or {}).items()))
    try:
        expression = _environment(typed).compile(source)
    except RuntimeError as error:
        return _cpp_errors(str(error), field_path, version), None
    checked = _checked(expression.serialize())
    errors = list(_literal_errors(checked, field_path)) + list(_homogeneous_errors(checked, field_path))
    errors.sort(key=lambda e: (e.line, e.column))
    result = expression.return_type()
    if not isinstance(result, cel.Type):
        result = cel.Type.DYN
    return errors, result


_SIGNATURE_TOKEN = re.compile(r"\s*([^<>,\s]+|[<>,])")


def _from_signature(cel: Any, signature: str) -> Any:
    """The cel-cpp type a signature (``MAP<STRING, LIST<STRING>>``) names: ``cel.Type(signature)`` would make an
    opaque type of that name, not a map."""
    tokens = _SIGNATURE_TOKEN.findall(signature)
    at = 0

    def parse() -> Any:
        nonlocal at
        name = tokens[at]
        at += 1
        parameters = []
        if at < len(tokens) and tokens[at] == "<":
            at += 1
            while tokens[at] != ">":
                parameters.append(parse())
                if tokens[at] == ",":
                    at += 1
            at += 1
        if name == "LIST" and len(parameters) == 1:
            return cel.Type.List(parameters[0])
        if name == "MAP" and len(parameters) == 2:
            return cel.Type.Map(parameters[0], parameters[1])
        if parameters:
            return cel.Type.AbstractType(name, parameters)
        return getattr(cel.Type, name, None) or cel.Type(name)

    return parse()


def _signature(kind: Any) -> str:
    """A checked type as cel-cpp spells it (``LIST<STRING>``); ``cel.Type(signature)`` gives it back."""
    return str(kind.name())


def _version_gate(source: str, version: tuple[int, int], field_path: str) -> list[CompileError]:
    """Functions of a library the version does not enable: undeclared there, as cel-go reports them."""
    from cel_expr_python import cel

    try:
        parsed = cel.NewEnv().compile(source, disable_check=True)
    except RuntimeError:
        return []  # a syntax error: cel-cpp's checker reports it below
    tree = _checked(parsed.serialize())
    enabled = [library for library in libraries() if _enabled(library, version)]
    available = {f for library in enabled for f in library.functions}
    known = {f for library in libraries() for f in library.functions}
    macros = {f for library in enabled for f in library.three_argument_macros}
    known_macros = {f for library in libraries() for f in library.three_argument_macros}
    errors = []
    for node, _ in _walk(tree.root):
        if node.kind != "call":
            continue
        name = node.function
        target = node.children[0] if node.member and node.children else None
        if target is not None and target.kind == "ident" and f"{target.constant}.{name}" in known:
            name = f"{target.constant}.{name}"
        arguments = len(node.children) - (1 if node.member else 0)
        refused = (name in known and name not in available) or (arguments == 3 and name in known_macros and name not in macros)
        if refused:
            line, column = tree.location(node.id)
            errors.append(CompileError(field_path, line, column, f"undeclared reference to '{name}' (in container '')"))
    return errors


def _cpp_errors(text: str, field_path: str, version: tuple[int, int]) -> list[CompileError]:
    errors = []
    for match in _CPP_ERROR.finditer(text):
        message = match.group(3).strip()
        undeclared = _UNDECLARED.search(message)
        # A function the server's environment declares at this version but cel-cpp does not carry: refused here.
        conservative = bool(
            undeclared
            and any(
                _enabled(library, version)
                and not library.offline
                and undeclared.group(1).split(".")[0]
                in {f.split(".")[0] for f in library.functions | library.three_argument_macros}
                for library in libraries()
            )
        )
        errors.append(CompileError(field_path, int(match.group(1)), int(match.group(2)), message, conservative))
    if not errors:
        errors.append(CompileError(field_path, 1, 1, text.strip().splitlines()[0] if text.strip() else "compile error"))
    if any(error.conservative for error in errors):
        # cel-cpp could not type-check the expression: none of its refusals is known to be the server's.
        errors = [CompileError(e.field, e.line, e.column, e.message, conservative=True) for e in errors]
    return errors


def _literal_errors(checked: CheckedExpression, field_path: str) -> Iterator[CompileError]:
    """cel-go's duration, timestamp and regex literal validators: a constant argument must parse."""
    for node, _ in _walk(checked.root):
        if node.kind != "call" or node.function not in ("duration", "timestamp", "matches"):
            continue
        args = node.children[1:] if node.member else node.children
        index = 0  # cel-go checks Args()[0]: the pattern of s.matches(p), the string of matches(s, p)
        if len(args) <= index or args[index].kind != "const" or not isinstance(args[index].constant, str):
            continue
        text = args[index].constant
        if not _literal_valid(node.function, text):
            line, column = checked.location(args[index].id)
            yield CompileError(field_path, line, column, f"invalid {node.function} argument")


def _literal_valid(function: str, text: str) -> bool:
    if function == "duration":
        return bool(_DURATION.fullmatch(text))
    if function == "timestamp":
        if not _TIMESTAMP.fullmatch(text):
            return False
        try:
            datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
        except ValueError:
            return False
        return True
    import re2  # google-re2: RE2 syntax, what Go's regexp accepts

    options = re2.Options()
    options.log_errors = False
    try:
        re2.compile(text, options)
    except re2.error:
        return False
    return True


def _homogeneous_errors(checked: CheckedExpression, field_path: str) -> Iterator[CompileError]:
    """cel-go's homogeneous aggregate literal validator over the checked AST."""

    def mismatch(node: Node, expected: CelType, actual: CelType) -> CompileError:
        line, column = checked.location(node.id)
        return CompileError(field_path, line, column, f"expected type '{expected}' but found '{actual}'")

    def type_of(node: Node) -> CelType:
        return checked.types.get(node.id, DYN)

    def in_format(parents: tuple[Node, ...]) -> bool:
        for parent in reversed(parents):
            if parent.kind == "call":
                return parent.function == "format"
            if parent.kind not in ("list", "map"):
                return False
        return False

    lists = [(n, p) for n, p in _walk(checked.root) if n.kind == "list"]
    maps = [(n, p) for n, p in _walk(checked.root) if n.kind == "map"]
    for node, parents in lists:
        if in_format(parents):
            continue
        element_type: CelType | None = None
        for index, element in enumerate(node.children):
            kind = type_of(element)
            if index in node.optional_indices and kind.parameters:
                kind = kind.parameters[0]
            if element_type is None:
                element_type = kind
            elif not element_type.equivalent(kind):
                yield mismatch(element, element_type, kind)
                break
    for node, parents in maps:
        if in_format(parents):
            continue
        key_type: CelType | None = None
        value_type: CelType | None = None
        for key, value, optional in node.entries:
            k, v = type_of(key), type_of(value)
            if optional and v.parameters:
                v = v.parameters[0]
            if key_type is None or value_type is None:
                key_type, value_type = k, v
                continue
            if not key_type.equivalent(k):
                yield mismatch(key, key_type, k)
            if not value_type.equivalent(v):
                yield mismatch(value, value_type, v)


# ---------------------------------------------------------------- a whole policy


def policy_expressions(spec: Mapping[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(field path, expression, variable name or None) of a policy spec, in the order the server compiles them."""
    for index, condition in enumerate(spec.get("matchConditions") or ()):
        yield f"spec.matchConditions[{index}].expression", condition["expression"], None
    for index, variable in enumerate(spec.get("variables") or ()):
        yield f"spec.variables[{index}].expression", variable["expression"], variable["name"]
    for index, validation in enumerate(spec.get("validations") or ()):
        yield f"spec.validations[{index}].expression", validation["expression"], None
        if validation.get("messageExpression"):
            yield f"spec.validations[{index}].messageExpression", validation["messageExpression"], None


def check_policy(spec: Mapping[str, Any], compat: str) -> list[CompileError]:
    """Every refusal the API server of compatibility version ``compat`` would answer creating this policy spec."""
    from cel_expr_python import cel

    errors: list[CompileError] = []
    typed: dict[str, Any] = {}
    for field_path, source, variable in policy_expressions(spec):
        found, kind = check_expression(source, compat, field_path, typed)
        errors += found
        if variable is not None:
            # A variable that does not compile is declared dyn for the ones after it (composition.go).
            typed[variable] = kind if kind is not None and not found else cel.Type.DYN
    return errors
