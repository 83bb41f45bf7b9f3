"""The isolation practice: every namespace that runs GPU pods has an unscoped GPU quota and is fenced by its network
policies (``gpu-pod-unfenced``), and its summary (GPU requests, quota, policies, workload labels). Pure.

Fenced: its policies, weighed together as Kubernetes applies them (policies add up), isolate every pod's ingress and
egress, and none of them opens it again to every namespace, every address (0.0.0.0/0: the internet and the API
server) or Azure's instance metadata service. An allow-all policy beside the deny-all reopens the namespace; a policy
allowing a named namespace, the namespace's own pods or a CIDR short of all addresses does not."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from aks_gpu.admission.evaluate import selector_matches
from aks_gpu.audit.judging import Run, absent_file, requests_shown
from aks_gpu.audit.report import NamespaceSummary
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.cluster.inventory import NamespaceInfo, PodInfo, PolicyInfo, PolicyPeer, QuotaInfo, selects_everything
from aks_gpu.cluster.snapshot import NAMESPACES_FILE, NETWORK_POLICIES_FILE, RESOURCE_QUOTAS_FILE, ClusterSnapshot
from aks_gpu.kube.workload_manifests import ARTICLE_WORKLOAD_LABEL, DENY_ALL_POLICY, PSA_PREFIX
from aks_gpu.naming import NAMESPACE_NAME_LABEL, QUOTA_NAME, TEAM_ROLE_NAME, WORKLOAD_LABEL

# Azure's Instance Metadata Service, which every VM (and every pod that reaches it) may ask for the node's managed
# identity tokens: https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service
IMDS_ADDRESS = ipaddress.ip_address("169.254.169.254")
EVERY_PEER = "every namespace and every address"
EVERY_NAMESPACE = "every namespace"
# The directions as the audit says them, and as policyTypes spells them.
DIRECTIONS = (("ingress", "Ingress"), ("egress", "Egress"))


def judge_isolation(
    run: Run,
    pods: Sequence[PodInfo],
    quotas: Sequence[QuotaInfo] | None,
    policies: Sequence[PolicyInfo] | None,
    namespaces: Mapping[str, NamespaceInfo] | None,
    stack: StackExpectations | None,
    snapshot: ClusterSnapshot,
) -> tuple[NamespaceSummary, ...]:
    gpu_pods = [pod for pod in pods if pod.gpus > 0 and not pod.finished]
    by_namespace: dict[str, list[PodInfo]] = defaultdict(list)
    for pod in gpu_pods:
        by_namespace[pod.namespace].append(pod)

    missing_files = []
    if quotas is None:
        missing_files.append(RESOURCE_QUOTAS_FILE)
        run.gap("isolation", ("gpu-pod-unfenced",), absent_file(snapshot, RESOURCE_QUOTAS_FILE, "GPU quotas are not checked"))
    if policies is None:
        missing_files.append(NETWORK_POLICIES_FILE)
        run.gap(
            "isolation",
            ("gpu-pod-unfenced",),
            absent_file(snapshot, NETWORK_POLICIES_FILE, "deny-all network policies are not checked"),
        )
    if namespaces is None:
        run.gap(
            "isolation",
            (),
            absent_file(snapshot, NAMESPACES_FILE, "the namespaces' workload and Pod Security labels are not shown"),
        )
    if len(missing_files) < 2:
        run.checked.add("gpu-pod-unfenced")

    fences = _fences(quotas, policies, namespaces)
    summaries = []
    for namespace, members in sorted(by_namespace.items()):
        fence = fences.get(namespace, _Fence())
        requests: dict[str, Fraction] = defaultdict(Fraction)
        for pod in members:
            for resource, value in pod.gpu_requests.items():
                requests[resource] += value
        limits = dict(sorted(fence.quota.items())) if quotas is not None else None
        # The table's "deny-all" and the finding's network problems both come from the fence.
        deny_all = fence.deny_all if policies is not None else None
        labels = None
        if namespaces is not None:
            found = namespaces.get(namespace)
            raw = found.labels if found else {}
            labels = {
                key: value
                for key, value in sorted(raw.items())
                if key in (ARTICLE_WORKLOAD_LABEL, WORKLOAD_LABEL) or key == f"{PSA_PREFIX}/enforce"
            }
        stack_workload = stack is not None and namespace in stack.workload_namespaces
        summaries.append(
            NamespaceSummary(namespace, len(members), dict(sorted(requests.items())), limits, deny_all, labels, stack_workload)
        )
        for pod in members:
            unquoted = [resource for resource in pod.gpu_requests if resource not in fence.quota] if quotas is not None else []
            open_to = fence.open_directions if policies is not None else ()
            reopened = fence.reopened if policies is not None else {}
            if not unquoted and not open_to and not reopened:
                continue
            problems, risks = [], []
            if unquoted:
                scoped_note = (
                    f" (ResourceQuota {', '.join(fence.scoped)} has scopes: it counts only the pods they select)"
                    if fence.scoped
                    else ""
                )
                problems.append("no ResourceQuota on " + ", ".join(f"requests.{resource}" for resource in unquoted) + scoped_note)
                risks.append("one team's jobs can take every GPU")
            if open_to:
                problems.append(f"no NetworkPolicy that denies all {' and '.join(open_to)}")
            problems += [f"NetworkPolicy {name} reopening {what}" for name, what in reopened.items()]
            if open_to or reopened:
                risks.append("its pods can reach other teams' workloads")
            run.add(
                "gpu-pod-unfenced",
                "warn",
                f"pod requests {requests_shown(pod.gpu_requests)} in namespace {namespace}, which has {'; '.join(problems)}: "
                f"{' and '.join(risks)}",
                _fix(namespace, unquoted, bool(open_to), tuple(reopened), stack if stack_workload else None),
                node=pod.node,
                namespace=namespace,
                pod=pod.name,
            )
    return tuple(summaries)


@dataclass(frozen=True)
class _Fence:
    """What fences one namespace in: its unscoped GPU quotas (resource -> hard limit), the names of its scoped GPU
    quotas, the directions its policies isolate for every pod, and each policy that opens it again, with what to."""

    quota: Mapping[str, str] = field(default_factory=dict)
    scoped: tuple[str, ...] = ()
    isolated: frozenset[str] = frozenset()
    reopened: Mapping[str, str] = field(default_factory=dict)  # policy -> "ingress from ...; egress to ..."

    @property
    def deny_all(self) -> bool:
        return not self.open_directions and not self.reopened

    @property
    def open_directions(self) -> tuple[str, ...]:
        return tuple(name for name, _ in DIRECTIONS if name not in self.isolated)


def _fences(
    quotas: Sequence[QuotaInfo] | None, policies: Sequence[PolicyInfo] | None, namespaces: Mapping[str, NamespaceInfo] | None
) -> dict[str, _Fence]:
    """Each namespace's fence, read once: the namespace table and the findings both come from it."""
    unscoped: dict[str, dict[str, str]] = defaultdict(dict)
    scoped: dict[str, list[str]] = defaultdict(list)
    for quota in quotas or ():
        if quota.scoped:
            if quota.gpu_hard:
                scoped[quota.namespace].append(quota.name)
            continue
        for resource, hard in quota.gpu_hard.items():
            unscoped[quota.namespace].setdefault(resource, hard)
    isolated: dict[str, set[str]] = defaultdict(set)
    reopened: dict[str, dict[str, str]] = defaultdict(dict)
    for policy in policies or ():
        # A policy isolates the pods it selects in each of its types; only one that selects every pod fences them all.
        if policy.selects_every_pod:
            isolated[policy.namespace] |= {name for name, kube in DIRECTIONS if kube in policy.policy_types}
        opened = _opened(policy, namespaces)
        if opened:
            reopened[policy.namespace][policy.name] = opened
    return {
        namespace: _Fence(
            dict(unscoped[namespace]), tuple(scoped[namespace]), frozenset(isolated[namespace]), dict(reopened[namespace])
        )
        for namespace in set(unscoped) | set(scoped) | set(isolated) | set(reopened)
    }


