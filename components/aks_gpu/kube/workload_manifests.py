"""The objects of a GPU workload namespace, built as plain dicts, the way AKS's GPU best practices fence one.

Per workload: the namespace (workload and Pod Security labels), a ``ResourceQuota`` on the GPU resource its
pools expose, one refusing pods at the system priority classes, a ``LimitRange`` with default requests, the
article's deny-all ``NetworkPolicy`` plus opt-in allow policies, and ``RoleBinding``s of Entra ID groups. Plus
``pod_placement``: the pod spec fragment that lands a GPU pod on the workload's pools.

Pure (validated config and plain values in, dicts out, no Pulumi), so it tests in milliseconds and the docs,
plans and admission tests can reuse it. ``GpuWorkloadNamespace`` only registers what it builds.

No ``from __future__ import annotations`` here: Pulumi's schema inference reads the TypedDicts' annotations
at runtime and cannot see through string annotations.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from aks_gpu.admission.chain import NODE_SELECTOR_ANNOTATION, namespace_metadata_with_tolerations, placement_selector
from aks_gpu.admission.namespace_admission import QUOTA_PREFIX, NamespaceFacts, PoolNodes, QueueFacts
from aks_gpu.admission.pod_security import rdma_policy_manifests
from aks_gpu.config.models import EgressRule, IngressFrom, StackConfig, WorkloadConfig
from aks_gpu.kube.kueue import gpu_ceilings
from aks_gpu.local.nodes import SimulatedPool, simulated_cpu_pools, simulated_gpu_pool
from aks_gpu.naming import (
    KUBE_SYSTEM_NAMESPACE,
    KUEUE_DEFAULT_LOCAL_QUEUE,
    NAMESPACE_NAME_LABEL,
    PRIORITY_QUOTA_NAME,
    QUOTA_NAME,
    RDMA_LABEL,
    SYSTEM_PRIORITY_CLASSES,
    TEAM_ROLE_NAME,
    WORKLOAD_LABEL,
)
from aks_gpu.resolved.model import PlatformModel, ResolvedPool

Manifest = dict[str, Any]

# The label the AKS GPU best-practices article puts on its per-team namespaces.
ARTICLE_WORKLOAD_LABEL = "workload"
# https://kubernetes.io/docs/concepts/security/pod-security-admission/#pod-security-admission-labels-for-namespaces
PSA_PREFIX = "pod-security.kubernetes.io"
# Warn and audit one level above a baseline enforce, as Kubernetes suggests, so teams see what `restricted`
# would refuse before anyone turns it on. Unpinned versions mean "latest" for the cluster's version.
# https://kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-namespace-labels/
PSA_WARN_LEVEL = "restricted"
# CoreDNS serves cluster DNS on AKS; its pods in kube-system keep the upstream `k8s-app: kube-dns` label.
# https://learn.microsoft.com/azure/aks/coredns-custom
# https://github.com/coredns/deployment/blob/master/kubernetes/coredns.yaml.sed
DNS_NAMESPACE = KUBE_SYSTEM_NAMESPACE
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
# https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles
RBAC_API_GROUP = "rbac.authorization.k8s.io"

DENY_ALL_POLICY = "deny-cross-namespace"
DNS_POLICY = "allow-dns"
SAME_NAMESPACE_POLICY = "allow-same-namespace"
LIMIT_RANGE_NAME = "default-requests"


# ---------------------------------------------------------------- pod placement types


class TolerationSpec(TypedDict):
    """A pod toleration, as a pod spec carries it."""

    key: str
    """The taint key tolerated."""
    operator: str
    """Equal or Exists."""
    effect: str
    """NoSchedule, PreferNoSchedule or NoExecute."""
    value: NotRequired[str]
    """Only with Equal."""


class ContainerResources(TypedDict):
    limits: dict[str, int]
    """One unit of the workload's GPU resource; empty when no pool serves the workload."""


