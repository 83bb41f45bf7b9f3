"""The GPU placement policy: a ValidatingAdmissionPolicy and its binding, built from the platform model. Pure.

What it enforces on Pods and on the Pod templates of Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and
CronJobs (init containers included, ephemeral containers not):

1. a container that asks for a GPU resource (``nvidia.com/gpu``, ``amd.com/gpu``, ``nvidia.com/mig-*`` and every
   resource a pool of the stack exposes) asks for exactly its limit (a limit alone is fine: Kubernetes copies
   it into the request), and the pod tolerates that vendor's node taint ``<vendor>.com/gpu=present:NoSchedule``;
2. a pod that asks for no GPU does not tolerate a GPU taint (it could hold a GPU node without using it);
3. with ``admission.restrictToWorkloadNamespaces``: a GPU pod runs in a namespace labelled
   ``aks-gpu/workload: <type>`` and selects (``nodeSelector`` or required node affinity, key
   ``aks-gpu/workload`` or ``aks-gpu/pool``) only pools that serve that type, and selects at least one.

The namespaces in ``admission.exemptNamespaces`` are outside the policy altogether: its ``namespaceSelector``
leaves them out before any CEL runs. They hold the platform's own agents (device plugin, GPU operator, DCGM
exporter, log and metric collectors), which tolerate every taint on purpose and come from vendor charts this
project does not control; with ``failurePolicy: Fail``, keeping them out of reach of the policy also means a
policy mistake can never stop kube-system from starting pods. ``kubernetes.io/metadata.name`` is set by the API
server on every namespace and cannot be changed, so a tenant cannot opt out by relabelling.

Every expression stays within what the API server offers (standard CEL and macros, the extended string
library's ``join``, the Kubernetes quantity library), so the same manifests work on a real cluster and in
``aksgpu admission check``. Names and lists from the model are written into the expressions as literals.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from components.model import (
    COMMON_LABELS,
    GPU_TAINT_VALUE,
    POOL_LABEL,
    WORKLOAD_LABEL,
    PlatformModel,
    Taint,
    Vendor,
    vendor_resource,
)

Manifest = dict[str, Any]

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_NAME = "aks-gpu-gpu-placement"
BINDING_NAME = "aks-gpu-gpu-placement"
# Set by the API server on every namespace (GA since 1.22).
# https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# The NVIDIA device plugin's mixed MIG strategy advertises one resource per profile: nvidia.com/mig-1g.10gb ...
# https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
VENDORS: tuple[Vendor, ...] = ("nvidia", "amd")
# The GPU pools' taint effect (components.model.resolve_pool).
GPU_TAINT_EFFECT = "NoSchedule"
OPERATIONS = ["CREATE", "UPDATE"]
# The kinds whose pod spec the policy reads, and where it sits in each.
# https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/#matching-requests-matchconstraints
RESOURCE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("", ("pods",)),
    ("apps", ("deployments", "replicasets", "statefulsets", "daemonsets")),
    ("batch", ("jobs", "cronjobs")),
)


# ---------------------------------------------------------------- what the model says


def vendor_taint(vendor: Vendor) -> Taint:
    """The taint every GPU pool of a vendor carries (the same one ``resolve_pool`` puts on the pools)."""
    return Taint(key=vendor_resource(vendor), value=GPU_TAINT_VALUE, effect=GPU_TAINT_EFFECT)


def gpu_resource_names(model: PlatformModel) -> tuple[str, ...]:
    """The GPU resources matched by name: both vendors' whole-GPU resource and what every pool exposes."""
    names = {vendor_resource(vendor) for vendor in VENDORS} | {pool.resource.name for pool in model.pools}
    return tuple(sorted(names))


def pools_by_type(model: PlatformModel) -> dict[str, tuple[str, ...]]:
    """Per workload type, the pools that serve it: pools with that ``workload``, and pools a workload of that
    type is pinned to with ``pool``."""
    types: dict[str, set[str]] = {}
    for pool in model.pools:
        types.setdefault(pool.workload, set()).add(pool.name)
    for workload in model.workloads:
        types.setdefault(workload.type, set()).update(pool.name for pool in workload.pools)
    return {kind: tuple(sorted(names)) for kind, names in sorted(types.items())}


def workload_namespaces(model: PlatformModel) -> dict[str, Manifest]:
    """The workload namespaces as the policy sees them (``namespaceObject``): name and the labels it reads."""
    return {
        workload.name: {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": workload.name,
                "labels": {NAMESPACE_NAME_LABEL: workload.name, WORKLOAD_LABEL: workload.type},
            },
        }
        for workload in model.workloads
    }