def _opened(policy: PolicyInfo, namespaces: Mapping[str, NamespaceInfo] | None) -> str:
    """What ``policy`` opens past a namespace's fence, per direction ("ingress from every namespace; egress to IMDS
    169.254.169.254"); empty when it allows only named namespaces, the namespace's own pods or narrower CIDRs."""
    said = []
    for name, kube in DIRECTIONS:
        wide: list[str] = []
        for peers in policy.rules(kube):
            # A rule with no peers allows every source (ingress) or destination (egress).
            found = [EVERY_PEER] if not peers else [what for peer in peers for what in _wide(peer, policy, kube, namespaces)]
            wide += [what for what in found if what not in wide]
        if wide:
            said.append(f"{name} {'from' if kube == 'Ingress' else 'to'} {', '.join(wide)}")
    return "; ".join(said)


def _wide(peer: PolicyPeer, policy: PolicyInfo, direction: str, namespaces: Mapping[str, NamespaceInfo] | None) -> list[str]:
    if peer.cidr is not None:
        return _wide_block(peer.cidr, peer.excepts, direction)
    selector = peer.namespaces
    if selector is None:
        return []  # pods of the policy's own namespace
    if selects_everything(selector):
        return [EVERY_NAMESPACE]
    # A selector every other namespace of the cluster matches (NotIn its own name, Exists kubernetes.io/metadata.name).
    known = namespaces or {}
    others = [{**info.labels, NAMESPACE_NAME_LABEL: name} for name, info in known.items() if name != policy.namespace]
    if others and all(selector_matches(selector, labels) for labels in others):
        return [f"{EVERY_NAMESPACE} (its namespaceSelector matches all {len(others)} others)"]
    return []