class PodPlacement(TypedDict):
    """What a GPU pod needs to land on the workload's pools. Kubernetes' own field names, so the value goes
    into a pod spec as it is, in every language: nodeSelector and tolerations in the pod spec, resources on
    the container that uses the GPU."""

    # Not snake_case on purpose: Pulumi maps snake_case keys to camelCase only when the component runs
    # through its provider, so a Python stack would export `node_selector` and every other one `nodeSelector`.
    nodeSelector: dict[str, str]
    tolerations: list[TolerationSpec]
    resources: ContainerResources


class PoolOutput(TypedDict):
    """What a workload needs to land on one GPU pool. Kubernetes' and JSON's camelCase, as every language and the
    stack's ``pools`` output spell it (a snake_case key would reach Python callers as written and every other
    language camelCased)."""

    nodeSelector: dict[str, str]
    tolerations: list[TolerationSpec]
    resourceName: str
    """The extended resource one node advertises: nvidia.com/gpu, amd.com/gpu or nvidia.com/mig-<profile>."""
    resourceCountPerNode: int
    """How many of it one node advertises (0 when the pool's GPU count is unknown)."""
    vmSize: str
    workload: str
    """The workload type the pool serves (a team namespace of this type may use it)."""
    migProfile: NotRequired[str]
    migStrategy: NotRequired[str]


def pool_output(pool: ResolvedPool, model: PlatformModel) -> PoolOutput:
    """One entry of the platform's ``pools`` output."""
    output: PoolOutput = {
        "nodeSelector": dict(pool.node_selector),
        "tolerations": [toleration(t.to_kube()) for t in pool.tolerations],
        "resourceName": pool.resource.name,
        "resourceCountPerNode": pool.resource.count_per_node or 0,
        "vmSize": pool.config.vm_size,
        "workload": pool.workload,
    }
    if pool.mig_profile:
        output["migProfile"] = pool.mig_profile
        output["migStrategy"] = model.mig_strategy
    return output


# ---------------------------------------------------------------- namespace, quota, limit range


def object_metadata(config: WorkloadConfig, name: str, namespaced: bool = True) -> dict[str, Any]:
    """Explicit name and the common labels; inside the workload's namespace unless ``namespaced`` is off."""
    meta: dict[str, Any] = {"name": name, "labels": {WORKLOAD_LABEL: config.type}}
    if namespaced:
        meta["namespace"] = config.name
    return meta


def pod_security_labels(level: str) -> dict[str, str]:
    """Pod Security Admission labels: ``level`` enforced, ``restricted`` warned about and audited."""
    return {
        f"{PSA_PREFIX}/enforce": level,
        f"{PSA_PREFIX}/warn": PSA_WARN_LEVEL,
        f"{PSA_PREFIX}/audit": PSA_WARN_LEVEL,
    }


def namespace_manifest(config: WorkloadConfig, tolerations: Sequence[Mapping[str, Any]] = ()) -> Manifest:
    """``tolerations``: those of the workload's pools (``pod_placement``'s), of which PodTolerationRestriction hands
    every Pod the non-GPU ones (``namespace_metadata_with_tolerations``). With ``rdma: true``, Pod Security Admission
    enforces nothing here (``privileged``: it has no per-capability exception) and the namespace's own admission
    policy enforces baseline plus IPC_LOCK in its place (``rdma_manifests``, created first)."""
    meta = object_metadata(config, config.name, namespaced=False)
    level = "privileged" if config.rdma else config.pod_security
    meta["labels"] |= {ARTICLE_WORKLOAD_LABEL: config.type, **pod_security_labels(level)}
    if config.rdma:
        meta["labels"][RDMA_LABEL] = "true"
    meta["annotations"] = {NODE_SELECTOR_ANNOTATION: placement_selector(config.type)}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": namespace_metadata_with_tolerations(meta, tolerations)}


def rdma_manifests(config: WorkloadConfig) -> list[Manifest]:
    """The RDMA namespace's Pod Security replacement: a ValidatingAdmissionPolicy and its binding (cluster-scoped,
    named after the namespace); nothing without ``rdma: true``."""
    return rdma_policy_manifests(config.name) if config.rdma else []


def gpu_quota_key(resource_name: str) -> str:
    """``requests.<resource>``: the only prefix a ResourceQuota accepts for extended resources.
    https://kubernetes.io/docs/concepts/policy/resource-quotas/#resource-quota-for-extended-resources
    """
    return f"requests.{resource_name}"


