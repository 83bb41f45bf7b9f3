"""Evaluate rendered ValidatingAdmissionPolicies against Kubernetes objects, offline, the way the API server does.

For one request the API server, per binding: matches the resource against the policy's ``matchConstraints``
and the binding's ``matchResources`` (resource rules, ``excludeResourceRules``, ``namespaceSelector``,
``objectSelector``), runs the ``matchConditions`` (any false: the policy does not apply), then every
validation, reading ``variables`` lazily; a false validation fails with its ``messageExpression`` (or its
``message``), an error fails under ``failurePolicy: Fail``. Before admission it has decoded the object and
applied defaults; the few that matter here are repeated (null fields dropped, the namespace filled in, a Pod's
requests defaulted from its limits).
https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/

A violation counts as denied whatever the binding's ``validationActions``: ``Decision.actions`` says what the
cluster would actually do with it (``Warn``/``Audit``: admit with a warning or an audit annotation).
Pure: dicts in, decisions out; no files, no cluster, no Pulumi.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from aks_gpu.admission import chain, cost, kinds
from aks_gpu.admission.engine import CelError, Compiled, Engine, engine_named
from aks_gpu.admission.quantity import go_base64_canonical
from aks_gpu.admission.reader import GENERATED_SUFFIX
from aks_gpu.naming import NAMESPACE_NAME_LABEL

POLICY_KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
DEFAULT_NAMESPACE = "default"
# What ``aksgpu admission check`` says of each object (the JSON "decision").
ADMITTED, DENIED, REFUSED, NOT_EVALUATED = "admitted", "denied", "refused", "not evaluated"
CHECK_USER = "aksgpu-admission-check"

DEFAULT_API_VERSIONS = {"": "v1", "apps": "apps/v1", "batch": "batch/v1"}


class PolicyError(ValueError):
    """The manifests do not make a policy this evaluator can run (a binding without its policy, params...)."""


@dataclass(frozen=True)
class Decision:
    """What the API server would answer for one object (with ``Deny`` semantics)."""

    kind: str
    namespace: str
    name: str
    allowed: bool
    messages: tuple[str, ...] = ()
    # The validationActions of every binding whose policy applied to the object.
    actions: tuple[str, ...] = ()
    # Why no policy applied, when none did.
    note: str = ""
    # What the API server answers a denied request, verbatim: the first failing validation of the first binding
    # that denies (dispatcher.go, admission.NewForbidden). ``messages`` holds every failing rule.
    message: str = ""
    # The admission steps a real cluster runs that this decision did not evaluate.
    not_evaluated: tuple[str, ...] = ()
    # Per policy that applied, the runtime cost of its validations and the variables they read, as the API server
    # counts it against its budget; absent where the engine did not cost the evaluation (cel-cpp on a small object).
    costs: Mapping[str, int] = field(default_factory=dict, compare=False)
    # What the server admits but a reader should know (an object that replaces the platform's own, a workload in a
    # system namespace): aks_gpu.admission.platform_warnings.
    warnings: tuple[str, ...] = ()
    # REFUSED (before admission) or NOT_EVALUATED where the object never reached admission; "" for a decided one.
    verdict: str = ""
    # How a table names a decision that "admitted"/"denied" would misstate (admitted, its Pods denied); "" none.
    label: str = ""
    # Refused by a mutating admission plugin (PodNodeSelector, Priority, RuntimeClass): no validating step ran.
    mutating: bool = field(default=False, compare=False)

    @property
    def decision(self) -> str:
        """admitted, denied, refused (before admission: the object's own validation) or not evaluated."""
        return self.verdict or (ADMITTED if self.allowed else DENIED)

    @property
    def evaluated(self) -> bool:
        return self.decision in (ADMITTED, DENIED)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace or None,  # null: a cluster-scoped object
            "name": self.name,
            "decision": self.decision,
            # null where nothing was decided (not evaluated): neither admitted nor denied
            "allowed": self.allowed if self.decision != NOT_EVALUATED else None,
            "message": self.message,
            "messages": list(self.messages),
            "notEvaluated": list(self.not_evaluated),
            "warnings": list(self.warnings),
        }


# ---------------------------------------------------------------- compiled policies


