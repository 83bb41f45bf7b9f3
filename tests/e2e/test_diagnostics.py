"""The diagnostic schedule's path on the prod stack's local cluster (the real API server and scheduler, kwok as the
kubelet): `aksgpu validate --deep --quarantine` creates each node's diagnostic pod, which the scheduler places on its
node (it asks for every GPU the node advertises); kwok serves the recorded outputs through the real paths: the
init containers' logs through `pods/log` (a kwok `Logs`), `dcgmi diag` through `pods/exec` (a kwok `Exec` and
`aksgpu local`'s `dcgmi` stand-in). The outputs are real ones (tests/fixtures/diag/SOURCES.md): NVIDIA/DCGM#49's
`dcgmi diag -r 2` with PCIe failed on a node whose NVLinks are down, and a passing `dcgmi diag -r 2` of 8 A100s.

A node whose dcgmi diag fails is tainted `aks-gpu/gpu-quarantine=diagnostic:NoSchedule` and cordoned; a healthy one is
not; the quarantined node stays so while its diagnostic fails or cannot conclude, and returns only after a passing one.

The recorded outputs are tables (`dcgmi diag -r 2` as posted), served for the `-j` the runner asks for: the reader
reads either."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.local.control_plane import cri_log, recorded_logs, recorded_output_name, smi_exec
from aks_gpu.naming import DIAGNOSTIC_TAINT_VALUE, GPU_NAMESPACE, POOL_LABEL, QUARANTINE_TAINT_KEY
from aks_gpu.validation.diagnostics import HOLDER, Level, dcgm_command, pod_name
from tests.conftest import PROJECT_DIR
from tests.e2e.conftest import LocalCluster

STACK = "prod"
LEVEL: Level = 2
FIXTURES = PROJECT_DIR / "tests" / "fixtures"
DCGM_FAIL = FIXTURES / "health/19_dcgmi-diag-r2_a100_pcie_fail_nvlink_down_warnings.txt"
DCGM_PASS = FIXTURES / "diag/01_dcgmi-diag-r2_8xa100_dcgm3.3.3_pass.txt"
DCGM_SKIPPED = FIXTURES / "diag/03_dcgmi-diag-r3_1gpu_dcgm4.4.2_all_skipped.txt"
CUDA_PASS = FIXTURES / "diag/21_deviceQuery_8xb200_cuda12.8_pass_excerpt.txt"
NCCL_PASS = FIXTURES / "diag/10_all_reduce_perf_8xh100_256M-2G_nvls.txt"
KWOK_SYNC_S = 3.0


@dataclass(frozen=True)
class Served:
    failing: str  # the node whose dcgmi diag fails (at first)
    healthy: str
    dcgm_file: dict[str, Path]  # node: the file its dcgmi stand-in prints


def pool_node(prod: LocalCluster, pool: str) -> str:
    nodes = prod.json("get", "nodes", "-l", f"{POOL_LABEL}={pool}")["items"]
    assert nodes, f"no node in pool {pool}"
    return str(sorted(n["metadata"]["name"] for n in nodes)[0])


@pytest.fixture(scope="module")
def served(prod: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    failing, healthy = pool_node(prod, "train"), pool_node(prod, "inferfull")
    objects: list[dict[str, Any]] = []
    dcgm_file: dict[str, Path] = {}
    for node, dcgm in ((failing, DCGM_FAIL), (healthy, DCGM_PASS)):
        folder = tmp_path_factory.mktemp(f"diag-{node}")
        dcgm_file[node] = folder / recorded_output_name(dcgm_command(LEVEL))
        dcgm_file[node].write_text(dcgm.read_text())
        logs = {}
        for container, source in (("cuda-context", CUDA_PASS), ("nccl-all-reduce", NCCL_PASS)):
            logs[container] = folder / f"{container}.log"
            logs[container].write_text(cri_log(source.read_text()))
        objects.append(smi_exec(GPU_NAMESPACE, pod_name(node), HOLDER, folder))
        objects.append(recorded_logs(GPU_NAMESPACE, pod_name(node), logs))
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    applied = prod.kubectl("apply", "-f", "-", stdin=listed)
    assert applied.returncode == 0, applied.stderr
    time.sleep(KWOK_SYNC_S)  # kwok reads Exec and Logs objects from a watch
    yield Served(failing, healthy, dcgm_file)
    prod.kubectl("delete", "-f", "-", "--wait=false", stdin=listed)
    for node in (failing, healthy):
        prod.kubectl("uncordon", node)
        prod.kubectl("taint", "node", node, f"{QUARANTINE_TAINT_KEY}-")


def diagnose(prod: LocalCluster, *nodes: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    args = ["validate", "--stack", STACK, "--kubeconfig", str(prod.kubeconfig), "--deep", "--level", str(LEVEL)]
    for node in nodes:
        args += ["--node", node]
    done = prod.aksgpu(*args, "--quarantine", "--json", timeout=300)
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {"nodes": []}
    return done.returncode, {n["node"]: n for n in report["nodes"]}, done.stderr


def quarantine(prod: LocalCluster, node: str) -> tuple[list[str], bool]:
    """The values of the node's quarantine taints, and whether it is cordoned."""
    item = prod.json("get", "node", node)
    values = [t.get("value", "") for t in item["spec"].get("taints") or [] if t["key"] == QUARANTINE_TAINT_KEY]
    return values, bool(item["spec"].get("unschedulable"))


