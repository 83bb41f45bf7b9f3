"""Active vendor diagnostics on one GPU node: the diagnostic pod, how its outputs are graded, and what a node's verdict
does to the node.

**The diagnostic pod** (``diagnostic_pod_manifest``), ``gpu-diag-<node>`` in ``gpu-resources``, one per node: pinned to
the node (its ``kubernetes.io/hostname``, inside its pool's node selector) and asking for *every* GPU the node
advertises, so the scheduler never places it beside GPU work and no GPU work lands on the node while it runs. It
tolerates the pool's taints, the quarantine taint and the cordon's (``node.kubernetes.io/unschedulable``): a node is
proven while quarantined and cordoned, before it returns to service. The vendor tools run one after the other, each in
a container that holds the node's GPUs:

1. ``cuda-context`` (init container): CUDA samples' ``deviceQuery``, a context on every GPU;
2. ``nccl-all-reduce`` (init container, multi-GPU sizes): ``all_reduce_perf -b 8 -e 16G -f 2 -g <gpus>``, up to the message
   size the bus bandwidth figures are for (``components/aks_gpu/data/gpu_diagnostics.yaml``);
3. ``dcgm`` (the pod's container, NVIDIA's DCGM image): holds the GPUs until the deadline, and the runner execs
   ``dcgmi diag -r <level> -j`` in it (level 1 after deploy, 2 or 3 on the schedule and before a node returns;
   https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html).

On AMD (``tools``), in AMD's test runner image (``docker.io/rocm/test-runner``, the GPU Operator's, public for RVS):

1. ``amd-smi`` (init container): ``amd-smi metric --ecc --json``, the RAS counters AMD's health rule reads;
2. ``rvs`` (the pod's container): holds the GPUs until the deadline, and the runner execs ROCm's validation suite in
   it, ``rvs -r <N>``, the RVS level the data file gives each diagnostic level (``amd_rvs_levels``: RVS levels 2, 3
   and 4, by their durations). The test runner itself reports only through Kubernetes Events, which would need a
   service account token; the pod runs the test runner's own rvs, and its summary table is graded.

Each init container prints its tool's output and exits 0 (the readers of ``aks_gpu.gpu.diag`` judge it, not the exit
status), so one tool's fault never hides the others'. A bare pod rather than a Job: the runner that creates it execs
into it by its name and deletes it when done (a Job would name its pod itself and could run it again).

**The verdict's effect** (``node_action``): an unhealthy node is tainted ``aks-gpu/gpu-quarantine=diagnostic:NoSchedule``
and cordoned, for the quarantine engine and its drain; a node the diagnostic quarantined returns (its taint removed,
uncordoned) only after a *passing* diagnostic; an inconclusive one changes nothing. A pass also records the node's
boot (``DIAGNOSTICS_PASSED_ANNOTATION``, its ``status.nodeInfo.bootID``) and a failure takes that record away: the
quarantine engine's repair holds a node it quarantined until the record matches the node's current boot
(docs/remediation.md, "Repair, then prove, then return"). Pure: dicts in, dicts out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aks_gpu.gpu.diag import Grade, combine
from aks_gpu.gpu.diag.detect import Tool, grade_output
from aks_gpu.gpu.diag.expectations import bus_bandwidth_for, diagnostic_images, rvs_level_for
from aks_gpu.naming import (
    DIAGNOSTIC_LEVEL_LABEL,
    DIAGNOSTIC_TAINT_VALUE,
    DIAGNOSTICS_PASSED_ANNOTATION,
    GPU_NAMESPACE,
    HOSTNAME_LABEL,
    NAME_LABEL,
    POOL_LABEL,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    UNSCHEDULABLE_TAINT_KEY,
)
from aks_gpu.resolved.model import QUARANTINE_TOLERATION, ResolvedPool, Toleration

DIAG_APP = "gpu-diag"
HOLDER = "dcgm"
AMD_HOLDER = "rvs"
# The reader of each output the pod gives (``tools``): `aksgpu smi diag`'s tool names.
READER_OF: dict[str, Tool] = {
    "dcgm-diag": "dcgm",
    "cuda-context": "cuda",
    "nccl-all-reduce": "nccl",
    "rvs": "rvs",
    "amd-smi": "amd-smi",
}
# amd-smi and rvs in the test runner image (ROCm/device-metrics-exporter pkg/exporter/globals/testrunner.go: AMDSMIPath,
# RVSPath): /opt/rocm/bin is not on the image's PATH, so each command puts it first.
ROCM_BIN = "/opt/rocm/bin"
Level = Literal[1, 2, 3]
# How long each level may take: DCGM's guide gives a level 1 run seconds, level 2 about two minutes and level 3 about
# 30 minutes (https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html, "Run Levels"); the CUDA
# and NCCL checks add minutes, an image pull on a fresh node more.
DEADLINE_SECONDS: dict[int, int] = {1: 900, 2: 1800, 3: 3600}
# How long a node's diagnostic pod may wait to be scheduled and through its init containers: a node whose GPUs hold
# other work never schedules it (it asks for every GPU), and that is reported as inconclusive, not waited on. The
# default of `validate --deep --timeout`, and the schedule's per-node share of its run's deadline.
SCHEDULE_WAIT_S = 600
NCCL_MAX_BYTES = "16G"
UNSCHEDULABLE_TOLERATION = Toleration(UNSCHEDULABLE_TAINT_KEY, "Exists", "NoSchedule")
Action = Literal["quarantine", "return", "proven", "none"]


def pod_name(node: str) -> str:
    """``gpu-diag-<node>``, kept within 63 characters (a DNS label: the name is also the pod's hostname)."""
    name = f"{DIAG_APP}-{node}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:8]
    return f"{name[:54]}-{digest}"


def dcgm_command(level: Level) -> list[str]:
    """What the runner execs in the ``dcgm`` container: ``-j`` prints the JSON the reader reads."""
    return ["dcgmi", "diag", "-r", str(level), "-j"]


def init_commands(pool: ResolvedPool) -> dict[str, list[str]]:
    """The init containers' commands, by container; ``nccl-all-reduce`` only on sizes with more than one GPU. Each prints its
    output (stderr too) and exits 0."""
    commands = {"cuda-context": ["sh", "-c", "/cuda-samples/sample 2>&1; exit 0"]}
    gpus = pool.gpus_per_node or 1
    if gpus > 1:
        nccl = f"/opt/nccl-tests/build/all_reduce_perf -b 8 -e {NCCL_MAX_BYTES} -f 2 -g {gpus} 2>&1; exit 0"
        commands["nccl-all-reduce"] = ["sh", "-c", nccl]
    return commands


def rvs_command(level: Level) -> list[str]:
    """What the runner execs in the ``rvs`` container: ROCm's validation suite at the RVS level of ``level`` (it finds
    the recipe of the GPU it detects: ``conf/<platform>/levels/rvs_level_<N>.conf``), stderr with its output."""
    return ["sh", "-c", f"PATH={ROCM_BIN}:$PATH; rvs -r {rvs_level_for(level).rvs_level} 2>&1"]


@dataclass(frozen=True)
class ExecStep:
    """The tool the runner execs in the diagnostic pod's first container, its command, and how long it waits on it."""

    tool: str
    command: list[str]
    timeout_s: float


def exec_step(pool: ResolvedPool, level: Level) -> ExecStep:
    """``dcgmi diag`` on NVIDIA (waited on until the pod's deadline), ``rvs`` on AMD (its level's timeout)."""
    if pool.vendor == "amd":
        return ExecStep("rvs", rvs_command(level), float(rvs_level_for(level).timeout_seconds))
    return ExecStep("dcgm-diag", dcgm_command(level), float(DEADLINE_SECONDS[level]))


def _amd_init_commands() -> dict[str, list[str]]:
    return {"amd-smi": ["sh", "-c", f"PATH={ROCM_BIN}:$PATH; amd-smi metric --ecc --json 2>&1; exit 0"]}


def tools(pool: ResolvedPool) -> tuple[str, ...]:
    """Every output a node of ``pool`` gives: the init containers', then the exec's (``dcgm-diag`` on NVIDIA, ``rvs``
    on AMD)."""
    if pool.vendor == "amd":
        return (*_amd_init_commands(), "rvs")
    return (*init_commands(pool), "dcgm-diag")


def diagnostic_pod_manifest(pool: ResolvedPool, node: str, level: Level, namespace: str = GPU_NAMESPACE) -> dict[str, Any]:
    """The diagnostic pod for ``node`` of ``pool`` at ``level``. Refused (ValueError) for a pool whose GPU count per
    node is unknown (it could not ask for every GPU)."""
    units = pool.resource.count_per_node
    if not units:
        raise ValueError(f"pool {pool.name}: its GPUs per node are unknown, so the pod cannot ask for all of them")
    images = diagnostic_images()
    labels = {NAME_LABEL: DIAG_APP, POOL_LABEL: pool.name, DIAGNOSTIC_LEVEL_LABEL: str(level)}
    every_gpu = {pool.resource.name: str(units)}
    deadline = DEADLINE_SECONDS[level]

    def container(name: str, image: str, command: list[str]) -> dict[str, Any]:
        return {
            "name": name,
            "image": images[image].reference,
            "imagePullPolicy": "IfNotPresent",
            "command": command,
            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi", **every_gpu}},
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }

    if pool.vendor == "amd":
        # The test runner's entrypoint is replaced: the holder only keeps the GPUs until the deadline.
        inits = [container(name, "amd_test_runner", command) for name, command in _amd_init_commands().items()]
        holder = container(AMD_HOLDER, "amd_test_runner", ["sh", "-c", f"sleep {deadline}"])
    else:
        image_of = {"cuda-context": "cuda_context", "nccl-all-reduce": "nccl"}
        inits = [container(name, image_of[name], command) for name, command in init_commands(pool).items()]
        # The holder starts DCGM's host engine (dcgmi talks to it) and keeps the GPUs until the deadline.
        holder = container(HOLDER, "dcgm", ["sh", "-c", f"nv-hostengine; sleep {deadline}"])
    tolerations = [t.to_kube() for t in (*pool.tolerations, QUARANTINE_TOLERATION, UNSCHEDULABLE_TOLERATION)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(node), "namespace": namespace, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": deadline,
            "nodeSelector": {**pool.node_selector, HOSTNAME_LABEL: node},
            "tolerations": tolerations,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 5,
            "initContainers": inits,
            "containers": [holder],
        },
    }


