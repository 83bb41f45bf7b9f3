"""AKS's mutating admission plugins that change what the stack's policies read, repeated offline. Pure.

An AKS API server runs a fixed list of admission plugins (``components/aks_gpu/data/aks_admission.yaml``, from the
AKS FAQ). Mutating plugins run before any validating admission policy, so a policy judges the Pod as they left it:

- **PodNodeSelector** (CREATE of a Pod): the namespace annotation ``scheduler.alpha.kubernetes.io/node-selector``
  (``k=v,k2=v2``) is merged into the Pod's ``nodeSelector``; a Pod that sets one of those keys to another value is
  refused, ``pods "<name>" is forbidden: pod node label selector conflicts with its namespace node label selector``
  (plugin/pkg/admission/podnodeselector/admission.go, ``Admit``). The stack's workload namespaces carry one, which
  binds their Pods to the pools of their workload type (``aks_gpu.kube.workload_manifests.placement_selector``).
- **PodTolerationRestriction** (CREATE and UPDATE of a Pod): on CREATE the namespace annotation
  ``scheduler.alpha.kubernetes.io/defaultTolerations`` (a JSON list of tolerations), and for every Pod that is not
  BestEffort ``{key: node.kubernetes.io/memory-pressure, operator: Exists, effect: NoSchedule}``, are merged into the
  Pod's tolerations, a toleration that another one covers dropped (plugin/pkg/admission/podtolerationrestriction/
  admission.go, ``Admit``; pkg/util/tolerations ``MergeTolerations``). The stack's workload namespaces carry the
  tolerations of their pools' taints other than the GPU taint (the spot taint, a pool's own ``taints``), so a Pod
  written with no toleration still lands on a spot pool of its type. The plugin's whitelist annotation is not set by
  the stack and not repeated here.
- **ExtendedResourceToleration** (CREATE and UPDATE of a Pod): ``{key: <resource>, operator: Exists, effect:
  NoSchedule}`` for every extended resource named in a container's or init container's requests, whatever the
  quantity, sorted, unless an equal toleration is there (plugin/pkg/admission/extendedresourcetoleration/admission.go;
  ``helper.AddOrUpdateTolerationInPod``).

Two plugins kube-apiserver runs by default refuse Pods that name what does not exist (``default_on_modelled`` in the
data file): **Priority** (a ``priorityClassName`` that names no PriorityClass; a client-set ``spec.priority`` other
than the class's) and **RuntimeClass** (a ``runtimeClassName`` that names no RuntimeClass; in its validating step, an
``overhead`` the class does not define). The PriorityClasses and RuntimeClasses known offline are the system
priority classes and those among the objects checked (:func:`cluster_classes`).

The order is the server's (pkg/kubeapiserver/options/plugins.go ``AllOrderedPlugins``): PodNodeSelector, Priority,
PodTolerationRestriction, ExtendedResourceToleration, RuntimeClass. Whether a Pod is BestEffort is read from the Pod
as written; on AKS LimitRanger runs first and may give it requests, which only adds the memory-pressure toleration
(no policy of the stack reads it). None of these plugins touches a Deployment, a Job or a custom resource: their Pods
meet them when a controller creates them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.admission.quantity import Quantity
from aks_gpu.admission.reader import is_extended_resource
from aks_gpu.data_files import load_yaml
from aks_gpu.naming import VENDORS, is_mig_resource, serves_label, vendor_resource

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "aks_admission.yaml"
NODE_SELECTOR_ANNOTATION = "scheduler.alpha.kubernetes.io/node-selector"
SELECTOR_CONFLICT = "pod node label selector conflicts with its namespace node label selector"
DEFAULT_TOLERATIONS_ANNOTATION = "scheduler.alpha.kubernetes.io/defaultTolerations"
MEMORY_PRESSURE_TOLERATION = {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}


def is_gpu_taint_key(key: object) -> bool:
    """The key of a GPU taint: a vendor's whole-GPU resource, or a MIG slice's under the mixed strategy
    (``naming.gpu_taint_key``). ExtendedResourceToleration tolerates it for a Pod that requests the resource, and a Pod
    that requests none must not tolerate it (the policy refuses it as a squatter), so no namespace hands it out."""
    return isinstance(key, str) and (key in {vendor_resource(vendor) for vendor in VENDORS} or is_mig_resource(key))


@cache
def aks_plugins() -> tuple[str, ...]:
    """The admission plugins AKS enables (the FAQ's list)."""
    return tuple(str(name) for name in load_yaml(DATA_FILE)["plugins"])


def selector_of(annotation: str) -> dict[str, str]:
    """``labels.ConvertSelectorToLabelsMap``: ``k=v`` pairs separated by commas (blank: nothing)."""
    pairs: dict[str, str] = {}
    for part in annotation.split(","):
        if not part.strip():
            continue
        key, _, value = part.partition("=")
        pairs[key.strip()] = value.strip()
    return pairs


def namespace_selector(namespace: Mapping[str, Any] | None) -> dict[str, str]:
    annotations = ((namespace or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(NODE_SELECTOR_ANNOTATION)
    return selector_of(text) if isinstance(text, str) else {}


def selector_conflict(spec: Mapping[str, Any], namespace: Mapping[str, Any] | None) -> bool:
    """``labels.Conflicts``: a key both set, to different values."""
    wanted = namespace_selector(namespace)
    own = spec.get("nodeSelector") or {}
    return any(key in own and own[key] != value for key, value in wanted.items())


def extended_resources(spec: Mapping[str, Any]) -> list[str]:
    found = set()
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            requests = ((container.get("resources") or {}).get("requests") or {}) if isinstance(container, Mapping) else {}
            found |= {str(name) for name in requests if is_extended_resource(str(name))}
    return sorted(found)


def mutate_pod(pod: Mapping[str, Any], namespace: Mapping[str, Any] | None, operation: str = "CREATE") -> dict[str, Any]:
    """The Pod as AKS's mutating plugins hand it to the validating policies (requests already defaulted from
    limits); call :func:`selector_conflict` first: a conflicting Pod is refused, not mutated. A new Pod: what the
    plugins change (the spec's node selector and tolerations) is new, the rest is ``pod``'s own (a 75,000-key node
    selector took a tenth of a second to copy)."""
    mutated = dict(pod)
    spec = mutated["spec"] = dict(mutated.get("spec") or {})
    if operation == "CREATE":
        wanted = namespace_selector(namespace)
        if wanted:
            spec["nodeSelector"] = {**wanted, **(spec.get("nodeSelector") or {})}
    tolerations = list(spec.get("tolerations") or ())
    extra = namespace_default_tolerations(namespace) if operation == "CREATE" else []
    if not best_effort(spec):
        extra.append(dict(MEMORY_PRESSURE_TOLERATION))
    if extra:
        tolerations = merge_tolerations(tolerations, extra)
    for resource in extended_resources(spec):
        added = {"key": resource, "operator": "Exists", "effect": "NoSchedule"}
        # AddOrUpdateTolerationInPod: an equal toleration (key, operator, value, effect, tolerationSeconds) is kept.
        if not any(_fields(existing) == _fields(added) for existing in tolerations):
            tolerations.append(added)
    if tolerations:
        spec["tolerations"] = tolerations
    return mutated


def default_tolerations_annotation(tolerations: Sequence[Mapping[str, Any]]) -> str | None:
    """A workload namespace's PodTolerationRestriction annotation: the tolerations of its pools' taints but the GPU
    taints (``is_gpu_taint_key``), as the JSON list the plugin reads; None when nothing is left (pools tainted for GPUs
    only). Users with ``edit`` cannot change a namespace's annotations."""
    kept = [dict(t) for t in tolerations if not is_gpu_taint_key(t.get("key"))]
    return json.dumps(kept, sort_keys=True, separators=(",", ":")) if kept else None


def namespace_metadata_with_tolerations(metadata: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A workload namespace's metadata with its pools' taints but the GPU taint tolerated by default: a Pod written with
    no toleration (the GPU one comes from ExtendedResourceToleration) then lands on a spot pool or a pool with its own
    ``taints``. Without such taints, no annotation."""
    annotation = default_tolerations_annotation(tolerations)
    if annotation is None:
        return dict(metadata)
    return {**metadata, "annotations": {**(metadata.get("annotations") or {}), DEFAULT_TOLERATIONS_ANNOTATION: annotation}}


def namespace_default_tolerations(namespace: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The tolerations of the namespace's annotation (none when it is absent, empty or not a JSON list of objects:
    the server would refuse every Pod of such a namespace, which no namespace of the stack is)."""
    annotations = ((namespace or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(DEFAULT_TOLERATIONS_ANNOTATION)
    if not isinstance(text, str) or not text:
        return []
    try:
        found = json.loads(text)
    except ValueError:
        return []
    return [dict(t) for t in found if isinstance(t, Mapping)] if isinstance(found, list) else []


def best_effort(spec: Mapping[str, Any]) -> bool:
    """QoS BestEffort: no container, init container or the pod itself asks for or limits cpu or memory."""
    holders = [c for field in ("containers", "initContainers") for c in spec.get(field) or () if isinstance(c, Mapping)]
    for resources in [spec.get("resources"), *(c.get("resources") for c in holders)]:
        if not isinstance(resources, Mapping):
            continue
        for kind in ("requests", "limits"):
            amounts = resources.get(kind)
            if isinstance(amounts, Mapping) and any(name in amounts for name in ("cpu", "memory")):
                return False
    return True


def merge_tolerations(first: Sequence[Any], second: Sequence[Any]) -> list[Any]:
    """``MergeTolerations``: both lists in order, a toleration dropped when one already kept, or a different one later,
    tolerates everything it does (of equal ones the first stays)."""
    every = [*first, *second]
    merged: list[Any] = []
    for index, toleration in enumerate(every):
        if any(_covers(kept, toleration) for kept in merged):
            continue
        if any(_fields(later) != _fields(toleration) and _covers(later, toleration) for later in every[index + 1 :]):
            continue
        merged.append(toleration)
    return merged


def _covers(wider: Any, toleration: Any) -> bool:
    # isSuperset: whether ``wider`` tolerates every taint ``toleration`` does.
    if not isinstance(wider, Mapping) or not isinstance(toleration, Mapping):
        return bool(wider == toleration)
    if _fields(wider) == _fields(toleration):
        return True
    key, operator = wider.get("key") or "", wider.get("operator") or ""
    if (toleration.get("key") or "") != key and (key != "" or operator != "Exists"):
        return False
    effect = wider.get("effect") or ""
    if (toleration.get("effect") or "") != effect and effect != "":
        return False
    seconds = wider.get("tolerationSeconds")
    if effect == "NoExecute" and seconds is not None:
        theirs = toleration.get("tolerationSeconds")
        if theirs is None or theirs > seconds:
            return False
    if operator in ("Equal", ""):
        return (toleration.get("operator") or "") == "Equal" and (toleration.get("value") or "") == (wider.get("value") or "")
    return operator == "Exists"


def _fields(toleration: Any) -> tuple[Any, ...]:
    # A toleration's fields as the API server compares them (an absent string is "").
    if not isinstance(toleration, Mapping):
        return (toleration,)
    return (
        *(toleration.get(name) or "" for name in ("key", "operator", "value", "effect")),
        toleration.get("tolerationSeconds"),
    )


def placement_selector(workload_type: str) -> str:
    """A workload namespace's PodNodeSelector annotation: every Pod of the namespace gets ``serves.aks-gpu/<type>:
    "true"`` in its nodeSelector, which the GPU pools of that type and the CPU pools carry, so a GPU Pod that selects
    no pool still lands on its own type's pool, and a Pod that asks for another value is refused. Users with ``edit``
    cannot change a namespace's annotations."""
    return f"{serves_label(workload_type)}=true"


# ---------------------------------------------------------------- Priority and RuntimeClass (default-on plugins)

# The lines these plugins refuse a Pod with (admission.NewForbidden around them: ``pods "<name>" is forbidden: ...``),
# k8s.io/kubernetes plugin/pkg/admission/priority/admission.go (admitPod) and plugin/pkg/admission/runtimeclass/
# admission.go (prepareObjects, setOverhead, validateOverhead).
OVERHEAD_MISMATCH = "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
OVERHEAD_WITHOUT_CLASS = "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"


@dataclass(frozen=True)
class ClusterClasses:
    """The PriorityClasses and RuntimeClasses a Pod may name: the API server's own system priority classes and
    those among the objects checked (they are created with them), each PriorityClass with its value, and the
    priority of a Pod that names none (the value of a ``globalDefault`` class among them, else 0); each RuntimeClass
    with its ``overhead.podFixed`` (None when it defines none)."""

    priority: Mapping[str, int]
    runtime: Mapping[str, Mapping[str, Any] | None]
    default_priority: int = 0


@cache
def system_priority_classes() -> Mapping[str, int]:
    return {str(name): int(value) for name, value in load_yaml(DATA_FILE)["system_priority_classes"].items()}


def cluster_classes(objects: Sequence[Mapping[str, Any]]) -> ClusterClasses:
    priority, runtime, defaults = dict(system_priority_classes()), {}, []
    for obj in objects:
        kind, group = str(obj.get("kind", "")), str(obj.get("apiVersion", "")).rpartition("/")[0]
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            continue
        if (group, kind) == ("scheduling.k8s.io", "PriorityClass"):
            value = obj.get("value")
            priority[name] = value if isinstance(value, int) and not isinstance(value, bool) else 0
            if obj.get("globalDefault") is True:
                defaults.append(priority[name])
        elif (group, kind) == ("node.k8s.io", "RuntimeClass"):
            overhead = obj.get("overhead")
            fixed = overhead.get("podFixed") if isinstance(overhead, Mapping) else None
            runtime[name] = dict(fixed) if isinstance(fixed, Mapping) else None
    # Of several global defaults the plugin takes the lowest value (getDefaultPriorityClass).
    return ClusterClasses(priority, runtime, min(defaults, default=0))


def admit_refusal(spec: Mapping[str, Any], classes: ClusterClasses) -> str | None:
    """What Priority's and RuntimeClass's mutating steps refuse a Pod's CREATE with, in the server's order (after
    PodNodeSelector's, :func:`selector_conflict`); None when both admit it. Priority resolves the class first, then
    refuses a client-set ``spec.priority`` that differs from what it resolved (at v1.36.3: ``the integer value of
    priority (N) must not be provided in pod spec; priority admission controller computed M ...``)."""
    name = spec.get("priorityClassName")
    named = isinstance(name, str) and bool(name)
    if named and name not in classes.priority:
        return f"no PriorityClass with name {name} was found"
    computed = classes.priority[str(name)] if named else classes.default_priority
    written = spec.get("priority")
    if written is not None and written != computed:
        return (
            f"the integer value of priority ({written}) must not be provided in pod spec; priority admission controller "
            f"computed {computed} from the given PriorityClass name"
        )
    runtime = spec.get("runtimeClassName")
    if isinstance(runtime, str) and runtime:
        if runtime not in classes.runtime:
            return f'pod rejected: RuntimeClass "{runtime}" not found'
        fixed = classes.runtime[runtime]
        if fixed is not None and spec.get("overhead") is not None and not _same_amounts(spec["overhead"], fixed):
            return OVERHEAD_MISMATCH
    return None


def with_runtime_overhead(pod: Mapping[str, Any], classes: ClusterClasses) -> Mapping[str, Any]:
    """The Pod with its RuntimeClass's overhead set (RuntimeClass's setOverhead), which the quota then charges."""
    spec = pod.get("spec") or {}
    fixed = classes.runtime.get(str(spec.get("runtimeClassName") or ""))
    if fixed is None:
        return pod
    return {**pod, "spec": {**spec, "overhead": dict(fixed)}}


def validate_refusal(spec: Mapping[str, Any], classes: ClusterClasses) -> str | None:
    """RuntimeClass's validating step: an overhead the Pod's RuntimeClass does not define (a client-set overhead)."""
    fixed = classes.runtime.get(str(spec.get("runtimeClassName") or ""))
    if fixed is None and spec.get("overhead") is not None:
        return OVERHEAD_WITHOUT_CLASS
    return None


def _same_amounts(left: Any, right: Mapping[str, Any]) -> bool:
    # apiequality.Semantic.DeepEqual compares quantities by value (1 and 1000m are equal).
    if not isinstance(left, Mapping) or set(left) != set(right):
        return False
    try:
        return all(Quantity.parse(str(left[key])).value == Quantity.parse(str(right[key])).value for key in right)
    except ValueError:
        return False
