"""The rest of admission a GPU pod meets in a workload namespace: the stack's ResourceQuota and the namespace's
Pod Security level. Pure: the model and an object in, refusals and the steps left unevaluated out.

A user reads "admitted" as "the cluster will take it". After the validating admission policies the API server
runs the ResourceQuota admission plugin (a Pod whose requests exceed the namespace's ``hard`` is refused:
``exceeded quota``) and Pod Security admission (the namespace's ``pod-security.kubernetes.io/enforce`` level).
Both judge Pods only: a Deployment or Job is created, and its pods are then refused, so for a template the
refusal is reported for the pods it would create.

- Quota: each workload namespace's ResourceQuota (``aks_gpu.kube.workload_manifests.quota_hard``: ``requests.<resource>:
  gpuQuota`` on the resource its pools expose, ``0`` on every other GPU resource of the stack, and the
  ``workloads[].quota`` keys ``requests.cpu``, ``requests.memory``, ``pods``; ``namespace_facts`` hands them here).
  Every key the pod evaluator charges is compared: a pod's usage is what k8s.io/kubernetes
  pkg/quota/v1/evaluator/core/pods.go counts, per resource the sum of its containers' requests (a limit stands for a
  missing request, then the LimitRange's defaultRequest, as the LimitRanger plugin sets it) or the largest init
  container's, whichever is larger, plus the pod overhead. Offline, the namespace is taken as otherwise empty
  (used = 0: nothing runs yet): a pod refused here is refused on any cluster, one admitted here may still exceed
  what other pods left. Each Pod is judged alone, as the server judges it when a controller creates it. Its second
  ResourceQuota (``pods: 0`` scoped to the system priority classes) refuses a pod at one of them.
- Nodes: a pod asking more cpu, memory, ephemeral-storage or GPUs than any node of the pools its namespace may use
  offers (the nodes' allocatable, ``aks_facts.node_resources``, as ``aksgpu local``'s nodes show it) is admitted and
  stays Pending: no policy refuses it, and the scheduler answers ``Insufficient <resource>`` for ever.
  (:func:`unschedulable`; its requests as the scheduler counts them, k8s.io/component-helpers resource.PodRequests).
- Pod Security: the ``baseline`` controls are evaluated (the same CEL as the RDMA namespaces' policy,
  :mod:`aks_gpu.admission.pod_security`, without IPC_LOCK); ``restricted`` is named as not evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from aks_gpu.admission.chain import ClusterClasses, cluster_classes, validate_refusal, with_runtime_overhead
from aks_gpu.admission.evaluate import Decision
from aks_gpu.admission.quantity import Quantity
from aks_gpu.admission.reader import POD_SPEC_PATHS, builtin_kind, is_extended_resource
from aks_gpu.naming import KUEUE_QUEUE_LABEL, PRIORITY_QUOTA_NAME, QUOTA_NAME, SYSTEM_PRIORITY_CLASSES

QUOTA_PREFIX = "requests."
LIMITS_PREFIX = "limits."
# The keys the pod evaluator charges (k8s.io/kubernetes pkg/quota/v1/evaluator/core/pods.go, podResources and
# podComputeUsageHelper); any other key of the quota (requests.storage, persistentvolumeclaims) counts other objects.
STANDARD_KEYS = frozenset(
    {"pods", "count/pods", "cpu", "memory", "ephemeral-storage"}
    | {f"{prefix}{name}" for prefix in (QUOTA_PREFIX, LIMITS_PREFIX) for name in ("cpu", "memory", "ephemeral-storage")}
)
# pods.go's validationSet: a quota on one of these makes every container state it ("must specify").
VALIDATION_KEYS = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
COMPUTE = ("cpu", "memory", "ephemeral-storage")


@dataclass(frozen=True)
class PoolNodes:
    """One pool a namespace's Pods may land on: its VM size and what one of its nodes offers pods (``status.allocatable``;
    no cpu or memory figure where the size has none recorded)."""

    name: str
    vm_size: str
    allocatable: Mapping[str, str]


@dataclass(frozen=True)
class QueueFacts:
    """Where Kueue queues a workload namespace's Jobs (aks-gpu:queueing, components/aks_gpu/kube/kueue.py)."""

    local_queues: tuple[str, ...]  # the LocalQueues the stack creates in it
    # The most GPUs Kueue can ever admit for it at once: its gpuQuota plus what it may borrow from its cohort.
    most_gpus: int


