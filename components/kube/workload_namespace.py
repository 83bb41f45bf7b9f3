"""``GpuWorkloadNamespace``: one namespace per workload type, fenced the way AKS's GPU best practices describe.

Per entry of ``aks-gpu:workloads`` it creates the namespace (workload and Pod Security labels), a
``ResourceQuota`` on the GPU resource its pools expose, a ``LimitRange`` with default requests, the article's
deny-all ``NetworkPolicy`` plus opt-in allow policies, and ``RoleBinding``s of Entra ID groups.

The manifests are built by pure functions (resolved model in, dicts out, nothing from Pulumi), so they test in
milliseconds and ``pod_placement`` can be reused by the docs and the admission tests. The component only
registers what they built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config.models import EgressRule, IngressFrom
from components.model import WORKLOAD_LABEL, ResolvedWorkload

Manifest = dict[str, Any]

# The label the AKS GPU best-practices article puts on its per-team namespaces.
ARTICLE_WORKLOAD_LABEL = "workload"
COMMON_LABELS = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": "aks-gpu"}
# https://kubernetes.io/docs/concepts/security/pod-security-admission/#pod-security-admission-labels-for-namespaces
PSA_PREFIX = "pod-security.kubernetes.io"
# Warn and audit one level above a baseline enforce, as Kubernetes suggests, so teams see what `restricted`
# would refuse before anyone turns it on. Unpinned versions mean "latest" for the cluster's version.
# https://kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-namespace-labels/
PSA_WARN_LEVEL = "restricted"
# Set by the API server on every namespace (GA since 1.22), so a policy can select a namespace by name.
# https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# CoreDNS serves cluster DNS on AKS; its pods in kube-system keep the upstream `k8s-app: kube-dns` label.
# https://learn.microsoft.com/azure/aks/coredns-custom
# https://github.com/coredns/deployment/blob/master/kubernetes/coredns.yaml.sed
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
# https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles
RBAC_API_GROUP = "rbac.authorization.k8s.io"

DENY_ALL_POLICY = "deny-cross-namespace"
DNS_POLICY = "allow-dns"
SAME_NAMESPACE_POLICY = "allow-same-namespace"
QUOTA_NAME = "gpu-quota"
LIMIT_RANGE_NAME = "default-requests"


# ---------------------------------------------------------------- pure manifest builders


def _metadata(workload: ResolvedWorkload, name: str, namespaced: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**COMMON_LABELS, WORKLOAD_LABEL: workload.type}}
    if namespaced:
        meta["namespace"] = workload.name
    return meta


def pod_security_labels(level: str) -> dict[str, str]:
    """Pod Security Admission labels: ``level`` enforced, ``restricted`` warned about and audited."""
    return {
        f"{PSA_PREFIX}/enforce": level,
        f"{PSA_PREFIX}/warn": PSA_WARN_LEVEL,
        f"{PSA_PREFIX}/audit": PSA_WARN_LEVEL,
    }


def namespace_manifest(workload: ResolvedWorkload) -> Manifest:
    meta = _metadata(workload, workload.name, namespaced=False)
    meta["labels"] |= {ARTICLE_WORKLOAD_LABEL: workload.type, **pod_security_labels(workload.config.pod_security)}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def quota_hard(workload: ResolvedWorkload, platform_gpu_resources: Iterable[str] = ()) -> dict[str, str]:
    """The ``spec.hard`` of the workload's ResourceQuota.

    The GPU key is ``requests.<resource>`` in the name the workload's pools expose (``requests.`` is the only
    prefix Kubernetes accepts for extended resources). Every other GPU resource of the platform is capped at
    zero, so a namespace cannot reach another workload type's GPUs through a resource its own quota misses.
    CPU and memory are quota'd on requests, which the LimitRange defaults for pods that state none.
    https://kubernetes.io/docs/concepts/policy/resource-quotas/#resource-quota-for-extended-resources
    """
    hard: dict[str, str] = {}
    if workload.quota_key is not None:
        hard[workload.quota_key] = str(workload.config.gpu_quota)
    for resource in sorted(set(platform_gpu_resources) - {workload.resource_name or ""}):
        hard[f"requests.{resource}"] = "0"
    limits = workload.config.quota
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


def resource_quota_manifest(workload: ResolvedWorkload, platform_gpu_resources: Iterable[str] = ()) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _metadata(workload, QUOTA_NAME),
        "spec": {"hard": quota_hard(workload, platform_gpu_resources)},
    }


def limit_range_manifest(workload: ResolvedWorkload) -> Manifest:
    """Default CPU/memory requests per container: a quota on requests refuses pods that state none."""
    defaults = workload.config.default_requests
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _metadata(workload, LIMIT_RANGE_NAME),
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": defaults.cpu, "memory": defaults.memory}}]},
    }


def _policy(workload: ResolvedWorkload, name: str, spec: dict[str, Any]) -> Manifest:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": _metadata(workload, name), "spec": spec}


def _namespace_selector(namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}


def deny_all_policy(workload: ResolvedWorkload) -> Manifest:
    """The article's ``deny-cross-namespace``, exactly: every pod isolated both ways, no rule allowing anything."""
    return _policy(
        workload, DENY_ALL_POLICY, {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}
    )


