"""How fast and in how much memory ``aksgpu advise --metrics DIR --json`` reads a week of a big cluster's history: 1,000
GPUs (125 ND H100 v5 nodes of 8) at 5-minute steps for 7 days (2,017 samples a series), as Prometheus's ``query_range``
returns them to ``curl``: the memory peaks (``max_over_time(DCGM_FI_DEV_FB_USED[5m])``), graphics engine activity,
kube-state-metrics' ``kube_pod_owner`` (a sample a step for each pod, as a range query returns it) and
``kube_node_labels``, about 119 MiB of JSON. The labels are the ones the DCGM exporter and GpuMonitoring's scrape put
on each series (``exported_*`` for the workload, the exporter's own pod as ``pod``), and the workloads a mix a
right-sizing run meets: Deployments' replicas (some rolled out in the week: a new pod on another GPU), a StatefulSet's
notebooks idle all week, a Job's training pods busy on their whole GPU.

Each run is a fresh process (``python -m aks_gpu.cli``), timed wall-clock, its peak resident memory read from
``wait4``'s ``ru_maxrss``. Best of ``REPEATS``. Targets: under 5 s and a peak under 1.5 x the input's size.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from bench.common import PROJECT_DIR

GPUS = 1_000
GPUS_PER_NODE = 8
DAYS = 7
STEP_SECONDS = 300
TARGET_SECONDS = 5.0
TARGET_MEMORY_RATIO = 1.5
REPEATS = 3
END = 1_796_860_800  # a fixed end time, so two runs write the same files
MEMORY_MIB = 81_559  # an H100 80GB HBM3's framebuffer as DCGM reports it
# What each kind of workload looks like: memory used (MiB) and graphics engine activity (0-1), with noise.
KINDS: dict[str, tuple[float, float]] = {
    "notebook": (600.0, 0.0),
    "embed": (7_000.0, 0.08),
    "chat": (25_000.0, 0.25),
    "train": (76_000.0, 0.92),
}
# Every tenth serving GPU's Deployment was rolled out mid-week: its old pod held the GPU until then, the new one after.
ROLLED_OUT = 10


def _node(index: int) -> str:
    return f"aks-h100-12345678-vmss{index // GPUS_PER_NODE:06d}"


def _pods(index: int) -> list[tuple[str, str, str, str, int, int]]:
    """(namespace, pod, owner kind, owner name, first step, last step) of the pods that held GPU ``index``."""
    kind = tuple(KINDS)[index % len(KINDS)]
    namespace = f"team-{index % 5}"
    steps = DAYS * 86_400 // STEP_SECONDS + 1
    if kind == "notebook":
        return [(namespace, f"notebook-{index:04d}-0", "StatefulSet", f"notebook-{index:04d}", 0, steps)]
    if kind == "train":
        job = f"finetune-{index // 8:03d}"
        return [(namespace, f"{job}-{index % 8}-x{index % 7}k2q", "Job", job, 0, steps)]
    owner = f"{kind}-{index // 8:04d}"
    pods = [(namespace, f"{owner}-7d9c5b{index % 10}f4-x{index % 7}k2q", "ReplicaSet", f"{owner}-7d9c5b{index % 10}f4", 0, steps)]
    if index % ROLLED_OUT == 1:
        half = steps // 2
        old = (*pods[0][:4], 0, half + 6)
        new = (
            namespace,
            f"{owner}-6c8b4d{index % 10}f9-z{index % 7}m4p",
            "ReplicaSet",
            f"{owner}-6c8b4d{index % 10}f9",
            half,
            steps,
        )
        pods = [old, new]
    return pods


def _gpu_labels(metric: str, index: int, pod: tuple[str, str, str, str, int, int]) -> dict[str, str]:
    node = _node(index)
    return {
        "__name__": metric,
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
        "Hostname": node,
        "UUID": f"GPU-{index:08x}-4a1c-9d2e-7b3f-{index * 7919:012x}",
        "cluster": "contoso-gpu-prod",
        "container": "dcgm-exporter",
        "device": f"nvidia{index % GPUS_PER_NODE}",
        "exported_container": "main",
        "exported_namespace": pod[0],
        "exported_pod": pod[1],
        "gpu": str(index % GPUS_PER_NODE),
        "instance": f"10.244.{index // 256}.{index % 256}:9400",
        "job": "gpu-monitoring/dcgm-exporter",
        "modelName": "NVIDIA H100 80GB HBM3",
        "namespace": "gpu-monitoring",
        "pci_bus_id": f"00000001:{index % GPUS_PER_NODE:02X}:00.0",
        "pod": f"dcgm-exporter-{index // GPUS_PER_NODE:05d}",
    }


def _write_series(out: TextIO, first: bool, labels: dict[str, str], stamps: list[int], texts: list[str]) -> None:
    values = ",".join(f'[{stamp},"{text}"]' for stamp, text in zip(stamps, texts, strict=True))
    out.write(("" if first else ",") + '{"metric":' + json.dumps(labels, separators=(",", ":")) + ',"values":[' + values + "]}")


def write_history(folder: Path) -> int:
    """The four query_range files; returns the GPU samples written (memory and activity)."""
    rng = random.Random(42)
    steps = DAYS * 86_400 // STEP_SECONDS + 1
    stamps = [END - DAYS * 86_400 + n * STEP_SECONDS for n in range(steps)]
    head, tail = '{"status":"success","data":{"resultType":"matrix","result":[', "]}}"
    files = {name: (folder / f"{name}.json").open("w", encoding="utf-8") for name in ("memory", "activity", "owner", "nodes")}
    written = 0
    try:
        for out in files.values():
            out.write(head)
        for index in range(GPUS):
            memory, activity = KINDS[tuple(KINDS)[index % len(KINDS)]]
            for number, pod in enumerate(_pods(index)):
                first = index == 0 and number == 0
                span = stamps[pod[4] : pod[5]]
                used = [str(min(MEMORY_MIB, round(memory * rng.uniform(0.9, 1.05)))) for _ in span]
                active = [f"{min(1.0, max(0.0, activity * rng.uniform(0.7, 1.2))):.6f}" for _ in span]
                _write_series(files["memory"], first, _gpu_labels("DCGM_FI_DEV_FB_USED", index, pod), span, used)
                _write_series(files["activity"], first, _gpu_labels("DCGM_FI_PROF_GR_ENGINE_ACTIVE", index, pod), span, active)
                owner = {
                    "__name__": "kube_pod_owner",
                    "container": "kube-state-metrics",
                    "instance": "10.244.0.12:8080",
                    "job": "kube-state-metrics",
                    "namespace": pod[0],
                    "owner_is_controller": "true",
                    "owner_kind": pod[2],
                    "owner_name": pod[3],
                    "pod": pod[1],
                    "uid": f"{index:08x}-{number:04x}-4e5f-8a9b-{index * 31:012x}",
                }
                _write_series(files["owner"], first, owner, span, ["1"] * len(span))
                written += 2 * len(span)
            if index % GPUS_PER_NODE == 0:
                labels = {
                    "__name__": "kube_node_labels",
                    "job": "kube-state-metrics",
                    "label_kubernetes_azure_com_agentpool": "h100",
                    "label_node_kubernetes_io_instance_type": "Standard_ND96isr_H100_v5",
                    "label_topology_kubernetes_io_region": "eastus",
                    "node": _node(index),
                }
                _write_series(files["nodes"], index == 0, labels, stamps, ["1"] * steps)
        for out in files.values():
            out.write(tail)
    finally:
        for out in files.values():
            out.close()
    names = {
        "memory": "DCGM_FI_DEV_FB_USED",
        "activity": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "owner": "kube_pod_owner",
        "nodes": "kube_node_labels",
    }
    for short, metric in names.items():
        (folder / f"{short}.json").rename(folder / f"{metric}.json")
    return written


def measured(folder: Path, components: Path = PROJECT_DIR / "components") -> tuple[int, float, float, int, str]:
    """Exit code, wall seconds, CPU seconds (user + system), peak resident bytes and stdout of ``aksgpu advise --metrics
    folder --json`` in a fresh process running the code in ``components``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(components), str(PROJECT_DIR)))}
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "aks_gpu.cli", "advise", "--metrics", str(folder), "--json"],
            stdout=out,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=PROJECT_DIR,
        )
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode("utf-8")
    cpu = usage.ru_utime + usage.ru_stime
    return os.waitstatus_to_exitcode(status), elapsed, cpu, usage.ru_maxrss * 1024, text


