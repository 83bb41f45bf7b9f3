"""AKS's mutating admission plugins that change what the stack's policies read, repeated offline. Pure.

An AKS API server runs a fixed list of admission plugins (``components/aks_gpu/data/aks_admission.yaml``, from the
AKS FAQ). Mutating plugins run before any validating admission policy, so a policy judges the Pod as they left it:

- **PodNodeSelector** (CREATE of a Pod): the namespace annotation ``scheduler.alpha.kubernetes.io/node-selector``
  (``k=v,k2=v2``) is merged into the Pod's ``nodeSelector``; a Pod that sets one of those keys to another value is
  refused, ``pods "<name>" is forbidden: pod node label selector conflicts with its namespace node label selector``
  (plugin/pkg/admission/podnodeselector/admission.go, ``Admit``). The stack's workload namespaces carry one, which
  binds their Pods to the pools of their workload type (``aks_gpu.kube.workload_manifests.placement_selector``).
- **ExtendedResourceToleration** (CREATE and UPDATE of a Pod): ``{key: <resource>, operator: Exists, effect:
  NoSchedule}`` for every extended resource named in a container's or init container's requests, whatever the
  quantity, sorted, unless an equal toleration is there (plugin/pkg/admission/extendedresourcetoleration/admission.go;
  ``helper.AddOrUpdateTolerationInPod``).

Neither plugin touches a Deployment, a Job or a custom resource: their Pods meet them when a controller creates them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.admission.reader import is_extended_resource
from aks_gpu.data_files import load_yaml
from aks_gpu.naming import serves_label

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "aks_admission.yaml"
NODE_SELECTOR_ANNOTATION = "scheduler.alpha.kubernetes.io/node-selector"
SELECTOR_CONFLICT = "pod node label selector conflicts with its namespace node label selector"


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
    limits); call :func:`selector_conflict` first: a conflicting Pod is refused, not mutated."""
    mutated = copy.deepcopy(dict(pod))
    spec = mutated.setdefault("spec", {})
    if operation == "CREATE":
        wanted = namespace_selector(namespace)
        if wanted:
            spec["nodeSelector"] = {**wanted, **(spec.get("nodeSelector") or {})}
    tolerations = list(spec.get("tolerations") or ())
    for resource in extended_resources(spec):
        added = {"key": resource, "operator": "Exists", "effect": "NoSchedule"}
        if not any(_same(existing, added) for existing in tolerations):
            tolerations.append(added)
    if tolerations:
        spec["tolerations"] = tolerations
    return mutated


def _same(existing: Any, added: Mapping[str, str]) -> bool:
    # AddOrUpdateTolerationInPod: an equal toleration (key, operator, value, effect; tolerationSeconds unset) is kept.
    if not isinstance(existing, Mapping):
        return False
    return (
        existing.get("key", "") == added["key"]
        and existing.get("operator", "") == added["operator"]
        and (existing.get("value") or "") == ""
        and existing.get("effect", "") == added["effect"]
        and existing.get("tolerationSeconds") is None
    )


def placement_selector(workload_type: str) -> str:
    """A workload namespace's PodNodeSelector annotation: every Pod of the namespace gets ``serves.aks-gpu/<type>:
    "true"`` in its nodeSelector, which the GPU pools of that type and the CPU pools carry, so a GPU Pod that selects
    no pool still lands on its own type's pool, and a Pod that asks for another value is refused. Users with ``edit``
    cannot change a namespace's annotations."""
    return f"{serves_label(workload_type)}=true"
