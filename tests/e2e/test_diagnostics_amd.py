"""AMD's diagnostic path on the amd stack's local cluster (the real API server and scheduler, kwok as the kubelet):
`aksgpu validate --deep --quarantine` creates each MI300X node's diagnostic pod (AMD's test runner image, every
`amd.com/gpu` of the node), which the scheduler places on its node; kwok serves the recorded outputs through the real
paths: the `amd-smi` init container's log through `pods/log` (a kwok `Logs`), `rvs -r <N>` through `pods/exec` (a kwok
`Exec` and `aksgpu local`'s `rvs` stand-in, run by the same `sh -c` the pod would run).

The outputs are real ones (tests/fixtures/diag/SOURCES.md, tests/fixtures/health/SOURCES.md): RVS's summary table of
8 MI355X where every action passes, and of 2 MI210 where IET (power) and GST (GEMM stress) fail; and amd-smi's RAS
counters of an MI300X (`amd-smi metric -g 0 -k`, no uncorrectable error: the health readers read its text as they read
`--json`). No AMD GPU and no test runner image ran here: the stand-in prints what RVS printed elsewhere.

A node whose RVS fails is tainted `aks-gpu/gpu-quarantine=diagnostic:NoSchedule` and cordoned; a healthy one is not;
the quarantined node returns only after a passing RVS run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.gpu.diag.expectations import rvs_level_for
from aks_gpu.local.control_plane import cri_log, recorded_logs, recorded_output_name, smi_exec
from aks_gpu.naming import DIAGNOSTIC_TAINT_VALUE, GPU_NAMESPACE, POOL_LABEL, QUARANTINE_TAINT_KEY
from aks_gpu.validation.diagnostics import AMD_HOLDER, Level, pod_name
from tests.conftest import PROJECT_DIR
from tests.e2e.conftest import LocalCluster, started

STACK = "amd"
POOL = "mi300x"
LEVEL: Level = 2
FIXTURES = PROJECT_DIR / "tests" / "fixtures"
RVS_PASS = FIXTURES / "diag/30_rvs_8xmi355x_rocm7.0.2_all_pass.txt"
RVS_FAIL = FIXTURES / "diag/31_rvs_2xmi210_rocm7.2.0_iet_gst_fail_excerpt.txt"
AMD_SMI = FIXTURES / "health/09_amd-smi-metric-ecc_mi300x_umc_correctable.txt"
KWOK_SYNC_S = 3.0


@dataclass(frozen=True)
class Served:
    failing: str  # the node whose RVS fails (at first)
    healthy: str
    rvs_file: dict[str, Path]  # node: the file its rvs stand-in prints


@pytest.fixture(scope="module")
def amd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from started(tmp_path_factory, STACK, nodes_per_pool=2)


@pytest.fixture(scope="module")
def served(amd: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    nodes = sorted(n["metadata"]["name"] for n in amd.json("get", "nodes", "-l", f"{POOL_LABEL}={POOL}")["items"])
    assert len(nodes) == 2, nodes
    failing, healthy = nodes
    objects: list[dict[str, Any]] = []
    rvs_file: dict[str, Path] = {}
    for node, rvs in ((failing, RVS_FAIL), (healthy, RVS_PASS)):
        folder = tmp_path_factory.mktemp(f"diag-{node}")
        # What the pod's `sh -c` runs once /opt/rocm/bin is on its PATH: rvs at the level's RVS level.
        rvs_file[node] = folder / recorded_output_name(["rvs", "-r", str(rvs_level_for(LEVEL).rvs_level)])
        rvs_file[node].write_text(rvs.read_text())
        log = folder / "amd-smi.log"
        log.write_text(cri_log(AMD_SMI.read_text()))
        objects.append(smi_exec(GPU_NAMESPACE, pod_name(node), AMD_HOLDER, folder))
        objects.append(recorded_logs(GPU_NAMESPACE, pod_name(node), {"amd-smi": log}))
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    applied = amd.kubectl("apply", "-f", "-", stdin=listed)
    assert applied.returncode == 0, applied.stderr
    time.sleep(KWOK_SYNC_S)  # kwok reads Exec and Logs objects from a watch
    yield Served(failing, healthy, rvs_file)
    amd.kubectl("delete", "-f", "-", "--wait=false", stdin=listed)


def diagnose(amd: LocalCluster, *nodes: str) -> tuple[int, dict[str, dict[str, Any]], str]:
    args = ["validate", "--stack", STACK, "--kubeconfig", str(amd.kubeconfig), "--deep", "--level", str(LEVEL)]
    for node in nodes:
        args += ["--node", node]
    done = amd.aksgpu(*args, "--quarantine", "--json", timeout=300)
    report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {"nodes": []}
    return done.returncode, {n["node"]: n for n in report["nodes"]}, done.stderr


def quarantine(amd: LocalCluster, node: str) -> tuple[list[str], bool]:
    """The values of the node's quarantine taints, and whether it is cordoned."""
    item = amd.json("get", "node", node)
    values = [t.get("value", "") for t in item["spec"].get("taints") or [] if t["key"] == QUARANTINE_TAINT_KEY]
    return values, bool(item["spec"].get("unschedulable"))


