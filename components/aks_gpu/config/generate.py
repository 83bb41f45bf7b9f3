"""Everything written from the config models: the component args TypedDicts (``components/aks_gpu/specs.py``), the key
table of docs/config.md, and the stack file's JSON Schema (``schema.py`` builds it) twice: the copy the package ships
for ``aksgpu schema`` and stacks/stack-config.schema.json, which the repository's stack files name for editors. The
models (``models.py``) are the one source of each key's name, type, bounds, default and description; these are files,
so this module writes them and ``tests/config/test_generated.py`` fails when one is stale.

    python -m aks_gpu.config.generate          # rewrite them (make schema does too)
    python -m aks_gpu.config.generate --check  # exit 1 when one is stale
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from aks_gpu.config import models
from aks_gpu.config.schema import SCHEMA_FILE_NAME, SHIPPED_SCHEMA_FILE, stack_file_schema_text
from aks_gpu.naming import CONFIG_NAMESPACE, LOCATION_KEY

ROOT = Path(__file__).resolve().parents[3]
SPECS_FILE = ROOT / "components" / "aks_gpu" / "specs.py"
CONFIG_DOCS_FILE = ROOT / "docs" / "config.md"
# What the repository's stack files name as their schema (their first line), for editors.
STACK_SCHEMA_FILE = ROOT / "stacks" / SCHEMA_FILE_NAME
TABLE_START = "<!-- key table: generated from components/aks_gpu/config/models.py by `make schema`; do not edit -->"
TABLE_END = "<!-- end of the generated key table -->"

# ---------------------------------------------------------------- reading the models


def config_models() -> list[type[models.ConfigModel]]:
    """Every model a stack reaches, in the order ``models.py`` defines them (nested ones first, as Python needs)."""
    reached: set[type[BaseModel]] = set()

    def visit(model: type[BaseModel]) -> None:
        if model in reached:
            return
        reached.add(model)
        for field in model.model_fields.values():
            for inner in _models_in(field.annotation):
                visit(inner)
        for base in model.__bases__:
            if issubclass(base, models.ConfigModel) and base is not models.ConfigModel:
                visit(base)

    visit(models.StackConfig)
    return [m for m in vars(models).values() if isinstance(m, type) and issubclass(m, models.ConfigModel) and m in reached]


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def own_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """The fields a model adds to its config base (``StackConfig`` adds two to ``PlatformConfig``)."""
    inherited: set[str] = set()
    for base in model.__bases__:
        if issubclass(base, BaseModel):
            inherited |= set(base.model_fields)
    return {name: field for name, field in model.model_fields.items() if name not in inherited}


def config_base(model: type[BaseModel]) -> type[BaseModel] | None:
    base = model.__bases__[0]
    return base if issubclass(base, models.ConfigModel) and base is not models.ConfigModel else None


def _strip(annotation: Any) -> tuple[Any, bool]:
    """The annotation without ``Annotated`` and ``| None``; and whether None was allowed."""
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            optional = optional or len(members) < len(typing.get_args(annotation))
            if len(members) != 1:
                raise TypeError(f"a union the component schema cannot carry: {annotation}")
            annotation = members[0]
        else:
            return annotation, optional


def choices(annotation: Any) -> tuple[str, ...]:
    """The allowed values of a ``Literal`` field (or of a list of them)."""
    annotation, _ = _strip(annotation)
    if typing.get_origin(annotation) is Literal:
        return tuple(str(value) for value in typing.get_args(annotation))
    if typing.get_origin(annotation) in (tuple, list):
        return choices(typing.get_args(annotation)[0])
    return ()


def takes_output(field: FieldInfo) -> bool:
    return any(isinstance(item, models.TakesOutput) for item in field.metadata)


def alias(name: str, field: FieldInfo) -> str:
    return field.alias or name


def spec_name(model: type[BaseModel]) -> str:
    """``GpuPoolConfig`` -> ``GpuPoolSpec``, ``RoleBinding`` -> ``RoleBindingSpec``."""
    return model.__name__.removesuffix("Config") + "Spec"


def default_of(field: FieldInfo) -> Any:
    """The default as JSON would write it; None for a required field, a nested model's defaults and "not set"."""
    if field.is_required() or field.default is None or isinstance(field.default, BaseModel):
        return None
    value = field.default
    return list(value) if isinstance(value, tuple) else value


def bounds(field: FieldInfo) -> str:
    low = next((m.ge for m in field.metadata if isinstance(m, annotated_types.Ge)), None)
    high = next((m.le for m in field.metadata if isinstance(m, annotated_types.Le)), None)
    if low is not None and high is not None:
        return f"{low}-{high}"
    if low is not None:
        return f"at least {low}"
    return ""


# ---------------------------------------------------------------- components/aks_gpu/specs.py

