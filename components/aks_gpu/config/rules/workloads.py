"""The workloads' and the admission policy's rules: egress CIDRs a NetworkPolicy would refuse or read otherwise,
and namespaces the GPU placement policy must not exempt. Pure: config in, problems (with key paths) out; which pools
serve a workload is checked on the model (``components/aks_gpu/resolved/rules.py``)."""

from __future__ import annotations

import ipaddress

from aks_gpu import naming
from aks_gpu.config.models import PlatformConfig
from aks_gpu.config.problems import Problem

P = naming.CONFIG_NAMESPACE


def workload_rules(config: PlatformConfig) -> list[Problem]:
    """What a workload's own keys must satisfy; which pools serve it is checked on the model (resolved/rules.py)."""
    problems = []
    for index, workload in enumerate(config.workloads):
        for rule_index, rule in enumerate(workload.network.allow_egress):
            problems += cidr_problems(rule.cidr, f"{P}:workloads[{index}].network.allowEgress[{rule_index}].cidr")
    return problems


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
