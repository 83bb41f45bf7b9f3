"""How long ``aksgpu advise --metrics DIR --json`` takes on a week of a big cluster's history: 1,000 GPUs (125 ND H100 v5
nodes of 8) at 5-minute steps for 7 days (2,017 samples a series), as the DCGM exporter labels them and Prometheus's
``query_range`` returns them: one ``<metric>.json`` per metric (memory used and free, graphics engine activity, GPU
utilisation), about 8 million samples, 161 MiB of JSON. The workloads are a mix a right-sizing run meets: idle
notebooks (release), small and mid-sized inference pods (a MIG slice or a share of a GPU) and training pods using
their whole GPU (keep); the run must exit 1 with one recommendation per GPU.

Timed end to end in one process: reading and parsing the files, the statistics, the recommendations and the JSON.
Best of ``REPEATS``. Target: under 10 s.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from aks_gpu.cli import main
from bench.common import timed

GPUS = 1_000
GPUS_PER_NODE = 8
DAYS = 7
STEP_SECONDS = 300
TARGET_SECONDS = 10.0
REPEATS = 2
END = 1_796_860_800  # a fixed end time, so two runs write the same files
MEMORY_MIB = 81_559  # an H100 80GB HBM3's framebuffer as DCGM reports it (used + free)
# What each kind of workload looks like: memory used (MiB) and graphics engine activity (0-1), with noise.
KINDS: dict[str, tuple[float, float]] = {
    "notebook": (600.0, 0.0),
    "embed": (7_000.0, 0.08),
    "chat": (25_000.0, 0.25),
    "train": (76_000.0, 0.92),
}


def _pod_of(index: int) -> tuple[str, str, str]:
    kind = tuple(KINDS)[index % len(KINDS)]
    owner = f"{kind}-{index // 8:04d}"
    return kind, f"team-{index % 5}", f"{owner}-7d9c5b{index % 10}f4-x{index % 7}k2q"


def _labels(index: int) -> dict[str, str]:
    node = f"aks-h100-12345678-vmss{index // GPUS_PER_NODE:06d}"
    _, namespace, pod = _pod_of(index)
    return {
        "__name__": "",
        "gpu": str(index % GPUS_PER_NODE),
        "UUID": f"GPU-{index:08x}-0000-0000-0000-000000000000",
        "pci_bus_id": f"00000001:{index % GPUS_PER_NODE:02X}:00.0",
        "device": f"nvidia{index % GPUS_PER_NODE}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": node,
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
        "node": node,
        "namespace": "gpu-resources",
        "pod": "dcgm-exporter-7kx2p",
        "instance": f"10.244.{index // 256}.{index % 256}:9400",
        "job": "gpu-resources/dcgm-exporter",
        "exported_namespace": namespace,
        "exported_pod": pod,
        "exported_container": "main",
    }


def write_history(folder: Path) -> int:
    """The four query_range files for ``GPUS`` GPUs over ``DAYS`` days; returns the samples written."""
    rng = random.Random(36)
    stamps = list(range(END - DAYS * 86_400, END + 1, STEP_SECONDS))
    metrics: dict[str, list[dict[str, object]]] = {
        "DCGM_FI_DEV_FB_USED": [],
        "DCGM_FI_DEV_FB_FREE": [],
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [],
        "DCGM_FI_DEV_GPU_UTIL": [],
    }
    for index in range(GPUS):
        kind = _pod_of(index)[0]
        memory, activity = KINDS[kind]
        used = [min(MEMORY_MIB, round(memory * rng.uniform(0.9, 1.05))) for _ in stamps]
        active = [min(1.0, max(0.0, activity * rng.uniform(0.7, 1.2))) for _ in stamps]
        columns = {
            "DCGM_FI_DEV_FB_USED": [str(value) for value in used],
            "DCGM_FI_DEV_FB_FREE": [str(MEMORY_MIB - value) for value in used],
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [f"{value:.6f}" for value in active],
            "DCGM_FI_DEV_GPU_UTIL": [str(round(value * 100)) for value in active],
        }
        for metric, texts in columns.items():
            labels = {**_labels(index), "__name__": metric}
            values = [[stamp, text] for stamp, text in zip(stamps, texts, strict=True)]
            metrics[metric].append({"metric": labels, "values": values})
    for metric, result in metrics.items():
        document = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        (folder / f"{metric}.json").write_text(json.dumps(document, separators=(",", ":")), encoding="utf-8")
    return len(stamps) * GPUS * len(metrics)


def _advise(folder: Path) -> Callable[[], tuple[int, str]]:
    def call() -> tuple[int, str]:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
            code = main(["advise", "--metrics", str(folder), "--json"])
        return code, printed.getvalue()

    return call


def run(console: Console) -> bool:
    with tempfile.TemporaryDirectory(prefix="aksgpu-bench-advise-") as name:
        folder = Path(name)
        samples = write_history(folder)
        size = sum(path.stat().st_size for path in folder.iterdir())
        runs = [timed(_advise(folder)) for _ in range(REPEATS)]
    (code, text), _ = runs[0]
    best = min(seconds for _, seconds in runs)
    document = json.loads(text) if code in (0, 1) else {}
    rows = document.get("recommendations", [])
    by_kind: dict[str, int] = {}
    for row in rows:
        by_kind[row["recommend"]] = by_kind.get(row["recommend"], 0) + 1
    table = Table("GPUs x days", "samples", "files", "exit", "recommendations", "advise --json (best)")
    table.add_row(
        f"{GPUS:,} x {DAYS}",
        f"{samples:,}",
        f"{size / (1 << 20):,.0f} MiB",
        str(code),
        ", ".join(f"{kind} {count}" for kind, count in sorted(by_kind.items())) or "-",
        f"[bold]{best:.2f} s[/]",
    )
    console.print(table)
    met = code == 1 and len(rows) == GPUS and best < TARGET_SECONDS
    console.print(f"target: exit 1 with {GPUS:,} recommendations in under {TARGET_SECONDS:.0f} s: {'met' if met else 'missed'}")
    return met
