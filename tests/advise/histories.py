"""Generated exporter histories: query_range responses with the labels the exporters emit (see
tests/fixtures/advise/SOURCES.md), for workloads placed at the advice's boundaries."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

START = 1_764_547_200  # 2025-12-01T00:00:00Z
STEP = 300
DRIVER = "570.148.08"


@dataclass
class Gpu:
    """One GPU's history: the pod holding it (None: nobody), memory (MiB) and activity (0-1) at each step."""

    host: str
    index: int
    model_name: str = "NVIDIA A100 80GB PCIe"
    pod: tuple[str, str, str] | None = None  # (namespace, pod, container)
    memory: Callable[[int], float] = lambda step: 1000.0
    activity: Callable[[int], float] = lambda step: 0.5
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def uuid(self) -> str:
        return f"GPU-{zlib.crc32(self.host.encode()):08x}-1c2d-4e5f-8a9b-{self.index:012x}"


def dcgm_labels(metric: str, gpu: Gpu, *, exported: bool = False, hostname_label: str = "Hostname") -> dict[str, str]:
    # dcgm-exporter's label order (render_metrics.go), then the scrape's job/instance.
    labels = {
        "__name__": metric,
        "gpu": str(gpu.index),
        "UUID": gpu.uuid,
        "pci_bus_id": f"00000001:00:{gpu.index:02X}.0",
        "device": f"nvidia{gpu.index}",
        "modelName": gpu.model_name,
        hostname_label: gpu.host,
        "DCGM_FI_DRIVER_VERSION": DRIVER,
        "instance": "10.224.0.31:9400",
        "job": "gpu-dcgm-exporter",
        **gpu.extra,
    }
    if gpu.pod is not None:
        prefix = "exported_" if exported else ""
        labels.update({f"{prefix}namespace": gpu.pod[0], f"{prefix}pod": gpu.pod[1], f"{prefix}container": gpu.pod[2]})
    if exported:
        labels.update({"namespace": "gpu-monitoring", "pod": "dcgm-exporter-7xk2p", "container": "dcgm-exporter"})
    return labels


def query_range(result: Sequence[dict[str, Any]]) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": list(result)}})


def dcgm_responses(
    gpus: Sequence[Gpu], steps: int, *, activity_metric: str = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", **label_options: Any
) -> dict[str, str]:
    """{metric: query_range JSON} for memory and activity of ``gpus`` over ``steps`` samples."""
    responses = {}
    for metric, reading, scale in (
        ("DCGM_FI_DEV_FB_USED", "memory", 1.0),
        (activity_metric, "activity", 100.0 if activity_metric == "DCGM_FI_DEV_GPU_UTIL" else 1.0),
    ):
        result = []
        for gpu in gpus:
            values = getattr(gpu, reading)
            result.append(
                {
                    "metric": dcgm_labels(metric, gpu, **label_options),
                    "values": [[START + n * STEP, _text(values(n) * scale, metric)] for n in range(steps)],
                }
            )
        responses[metric] = query_range(result)
    return responses


def _text(value: float, metric: str) -> str:
    # The exporter publishes memory in whole MiB and the utilisation in whole percent; profiling fields as floats.
    return str(round(value)) if metric in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL") else repr(round(value, 6))