@dataclass(frozen=True)
class _Validation:
    expression: Compiled
    message: str | None
    message_expression: Compiled | None


@dataclass(frozen=True)
class CompiledPolicy:
    name: str
    failure_policy: str
    match_constraints: Mapping[str, Any]
    match_conditions: tuple[tuple[str, Compiled], ...]
    variables: tuple[tuple[str, Compiled], ...]
    validations: tuple[_Validation, ...]
    engine: Engine
    manifest: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # The policy compiled for cel-python, which costs evaluations as the API server does (built on first need).
    _costed: list[CompiledPolicy] = field(default_factory=list, repr=False, compare=False)

    def costed(self) -> CompiledPolicy:
        """This policy on an engine that tracks the server's runtime cost (itself when the engine does)."""
        if self.engine.name == "cel-python":
            return self
        if not self._costed:
            self._costed.append(compile_policy(self.manifest, engine_named("cel-python")))
        return self._costed[0]


@dataclass(frozen=True)
class CompiledBinding:
    name: str
    policy: CompiledPolicy
    actions: tuple[str, ...]
    match_resources: Mapping[str, Any] | None


def compile_policy(manifest: Mapping[str, Any], engine: Engine | None = None) -> CompiledPolicy:
    """Compile every expression of a ValidatingAdmissionPolicy; ``CelError`` names the first that does not."""
    engine = engine or engine_named("auto")
    spec = manifest.get("spec") or {}
    names = tuple(str(v.get("name")) for v in spec.get("variables") or ())

    def compile_expression(source: str) -> Compiled:
        return engine.compile(source, names)

    name = str((manifest.get("metadata") or {}).get("name", ""))
    if spec.get("paramKind"):
        raise PolicyError(f"policy {name}: paramKind is not supported offline")
    validations = tuple(
        _Validation(
            expression=compile_expression(item["expression"]),
            message=item.get("message"),
            message_expression=compile_expression(item["messageExpression"]) if item.get("messageExpression") else None,
        )
        for item in spec.get("validations") or ()
    )
    return CompiledPolicy(
        name=name,
        failure_policy=str(spec.get("failurePolicy", "Fail")),
        match_constraints=spec.get("matchConstraints") or {},
        match_conditions=tuple((c["name"], compile_expression(c["expression"])) for c in spec.get("matchConditions") or ()),
        variables=tuple((v["name"], compile_expression(v["expression"])) for v in spec.get("variables") or ()),
        validations=validations,
        engine=engine,
        manifest=manifest,
    )


def compile_bindings(manifests: Iterable[Mapping[str, Any]], engine: Engine | None = None) -> list[CompiledBinding]:
    """The bindings among ``manifests``, each with its compiled policy (``engine``: see
    :func:`aks_gpu.admission.engine.engine_named`; cel-cpp where installed)."""
    manifests = list(manifests)
    engine = engine or engine_named("auto")
    policies = {str(m["metadata"]["name"]): compile_policy(m, engine) for m in manifests if m.get("kind") == POLICY_KIND}
    bindings = []
    for manifest in manifests:
        if manifest.get("kind") != BINDING_KIND:
            continue
        spec = manifest.get("spec") or {}
        name = str(manifest["metadata"]["name"])
        policy = policies.get(str(spec.get("policyName")))
        if policy is None:
            raise PolicyError(f"binding {name}: no policy named {spec.get('policyName')!r} among the manifests")
        if spec.get("paramRef"):
            raise PolicyError(f"binding {name}: paramRef is not supported offline")
        bindings.append(
            CompiledBinding(
                name=name,
                policy=policy,
                actions=tuple(spec.get("validationActions") or ()),
                match_resources=spec.get("matchResources"),
            )
        )
    return bindings


# ---------------------------------------------------------------- the request


