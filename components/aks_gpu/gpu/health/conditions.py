"""The GPU node conditions the AKS Node Problem Detector sets, read from a node object (``kubectl get node -o json``),
with the grade and the advice for each. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aks_gpu.data_files import load_yaml
from aks_gpu.gpu.health.report import Severity
from aks_gpu.gpu.smi.text import shorten


@dataclass(frozen=True)
class GpuConditionType:
    type: str
    severity: Severity  # when the condition is True
    advice: str
    check: str  # the NPD check that sets it (npd_gpu_checks in the data file), one per spelling of its condition


NPD_FACTS_FILE = Path(__file__).resolve().parents[2] / "data" / "remediation.yaml"

# Each AKS NPD GPU check's grade and advice. The checks, where they run and every spelling of their conditions seen,
# each with its source, are facts of components/aks_gpu/data/remediation.yaml (npd_gpu_checks); a check there without
# an entry here fails at import. NPD's convention: status "True" means the problem is present.
_GRADES: dict[str, tuple[Severity, str]] = {
    "gpu-missing": (
        "critical",
        "nvidia-smi sees fewer GPUs than the VM size has (a GPU failed or fell off the bus): drain the node and reimage "
        "it; if it recurs open an Azure support case",
    ),
    "xid": (
        "critical",
        "the kernel log holds Xid errors: read them (`aksgpu smi health` on the node's `journalctl -k`) and act on the "
        "codes; most need the node drained and rebooted",
    ),
    "nvlink": (
        "critical",
        "NVLink is inactive between GPUs: multi-GPU jobs slow down or hang; drain the node and reboot it; if it "
        "persists reimage the node or open an Azure support case",
    ),
    "ib-link-flapping": (
        "critical",
        "an InfiniBand link goes up and down: multi-node jobs on this node slow down or fail; drain the node and open "
        "an Azure support case",
    ),
    "clock-throttling": (
        "warning",
        "the GPU clocks are throttled (hardware slowdown, thermal or power brake): check temperature and power "
        "(`nvidia-smi -q -d PERFORMANCE`); if it lasts, open an Azure support case",
    ),
    "device-plugin": (
        "critical",
        "AKS's managed NVIDIA device plugin service is not active: the GPUs are not schedulable; reimage the node",
    ),
    "dcgm-services": (
        "critical",
        "AKS's managed NVIDIA DCGM services are not active: the GPU's health watches and metrics are blind, and the "
        "GPU may be faulty; reimage the node; if it recurs open an Azure support case",
    ),
    # An unlicensed GRID driver runs degraded and then stops serving CUDA work (NVIDIA's vGPU licensing guide,
    # https://docs.nvidia.com/vgpu/latest/grid-licensing-user-guide/index.html): the node cannot be trusted with work.
    "grid-licence": (
        "critical",
        "the node's GRID driver is not licensed (nvidia-gridd not active or no licence): GPU work degrades and then "
        "fails; reimage the node; if it recurs open an Azure support case",
    ),
}


def _gpu_conditions() -> dict[str, GpuConditionType]:
    checks: dict[str, Any] = load_yaml(NPD_FACTS_FILE)["npd_gpu_checks"]["checks"]
    if set(checks) != set(_GRADES):
        raise ValueError(f"{NPD_FACTS_FILE}: npd_gpu_checks checks {sorted(checks)} are not the graded {sorted(_GRADES)}")
    return {
        str(name): GpuConditionType(str(name), *_GRADES[check], check=check)
        for check, entry in checks.items()
        for name in entry["names"]
    }


# The GPU node conditions the AKS Node Problem Detector sets, every spelling seen, keyed by the condition type.
GPU_CONDITIONS: dict[str, GpuConditionType] = _gpu_conditions()


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
