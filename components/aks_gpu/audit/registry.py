"""Every finding ``aksgpu audit`` reports, said once: id, severity, the practice it belongs to, what it checks, what
to do, and which snapshot files it reads. The CLI help, the HTML report and the table of docs/audit.md are rendered from here
(``tests/audit/test_registry.py`` holds the docs to it).

The practices are the sections of Microsoft's *GPU best practices for AKS* (``ARTICLE_URL``), plus GPU health from
the AKS Node Problem Detector (``NPD_URL``) and ``aksgpu smi health`` (NVIDIA's Xid catalog and health checks), planned
disruption (``UPGRADE_URL``) and GPU queues on Kueue (``KUEUE_URL``). Finding ids are a contract (issue 15): other tools
match on them.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Literal

from aks_gpu.aks_facts import disruption_facts
from aks_gpu.cluster.snapshot import (
    CLUSTER_QUEUES_FILE,
    EVENTS_FILE,
    META_FILE,
    NETWORK_POLICIES_FILE,
    NODEPOOL_UPGRADES_FILE,
    NODEPOOLS_FILE,
    NODES_FILE,
    PODS_FILE,
    RESOURCE_QUOTAS_FILE,
    SMI_DIR,
    WORKLOADS_FILE,
)
from aks_gpu.gpu.health import FINDING_IDS as HEALTH_FINDING_IDS
from aks_gpu.naming import TEAM_ROLE_NAME

Severity = Literal["fail", "warn"]
_DISRUPTION = disruption_facts()

# What each check reads, as the snapshot names its files (components/aks_gpu/cluster/snapshot.py).
NODES = NODES_FILE
PODS = PODS_FILE
RESOURCE_QUOTAS = RESOURCE_QUOTAS_FILE
NETWORK_POLICIES = NETWORK_POLICIES_FILE
META = META_FILE
NODEPOOL_UPGRADES = NODEPOOL_UPGRADES_FILE
NODEPOOLS = NODEPOOLS_FILE
SMI = f"{SMI_DIR}/"
CLUSTER_QUEUES = CLUSTER_QUEUES_FILE
WORKLOADS = WORKLOADS_FILE
EVENTS = EVENTS_FILE


ARTICLE_URL = "https://learn.microsoft.com/azure/aks/best-practices-gpu"
NPD_URL = "https://learn.microsoft.com/azure/aks/node-problem-detector"
UPGRADE_URL = "https://learn.microsoft.com/azure/aks/upgrade-options"
# The AKS docs' Kueue overview: ClusterQueues as shared pools of GPU quota, LocalQueues, admission against quota.
KUEUE_URL = "https://learn.microsoft.com/azure/aks/kueue-overview"


@dataclass(frozen=True)
class Practice:
    id: str
    title: str
    article: str  # what the article asks, in a line
    source: str = ARTICLE_URL  # the public page the practice comes from


@dataclass(frozen=True)
class AuditCheck:
    """One finding id (or, for ``ids``, the family of ``aksgpu smi health`` ids judged the same way)."""

    id: str
    severity: str  # "fail", "warn", or "fail or warn" where each finding carries its own
    practice: str
    checks: str
    fix: str
    reads: tuple[str, ...]
    ids: tuple[str, ...] = ()  # the ids this entry stands for; empty: just ``id``

    @property
    def finding_ids(self) -> tuple[str, ...]:
        return self.ids or (self.id,)


PRACTICES: tuple[Practice, ...] = (
    Practice(
        "automatic",
        "Choose AKS Automatic or AKS Standard for GPU workloads",
        "AKS Automatic is the recommended default; its node auto-provisioning brings GPU nodes from Karpenter NodePools, "
        "and its defaults don't replace placement controls, validation and isolation",
    ),
    Practice(
        "placement",
        "Enforce GPU workload placement",
        "taint GPU nodes with <vendor>.com/gpu:NoSchedule so only GPU pods (with the toleration and a GPU limit) land there",
    ),
    Practice(
        "validation",
        "Validate GPU node pools",
        "a healthy device plugin DaemonSet exposes <vendor>.com/gpu as a schedulable resource on every GPU node",
    ),
    Practice(
        "node-image",
        "Keep GPU nodes on the latest node OS image",
        "node images carry the GPU driver, the Kubernetes-tested runtime and the security fixes: upgrade them regularly",
    ),
    Practice(
        "isolation",
        "Isolate GPU workloads in shared clusters",
        "one namespace per workload type, with a GPU quota and a deny-all network policy",
    ),
    Practice(
        "utilisation",
        "Use the GPUs you pay for",
        "misconfiguration leaves GPUs under-used; a GPU node no pod uses burns money (share GPUs with MIG where it fits)",
    ),
    Practice(
        "health",
        "GPU health",
        "hardware and fabric faults (ECC, Xid, lost GPUs, NVLink) stop jobs: the Node Problem Detector and SMI output show them",
        NPD_URL,
    ),
    Practice(
        "disruption",
        "Planned disruption",
        "GPU VMs are never live-migrated: a scheduled event or an upgrade stops their jobs, so see it coming and let "
        "the jobs checkpoint",
        UPGRADE_URL,
    ),
    Practice(
        "queueing",
        "Share GPU quota through queues",
        "with Kueue, a team's idle nominal GPUs are lent to the teams of its cohort and a job that does not fit waits "
        "in its queue: see what waits and why, and whose quota idles while others borrow",
        KUEUE_URL,
    ),
)
PRACTICE_BY_ID = {practice.id: practice for practice in PRACTICES}

# What to do with a node a GPU health finding names (a True Node Problem Detector GPU condition, an ``aksgpu smi
# health`` finding): said once here for the checks' "what to do" and each finding's remedy. Every critical finding's own
# advice comes down to drain, then reboot, reimage or a support case; every warning's to look again under load.
CRITICAL_GPU_FAULT_FIX = (
    "cordon the node (`kubectl cordon <node>`) and drain it, then repair it: reboot it, reimage it if that does not "
    "clear the fault, and open an Azure support case if it comes back"
)
GPU_WARNING_FIX = "check the node again under load; if the finding stays, drain the node and open an Azure support case"
_HEALTH_FIX = f"{CRITICAL_GPU_FAULT_FIX} (a critical finding); on a warning, {GPU_WARNING_FIX}"


def sentence(text: str) -> str:
    """``text`` as a sentence of its own: its first letter a capital."""
    return text[:1].upper() + text[1:]


def health_remedy(node: str, severity: Severity) -> str:
    """What to do with ``node`` for a GPU health finding of ``severity``, naming the node."""
    fix = CRITICAL_GPU_FAULT_FIX if severity == "fail" else GPU_WARNING_FIX
    return sentence(fix.replace("<node>", node))


CHECKS: tuple[AuditCheck, ...] = (
    AuditCheck(
        "nap-gpu-nodepool-untainted",
        "fail",
        "automatic",
        "every GPU NodePool of node auto-provisioning (karpenter.sh/v1, requirements on karpenter.azure.com/sku-gpu-*, the "
        "N family or GPU sizes) gives its nodes a NoSchedule <vendor>.com/gpu taint",
        "add the taint to the NodePool's spec.template.spec.taints (Karpenter puts it on every node it creates) and give "
        "GPU pods the matching toleration",
        (NODEPOOLS,),
    ),
    AuditCheck(
        "nap-gpu-nodepool-unbounded",
        "warn",
        "automatic",
        "every GPU NodePool has spec.limits on nodes or GPUs",
        "set spec.limits (nodes, nvidia.com/gpu) to what the budget and quota allow",
        (NODEPOOLS,),
    ),
    AuditCheck(
        "nap-gpu-nodepool-disrupts-jobs",
        "warn",
        "automatic",
        "every GPU NodePool keeps Karpenter off nodes that run jobs: consolidationPolicy WhenEmpty (or a budget of 0 "
        "nodes for Underutilized) and expireAfter Never (Karpenter's default 720h replaces nodes regardless of budgets)",
        "set consolidationPolicy WhenEmpty, a budget {nodes: '0', reasons: [Underutilized, Drifted]} and expireAfter "
        "Never on training NodePools",
        (NODEPOOLS,),
    ),
    AuditCheck(
        "gpu-node-untainted",
        "fail",
        "placement",
        "every GPU node carries a NoSchedule (or NoExecute) taint that keeps general pods off: the vendor's "
        "<vendor>.com/gpu key, or sku=gpu as AKS's own walkthrough uses (with --stack: the taints of the node's pool)",
        "taint the pool (`az aks nodepool update --node-taints nvidia.com/gpu=present:NoSchedule`: AKS puts a pool's "
        "taints on every node it creates) and give GPU pods the matching toleration",
        (NODES,),
    ),
    AuditCheck(
        "gpu-squatter",
        "fail",
        "placement",
        "every Running pod on a GPU node requests a GPU, or is a DaemonSet pod, a kubelet's static pod, or in "
        "kube-system or a namespace of the GPU stack",
        "move the pod to a CPU pool (a node selector, and no toleration of the GPU taint); taint the node if it is not "
        "(gpu-node-untainted); an admission policy that refuses such pods keeps it so",
        (NODES, PODS),
    ),
    AuditCheck(
        "device-plugin-missing",
        "fail",
        "validation",
        "every GPU node exposes a GPU resource (nvidia.com/gpu, amd.com/gpu, nvidia.com/mig-*) in its capacity, above "
        "zero (with --stack: the resource the node's pool exposes)",
        "deploy the vendor's device plugin DaemonSet (or GPU Operator) so that a pod of it runs on the node, and read "
        "that pod's log; `aksgpu validate` checks the plugin and the driver per node",
        (NODES,),
    ),
    AuditCheck(
        "node-image-stale",
        "warn",
        "node-image",
        "every GPU node's node image (label kubernetes.azure.com/node-image-version) is the latest AKS offers its pool "
        "where the snapshot has the pool's upgrade profile (nodepool-upgrades.json, `az aks nodepool get-upgrades`), "
        "else at most 60 days older than the snapshot's collectedAt (the version ends in its build date); the message "
        "says which rule judged",
        "upgrade the pool's node image (`az aks nodepool upgrade --node-image-only`), or set the cluster's node OS "
        "upgrade channel to NodeImage with a maintenance window so AKS does it",
        (NODES, META, NODEPOOL_UPGRADES),
    ),
    AuditCheck(
        "node-image-mixed",
        "warn",
        "node-image",
        "all GPU nodes of one pool (label kubernetes.azure.com/agentpool) run the same node image",
        "let the pool's node image upgrade finish, or run it (`az aks nodepool upgrade --node-image-only`): one image "
        "per pool means one GPU driver per pool",
        (NODES,),
    ),
    AuditCheck(
        "node-image-known-bad",
        "fail",
        "node-image",
        "no GPU node runs a node image known to break its GPU family (components/aks_gpu/data/gpu_node_images.yaml, "
        "each image with its report: 202607.02.0 on Ubuntu A10 nodes, Azure/AKS#5869); the family is the catalog's GPU "
        "model of the node's size (label node.kubernetes.io/instance-type)",
        "upgrade the pool's node image (`az aks nodepool upgrade --node-image-only`) to one past the bad image",
        (NODES,),
    ),
    AuditCheck(
        "node-image-below-gpu-minimum",
        "fail",
        "node-image",
        "no GPU node runs a node image older than its GPU family's minimum (components/aks_gpu/data/gpu_node_images.yaml: "
        "A10 sizes need 202606.08.1 or later, Azure/AKS#5875)",
        "upgrade the pool's node image (`az aks nodepool upgrade --node-image-only`)",
        (NODES,),
    ),
    AuditCheck(
        "gpu-pod-unfenced",
        "warn",
        "isolation",
        "every pod that requests GPUs runs in a namespace with a ResourceQuota on that GPU resource (requests.<resource>, "
        "no scopes) and fenced by its NetworkPolicies, weighed together: policies selecting every pod isolate its ingress "
        "and its egress, and no policy reopens it to every namespace, every address (0.0.0.0/0: the internet and the API "
        "server) or IMDS 169.254.169.254 (the message names each such policy and what it opens)",
        "give each namespace what its finding says it lacks: a ResourceQuota on its GPU resource, the article's "
        "deny-cross-namespace NetworkPolicy (then allow only the traffic it needs: DNS, its own namespace, named peers), "
        f"or both; delete or narrow a policy that reopens it, and bind teams to {TEAM_ROLE_NAME}, which writes no "
        "NetworkPolicy",
        (PODS, RESOURCE_QUOTAS, NETWORK_POLICIES),
    ),
    AuditCheck(
        "gpu-idle",
        "warn",
        "utilisation",
        "on every GPU node with GPUs allocatable, a pod that is not finished requests at least one of them",
        "let the cluster autoscaler remove idle nodes (autoscaling down to minCount 0), scale the pool down, or share "
        "the GPUs (MIG, time-slicing) so smaller jobs fill them",
        (NODES, PODS),
    ),
    AuditCheck(
        "gpu-condition",
        "fail or warn",
        "health",
        "no AKS Node Problem Detector GPU condition is True on a GPU node: GPUMissing, XIDErrors (GPUXIDErrors, "
        "XIDError), NVLinkStatusInactive, IBLinkFlapping, UnhealthyNvidiaDevicePlugin, UnhealthyNvidiaDCGMServices, "
        "NVIDIAGRIDStatusInvalid (NVIDIA GRID Status Invalid) fail, GPUClockThrottling warns (every spelling seen: "
        "components/aks_gpu/data/remediation.yaml, npd_gpu_checks)",
        _HEALTH_FIX,
        (NODES,),
    ),
    AuditCheck(
        "gpu-node-faulty-schedulable",
        "fail",
        "health",
        "no GPU node with a critical GPU fault (a True critical AKS Node Problem Detector GPU condition, or a critical "
        "finding of `aksgpu smi health` in its saved SMI output) still takes new GPU pods: it is cordoned "
        "(spec.unschedulable) or carries a NoSchedule/NoExecute taint GPU pods do not tolerate (the quarantine taint "
        "aks-gpu/gpu-quarantine; with --stack: any taint beyond its pool's own)",
        f"{CRITICAL_GPU_FAULT_FIX}; to have faulty nodes quarantined within minutes, set aks-gpu:remediation mode on "
        "(the quarantine engine)",
        (NODES, SMI),
    ),
    AuditCheck(
        "smi-health",
        "fail or warn",
        "health",
        "no finding of `aksgpu smi health` in the node's saved SMI output (smi/<node>.txt, as `aksgpu validate "
        "collect` saves it): a critical one fails, a warning warns",
        _HEALTH_FIX,
        (SMI,),
        ids=HEALTH_FINDING_IDS,
    ),
    AuditCheck(
        "node-vm-event-scheduled",
        "warn",
        "disruption",
        "no GPU node has an Azure scheduled event pending (the Node Problem Detector condition VMEventScheduled True: "
        "a Freeze, Reboot, Redeploy, Preempt or Terminate); GPU sizes are not live-migrated, so the event stops the "
        "jobs on the node",
        "checkpoint the jobs on the node now and drain it before the event (`kubectl drain <node> --ignore-daemonsets "
        "--delete-emptydir-data`), so they restart elsewhere from their checkpoint; a job that reads Azure Scheduled "
        "Events itself (IMDS) gets the notice too",
        (NODES,),
    ),
    AuditCheck(
        "node-vm-event-recent",
        "warn",
        "disruption",
        f"no GPU node had an Azure scheduled event announced in the window ({_DISRUPTION.events_window_hours} hours "
        "before collectedAt; AKS keeps events an hour) that has since run or been cancelled: a Node Problem Detector "
        "event FreezeScheduled, RebootScheduled, RedeployScheduled, PreemptScheduled, TerminateScheduled or "
        'VMEventScheduled on the node announcing one ("... Scheduled: <time>"), while VMEventScheduled is not True; '
        "with it True, the events are node-vm-event-scheduled's evidence",
        "prove the node's GPUs before long jobs go back to it (`aksgpu validate --stack <stack> --deep --node <node>`: "
        "the vendors' diagnostics), and restart the jobs it stopped from their last checkpoint",
        (NODES, EVENTS),
    ),
    AuditCheck(
        "node-auto-repaired",
        "fail or warn",
        "disruption",
        "no GPU node was taken back by AKS node auto-repair in the window (an event from aks-auto-repair: "
        "NodeRebootStart/End, NodeReimageStart/End, NodeRedeployStart/End): one repair sequence warns, with the "
        f"actions, the last one's time and message; more than {_DISRUPTION.auto_repair_max_repairs} (each begins "
        "with a reboot, counted with the event's count) fails: the repair did not hold, and the platform keeps taking "
        "the node back",
        "prove the node's GPUs before it takes long jobs again (`aksgpu validate --stack <stack> --deep --node <node>`); "
        f"if it was repaired more than {_DISRUPTION.auto_repair_max_repairs} time(s), cordon it (`kubectl cordon "
        "<node>`) and open an Azure support case with the events: a GPU that hangs the node comes back after every "
        "reboot and reimage",
        (NODES, EVENTS),
    ),
    AuditCheck(
        "node-auto-repair-failed",
        "fail",
        "disruption",
        "no GPU node has an AKS node auto-repair action that failed in the window (NodeRebootError, NodeReimageError, "
        "NodeRedeployError from aks-auto-repair); the message quotes the error AKS gave",
        "repair the node by hand as AKS's troubleshooting for node auto-repair errors says for the error code (reboot "
        "or reimage it: `az vmss restart` / `az vmss reimage` of its instance), or cordon it (`kubectl cordon <node>`) "
        "and open an Azure support case",
        (NODES, EVENTS),
    ),
    AuditCheck(
        "node-upgrade-blocked",
        "warn",
        "disruption",
        "no GPU node is held back by an upgrade that could not drain it: cordoned on its old node image with the label "
        "kubernetes.azure.com/upgrade-status=Quarantined (undrainableNodeBehavior Cordon)",
        "let the job that holds the node finish or checkpoint, or fix the PodDisruptionBudget that blocks the eviction; "
        "then remove the label (`kubectl label node <node> kubernetes.azure.com/upgrade-status-`) and run the "
        "upgrade again, as AKS's upgrade options say (Resolve undrainable nodes)",
        (NODES,),
    ),
    AuditCheck(
        "queue-workload-pending",
        "warn",
        "queueing",
        "no Kueue Workload (kueue.x-k8s.io/v1beta2) waits for quota: every one that is not finished has its "
        "QuotaReserved condition True; the message gives the condition's reason and message (e.g. \"couldn't assign "
        'flavors to pod set ...: insufficient unused quota ...")',
        "lower the job's GPUs, or make room for it: raise the team's gpuQuota or borrowingLimit, or the other teams' "
        "lendingLimit (or let the running jobs finish); a job larger than its cohort can ever lend never starts",
        (WORKLOADS, CLUSTER_QUEUES),
    ),
    AuditCheck(
        "queue-gpus-borrowed",
        "warn",
        "queueing",
        "no ClusterQueue uses more GPUs than its nominalQuota (status.flavorsReservation's borrowed, or its total "
        "above spec's nominalQuota): the message says how many it borrows of its borrowingLimit, on which flavor, "
        "and from which teams of its cohort (their idle nominal GPUs within their lendingLimit)",
        "expect the borrowed GPUs to be reclaimed when their owners submit jobs (reclaimWithinCohort preempts the "
        "borrower's workloads): checkpoint long jobs; a team that borrows all the time needs a larger gpuQuota",
        (CLUSTER_QUEUES,),
    ),
    AuditCheck(
        "queue-nominal-idle",
        "warn",
        "queueing",
        "no ClusterQueue leaves nominal GPUs unreserved while another ClusterQueue of its cohort borrows or has "
        "Workloads waiting: its idle GPUs are what the other team lacks (above its lendingLimit they cannot be lent)",
        "lower the idle team's gpuQuota (and raise the borrower's), or raise its lendingLimit so the other teams of "
        "its type may borrow what it leaves idle",
        (CLUSTER_QUEUES, WORKLOADS),
    ),
)

CHECK_BY_ID: dict[str, AuditCheck] = {finding: check for check in CHECKS for finding in check.finding_ids}
FINDING_IDS: tuple[str, ...] = tuple(CHECK_BY_ID)


def checks_of(practice: str) -> tuple[AuditCheck, ...]:
    return tuple(check for check in CHECKS if check.practice == practice)


def help_text(width: int = 114) -> str:
    """The findings as the CLI help lists them, grouped by practice, wrapped at ``width``."""
    lines: list[str] = []
    for practice in PRACTICES:
        lines.append(f"  {practice.title}:")
        for check in checks_of(practice.id):
            ids = ", ".join(check.finding_ids)
            # Finding ids hold hyphens: never break one across lines (a reader greps the help for an id).
            lines.extend(
                textwrap.wrap(
                    f"{ids} ({check.severity})", width, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
                )
            )
            lines.extend(textwrap.wrap(check.checks, width, initial_indent="        ", subsequent_indent="        "))
    return "\n".join(lines)


def markdown_table() -> str:
    """The table of findings in docs/audit.md."""
    rows = ["| id | severity | practice | passes when | reads |", "| --- | --- | --- | --- | --- |"]
    for check in CHECKS:
        ids = ", ".join(f"`{finding}`" for finding in check.finding_ids)
        reads = ", ".join(f"`{name}`" for name in check.reads)
        practice = PRACTICE_BY_ID[check.practice].title
        # Outside code spans, Markdown would take <vendor> for an HTML tag.
        checks = check.checks.replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| {ids} | {check.severity} | {practice} | {checks} | {reads} |")
    return "\n".join(rows)