@dataclass(frozen=True)
class Request:
    """An admission request for one object, after decoding and defaulting."""

    operation: str
    object: Mapping[str, Any]
    old_object: Mapping[str, Any] | None
    kind: str
    group: str
    version: str
    resource: str
    namespace: str  # "" for cluster-scoped objects
    name: str
    namespace_object: Mapping[str, Any] | None = field(default=None)
    subresource: str = ""
    # (username, groups) of who sends the request
    user: tuple[str, tuple[str, ...]] = (CHECK_USER, ("system:authenticated",))
    # A mutating admission plugin's refusal (the server's line): no policy runs.
    refusal: str = ""

    def to_cel(self) -> dict[str, Any]:
        """``request`` as admission policies read it (admission.k8s.io/v1 AdmissionRequest)."""
        kind = {"group": self.group, "version": self.version, "kind": self.kind}
        resource = {"group": self.group, "version": self.version, "resource": self.resource}
        return {
            "uid": "00000000-0000-0000-0000-000000000000",
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "subResource": self.subresource,
            "name": self.name,
            "namespace": self.namespace,
            "operation": self.operation,
            "userInfo": {"username": self.user[0], "groups": list(self.user[1])},
            "dryRun": False,
        }


def api_group_version(obj: Mapping[str, Any]) -> tuple[str, str]:
    kind = str(obj.get("kind", ""))
    api_version = obj.get("apiVersion") or DEFAULT_API_VERSIONS.get(kinds.default_group(kind), "v1")
    group, _, version = str(api_version).rpartition("/")
    return group, version


def namespaced(obj: Mapping[str, Any]) -> bool:
    """Whether the object's kind lives in a namespace (kubernetes_scopes.yaml; an unknown kind does)."""
    return kinds.kind_of(api_group_version(obj)[0], str(obj.get("kind", ""))).namespaced