def quota_hard(
    config: WorkloadConfig, resource_name: str | None, other_gpu_resources: Iterable[str], gpu_ceiling: int | None = None
) -> dict[str, str]:
    """The ``spec.hard`` of the workload's ResourceQuota.

    ``gpuQuota`` units of ``resource_name`` (the resource the workload's pools expose; None when no pool
    serves it), or ``gpu_ceiling`` where Kueue queues the namespace's Jobs (``kube.kueue.gpu_ceilings``: the quota
    plus what it may borrow, so the quota never refuses a Job Kueue admitted). Every other GPU resource is capped at
    zero, so a namespace cannot reach another workload type's GPUs through a resource its own quota misses. CPU and
    memory are quota'd on requests, which the LimitRange defaults for pods that state none.
    """
    hard: dict[str, str] = {}
    if resource_name:
        hard[gpu_quota_key(resource_name)] = str(config.gpu_quota if gpu_ceiling is None else gpu_ceiling)
    for resource in sorted(set(other_gpu_resources) - {resource_name or ""}):
        hard[gpu_quota_key(resource)] = "0"
    limits = config.quota
    if limits.cpu is not None:
        hard["requests.cpu"] = limits.cpu
    if limits.memory is not None:
        hard["requests.memory"] = limits.memory
    if limits.requests_storage is not None:
        hard["requests.storage"] = limits.requests_storage
    if limits.pods is not None:
        hard["pods"] = str(limits.pods)
    if limits.persistent_volume_claims is not None:
        hard["persistentvolumeclaims"] = str(limits.persistent_volume_claims)
    return hard


def resource_quota_manifest(
    config: WorkloadConfig, resource_name: str | None, other_gpu_resources: Iterable[str] = ()
) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_metadata(config, QUOTA_NAME),
        "spec": {"hard": quota_hard(config, resource_name, other_gpu_resources)},
    }


def priority_quota_manifest(config: WorkloadConfig) -> Manifest:
    """No pod at a system priority class: the namespace's pods would preempt other teams' pods on a shared node
    (``pods: 0`` counted only over pods whose priorityClassName is one of them).
    https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default
    """
    selector = {"scopeName": "PriorityClass", "operator": "In", "values": list(SYSTEM_PRIORITY_CLASSES)}
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_metadata(config, PRIORITY_QUOTA_NAME),
        "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [selector]}},
    }


def limit_range_manifest(config: WorkloadConfig) -> Manifest:
    """Default CPU/memory requests per container: a quota on requests refuses pods that state none."""
    defaults = config.default_requests
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": object_metadata(config, LIMIT_RANGE_NAME),
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": defaults.cpu, "memory": defaults.memory}}]},
    }


# ---------------------------------------------------------------- network policies


def _policy(config: WorkloadConfig, name: str, spec: dict[str, Any]) -> Manifest:
    metadata = object_metadata(config, name)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata, "spec": spec}


def _namespace_selector(namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}


def deny_all_policy(config: WorkloadConfig) -> Manifest:
    """The article's ``deny-cross-namespace``, exactly: every pod isolated both ways, no rule allowing anything."""
    return _policy(
        config, DENY_ALL_POLICY, {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}
    )


def dns_policy(config: WorkloadConfig) -> Manifest:
    peer = _namespace_selector(DNS_NAMESPACE) | {"podSelector": {"matchLabels": dict(DNS_POD_LABELS)}}
    ports = [{"protocol": protocol, "port": DNS_PORT} for protocol in ("UDP", "TCP")]
    return _policy(config, DNS_POLICY, {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [peer], "ports": ports}]})


def same_namespace_policy(config: WorkloadConfig) -> Manifest:
    # A bare podSelector peer means "pods of this policy's namespace".
    return _policy(
        config,
        SAME_NAMESPACE_POLICY,
        {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
            "egress": [{"to": [{"podSelector": {}}]}],
        },
    )


