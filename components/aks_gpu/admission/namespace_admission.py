"""The rest of admission a GPU pod meets in a workload namespace: the stack's GPU ResourceQuota and the namespace's
Pod Security level. Pure: the model and an object in, refusals and the steps left unevaluated out.

A user reads "admitted" as "the cluster will take it". After the validating admission policies the API server
runs the ResourceQuota admission plugin (a Pod whose GPU requests exceed the namespace's ``hard`` is refused:
``exceeded quota``) and Pod Security admission (the namespace's ``pod-security.kubernetes.io/enforce`` level).
Both judge Pods only: a Deployment or Job is created, and its pods are then refused, so for a template the
refusal is reported for the pods it would create.

- Quota: each workload namespace gets ``requests.<resource>: gpuQuota`` on the resource its pools expose and
  ``0`` on every other GPU resource of the stack (``aks_gpu.kube.workload_manifests.quota_hard``, whose
  ``namespace_facts`` hands them here). A pod's usage
  is what the quota evaluator counts: the sum of its containers' requests (limits default them) or the largest
  init container's, whichever is larger (k8s.io/kubernetes pkg/quota/v1/evaluator/core/pods.go). Offline, the
  namespace is taken as otherwise empty: a pod refused here is refused on any cluster, one admitted here may
  still exceed what other pods left.
- Pod Security: the ``baseline`` controls are evaluated (the same CEL as the RDMA namespaces' policy,
  :mod:`aks_gpu.admission.pod_security`, without IPC_LOCK); ``restricted`` is named as not evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from aks_gpu.admission.evaluate import Decision
from aks_gpu.admission.quantity import Quantity
from aks_gpu.admission.reader import POD_SPEC_PATHS, builtin_kind
from aks_gpu.naming import QUOTA_NAME

QUOTA_PREFIX = "requests."


@dataclass(frozen=True)
class NamespaceFacts:
    """What the stack puts on one workload namespace that admission reads."""

    name: str
    pod_security: str  # the enforce level: baseline, restricted or privileged (RDMA namespaces)
    gpu_quota: Mapping[str, str]  # requests.<resource> -> hard, the GPU keys of its ResourceQuota
    exposes: str  # the GPU resource its pools expose ("" when none)


def pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if not builtin_kind(obj):
        return None
    spec: Any = obj
    for step in POD_SPEC_PATHS.get(str(obj.get("kind", "")), ()):
        spec = spec.get(step) if isinstance(spec, Mapping) else None
    return spec if isinstance(spec, Mapping) and str(obj.get("kind", "")) in POD_SPEC_PATHS else None


def _requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {str(name): Quantity.parse(str(value)).value for name, value in amounts.items()}


def pod_usage(spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """What the quota evaluator charges a pod: per resource, max(sum of containers, largest init container)."""
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or ():
        for name, value in _requests(container).items():
            total[name] = total.get(name, Fraction(0)) + value
    for container in spec.get("initContainers") or ():
        for name, value in _requests(container).items():
            total[name] = max(total.get(name, Fraction(0)), value)
    return total


def _format(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))


def quota_refusal(obj: Mapping[str, Any], facts: NamespaceFacts) -> str | None:
    """The ResourceQuota admission plugin's refusal of the pod (or of each pod a template creates) in an otherwise
    empty namespace, with the resource the namespace's pools expose; None when the GPU quota holds it."""
    spec = pod_spec(obj)
    if spec is None:
        return None
    usage = pod_usage(spec)
    over = []
    for key, hard in sorted(facts.gpu_quota.items()):
        requested = usage.get(key.removeprefix(QUOTA_PREFIX), Fraction(0))
        if requested > Quantity.parse(hard).value:
            over.append((key, requested, hard))
    if not over:
        return None
    requested_text = ",".join(f"{key}={_format(amount)}" for key, amount, _ in over)
    used_text = ",".join(f"{key}=0" for key, _, _ in over)
    limited_text = ",".join(f"{key}={hard}" for key, _, hard in over)
    name = str((obj.get("metadata") or {}).get("name") or "")
    line = (
        f'pods "{name}" is forbidden: exceeded quota: {QUOTA_NAME}, requested: {requested_text}, used: {used_text}, '
        f"limited: {limited_text}"
    )
    if obj.get("kind") != "Pod":
        line = "the pods it creates would be refused: " + line.split(" is forbidden: ", 1)[1]
    elsewhere = [key for key, _, _ in over if key.removeprefix(QUOTA_PREFIX) != facts.exposes]
    if not elsewhere:
        return line
    if facts.exposes:
        return f"{line}; namespace {facts.name}'s pools expose {facts.exposes}: ask for that resource instead"
    return f"{line}; no pool of the stack serves namespace {facts.name}"


def not_evaluated(facts: NamespaceFacts | None) -> list[str]:
    """The admission steps this check does not evaluate for an object in that namespace."""
    steps = ["other admission webhooks and policies of the cluster"]
    if facts is None:
        steps.insert(0, "Pod Security and ResourceQuota of a namespace the stack does not create")
        return steps
    if facts.pod_security == "restricted":
        steps.insert(0, "Pod Security restricted (only baseline is evaluated offline)")
    steps.insert(0, "ResourceQuota usage by other pods (the namespace is taken as empty)")
    # Only the quota's GPU keys are applied; its requests.cpu and requests.memory refuse pods too (a multi-node vLLM
    # pod of 1124Gi was refused by gpu-inference's 800Gi on kube-apiserver 1.36.3).
    steps.insert(1, "ResourceQuota's cpu and memory keys (only its GPU keys are applied)")
    return steps


def complete(decision: Decision, obj: Mapping[str, Any], facts: NamespaceFacts | None, baseline: Decision | None) -> Decision:
    """The policies' decision with the namespace's Pod Security (``baseline``: the baseline controls' decision
    for the object, when the namespace enforces baseline) and GPU quota added, and the steps left unevaluated."""
    messages, first = list(decision.messages), decision.message
    name = str((obj.get("metadata") or {}).get("name") or "")
    template = obj.get("kind") != "Pod"
    if facts is not None and baseline is not None and not baseline.allowed and pod_spec(obj) is not None:
        # The server's own detail reads "non-default capabilities (container ... must not include ...)": the
        # wording after the prefix is this check's (pod_security.py), not the server's.
        detail = "; ".join(baseline.messages)
        refusal = f'violates PodSecurity "baseline:latest": {detail}'
        line = f"the pods it creates would be refused: {refusal}" if template else f'pods "{name}" is forbidden: {refusal}'
        messages.append(line)
        first = first or line
    refused = quota_refusal(obj, facts) if facts is not None else None
    if refused is not None:
        messages.append(refused)
        first = first or refused
    steps = tuple(not_evaluated(facts)) if pod_spec(obj) is not None else ()
    return replace(decision, allowed=not messages, messages=tuple(messages), message=first, not_evaluated=steps)
