"""The health practice: Node Problem Detector GPU conditions and each node's SMI health findings, with what could not
be read as gaps (never passes), and a node with a critical fault that still takes GPU work
(``gpu-node-faulty-schedulable``). Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from aks_gpu.audit.judging import Run, listed_names
from aks_gpu.audit.registry import CHECK_BY_ID
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.cluster.inventory import FENCING_EFFECTS, GpuNode
from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.gpu.findings import by_node
from aks_gpu.gpu.health import read_smi_and_health
from aks_gpu.naming import INSTANCE_TYPE_LABEL, QUARANTINE_TAINT_KEY, SPOT_TAINT_KEY

# SMI health ids that name another vendor's hardware, so a node's output not judging them is no gap. From the id
# table of components/aks_gpu/gpu/health/__init__.py: uncorrectable RAS is AMD's reading (NVIDIA's is ecc-uncorrectable);
# row remapping and dynamic page retirement (NVIDIA's memory error management docs), NVLink and the NVSwitch
# fabric are NVIDIA's.
_OTHER_VENDORS_IDS: dict[str, frozenset[str]] = {
    "nvidia": frozenset({"ras-uncorrectable"}),
    # gpu-reset-required reads NVIDIA's driver, NVML and nvidia-smi (components/aks_gpu/gpu/health/).
    "amd": frozenset(
        {
            "row-remap-failure",
            "row-remap-pending",
            "retired-pages-pending",
            "gpu-reset-required",
            "nvlink-inactive",
            "fabric-not-ready",
        }
    ),
}


def judge_health(
    run: Run, nodes: Sequence[GpuNode], snapshot: ClusterSnapshot, stack: StackExpectations | None
) -> tuple[dict[str, list[str]], list[str], dict[str, str]]:
    """Judges the health findings. Returns, for ``gpu-node-faulty-schedulable``, the nodes with a critical fault (node ->
    what it is) and the nodes whose health was judged at all (an NPD GPU condition, or readable SMI output); and, for
    the pool summaries, the GPU driver each node's SMI output shows (node -> version), read as ``aksgpu validate``
    reads it (the driver version of ``read_smi_and_health``'s SMI report), never guessed from the node image."""
    faulty: dict[str, list[str]] = defaultdict(list)
    drivers: dict[str, str] = {}
    judged: list[str] = []
    no_output: list[str] = []
    exec_failed: list[str] = []
    unreadable: list[str] = []
    incomplete: list[str] = []
    first_incomplete: str | None = None
    no_conditions: list[str] = []
    # Nodes whose output was read but does not show what some health ids need (nvidia-smi -q -x carries no Xid
    # event and no NVLink state): those ids are not checked there, not passed.
    unjudged: dict[tuple[str, ...], list[str]] = defaultdict(list)
    health_ids = CHECK_BY_ID["ecc-uncorrectable"].finding_ids
    first_note: str | None = None
    first_unreadable: str | None = None
    for node in nodes:
        if node.conditions:
            run.checked.add("gpu-condition")
            judged.append(node.name)
        else:
            no_conditions.append(node.name)
        for condition in node.conditions:
            if not condition.active:
                continue
            if condition.severity == "critical":
                faulty[node.name].append(f"Node Problem Detector {condition.type}=True")
            detail = f"{condition.reason or 'no reason given'}{f': {condition.message}' if condition.message else ''}"
            run.add_health(
                "gpu-condition",
                "fail" if condition.severity == "critical" else "warn",
                f"Node Problem Detector condition {condition.type}=True ({detail}): {condition.advice}",
                node.name,
            )
        text = snapshot.smi.get(node.name)
        if text is None:
            note = snapshot.exec_errors.get(node.name)
            if note:
                exec_failed.append(node.name)
                first_note = first_note or note
            else:
                no_output.append(node.name)
            continue
        try:
            smi, health = read_smi_and_health(text, node.vendor or "auto", vm_size=node.labels.get(INSTANCE_TYPE_LABEL))
        except Exception as error:  # noqa: BLE001 - one node's output must not stop the audit of every other node
            unreadable.append(node.name)
            first_unreadable = first_unreadable or f"the parser failed ({type(error).__name__}: {str(error)[:200]})"
            continue
        if smi.driver_version:
            drivers[node.name] = smi.driver_version
        if health.unreadable is not None or not health.checked:
            unreadable.append(node.name)
            first_unreadable = first_unreadable or health.unreadable or "it shows no GPU health data"
            continue
        run.checked.update(health.checked)
        judged.append(node.name)
        if health.incomplete is not None or health.not_checked:
            # Read in part (cut short, rows or fields it could not read): what was not read is a gap, never a pass.
            incomplete.append(node.name)
            first_incomplete = first_incomplete or health.incomplete or "; ".join(
                f"{entry.id} on GPU {entry.gpu or '?'}: {entry.reason}" for entry in health.not_checked[:2]
            )
        vendor = health.vendor or node.vendor
        skipped = _OTHER_VENDORS_IDS.get(vendor, frozenset()) if vendor else frozenset()
        missing = tuple(id_ for id_ in health_ids if id_ not in health.checked and id_ not in skipped)
        if missing:
            unjudged[missing].append(node.name)
        # One line per node and finding, naming every GPU it was found on (aks_gpu.gpu.findings).
        for merged in by_node(health.findings):
            if merged.severity == "critical":
                on = ", ".join(merged.gpus)
                faulty[node.name].append(f"{merged.id} on GPU {on}" if on else merged.id)
            run.add_health(merged.id, "fail" if merged.severity == "critical" else "warn", merged.text(), node.name)

    collect = (
        f"`aksgpu validate collect --stack {stack.name} --out DIR`"
        if stack
        else "`aksgpu audit collect --out DIR`"
    )
    if no_output:
        run.gap(
            "health",
            health_ids,
            f"no SMI output in the snapshot for {listed_names(no_output)} (smi/<node>.txt: {collect} saves nvidia-smi -q -x "
            "of every GPU node, or kubectl exec it into the file)",
            len(no_output),
        )
    if exec_failed:
        run.gap(
            "health",
            health_ids,
            f"the SMI command failed on {listed_names(exec_failed)} (smi/<node>.error: {first_note})",
            len(exec_failed),
        )
    if unreadable:
        run.gap(
            "health",
            health_ids,
            f"the SMI output of {listed_names(unreadable)} gives no health data ({first_unreadable})",
            len(unreadable),
        )
    if incomplete:
        run.gap(
            "health",
            health_ids,
            f"the SMI output of {listed_names(incomplete)} was not read whole ({first_incomplete})",
            len(incomplete),
        )
    for missing, names in unjudged.items():
        xid = (
            " (Xid events are in the kernel log, dmesg or journalctl -k, not in nvidia-smi -q; save it beside the SMI "
            "output in smi/<node>.txt, or read the Node Problem Detector's XIDErrors condition)"
            if "xid" in missing
            else ""
        )
        run.gap(
            "health",
            missing,
            f"the SMI output of {listed_names(names)} does not show what these need{xid}",
            len(names),
        )
    if no_conditions:
        # Where AKS runs no NPD GPU check at all, say so: the GPU Operator's pools and AMD pools (gpuDriver None).
        unmonitored = [name for name in no_conditions if _no_npd_gpu_checks(nodes, name, stack)]
        others = [name for name in no_conditions if name not in unmonitored]
        if unmonitored:
            run.gap(
                "health",
                ("gpu-condition",),
                f"{listed_names(unmonitored)} run a GPU driver AKS does not install (gpuDriver None: the NVIDIA GPU Operator's "
                "driver, or an AMD pool): AKS's Node Problem Detector runs no GPU check there, so no condition will ever "
                "show; the exporters' health alerts and `aksgpu smi health` are what watch these GPUs",
                len(unmonitored),
            )
        if others:
            run.gap(
                "health",
                ("gpu-condition",),
                f"no Node Problem Detector GPU condition on {listed_names(others)} (AKS sets them only on the GPU sizes it "
                "monitors, and not with --gpu-driver none)",
                len(others),
            )
    return faulty, judged, drivers


def _no_npd_gpu_checks(nodes: Sequence[GpuNode], name: str, stack: StackExpectations | None) -> bool:
    node = next(node for node in nodes if node.name == name)
    pool = stack.pools.get(node.stack_pool or "") if stack is not None else None
    if pool is not None:
        return not pool.npd_gpu_checks
    # Without the stack: AKS installs no AMD driver, so an AMD node never gets AKS's NPD GPU checks.
    return node.vendor == "amd"


# ---------------------------------------------------------------- faulty but schedulable

# Taints GPU pods carry tolerations for, so they fence nothing off from GPU work: the vendors' GPU taints (and the
# sku=gpu of AKS's own walkthrough), and AKS's spot taint.
_GPU_WORK_TOLERATES = frozenset({"nvidia.com/gpu", "amd.com/gpu", "sku", SPOT_TAINT_KEY})


def _fenced_from_gpu_work(node: GpuNode, stack: StackExpectations | None) -> str | None:
    """Why new GPU pods cannot land on ``node`` (cordoned, or a taint they do not tolerate), or None."""
    if node.unschedulable:
        return "cordoned"
    pool = stack.pools.get(node.stack_pool or "") if stack is not None else None
    own = {key for key, _, _ in pool.taints} if pool is not None else set()
    for taint in node.taints:
        if taint.effect not in FENCING_EFFECTS:
            continue
        if taint.key == QUARANTINE_TAINT_KEY or (taint.key not in _GPU_WORK_TOLERATES and taint.key not in own):
            return f"tainted {taint}"
    return None


def judge_faulty_schedulable(
    run: Run,
    nodes: Sequence[GpuNode],
    faulty: Mapping[str, Sequence[str]],
    judged: Sequence[str],
    stack: StackExpectations | None,
) -> None:
    if not judged:
        if nodes:
            run.gap(
                "health",
                ("gpu-node-faulty-schedulable",),
                "no node's GPU health was judged (no Node Problem Detector GPU condition, no readable SMI output): "
                "which node is faulty is unknown",
                len(nodes),
            )
        return
    run.checked.add("gpu-node-faulty-schedulable")
    for node in nodes:
        faults = faulty.get(node.name)
        if not faults or _fenced_from_gpu_work(node, stack) is not None:
            continue
        run.add(
            "gpu-node-faulty-schedulable",
            "fail",
            f"GPU node of pool {node.pool} has a critical GPU fault ({', '.join(faults)}) and still takes new GPU pods: "
            "it is neither cordoned nor tainted against GPU work, so the next GPU job can land on it and fail",
            f"Cordon the node now (`kubectl cordon {node.name}`), drain it and repair it; aks-gpu:remediation mode on "
            "quarantines such a node within minutes",
            node=node.name,
        )
