"""What the engine will do with each change of a stack: a new plan compared with the deployed state (the previous
plan, or a ``pulumi stack export``), resource by resource, by the rules the real engine and its providers apply.

Pure: the deployed state comes in as ``Deployed`` (read by the CLI), the plan as a ``PlanResult``.

The rules, each with its source:
- an input path on the resource's ``replaceOnChanges`` (the program sets every field of data/immutable_fields.yaml)
  replaces it (pulumi/pulumi pkg/resource/deploy/step_generator.go ``applyReplaceOnChanges``);
- a Kubernetes object's forceNew properties replace it (data/kubernetes_replace_rules.yaml, pulumi-kubernetes);
- the azure-native provider's own replace rules (data/azure_native_rules.yaml, read from its source): its Diff
  replaces a resource on a change at or under one of them;
- an input that comes from a replaced resource is unknown until then: on a replace path it replaces this one too,
  and a resource whose provider is replaced is replaced (step_generator.go ``providerChanged``); this is the
  cascade a replaced cluster takes with it, read off the plan's own dependency graph;
- a protected resource (protected in the program and in the state) the engine would replace or delete is refused:
  ``blocked`` (step_generator.go "unable to replace resource ... as it is currently marked for protection");
- an input the program sends only at creation (``ignoreChanges``) is no change; where that drops a change of the
  stack file (the system pool, ``agentPoolProfiles``) the change is refused with what to do instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aks_gpu.aks_facts import (
    immutable_fields,
    kubernetes_provider_rules,
    kubernetes_replace_rules,
    provider_deletes_before_replace,
    provider_replace_rules,
)
from aks_gpu.azure.cluster import MANAGED_CLUSTER_TYPE
from aks_gpu.azure.node_pool import AGENT_POOL_TYPE
from aks_gpu.catalog import load_catalog
from aks_gpu.mock_engine.mocks import FAKE_OBJECT_ID, FAKE_SUBSCRIPTION, FAKE_TENANT
from aks_gpu.mock_engine.records import KUBE_PREFIX, SECRET, UNKNOWN, PlanResult, ResourceRecord
from aks_gpu.mock_engine.urns import ROOT_STACK_TYPE, previous_urns

Action = Literal["create", "update", "replace", "delete", "blocked"]

KUBERNETES_PROVIDER = "pulumi:providers:kubernetes"
PROVIDER_PREFIX = "pulumi:providers:"

# The engine, as the e2e tier builds it (tools/go/versions PULUMI_VERSION v3.274.1).
ENGINE_SOURCE = "pulumi/pulumi pkg/resource/deploy/step_generator.go@1b5949891b"
PROTECTED = (
    'protected: the engine refuses to replace or delete it ("unable to replace resource ... as it is currently marked'
    f' for protection", {ENGINE_SOURCE}); set protect: false in the stack file and run pulumi up first'
)
REPLACE_ON_CHANGES = f"replaceOnChanges ({ENGINE_SOURCE} applyReplaceOnChanges)"
PROVIDER_REPLACED = f"its provider is replaced ({ENGINE_SOURCE} providerChanged)"

# The program sends the inline system pool only when it creates the cluster (GpuCluster: ignore_changes
# agentPoolProfiles), so a change of cluster.systemPool on a running cluster would be dropped: refused instead.
SYSTEM_POOL_PATH = "agentPoolProfiles"
SYSTEM_POOL_FIELDS = {
    "vmSize": "vmSize",
    "name": "name",
    "osSKU": "osSku",
    "minCount": "minCount",
    "maxCount": "maxCount",
    "availabilityZones": "zones",
}
RESIZE_DOC = "https://learn.microsoft.com/azure/aks/resize-node-pool"
SYSTEM_POOL_PROCEDURE = (
    "pulumi up would drop it: the program sends cluster.systemPool only when it creates the cluster. Change the running"
    " system pool as AKS documents ({doc}): add a new system pool with the new settings (az aks nodepool add --mode"
    " System ...), cordon and drain the old pool's nodes, delete the old pool (az aks nodepool delete), then run pulumi"
    " refresh; or set cluster.systemPool back to what the cluster runs"
)


@dataclass(frozen=True)
class DeployedResource:
    """One resource of the deployed state: its inputs as recorded (secrets as ``[secret]``), whether it is protected."""

    urn: str
    type: str
    inputs: Mapping[str, Any]
    protect: bool
    custom: bool = True


@dataclass(frozen=True)
class Deployed:
    """The state a plan is compared with: ``against`` names it (a previous plan's resources.json, an export)."""

    against: str | None
    resources: Mapping[str, DeployedResource]
    # A `pulumi stack export` holds the values Azure gave back (ARM ids, names), which an offline plan cannot have:
    # an input computed from another resource's outputs is then compared only when that resource is replaced.
    exported: bool = False


@dataclass(frozen=True)
class Change:
    type: str
    name: str
    urn: str
    action: Action
    fields: tuple[str, ...]
    why: str
    impact: Mapping[str, int | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "name": self.name,
            "urn": self.urn,
            "action": self.action,
            "fields": list(self.fields),
            "why": self.why,
            "impact": dict(self.impact),
        }


@dataclass(frozen=True)
class Refusal:
    """A change of the stack file the program cannot apply to the running resource: the plan refuses it."""

    name: str
    setting: str
    before: Any
    after: Any
    what_to_do: str


@dataclass(frozen=True)
class ChangeSet:
    against: str | None
    changes: tuple[Change, ...]
    refusals: tuple[Refusal, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"against": self.against, "changes": [change.to_json() for change in self.changes]}


@dataclass(frozen=True)
class _Rule:
    path: str
    why: str


# ---------------------------------------------------------------- comparing inputs


def changed_paths(before: Any, after: Any, prefix: str = "") -> list[str]:
    """The dotted paths where two input values differ (a list compared element by element as ``path[i]``). A secret
    on both sides cannot be compared (its value is never read): not a change; one side secret is a change. A value
    the plan does not know (``[unknown]``, in --preview) is what the deployed resource it comes from gives back: no
    change (when that resource is replaced, the plan's dependency graph says so, ``plan_changes``)."""
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            if str(key).startswith("__"):
                continue  # the engine's and providers' own bookkeeping (__defaults, __inputs)
            path = f"{prefix}.{key}" if prefix else str(key)
            found += changed_paths(before.get(key), after.get(key), path)
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        found = []
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            found += changed_paths(old, new, f"{prefix}[{index}]")
        return found
    if before == SECRET and after == SECRET:
        return []
    if after == UNKNOWN:
        return []
    return [] if before == after else [prefix]


# The identity the mock engine answers invokes with (the deploying identity, its subscription and tenant): a plan input
# made from them is the deployment's own in an export, which the plan cannot know; it is taken as deployed.
_MOCK_IDENTITY = (FAKE_SUBSCRIPTION, FAKE_TENANT, FAKE_OBJECT_ID)


def exported_view(old: Mapping[str, Any], new: Mapping[str, Any], provider: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both sides of a comparison with a `pulumi stack export`, as the engine compares them. The state holds a
    resource's inputs as its provider checked them: an empty string, list or object is not recorded (the Kubernetes
    provider leaves them out), and a provider resource's inputs carry the plugin ``version`` the engine adds; the
    tests/e2e/test_change_safety.py previews under the real CLI show both."""
    before, after = _pruned(dict(old)), _pruned(dict(new))
    if provider:
        before.pop("version", None)
    return before, _as_deployed(after, before)


def _pruned(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {key: _pruned(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item not in ("", [], {}, None)}
    if isinstance(value, list):
        return [_pruned(item) for item in value]
    return value


def _as_deployed(new: Any, old: Any) -> Any:
    if isinstance(new, str) and any(fake in new for fake in _MOCK_IDENTITY):
        return old
    if isinstance(new, dict) and isinstance(old, dict):
        return {key: _as_deployed(item, old.get(key)) for key, item in new.items()}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [_as_deployed(item, before) for item, before in zip(new, old, strict=True)]
    return new


def _at_or_under(path: str, rule: str) -> bool:
    """Whether a change at ``path`` is at ``rule`` or inside it (``[*]`` in the rule matches any index)."""
    concrete = _wildcard(path)
    return concrete == rule or concrete.startswith((rule + ".", rule + "["))


def _under(path: str, rule: str) -> bool:
    """Whether a change at ``path`` changes ``rule``: at it, inside it, or of a whole value that holds it (a changed
    ``spec`` holds ``spec.template``)."""
    concrete = _wildcard(path)
    return _at_or_under(path, rule) or rule.startswith((concrete + ".", concrete + "["))


def _wildcard(path: str) -> str:
    out, depth = [], 0
    for char in path:
        if char == "[":
            depth += 1
            out.append("[*]")
        elif char == "]":
            depth -= 1
        elif depth == 0:
            out.append(char)
    return "".join(out)


def _ignored(path: str, ignore_changes: Sequence[str]) -> bool:
    return any(_at_or_under(path, ignored) for ignored in ignore_changes)


# ---------------------------------------------------------------- the rules, per resource


def replace_rules(record: ResourceRecord) -> list[_Rule]:
    """Every input path whose change replaces ``record``, with why (the rule and its source)."""
    rules: list[_Rule] = []
    fixed = {f.field: f for f in immutable_fields().get(record.type, ())}
    for path in record.options.get("replaceOnChanges") or ():
        fact = fixed.get(path)
        source = f"data/immutable_fields.yaml: {fact.source}" if fact else "the program"
        rules.append(_Rule(path, f"{path} is fixed at creation, {REPLACE_ON_CHANGES}; {source}"))
    rules += [
        _Rule(r.field, f"{r.field}: the azure-native provider replaces it ({r.rule}, {r.source})")
        for r in provider_replace_rules(record.type)
    ]
    if record.type.startswith(KUBE_PREFIX):
        rules += [
            _Rule(r.field, f"{r.field}: the Kubernetes provider replaces it (forceNew, {r.source})")
            for r in kubernetes_replace_rules(record.type)
        ]
    return rules


def _replaced_by(paths: Sequence[str], rules: Sequence[_Rule]) -> list[_Rule]:
    """The rule each changed path falls under (the first that covers it), once each."""
    hits = [next((rule for rule in rules if _under(path, rule.path)), None) for path in paths]
    return list(dict.fromkeys(hit for hit in hits if hit is not None))


def delete_first(record: ResourceRecord) -> str | None:
    """Why a replacement of ``record`` deletes the old resource before it creates the new one (the resource is gone
    in between), or None when the new one is created first."""
    if record.options.get("deleteBeforeReplace"):
        return "deleteBeforeReplace in the program (its name is its identity)"
    if record.type.startswith("azure-native:"):
        answer, why = provider_deletes_before_replace(record.type)
        return f"the azure-native provider's Diff: {why}" if answer else None
    if record.type.startswith(KUBE_PREFIX):
        # A named object (every object the program registers has metadata.name) is replaced delete-first.
        source = kubernetes_provider_rules().named_delete_first_source
        return f"the Kubernetes provider's Diff deletes a named object first ({source})"
    return None


# ---------------------------------------------------------------- the plan against the deployed state


def plan_changes(deployed: Deployed, plan: PlanResult) -> ChangeSet:
    """Each change the engine would make to bring ``deployed`` to ``plan``, in the plan's order, deletes last."""
    custom = [r for r in dependency_order(plan.resources) if r.custom]
    by_urn = {r.urn: r for r in plan.resources}
    old_of = previous_urns(plan.resources, deployed.resources)
    replaced: set[str] = set()
    # For each replaced resource, the resources whose own change started the replacements it is part of.
    roots: dict[str, set[str]] = {}
    changes: list[Change] = []
    refusals: list[Refusal] = []
    for record in custom:
        old = deployed.resources.get(old_of.get(record.urn, ""))
        if old is None:
            changes.append(Change(record.type, record.name, record.urn, "create", (), "not in the deployed state", {}))
            continue
        ignore = record.options.get("ignoreChanges") or ()
        computed = set(record.property_dependencies) if deployed.exported else set()
        computed |= auto_named(record, old)
        before, after = dict(old.inputs), dict(record.inputs)
        if deployed.exported:
            before, after = exported_view(before, after, _is_provider(record))
        fields = [
            p for p in changed_paths(before, after) if not _ignored(p, ignore) and p.split(".")[0].split("[")[0] not in computed
        ]
        if record.type == MANAGED_CLUSTER_TYPE:
            refusals += system_pool_refusals(record, old)
        whys: list[str] = []
        # Inputs that come from a replaced resource are unknown until it is replaced.
        unknown = sorted(
            key for key, urns in record.property_dependencies.items() if set(urns) & replaced and not _ignored(key, ignore)
        )
        causes: set[str] = set()
        if _is_provider(record):
            own = _provider_replaces(record, old, fields, unknown, by_urn, replaced, whys, causes)
        else:
            rules = replace_rules(record)
            hits = _replaced_by(fields, rules)
            whys += [rule.why for rule in hits]
            own = bool(hits)
            for key in unknown:
                for rule in _replaced_by([key], rules):
                    froms = [urn for urn in record.property_dependencies[key] if urn in replaced]
                    causes.update(froms)
                    names = ", ".join(_name(by_urn, urn) for urn in froms)
                    whys.append(f"{key} comes from {names}, replaced (unknown until then); {rule.why}")
            if record.provider_urn is not None and record.provider_urn in replaced:
                causes.add(record.provider_urn)
                whys.append(f"{PROVIDER_REPLACED}: {_name(by_urn, record.provider_urn)}")
        replaces = bool(whys)
        fields = sorted(set(fields) | set(unknown))
        if not fields and not replaces:
            continue
        if replaces:
            replaced.add(record.urn)
            roots[record.urn] = ({record.urn} if own else set()).union(*(roots.get(urn, set()) for urn in causes))
            protected = bool(record.options.get("protect")) and old.protect
            action: Action = "blocked" if protected else "replace"
            first = delete_first(record)
            why = "; ".join([*dict.fromkeys(whys), *([f"replaced delete-first: {first}"] if first else [])])
            changes.append(Change(record.type, record.name, record.urn, action, tuple(fields), _blocked(why, protected), {}))
        else:
            changes.append(Change(record.type, record.name, record.urn, "update", tuple(fields), "changes in place", {}))
    taken = set(old_of.values())
    for urn, old in deployed.resources.items():
        if urn in taken or not _deletable(old):
            continue
        why = "no longer in the program: the engine deletes it"
        action = "blocked" if old.protect else "delete"
        changes.append(Change(old.type, urn.rsplit("::", 1)[-1], urn, action, (), _blocked(why, old.protect), {}))
    told = tuple(_with_impact(change, deployed, old_of, roots, plan) for change in changes)
    return ChangeSet(deployed.against, told, tuple(refusals))


def auto_named(record: ResourceRecord, old: DeployedResource) -> set[str]:
    """The name inputs the azure-native provider chose itself (a path parameter the program leaves out, such as a role
    assignment's roleAssignmentName, a UUID): its Check keeps the deployed one, so they are no change."""
    return {
        rule.field
        for rule in provider_replace_rules(record.type)
        if rule.rule == "path-parameter" and rule.field not in record.inputs and rule.field in old.inputs
    }


def dependency_order(records: Sequence[ResourceRecord]) -> list[ResourceRecord]:
    """``records`` with each after every resource it depends on (its inputs' sources, its provider, its dependsOn),
    otherwise in registration order: the order the engine steps through them. The mock engine records them as their
    registrations complete, which is not that order (a provider waits on an invoke its objects do not)."""
    index = {record.urn: position for position, record in enumerate(records)}

    def needs(record: ResourceRecord) -> set[str]:
        found = {urn for urns in record.property_dependencies.values() for urn in urns}
        found |= set(record.options.get("dependsOn") or ())
        if record.provider_urn:
            found.add(record.provider_urn)
        return {urn for urn in found if urn in index and urn != record.urn}

    waiting = {record.urn: needs(record) for record in records}
    done: set[str] = set()
    ordered: list[ResourceRecord] = []
    while len(ordered) < len(records):
        ready = [r for r in records if r.urn not in done and waiting[r.urn] <= done]
        if not ready:  # a cycle cannot be registered; keep the rest as recorded rather than loop
            ready = [r for r in records if r.urn not in done]
        ordered.append(ready[0])
        done.add(ready[0].urn)
    return ordered


def _blocked(why: str, protected: bool) -> str:
    return f"{PROTECTED}; {why}" if protected else why


def _is_provider(record: ResourceRecord) -> bool:
    return record.type == KUBERNETES_PROVIDER


def _deletable(old: DeployedResource) -> bool:
    """A resource of the state the engine would delete when the program no longer registers it: not the stack, not a
    default provider (the engine makes those itself), not a component (it holds nothing in the cloud)."""
    name = old.urn.rsplit("::", 1)[-1]
    if old.type.startswith(PROVIDER_PREFIX):
        return not name.startswith("default")
    return old.custom and old.type != ROOT_STACK_TYPE


def _provider_replaces(
    record: ResourceRecord,
    old: DeployedResource,
    fields: Sequence[str],
    unknown: Sequence[str],
    by_urn: Mapping[str, ResourceRecord],
    replaced: set[str],
    whys: list[str],
    causes: set[str],
) -> bool:
    """The Kubernetes provider's DiffConfig: replaced when its cluster identifier (or kubeconfig, context, cluster)
    comes from a replaced resource, so is unknown, or when its cluster identifier changes. Whether it replaces this
    one itself (not through a resource it depends on)."""
    rules = kubernetes_provider_rules()
    identifier = rules.identifier
    for key in unknown:
        if key in (identifier, *rules.computed):
            froms = [urn for urn in record.property_dependencies[key] if urn in replaced]
            causes.update(froms)
            names = ", ".join(_name(by_urn, urn) for urn in froms)
            whys.append(f"{key} comes from {names}, replaced (unknown until then): the provider is replaced ({rules.source})")
    own = identifier in fields and identifier in old.inputs and identifier in record.inputs
    if own:
        whys.append(f"{identifier} changes: the provider is replaced ({rules.source})")
    return own


def _name(by_urn: Mapping[str, ResourceRecord], urn: str | None) -> str:
    record = by_urn.get(urn or "")
    return record.name if record else (urn or "").rsplit("::", 1)[-1]


def system_pool_refusals(record: ResourceRecord, old: DeployedResource) -> list[Refusal]:
    """Each cluster.systemPool setting whose change ``ignoreChanges: agentPoolProfiles`` would drop."""
    before, after = _first_profile(old.inputs), _first_profile(record.inputs)
    if before is None or after is None:
        return []
    refusals = []
    for field_name, setting in SYSTEM_POOL_FIELDS.items():
        if changed_paths(before.get(field_name), after.get(field_name)):
            refusals.append(
                Refusal(
                    record.name,
                    f"cluster.systemPool.{setting}",
                    before.get(field_name),
                    after.get(field_name),
                    SYSTEM_POOL_PROCEDURE.format(doc=RESIZE_DOC),
                )
            )
    return refusals


def _first_profile(inputs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    profiles = inputs.get(SYSTEM_POOL_PATH)
    if isinstance(profiles, list) and profiles and isinstance(profiles[0], dict):
        return profiles[0]
    return None


# ---------------------------------------------------------------- what each change costs


def _with_impact(
    change: Change, deployed: Deployed, old_of: Mapping[str, str], roots: Mapping[str, set[str]], plan: PlanResult
) -> Change:
    """An agent pool's nodes and GPUs: those a replacement or delete drains (the deployed pool's), those a create or
    update leaves running (the planned pool's); the cluster's: the resources replaced with it (0 unless replaced)."""
    if change.type == AGENT_POOL_TYPE:
        if change.action in ("replace", "delete", "blocked"):
            old = deployed.resources.get(old_of.get(change.urn, change.urn))
            inputs = old.inputs if old is not None else {}
        else:
            inputs = next((r.inputs for r in plan.resources if r.urn == change.urn), {})
        return _replace(change, pool_impact(inputs))
    if change.type == MANAGED_CLUSTER_TYPE:
        # What its replacement takes with it: every other resource replaced because of it.
        others = sum(1 for urn, started_by in roots.items() if urn != change.urn and change.urn in started_by)
        return _replace(change, {"resources": others})
    return change


def _replace(change: Change, impact: Mapping[str, int | None]) -> Change:
    return Change(change.type, change.name, change.urn, change.action, change.fields, change.why, impact)


def pool_impact(inputs: Mapping[str, Any]) -> dict[str, int | None]:
    """The nodes an agent pool replacement drains and deletes (up to maxCount when autoscaled) and their GPUs (None:
    the catalog does not know the size's GPUs)."""
    size = inputs.get("maxCount") if inputs.get("enableAutoScaling") else inputs.get("count")
    nodes = size if isinstance(size, int) else None
    vm_size = inputs.get("vmSize")
    known = load_catalog().vm_size(vm_size) if isinstance(vm_size, str) else None
    per_node = known.gpu_count if known is not None else (None if "gpuProfile" in inputs else 0)
    gpus = nodes * per_node if nodes is not None and per_node is not None else None
    return {"nodes": nodes, "gpus": gpus}


def needs_attention(change: Change) -> bool:
    """A change that makes ``aksgpu plan`` exit 1 unless accepted: blocked, or a replacement of a GPU pool or the
    cluster."""
    if change.action == "blocked":
        return True
    if change.action != "replace":
        return False
    if change.type == MANAGED_CLUSTER_TYPE:
        return True
    return change.type == AGENT_POOL_TYPE and change.impact.get("gpus") != 0