def test_an_amd_node_whose_rvs_fails_is_tainted_and_cordoned_a_healthy_one_is_not(amd: LocalCluster, served: Served) -> None:
    code, nodes, stderr = diagnose(amd, served.failing, served.healthy)
    assert code == 1, stderr[-2000:]
    failing, healthy = nodes[served.failing], nodes[served.healthy]
    # Both outputs came through the API server: the init container's log and the exec were read and graded.
    assert [(t["tool"], t["state"]) for t in failing["tools"]] == [("amd-smi", "healthy"), ("rvs", "unhealthy")], failing
    assert failing["verdict"] == "unhealthy: rvs: IET (action_5, GPU 20068, 48932), GST (action_6)"
    assert failing["action"] == "quarantine"
    assert healthy["state"] == "healthy" and healthy["action"] == "none", healthy
    assert quarantine(amd, served.failing) == ([DIAGNOSTIC_TAINT_VALUE], True)
    assert quarantine(amd, served.healthy) == ([], False)
    # The diagnostic pods are gone: they held every GPU of their nodes.
    left = amd.json("get", "pods", "-n", GPU_NAMESPACE, "-l", "app.kubernetes.io/name=gpu-diag")["items"]
    assert [p for p in left if not p["metadata"].get("deletionTimestamp")] == []


def test_a_quarantined_amd_node_returns_only_after_a_passing_rvs(amd: LocalCluster, served: Served) -> None:
    assert quarantine(amd, served.failing)[0] == [DIAGNOSTIC_TAINT_VALUE], "run after the test above"
    # RVS that could not run (no level recipe for the GPU it found) proves nothing: still quarantined. The line is the
    # one rvs writes to stderr then (ROCm/ROCmValidationSuite rvs/src/rvsexec.cpp and src/rvsliblogger.cpp
    # logger::Err @21584e14; the pod's `2>&1` keeps it).
    no_level = "RVS-ERROR [CLI] No test levels support for the detected GPU or no GPU detected !\n"
    served.rvs_file[served.failing].write_text(no_level)
    code, nodes, _ = diagnose(amd, served.failing)
    assert code == 1 and nodes[served.failing]["state"] == "inconclusive"
    assert quarantine(amd, served.failing) == ([DIAGNOSTIC_TAINT_VALUE], True)
    # A passing one returns it: taint gone, uncordoned.
    served.rvs_file[served.failing].write_text(RVS_PASS.read_text())
    code, nodes, stderr = diagnose(amd, served.failing)
    assert code == 0, stderr[-2000:]
    assert nodes[served.failing]["action"] == "return"
    assert quarantine(amd, served.failing) == ([], False)
