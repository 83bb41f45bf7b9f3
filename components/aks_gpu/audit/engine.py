"""The audit itself: a ``ClusterSnapshot`` (and, with ``--stack``, what the stack expects) in, an ``AuditReport`` out.
Pure: no I/O, no clock (the snapshot's ``collectedAt`` is "now").

Each practice of ``registry`` is judged from the files it reads, by its own module (``placement``, ``node_images``,
``isolation``, ``utilisation``, ``health``, ``disruption``, ``queueing``), into one ``judging.Run``; the results are
``report``'s. A file the snapshot lacks (``resourcequotas.json``, ``networkpolicies.json``, ``namespaces.json``,
``meta.json``, ``clusterqueues.json``, ``workloads.json``, ``events.json``, a node's ``smi/<node>.txt``) makes
what depends on it "not checked" in the report, with the reason and how many objects it concerns, never "passed".

Speed: one pass over the nodes, one over the pods (indexed by node), one over quotas and policies; each node's SMI
output is read once (``read_smi_and_health``), so the work grows linearly with the cluster.
"""

from __future__ import annotations

from collections import defaultdict

from aks_gpu.audit.disruption import judge_disruption
from aks_gpu.audit.health import judge_faulty_schedulable, judge_health
from aks_gpu.audit.isolation import judge_isolation
from aks_gpu.audit.judging import Commands, Run
from aks_gpu.audit.nap import judge_nap
from aks_gpu.audit.node_images import judge_node_images
from aks_gpu.audit.placement import judge_placement, judge_validation
from aks_gpu.audit.prices import INSTANCE_TYPE_LABELS, REGION_LABELS, first_label
from aks_gpu.audit.queueing import judge_queueing
from aks_gpu.audit.registry import CHECK_BY_ID, CHECKS, NODES, PRACTICES
from aks_gpu.audit.report import AuditReport, IdleNode
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.audit.utilisation import judge_utilisation, pool_summaries
from aks_gpu.cluster.inventory import (
    PodInfo,
    check_shapes,
    read_gpu_nodes,
    read_namespaces,
    read_pods,
    read_policies,
    read_quotas,
)
from aks_gpu.cluster.snapshot import (
    CLUSTER_QUEUES_FILE,
    EVENTS_FILE,
    NAMESPACES_FILE,
    NETWORK_POLICIES_FILE,
    NODEPOOLS_FILE,
    NODES_FILE,
    PODS_FILE,
    RESOURCE_QUOTAS_FILE,
    WORKLOADS_FILE,
    ClusterSnapshot,
    parse_rfc3339,
)


def _nothing_to_judge(run: Run, node_count: int) -> None:
    """No GPU node: nothing fails, but no node practice was judged either, and a kubeconfig pointed at the wrong
    cluster looks exactly like this. Every finding read off the nodes is reported not checked, never passed."""
    reason = (
        f"no GPU node among the {node_count} node(s) (none has GPU capacity or a GPU label): nothing to judge; "
        "is this the cluster you meant?"
    )
    for practice in PRACTICES:
        checks = [check for check in CHECKS if check.practice == practice.id and NODES in check.reads]
        ids = [finding for check in checks for finding in check.finding_ids]
        if ids:
            run.gap(practice.id, ids, reason)
            run.checked.difference_update(ids)


def run_audit(snapshot: ClusterSnapshot, stack: StackExpectations | None = None, *, shapes_checked: bool = False) -> AuditReport:
    """Every finding of ``registry`` over ``snapshot``. Raises ``SnapshotError`` for an object of the wrong shape.

    ``shapes_checked``: the snapshot comes from ``read_snapshot`` or the probe, which check every object's shape as
    they read it; the audit then does not check again (a tenth of its time at 1,000 nodes)."""
    if not shapes_checked:
        check_shapes(
            (
                (NODES_FILE, "Node", snapshot.nodes),
                (PODS_FILE, "Pod", snapshot.pods),
                (NAMESPACES_FILE, "Namespace", snapshot.namespaces),
                (RESOURCE_QUOTAS_FILE, "ResourceQuota", snapshot.resourcequotas),
                (NETWORK_POLICIES_FILE, "NetworkPolicy", snapshot.networkpolicies),
                (NODEPOOLS_FILE, "NodePool", snapshot.nodepools),
                (CLUSTER_QUEUES_FILE, "ClusterQueue", snapshot.clusterqueues),
                (WORKLOADS_FILE, "Workload", snapshot.workloads),
                (EVENTS_FILE, "Event", snapshot.events),
            )
        )
    extra = stack.resources if stack else frozenset()
    nodes = read_gpu_nodes(snapshot.nodes, stack.pool_vendors if stack else None, extra)
    pods = read_pods(snapshot.pods, extra)
    quotas = read_quotas(snapshot.resourcequotas, extra) if snapshot.resourcequotas is not None else None
    policies = read_policies(snapshot.networkpolicies) if snapshot.networkpolicies is not None else None
    namespaces = read_namespaces(snapshot.namespaces) if snapshot.namespaces is not None else None
    collected = parse_rfc3339(snapshot.collected_at) if snapshot.collected_at else None

    node_names = {node.name for node in nodes}
    on_node: dict[str, list[PodInfo]] = defaultdict(list)
    for pod in pods:
        if pod.node in node_names and not pod.finished:
            on_node[pod.node].append(pod)

    run = Run()
    commands = Commands(stack)
    judge_nap(run, snapshot.nodepools)
    judge_placement(run, nodes, on_node, stack, commands)
    judge_validation(run, nodes, stack)
    judge_node_images(run, nodes, collected, commands, snapshot)
    namespace_summaries = judge_isolation(run, pods, quotas, policies, namespaces, stack, snapshot)
    idle = judge_utilisation(run, nodes, on_node, commands)
    idle_nodes = tuple(
        IdleNode(
            node.name,
            node.pool,
            first_label(node.labels, INSTANCE_TYPE_LABELS),
            first_label(node.labels, REGION_LABELS),
            node.gpus_capacity,
        )
        for node in nodes
        if node.name in idle
    )
    faulty, judged, drivers = judge_health(run, nodes, snapshot, stack)
    judge_faulty_schedulable(run, nodes, faulty, judged, stack)
    auto_repairs = judge_disruption(run, nodes, snapshot, collected, stack)
    queues = judge_queueing(run, snapshot, extra)
    if not nodes:
        _nothing_to_judge(run, len(snapshot.nodes))

    order = {check.id: number for number, check in enumerate(CHECKS)}
    practice_order = {practice.id: number for number, practice in enumerate(PRACTICES)}
    findings = sorted(
        run.findings,
        key=lambda f: (
            practice_order[f.practice],
            order[CHECK_BY_ID[f.id].id],
            f.node or "",
            f.namespace or "",
            f.pod or "",
            f.id,
            f.message,
        ),
    )
    registry_order = [finding for check in CHECKS for finding in check.finding_ids]
    return AuditReport(
        findings=tuple(findings),
        pools=pool_summaries(nodes, on_node, idle, stack, drivers),
        namespaces=namespace_summaries,
        checked=tuple(finding for finding in registry_order if finding in run.checked),
        not_checked=tuple(run.gaps),
        gpu_nodes=len(nodes),
        collected_at=snapshot.collected_at,
        stack=stack.name if stack else None,
        cluster=dict(snapshot.cluster),
        idle=idle_nodes,
        queues=queues,
        auto_repairs=auto_repairs,
    )