def dns_policy(workload: ResolvedWorkload) -> Manifest:
    peer = _namespace_selector(DNS_NAMESPACE) | {"podSelector": {"matchLabels": dict(DNS_POD_LABELS)}}
    ports = [{"protocol": protocol, "port": DNS_PORT} for protocol in ("UDP", "TCP")]
    return _policy(
        workload, DNS_POLICY, {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [peer], "ports": ports}]}
    )


def same_namespace_policy(workload: ResolvedWorkload) -> Manifest:
    # A bare podSelector peer means "pods of this policy's namespace".
    return _policy(
        workload,
        SAME_NAMESPACE_POLICY,
        {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
            "egress": [{"to": [{"podSelector": {}}]}],
        },
    )


def ingress_from_policy(workload: ResolvedWorkload, namespace: str, sources: Iterable[IngressFrom]) -> Manifest:
    """Ingress from one namespace; each config entry is one rule (no ports: all traffic from there)."""
    rules = []
    for source in sources:
        rule: dict[str, Any] = {"from": [_namespace_selector(namespace)]}
        if source.ports:
            rule["ports"] = [{"protocol": "TCP", "port": port} for port in source.ports]
        rules.append(rule)
    return _policy(workload, f"allow-from-{namespace}", {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": rules})


def egress_to_namespace_policy(workload: ResolvedWorkload, namespace: str) -> Manifest:
    return _policy(
        workload,
        f"allow-to-{namespace}",
        {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [_namespace_selector(namespace)]}]},
    )


def cidr_slug(cidr: str) -> str:
    """``10.20.0.0/16`` -> ``10-20-0-0-16``: a CIDR as a stable piece of an object name."""
    return cidr.lower().replace(".", "-").replace(":", "-").replace("/", "-")


def egress_cidr_policy(workload: ResolvedWorkload, rules: Iterable[EgressRule]) -> Manifest:
    """Egress to one CIDR; each config entry is one rule. No ports: every port of the entry's protocol."""
    egress = []
    cidr = ""
    for rule in rules:
        cidr = rule.cidr
        ports = [{"protocol": rule.protocol, "port": port} for port in rule.ports] or [{"protocol": rule.protocol}]
        egress.append({"to": [{"ipBlock": {"cidr": rule.cidr}}], "ports": ports})
    return _policy(workload, f"allow-egress-{cidr_slug(cidr)}", {"podSelector": {}, "policyTypes": ["Egress"], "egress": egress})


def network_policy_manifests(workload: ResolvedWorkload) -> list[Manifest]:
    """Deny-all first, then one object per opt-in allow. Entries naming the same peer share one object, so
    names stay unique and stable whatever order the config lists them in."""
    network = workload.config.network
    policies = [deny_all_policy(workload)]
    if network.allow_dns:
        policies.append(dns_policy(workload))
    if network.allow_same_namespace:
        policies.append(same_namespace_policy(workload))
    sources: dict[str, list[IngressFrom]] = {}
    for source in network.allow_from_namespaces:
        sources.setdefault(source.namespace, []).append(source)
    policies += [ingress_from_policy(workload, namespace, entries) for namespace, entries in sources.items()]
    policies += [egress_to_namespace_policy(workload, namespace) for namespace in dict.fromkeys(network.allow_to_namespaces)]
    destinations: dict[str, list[EgressRule]] = {}
    for rule in network.allow_egress:
        destinations.setdefault(cidr_slug(rule.cidr), []).append(rule)
    policies += [egress_cidr_policy(workload, rules) for rules in destinations.values()]
    return policies