def test_a_failing_node_is_tainted_and_cordoned_a_healthy_one_is_not(prod: LocalCluster, served: Served) -> None:
    code, nodes, stderr = diagnose(prod, served.failing, served.healthy)
    assert code == 1, stderr[-2000:]
    failing, healthy = nodes[served.failing], nodes[served.healthy]
    # Every tool's output came through the API server: the logs and the exec were read and graded.
    assert {t["tool"]: t["state"] for t in failing["tools"]} == {
        "cuda-context": "healthy",
        "nccl-all-reduce": "healthy",
        "dcgm-diag": "unhealthy",
    }, failing
    assert failing["verdict"] == "unhealthy: dcgm-diag: PCIe (all GPUs)" and failing["action"] == "quarantine"
    assert healthy["state"] == "healthy" and healthy["action"] == "none", healthy
    assert quarantine(prod, served.failing) == ([DIAGNOSTIC_TAINT_VALUE], True)
    assert quarantine(prod, served.healthy) == ([], False)
    # The diagnostic pods are gone: they held every GPU of their nodes.
    left = prod.json("get", "pods", "-n", GPU_NAMESPACE, "-l", "app.kubernetes.io/name=gpu-diag")["items"]
    assert [p for p in left if not p["metadata"].get("deletionTimestamp")] == []


def test_a_quarantined_node_returns_only_after_a_passing_diagnostic(prod: LocalCluster, served: Served) -> None:
    assert quarantine(prod, served.failing)[0] == [DIAGNOSTIC_TAINT_VALUE], "run after the test above"
    # Still failing: it stays quarantined, nothing is patched twice.
    code, nodes, _ = diagnose(prod, served.failing)
    assert code == 1 and nodes[served.failing]["action"] == "none"
    assert quarantine(prod, served.failing) == ([DIAGNOSTIC_TAINT_VALUE], True)
    # A diagnostic that could not conclude (every plugin skipped) proves nothing: still quarantined.
    served.dcgm_file[served.failing].write_text(DCGM_SKIPPED.read_text())
    code, nodes, _ = diagnose(prod, served.failing)
    assert code == 1 and nodes[served.failing]["state"] == "inconclusive"
    assert quarantine(prod, served.failing) == ([DIAGNOSTIC_TAINT_VALUE], True)
    # A passing one returns it: taint gone, uncordoned.
    served.dcgm_file[served.failing].write_text(DCGM_PASS.read_text())
    code, nodes, stderr = diagnose(prod, served.failing)
    assert code == 0, stderr[-2000:]
    assert nodes[served.failing]["action"] == "return"
    assert quarantine(prod, served.failing) == ([], False)
