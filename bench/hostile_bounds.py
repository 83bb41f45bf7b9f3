"""The bounds docs/security.md and docs/cli.md state, measured: what a hostile or broken input costs at most.

- A big snapshot: 10,000 nodes (2,000 GPU nodes of the prod stack's pools, 8,000 CPU nodes) and 100,000 pods (a device
  plugin pod per GPU node, the rest spread over every node), written by ``write_snapshot``; ``aksgpu validate
  --snapshot`` and ``aksgpu audit --snapshot``, each in a fresh process: wall time and peak memory (the child's
  ``ru_maxrss``). Target: 30 s and 2 GiB each.
- An API server that accepts connections and never answers: ``aksgpu validate --timeout 1`` ends with exit 2 within
  one list call's worst case (``(retries + 1) * timeout + waits``) plus the start-up, and never aborts (exit 134).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from aks_gpu.cluster.retries import RetryPolicy
from aks_gpu.cluster.snapshot import ClusterSnapshot, write_snapshot
from aks_gpu.resolved.targets import plugin_targets
from bench.common import PROJECT_DIR, prod_model
from tests.cluster.fake_apiserver import silent_api_server
from tests.cluster.snapshots import healthy_snapshot

NODES, GPU_NODES, PODS = 10_000, 2_000, 100_000
# What real objects carry besides what the checks read, so the files have kubectl's sizes: a node lists its cached
# images (about 60 on an AKS GPU node, ~150 bytes each), a pod applied with kubectl carries its last-applied
# configuration and managedFields (a few KiB). Together the three lists come to about 480 MiB, under the 512 MiB a
# list file may have.
NODE_IMAGES = 60
POD_PADDING_BYTES = 4_000
TARGET_SECONDS, TARGET_BYTES = 30.0, 2 << 30


def big_snapshot() -> ClusterSnapshot:
    model = prod_model()
    targets = plugin_targets(model)
    seed = healthy_snapshot(model, targets, {"train": 1, "infer": 1})
    gpu = [node for node in seed.nodes if "aks-gpu/pool" in node["metadata"].get("labels", {})]
    cpu = next(node for node in seed.nodes if "aks-gpu/pool" not in node["metadata"].get("labels", {}))
    plugin = next(pod for pod in seed.pods if pod["metadata"]["name"].startswith("nvidia-device-plugin"))
    other = next(pod for pod in seed.pods if not pod["metadata"]["name"].startswith("nvidia-device-plugin"))
    nodes: list[dict[str, Any]] = []
    for index in range(NODES):
        template = gpu[index % len(gpu)] if index < GPU_NODES else cpu
        node = copy.deepcopy(template)
        prefix = template["metadata"]["name"].rsplit("vmss", 1)[0]
        node["metadata"]["name"] = f"{prefix}vmss{index:06d}"
        node["status"]["images"] = [
            {"names": [f"mcr.microsoft.com/aks/image-{image}@sha256:{'%064x' % (index * 100 + image)}"], "sizeBytes": 123456789}
            for image in range(NODE_IMAGES)
        ]
        nodes.append(node)
    pods: list[dict[str, Any]] = []
    for index in range(PODS):
        template = plugin if index < GPU_NODES else other
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"{template['metadata']['name']}-{index:06d}"
        pod["metadata"]["uid"] = f"uid-{index:06d}"
        pod["spec"]["nodeName"] = nodes[index % (GPU_NODES if index < GPU_NODES else NODES)]["metadata"]["name"]
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations["kubectl.kubernetes.io/last-applied-configuration"] = f"{index:08d}" * (POD_PADDING_BYTES // 8)
        pods.append(pod)
    return ClusterSnapshot(nodes=nodes, daemonsets=seed.daemonsets, pods=pods, smi={}, exec_errors={})


def measured(argv: list[str]) -> tuple[int, float, int]:
    """Exit code, wall seconds and peak resident bytes of ``aksgpu argv`` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_DIR)}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "aks_gpu.cli", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, time.perf_counter() - started, usage.ru_maxrss * 1024


def silent_server_exit(timeout: float) -> tuple[int, float, float]:
    """Exit code and wall time of ``validate`` against a server that never answers, and the bound it must keep."""
    with tempfile.TemporaryDirectory() as folder, silent_api_server(Path(folder), token="bench-token") as kubeconfig:
        code, seconds, _ = measured(["validate", "--stack", "dev", "--kubeconfig", str(kubeconfig), "--timeout", str(timeout)])
    policy = RetryPolicy(timeout_s=timeout)
    return code, seconds, (policy.retries + 1) * timeout + policy.waits_s()


def run(console: Console) -> bool:
    met = True
    table = Table("input", "command", "exit", "wall (s)", "peak memory", "target")
    with tempfile.TemporaryDirectory() as folder:
        snapshot = big_snapshot()
        write_snapshot(snapshot, folder)
        del snapshot
        size = sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())
        label = f"{NODES:,} nodes, {PODS:,} pods ({size / (1 << 20):,.0f} MiB)"
        for argv in (
            ["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", folder, "--json"],
            ["audit", "--snapshot", folder, "--json"],
        ):
            code, seconds, peak = measured(argv)
            ok = code in (0, 1) and seconds <= TARGET_SECONDS and peak <= TARGET_BYTES
            met &= ok
            table.add_row(
                label,
                argv[0],
                str(code),
                f"{seconds:.1f}",
                f"{peak / (1 << 30):.2f} GiB",
                f"{TARGET_SECONDS:g} s, {TARGET_BYTES >> 30} GiB: {'met' if ok else 'missed'}",
            )
    code, seconds, bound = silent_server_exit(1.0)
    ok = code == 2 and seconds <= bound + 15
    met &= ok
    table.add_row(
        "API server that never answers", "validate --timeout 1", str(code), f"{seconds:.1f}", "-",
        f"exit 2 within {bound:g} s + start-up: {'met' if ok else 'missed'}",
    )
    console.print(table)
    return met