def role_binding_manifests(workload: ResolvedWorkload) -> list[Manifest]:
    """Entra ID groups bound to the built-in ``edit``/``view`` ClusterRoles inside the namespace.

    Entra ID puts group object ids in tokens in lower case and Kubernetes compares names exactly, so ids are
    lower-cased. The role is part of the object name because a RoleBinding's roleRef cannot change in place.
    https://learn.microsoft.com/azure/aks/azure-ad-rbac
    """
    bindings = []
    for binding in dict.fromkeys((b.role, b.group_object_id.lower()) for b in workload.config.role_bindings):
        role, group = binding
        bindings.append(
            {
                "apiVersion": f"{RBAC_API_GROUP}/v1",
                "kind": "RoleBinding",
                "metadata": _metadata(workload, f"entra-{role}-{group}"),
                "roleRef": {"apiGroup": RBAC_API_GROUP, "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "Group", "apiGroup": RBAC_API_GROUP, "name": group}],
            }
        )
    return bindings


def workload_manifests(workload: ResolvedWorkload, platform_gpu_resources: Iterable[str] = ()) -> list[Manifest]:
    """Every object of a workload namespace, the Namespace first."""
    return [
        namespace_manifest(workload),
        resource_quota_manifest(workload, platform_gpu_resources),
        limit_range_manifest(workload),
        *network_policy_manifests(workload),
        *role_binding_manifests(workload),
    ]


def pod_placement(workload: ResolvedWorkload) -> dict[str, Any]:
    """What a GPU pod of this workload needs to land on its pools: ``nodeSelector`` and ``tolerations`` go in
    the pod spec, ``resources`` on the container that uses the GPU (one unit of the pools' resource)."""
    limits = {workload.resource_name: 1} if workload.resource_name else {}
    return {
        "nodeSelector": dict(workload.node_selector),
        "tolerations": [t.to_kube() for t in workload.tolerations],
        "resources": {"limits": limits},
    }


# ---------------------------------------------------------------- Pulumi component


@dataclass(frozen=True)
class GpuWorkloadNamespaceArgs:
    workload: ResolvedWorkload
    # Every GPU resource the platform's pools expose; those the workload does not use get a zero quota.
    platform_gpu_resources: tuple[str, ...] = ()


Register = Callable[[str, Manifest, pulumi.ResourceOptions], pulumi.CustomResource]

# The namespaced kinds ``workload_manifests`` builds, each registered as its typed resource.
_REGISTER: dict[str, Register] = {
    "ResourceQuota": lambda name, m, opts: k8s.core.v1.ResourceQuota(name, metadata=m["metadata"], spec=m["spec"], opts=opts),
    "LimitRange": lambda name, m, opts: k8s.core.v1.LimitRange(name, metadata=m["metadata"], spec=m["spec"], opts=opts),
    "NetworkPolicy": lambda name, m, opts: k8s.networking.v1.NetworkPolicy(
        name, metadata=m["metadata"], spec=m["spec"], opts=opts
    ),
    "RoleBinding": lambda name, m, opts: k8s.rbac.v1.RoleBinding(
        name, metadata=m["metadata"], role_ref=m["roleRef"], subjects=m["subjects"], opts=opts
    ),
}


class GpuWorkloadNamespace(pulumi.ComponentResource):
    """A workload type's namespace with its GPU quota, default requests, deny-all network policy and
    opt-in allows, Pod Security labels and group bindings.

    Outputs tell other stacks how to place a job here: the namespace, the GPU resource name and quota, and
    the pod spec fragment (``pod_placement``).
    """

    namespace: k8s.core.v1.Namespace
    namespace_name: pulumi.Output[str]
    resource_name: pulumi.Output[str | None]
    quota_key: pulumi.Output[str | None]
    gpu_quota: pulumi.Output[int]
    pod_placement: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, args: GpuWorkloadNamespaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("aks-gpu:index:GpuWorkloadNamespace", name, None, opts)
        workload = args.workload
        provider = opts.provider if opts else None
        namespace, *namespaced = workload_manifests(workload, args.platform_gpu_resources)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=namespace["metadata"],
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        for manifest in namespaced:
            _REGISTER[manifest["kind"]](
                f"{name}-{manifest['kind'].lower()}-{manifest['metadata']['name']}",
                manifest,
                # The provider does not order objects by the namespace they name; the namespace must exist first.
                pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.namespace]),
            )
        self.namespace_name = self.namespace.metadata.apply(lambda meta: str(meta.name))
        self.resource_name = pulumi.Output.from_input(workload.resource_name)
        self.quota_key = pulumi.Output.from_input(workload.quota_key)
        self.gpu_quota = pulumi.Output.from_input(workload.config.gpu_quota)
        self.pod_placement = pulumi.Output.from_input(pod_placement(workload))
        outputs: dict[str, Any] = {
            "namespaceName": self.namespace_name,
            "resourceName": self.resource_name,
            "quotaKey": self.quota_key,
            "gpuQuota": self.gpu_quota,
            "podPlacement": self.pod_placement,
        }
        # Seam for per-workload extras (the NVMe volume snippet when `nvmeVolume: true`): set an attribute
        # and add its output here; the manifests above do not change.
        self.register_outputs(outputs)