def tool_grades(
    pool: ResolvedPool,
    outputs: Mapping[str, str | None],
    level: Level,
    vm_size: str | None = None,
    notes: Mapping[str, str] | None = None,
) -> list[Grade]:
    """Each tool's verdict from its output (by ``tools`` name); a tool with no output is inconclusive, with the
    note that says why (``notes``)."""
    size = vm_size or (pool.vm_size.name if pool.vm_size else pool.config.vm_size)
    grades: list[Grade] = []
    for name in tools(pool):
        text = outputs.get(name)
        if text is None:
            why = (notes or {}).get(name) or "no output (the container did not run or its log is gone)"
            grades.append(Grade(name, "inconclusive", f"no output: {why}"))
        else:
            # The reader `aksgpu smi diag` grades the tool's output with, held to the node: its GPUs (a CUDA check that
            # sees fewer fails; an NCCL run over fewer left the others untested) and its size's bus bandwidth.
            _, grade = grade_output(
                text, READER_OF[name], level=level, expected_gpus=pool.gpus_per_node, bandwidth=bus_bandwidth_for(size)
            )
            grades.append(grade)
    return grades


def grade_node(pool: ResolvedPool, outputs: Mapping[str, str | None], level: Level, vm_size: str | None = None) -> Grade:
    """The node's verdict from its tools' outputs: every tool must have said something, or it is inconclusive."""
    return combine("node", tool_grades(pool, outputs, level, vm_size))


