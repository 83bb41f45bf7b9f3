"""Rules that span keys: what pydantic's per-field checks cannot see, and what Azure would only refuse
halfway through a deployment. Pure: config and catalog in, problems (with key paths) out.

``check_rules`` runs them in one order (the order their problems are reported in), by subject: ``cluster`` (names,
networks, tags, versions), ``pools`` (GPU sizes, drivers, upgrades, storage), ``workloads`` (egress, queueing, admission) and
``monitoring`` (monitoring, remediation); the names that must be unique across sections are checked here.

Rules that need the resolved model (what each pool exposes, which namespaces the admission policy exempts) run on it,
in ``components/aks_gpu/resolved/rules.py``; ``aks_gpu.resolved.stack`` runs both.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

from aks_gpu import naming
from aks_gpu.aks_facts import kubernetes_calendar
from aks_gpu.catalog import Catalog
from aks_gpu.config.models import PlatformConfig, StackConfig
from aks_gpu.config.problems import Problem
from aks_gpu.config.rules.cluster import cluster_rules, kubernetes_version_problems
from aks_gpu.config.rules.limits import limit_rules
from aks_gpu.config.rules.monitoring import monitoring_rules, remediation_rules
from aks_gpu.config.rules.pools import amd_operator_rules, pool_rules
from aks_gpu.config.rules.provisioning import provisioning_rules
from aks_gpu.config.rules.workloads import admission_rules, cidr_problems, queueing_rules, workload_rules

__all__ = ["check_rules", "cidr_problems"]

P = naming.CONFIG_NAMESPACE


def check_rules(config: PlatformConfig, catalog: Catalog, *, today: dt.date) -> list[Problem]:
    """Every cross-key problem of a stack (or, for a component, of the sections it was given). ``today`` is the
    day the Kubernetes version is checked against the AKS release calendar (the loader passes the real date)."""
    problems: list[Problem] = []
    if isinstance(config, StackConfig):
        problems += cluster_rules(config)
        problems += limit_rules(config)
        if not config.cluster.existing:
            problems += kubernetes_version_problems(config.cluster, today, kubernetes_calendar())
    for index, pool in enumerate(config.gpu_pools):
        problems += pool_rules(pool, f"{P}:gpuPools[{index}]", config, catalog)
    problems += provisioning_rules(config)
    problems += _duplicates(config)
    problems += workload_rules(config)
    problems += queueing_rules(config)
    problems += admission_rules(config)
    problems += amd_operator_rules(config)
    problems += monitoring_rules(config)
    problems += remediation_rules(config)
    return problems


def _duplicates(config: PlatformConfig) -> list[Problem]:
    problems = []
    pool_names = Counter(p.name for p in config.gpu_pools)
    seen: set[str] = set()
    system_pool = config.cluster.system_pool.name if isinstance(config, StackConfig) else None
    for index, pool in enumerate(config.gpu_pools):
        if pool_names[pool.name] > 1 and pool.name in seen:
            problems.append(Problem(f"{P}:gpuPools[{index}].name", f"{pool.name!r} is used by another pool"))
        seen.add(pool.name)
        if pool.name == system_pool:
            problems.append(Problem(f"{P}:gpuPools[{index}].name", f"{pool.name!r} is the system pool's name"))
    names: set[str] = set()
    for index, workload in enumerate(config.workloads):
        if workload.name in names:
            problems.append(Problem(f"{P}:workloads[{index}].name", f"{workload.name!r} is used by another workload"))
        names.add(workload.name)
    return problems