# ---------------------------------------------------------------- CEL building blocks


def lit(text: str) -> str:
    """A CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def lit_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(lit(item) for item in items) + "]"


def pod_spec_of(obj: str) -> str:
    """Where the pod spec sits in a Pod, a CronJob and every other matched kind. The kind is read from the
    request, which the API server always fills in (the object's own TypeMeta may be empty)."""
    return (
        f"request.kind.kind == 'Pod' ? {obj}.spec : "
        f"(request.kind.kind == 'CronJob' ? {obj}.spec.jobTemplate.spec.template.spec : {obj}.spec.template.spec)"
    )


def is_gpu(resource: str) -> str:
    return f"({resource} in variables.gpuResourceNames || {resource}.startsWith({lit(MIG_RESOURCE_PREFIX)}))"


def uses_gpu(container: str, extra: str = "") -> str:
    """The container asks for a GPU resource (in requests or limits); ``extra`` narrows the resource name."""
    test = is_gpu("r") + (f" && {extra}" if extra else "")
    resources = f"{container}.resources"
    return (
        f"has({resources}) && ((has({resources}.limits) && {resources}.limits.exists(r, {test})) || "
        f"(has({resources}.requests) && {resources}.requests.exists(r, {test})))"
    )


def limit_differs(container: str, resource: str) -> str:
    """The container's request for ``resource`` has no limit, or a different one. Compared as quantities (``1``
    and ``1000m`` are equal) with the Kubernetes quantity library, in every API server that serves VAP v1.
    https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-quantity-library"""
    limits = f"{container}.resources.limits"
    request = f"{container}.resources.requests[{resource}]"
    return (
        f"!(has({limits}) && {resource} in {limits} && "
        f"quantity(string({request})).compareTo(quantity(string({limits}[{resource}]))) == 0)"
    )


def tolerates(toleration: str, taint: Taint) -> str:
    """Kubernetes' ToleratesTaint: the effect matches or is empty; the key matches (operator Exists, or Equal
    and the same value), or is empty with operator Exists (which tolerates every taint).
    https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/"""
    t = toleration
    effect = f"(!has({t}.effect) || {t}.effect == '' || {t}.effect == {lit(taint.effect)})"
    exists = f"(has({t}.operator) && {t}.operator == 'Exists')"
    equal_operator = f"(!has({t}.operator) || {t}.operator == '' || {t}.operator == 'Equal')"
    equal = f"({equal_operator} && has({t}.value) && {t}.value == {lit(taint.value)})"
    key = f"((has({t}.key) && {t}.key != '') ? ({t}.key == {lit(taint.key)} && ({exists} || {equal})) : {exists})"
    return f"({effect} && {key})"


def _variable(name: str, expression: str) -> dict[str, str]:
    return {"name": name, "expression": expression}


def _validation(expression: str, message: str, message_expression: str, reason: str = "Invalid") -> dict[str, str]:
    return {"expression": expression, "message": message, "messageExpression": message_expression, "reason": reason}


def _containers_word(containers: str) -> str:
    return f"(size({containers}) == 1 ? 'container ' : 'containers ') + {containers}.map(c, c.name).join(', ')"


# ---------------------------------------------------------------- the rules


def _base_variables(model: PlatformModel) -> list[dict[str, str]]:
    spec = "variables.podSpec"
    variables = [
        _variable("podSpec", pod_spec_of("object")),
        _variable(
            "containers",
            f"(has({spec}.containers) ? {spec}.containers : []) + (has({spec}.initContainers) ? {spec}.initContainers : [])",
        ),
        _variable("gpuResourceNames", lit_list(gpu_resource_names(model))),
        _variable("gpuContainers", f"variables.containers.filter(c, {uses_gpu('c')})"),
        _variable("tolerations", f"has({spec}.tolerations) ? {spec}.tolerations : []"),
    ]
    for vendor in VENDORS:
        of_vendor = f"r.startsWith({lit(vendor + '.com/')})"
        variables += [
            _variable(f"{vendor}Containers", f"variables.gpuContainers.filter(c, {uses_gpu('c', of_vendor)})"),
            _variable(f"{vendor}Tolerations", f"variables.tolerations.filter(t, {tolerates('t', vendor_taint(vendor))})"),
        ]
    of_any_vendor = " || ".join(f"t in variables.{vendor}Tolerations" for vendor in VENDORS)
    variables += [
        _variable(
            "limitMismatches",
            "variables.gpuContainers.filter(c, has(c.resources.requests) && "
            f"c.resources.requests.exists(r, {is_gpu('r')} && {limit_differs('c', 'r')}))",
        ),
        _variable("gpuTolerations", f"variables.tolerations.filter(t, {of_any_vendor})"),
    ]
    return variables


def _base_validations(model: PlatformModel) -> list[dict[str, str]]:
    exempt = ", ".join(model.config.admission.exempt_namespaces) or "none"
    limit_text = (
        "(has(c.resources.limits) && r in c.resources.limits ? "
        "' with limit ' + string(c.resources.limits[r]) : ' without a limit')"
    )
    mismatch_detail = (
        f"c.name + ' asks for ' + c.resources.requests.filter(r, {is_gpu('r')} && {limit_differs('c', 'r')})"
        f".map(r, r + ': ' + string(c.resources.requests[r]) + {limit_text}).join(', ')"
    )
    validations = [
        _validation(
            "size(variables.limitMismatches) == 0",
            "a GPU request must equal its limit: set resources.limits to the requested GPU count (a limit alone is enough)",
            "'GPU requests must equal their limits (GPUs cannot be overcommitted): ' + "
            "(size(variables.limitMismatches) == 1 ? 'container ' : 'containers ') + "
            f"variables.limitMismatches.map(c, {mismatch_detail}).join('; ') + "
            "'. Set resources.limits to the same count, or give only the limit.'",
        )
    ]
    for vendor in VENDORS:
        taint = vendor_taint(vendor)
        containers = f"variables.{vendor}Containers"
        add = f"tolerations: [{{key: {taint.key}, operator: Exists, effect: {taint.effect}}}]"
        problem = f"{vendor} GPUs, but the pod does not tolerate the GPU node taint {taint.aks()}: add {add} to the pod spec"
        validations.append(
            _validation(
                f"size({containers}) == 0 || size(variables.{vendor}Tolerations) > 0",
                f"a pod that requests {vendor} GPUs must tolerate the GPU node taint {taint.aks()}: add {add} to the pod spec",
                f"{_containers_word(containers)} + (size({containers}) == 1 ? ' requests ' : ' request ') + {lit(problem)}",
            )
        )
    keys = "variables.gpuTolerations.map(t, has(t.key) && t.key != '' ? t.key : 'an empty key with operator Exists').join(', ')"
    validations.append(
        _validation(
            "size(variables.gpuContainers) > 0 || size(variables.gpuTolerations) == 0",
            f"a pod that requests no GPU must not tolerate a GPU node taint; only these namespaces may: {exempt}",
            f"'the pod requests no GPU but tolerates the GPU node taint (' + {keys} + '), so it could hold a GPU node "
            f"that GPU work is waiting for: remove that toleration or request a GPU (only these namespaces may run "
            f"such pods: {exempt})'",
        )
    )
    return validations


def _placement_variables(model: PlatformModel) -> list[dict[str, str]]:
    labels = "namespaceObject.metadata.labels"
    spec = "variables.podSpec"
    by_type = "{" + ", ".join(f"{lit(kind)}: {lit_list(pools)}" for kind, pools in pools_by_type(model).items()) + "}"
    affinity = f"{spec}.affinity.nodeAffinity"
    required = f"{affinity}.requiredDuringSchedulingIgnoredDuringExecution"
    keys = lit_list((WORKLOAD_LABEL, POOL_LABEL))
    wrong_selector = (
        f"(k == {lit(WORKLOAD_LABEL)} && variables.nodeSelector[k] != variables.workloadType) || "
        f"(k == {lit(POOL_LABEL)} && !(variables.nodeSelector[k] in variables.allowedPools))"
    )
    wrong_expression = (
        "e.operator == 'In' && has(e.values) && "
        f"((e.key == {lit(WORKLOAD_LABEL)} && e.values.exists(v, v != variables.workloadType)) || "
        f"(e.key == {lit(POOL_LABEL)} && e.values.exists(v, !(v in variables.allowedPools))))"
    )
    return [
        _variable(
            "workloadType",
            # Every matched resource is namespaced, so namespaceObject is never null here.
            f"has(namespaceObject.metadata) && has({labels}) && {lit(WORKLOAD_LABEL)} in {labels} "
            f"? {labels}[{lit(WORKLOAD_LABEL)}] : ''",
        ),
        _variable("poolsByType", by_type),
        _variable(
            "allowedPools",
            "variables.workloadType in variables.poolsByType ? variables.poolsByType[variables.workloadType] : []",
        ),
        _variable("nodeSelector", f"has({spec}.nodeSelector) ? {spec}.nodeSelector : {{}}"),
        _variable(
            "requiredTerms",
            f"has({spec}.affinity) && has({spec}.affinity.nodeAffinity) && has({required}) && has({required}.nodeSelectorTerms) "
            f"? {required}.nodeSelectorTerms : []",
        ),
        _variable(
            "targetsPool",
            f"variables.nodeSelector.exists(k, k in {keys}) || (size(variables.requiredTerms) > 0 && "
            "variables.requiredTerms.all(t, has(t.matchExpressions) && "
            f"t.matchExpressions.exists(e, e.key in {keys} && e.operator == 'In')))",
        ),
        _variable(
            "wrongPoolSelections",
            f"variables.nodeSelector.filter(k, {wrong_selector}).map(k, k + '=' + variables.nodeSelector[k]) + "
            f"variables.requiredTerms.map(t, has(t.matchExpressions) ? t.matchExpressions.filter(e, {wrong_expression})"
            ".map(e, e.key + ' in (' + e.values.join(', ') + ')').join(', ') : '').filter(s, s != '')",
        ),
    ]


def _placement_validations(model: PlatformModel) -> list[dict[str, str]]:
    namespaces = ", ".join(f"{w.name} ({w.type})" for w in model.workloads) or "none is configured"
    gpu = "size(variables.gpuContainers) == 0"
    return [
        _validation(
            f"{gpu} || variables.workloadType != ''",
            f"GPU pods run only in GPU workload namespaces (label {WORKLOAD_LABEL}); use one of: {namespaces}",
            f"'GPU pods run only in GPU workload namespaces (label {WORKLOAD_LABEL}): namespace ' + "
            f"namespaceObject.metadata.name + ' is not one. Use one of: {namespaces}'",
            reason="Forbidden",
        ),
        _validation(
            f"{gpu} || variables.workloadType == '' || (variables.targetsPool && size(variables.wrongPoolSelections) == 0)",
            f"a GPU pod must select a pool of its namespace's workload type with nodeSelector {WORKLOAD_LABEL} or {POOL_LABEL}",
            "'namespace ' + namespaceObject.metadata.name + ' runs ' + variables.workloadType + "
            "' work: its GPU pods must select only ' + "
            f"variables.workloadType + ' pools, with nodeSelector {WORKLOAD_LABEL}: ' + variables.workloadType + "
            f"(size(variables.allowedPools) > 0 ? ' or {POOL_LABEL}: one of ' + variables.allowedPools.join(', ') : '') + "
            "' (or the same in required node affinity); this pod ' + (size(variables.wrongPoolSelections) > 0 ? "
            "'selects ' + variables.wrongPoolSelections.join(', ') : 'selects no pool')",
            reason="Forbidden",
        ),
    ]


def policy_manifest(model: PlatformModel) -> Manifest:
    admission = model.config.admission
    exempt = list(admission.exempt_namespaces)
    variables = _base_variables(model)
    validations = _base_validations(model)
    if admission.restrict_to_workload_namespaces:
        variables += _placement_variables(model)
        validations += _placement_validations(model)
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "matchPolicy": "Equivalent",
            "namespaceSelector": (
                {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": exempt}]} if exempt else {}
            ),
            "objectSelector": {},
            "resourceRules": [
                {
                    "apiGroups": [group],
                    "apiVersions": ["v1"],
                    "operations": list(OPERATIONS),
                    "resources": list(resources),
                    "scope": "Namespaced",
                }
                for group, resources in RESOURCE_RULES
            ],
        },
        "matchConditions": [
            {
                # Pod specs are almost immutable, and controllers update their objects all the time (status
                # aside: finalizers, labels, scale): re-judging an unchanged pod spec on UPDATE would block
                # them on objects created before the policy existed.
                "name": "created-or-pod-spec-changed",
                "expression": f"request.operation != 'UPDATE' || ({pod_spec_of('object')}) != ({pod_spec_of('oldObject')})",
            }
        ],
        "variables": variables,
        "validations": validations,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": dict(COMMON_LABELS)},
        "spec": spec,
    }


def binding_manifest(model: PlatformModel) -> Manifest:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": BINDING_NAME, "labels": dict(COMMON_LABELS)},
        "spec": {"policyName": POLICY_NAME, "validationActions": list(model.config.admission.validation_actions)},
    }


def render_policy(model: PlatformModel) -> list[Manifest]:
    """The policy and its binding, in that order; nothing when ``admission.enabled`` is false."""
    if not model.config.admission.enabled:
        return []
    return [policy_manifest(model), binding_manifest(model)]