def ingress_from_policy(config: WorkloadConfig, namespace: str, sources: Iterable[IngressFrom]) -> Manifest:
    """Ingress from one namespace; each config entry is one rule (no ports: all traffic from there)."""
    rules = []
    for source in sources:
        rule: dict[str, Any] = {"from": [_namespace_selector(namespace)]}
        if source.ports:
            rule["ports"] = [{"protocol": "TCP", "port": port} for port in source.ports]
        rules.append(rule)
    return _policy(config, f"allow-from-{namespace}", {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": rules})


def egress_to_namespace_policy(config: WorkloadConfig, namespace: str) -> Manifest:
    return _policy(
        config,
        f"allow-to-{namespace}",
        {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [_namespace_selector(namespace)]}]},
    )


def cidr_slug(cidr: str) -> str:
    """``10.20.0.0/16`` -> ``10-20-0-0-16``: a CIDR as a stable piece of an object name."""
    return cidr.lower().replace(".", "-").replace(":", "-").replace("/", "-")


def egress_cidr_policy(config: WorkloadConfig, rules: Iterable[EgressRule]) -> Manifest:
    """Egress to one CIDR; each config entry is one rule. No ports: every port of the entry's protocol."""
    egress = []
    cidr = ""
    for rule in rules:
        cidr = rule.cidr
        ports = [{"protocol": rule.protocol, "port": port} for port in rule.ports] or [{"protocol": rule.protocol}]
        egress.append({"to": [{"ipBlock": {"cidr": rule.cidr}}], "ports": ports})
    return _policy(config, f"allow-egress-{cidr_slug(cidr)}", {"podSelector": {}, "policyTypes": ["Egress"], "egress": egress})


def network_policy_manifests(config: WorkloadConfig) -> list[Manifest]:
    """Deny-all first, then one object per opt-in allow. Entries naming the same peer share one object, so
    names stay unique and stable whatever order the config lists them in."""
    network = config.network
    policies = [deny_all_policy(config)]
    if network.allow_dns:
        policies.append(dns_policy(config))
    if network.allow_same_namespace:
        policies.append(same_namespace_policy(config))
    sources: dict[str, list[IngressFrom]] = {}
    for source in network.allow_from_namespaces:
        sources.setdefault(source.namespace, []).append(source)
    policies += [ingress_from_policy(config, namespace, entries) for namespace, entries in sources.items()]
    policies += [egress_to_namespace_policy(config, namespace) for namespace in dict.fromkeys(network.allow_to_namespaces)]
    destinations: dict[str, list[EgressRule]] = {}
    for rule in network.allow_egress:
        destinations.setdefault(cidr_slug(rule.cidr), []).append(rule)
    policies += [egress_cidr_policy(config, rules) for rules in destinations.values()]
    return policies


# ---------------------------------------------------------------- role bindings


# The ClusterRole each `roleBindings[].role` binds: `edit` is the platform's team role (Kubernetes' edit less
# NetworkPolicy writes, kube/team_role.py), `view` Kubernetes' own.
BOUND_ROLES = {"edit": TEAM_ROLE_NAME, "view": "view"}


def role_binding_manifests(config: WorkloadConfig) -> list[Manifest]:
    """Entra ID groups bound inside the namespace: ``edit`` to the platform's team role, ``view`` to the built-in.

    Entra ID puts group object ids in tokens in lower case and Kubernetes compares names exactly, so ids are
    lower-cased. The config's role is part of the object name because a RoleBinding's roleRef cannot change in place.
    https://learn.microsoft.com/azure/aks/azure-ad-rbac
    """
    bindings = []
    for role, group in dict.fromkeys((b.role, b.group_object_id.lower()) for b in config.role_bindings):
        bindings.append(
            {
                "apiVersion": f"{RBAC_API_GROUP}/v1",
                "kind": "RoleBinding",
                "metadata": object_metadata(config, f"entra-{role}-{group}"),
                "roleRef": {"apiGroup": RBAC_API_GROUP, "kind": "ClusterRole", "name": BOUND_ROLES[role]},
                "subjects": [{"kind": "Group", "apiGroup": RBAC_API_GROUP, "name": group}],
            }
        )
    return bindings


