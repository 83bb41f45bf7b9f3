"""URNs and aliases as the Pulumi engine resolves them: which resource of a previous deployment each planned one
updates (what it changes is aks_gpu.mock_engine.changes)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

from aks_gpu.mock_engine.records import AliasSpec, ResourceRecord

# The type of the stack resource every program's resources hang under; it is no part of their URNs.
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


# ---------------------------------------------------------------- URNs and aliases, as the engine resolves them


def qualified_type(urn: str) -> str:
    """``aks-gpu:index:GpuPlatform$aks-gpu:index:GpuCluster`` of a URN: its type with every ancestor's."""
    return urn.split("::")[2]


def engine_urn(name: str, type_: str, parent: str | None, *, project: str, stack: str) -> str:
    """The URN the engine gives ``name`` of ``type_`` under ``parent`` (pulumi/pulumi sdk/go/common/resource/urn/urn.go
    ``New`` and resource ``CreateURN``, v3.259.0)."""
    qualified = type_
    if parent and qualified_type(parent) != ROOT_STACK_TYPE:
        qualified = f"{qualified_type(parent)}${type_}"
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def _stack_and_project(urn: str) -> tuple[str, str]:
    stack, project = urn.removeprefix("urn:pulumi:").split("::")[:2]
    return stack, project


def _collapsed(record: ResourceRecord, alias: AliasSpec, taken_over: Mapping[str, str]) -> str:
    """An alias spec as the URN it names (the engine's ``collapseAliasToUrn``, pkg/resource/deploy/step_generator.go,
    v3.259.0): each empty part is the resource's own; a named parent that itself took over an old URN stands for that."""
    if alias.urn:
        return alias.urn
    parent = taken_over.get(alias.parent_urn, alias.parent_urn) if alias.parent_urn else record.parent
    if alias.no_parent or (parent and qualified_type(parent) == ROOT_STACK_TYPE):
        parent = None
    stack, project = _stack_and_project(record.urn)
    return engine_urn(
        alias.name or record.name,
        alias.type or record.type,
        parent,
        project=alias.project or project,
        stack=alias.stack or stack,
    )


def _inherited(child_type: str, child_name: str, parent_name: str, parent_alias: str, record: ResourceRecord) -> str:
    """The alias a child gets from its parent's (the engine's ``inheritedChildAlias``): under the parent's old URN,
    and a name that started with the parent's name starts with the parent's old name."""
    name = child_name
    if child_name.startswith(parent_name):
        name = parent_alias.rsplit("::", 1)[1] + child_name[len(parent_name) :]
    stack, project = _stack_and_project(record.urn)
    return f"urn:pulumi:{stack}::{project}::{qualified_type(parent_alias)}${child_type}::{name}"


def engine_aliases(record: ResourceRecord, taken_over: Mapping[str, str]) -> Iterator[str]:
    """Every old URN the engine looks ``record`` up by after its own (``generateAliases``): its aliases, and, when its
    parent took over an old URN (``taken_over``: new URN -> old), each of those again under the parent's old URN."""
    own = [_collapsed(record, alias, taken_over) for alias in record.aliases]
    yield from own
    parent_alias = taken_over.get(record.parent or "")
    if record.parent and parent_alias:
        parent_name = record.parent.rsplit("::", 1)[1]
        yield _inherited(record.type, record.name, parent_name, parent_alias, record)
        for alias in own:
            base_type = qualified_type(alias).split("$")[-1]
            yield _inherited(base_type, alias.rsplit("::", 1)[1], parent_name, parent_alias, record)


def previous_urns(records: Sequence[ResourceRecord], state: Collection[str]) -> dict[str, str]:
    """For each resource, the URN in ``state`` (a previous deployment's URNs) it updates, as the engine finds it
    (pkg/resource/deploy/step_generator.go ``generateSteps``, v3.259.0): its own URN first, then its aliases, parents
    before children. A resource missing here is created, and every URN of ``state`` no resource took is deleted."""
    by_urn = {record.urn: record for record in records}

    def depth(record: ResourceRecord) -> int:
        levels, parent = 0, record.parent
        while parent in by_urn:
            levels, parent = levels + 1, by_urn[parent].parent
        return levels

    found: dict[str, str] = {}
    taken_over: dict[str, str] = {}  # new URN -> the different old URN it took (the engine's sg.aliases)
    for record in sorted(records, key=depth):
        for candidate in (record.urn, *engine_aliases(record, taken_over)):
            if candidate in state:
                found[record.urn] = candidate
                if candidate != record.urn:
                    taken_over[record.urn] = candidate
                break
    return found
