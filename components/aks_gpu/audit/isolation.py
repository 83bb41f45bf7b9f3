"""The isolation practice: every namespace that runs GPU pods has an unscoped GPU quota and a deny-all network
policy (``gpu-pod-unfenced``), and its summary (GPU requests, quota, policies, workload labels). Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from aks_gpu.audit.judging import Run, requests_shown
from aks_gpu.audit.report import NamespaceSummary
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.cluster.inventory import NamespaceInfo, PodInfo, PolicyInfo, QuotaInfo
from aks_gpu.cluster.snapshot import NAMESPACES_FILE, NETWORK_POLICIES_FILE, RESOURCE_QUOTAS_FILE, ClusterSnapshot
from aks_gpu.kube.workload_manifests import ARTICLE_WORKLOAD_LABEL, DENY_ALL_POLICY, PSA_PREFIX
from aks_gpu.naming import QUOTA_NAME, WORKLOAD_LABEL


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
        run.gap("isolation", ("gpu-pod-unfenced",), _absent(snapshot, RESOURCE_QUOTAS_FILE, "GPU quotas are not checked"))
    if policies is None:
        missing_files.append(NETWORK_POLICIES_FILE)
        run.gap(
            "isolation",
            ("gpu-pod-unfenced",),
            _absent(snapshot, NETWORK_POLICIES_FILE, "deny-all network policies are not checked"),
        )
    if namespaces is None:
        run.gap(
            "isolation",
            (),
            _absent(snapshot, NAMESPACES_FILE, "the namespaces' workload and Pod Security labels are not shown"),
        )
    if len(missing_files) < 2:
        run.checked.add("gpu-pod-unfenced")

    fences = _fences(quotas, policies)
    summaries = []
    for namespace, members in sorted(by_namespace.items()):
        fence = fences.get(namespace, _Fence())
        requests: dict[str, Fraction] = defaultdict(Fraction)
        for pod in members:
            for resource, value in pod.gpu_requests.items():
                requests[resource] += value
        limits = dict(sorted(fence.quota.items())) if quotas is not None else None
        # The table's "deny-all" and the finding's "no NetworkPolicy that denies all ..." are both fence.deny_all.
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
            if not unquoted and not open_to:
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
                risks.append("its pods can reach other teams' workloads")
            run.add(
                "gpu-pod-unfenced",
                "warn",
                f"pod requests {requests_shown(pod.gpu_requests)} in namespace {namespace}, which has {'; '.join(problems)}: "
                f"{' and '.join(risks)}",
                _fix(unquoted, bool(open_to), stack if stack_workload else None),
                node=pod.node,
                namespace=namespace,
                pod=pod.name,
            )
    return tuple(summaries)


@dataclass(frozen=True)
class _Fence:
    """What fences one namespace in: its unscoped GPU quotas (resource -> hard limit), the names of its scoped GPU
    quotas, and whether its policies together deny all ingress and all egress."""

    quota: Mapping[str, str] = field(default_factory=dict)
    scoped: tuple[str, ...] = ()
    denies_ingress: bool = False
    denies_egress: bool = False

    @property
    def deny_all(self) -> bool:
        return self.denies_ingress and self.denies_egress

    @property
    def open_directions(self) -> tuple[str, ...]:
        return tuple(name for name, denied in (("ingress", self.denies_ingress), ("egress", self.denies_egress)) if not denied)


def _fences(quotas: Sequence[QuotaInfo] | None, policies: Sequence[PolicyInfo] | None) -> dict[str, _Fence]:
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
    denies: dict[str, tuple[bool, bool]] = {}
    for policy in policies or ():
        ingress, egress = denies.get(policy.namespace, (False, False))
        denies[policy.namespace] = (ingress or policy.denies_ingress, egress or policy.denies_egress)
    return {
        namespace: _Fence(dict(unscoped[namespace]), tuple(scoped[namespace]), *denies.get(namespace, (False, False)))
        for namespace in set(unscoped) | set(scoped) | set(denies)
    }


def _fix(unquoted: Sequence[str], open_to: bool, stack: StackExpectations | None) -> str:
    """What to do about exactly what the namespace lacks: never a policy it already has, nor a quota."""
    if stack is not None:
        restored = " and ".join(name for name, lacking in ((QUOTA_NAME, bool(unquoted)), (DENY_ALL_POLICY, open_to)) if lacking)
        return f"Run `pulumi up --stack {stack.name}`: this is the stack's workload namespace, and that restores its {restored}"
    steps = []
    if unquoted:
        steps.append("a ResourceQuota on " + ", ".join(f"requests.{resource}" for resource in unquoted) + " (no scopes)")
    if open_to:
        steps.append(
            f"the article's {DENY_ALL_POLICY} NetworkPolicy (every pod, Ingress and Egress, no rules), then allow only "
            "what it needs"
        )
    return "Give the namespace " + " and ".join(steps)


def _absent(snapshot: ClusterSnapshot, file: str, consequence: str) -> str:
    why = snapshot.not_collected.get(file)
    return f"{file} is not in the snapshot{f' ({why})' if why else ''}: {consequence}"
