"""The utilisation practice: GPU nodes none of whose GPUs is requested (``gpu-idle``), paid for and idle, and the
summary per pool (GPUs allocatable and requested, idle nodes, node images). Pure."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction

from aks_gpu.audit.judging import Commands, Run, count_shown
from aks_gpu.audit.report import PoolSummary
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.cluster.inventory import GpuNode, PodInfo


def judge_utilisation(
    run: Run, nodes: Sequence[GpuNode], on_node: Mapping[str, Sequence[PodInfo]], commands: Commands
) -> set[str]:
    run.checked.add("gpu-idle")
    idle: set[str] = set()
    for node in nodes:
        exposed = {name: value for name, value in node.capacity.items() if value > 0}
        if not exposed:
            continue  # device-plugin-missing says it
        here = on_node.get(node.name, ())
        if any(pod.gpus > 0 for pod in here):
            continue
        idle.add(node.name)
        gpus = ", ".join(f"{count_shown(value)} {name}" for name, value in sorted(exposed.items()))
        allocatable = node.gpus_allocatable
        short = (
            f" (only {count_shown(allocatable)} allocatable: the device plugin marks the others unhealthy)"
            if allocatable < node.gpus_capacity
            else ""
        )
        pods = f"{len(here)} pod(s) run there, none asks for a GPU" if here else "no pod runs there"
        autoscale = commands.nodepool("update", node.pool, " --enable-cluster-autoscaler --min-count 0 --max-count <n>")
        run.add(
            "gpu-idle",
            "warn",
            f"GPU node of pool {node.pool}: none of its {gpus} is requested{short} ({pods}): the node is paid for and "
            "idle",
            f"Let the cluster autoscaler remove the node ({autoscale}), scale the pool down, or share the GPUs (MIG, "
            "time-slicing) so smaller jobs fill them",
            node=node.name,
        )
    return idle


def pool_summaries(
    nodes: Sequence[GpuNode],
    on_node: Mapping[str, Sequence[PodInfo]],
    idle: set[str],
    stack: StackExpectations | None,
    drivers: Mapping[str, str],
) -> tuple[PoolSummary, ...]:
    """Per pool: GPUs allocatable and requested, idle nodes, node images (node labels) and GPU drivers (``drivers``:
    what each node's SMI output shows)."""
    grouped: dict[str, list[GpuNode]] = defaultdict(list)
    for node in nodes:
        grouped[node.pool].append(node)
    summaries = []
    for pool, members in sorted(grouped.items()):
        allocatable: dict[str, Fraction] = defaultdict(Fraction)
        requested: dict[str, Fraction] = defaultdict(Fraction)
        for node in members:
            for resource, value in node.allocatable.items():
                allocatable[resource] += value
            for pod in on_node.get(node.name, ()):
                for resource, value in pod.gpu_requests.items():
                    requested[resource] += value
        resources = {
            name: (allocatable.get(name, Fraction(0)), requested.get(name, Fraction(0)))
            for name in sorted(set(allocatable) | set(requested))
        }
        vendors = sorted({node.vendor for node in members if node.vendor})
        stack_pools = {node.stack_pool for node in members if node.stack_pool}
        expected = stack.pools[next(iter(stack_pools))] if stack is not None and len(stack_pools) == 1 else None
        summaries.append(
            PoolSummary(
                pool=pool,
                vendor=", ".join(vendors) or None,
                gpu_nodes=len(members),
                gpus_capacity=sum((node.gpus_capacity for node in members), Fraction(0)),
                gpus_allocatable=sum(allocatable.values(), Fraction(0)),
                gpus_requested=sum(requested.values(), Fraction(0)),
                idle_nodes=sum(1 for node in members if node.name in idle),
                resources=resources,
                node_images=dict(sorted(Counter(str(node.image) for node in members if node.image).items())),
                driver_versions=dict(sorted(Counter(drivers[node.name] for node in members if node.name in drivers).items())),
                expected_resource=expected.resource if expected else None,
                expected_per_node=expected.count_per_node if expected else None,
            )
        )
    return tuple(summaries)
