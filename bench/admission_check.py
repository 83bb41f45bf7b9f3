"""How long ``aksgpu admission check`` takes on big manifests: 5,000 objects in one file, read, judged and reported.

The objects are the corpus's kinds (Pods, Deployments, Jobs, CronJobs) in the prod stack's namespaces, every one
different (names, counts, pools, tolerations, env vars), about half admitted and half denied, so nothing is
judged once for many. Each run is the real command in a fresh process (``python -m aks_gpu.cli admission
check``), so start-up, the stack config, YAML, the reader's checks, the policy and the output are all in it:
``--json`` and the table, with cel-cpp and with cel-python. Target: 5,000 objects in under 5 s (cel-cpp).
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from bench.common import PROJECT_DIR

COUNTS = (100, 1_000, 5_000)
TARGET_OBJECTS = 5_000
TARGET_SECONDS = 5.0
REPEATS = 2
NAMESPACES = ("gpu-training", "gpu-training", "gpu-inference", "gpu-inference", "default", "team-x")
POOLS = ("train", "infer", None, None)


def generated(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objects = []
    for index in range(count):
        gpus = rng.choice([0, 1, 1, 2, 8])
        container: dict[str, Any] = {"name": f"c{index}", "image": f"registry.example/app:{index}"}
        if gpus:
            container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
        if rng.random() < 0.03:
            container["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        spec: dict[str, Any] = {"containers": [container, {"name": "sidecar", "image": "busybox"}]}
        if gpus and rng.random() < 0.9:
            spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        pool = rng.choice(POOLS)
        if pool:
            spec["nodeSelector"] = {"aks-gpu/pool": pool}
        if rng.random() < 0.02:
            spec["nodeName"] = f"aks-train-12345678-vmss{index:06d}"
        kind = rng.choice(["Pod", "Pod", "Deployment", "Job", "CronJob"])
        metadata = {"name": f"obj-{index}", "namespace": rng.choice(NAMESPACES), "labels": {"app": f"a{index % 97}"}}
        body: dict[str, Any]
        if kind == "Pod":
            body = {"apiVersion": "v1", "kind": kind, "metadata": metadata, "spec": spec}
        elif kind == "Deployment":
            selector = {"matchLabels": {"app": str(index)}}
            template = {"metadata": {"labels": {"app": str(index)}}, "spec": spec}
            body = {
                "apiVersion": "apps/v1",
                "kind": kind,
                "metadata": metadata,
                "spec": {"selector": selector, "template": template},
            }
        elif kind == "Job":
            body = {"apiVersion": "batch/v1", "kind": kind, "metadata": metadata,
                    "spec": {"template": {"spec": {**spec, "restartPolicy": "Never"}}}}  # fmt: skip
        else:
            job = {"template": {"spec": {**spec, "restartPolicy": "Never"}}}
            body = {"apiVersion": "batch/v1", "kind": kind, "metadata": metadata,
                    "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": job}}}  # fmt: skip
        objects.append(body)
    return objects


def check(path: Path, *options: str) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system) of one run in a fresh process, and what it printed."""
    command = [sys.executable, "-m", "aks_gpu.cli", "admission", "check", "--stack", "prod", *options, str(path)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"admission check failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, done.stdout


def run(console: Console) -> bool:
    table = Table(title=f"aksgpu admission check, a fresh process per run (best of {REPEATS})")
    for column in ("objects", "file", "engine", "output", "wall", "cpu", "per object", "denied", "target"):
        table.add_column(column, justify="right", no_wrap=True)
    met = True
    with tempfile.TemporaryDirectory(prefix="aksgpu-bench-") as folder:
        for count in COUNTS:
            path = Path(folder) / f"objects-{count}.yaml"
            path.write_text(yaml.safe_dump_all(generated(count), sort_keys=False))
            size = path.stat().st_size / 2**20
            for engine in ("cel-cpp", "cel-python"):
                if engine == "cel-python" and count > 1_000:
                    continue  # about 15 ms an object: the 5,000 run would take minutes
                for output in ("--json", "table"):
                    options = ["--engine", engine] + (["--json"] if output == "--json" else [])
                    runs = [check(path, *options) for _ in range(REPEATS)]
                    best = min(elapsed for elapsed, _, _ in runs)
                    cpu = min(used for _, used, _ in runs)
                    stdout = runs[0][2]
                    if output == "--json":
                        denied = stdout.count('"allowed": false')
                    else:  # the table, or past 500 objects the list of denied ones
                        denied = stdout.count("│ denied") + sum(line.startswith("denied ") for line in stdout.splitlines())
                    target = ""
                    if count == TARGET_OBJECTS and engine == "cel-cpp":
                        ok = best < TARGET_SECONDS
                        met = met and ok
                        target = f"[green]< {TARGET_SECONDS:g} s[/]" if ok else f"[bold red]MISSED ({TARGET_SECONDS:g} s)[/]"
                    table.add_row(
                        f"{count:,}", f"{size:.1f} MiB", engine, output, f"[bold]{best:.2f} s[/]", f"{cpu:.2f} s",
                        f"{best / count * 1000:.2f} ms", f"{denied:,}", target,
                    )  # fmt: skip
    console.print(table)
    loads = ", ".join(f"{load:.2f}" for load in os.getloadavg())
    console.print(f"load average after measuring: {loads} (this machine has {os.cpu_count()} CPUs)")
    return met
