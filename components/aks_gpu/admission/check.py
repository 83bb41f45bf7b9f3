"""What ``aksgpu admission check`` decides for a set of objects: the chain the API server runs, offline. Pure.

Per object: the stack's policies on the object itself (a template is judged as written), then every Pod it will have
created (:mod:`aks_gpu.admission.workload_pods`) through AKS's mutating plugins (:mod:`aks_gpu.admission.chain`), the
policies, Pod Security and the namespace's ResourceQuota (:mod:`aks_gpu.admission.namespace_admission`). A Pod's refusal makes its
object's decision "denied": the server stores the Deployment or the custom resource, and refuses its Pods. An object
refused itself has no Pods to judge: the server stores nothing for a controller to act on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from aks_gpu.admission.chain import cluster_classes
from aks_gpu.admission.dra import ClaimKey, claims_given, pod_claims
from aks_gpu.admission.engine import Engine
from aks_gpu.admission.evaluate import (
    ADMITTED,
    DEFAULT_NAMESPACE,
    NOT_EVALUATED,
    REFUSED,
    Decision,
    Judge,
    namespaced,
)
from aks_gpu.admission.namespace_admission import (
    NamespaceFacts,
    complete,
    never_admitted,
    replicas_step,
    unschedulable,
)
from aks_gpu.admission.platform_warnings import Platform, warnings
from aks_gpu.admission.policy import DRA_POLICY_NAME
from aks_gpu.admission.workload_pods import PodOf, not_evaluated_reason, operator_pods, template_pod

# How the table names an object the server admits that will not run as written.
PODS_DENIED = "admitted, pods denied"
STAYS_PENDING = "admitted, stays Pending"
WAITS_IN_QUEUE = "admitted, waits in its queue forever"
OPERATOR_STEP = "the operator's own changes to the Pods it creates (labels, environment, sidecars)"


def pods_of(obj: Mapping[str, Any]) -> tuple[list[PodOf], bool]:
    """The Pods the object will have created, and whether they come from an operator (a custom resource)."""
    from_operator = operator_pods(obj)
    if from_operator is not None:
        return from_operator, True
    pod = template_pod(obj)
    return ([pod] if pod is not None else []), False


def check(
    objects: Sequence[Mapping[str, Any]],
    manifests: Sequence[Mapping[str, Any]],
    namespaces: Mapping[str, Mapping[str, Any]],
    facts: Mapping[str, NamespaceFacts],
    baseline: Sequence[Mapping[str, Any]],
    engine: Engine,
    system: Mapping[str, str] | None = None,
    platform: Platform | None = None,
) -> list[Decision]:
    """One decision per object (``manifests``: the stack's policies and bindings; ``baseline``: the Pod Security
    baseline policies of the namespaces that enforce it; ``system``: the namespaces the policies leave out, each
    with what it is, :func:`aks_gpu.admission.policy.system_namespaces`; ``platform``: what the stack runs, for the
    warnings of :mod:`aks_gpu.admission.platform_warnings`)."""
    system = system or {}
    platform = platform or Platform()
    expanded = [pods_of(obj) for obj in objects]
    classes = cluster_classes(objects)
    judge = Judge(manifests, namespaces, engine, classes)
    # Pod Security judges Pods only (a template's Pods, when the template itself is stored).
    baseline_judge = Judge(baseline, namespaces, engine, classes) if baseline else None
    own_requests = [judge.request(obj) for obj in objects]
    decisions = [judge(request) for request in own_requests]
    if not manifests:
        given = zip(objects, decisions, expanded, strict=True)
        return [_warned(obj, decision, pods, platform) for obj, decision, (pods, _) in given]

    def completed(obj: Mapping[str, Any], decision: Decision, own_baseline: Decision | None) -> Decision:
        namespace = decision.namespace
        return complete(decision, obj, facts.get(namespace), own_baseline, system.get(namespace), classes)

    claims = claims_given((obj, decision.namespace) for obj, decision in zip(objects, decisions, strict=False))
    results = []
    for obj, own, own_request, (pods, from_operator) in zip(objects, decisions, own_requests, expanded, strict=True):
        if str(obj.get("kind")) == "Pod" and not pods:
            pod = completed(obj, own, baseline_judge(own_request) if baseline_judge else None)
            pod = _claimed(pod, [PodOf("", dict(obj))], claims, facts, platform, "the pod")
            pod = _unscheduled(pod, [PodOf("", dict(obj))], facts, "the pod")
            results.append(_warned(obj, pod, pods, platform))
            continue
        # A refused object is not stored, so no controller or operator ever creates its Pods: they are not judged.
        judged = [pod.pod for pod in pods] if own.allowed else []
        requests = [judge.request(pod) for pod in judged]
        pod_baselines = [baseline_judge(request) for request in requests] if baseline_judge else []
        pod_decisions = [
            completed(pod, judge(request), pod_baselines[index] if pod_baselines else None)
            for index, (pod, request) in enumerate(zip(judged, requests, strict=True))
        ]
        folded = _folded(obj, own, pods, pod_decisions, from_operator)
        if own.allowed and not folded.allowed:
            # The server stores the object (its own CREATE is admitted) and refuses the Pods it creates.
            folded = replace(folded, verdict=ADMITTED, label=PODS_DENIED)
        if own.allowed:
            who = "the pods its operator creates" if from_operator else "the pods it creates"
            folded = _claimed(folded, pods, claims, facts, platform, who)
            folded = _unscheduled(folded, pods, facts, who)
        if own.allowed and not from_operator and pod_baselines:
            warned = _pod_security_warning(facts.get(own.namespace), pod_baselines)
            if warned:
                folded = replace(folded, warnings=(*folded.warnings, warned))
        waits = never_admitted(obj, pods[0].pod, facts.get(own.namespace)) if pods and own.allowed else None
        if waits is not None:
            folded = _stays_pending(folded, waits, WAITS_IN_QUEUE)
        step = replicas_step(obj, pods[0].pod, facts.get(own.namespace)) if pods and not from_operator else None
        if step is not None and folded.allowed:
            folded = replace(folded, not_evaluated=(step, *folded.not_evaluated))
        results.append(_warned(obj, folded, pods, platform))
    return results


def _claimed(
    decision: Decision,
    pods: Sequence[PodOf],
    claims: Mapping[ClaimKey, Sequence[str]],
    facts: Mapping[str, NamespaceFacts],
    platform: Platform,
    who: str,
) -> Decision:
    """The decision with what the Pods' DRA claims ask for: GPUs through a claim or template among the objects
    are never allocated on this stack (no DRA driver for GPUs), so the Pods would stay Pending; the server admits
    them (it refuses the claim or template itself, aks-gpu-dra-claims), so the object stays admitted and the check
    says it will not run. A claim that is not among the objects is named as not evaluated."""
    namespace = decision.namespace
    found = [pod_claims(pod.pod.get("spec") or {}, namespace, claims) for pod in pods]
    gpus = list(dict.fromkeys(entry for claimed in found for entry in claimed.gpus))
    unknown = list(dict.fromkeys(entry for claimed in found for entry in claimed.unknown))
    steps = tuple(
        f"whether the {name} {who} claims asks for GPUs: it is not among the files (the stack's policy "
        f"{DRA_POLICY_NAME} refuses one that does when it is created)"
        for name in unknown
    )
    if steps:
        decision = replace(decision, not_evaluated=(*decision.not_evaluated, *steps))
    if not gpus:
        return decision
    facts_here = facts.get(namespace)
    if facts_here is not None and facts_here.exposes:
        ask = f"{facts_here.exposes} (what the pools of {namespace} expose)"
    else:
        ask = " or ".join(platform.gpu_resources) or "a GPU resource"
    stays = "stays" if who == "the pod" else "stay"
    line = (
        f"{who} {'claims' if who == 'the pod' else 'claim'} GPUs through Dynamic Resource Allocation "
        f"({'; '.join(gpus)}), but this stack deploys no DRA driver for GPUs: its GPU pools run the device plugin, so "
        f"the claim is never allocated and {who} {stays} Pending. Ask for {ask} in the resources.limits of the "
        "container instead, and drop the claim"
    )
    return _stays_pending(decision, line)


def _admitted(decision: Decision) -> bool:
    return decision.decision == ADMITTED or decision.allowed


def _stays_pending(decision: Decision, line: str, label: str = STAYS_PENDING) -> Decision:
    """The decision with a reason its Pods would stay Pending: an admitted one becomes "admitted, stays Pending" (the
    server admits it, and it never runs; ``label`` says how); a denied one keeps its denial and lists the reason
    too."""
    if _admitted(decision):
        label = decision.label or label
        return replace(
            decision,
            allowed=False,
            messages=(*decision.messages, line),
            message=decision.message or line,
            verdict=ADMITTED,
            label=label,
        )
    return replace(decision, messages=(*decision.messages, line))


def _unscheduled(decision: Decision, pods: Sequence[PodOf], facts: Mapping[str, NamespaceFacts], who: str) -> Decision:
    """The admitted decision, made "admitted, stays Pending" when a Pod fits no node of the pools its namespace may
    use (:func:`aks_gpu.admission.namespace_admission.unschedulable`); a denied one is left as it is."""
    if not _admitted(decision):
        return decision
    here = facts.get(decision.namespace)
    named = [(pod, f"{who} from {pod.path}" if pod.path and len(pods) > 1 else who) for pod in pods]
    lines = [line for pod, whom in named if (line := unschedulable(pod.pod, here, whom)) is not None]
    return _stays_pending(decision, lines[0]) if lines else decision


def _pod_security_warning(facts: NamespaceFacts | None, baseline: list[Decision]) -> str:
    """What Pod Security admission warns when a workload object (Deployment, Job...) is created in a namespace that
    warns at a level its template breaks: enforce judges the Pods only, warn and audit the template too
    (https://kubernetes.io/docs/concepts/security/pod-security-admission/#workload-resources-and-pod-templates). The
    stack's namespaces warn at restricted, which contains baseline; only baseline is evaluated offline, so the
    detail lists the baseline controls broken (the server's warning lists the restricted ones too)."""
    if facts is None or not facts.warn_level:
        return ""
    broken = [message for decision in baseline if not decision.allowed for message in decision.messages]
    if not broken:
        return ""
    return f'would violate PodSecurity "{facts.warn_level}:latest": {"; ".join(dict.fromkeys(broken))}'


def _warned(obj: Mapping[str, Any], decision: Decision, pods: list[PodOf], platform: Platform) -> Decision:
    own = pods or ([PodOf("", dict(obj))] if str(obj.get("kind")) == "Pod" else [])
    found = warnings(obj, decision.namespace, own, platform)
    return replace(decision, warnings=(*decision.warnings, *found)) if found else decision


def _folded(
    obj: Mapping[str, Any], own: Decision, pods: list[PodOf], pod_decisions: list[Decision], from_operator: bool
) -> Decision:
    messages, first = list(own.messages), own.message
    steps: list[str] = []
    who = "its operator creates" if from_operator else "it creates"
    # A refused object is not stored, so no controller or operator ever creates its Pods: the server's answer is
    # the object's own refusal alone (kubectl create -f of a Deployment whose template a policy denies: one line);
    # ``pod_decisions`` is empty then.
    for pod, decision in zip(pods, pod_decisions, strict=False):
        for step in decision.not_evaluated:
            if step not in steps:
                steps.append(step)
        if decision.allowed:
            continue
        # What the template's own decision said already is not said again for its Pods; the first new refusal is
        # shown as the server words it for the Pod.
        new = [message for message in decision.messages if message not in own.messages]
        if not new:
            continue
        if decision.messages and new[0] == decision.messages[0] and decision.message:
            # The server's line without its `pods "<name>" is forbidden: `: the controller names the Pod (a Job's
            # event reads `Error creating: pods "rdma-wbdc4" is forbidden: violates PodSecurity ...`), not this check.
            new[0] = decision.message.split(" is forbidden: ", 1)[-1]
        where = f" from {pod.path}" if from_operator else ""
        prefixed = [f"the pods {who}{where} would be refused: {line}" for line in new]
        messages += prefixed
        first = first or prefixed[0]
    if from_operator:
        steps.append(OPERATOR_STEP)
    reason = not_evaluated_reason(obj)
    if reason is not None:
        steps.append(reason)
    note = own.note
    if from_operator and not pods:
        note = "no pod template found in the object"
    elif from_operator:
        note = f"{len(pods)} pod template(s) judged as the Pods {who}"
    return replace(own, allowed=not messages, messages=tuple(messages), message=first, not_evaluated=tuple(steps), note=note)


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name) of an object that reached no admission step, as written where it is well typed."""
    raw = obj.get("metadata")
    metadata: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    name = next((str(metadata[f]) for f in ("name", "generateName") if isinstance(metadata.get(f), str) and metadata[f]), "")
    written = metadata.get("namespace")
    namespace = (written if isinstance(written, str) and written else DEFAULT_NAMESPACE) if namespaced(obj) else ""
    return str(obj.get("kind", "")), namespace, name


def refused(obj: Mapping[str, Any], line: str) -> Decision:
    """An object the API server refuses before admission (its own validation): ``line`` is the refusal."""
    kind, namespace, name = _identity(obj)
    return Decision(kind, namespace, name, False, (line,), message=line, verdict=REFUSED)


def not_evaluated(obj: Mapping[str, Any], reason: str) -> Decision:
    """An object that is not what will reach the server (a template still to render): ``reason`` says why."""
    kind, namespace, name = _identity(obj)
    return Decision(kind, namespace, name, False, message=reason, note=reason, not_evaluated=(reason,), verdict=NOT_EVALUATED)
