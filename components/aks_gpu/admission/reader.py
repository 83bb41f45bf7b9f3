"""Kubernetes objects from YAML text, for ``aksgpu admission check``: every document and ``kind: List`` item, or
one clear reason why not. Pure: text in, objects or :class:`InputError` out; never another exception.

The API server decodes an object, validates it and only then runs validating admission, so an object it would
refuse never reaches the policy. This reader refuses the same way, for what the policy reads: a field of the
wrong type (a string ``metadata``, a list of ``labels``, a number as a label value), a resource quantity the API
server would not parse, a duplicate key (``kubectl`` refuses those by default, ``--validate=strict``). Besides,
it bounds what it reads (nesting depth, nodes visited, so an alias bomb is stopped, and quantity length), naming
the limit when one is hit. Each problem names the object: its place in the file, kind and name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import yaml

from aks_gpu.admission.dra import GROUP as DRA_GROUP
from aks_gpu.admission.dra import device_choices, is_claim
from aks_gpu.admission.placeholders import RENDER_FIRST, placeholders, unrendered_template
from aks_gpu.admission.quantity import Quantity, go_base64_decode

MAX_DEPTH = 64  # a CronJob's containers sit 9 levels down; Kubernetes' own JSON decoder stops at 10,000
MAX_NODES = 2_000_000  # per file, counted as visited: shared (aliased) nodes count every time
INT64 = 2**63
# The kinds the GPU placement policy reads, and where their pod spec is (policy.pod_spec_of, policy.RESOURCE_RULES).
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
# The API group of each kind above: a kind of the same name in another group (Volcano's batch.volcano.sh Job) is
# another resource, with its own schema.
BUILTIN_GROUPS: dict[str, str] = {
    "Pod": "",
    "ReplicationController": "",
    "Deployment": "apps",
    "ReplicaSet": "apps",
    "StatefulSet": "apps",
    "DaemonSet": "apps",
    "Job": "batch",
    "CronJob": "batch",
}


def builtin_kind(obj: Mapping[str, Any]) -> bool:
    """The object is one of the built-in kinds of ``POD_SPEC_PATHS`` (not a custom resource of the same kind name)."""
    kind = str(obj.get("kind", ""))
    if kind not in BUILTIN_GROUPS:
        return False
    api_version = obj.get("apiVersion")
    group = str(api_version).rpartition("/")[0] if isinstance(api_version, str) else BUILTIN_GROUPS[kind]
    return group == BUILTIN_GROUPS[kind]


CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# What the device-env policy reads: maps of strings (map[string]string, map[string][]byte as base64).
# https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/config-map-v1/,
# https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/secret-v1/
DATA_FIELDS: dict[str, tuple[str, ...]] = {"ConfigMap": ("data", "binaryData"), "Secret": ("data", "stringData")}
# The []byte maps among them: base64 in JSON, decoded by the server (Go's encoding/base64) before admission.
BYTES_FIELDS: dict[str, str] = {"ConfigMap": "binaryData", "Secret": "data"}
TOLERATION_STRINGS = ("key", "operator", "value", "effect")


class InputError(Exception):
    """A file that cannot be read, or a document that is not a Kubernetes object the API server would accept."""


class UnrenderedFileError(InputError):
    """A file that is no YAML because it is a template still to render (``{{- if .Values.x }}``): not evaluated."""


class _FileLimitError(InputError):
    """A bound of the reader (values in a file) passed: the file is not read, whatever object it was in."""


REFUSED_BEFORE_ADMISSION = "the API server refuses it before admission (422): "
# What stands for the 5 random characters the API server appends to a generateName (k8s.io/apiserver
# pkg/storage/names SimpleNameGenerator) when it names the object, before validating it and before validating
# admission (registry Store.create): offline the name is the prefix and this.
GENERATED_SUFFIX = "\u2026"


@dataclass(frozen=True)
class SourcedObject:
    source: str  # file and document number, for people reading the table
    obj: dict[str, Any]
    # Why the API server refuses the object before admission (the field and what is wrong with it, or its 422
    # answer), "" when it does not: the object is reported refused, never decided.
    refused: str = ""
    # The placeholders that show the object is not rendered yet (aks_gpu.admission.placeholders), "" when none: the
    # object is reported not evaluated.
    unrendered: str = ""

    @property
    def label(self) -> str:
        return _label(self.obj, str(self.obj.get("kind", "")), self.source)

    @property
    def refusal_line(self) -> str:
        """The refusal as the API server words it where the check knows its words (422), else the check's own."""
        return self.refused.split(REFUSED_BEFORE_ADMISSION, 1)[-1]