@dataclass(frozen=True)
class NamespaceFacts:
    """What the stack puts on one workload namespace that admission reads."""

    name: str
    pod_security: str  # the enforce level: baseline, restricted or privileged (RDMA namespaces)
    gpu_quota: Mapping[str, str]  # requests.<resource> -> hard, the GPU keys of its ResourceQuota
    exposes: str  # the GPU resource its pools expose ("" when none)
    # The whole spec.hard of its ResourceQuota (the GPU keys too); empty: gpu_quota alone.
    quota: Mapping[str, str] = field(default_factory=dict)
    # Its LimitRange's defaultRequest per container (cpu, memory): what the LimitRanger plugin sets before quota.
    default_requests: Mapping[str, str] = field(default_factory=dict)
    # The Pod Security level it warns at (pod-security.kubernetes.io/warn), which workload objects meet too; "" none.
    warn_level: str = ""
    # The pools its Pods may land on (its GPU pools and the CPU pools), each with a node's allocatable; empty: the
    # nodes are not known, and no pod's fit is judged.
    pools: tuple[PoolNodes, ...] = ()
    # Its Kueue queue, where the stack queues GPU Jobs; None: static quota alone.
    queue: QueueFacts | None = None

    def hard(self) -> Mapping[str, str]:
        return self.quota or self.gpu_quota


def pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if not builtin_kind(obj):
        return None
    spec: Any = obj
    for step in POD_SPEC_PATHS.get(str(obj.get("kind", "")), ()):
        spec = spec.get(step) if isinstance(spec, Mapping) else None
    return spec if isinstance(spec, Mapping) and str(obj.get("kind", "")) in POD_SPEC_PATHS else None