# ---------------------------------------------------------------- all of it


def config_manifests(config: WorkloadConfig) -> list[Manifest]:
    """The namespaced objects that depend on the workload's own config alone: everything but the quota,
    which also needs the GPU resource names (known to the platform, or read from its stack outputs)."""
    return [
        limit_range_manifest(config),
        priority_quota_manifest(config),
        *network_policy_manifests(config),
        *role_binding_manifests(config),
    ]


def workload_manifests(
    config: WorkloadConfig,
    resource_name: str | None,
    other_gpu_resources: Iterable[str] = (),
    tolerations: Sequence[Mapping[str, Any]] = (),
) -> list[Manifest]:
    """Every object of a workload namespace: its RDMA policy (when it has one), the Namespace, the quota, the rest."""
    return [
        *rdma_manifests(config),
        namespace_manifest(config, tolerations),
        resource_quota_manifest(config, resource_name, other_gpu_resources),
        *config_manifests(config),
    ]


def toleration(spec: Mapping[str, str]) -> TolerationSpec:
    """A toleration as a pod spec carries it: no value with ``Exists`` (the API server refuses one)."""
    found = TolerationSpec(key=spec["key"], operator=spec["operator"], effect=spec["effect"])
    value = spec.get("value")
    if spec["operator"] == "Equal" and value is not None:
        found["value"] = value
    return found


def pod_placement(
    resource_name: str | None, node_selector: Mapping[str, str], tolerations: Sequence[Mapping[str, str]]
) -> PodPlacement:
    """What a GPU pod of the workload needs to land on its pools: the pools' node selector, every taint of
    theirs tolerated (once, in the order given), and one unit of the GPU resource as the container's limit."""
    unique: dict[tuple[str, str, str, str], TolerationSpec] = {}
    for spec in tolerations:
        kube = toleration(spec)
        unique.setdefault((kube["key"], kube["operator"], kube["effect"], kube.get("value", "")), kube)
    return {
        "nodeSelector": dict(node_selector),
        "tolerations": list(unique.values()),
        "resources": {"limits": {resource_name: 1} if resource_name else {}},
    }


# ---------------------------------------------------------------- what admission reads of them


def namespace_facts(model: PlatformModel) -> dict[str, NamespaceFacts]:
    """Per workload namespace of the stack, its Pod Security level, ResourceQuota, LimitRange defaults and the pools its
    Pods may land on (its own GPU pools and, in a whole stack, the CPU pools, which serve every workload type), each
    with what a node offers as ``aksgpu local``'s simulated nodes show it."""
    gpu_resources = sorted({pool.resource.name for pool in model.pools})
    cpu_pools: tuple[SimulatedPool, ...] = ()
    if isinstance(model.config, StackConfig):
        cpu_pools = simulated_cpu_pools(model.config.cpu_pools, [workload.type for workload in model.workloads])
    ceilings = gpu_ceilings(model)
    facts = {}
    for workload in model.workloads:
        reachable = (*(simulated_gpu_pool(pool) for pool in workload.pools), *cpu_pools)
        hard = quota_hard(workload.config, workload.resource_name, gpu_resources, ceilings.get(workload.name))
        gpu_keys = {f"{QUOTA_PREFIX}{name}" for name in gpu_resources}
        if workload.resource_name:
            gpu_keys.add(f"{QUOTA_PREFIX}{workload.resource_name}")
        facts[workload.name] = NamespaceFacts(
            name=workload.name,
            pod_security="privileged" if workload.config.rdma else workload.config.pod_security,
            gpu_quota={key: value for key, value in hard.items() if key in gpu_keys},
            exposes=workload.resource_name or "",
            quota=hard,
            default_requests={
                "cpu": workload.config.default_requests.cpu,
                "memory": workload.config.default_requests.memory,
            },
            warn_level=PSA_WARN_LEVEL,
            pools=tuple(PoolNodes(pool.name, pool.vm_size, pool.resources()[1]) for pool in reachable),
            queue=QueueFacts((KUEUE_DEFAULT_LOCAL_QUEUE,), ceilings[workload.name]) if workload.name in ceilings else None,
        )
    return facts