def prepare(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as admission sees it after decoding: nulls dropped, dates as the strings JSON carries, resource
    quantities as the strings the API server serialises them to, the namespace filled in, a Pod's requests
    defaulted from its limits (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#requests-and-limits:
    "if you specify a limit for a resource, and do not specify any request, ... Kubernetes copies the limit")."""
    prepared: dict[str, Any] = _decoded(obj, "")
    kind = str(prepared.get("kind", ""))
    metadata = prepared.setdefault("metadata", {})
    if not namespaced(prepared):
        # rest.BeforeCreate clears a cluster-scoped object's namespace before validating admission reads it.
        metadata.pop("namespace", None)
    elif not metadata.get("namespace"):
        metadata["namespace"] = DEFAULT_NAMESPACE
    bytes_field = {"Secret": "data", "ConfigMap": "binaryData"}.get(kind)
    if bytes_field and isinstance(prepared.get(bytes_field), dict):
        # []byte: the server decoded the base64 (Go's encoding/base64, newlines skipped) and admission reads it
        # encoded again, canonically: "dm9p\nZA==" arrives as "dm9pZA==" (void).
        # Undecodable data is refused by the reader before admission; kept as written for callers without it.
        for key, value in prepared[bytes_field].items():
            with contextlib.suppress(ValueError):
                prepared[bytes_field][key] = go_base64_canonical(str(value))
    if kind == "Secret" and isinstance(prepared.get("stringData"), dict):
        # "stringData ... is merged into the data field on write, overwriting any existing values": admission
        # sees data only (https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/secret-v1/).
        data = prepared["data"] if isinstance(prepared.get("data"), dict) else {}
        for key, value in prepared.pop("stringData").items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        prepared["data"] = data
    if kind == "Pod":
        spec = prepared.get("spec") or {}
        for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
            resources = container.get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
                requests = resources.setdefault("requests", {})
                for resource, limit in resources["limits"].items():
                    requests.setdefault(resource, limit)
    return prepared


def quantity_text(value: Any) -> Any:
    """A quantity written as a YAML number, as the string the API server stores (``1`` -> ``"1"``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, int):
        return str(value)
    return format(value, "f").rstrip("0").rstrip(".") if value == value and abs(value) != float("inf") else repr(value)


def _decoded(value: Any, key: str) -> Any:
    if isinstance(value, Mapping):
        # A string stands as it is (most of a large object's values: no call for each).
        decoded: dict[str, Any] = {
            str(k): v if type(v) is str else _decoded(v, str(k)) for k, v in value.items() if v is not None
        }
        if key == "resources":
            for part in ("limits", "requests"):
                if isinstance(decoded.get(part), dict):
                    decoded[part] = {name: quantity_text(amount) for name, amount in decoded[part].items()}
        return decoded
    if isinstance(value, (list, tuple)):
        return [_decoded(item, key) for item in value if item is not None]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def namespace_for(name: str, namespaces: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The Namespace object of ``name``: the given one, else a bare namespace; either way with the name label
    the API server always sets."""
    known = copy.deepcopy(dict(namespaces.get(name) or {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
    metadata = known.setdefault("metadata", {})
    metadata.setdefault("name", name)
    metadata.setdefault("labels", {})[NAMESPACE_NAME_LABEL] = name
    return known


def build_request(
    obj: Mapping[str, Any],
    namespaces: Mapping[str, Mapping[str, Any]] | None = None,
    operation: str = "CREATE",
    old_object: Mapping[str, Any] | None = None,
    subresource: str = "",
    user: tuple[str, Sequence[str]] | None = None,
    classes: chain.ClusterClasses | None = None,
) -> Request:
    """The request for ``obj``'s CREATE (or ``operation``), after decoding and AKS's mutating plugins (``classes``:
    the PriorityClasses and RuntimeClasses a Pod may name, :func:`aks_gpu.admission.chain.cluster_classes`; none
    given: the system priority classes alone)."""
    prepared = prepare(obj)
    kind = str(prepared.get("kind", ""))
    group, version = api_group_version(prepared)
    served = kinds.kind_of(group, kind)
    resource = served.plural
    metadata = prepared.get("metadata") or {}
    namespace = str(metadata.get("namespace")) if served.namespaced else ""
    namespace_object = (
        (namespaces[namespace] if isinstance(namespaces, _NamespaceCache) else namespace_for(namespace, namespaces or {}))
        if namespace
        else None
    )
    refusal = ""
    if kind == "Pod" and group == "" and not subresource:
        # AKS's mutating plugins run before any validating policy (aks_gpu.admission.chain).
        spec = prepared.get("spec") or {}
        if operation == "CREATE":
            # The mutating plugins that refuse, in the server's order: PodNodeSelector, Priority, RuntimeClass.
            refused = chain.SELECTOR_CONFLICT if chain.selector_conflict(spec, namespace_object) else None
            refused = refused or chain.admit_refusal(spec, classes or chain.cluster_classes(()))
            if refused is not None:
                # Mutating admission refuses before the name is generated: a generateName Pod's line names none.
                name = str(metadata.get("name") or "")
                refusal = (f'pods "{name}" is forbidden: ' if name else "pods is forbidden: ") + refused
        if not refusal:
            prepared = chain.mutate_pod(prepared, namespace_object, operation)
            if operation == "CREATE" and classes is not None:
                prepared = dict(chain.with_runtime_overhead(prepared, classes))
    generate = metadata.get("generateName")
    if operation == "CREATE" and not refusal and not metadata.get("name") and isinstance(generate, str) and generate:
        # The registry names the object after mutating admission and before validating admission (Store.create:
        # SetName(GenerateName(generateName)), then BeforeCreate, then createValidation): the policies read a name,
        # and the denial names the object. The server adds 5 random characters; offline they are GENERATED_SUFFIX.
        # The request's own name stays empty, as the server's admission attributes have it.
        prepared = {**prepared, "metadata": {**(prepared.get("metadata") or {}), "name": generate + GENERATED_SUFFIX}}
    return Request(
        refusal=refusal,
        operation=operation,
        object=prepared,
        old_object=prepare(old_object) if old_object is not None else None,
        kind=kind,
        group=group,
        version=version,
        resource=resource,
        namespace=namespace,
        name=str(metadata.get("name") or ""),
        namespace_object=namespace_object,
        subresource=subresource,
        user=(user[0], tuple(user[1])) if user is not None else (CHECK_USER, ("system:authenticated",)),
    )


# ---------------------------------------------------------------- matching


def _rule_matches(rule: Mapping[str, Any], request: Request, equivalent: bool) -> bool:
    def has(values: Any, wanted: str) -> bool:
        return "*" in (values or ()) or wanted in (values or ())

    scope = rule.get("scope", "*")
    namespaced = bool(request.namespace)
    return (
        has(rule.get("operations"), request.operation)
        and has(rule.get("apiGroups"), request.group)
        # Equivalent: the server converts a request for another version of the same resource and matches it.
        and (equivalent or has(rule.get("apiVersions"), request.version))
        and _resource_matches(rule.get("resources") or (), request)
        and (scope == "*" or (scope == "Namespaced") == namespaced)
    )


def _resource_matches(resources: Sequence[str], request: Request) -> bool:
    """``pods`` matches the resource itself, ``pods/exec`` one subresource, ``pods/*`` every subresource, ``*`` every
    resource, ``*/*`` everything (NamedRuleWithOperations.resources)."""
    if request.subresource:
        wanted = f"{request.resource}/{request.subresource}"
        return any(r in (wanted, f"{request.resource}/*", "*/*", f"*/{request.subresource}") for r in resources)
    return any(r in (request.resource, "*", "*/*") for r in resources)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against a set of labels; an empty (or absent) selector matches everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or ()
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (((obj or {}).get("metadata") or {}).get("labels") or {}).items()}


def mismatch(constraints: Mapping[str, Any], request: Request, rules_required: bool) -> str | None:
    """Why ``matchConstraints`` of a policy (``rules_required``) or ``matchResources`` of a binding do not
    match the request; None when they do."""
    equivalent = constraints.get("matchPolicy", "Equivalent") == "Equivalent"
    rules = constraints.get("resourceRules")
    what = f"{request.resource}" + (f".{request.group}" if request.group else "")
    if rules is None and rules_required:
        return "the policy has no resourceRules"
    if rules is not None and not any(_rule_matches(rule, request, equivalent) for rule in rules):
        return f"{what} ({request.operation}) is not a resource the policy checks"
    if any(_rule_matches(rule, request, equivalent) for rule in constraints.get("excludeResourceRules") or ()):
        return f"{what} is excluded by excludeResourceRules"
    if request.namespace:
        namespace_labels = _labels(request.namespace_object)
    elif request.kind == "Namespace":
        namespace_labels = _labels(request.object)  # a Namespace is matched on its own labels
    else:
        namespace_labels = None  # other cluster-scoped objects are never excluded by a namespaceSelector
    if namespace_labels is not None and not selector_matches(constraints.get("namespaceSelector"), namespace_labels):
        return f"namespace {request.namespace} is outside the policy's namespaceSelector (exempt)"
    object_selector = constraints.get("objectSelector")
    if selector_matches(object_selector, _labels(request.object)) or (
        request.old_object is not None and selector_matches(object_selector, _labels(request.old_object))
    ):
        return None
    return "the object's labels are outside the objectSelector"


# ---------------------------------------------------------------- evaluation


@dataclass
class _Outcome:
    applied: bool
    messages: list[str]
    skipped_because: str = ""
    cost: int | None = None


# cel-cpp's own limit (10,000 comprehension iterations) is not the API server's: an evaluation it stops is decided
# again by the cost model, never by that error.
CEL_CPP_BUDGET_ERROR = "iteration budget exceeded"
# Objects up to this size (JSON values, and characters of strings) cannot bring the policies' expressions near the
# per-call limit (docs/admission.md, "Runtime cost"), so cel-cpp decides them alone; larger ones are also evaluated
# on cel-python, which costs them as the API server does, and that evaluation decides.
COSTED_ABOVE_VALUES = 256
COSTED_ABOVE_CHARACTERS = 16_384


def object_size(value: Any, most_values: float = math.inf, most_characters: float = math.inf) -> tuple[int, int]:
    """(JSON values, characters in strings and keys) of plain data; counted only until one passes its ``most_``
    (then at least that much)."""
    values, characters = 1, 0
    stack = [value]
    while stack and values <= most_values and characters <= most_characters:
        item = stack.pop()
        if isinstance(item, Mapping):
            values += len(item)
            characters += sum(len(str(key)) for key in item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            values += len(item)
            stack.extend(item)
        elif isinstance(item, str):
            characters += len(item)
    return values, characters


def _needs_cost_model(request: Request) -> bool:
    values, characters = object_size([request.object, request.old_object], COSTED_ABOVE_VALUES, COSTED_ABOVE_CHARACTERS)
    return values > COSTED_ABOVE_VALUES or characters > COSTED_ABOVE_CHARACTERS


def _run_binding(binding: CompiledBinding, request: Request, large: Callable[[], bool]) -> _Outcome:
    policy = binding.policy
    reason = mismatch(policy.match_constraints, request, rules_required=True)
    if reason is None and binding.match_resources is not None:
        reason = mismatch(binding.match_resources, request, rules_required=False)
    if reason is not None:
        return _Outcome(False, [], reason)
    if policy.engine.name != "cel-python" and large():
        return _evaluate(policy.costed(), request)
    outcome = _evaluate(policy, request)
    if outcome.cost is None and any(CEL_CPP_BUDGET_ERROR in message.lower() for message in outcome.messages):
        return _evaluate(policy.costed(), request)
    return outcome


def _evaluate(policy: CompiledPolicy, request: Request) -> _Outcome:
    base: dict[str, Any] = {
        "object": request.object,
        "oldObject": request.old_object,
        "request": request.to_cel(),
        "namespaceObject": request.namespace_object,
        "params": None,
    }
    fail = policy.failure_policy == "Fail"
    try:
        bound = policy.engine.bind(base, policy.variables)
    except CelError as error:
        return _Outcome(True, [f"the request cannot be evaluated: {error.reason}"] if fail else [])
    run = bound.run

    condition_errors = []
    for name, condition in policy.match_conditions:
        try:
            result = run(condition)
        except CelError as error:
            condition_errors.append(f"expression '{condition.source}' resulted in error: {error.reason}")
            continue
        if result is not True:
            # A false condition (or a non-bool) means the policy does not apply.
            return _Outcome(False, [], f"match condition {name!r} is false")
    if condition_errors:
        # matchconditions/matcher.go: one error as it is, several as a bracketed list.
        joined = condition_errors[0] if len(condition_errors) == 1 else "[" + ", ".join(condition_errors) + "]"
        return _Outcome(True, [joined] if fail else [])

    # The validations' cost, variables included; matchConditions have their own budget (matcher.go).
    baseline = getattr(bound, "cost", None)

    def spent() -> int | None:
        total = getattr(bound, "cost", None)
        return None if total is None or baseline is None else total - baseline

    messages: list[str | _Validation] = []  # an error's message, or a validation that failed (message below)
    for validation in policy.validations:
        try:
            result = run(validation.expression)
        except CelError as error:
            if _out_of_budget(spent()):
                return _Outcome(True, [cost.OUT_OF_BUDGET_MESSAGE] if fail else [], cost=spent())
            if fail:
                messages.append(f"expression '{validation.expression.source}' resulted in error: {error.reason}")
            continue
        if _out_of_budget(spent()):
            # condition.go: the binding's validations share one budget; past it the policy fails as a whole.
            return _Outcome(True, [cost.OUT_OF_BUDGET_MESSAGE] if fail else [], cost=spent())
        if not isinstance(result, bool):
            if fail:
                messages.append(f"expression '{validation.expression.source}' must evaluate to bool")
            continue
        if not result:
            messages.append(validation)
    validations_cost = spent()
    # Message expressions run after every validation, on what is left of the budget (validator.go); their cost is
    # not the validations'.
    return _Outcome(
        True,
        [item if isinstance(item, str) else _failure_message(item, run) for item in messages],
        cost=validations_cost,
    )


def _out_of_budget(spent: int | None) -> bool:
    return spent is not None and spent > cost.RUNTIME_BUDGET


# celconfig.MaxEvaluatedMessageExpressionSizeBytes (k8s.io/apiserver pkg/apis/cel/config.go): a longer
# messageExpression result is dropped for the static message.
MAX_MESSAGE_EXPRESSION_BYTES = 5 * 1024


def _failure_message(validation: _Validation, run: Callable[[Any], Any]) -> str:
    # An error, a non-string, a blank, a multi-line or an over-long messageExpression result falls back to message,
    # then to a default that names the expression, trimmed as the API server trims them (validator.go).
    if validation.message_expression is not None:
        try:
            text = run(validation.message_expression)
        except CelError:
            text = None
        if isinstance(text, str):
            text = text.strip()
            if text and "\n" not in text and len(text.encode()) <= MAX_MESSAGE_EXPRESSION_BYTES:
                return text
    if validation.message and validation.message.strip():
        return validation.message.strip()
    return f"failed expression: {validation.expression.source.strip()}"


def server_message(request: Request, policy: str, binding: str, message: str) -> str:
    """The line the API server answers a denied request with: admission.NewForbidden around the dispatcher's
    error (k8s.io/apiserver pkg/admission/plugin/policy/validating/dispatcher.go; apierrors.NewForbidden names the
    resource as resource.group and quotes the object's name)."""
    resource = request.resource + (f".{request.group}" if request.group else "")  # a subresource is not named
    denial = f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}"
    name = str((request.object.get("metadata") or {}).get("name") or "")
    return f'{resource} "{name}" is forbidden: {denial}' if name else f"{resource} is forbidden: {denial}"


def shown_name(request: Request) -> str:
    """The object's name as the server's answer names it: its own, or the one generated from generateName (its
    generateName where it was refused before the name was generated)."""
    metadata = request.object.get("metadata") or {}
    return str(metadata.get("name") or metadata.get("generateName") or request.name)


def evaluate_request(request: Request, bindings: Sequence[CompiledBinding]) -> Decision:
    if request.refusal:
        refused = request.refusal.split(" is forbidden: ", 1)[-1]
        return Decision(
            request.kind, request.namespace, shown_name(request), False, (refused,), message=request.refusal, mutating=True
        )
    messages: list[str] = []
    actions: list[str] = []
    skipped: list[str] = []
    applied = False
    first = ""
    costs: dict[str, int] = {}
    sized: list[bool] = []

    def large() -> bool:  # measured once per request, and only when an engine without the cost model asks
        if not sized:
            sized.append(_needs_cost_model(request))
        return sized[0]

    for binding in bindings:
        outcome = _run_binding(binding, request, large)
        if outcome.cost is not None:
            costs[binding.policy.name] = outcome.cost
        if outcome.applied:
            applied = True
            actions += [a for a in binding.actions if a not in actions]
            messages += outcome.messages
            if outcome.messages and not first:
                first = server_message(request, binding.policy.name, binding.name, outcome.messages[0])
        else:
            skipped.append(f"{binding.policy.name}: {outcome.skipped_because}")
    note = ""
    if not applied:
        note = "; ".join(skipped) if skipped else "no admission policy in this stack"
    return Decision(
        kind=request.kind,
        namespace=request.namespace,
        name=shown_name(request),
        allowed=not messages,
        messages=tuple(messages),
        actions=tuple(actions),
        note=note,
        message=first,
        costs=costs,
    )


def evaluate(
    objects: Iterable[Mapping[str, Any]],
    manifests: Iterable[Mapping[str, Any]],
    namespaces: Mapping[str, Mapping[str, Any]] | None = None,
    engine: Engine | None = None,
    classes: chain.ClusterClasses | None = None,
) -> list[Decision]:
    """One decision per object, as the API server would decide its CREATE under the policies and bindings
    in ``manifests`` (what ``render_policy`` returns). ``namespaces`` are the Namespace objects by name that
    the policies may read (``namespaceObject``); others are bare namespaces. ``classes``: see :func:`build_request`."""
    judge = Judge(manifests, namespaces, engine, classes)
    return [judge(obj) for obj in objects]


class Judge:
    """:func:`evaluate` one object at a time: the policies compiled once, each object decided when asked for."""

    def __init__(
        self,
        manifests: Iterable[Mapping[str, Any]],
        namespaces: Mapping[str, Mapping[str, Any]] | None = None,
        engine: Engine | None = None,
        classes: chain.ClusterClasses | None = None,
    ) -> None:
        self.bindings = compile_bindings(manifests, engine)
        self.namespaces = _NamespaceCache(namespaces or {})
        self.classes = classes

    def __call__(self, obj: Mapping[str, Any] | Request) -> Decision:
        """The decision for an object, or for a request already built (one object judged by two sets of policies)."""
        return evaluate_request(obj if isinstance(obj, Request) else self.request(obj), self.bindings)

    def request(self, obj: Mapping[str, Any]) -> Request:
        return build_request(obj, self.namespaces, classes=self.classes)


class _NamespaceCache(dict[str, Mapping[str, Any]]):
    """The namespaces by name, each built once (``namespace_for``) however many objects live in it."""

    def __init__(self, given: Mapping[str, Mapping[str, Any]]) -> None:
        super().__init__()
        self._given = given

    def __missing__(self, name: str) -> Mapping[str, Any]:
        built = namespace_for(name, self._given)
        self[name] = built
        return built