@dataclass(frozen=True)
class Amount:
    """A quantity being added up: its exact value and the text format Go's Quantity keeps (that of the first
    quantity of a sum), for the message."""

    value: Fraction
    binary: bool

    @classmethod
    def of(cls, text: str) -> Amount:
        quantity = Quantity.parse(text)
        return cls(quantity.value, text.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")))

    def plus(self, other: Amount) -> Amount:
        return Amount(self.value + other.value, self.binary)

    def times(self, count: int) -> Amount:
        return Amount(self.value * count, self.binary)


def canonical(amount: Amount) -> str:
    """Quantity.String() as the server prints it: a binary-SI value as the largest exact power of 1024 (1124Gi), a
    decimal one as the largest exact power of 1000 (125, 1500m, 128k); a fraction finer than 1n rounds up."""
    value = amount.value
    if amount.binary and value.denominator == 1 and abs(value) >= 1024:
        for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value % factor == 0:
                return f"{value // factor}{suffix}"
        return str(value)
    nanos = -((-value * 10**9) // 1)  # ceiling to nanounits, as the server rounds up
    if nanos == 0:
        return "0"
    for suffix, exponent in (("E", 27), ("P", 24), ("T", 21), ("G", 18), ("M", 15), ("k", 12), ("", 9), ("m", 6), ("u", 3)):
        if nanos % 10**exponent == 0:
            return f"{nanos // 10**exponent}{suffix}"
    return f"{nanos}n"


def _container(container: Mapping[str, Any], defaults: Mapping[str, str]) -> tuple[dict[str, Amount], dict[str, Amount]]:
    """A container's requests and limits as quota reads them: the API's defaulting copies a limit to a missing
    request, then the LimitRanger plugin sets the LimitRange's defaultRequest on a request still missing."""
    resources = container.get("resources") or {}
    limits = {str(name): Amount.of(str(value)) for name, value in (resources.get("limits") or {}).items()}
    requests = {**limits, **{str(name): Amount.of(str(value)) for name, value in (resources.get("requests") or {}).items()}}
    for name, value in defaults.items():
        if name not in requests:
            requests[name] = Amount.of(value)
    return requests, limits


def _add(total: dict[str, Amount], more: Mapping[str, Amount]) -> dict[str, Amount]:
    out = dict(total)
    for name, value in more.items():
        out[name] = out[name].plus(value) if name in out else value
    return out


def _max(total: dict[str, Amount], other: Mapping[str, Amount]) -> dict[str, Amount]:
    out = dict(total)
    for name, value in other.items():
        if name not in out or value.value > out[name].value:
            out[name] = value
    return out


def _effective(spec: Mapping[str, Any], which: int, defaults: Mapping[str, str]) -> dict[str, Amount]:
    """The pod's requests (which=0) or limits (which=1) as k8s.io/component-helpers resource.PodRequests counts
    them: the sum of its containers and sidecars (restartable init containers), or the largest init container plus
    the sidecars started before it, whichever is larger per resource; then the pod overhead."""
    total: dict[str, Amount] = {}
    for container in spec.get("containers") or ():
        total = _add(total, _container(container, defaults)[which])
    sidecars: dict[str, Amount] = {}
    largest_init: dict[str, Amount] = {}
    for container in spec.get("initContainers") or ():
        amounts = _container(container, defaults)[which]
        if container.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, amounts)
            largest_init = _max(largest_init, sidecars)
        else:
            largest_init = _max(largest_init, _add(sidecars, amounts))
    total = _max(_add(total, sidecars), largest_init)
    overhead = {str(name): Amount.of(str(value)) for name, value in (spec.get("overhead") or {}).items()}
    if which == 1:  # PodLimits adds the overhead to the limits that are set only
        overhead = {name: value for name, value in overhead.items() if name in total}
    return _add(total, overhead)


def pod_usage(spec: Mapping[str, Any], defaults: Mapping[str, str] | None = None) -> dict[str, Amount]:
    """What the quota evaluator charges one pod, per quota key (pods.go, podComputeUsageHelper)."""
    defaults = defaults or {}
    requests, limits = _effective(spec, 0, defaults), _effective(spec, 1, defaults)
    one = Amount(Fraction(1), False)
    usage: dict[str, Amount] = {"pods": one, "count/pods": one}
    for name in COMPUTE:
        if name in requests:
            usage[name] = usage[f"{QUOTA_PREFIX}{name}"] = requests[name]
        if name in limits:
            usage[f"{LIMITS_PREFIX}{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"{QUOTA_PREFIX}{name}"] = value
        elif is_extended_resource(name):
            usage[f"{QUOTA_PREFIX}{name}"] = value
    return usage


def evaluated_key(key: str) -> bool:
    """Whether the pod evaluator charges this quota key (every other key counts other objects)."""
    if key in STANDARD_KEYS:
        return True
    name = key.removeprefix(QUOTA_PREFIX)
    return name.startswith("hugepages-") or (key.startswith(QUOTA_PREFIX) and is_extended_resource(name))


def _missing(spec: Mapping[str, Any], hard: Mapping[str, str], defaults: Mapping[str, str]) -> list[str]:
    """pods.go Constraints: a cpu or memory key of the quota every container and init container must state."""
    required = VALIDATION_KEYS & set(hard)
    missing: set[str] = set()
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        requests, limits = _container(container, defaults)
        states = {key for name in requests for key in (name, f"{QUOTA_PREFIX}{name}")}
        states |= {f"{LIMITS_PREFIX}{name}" for name in limits}
        missing |= required - states
    return sorted(missing)


def quota_refusal(obj: Mapping[str, Any], facts: NamespaceFacts) -> str | None:
    """The ResourceQuota admission plugin's refusal of the pod (or of each pod a template creates) in an otherwise
    empty namespace (used = 0 on every key: offline nothing runs yet), with the resource the namespace's pools
    expose; None when the quota holds it. Every key the pod evaluator charges is compared, GPU, cpu, memory and
    pods alike (plugin/pkg/admission/resourcequota/controller.go, checkRequest)."""
    spec = pod_spec(obj)
    if spec is None:
        return None
    hard = facts.hard()
    missing = _missing(spec, hard, facts.default_requests)
    usage = pod_usage(spec, facts.default_requests)
    over = []
    for key, limit in sorted(hard.items()):
        requested = usage.get(key)
        if requested is not None and evaluated_key(key) and requested.value > Quantity.parse(limit).value:
            over.append((key, requested, Amount.of(limit)))
    if missing:
        reason = f"failed quota: {QUOTA_NAME}: must specify {','.join(missing)}"
    elif over:
        requested_text = ",".join(f"{key}={canonical(amount)}" for key, amount, _ in over)
        used_text = ",".join(f"{key}=0" for key, _, _ in over)
        limited_text = ",".join(f"{key}={canonical(limit)}" for key, _, limit in over)
        reason = f"exceeded quota: {QUOTA_NAME}, requested: {requested_text}, used: {used_text}, limited: {limited_text}"
    elif spec.get("priorityClassName") in SYSTEM_PRIORITY_CLASSES:
        # The namespace's second quota (workload_manifests.priority_quota_manifest), checked after gpu-quota by name.
        reason = f"exceeded quota: {PRIORITY_QUOTA_NAME}, requested: pods=1, used: pods=0, limited: pods=0"
    else:
        return None
    name = str((obj.get("metadata") or {}).get("name") or "")
    line = f'pods "{name}" is forbidden: {reason}'
    if obj.get("kind") != "Pod":
        line = f"the pods it creates would be refused: {reason}"
    elsewhere = [key for key, _, _ in over if key in facts.gpu_quota and key.removeprefix(QUOTA_PREFIX) != facts.exposes]
    if missing or not elsewhere:
        return line
    if facts.exposes:
        return f"{line}; namespace {facts.name}'s pools expose {facts.exposes}: ask for that resource instead"
    return f"{line}; no pool of the stack serves namespace {facts.name}"


def unschedulable(obj: Mapping[str, Any], facts: NamespaceFacts | None, who: str = "the pod") -> str | None:
    """Why the pod (``who``: how the line names it) fits no node of the pools its namespace may use, or None. Judged:
    cpu, memory and ephemeral-storage (a pool whose size has no figure for one takes any amount of it) and the GPU
    resources the pools offer (a pool without the one asked has none); requests as the scheduler counts them (the
    largest init container or the containers' sum, plus overhead; a limit stands for a missing request, then the
    LimitRange's default)."""
    spec = pod_spec(obj)
    if spec is None or facts is None or not facts.pools:
        return None
    offered = {name for pool in facts.pools for name in pool.allocatable if name not in COMPUTE and name != "pods"}
    requests = _effective(spec, 0, facts.default_requests)
    asked = {name: amount for name, amount in requests.items() if name in {*COMPUTE, *offered} and amount.value > 0}

    def short(pool: PoolNodes) -> dict[str, str]:
        """The resources asked that one node of the pool has too little of, each with what it has."""
        over = {}
        for name, amount in asked.items():
            has = pool.allocatable.get(name)
            if has is None and name not in COMPUTE:
                over[name] = f"no {name}"
            elif has is not None and amount.value > Quantity.parse(has).value:
                over[name] = f"{name} {canonical(Amount.of(has))}"
        return over

    shortfalls = [(pool, short(pool)) for pool in facts.pools]
    if not asked or any(not over for _, over in shortfalls):
        return None
    missing = sorted({name for _, over in shortfalls for name in over})
    verb = "asks" if who == "the pod" else "ask"
    nodes = "; ".join(f"{pool.name} ({pool.vm_size}): {', '.join(over.values())}" for pool, over in shortfalls)
    return (
        f"{who} {verb} {', '.join(f'{name} {canonical(amount)}' for name, amount in asked.items())}: more than any node of "
        f"the pools namespace {facts.name} may use offers ({nodes} allocatable), so no node could ever run it and it "
        f"would stay Pending (the scheduler: Insufficient {', '.join(missing)}). Ask for less, or add a pool of a larger "
        "VM size"
    )


def replicas_step(obj: Mapping[str, Any], pod: Mapping[str, Any], facts: NamespaceFacts | None) -> str | None:
    """Quota admission judges each Pod as a controller creates it, so a Deployment whose one Pod fits is stored and
    its first Pods run; the step says when its replicas (a Job's parallelism) together exceed the quota, so that
    the later Pods would be refused, which this check does not decide for them."""
    spec = (obj.get("spec") or {}) if isinstance(obj.get("spec"), Mapping) else {}
    count = spec.get("parallelism") if obj.get("kind") == "Job" else spec.get("replicas")
    pod_spec_of = pod_spec(pod)
    if facts is None or pod_spec_of is None or not isinstance(count, int) or isinstance(count, bool) or count < 2:
        return None
    usage = pod_usage(pod_spec_of, facts.default_requests)
    over = [
        f"{key}={canonical(usage[key].times(count))} of {canonical(Amount.of(limit))}"
        for key, limit in sorted(facts.hard().items())
        if key in usage and evaluated_key(key) and usage[key].value * count > Quantity.parse(limit).value
    ]
    if not over:
        return None
    return (
        f"ResourceQuota over all {count} Pods together (each is judged alone, as it is created; together they ask "
        f"{', '.join(over)}: the Pods created once the quota is used up would be refused)"
    )


def not_evaluated(facts: NamespaceFacts | None, system: str | None = None) -> list[str]:
    """The admission steps this check does not evaluate for an object in that namespace (``system``: what a system
    namespace the policies leave out is, in words, when it is one)."""
    steps = ["other admission webhooks and policies of the cluster"]
    if facts is None:
        where = f"namespace {system}" if system else "a namespace the stack does not create (no workload namespace)"
        steps.insert(0, f"Pod Security and ResourceQuota of {where}")
        return steps
    if facts.pod_security == "restricted":
        steps.insert(0, "Pod Security restricted (only baseline is evaluated offline)")
    steps.insert(0, "ResourceQuota usage by other pods (the namespace is taken as empty: used = 0)")
    others = sorted(key for key in facts.hard() if not evaluated_key(key))
    if others:
        steps.insert(1, f"ResourceQuota's {', '.join(others)} (they count other objects than Pods)")
    if not facts.quota:
        steps.insert(1, "ResourceQuota's keys other than its GPU keys (the stack's quota was not given)")
    return steps


def complete(
    decision: Decision,
    obj: Mapping[str, Any],
    facts: NamespaceFacts | None,
    baseline: Decision | None,
    system: str | None = None,
    classes: ClusterClasses | None = None,
) -> Decision:
    """The policies' decision with the rest of the validating chain, in the server's order (pkg/kubeapiserver/
    options/plugins.go AllOrderedPlugins): the namespace's Pod Security (``baseline``: the baseline controls'
    decision for the object, when the namespace enforces baseline), RuntimeClass's check of the Pod's overhead
    (``classes``), then the policies, then the quota; and the steps left unevaluated (``system``:
    :func:`not_evaluated`). A Pod a mutating plugin refused meets none of them."""
    spec = pod_spec(obj)
    steps = tuple(not_evaluated(facts, system)) if spec is not None else ()
    if decision.mutating:
        return replace(decision, not_evaluated=steps)
    name = str((obj.get("metadata") or {}).get("name") or "")
    template = obj.get("kind") != "Pod"
    ahead: list[str] = []  # the validating plugins that run before ValidatingAdmissionPolicy
    if facts is not None and baseline is not None and not baseline.allowed and spec is not None:
        # The server's own detail reads "non-default capabilities (container ... must not include ...)": the
        # wording after the prefix is this check's (pod_security.py), not the server's.
        detail = "; ".join(baseline.messages)
        ahead.append(f'violates PodSecurity "baseline:latest": {detail}')
    overhead = validate_refusal(spec, classes or cluster_classes(())) if spec is not None and not template else None
    if overhead is not None:
        ahead.append(overhead)
    prefix = "the pods it creates would be refused: " if template else f'pods "{name}" is forbidden: '
    lines = [prefix + line for line in ahead]
    messages, first = [*lines, *decision.messages], (lines[0] if lines else decision.message)
    counted = with_runtime_overhead(obj, classes) if classes is not None and not template else obj
    refused = quota_refusal(counted, facts) if facts is not None else None
    if refused is not None:
        messages.append(refused)
        first = first or refused
    return replace(decision, allowed=not messages, messages=tuple(messages), message=first, not_evaluated=steps)


def never_admitted(obj: Mapping[str, Any], pod: Mapping[str, Any], facts: NamespaceFacts | None) -> str | None:
    """Why Kueue would hold a Job suspended forever in a queued namespace: it names a LocalQueue the namespace does
    not have, or all its Pods together ask more GPUs than its queue can ever admit (gpuQuota plus what it may
    borrow); None otherwise, or where the namespace is not queued."""
    if facts is None or facts.queue is None or obj.get("kind") != "Job":
        return None
    queue = facts.queue
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    labels = (metadata or {}).get("labels")
    named = labels.get(KUEUE_QUEUE_LABEL) if isinstance(labels, Mapping) else None
    if isinstance(named, str) and named not in queue.local_queues:
        return (
            f"the Job names the LocalQueue {named} ({KUEUE_QUEUE_LABEL}), which namespace {facts.name} does not have "
            f"(its queue: {', '.join(queue.local_queues)}): Kueue would keep it suspended forever; drop the label or "
            "name that queue"
        )
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    count = (spec or {}).get("parallelism", 1)
    pod_spec_of = pod_spec(pod)
    if pod_spec_of is None or not isinstance(count, int) or isinstance(count, bool) or not facts.exposes:
        return None
    usage = pod_usage(pod_spec_of, facts.default_requests)
    key = f"{QUOTA_PREFIX}{facts.exposes}"
    if key not in usage or usage[key].value * count <= queue.most_gpus:
        return None
    asked = canonical(usage[key].times(count))
    return (
        f"its {count} Pods together ask {asked} {facts.exposes}, more than Kueue can ever admit in namespace "
        f"{facts.name} ({queue.most_gpus}: its gpuQuota plus what it may borrow from the teams of its type): the Job "
        "would wait, suspended, forever; ask for fewer GPUs, or a larger gpuQuota or borrowingLimit"
    )