class _StrictLoader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """YAML 1.1 as PyYAML reads it (libyaml where built in), refusing duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # a list or map as a key: refused when the object is checked
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key_node.value!r} (kubectl refuses duplicate fields)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


_StrictLoader.add_constructor("tag:yaml.org,2002:map", _StrictLoader.construct_mapping)


def read_text(text: str, name: str) -> list[SourcedObject]:
    """Every Kubernetes object in ``text`` (the content of file ``name``), each checked; InputError otherwise (the
    first object refused or not rendered yet stops the file: :func:`read_documents` reports each one instead)."""
    objects = read_documents(text, name)
    for item in objects:
        if item.refused or item.unrendered:
            raise InputError(f"{item.label}: {item.refused or item.unrendered}")
    return objects


def read_documents(text: str, name: str) -> list[SourcedObject]:
    """Every Kubernetes object in ``text`` (the content of file ``name``), each checked: one the API server refuses
    carries why (``refused``), one with placeholders says which (``unrendered``). InputError for what stops the
    whole file (not YAML, not an object, a bound of the reader; :class:`UnrenderedFileError` for a template)."""
    try:
        documents = _json_documents(text)
        if documents is None:
            documents = _plain_documents(text)
        if documents is None:
            _check_nesting(text, name)
            documents = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as error:
        line = unrendered_template(text)
        if line is not None:
            raise UnrenderedFileError(f"{name}: an unrendered template ({{{{ ... }}}} at line {line}): {RENDER_FIRST}") from None
        raise InputError(f"{name}: not valid YAML: {error}") from None
    except RecursionError:
        raise InputError(f"{name}: nested too deeply to read (the limit is {MAX_DEPTH} levels)") from None
    except ValueError as error:  # an integer of more than 4,300 digits: Python's int() refuses to read it
        raise InputError(f"{name}: a number in it is too long to read ({str(error).split(':')[0]})") from None
    budget = _Budget(name)
    objects: list[SourcedObject] = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue  # an empty document, e.g. after a trailing ---
        objects += _objects_of(document, f"{name}#{number}", budget)
    if not objects:
        raise InputError(f"{name}: no objects found (the file holds no Kubernetes object)")
    return objects


def _json_documents(text: str) -> list[Any] | None:
    """The objects of a JSON stream (``{...}``, one after another), read as kubectl reads them: its decoder takes
    text that starts with ``{`` as JSON (k8s.io/apimachinery pkg/util/yaml, YAMLOrJSONDecoder), which a 3 MiB object
    reads in milliseconds where YAML takes seconds. None where it is not such a stream, or not valid JSON, or has a
    duplicate key: the YAML reader then reads it, or says what is wrong with it, as for any other file."""
    if not text.lstrip().startswith("{"):
        return None
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)
    documents: list[Any] = []
    at = 0
    try:
        while True:
            while at < len(text) and text[at].isspace():
                at += 1
            if at == len(text):
                return documents
            document, at = decoder.raw_decode(text, at)
            documents.append(document)
    except (ValueError, RecursionError):
        return None


# The scalar tags a plain YAML file gets from PyYAML's implicit resolvers (YAML 1.1): anything else (a merge key
# ``<<``, a value key ``=``) is left to PyYAML.
_STR_TAG = "tag:yaml.org,2002:str"
_IMPLICIT_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "null", "bool", "int", "float", "timestamp")
)
# The first characters of a plain scalar that one of the implicit resolvers may claim (``yes``, ``0x1f``, ``~``, ``.inf``,
# ``2001-12-14``, the empty scalar): every other plain scalar is a string, what the resolver finds after trying none.
_RESOLVED_FIRST = frozenset(key for key in _StrictLoader.yaml_implicit_resolvers if key is not None)
_ANY_FIRST = None in _StrictLoader.yaml_implicit_resolvers  # a resolver for every first character: none here


class _LeftToPyYAMLError(Exception):
    """What the single pass does not read itself: the file is read by PyYAML's own loader instead."""


def _plain_documents(text: str) -> list[Any] | None:
    """The documents of a YAML file read in one pass over libyaml's events, exactly as PyYAML's ``load_all`` with
    ``_StrictLoader`` reads them, without building PyYAML's node graph first (what made a 2 MB manifest take a second:
    a node, two marks and three resolver calls per scalar, then a second pass to construct). A plain scalar whose
    first character no implicit resolver claims is a string as it stands; any other is resolved and constructed by
    PyYAML's own resolver and constructors. None where the file holds anything else: an anchor or alias, an explicit
    tag, a merge (``<<``) or value (``=``) key, a non-scalar key, a duplicate key, nesting past ``MAX_DEPTH``, or
    anything PyYAML refuses: the caller reads it with PyYAML, which gives the same objects or the same error."""
    loader = _StrictLoader(text)
    try:
        return _events_to_documents(loader)
    except (_LeftToPyYAMLError, yaml.YAMLError, ValueError):
        return None
    finally:
        loader.dispose()


def _events_to_documents(loader: Any) -> list[Any]:
    get_event, resolve, constructors = loader.get_event, loader.resolve, loader.yaml_constructors
    documents: list[Any] = []
    # The collections open around the next value, each with the key read for its next value (a mapping's: empty while
    # the key itself comes next) and the (tag, text) of every key read, as _StrictLoader compares them.
    frames: list[tuple[Any, list[Any], set[tuple[str, str]]]] = []
    root: Any = None
    while True:
        event = get_event()
        kind = type(event)
        if kind is yaml.ScalarEvent:
            if event.anchor is not None or event.tag is not None:
                raise _LeftToPyYAMLError
            value: Any = event.value
            tag = _STR_TAG
            if event.implicit[0] and (_ANY_FIRST or not value or value[0] in _RESOLVED_FIRST):
                tag = resolve(yaml.ScalarNode, value, event.implicit)
                if tag not in _IMPLICIT_TAGS:
                    raise _LeftToPyYAMLError
                if tag != _STR_TAG:
                    node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
                    value = constructors[tag](loader, node)
            if not frames:
                root = value
                continue
            container, key, seen = frames[-1]
            if type(container) is list:
                container.append(value)
            elif key:
                container[key.pop()] = value
            else:
                if (tag, event.value) in seen:
                    raise _LeftToPyYAMLError  # PyYAML says which key, and where
                seen.add((tag, event.value))
                key.append(value)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if event.anchor is not None or event.tag is not None or len(frames) >= MAX_DEPTH:
                raise _LeftToPyYAMLError
            if frames and type(frames[-1][0]) is dict and not frames[-1][1]:
                raise _LeftToPyYAMLError  # a mapping or list as a key
            frames.append(({} if kind is yaml.MappingStartEvent else [], [], set()))
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            done = frames.pop()[0]
            if not frames:
                root = done
                continue
            container, key, _ = frames[-1]
            if type(container) is list:
                container.append(done)
            else:
                container[key.pop()] = done
        elif kind is yaml.DocumentEndEvent:
            documents.append(root)
            root = None
        elif kind is yaml.StreamEndEvent:
            return documents
        elif kind is yaml.AliasEvent:
            raise _LeftToPyYAMLError


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("duplicate key")
    return found


def _check_nesting(text: str, name: str) -> None:
    """Refuse nesting past ``MAX_DEPTH`` before anything is composed: libyaml's composer recurses once per level
    in C, and 100,000 levels (``[[[...]]]``, 200 KB) crash the interpreter with a segmentation fault instead of
    raising RecursionError. The events come one at a time, without recursion."""
    depth = 0
    for event in yaml.parse(text, Loader=_StrictLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise InputError(f"{name}: nested deeper than {MAX_DEPTH} levels (the limit) at line {line}")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Budget:
    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes = 0

    def spend(self, where: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _FileLimitError(
                f"{where}: more than {MAX_NODES:,} values in {self.name} (YAML aliases count each time they are used); "
                "split the file"
            )


def _objects_of(document: Any, source: str, budget: _Budget) -> Iterator[SourcedObject]:
    if not isinstance(document, dict):
        raise InputError(f"{source}: not a Kubernetes object (a mapping with apiVersion and kind)")
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{source}: object without kind")
    if kind == "List" or (kind.endswith("List") and isinstance(document.get("items"), list)):
        items = document.get("items")
        if not isinstance(items, list):
            raise InputError(f"{source}: a List without items")
        for index, item in enumerate(items):
            yield from _objects_of(item, f"{source}.items[{index}]", budget)
        return
    label = _label(document, kind, source)
    try:
        _check_data(document, label, "", 0, budget)
        found = placeholders(document)
        if found:
            unrendered = f"not rendered yet: {'; '.join(found)}; {RENDER_FIRST}"
            yield SourcedObject(source=source, obj=document, unrendered=unrendered)
            return
        _check_object(document, kind, label)
    except _FileLimitError:
        raise
    except InputError as error:
        yield SourcedObject(source=source, obj=document, refused=str(error).removeprefix(f"{label}: "))
        return
    yield SourcedObject(source=source, obj=document)


def _label(document: Mapping[str, Any], kind: str, source: str) -> str:
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        name = metadata.get("generateName") if isinstance(metadata, dict) else None
    shown = name if isinstance(name, str) and name else "(no name)"
    return f"{source} {kind}/{shown}"


# ---------------------------------------------------------------- JSON-like data, bounded


# The values that are always what JSON carries, at any place: counted, never looked into (nor their place named).
_LEAVES = (str, bool, type(None))


def _check_data(value: Any, label: str, path: str, depth: int, budget: _Budget) -> None:
    """What JSON can carry, as the API server decodes it: string keys, 64-bit integers, finite numbers."""
    budget.spend(label)
    if depth > MAX_DEPTH:
        raise InputError(f"{label}: {path or '(top)'}: nested deeper than {MAX_DEPTH} levels")
    leaves_pass = depth < MAX_DEPTH  # one level down is still within the limit
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError(f"{label}: {path or '(top)'}: key {_shown(key)} is not a string")
            if leaves_pass and type(item) in _LEAVES:
                budget.spend(label)
            else:
                _check_data(item, label, _join(path, key), depth + 1, budget)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if leaves_pass and type(item) in _LEAVES:
                budget.spend(label)
            else:
                _check_data(item, label, f"{path}[{index}]", depth + 1, budget)
    elif isinstance(value, bool) or value is None or isinstance(value, str):
        return
    elif isinstance(value, int):
        if not -INT64 <= value < INT64:
            raise InputError(f"{label}: {path}: a {len(str(abs(value)))}-digit integer does not fit in 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"{label}: {path}: {value!r} is not a number JSON can carry")
    elif isinstance(value, (datetime, date)):
        return  # a YAML timestamp: JSON carries it as a string
    else:
        raise InputError(f"{label}: {path}: a YAML {type(value).__name__} value has no JSON form")


def _join(path: str, key: str) -> str:
    plain = key.replace("-", "").replace("_", "").isalnum()
    return (f"{path}.{key}" if path else key) if plain else f"{path}[{key!r}]"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------- what the policy reads, typed


def _check_object(obj: Mapping[str, Any], kind: str, label: str) -> None:
    metadata = obj.get("metadata", {})
    _mapping(metadata, label, "metadata")
    for field in ("name", "namespace", "generateName"):
        _string(metadata.get(field), label, f"metadata.{field}")
    for field in ("labels", "annotations"):
        _string_map(metadata.get(field), label, f"metadata.{field}")
    for field in DATA_FIELDS.get(kind, ()):
        _string_map(obj.get(field), label, field)
    bytes_field = BYTES_FIELDS.get(kind)
    if bytes_field is not None and isinstance(obj.get(bytes_field), dict):
        for key, value in obj[bytes_field].items():
            try:
                go_base64_decode(value)
            except ValueError:
                raise InputError(
                    f"{label}: {_join(bytes_field, key)}: illegal base64 data (the API server refuses it: "
                    f'{kind} in version "v1" cannot be handled as a {kind})'
                ) from None
    if is_claim(obj):
        _check_claim(obj, kind, label)
    path = POD_SPEC_PATHS.get(kind) if builtin_kind(obj) else None
    if path is None:
        return
    spec: Any = obj
    where = ""
    for step in path:
        where = _join(where, step)
        spec = spec.get(step) if isinstance(spec, dict) else None
        if spec is None:
            raise InputError(f"{label}: {where}: required for a {kind} (the API server refuses it without)")
        _mapping(spec, label, where)
    _check_pod_spec(spec, label, where)
    problems = pod_spec_problems(spec, where, pod=kind == "Pod")
    if problems:
        generated = (metadata or {}).get("generateName")
        name = str((metadata or {}).get("name") or (f"{generated}{GENERATED_SUFFIX}" if generated else ""))
        listed = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        # apierrors.NewInvalid names the kind with its group (schema.GroupKind.String(): CronJob.batch), as the
        # server answers (the e2e test test_admission_agrees compares them).
        qualified = f"{kind}.{BUILTIN_GROUPS[kind]}" if BUILTIN_GROUPS.get(kind) else kind
        raise InputError(f'{label}: {REFUSED_BEFORE_ADMISSION}{qualified} "{name}" is invalid: {listed}')


# k8s.io/apimachinery pkg/util/validation IsDNS1123Subdomain, which a claim's deviceClassName must be
# (pkg/apis/resource/validation: validateDeviceClassName = ValidateDNS1123Subdomain).
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_SUBDOMAIN_ERROR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
MAX_SUBDOMAIN = 253


def _check_claim(obj: Mapping[str, Any], kind: str, label: str) -> None:
    """A ResourceClaim's or template's device class names, as the server validates them before admission: a class
    written in capitals (``GPU.nvidia.com``) is refused (422), never judged. The field path is the internal
    version's, ``exactly`` included, whatever version the object is written in."""
    problems = []
    for _, where, choice in device_choices(obj):
        class_name = choice.get("deviceClassName")
        written_v1beta1 = where.rsplit(".", 1)[-1].startswith("requests[")  # the class at the request itself
        at = f"{where}.exactly.deviceClassName" if written_v1beta1 else f"{where}.deviceClassName"
        if class_name is None:
            continue
        if not isinstance(class_name, str):
            raise InputError(f"{label}: {at}: a string is required, not {_type_name(class_name)} (quote it in YAML)")
        if len(class_name) > MAX_SUBDOMAIN or not DNS1123_SUBDOMAIN.match(class_name):
            problems.append(_invalid(at, class_name, DNS1123_SUBDOMAIN_ERROR))
    if problems:
        metadata = obj.get("metadata") or {}
        generated = metadata.get("generateName")
        name = str(metadata.get("name") or (f"{generated}{GENERATED_SUFFIX}" if generated else ""))
        listed = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        raise InputError(f'{label}: {REFUSED_BEFORE_ADMISSION}{kind}.{DRA_GROUP} "{name}" is invalid: {listed}')


def _check_pod_spec(spec: Mapping[str, Any], label: str, where: str) -> None:
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise InputError(f"{label}: {where}.containers: a non-empty list of containers is required")
    for field in CONTAINER_LISTS:
        items = spec.get(field)
        if items is None:
            continue
        _list(items, label, f"{where}.{field}")
        for index, container in enumerate(items):
            _check_container(container, label, f"{where}.{field}[{index}]")
    _check_resources(spec.get("resources"), label, f"{where}.resources")
    tolerations = spec.get("tolerations")
    if tolerations is not None:
        _list(tolerations, label, f"{where}.tolerations")
        for index, toleration in enumerate(tolerations):
            at = f"{where}.tolerations[{index}]"
            _mapping(toleration, label, at)
            for field in TOLERATION_STRINGS:
                _string(toleration.get(field), label, f"{at}.{field}")
    _string_map(spec.get("nodeSelector"), label, f"{where}.nodeSelector")
    _string(spec.get("nodeName"), label, f"{where}.nodeName")
    affinity = spec.get("affinity")
    if affinity is None:
        return
    _mapping(affinity, label, f"{where}.affinity")
    node = affinity.get("nodeAffinity")
    if node is None:
        return
    at = f"{where}.affinity.nodeAffinity"
    _mapping(node, label, at)
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return
    at += ".requiredDuringSchedulingIgnoredDuringExecution"
    _mapping(required, label, at)
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return
    _list(terms, label, f"{at}.nodeSelectorTerms")
    for index, term in enumerate(terms):
        term_at = f"{at}.nodeSelectorTerms[{index}]"
        _mapping(term, label, term_at)
        for part in ("matchExpressions", "matchFields"):
            requirements = term.get(part)
            if requirements is None:
                continue
            _list(requirements, label, f"{term_at}.{part}")
            for position, requirement in enumerate(requirements):
                requirement_at = f"{term_at}.{part}[{position}]"
                _mapping(requirement, label, requirement_at)
                for field in ("key", "operator"):
                    if not isinstance(requirement.get(field), str):
                        raise InputError(f"{label}: {requirement_at}.{field}: a string is required")
                values = requirement.get("values")
                if values is not None:
                    _list(values, label, f"{requirement_at}.values")
                    for value_index, value in enumerate(values):
                        _string(value, label, f"{requirement_at}.values[{value_index}]", required=True)


def _check_container(container: Any, label: str, at: str) -> None:
    _mapping(container, label, at)
    if not isinstance(container.get("name"), str) or not container["name"]:
        raise InputError(f"{label}: {at}.name: every container needs a name")
    _check_resources(container.get("resources"), label, f"{at}.resources")
    env = container.get("env")
    if env is not None:
        _list(env, label, f"{at}.env")
        for index, variable in enumerate(env):
            variable_at = f"{at}.env[{index}]"
            _mapping(variable, label, variable_at)
            if not isinstance(variable.get("name"), str):
                raise InputError(f"{label}: {variable_at}.name: a string is required")
            _string(variable.get("value"), label, f"{variable_at}.value")
            if variable.get("valueFrom") is not None:
                _mapping(variable["valueFrom"], label, f"{variable_at}.valueFrom")


def _check_resources(resources: Any, label: str, at: str) -> None:
    """A container's or the pod's ``resources``: maps of quantities."""
    if resources is None:
        return
    _mapping(resources, label, at)
    for part in ("limits", "requests"):
        amounts = resources.get(part)
        if amounts is None:
            continue
        _mapping(amounts, label, f"{at}.{part}")
        for resource, amount in amounts.items():
            _quantity(amount, label, _join(f"{at}.{part}", resource))


def _quantity(amount: Any, label: str, at: str) -> None:
    if isinstance(amount, bool) or not isinstance(amount, (str, int, float)):
        raise InputError(f"{label}: {at}: a quantity (a number or a string such as 1, 500m, 2Gi) is required")
    text = amount if isinstance(amount, str) else (str(amount) if isinstance(amount, int) else repr(amount))
    try:
        Quantity.parse(text)
    except ValueError as error:
        raise InputError(f"{label}: {at}: not a quantity the API server accepts: {error}") from None


def _mapping(value: Any, label: str, at: str) -> None:
    if not isinstance(value, dict):
        raise InputError(f"{label}: {at}: a mapping is required, not {_type_name(value)}")


def _list(value: Any, label: str, at: str) -> None:
    if not isinstance(value, list):
        raise InputError(f"{label}: {at}: a list is required, not {_type_name(value)}")


def _string(value: Any, label: str, at: str, required: bool = False) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise InputError(f"{label}: {at}: a string is required, not {_type_name(value)} (quote it in YAML)")


def _string_map(value: Any, label: str, at: str) -> None:
    if value is None:
        return
    _mapping(value, label, at)
    for key, item in value.items():
        _string(item, label, _join(at, key), required=True)


def _type_name(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(value), "null" if value is None else f"a {type(value).__name__}")


# ---------------------------------------------------------------- the API server's own validation of a pod spec

# What pkg/apis/core/validation/validation.go refuses in a pod spec that a GPU pod or template can trip, worded as
# its field errors are (field.Invalid: `<path>: Invalid value: "<value>": <detail>`, field.Required,
# field.NotSupported), in the order the server checks them. The server answers them all at once, before any
# admission webhook or policy runs (422 Unprocessable Entity, apierrors.NewInvalid).
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
NATIVE_DOMAIN = "kubernetes.io"


def is_extended_resource(name: str) -> bool:
    """helper.IsExtendedResourceName: a resource outside the kubernetes.io domain (nvidia.com/gpu), not a quota
    ``requests.`` name. Extended resources are integers and cannot be overcommitted (request equals limit)."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == NATIVE_DOMAIN or domain.endswith("." + NATIVE_DOMAIN))


def _invalid(path: str, value: Any, detail: str) -> str:
    return f'{path}: Invalid value: "{value}": {detail}'


def pod_spec_problems(spec: Mapping[str, Any], where: str, pod: bool = False) -> list[str]:
    """The field errors the API server answers for this (already well-typed) pod spec; empty when it passes. A
    Pod's requests are first defaulted from its limits (SetDefaults_Pod), as the server does before validating."""
    problems: list[str] = []
    for field in CONTAINER_LISTS:
        for index, container in enumerate(spec.get(field) or ()):
            resources = dict(container.get("resources") or {})
            if pod and resources.get("limits"):
                resources["requests"] = {**resources["limits"], **(resources.get("requests") or {})}
            problems += _resource_problems(resources, f"{where}.{field}[{index}].resources")
    for index, toleration in enumerate(spec.get("tolerations") or ()):
        problems += _toleration_problems(toleration, f"{where}.tolerations[{index}]")
    problems += _pod_level_problems(spec.get("resources") or {}, f"{where}.resources")
    return problems


# The resources a pod-level ``spec.resources`` may name (PodLevelResources, on since 1.34): k8s.io/component-helpers
# resource/helpers.go SupportedPodLevelResources, cpu, memory and the hugepages- prefix; any other name, a GPU among
# them, is refused before admission as validation.go refuses an unsupported value.
POD_LEVEL_RESOURCES = ("cpu", "hugepages-", "memory")


def _pod_level_problems(resources: Mapping[str, Any], at: str) -> list[str]:
    problems: list[str] = []
    supported = ", ".join(f'"{name}"' for name in POD_LEVEL_RESOURCES)
    for part in ("limits", "requests"):
        for name in resources.get(part) or {}:
            if name not in ("cpu", "memory") and not str(name).startswith("hugepages-"):
                problems.append(f'{at}.{part}[{name}]: Unsupported value: "{name}": supported values: {supported}')
    return problems


def _resource_problems(resources: Mapping[str, Any], at: str) -> list[str]:
    """ValidateResourceRequirements: each quantity non-negative, extended ones integers; a request of a resource
    that cannot be overcommitted needs a limit, and equals it."""
    problems: list[str] = []
    parsed: dict[str, dict[str, Quantity]] = {}
    for part in ("limits", "requests"):
        for name, amount in (resources.get(part) or {}).items():
            text = amount if isinstance(amount, str) else str(amount)
            quantity = Quantity.parse(text)
            parsed.setdefault(part, {})[name] = quantity
            path = f"{at}.{part}[{name}]"
            if quantity.value < 0:
                problems.append(_invalid(path, text, "must be greater than or equal to 0"))
            elif is_extended_resource(name) and quantity.value.denominator != 1:
                problems.append(_invalid(path, text, "must be an integer"))
    limits = parsed.get("limits", {})
    for name, request in parsed.get("requests", {}).items():
        if not is_extended_resource(name):
            continue
        if name not in limits:
            problems.append(f"{at}.limits: Required value: Limit must be set for non overcommitable resources")
        elif request.value != limits[name].value:
            detail = f"must be equal to {name} limit of {limits[name].text}"
            problems.append(_invalid(f"{at}.requests", request.text, detail))
    return problems


def _toleration_problems(toleration: Mapping[str, Any], at: str) -> list[str]:
    """validateTolerations."""
    problems: list[str] = []
    key, operator = toleration.get("key") or "", toleration.get("operator") or ""
    value, effect = toleration.get("value") or "", toleration.get("effect") or ""
    if not key and operator != "Exists":
        detail = 'operator must be Exists when `key` is empty, which means "match all values and all keys"'
        problems.append(_invalid(f"{at}.operator", operator, detail))
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        problems.append(_invalid(f"{at}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
    if operator in ("", "Equal"):
        pass  # the value is a label value; not checked here
    elif operator == "Exists":
        if value:
            problems.append(_invalid(f"{at}.operator", value, "value must be empty when `operator` is 'Exists'"))
    else:
        supported = ", ".join(f'"{o}"' for o in TOLERATION_OPERATORS)
        problems.append(f'{at}.operator: Unsupported value: "{operator}": supported values: {supported}')
    if effect and effect not in TAINT_EFFECTS:
        supported = ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
        problems.append(f'{at}.effect: Unsupported value: "{effect}": supported values: {supported}')
    return problems
