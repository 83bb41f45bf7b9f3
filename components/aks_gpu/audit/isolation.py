"""The isolation practice: every namespace that runs GPU pods has an unscoped GPU quota and a deny-all network
policy (``gpu-pod-unfenced``), and its summary (GPU requests, quota, policies, workload labels). Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
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

    summaries = []
    for namespace, members in sorted(by_namespace.items()):
        requests: dict[str, Fraction] = defaultdict(Fraction)
        for pod in members:
            for resource, value in pod.gpu_requests.items():
                requests[resource] += value
        limits = dict(sorted(unscoped[namespace].items())) if quotas is not None else None
        ingress, egress = denies.get(namespace, (False, False))
        deny_all = (ingress and egress) if policies is not None else None
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
            problems = []
            if quotas is not None:
                unfenced = [resource for resource in pod.gpu_requests if resource not in unscoped[namespace]]
                if unfenced:
                    scoped_note = (
                        f" (ResourceQuota {', '.join(scoped[namespace])} has scopes: it counts only the pods they select)"
                        if scoped[namespace]
                        else ""
                    )
                    problems.append(
                        "no ResourceQuota on " + ", ".join(f"requests.{resource}" for resource in unfenced) + scoped_note
                    )
            if policies is not None and not (ingress and egress):
                directions = [name for name, denied in (("ingress", ingress), ("egress", egress)) if not denied]
                problems.append(f"no NetworkPolicy that denies all {' and '.join(directions)}")
            if not problems:
                continue
            fix = (
                f"this is stack {stack.name}'s workload namespace: `pulumi up --stack {stack.name}` restores its "
                f"{QUOTA_NAME} and {DENY_ALL_POLICY}"
                if stack_workload and stack is not None
                else f"give the namespace a ResourceQuota on its GPU resource and the article's {DENY_ALL_POLICY} policy "
                "(every pod, Ingress and Egress, no rules), then allow only what it needs"
            )
            run.add(
                "gpu-pod-unfenced",
                "warn",
                f"pod requests {requests_shown(pod.gpu_requests)} in namespace {namespace}, which has {'; '.join(problems)}: "
                f"one team's jobs can take every GPU or reach the others'. Fix: {fix}",
                node=pod.node,
                namespace=namespace,
                pod=pod.name,
            )
    return tuple(summaries)


def _absent(snapshot: ClusterSnapshot, file: str, consequence: str) -> str:
    why = snapshot.not_collected.get(file)
    return f"{file} is not in the snapshot{f' ({why})' if why else ''}: {consequence}"