def _wide_block(cidr: str, excepts: Sequence[str], direction: str) -> list[str]:
    try:
        network = ipaddress.ip_network(cidr, strict=False)
        cut = [ipaddress.ip_network(item, strict=False) for item in excepts]
    except ValueError:
        return []  # the API server refuses such a policy; nothing was opened
    found = []
    if network.prefixlen == 0:
        reach = ": the internet and the API server" if direction == "Egress" else ""
        found.append(f"every address ({cidr}{' except ' + ', '.join(excepts) if excepts else ''}{reach})")
    if direction == "Egress" and IMDS_ADDRESS in network and not any(IMDS_ADDRESS in item for item in cut):
        found.append(f"IMDS {IMDS_ADDRESS}")
    return found


def _fix(
    namespace: str, unquoted: Sequence[str], open_to: bool, reopening: Sequence[str], stack: StackExpectations | None
) -> str:
    """What to do about exactly what the namespace lacks: never a policy it already has, nor a quota."""
    steps = []
    if stack is not None and (unquoted or open_to):
        restored = " and ".join(name for name, lacking in ((QUOTA_NAME, bool(unquoted)), (DENY_ALL_POLICY, open_to)) if lacking)
        steps.append(
            f"Run `pulumi up --stack {stack.name}`: this is the stack's workload namespace, and that restores its {restored}"
        )
    elif unquoted or open_to:
        lacking = []
        if unquoted:
            lacking.append("a ResourceQuota on " + ", ".join(f"requests.{resource}" for resource in unquoted) + " (no scopes)")
        if open_to:
            lacking.append(
                f"the article's {DENY_ALL_POLICY} NetworkPolicy (every pod, Ingress and Egress, no rules), then allow only "
                "what it needs"
            )
        steps.append("Give the namespace " + " and ".join(lacking))
    own = stack.network_policies.get(namespace, frozenset()) if stack is not None else frozenset()
    others = [name for name in reopening if name not in own]
    if others:
        made = " (the stack does not make it)" if stack is not None else ""
        steps.append(
            f"Delete or narrow NetworkPolicy {', '.join(others)}{made}; bind teams to {TEAM_ROLE_NAME}, which writes no "
            "NetworkPolicy"
        )
    if own and stack is not None:
        mine = [name for name in reopening if name in own]
        steps.append(f"Narrow the network settings of workload {namespace} in stack {stack.name}: they make {', '.join(mine)}")
    return "; ".join(steps)

