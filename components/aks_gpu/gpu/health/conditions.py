"""The GPU node conditions the AKS Node Problem Detector sets, read from a node object (``kubectl get node -o json``),
with the grade and the advice for each. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aks_gpu.gpu.health.report import Severity
from aks_gpu.gpu.smi.text import shorten


@dataclass(frozen=True)
class GpuConditionType:
    type: str
    severity: Severity  # when the condition is True
    advice: str


# The GPU node conditions the AKS Node Problem Detector sets ("GPU only" rows of
# https://learn.microsoft.com/azure/aks/node-problem-detector, and https://learn.microsoft.com/azure/aks/gpu-health-monitoring).
# The two pages disagree on one name: the table says XIDErrors, the GPU page's list GPUXIDErrors. The source that
# emits it (NPD's custom-plugin-xid-error.json on the node) could not be read, and neither AKS's Xid plugin script
# nor its node image e2e tests name it (components/aks_gpu/data/remediation.yaml, npd_gpu_checks): unsettled, so both
# are read, and tests/gpu keeps this table and that data file's names in step.
# NPD's convention: status "True" means the problem is present. AKS documents these checks on two sizes
# (Standard_ND96asr_v4, Standard_ND96isr_H100_v5) and none with --gpu-driver none; `aksgpu plan` names the pools that
# get them (npd_coverage in components/aks_gpu/monitoring/remediation.py).
GPU_CONDITIONS: dict[str, GpuConditionType] = {
    condition.type: condition
    for condition in (
        GpuConditionType(
            "GPUMissing",
            "critical",
            "nvidia-smi sees fewer GPUs than the VM size has (a GPU failed or fell off the bus): drain the node and reimage "
            "it; if it recurs open an Azure support case",
        ),
        GpuConditionType(
            "XIDErrors",
            "critical",
            "the kernel log holds Xid errors: read them (`aksgpu smi health` on the node's `journalctl -k`) and act on the "
            "codes; most need the node drained and rebooted",
        ),
        GpuConditionType(
            "GPUXIDErrors",
            "critical",
            "the kernel log holds Xid errors: read them (`aksgpu smi health` on the node's `journalctl -k`) and act on the "
            "codes; most need the node drained and rebooted",
        ),
        GpuConditionType(
            "NVLinkStatusInactive",
            "critical",
            "NVLink is inactive between GPUs: multi-GPU jobs slow down or hang; drain the node and reboot it; if it "
            "persists reimage the node or open an Azure support case",
        ),
        GpuConditionType(
            "IBLinkFlapping",
            "critical",
            "an InfiniBand link goes up and down: multi-node jobs on this node slow down or fail; drain the node and open "
            "an Azure support case",
        ),
        GpuConditionType(
            "GPUClockThrottling",
            "warning",
            "the GPU clocks are throttled: check temperature and power (`nvidia-smi -q -d PERFORMANCE`); if it lasts, open "
            "an Azure support case",
        ),
        GpuConditionType(
            "UnhealthyNvidiaDevicePlugin",
            "critical",
            "AKS's managed NVIDIA device plugin service is not active: the GPUs are not schedulable; reimage the node",
        ),
        # AKS-managed GPU pools (gpuProfile.nvidia.managementMode Managed) run DCGM as node services, and NPD reports
        # this condition beside UnhealthyNvidiaDevicePlugin ("GPU health signals",
        # https://learn.microsoft.com/azure/aks/aks-managed-gpu-nodes, read 2026-12-01; AKS's node image tests check
        # both conditions: ValidateNPDUnhealthyNvidiaDCGMServices in Azure/AgentBaker e2e).
        GpuConditionType(
            "UnhealthyNvidiaDCGMServices",
            "critical",
            "AKS's managed NVIDIA DCGM services are not active: the GPU's health watches and metrics are blind, and the "
            "GPU may be faulty; reimage the node; if it recurs open an Azure support case",
        ),
    )
}


@dataclass(frozen=True)
class GpuCondition:
    type: str
    status: str  # "True" (the problem is present), "False", "Unknown", or what the object says
    reason: str | None
    message: str | None
    last_transition: str | None
    severity: Severity
    advice: str

    @property
    def active(self) -> bool:
        return self.status == "True"


def read_gpu_conditions(node: Mapping[str, Any]) -> tuple[GpuCondition, ...]:
    """The AKS NPD GPU conditions on a node object (``kubectl get node -o json``), in the order the node lists them.

    Any shape is read without error: a node with no status, conditions that are no list or entries that are no
    objects give no conditions. An empty result means NPD reports no GPU condition on this node (not a GPU size
    AKS monitors, --gpu-driver none, or NPD not running): nothing was checked, which is not "healthy".
    """
    status = node.get("status") if isinstance(node, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    found: list[GpuCondition] = []
    for condition in conditions if isinstance(conditions, list) else ():
        if not isinstance(condition, Mapping):
            continue
        kind = GPU_CONDITIONS.get(str(condition.get("type")))
        if kind is None:
            continue
        found.append(
            GpuCondition(
                type=kind.type,
                status=str(condition.get("status") or "Unknown"),
                reason=_text(condition.get("reason")),
                message=_text(condition.get("message")),
                last_transition=_text(condition.get("lastTransitionTime")),
                severity=kind.severity,
                advice=kind.advice,
            )
        )
    return tuple(found)


def _text(raw: object) -> str | None:
    return shorten(raw, 300) if isinstance(raw, str) and raw.strip() else None


def active_conditions(conditions: Iterable[GpuCondition]) -> list[GpuCondition]:
    return [condition for condition in conditions if condition.active]