@dataclass(frozen=True)
class NodeAction:
    action: Action
    reason: str
    # A JSON merge patch of the Node (RFC 7386: its taints list replaces the Node's), carrying the resourceVersion it was
    # computed from, so the API server refuses it (409) should the node have changed since it was read.
    patch: dict[str, Any] | None


def _taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(((node.get("spec") or {}).get("taints")) or [])


def _ours(taint: Mapping[str, Any]) -> bool:
    return taint.get("key") == QUARANTINE_TAINT_KEY and taint.get("value") == DIAGNOSTIC_TAINT_VALUE


def _passed_record(node: Mapping[str, Any], passed: bool) -> dict[str, str | None] | None:
    """The annotation that records a pass on the node's current boot (``DIAGNOSTICS_PASSED_ANNOTATION``), or takes a
    record away on a failure (None deletes it in a merge patch); None where nothing changes (no boot id to record,
    the record already right)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    boot = ((node.get("status") or {}).get("nodeInfo") or {}).get("bootID")
    wanted = boot if passed else None
    if (passed and not boot) or annotations.get(DIAGNOSTICS_PASSED_ANNOTATION) == wanted:
        return None
    return {DIAGNOSTICS_PASSED_ANNOTATION: wanted}


def _patch(
    node: Mapping[str, Any], spec: dict[str, Any] | None, annotations: dict[str, str | None] | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    version = (node.get("metadata") or {}).get("resourceVersion")
    if version:
        metadata["resourceVersion"] = version
    if annotations:
        metadata["annotations"] = annotations
    return {**({"metadata": metadata} if metadata else {}), **({"spec": spec} if spec is not None else {})}


def node_action(node: Mapping[str, Any], grade: Grade) -> NodeAction:
    """What the diagnostic schedule does to ``node`` (a Node object) after ``grade``."""
    taints = _taints(node)
    quarantined_by_us = any(_ours(t) for t in taints)
    if grade.state == "unhealthy":
        revoked = _passed_record(node, passed=False)
        if quarantined_by_us and (node.get("spec") or {}).get("unschedulable"):
            return NodeAction("none", f"already quarantined: {grade.part}", _patch(node, None, revoked) if revoked else None)
        kept = [t for t in taints if not _ours(t)]
        if any(t.get("key") == QUARANTINE_TAINT_KEY and t.get("effect") == QUARANTINE_TAINT_EFFECT for t in kept):
            # The engine's quarantine (=fault) holds the node already, and the API server refuses a second taint of
            # the same key and effect ("taints must be unique by key and effect pair", Kubernetes'
            # pkg/apis/core/validation validateNodeTaints; seen on the local cluster): keep it cordoned, take the
            # pass record away.
            return NodeAction(
                "none", f"held by the engine's quarantine: {grade.part}", _patch(node, {"unschedulable": True}, revoked)
            )
        taint = {"key": QUARANTINE_TAINT_KEY, "value": DIAGNOSTIC_TAINT_VALUE, "effect": QUARANTINE_TAINT_EFFECT}
        return NodeAction("quarantine", str(grade), _patch(node, {"unschedulable": True, "taints": [*kept, taint]}, revoked))
    proof = _passed_record(node, passed=True) if grade.state == "healthy" else None
    if grade.state == "healthy" and quarantined_by_us:
        kept = [t for t in taints if not _ours(t)]
        # Uncordon only where no other quarantine (the engine's "fault") still holds the node.
        others = any(t.get("key") == QUARANTINE_TAINT_KEY for t in kept)
        spec: dict[str, Any] = {"taints": kept} if others else {"taints": kept, "unschedulable": False}
        reason = "a passing diagnostic" + (" (another quarantine still holds it)" if others else "")
        return NodeAction("return", reason, _patch(node, spec, proof))
    if proof is not None:
        # The engine's own quarantine (=fault) is the engine's to lift: the record lets its repair gate release it.
        return NodeAction(
            "proven", "a passing diagnostic on this boot, recorded for the quarantine engine", _patch(node, None, proof)
        )
    return NodeAction("none", str(grade), None)
