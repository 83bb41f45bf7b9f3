"""What a cluster snapshot says about GPUs: its GPU nodes, their pools, and what every pod asks of them. Pure: read by
``aksgpu audit`` (``components/aks_gpu/audit/``) and by the live probe, which collects these nodes and pods for it.

Objects are read in the shapes ``kubectl get ... -o json`` prints them (core/v1 Node and Pod, v1 ResourceQuota,
networking.k8s.io/v1 NetworkPolicy: https://kubernetes.io/docs/reference/kubernetes-api/). A field the audit reads
that has another type than the API gives it, or a quantity that is no quantity, is an input error naming the file,
the object and the field (``SnapshotError``, exit 2): never a guess.

Which nodes are GPU nodes, without a stack (the contract of issue 15):

- capacity: ``nvidia.com/gpu``, ``amd.com/gpu``, ``nvidia.com/mig-<profile>`` (the NVIDIA device plugin's mixed MIG
  strategy) and ``nvidia.com/gpu.shared`` (its time-slicing ``renameByDefault``:
  https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus), whatever the count (a plugin that marks every
  GPU unhealthy still leaves the key);
- labels: ``accelerator`` and ``kubernetes.azure.com/accelerator`` (AKS sets them on GPU nodes, ``nvidia``:
  https://learn.microsoft.com/azure/aks/use-labels, reserved system labels), ``nvidia.com/gpu.present=true`` (GPU
  feature discovery: https://github.com/NVIDIA/k8s-device-plugin/tree/main/docs/gpu-feature-discovery).

With a stack, a node labelled with one of its pools (``aks-gpu/pool``) is a GPU node too. A node's pool is AKS's
``kubernetes.azure.com/agentpool`` label (else the older ``agentpool``, else the stack's ``aks-gpu/pool``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from aks_gpu.admission.quantity import Quantity
from aks_gpu.aks_facts import disruption_facts
from aks_gpu.cluster.snapshot import SnapshotError, shape_problem
from aks_gpu.config.problems import clipped
from aks_gpu.gpu.health import GpuCondition, read_gpu_conditions
from aks_gpu.naming import ACCELERATOR_LABEL, KARPENTER_NODEPOOL_LABEL, POOL_LABEL, Vendor, is_mig_resource

AKS_POOL_LABEL = "kubernetes.azure.com/agentpool"
AKS_LEGACY_POOL_LABEL = "agentpool"
# Which label names a node's pool, first found first: a node auto-provisioning node carries its Karpenter NodePool's
# name (karpenter.sh/nodepool), an agent pool's node its pool's, a node of an aks-gpu stack the platform's.
POOL_LABELS = (KARPENTER_NODEPOOL_LABEL, AKS_POOL_LABEL, AKS_LEGACY_POOL_LABEL, POOL_LABEL)
AKS_ACCELERATOR_LABEL = "kubernetes.azure.com/accelerator"
GFD_PRESENT_LABEL = "nvidia.com/gpu.present"
NODE_IMAGE_LABEL = "kubernetes.azure.com/node-image-version"
GPU_NODE_LABELS = (ACCELERATOR_LABEL, AKS_ACCELERATOR_LABEL, GFD_PRESENT_LABEL)

WHOLE_GPU_RESOURCES: dict[str, Vendor] = {"nvidia.com/gpu": "nvidia", "amd.com/gpu": "amd", "nvidia.com/gpu.shared": "nvidia"}
# The kubelet marks a static pod's mirror with this annotation (its value is the pod's hash):
# https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-config-mirror
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FINISHED_PHASES = ("Succeeded", "Failed")
# A taint keeps pods without its toleration off the node with these effects (PreferNoSchedule only asks):
# https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
FENCING_EFFECTS = ("NoSchedule", "NoExecute")


def gpu_resource_vendor(name: str) -> Vendor | None:
    """The vendor of a GPU extended resource, None for any other resource."""
    if name in WHOLE_GPU_RESOURCES:
        return WHOLE_GPU_RESOURCES[name]
    return "nvidia" if is_mig_resource(name) else None


def is_gpu_resource(name: str, extra: Iterable[str] = ()) -> bool:
    return gpu_resource_vendor(name) is not None or name in extra


def whole(value: Fraction) -> int | float:
    """A count for people and JSON: an int when whole (GPU counts always are), else a float."""
    return int(value) if value.denominator == 1 else float(value)


# ---------------------------------------------------------------- reads
#
# Field types are checked before the audit reads anything (``check_shapes``: the snapshot's own ``shape_problem``,
# which covers every field read here); what is left to check is the value of a quantity.


def check_shapes(lists: Iterable[tuple[str, str, Sequence[Any] | None]]) -> None:
    """Raise ``SnapshotError`` for the first object of the wrong shape in ``(file, kind, items)``; None lists are
    absent files. ``read_snapshot`` and the probe check as they read; this keeps a snapshot built in memory to the
    same rules."""
    for file, kind, items in lists:
        if items is None:
            continue
        problem = shape_problem(items, kind)
        if problem is not None:
            raise SnapshotError(f"{file}: {problem}")


class _Where:
    """Names the object being read in a value error: ``pods.json: items[4] (Pod ml/train-0): spec...``."""

    def __init__(self, file: str, index: int, kind: str, item: Mapping[str, Any]) -> None:
        metadata = item.get("metadata") or {}
        name, namespace = metadata.get("name"), metadata.get("namespace")
        self.prefix = f"{file}: items[{index}] ({kind} {f'{namespace}/{name}' if namespace else name})"

    def quantity(self, value: Any, path: str) -> Fraction:
        try:
            return Quantity.parse(str(value)).value
        except ValueError as error:
            raise SnapshotError(f"{self.prefix}: {path} is not a Kubernetes quantity: {error}") from None


def _get(item: Mapping[str, Any], *path: str) -> Any:
    value: Any = item
    for part in path:
        value = (value or {}).get(part)
    return value


# ---------------------------------------------------------------- nodes


@dataclass(frozen=True)
class NodeTaint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class GpuNode:
    name: str
    pool: str  # "(no pool label)" when the node carries none
    vendor: Vendor | None
    evidence: str  # why it counts as a GPU node
    labels: Mapping[str, str]
    taints: tuple[NodeTaint, ...]
    capacity: Mapping[str, Fraction]  # GPU resources only
    allocatable: Mapping[str, Fraction]  # GPU resources only
    conditions: tuple[GpuCondition, ...]
    stack_pool: str | None = None  # the stack pool this node belongs to (its aks-gpu/pool), with --stack
    unschedulable: bool = False  # spec.unschedulable: cordoned (kubectl cordon, a drain, a quarantine engine)
    # The Node Problem Detector condition Azure Scheduled Events raise (VMEventScheduled, data/disruption.yaml) while
    # True: its reason and message (the event's type and time, as NPD writes them); None when no event is pending.
    scheduled_event: str | None = None

    @property
    def image(self) -> str | None:
        return self.labels.get(NODE_IMAGE_LABEL) or None

    @property
    def gpus_capacity(self) -> Fraction:
        return sum(self.capacity.values(), Fraction(0))

    @property
    def gpus_allocatable(self) -> Fraction:
        return sum(self.allocatable.values(), Fraction(0))


NO_POOL = "(no pool label)"


def read_gpu_nodes(
    items: Sequence[Any], stack_pools: Mapping[str, Vendor] | None = None, extra_resources: Iterable[str] = ()
) -> list[GpuNode]:
    """The GPU nodes among ``items`` (``nodes.json``), sorted by name; other nodes are left out.

    ``stack_pools`` (pool name -> vendor) makes every node labelled ``aks-gpu/pool`` with one of them a GPU node;
    ``extra_resources`` counts as GPU resources too (the stack's own resource names)."""
    extra = frozenset(extra_resources)
    found: list[GpuNode] = []
    for index, item in enumerate(items):
        where = _Where("nodes.json", index, "Node", item)
        name = str(_get(item, "metadata", "name"))
        labels: dict[str, str] = _get(item, "metadata", "labels") or {}
        capacity = _gpu_quantities(where, _get(item, "status", "capacity"), "status.capacity", extra)
        allocatable = _gpu_quantities(where, _get(item, "status", "allocatable"), "status.allocatable", extra)
        stack_pool = labels.get(POOL_LABEL) if stack_pools and labels.get(POOL_LABEL) in stack_pools else None
        evidence = _gpu_evidence(capacity, labels, stack_pool)
        if evidence is None:
            continue
        found.append(
            GpuNode(
                name=name,
                pool=next((labels[key] for key in POOL_LABELS if labels.get(key)), NO_POOL),
                vendor=(stack_pools or {}).get(stack_pool or "") or _vendor(capacity, labels),
                evidence=evidence,
                labels=labels,
                taints=tuple(
                    NodeTaint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
                    for t in _get(item, "spec", "taints") or ()
                ),
                capacity=capacity,
                allocatable=allocatable,
                conditions=read_gpu_conditions(item),
                stack_pool=stack_pool,
                unschedulable=_get(item, "spec", "unschedulable") is True,
                scheduled_event=_scheduled_event(item),
            )
        )
    return sorted(found, key=lambda node: node.name)


def _scheduled_event(item: Any) -> str | None:
    """The VMEventScheduled condition's reason and message while it is True (a scheduled event is pending)."""
    condition_type = disruption_facts().scheduled_event_condition
    conditions = _get(item, "status", "conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == condition_type and condition.get("status") == "True":
            text = ": ".join(str(part) for part in (condition.get("reason"), condition.get("message")) if part)
            return clipped(text, 300) if text else condition_type
    return None


def _gpu_quantities(where: _Where, raw: Any, path: str, extra: frozenset[str]) -> dict[str, Fraction]:
    found = {key: where.quantity(value, f"{path}[{key!r}]") for key, value in (raw or {}).items() if is_gpu_resource(key, extra)}
    for key, value in found.items():
        # A kubelet advertises whole, non-negative counts of an extended resource: "-8" or "7500m" is a status that
        # was edited or corrupted, and the audit would count and compare it as GPUs.
        if value < 0 or value.denominator != 1:
            raise SnapshotError(
                f"{where.prefix}: {path}[{key!r}] is {clipped(repr(str((raw or {}).get(key))), 40)}, not a whole number of"
                " GPUs (no kubelet advertises that): the node's status is corrupt or was edited"
            )
    return found


def _gpu_evidence(capacity: Mapping[str, Fraction], labels: Mapping[str, str], stack_pool: str | None) -> str | None:
    if capacity:
        return "capacity " + ", ".join(sorted(capacity))
    for label in (ACCELERATOR_LABEL, AKS_ACCELERATOR_LABEL):
        if labels.get(label, "").strip():
            return f"label {label}={labels[label]}"
    if labels.get(GFD_PRESENT_LABEL) == "true":
        return f"label {GFD_PRESENT_LABEL}=true"
    if stack_pool is not None:
        return f"label {POOL_LABEL}={stack_pool} (a pool of the stack)"
    return None


def _vendor(capacity: Mapping[str, Fraction], labels: Mapping[str, str]) -> Vendor | None:
    vendors = {gpu_resource_vendor(name) for name in capacity} - {None}
    if len(vendors) == 1:
        return vendors.pop()
    for label in (AKS_ACCELERATOR_LABEL, ACCELERATOR_LABEL):
        value = labels.get(label, "").lower()
        if "nvidia" in value:
            return "nvidia"
        if "amd" in value:
            return "amd"
    return "nvidia" if labels.get(GFD_PRESENT_LABEL) == "true" else None


def is_gpu_node(item: Any) -> bool:
    """Whether a node object (of the shape ``shape_problem`` accepts) is a GPU node by the rules above; one whose
    GPU quantity cannot be read counts as one (the audit then reports it, rather than the collector dropping it)."""
    try:
        return bool(read_gpu_nodes([item]))
    except SnapshotError:
        return True


# ---------------------------------------------------------------- pods


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    node: str | None  # spec.nodeName; None while unscheduled
    phase: str
    gpu_requests: Mapping[str, Fraction]  # effective requests of GPU resources, zero ones left out
    daemonset: bool
    static: bool  # the mirror of a kubelet's static pod

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES

    @property
    def gpus(self) -> Fraction:
        return sum(self.gpu_requests.values(), Fraction(0))


def read_pods(items: Sequence[Any], extra_resources: Iterable[str] = ()) -> list[PodInfo]:
    """Every pod of ``items`` (``pods.json``), with what it requests of GPU resources, in file order."""
    extra = frozenset(extra_resources)
    pods: list[PodInfo] = []
    for index, item in enumerate(items):
        where = _Where("pods.json", index, "Pod", item)
        metadata = item.get("metadata") or {}
        spec = item.get("spec") or {}
        pods.append(
            PodInfo(
                namespace=str(metadata.get("namespace") or ""),
                name=str(metadata.get("name")),
                node=spec.get("nodeName") or None,
                phase=_get(item, "status", "phase") or "Unknown",
                gpu_requests=effective_gpu_requests(where, spec, extra),
                daemonset=any(owner.get("kind") == "DaemonSet" for owner in metadata.get("ownerReferences") or ()),
                static=MIRROR_ANNOTATION in (metadata.get("annotations") or {}),
            )
        )
    return pods


def asks_for_gpu(item: Any) -> bool:
    """Whether a pod object requests a GPU resource; one of the wrong shape counts as one (see ``is_gpu_node``)."""
    try:
        return any(pod.gpu_requests for pod in read_pods([item]))
    except SnapshotError:
        return True


def effective_gpu_requests(where: _Where, spec: Mapping[str, Any], extra: frozenset[str]) -> dict[str, Fraction]:
    """The pod's effective request of each GPU resource, as the scheduler counts it: the larger of the app
    containers' sum (plus sidecars: init containers with ``restartPolicy: Always``) and the largest init
    container's (plus the sidecars started before it), plus ``spec.overhead``. A limit without a request is the
    request. https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers
    and https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-sharing-within-containers
    """
    apps: dict[str, Fraction] = {}
    for position, container in enumerate(spec.get("containers") or ()):
        _add(apps, _container_gpus(where, container, f"spec.containers[{position}]", extra))
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for position, container in enumerate(spec.get("initContainers") or ()):
        path = f"spec.initContainers[{position}]"
        own = _container_gpus(where, container, path, extra)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, own)
        else:
            running = dict(sidecars)
            _add(running, own)
            for key, value in running.items():
                peak[key] = max(peak.get(key, Fraction(0)), value)
    total = dict(apps)
    _add(total, sidecars)
    for key, value in peak.items():
        total[key] = max(total.get(key, Fraction(0)), value)
    overhead = spec.get("overhead") or {}
    _add(
        total,
        {key: where.quantity(value, f"spec.overhead[{key!r}]") for key, value in overhead.items() if is_gpu_resource(key, extra)},
    )
    return {key: value for key, value in sorted(total.items()) if value > 0}


def _container_gpus(where: _Where, container: Mapping[str, Any], path: str, extra: frozenset[str]) -> dict[str, Fraction]:
    requests = _get(container, "resources", "requests") or {}
    limits = _get(container, "resources", "limits") or {}
    found: dict[str, Fraction] = {}
    for key in {*requests, *limits}:
        if not is_gpu_resource(key, extra):
            continue
        source, kind = (requests, "requests") if key in requests else (limits, "limits")
        found[key] = where.quantity(source[key], f"{path}.resources.{kind}[{key!r}]")
    return found


def _add(into: dict[str, Fraction], more: Mapping[str, Fraction]) -> None:
    for key, value in more.items():
        into[key] = into.get(key, Fraction(0)) + value


# ---------------------------------------------------------------- namespaces, quotas, network policies


@dataclass(frozen=True)
class QuotaInfo:
    namespace: str
    name: str
    gpu_hard: Mapping[str, str]  # GPU resource -> its requests.<resource> hard limit, as written
    scoped: bool  # scopes or a scopeSelector: it counts only the pods they select


# Extended resources take only the requests. prefix in a quota:
# https://kubernetes.io/docs/concepts/policy/resource-quotas/#resource-quota-for-extended-resources
QUOTA_PREFIX = "requests."


def read_quotas(items: Sequence[Any], extra_resources: Iterable[str] = ()) -> list[QuotaInfo]:
    extra = frozenset(extra_resources)
    quotas = []
    for index, item in enumerate(items):
        where = _Where("resourcequotas.json", index, "ResourceQuota", item)
        spec = item.get("spec") or {}
        hard = spec.get("hard") or {}
        gpu_hard: dict[str, str] = {}
        for key, value in hard.items():
            resource = key.removeprefix(QUOTA_PREFIX)
            if key.startswith(QUOTA_PREFIX) and is_gpu_resource(resource, extra):
                where.quantity(value, f"spec.hard[{key!r}]")
                gpu_hard[resource] = str(value)
        scoped = bool(spec.get("scopes")) or bool(_get(spec, "scopeSelector", "matchExpressions"))
        quotas.append(
            QuotaInfo(str(_get(item, "metadata", "namespace") or ""), str(_get(item, "metadata", "name")), gpu_hard, scoped)
        )
    return quotas


@dataclass(frozen=True)
class PolicyPeer:
    """One entry of a rule's ``from``/``to``: an ``ipBlock`` (``cidr`` less ``excepts``), or pods chosen by a pod
    selector (None: every pod) in the namespaces a namespace selector chooses (None: the policy's own namespace)."""

    pods: Mapping[str, Any] | None = None  # a metav1 LabelSelector, as written
    namespaces: Mapping[str, Any] | None = None
    cidr: str | None = None
    excepts: tuple[str, ...] = ()


@dataclass(frozen=True)
class PolicyInfo:
    """A NetworkPolicy as Kubernetes applies it: it isolates the pods its selector picks in each direction of
    ``policy_types`` and allows, per direction, what any of its rules allows; a rule of no peers allows every source or
    destination (``from``/``to`` empty or left out).
    https://kubernetes.io/docs/concepts/services-networking/network-policies/"""

    namespace: str
    name: str
    pod_selector: Mapping[str, Any]
    policy_types: frozenset[str]
    ingress: tuple[tuple[PolicyPeer, ...], ...] = ()
    egress: tuple[tuple[PolicyPeer, ...], ...] = ()

    @property
    def selects_every_pod(self) -> bool:
        return selects_everything(self.pod_selector)

    def rules(self, direction: str) -> tuple[tuple[PolicyPeer, ...], ...]:
        """The rules of ``direction`` ("Ingress" or "Egress"); none when the policy does not isolate it."""
        if direction not in self.policy_types:
            return ()
        return self.ingress if direction == "Ingress" else self.egress


def selects_everything(selector: Mapping[str, Any]) -> bool:
    """An empty label selector (no matchLabels, no matchExpressions) selects every object."""
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def _peer(raw: Mapping[str, Any]) -> PolicyPeer:
    block = raw.get("ipBlock")
    if block is not None:
        return PolicyPeer(cidr=str(block.get("cidr") or ""), excepts=tuple(str(e) for e in block.get("except") or ()))
    return PolicyPeer(raw.get("podSelector"), raw.get("namespaceSelector"))


def _rules(raw: Any, peers_key: str) -> tuple[tuple[PolicyPeer, ...], ...]:
    return tuple(tuple(_peer(peer) for peer in (rule or {}).get(peers_key) or ()) for rule in raw or ())


def read_policies(items: Sequence[Any]) -> list[PolicyInfo]:
    """NetworkPolicies, each with its selector, its policy types and its rules' peers.

    ``policyTypes`` left out is Ingress, plus Egress when the policy has egress rules
    (https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/network-policy-v1/#NetworkPolicySpec)."""
    policies = []
    for item in items:
        spec = item.get("spec") or {}
        egress = spec.get("egress") or []
        raw_types = spec.get("policyTypes")
        types = frozenset(raw_types) if raw_types is not None else frozenset({"Ingress", *(("Egress",) if egress else ())})
        policies.append(
            PolicyInfo(
                str(_get(item, "metadata", "namespace") or ""),
                str(_get(item, "metadata", "name")),
                spec.get("podSelector") or {},
                types,
                _rules(spec.get("ingress"), "from"),
                _rules(egress, "to"),
            )
        )
    return policies


@dataclass(frozen=True)
class NamespaceInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


def read_namespaces(items: Sequence[Any]) -> dict[str, NamespaceInfo]:
    found = {}
    for item in items:
        name = str(_get(item, "metadata", "name"))
        found[name] = NamespaceInfo(name, _get(item, "metadata", "labels") or {})
    return found
