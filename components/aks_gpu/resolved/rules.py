"""The rules that need the resolved model: which pools serve a workload and what they expose, and which namespaces the
admission policy exempts. Pure: model in, problems (with the key paths a user edits) out. The rules over the config's
keys alone are in ``components/aks_gpu/config/rules/``; ``aks_gpu.resolved.stack`` runs both.
"""

from __future__ import annotations

from aks_gpu.config.models import StackConfig
from aks_gpu.config.problems import Problem
from aks_gpu.naming import CONFIG_NAMESPACE as P
from aks_gpu.resolved.exemptions import derived_exemptions
from aks_gpu.resolved.model import PlatformModel


def model_rules(model: PlatformModel) -> list[Problem]:
    return [*_workload_rules(model), *_exemption_rules(model)]


def _workload_rules(model: PlatformModel) -> list[Problem]:
    problems = []
    pool_names = {p.name for p in model.pools}
    for index, resolved in enumerate(model.workloads):
        workload, targets = resolved.config, resolved.pools
        path = f"{P}:workloads[{index}]"
        if workload.pool is not None and workload.pool not in pool_names:
            problems.append(
                Problem(
                    f"{path}.pool",
                    f"{workload.pool!r} is not a GPU pool of this stack ({', '.join(sorted(pool_names)) or 'none'})",
                )
            )
            continue
        if workload.pool is not None and targets and targets[0].workload != workload.type:
            problems.append(
                Problem(
                    f"{path}.type", f"{workload.type!r} differs from pool {workload.pool!r}'s workload {targets[0].workload!r}"
                )
            )
        if not targets:
            if workload.gpu_quota > 0:
                types = sorted({p.workload for p in model.pools})
                problems.append(
                    Problem(
                        f"{path}.type",
                        f"no GPU pool serves workload type {workload.type!r}, so gpuQuota {workload.gpu_quota} "
                        f"could never be used; pool workload types are: {', '.join(types) or 'none'}",
                    )
                )
            continue
        resources = sorted({p.resource.name for p in targets})
        if len(resources) > 1:
            problems.append(
                Problem(
                    f"{path}.pool",
                    f"the pools of type {workload.type!r} expose different resources ({', '.join(resources)}); name one pool",
                )
            )
        if workload.nvme_volume and not any(p.config.nvme_cache for p in targets):
            problems.append(Problem(f"{path}.nvmeVolume", "none of the workload's pools has nvmeCache: true"))
        capacity = [p.resource.count_per_node * p.config.max_count for p in targets if p.resource.count_per_node is not None]
        if capacity and workload.gpu_quota > sum(capacity):
            problems.append(
                Problem(
                    f"{path}.gpuQuota",
                    f"{workload.gpu_quota} is more than its pools can ever offer ({sum(capacity)} at maxCount)",
                    "warning",
                )
            )
    return problems


def _exemption_rules(model: PlatformModel) -> list[Problem]:
    """No tenant namespace is exempt: a workload named like a namespace the stack exempts for its own agents would have
    no GPU rules at all."""
    config = model.config
    network_policy = config.cluster.network_policy if isinstance(config, StackConfig) else None
    derived = {item.namespace for item in derived_exemptions(config, network_policy)}
    return [
        Problem(
            f"{P}:workloads[{index}].name",
            f"{workload.name!r} is a namespace the admission policy exempts for the platform's own agents; "
            "name the workload namespace something else",
        )
        for index, workload in enumerate(config.workloads)
        if workload.name in derived
    ]