def summary(text: str) -> dict[str, Any]:
    document = json.loads(text) if text else {}
    by_kind: dict[str, int] = {}
    for row in document.get("recommendations", []):
        by_kind[row["recommend"]] = by_kind.get(row["recommend"], 0) + 1
    return {"recommendations": by_kind, "poolChanges": len(document.get("poolChanges", []))}


def run(console: Console) -> bool:
    with tempfile.TemporaryDirectory(prefix="aksgpu-bench-advise-") as name:
        folder = Path(name)
        samples = write_history(folder)
        size = sum(path.stat().st_size for path in folder.iterdir())
        load = os.getloadavg()[0]
        runs = [measured(folder) for _ in range(REPEATS)]
    code, _, _, _, text = runs[0]
    best = min(seconds for _, seconds, _, _, _ in runs)
    cpu = min(used for _, _, used, _, _ in runs)
    peak = max(rss for _, _, _, rss, _ in runs)
    found = summary(text)
    table = Table(
        "GPUs x days", "GPU samples", "input", "load", "exit", "recommendations", f"wall (best of {REPEATS})", "cpu", "peak"
    )
    table.add_row(
        f"{GPUS:,} x {DAYS}",
        f"{samples:,}",
        f"{size / (1 << 20):,.0f} MiB",
        f"{load:.1f}",
        str(code),
        ", ".join(f"{kind} {count}" for kind, count in sorted(found["recommendations"].items())) or "-",
        f"[bold]{best:.2f} s[/]",
        f"{cpu:.2f} s",
        f"[bold]{peak / (1 << 20):,.0f} MiB[/] ({peak / size:.2f} x)",
    )
    console.print(table)
    met = code == 1 and best < TARGET_SECONDS and peak < TARGET_MEMORY_RATIO * size
    console.print(
        f"target: exit 1, under {TARGET_SECONDS:.0f} s and under {TARGET_MEMORY_RATIO} x the input: {'met' if met else 'missed'}"
    )
    return met