SPECS_HEADER = '''"""The stack config as ``TypedDict``s: the shape public components take as ``args``. GENERATED from the pydantic
models in ``components/aks_gpu/config/models.py`` by ``python -m aks_gpu.config.generate`` (``make schema``): edit the
models, never this file; ``tests/config/test_generated.py`` fails when it is stale.

Pulumi's component schema inference reads these (snake_case here, camelCase in the schema and in every other
language's SDK), and each field's docstring (the model field's description, its choices and its default) becomes
its description there, so TypeScript, Go, C# and YAML stacks get the same keys and the same words as a stack file.
They carry no rules: each component validates what it gets with the models, the one place the rules live.

Plain Python types only (the inference accepts no unions): enum-like values are ``str`` here, checked by the models.

Plain or ``pulumi.Input``, per field. A field is plain where its value decides which resources exist, what they are
named (their URNs) or what the cross-key rules compare it with before anything is registered: pools (name, vendor,
VM size, counts, MIG), the cluster, the device plugin, admission, storage, validation. Other stacks' values (a
``StackReference`` output, a resource's output) are accepted where they only fill in values: a workload namespace's
``name``, ``type`` and ``gpu_quota`` (``models.TAKES_OUTPUT``; ``GpuWorkloadNamespace`` checks them when they are
known), and the names and placements the components take beside their specs (``resource_group_name``,
``cluster_name``, ``resource_name``, ``node_selector``, ``tolerations``). ``GpuPlatform``, ``GpuAdmissionPolicy``
and ``NvmeCache`` compare every workload with the pools first: they refuse an output in a workload with the property
path and why (``components/aks_gpu/args.py``).
"""

# No `from __future__ import annotations`: the schema inference reads these annotations at run time.
from typing import NotRequired, TypedDict

import pulumi
'''


def _python_type(annotation: Any) -> str:
    annotation, _ = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "str"
    if origin in (tuple, list):
        return f"list[{_python_type(typing.get_args(annotation)[0])}]"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"dict[{_python_type(key)}, {_python_type(value)}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return spec_name(annotation)
    if annotation in (str, int, float, bool):
        return str(annotation.__name__)
    raise TypeError(f"no TypedDict type for {annotation}")


def field_doc(field: FieldInfo) -> str:
    """A field's description, with what an enum-like string may be and the default (a TypedDict carries neither)."""
    text = field.description or ""
    allowed = choices(field.annotation)
    if allowed:
        text += f" One of: {', '.join(allowed)}."
    default = default_of(field)
    if default not in (None, [], {}):
        text += f" Default: {json.dumps(default) if not isinstance(default, str) else default}."
    return text.strip()


def _docstring(text: str, indent: str) -> str:
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'{indent}"""{body}"""\n'


def specs_source() -> str:
    parts = [SPECS_HEADER]
    for model in config_models():
        base = config_base(model)
        parts.append(f"\n\nclass {spec_name(model)}({spec_name(base) if base else 'TypedDict'}):\n")
        if model.__doc__:
            parts.append(_docstring(" ".join(model.__doc__.split()), "    ") + "\n")
        for name, field in own_fields(model).items():
            type_text = _python_type(field.annotation)
            if takes_output(field):
                type_text = f"pulumi.Input[{type_text}]"
            if not field.is_required():
                type_text = f"NotRequired[{type_text}]"
            parts.append(f"    {name}: {type_text}\n")
            parts.append(_docstring(field_doc(field), "    "))
    return "".join(parts)


# ---------------------------------------------------------------- the key table of docs/config.md


def _key(path: str) -> str:
    return LOCATION_KEY if path == "location" else f"{CONFIG_NAMESPACE}:{path}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_rows(
    model: type[BaseModel] = models.StackConfig, prefix: str = "", seen: dict[type, str] | None = None
) -> Iterator[str]:
    seen = {} if seen is None else seen
    fields = model.model_fields
    # The stack's own keys: the location first, then the cluster, then the rest as the models order them.
    order = sorted(fields, key=lambda n: (n != "location", n != "cluster")) if model is models.StackConfig else list(fields)
    for name in order:
        field = fields[name]
        path = f"{prefix}{alias(name, field)}"
        annotation, _ = _strip(field.annotation)
        nested = next(_models_in(annotation), None)
        is_list = typing.get_origin(annotation) in (tuple, list)
        allowed = ", ".join(f"`{choice}`" for choice in choices(field.annotation)) or bounds(field)
        default = "required" if field.is_required() else _default_cell(default_of(field))
        if nested is not None and nested in seen:
            yield f"| `{_key(path)}` | {_cell(field.description or '')} (keys as `{seen[nested]}`) | | |"
            continue
        if nested is not None:
            seen[nested] = _key(path)
            yield from table_rows(nested, f"{path}[]." if is_list else f"{path}.", seen)
            continue
        yield f"| `{_key(path)}` | {_cell(field.description or '')} | {allowed} | {default.replace('|', '')} |"


def _default_cell(default: Any) -> str:
    if default is None:
        return ""
    return f"`{default}`" if isinstance(default, str) else f"`{json.dumps(default)}`"


def key_table() -> str:
    lines = [TABLE_START, "", "| key | what | allowed | default |", "| --- | --- | --- | --- |", *table_rows(), "", TABLE_END]
    return "\n".join(lines)


def docs_with_table(docs: str) -> str:
    start, end = docs.index(TABLE_START), docs.index(TABLE_END) + len(TABLE_END)
    return docs[:start] + key_table() + docs[end:]


# ---------------------------------------------------------------- the command


def outputs() -> dict[Path, str]:
    schema = stack_file_schema_text()
    return {
        SPECS_FILE: specs_source(),
        CONFIG_DOCS_FILE: docs_with_table(CONFIG_DOCS_FILE.read_text(encoding="utf-8")),
        SHIPPED_SCHEMA_FILE: schema,
        STACK_SCHEMA_FILE: schema,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aks_gpu.config.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale; write nothing")
    args = parser.parse_args(argv)
    stale = [path for path, text in outputs().items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run make schema)", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs().items():
        if path in stale:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
