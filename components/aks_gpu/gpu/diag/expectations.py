"""The figures the diagnostic readers grade against, from ``components/aks_gpu/data/gpu_diagnostics.yaml`` (each with
its source). Pure apart from reading the packaged data file once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.data_files import load_yaml
from aks_gpu.gpu.diag.nccl import BusBandwidth

DIAGNOSTICS_FILE = Path(__file__).resolve().parents[2] / "data" / "gpu_diagnostics.yaml"


@dataclass(frozen=True)
class DiagnosticImage:
    image: str
    tag: str
    digest: str  # "" where not pinned yet
    source: str

    @property
    def reference(self) -> str:
        """``image@digest`` when pinned, else ``image:tag``."""
        return f"{self.image}@{self.digest}" if self.digest else f"{self.image}:{self.tag}"


@cache
def _data() -> dict[str, Any]:
    data = load_yaml(DIAGNOSTICS_FILE)
    if not isinstance(data, dict):
        raise ValueError(f"{DIAGNOSTICS_FILE} is not a mapping")
    return data


def bus_bandwidth_for(vm_size: str) -> BusBandwidth | None:
    """The all-reduce figure of ``vm_size`` (compared without case), None where the data file has none."""
    for entry in _data()["all_reduce_bus_bandwidth"]:
        if str(entry["vm_size"]).lower() == vm_size.lower():
            return BusBandwidth(
                str(entry["vm_size"]), int(entry["message_bytes"]), float(entry["busbw_gbps"]), str(entry["source"])
            )
    return None


def diagnostic_images() -> dict[str, DiagnosticImage]:
    """The diagnostic pod's images by role (``dcgm``, ``cuda_context``, ``nccl``; ``amd_test_runner`` on AMD)."""
    return {
        role: DiagnosticImage(str(e["image"]), str(e["tag"]), str(e.get("digest") or ""), str(e["source"]))
        for role, e in _data()["images"].items()
    }


@dataclass(frozen=True)
class RvsLevel:
    """The RVS level (``rvs -r <rvs_level>``) that a diagnostic level runs on AMD, how long the runner waits on it, and
    why that level (``amd_rvs_levels`` in the data file)."""

    level: int
    rvs_level: int
    timeout_seconds: int
    reason: str


def rvs_level_for(level: int) -> RvsLevel:
    """The RVS level of diagnostic ``level`` (1, 2 or 3); KeyError where the data file has none."""
    for entry in _data()["amd_rvs_levels"]:
        if int(entry["level"]) == level:
            return RvsLevel(int(entry["level"]), int(entry["rvs_level"]), int(entry["timeout_seconds"]), str(entry["reason"]))
    raise KeyError(f"no RVS level for diagnostic level {level} in {DIAGNOSTICS_FILE.name}")
