"""The workloads' and the admission policy's rules: egress CIDRs a NetworkPolicy would refuse or read otherwise,
borrowing and lending within a workload type's queue cohort, and namespaces the GPU placement policy must not exempt.
Pure: config in, problems (with key paths) out; which pools serve a workload is checked on the model
(``components/aks_gpu/resolved/rules.py``)."""

from __future__ import annotations

import ipaddress
from collections import defaultdict

from aks_gpu import naming
from aks_gpu.config.models import PlatformConfig, WorkloadConfig
from aks_gpu.config.problems import Problem

P = naming.CONFIG_NAMESPACE


def workload_rules(config: PlatformConfig) -> list[Problem]:
    """What a workload's own keys must satisfy; which pools serve it is checked on the model (resolved/rules.py)."""
    problems = []
    for index, workload in enumerate(config.workloads):
        for rule_index, rule in enumerate(workload.network.allow_egress):
            problems += cidr_problems(rule.cidr, f"{P}:workloads[{index}].network.allowEgress[{rule_index}].cidr")
    return problems


def queueing_rules(config: PlatformConfig) -> list[Problem]:
    """Borrowing and lending need the queueing engine, and stay within what the teams of the same workload type hold:
    a team lends at most its own quota (Kueue's ClusterQueue webhook refuses a lendingLimit over nominalQuota,
    pkg/webhooks/clusterqueue_webhook.go validateLendingLimit in sigs.k8s.io/kueue@v0.17.0), and borrows at most what
    the others of its type can lend. Types never borrow from each other: each type is its own cohort."""
    problems = []
    by_type: dict[str, list[int]] = defaultdict(list)
    for index, workload in enumerate(config.workloads):
        by_type[workload.type].append(index)
    for index, workload in enumerate(config.workloads):
        path = f"{P}:workloads[{index}]"
        limits = {"borrowingLimit": workload.borrowing_limit, "lendingLimit": workload.lending_limit}
        if config.queueing is None:
            problems += [
                Problem(f"{path}.{key}", f"needs {P}:queueing (engine: kueue); without it each namespace has a static quota")
                for key, value in limits.items()
                if value is not None
            ]
            continue
        if workload.lending_limit is not None and workload.lending_limit > workload.gpu_quota:
            problems.append(
                Problem(
                    f"{path}.lendingLimit",
                    f"{workload.lending_limit} is more than the team's own gpuQuota {workload.gpu_quota}; it can lend "
                    "only its own GPUs",
                )
            )
        others = [config.workloads[i] for i in by_type[workload.type] if i != index]
        lendable = sum(lendable_gpus(other) for other in others)
        if workload.borrowing_limit and workload.borrowing_limit > lendable:
            problems.append(
                Problem(
                    f"{path}.borrowingLimit",
                    f"the other workloads of type {workload.type!r} lend {lendable} GPUs in all, so it can never borrow "
                    f"{workload.borrowing_limit}",
                    "warning",
                )
            )
    return problems


def lendable_gpus(workload: WorkloadConfig) -> int:
    """What a team of a cohort lends the others at most: its gpuQuota, or its lendingLimit when that is lower."""
    if workload.lending_limit is None:
        return workload.gpu_quota
    return min(workload.gpu_quota, workload.lending_limit)


def cidr_problems(cidr: str, path: str) -> list[Problem]:
    """An egress CIDR the API server would refuse (or read differently than written) in a NetworkPolicy ipBlock."""
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return [Problem(path, f"{cidr!r} is not an IPv4 or IPv6 network in CIDR notation (e.g. 10.20.0.0/16)")]
    if network.network_address != ipaddress.ip_address(cidr.partition("/")[0]):
        return [Problem(path, f"{cidr!r} has host bits set; it allows all of {network}", "warning")]
    return []


def admission_rules(config: PlatformConfig) -> list[Problem]:
    admission = config.admission
    actions = admission.validation_actions
    problems = []
    if not actions:
        problems.append(Problem(f"{P}:admission.validationActions", "needs at least one of Deny, Warn, Audit"))
    elif "Deny" in actions and "Warn" in actions:
        problems.append(
            Problem(f"{P}:admission.validationActions", "Deny and Warn may not be used together (Kubernetes refuses it)")
        )
    # No tenant namespace is exempt: a workload namespace outside the policy would have no GPU rules at all. (A
    # workload named like a namespace the stack exempts for its own agents is checked on the model.)
    workloads = {workload.name for workload in config.workloads}
    for name in admission.exempt_namespaces:
        if name in workloads:
            problems.append(
                Problem(
                    f"{P}:admission.exemptNamespaces",
                    f"{name} is a workload namespace; the GPU placement policy must apply there, remove it",
                )
            )
    for index, workload in enumerate(config.workloads):
        if workload.rdma and workload.pod_security == "restricted":
            problems.append(
                Problem(
                    f"{P}:workloads[{index}].rdma",
                    "RDMA needs the IPC_LOCK capability, which podSecurity restricted forbids; use baseline (the default)",
                )
            )
    for name in admission.gpu_namespaces:
        if name in workloads:
            problems.append(
                Problem(f"{P}:admission.gpuNamespaces", f"{name} is a workload namespace already; remove it", "warning")
            )
    return problems
