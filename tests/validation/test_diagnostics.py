"""The diagnostic pod a GPU node is proven with, and what its verdict does to the node (issue 43 item 1)."""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.cli import validate
from aks_gpu.cluster.snapshot import write_snapshot
from aks_gpu.gpu.diag import Grade
from aks_gpu.naming import DIAGNOSTIC_TAINT_VALUE, HOSTNAME_LABEL, QUARANTINE_TAINT_KEY, QUARANTINE_TAINT_VALUE
from aks_gpu.resolved.targets import plugin_targets
from aks_gpu.validation.deep import NodeResult
from aks_gpu.validation.diagnostics import (
    DEADLINE_SECONDS,
    Level,
    dcgm_command,
    diagnostic_pod_manifest,
    exec_step,
    grade_node,
    node_action,
    pod_name,
    tool_grades,
)
from aks_gpu.validation.hooks import run_deploy_validation
from tests.cluster.snapshots import healthy_snapshot, nodes_in_every_pool
from tests.conftest import PROJECT_DIR, stack_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
POOLS = {pool.name: pool for pool in stack_model("prod").pools}


def pod_spec(pod: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = pod["spec"]
    return spec


def test_the_pod_is_pinned_to_its_node_and_asks_for_every_gpu_of_it() -> None:
    pod = diagnostic_pod_manifest(POOLS["train"], "aks-train-31415926-vmss000000", 3)
    spec = pod_spec(pod)
    assert spec["nodeSelector"][HOSTNAME_LABEL] == "aks-train-31415926-vmss000000"
    assert spec["nodeSelector"]["aks-gpu/pool"] == "train"
    containers = spec["initContainers"] + spec["containers"]
    assert [c["name"] for c in containers] == ["cuda-context", "nccl-all-reduce", "dcgm"]
    # Every container holds all 8 GPUs: no GPU work can share the node while it runs.
    assert all(c["resources"]["limits"]["nvidia.com/gpu"] == "8" for c in containers)
    assert "all_reduce_perf -b 8 -e 16G -f 2 -g 8" in containers[1]["command"][-1]
    assert dcgm_command(3) == ["dcgmi", "diag", "-r", "3", "-j"]
    assert spec["activeDeadlineSeconds"] == DEADLINE_SECONDS[3] and spec["restartPolicy"] == "Never"
    assert pod["metadata"]["name"] == "gpu-diag-aks-train-31415926-vmss000000"


def test_the_pod_runs_on_a_quarantined_cordoned_node() -> None:
    keys = {t["key"] for t in pod_spec(diagnostic_pod_manifest(POOLS["train"], "n", 2))["tolerations"]}
    assert {QUARANTINE_TAINT_KEY, "node.kubernetes.io/unschedulable", "nvidia.com/gpu"} <= keys


def test_a_single_gpu_or_mig_pool_runs_no_nccl_and_asks_for_every_unit() -> None:
    spec = pod_spec(diagnostic_pod_manifest(POOLS["infer"], "n", 1))
    names = [c["name"] for c in spec["initContainers"] + spec["containers"]]
    assert names == ["cuda-context", "dcgm"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "7"  # 7 MIG instances of its A100


def test_a_long_node_name_still_makes_a_valid_pod_name() -> None:
    name = pod_name("aks-" + "x" * 70)
    assert len(name) <= 63 and name.startswith("gpu-diag-")
    assert pod_name("aks-" + "x" * 70) != pod_name("aks-" + "x" * 69 + "y")


def test_a_node_is_graded_from_every_tool_it_ran() -> None:
    dcgm = (FIXTURES / "diag/01_dcgmi-diag-r2_8xa100_dcgm3.3.3_pass.txt").read_text()
    cuda = (FIXTURES / "diag/20_deviceQuery_cuda-sample_error802.txt").read_text()
    nccl = (FIXTURES / "diag/10_all_reduce_perf_8xh100_256M-2G_nvls.txt").read_text()
    train = POOLS["train"]
    faulty = grade_node(train, {"dcgm-diag": dcgm, "cuda-context": cuda, "nccl-all-reduce": nccl}, 2)
    # DCGM passes, yet CUDA cannot start: the fabric manager is down (issue 43: nodes that pass every SMI check).
    assert faulty.state == "unhealthy" and "fabric manager" in faulty.part
    missing = grade_node(train, {"dcgm-diag": dcgm, "nccl-all-reduce": nccl}, 2)
    assert missing.state == "inconclusive" and "cuda-context" in missing.part


def test_an_nccl_run_over_part_of_the_nodes_gpus_proves_nothing_about_the_rest() -> None:
    # A passing all_reduce_perf over 4 A100s (a real run: its ranks name 4 devices of one host).
    four = (FIXTURES / "diag/63_all_reduce_perf_4xa100-sxm4_g4_128M_pass_rst_indent.txt").read_text()

    def nccl_grade(gpus: int) -> Grade:
        pool = replace(POOLS["train"], gpus_per_node=gpus)
        return next(g for g in tool_grades(pool, {"nccl-all-reduce": four}, 2) if g.tool == "nccl-all-reduce")

    # On a node of 8 GPUs it left 4 untested; on a node of 4 it tested them all.
    assert nccl_grade(8).state == "inconclusive" and "4 of the 8 GPUs" in nccl_grade(8).part
    assert nccl_grade(4).state == "healthy"


def node(taints: list[dict[str, str]], unschedulable: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": "n", "resourceVersion": "42"}, "spec": {"taints": taints, "unschedulable": unschedulable}}


OURS = {"key": QUARANTINE_TAINT_KEY, "value": DIAGNOSTIC_TAINT_VALUE, "effect": "NoSchedule"}
ENGINES = {"key": QUARANTINE_TAINT_KEY, "value": QUARANTINE_TAINT_VALUE, "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def test_a_failing_node_is_tainted_and_cordoned_keeping_its_other_taints() -> None:
    done = node_action(node([GPU]), Grade("node", "unhealthy", "dcgm-diag: PCIe"))
    assert done.action == "quarantine" and done.patch is not None
    assert done.patch["spec"]["unschedulable"] is True and done.patch["spec"]["taints"] == [GPU, OURS]
    # Computed from resourceVersion 42: refused by the API server should the node have changed since.
    assert done.patch["metadata"] == {"resourceVersion": "42"}


@pytest.mark.parametrize("state", ["healthy", "inconclusive"])
def test_a_healthy_or_inconclusive_node_that_was_never_quarantined_is_left_alone(state: str) -> None:
    assert node_action(node([GPU]), Grade("node", state, "" if state == "healthy" else "pcie skipped")).action == "none"  # type: ignore[arg-type]


def test_a_quarantined_node_returns_only_after_a_passing_diagnostic() -> None:
    held = node([GPU, OURS], unschedulable=True)
    assert node_action(held, Grade("node", "inconclusive", "pcie skipped")).action == "none"
    assert node_action(held, Grade("node", "unhealthy", "x")).action == "none"
    back = node_action(held, Grade("node", "healthy"))
    assert back.action == "return" and back.patch is not None
    assert back.patch["spec"] == {"taints": [GPU], "unschedulable": False}


def test_a_pass_never_lifts_the_engines_quarantine() -> None:
    back = node_action(node([GPU, ENGINES, OURS], unschedulable=True), Grade("node", "healthy"))
    assert back.patch is not None
    assert back.patch["spec"] == {"taints": [GPU, ENGINES]}  # ours removed, the engine's kept, still cordoned


MI300X = stack_model("amd").pools[0]


def test_an_amd_node_gets_the_test_runners_image_holding_every_gpu() -> None:
    pod = diagnostic_pod_manifest(MI300X, "aks-mi300x-31415926-vmss000000", 2)
    spec = pod_spec(pod)
    assert spec["nodeSelector"][HOSTNAME_LABEL] == "aks-mi300x-31415926-vmss000000"
    containers = spec["initContainers"] + spec["containers"]
    assert [c["name"] for c in containers] == ["amd-smi", "rvs"]
    # AMD's public test runner image (RVS only; AGFHC's is private), every container holding all 8 MI300X.
    assert {c["image"] for c in containers} == {"docker.io/rocm/test-runner:v1.5.1"}
    assert all(c["resources"]["limits"]["amd.com/gpu"] == "8" for c in containers)
    assert "amd-smi metric --ecc --json" in containers[0]["command"][-1]
    # The holder never runs the test runner's entrypoint (it would need a service account to report): it keeps the GPUs.
    assert containers[1]["command"] == ["sh", "-c", f"sleep {DEADLINE_SECONDS[2]}"]
    assert spec["automountServiceAccountToken"] is False and spec["activeDeadlineSeconds"] == DEADLINE_SECONDS[2]
    keys = {t["key"] for t in spec["tolerations"]}
    assert {QUARANTINE_TAINT_KEY, "node.kubernetes.io/unschedulable"} <= keys
    assert {t["key"] for t in (tol.to_kube() for tol in MI300X.tolerations)} <= keys


@pytest.mark.parametrize(("level", "rvs_level"), [(1, 2), (2, 3), (3, 4)])
def test_each_level_execs_an_rvs_level_within_the_pods_deadline(level: Level, rvs_level: int) -> None:
    step = exec_step(MI300X, level)
    assert step.tool == "rvs" and step.command[-1].endswith(f"rvs -r {rvs_level} 2>&1")
    assert step.command[-1].startswith("PATH=/opt/rocm/bin:$PATH;")
    assert 0 < step.timeout_s < DEADLINE_SECONDS[level]


def test_nvidia_nodes_still_exec_dcgmi_until_the_pods_deadline() -> None:
    step = exec_step(POOLS["train"], 3)
    assert (step.tool, step.command, step.timeout_s) == ("dcgm-diag", dcgm_command(3), float(DEADLINE_SECONDS[3]))


RVS_PASS = FIXTURES / "diag/30_rvs_8xmi355x_rocm7.0.2_all_pass.txt"
RVS_FAIL = FIXTURES / "diag/31_rvs_2xmi210_rocm7.2.0_iet_gst_fail_excerpt.txt"
AMD_SMI_ECC = FIXTURES / "health/09_amd-smi-metric-ecc_mi300x_umc_correctable.txt"


def test_an_amd_node_is_graded_by_amd_smi_and_rvs() -> None:
    healthy = grade_node(MI300X, {"amd-smi": AMD_SMI_ECC.read_text(), "rvs": RVS_PASS.read_text()}, 2)
    assert str(healthy) == "healthy"
    failed = grade_node(MI300X, {"amd-smi": AMD_SMI_ECC.read_text(), "rvs": RVS_FAIL.read_text()}, 2)
    assert str(failed) == "unhealthy: rvs: IET (action_5, GPU 20068, 48932), GST (action_6)"
    # RVS passes, yet a GPU counted an uncorrectable error: AMD's own health rule fails the node.
    ras = AMD_SMI_ECC.read_text().replace("UNCORRECTABLE_COUNT: 0", "UNCORRECTABLE_COUNT: 1")
    assert str(grade_node(MI300X, {"amd-smi": ras, "rvs": RVS_PASS.read_text()}, 2)) == "unhealthy: amd-smi: ras-uncorrectable"
    # amd-smi could not reach the driver: nothing proven.
    no_driver = (FIXTURES / "smi/70_error_amd-smi_no_amdgpu_wsl.txt").read_text()
    graded = grade_node(MI300X, {"amd-smi": no_driver, "rvs": RVS_PASS.read_text()}, 2)
    assert graded.state == "inconclusive" and "driver not initialized" in graded.part


# ---------------------------------------------------------------- aksgpu validate --deep --snapshot

STACK = ["--stack", "prod", "--project-dir", str(PROJECT_DIR)]
TRAIN_NODE = "aks-train-31415926-vmss000000"


def deep_snapshot(folder: Path, outputs: dict[str, str]) -> Path:
    """The healthy example snapshot with ``outputs`` (tool: fixture file) recorded for its first train node."""
    shutil.copytree(PROJECT_DIR / "examples/snapshots/healthy", folder)
    recorded = folder / "diag" / TRAIN_NODE
    recorded.mkdir(parents=True)
    for tool, fixture in outputs.items():
        (recorded / f"{tool}.txt").write_text((FIXTURES / fixture).read_text())
    return folder


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aksgpu")
    validate.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    exit_code: int = args.handler(args)
    return exit_code


HEALTHY_RUN = {
    "dcgm-diag": "diag/01_dcgmi-diag-r2_8xa100_dcgm3.3.3_pass.txt",
    "nccl-all-reduce": "diag/10_all_reduce_perf_8xh100_256M-2G_nvls.txt",
}


def test_validate_deep_grades_a_snapshots_recorded_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = HEALTHY_RUN | {"cuda-context": "diag/20_deviceQuery_cuda-sample_error802.txt"}
    folder = deep_snapshot(tmp_path / "snap", outputs)
    code = run_cli(["validate", *STACK, "--deep", "--level", "2", "--snapshot", str(folder), "--node", TRAIN_NODE, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["passed"] is False and report["level"] == 2
    (node,) = report["nodes"]
    assert list(node) == ["node", "pool", "state", "verdict", "tools", "action", "actionReason"]
    assert node["node"] == TRAIN_NODE and node["state"] == "unhealthy" and "fabric manager" in node["verdict"]
    assert {t["tool"]: t["state"] for t in node["tools"]} == {
        "cuda-context": "unhealthy",
        "nccl-all-reduce": "healthy",
        "dcgm-diag": "healthy",
    }


def test_validate_deep_calls_a_node_without_recorded_outputs_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = deep_snapshot(tmp_path / "snap", {})
    code = run_cli(["validate", *STACK, "--deep", "--snapshot", str(folder), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and {n["state"] for n in report["nodes"]} == {"inconclusive"}


def test_deep_flags_need_deep_and_quarantine_needs_a_live_cluster(tmp_path: Path) -> None:
    folder = deep_snapshot(tmp_path / "snap", {})
    assert run_cli(["validate", *STACK, "--level", "2", "--snapshot", str(folder)]) == 2
    assert run_cli(["validate", *STACK, "--deep", "--quarantine", "--snapshot", str(folder)]) == 2
    assert run_cli(["validate", *STACK, "--deep", "--node", "nope", "--snapshot", str(folder)]) == 2


def test_validate_deep_grades_an_amd_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = stack_model("amd")
    snapshot = healthy_snapshot(model, plugin_targets(model), nodes_in_every_pool(model, 2))
    folder = tmp_path / "snap"
    write_snapshot(snapshot, folder)
    failing, passing = sorted(n["metadata"]["name"] for n in snapshot.nodes if "mi300x" in n["metadata"]["name"])
    for node, rvs in ((failing, RVS_FAIL), (passing, RVS_PASS)):
        (folder / "diag" / node).mkdir(parents=True)
        (folder / "diag" / node / "rvs.txt").write_text(rvs.read_text())
        (folder / "diag" / node / "amd-smi.txt").write_text(AMD_SMI_ECC.read_text())
    amd = ["--stack", "amd", "--project-dir", str(PROJECT_DIR)]
    code = run_cli(["validate", *amd, "--deep", "--level", "2", "--snapshot", str(folder), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes[failing]["verdict"] == "unhealthy: rvs: IET (action_5, GPU 20068, 48932), GST (action_6)"
    assert [(t["tool"], t["state"]) for t in nodes[failing]["tools"]] == [("amd-smi", "healthy"), ("rvs", "unhealthy")]
    assert nodes[passing]["state"] == "healthy"


# ---------------------------------------------------------------- in pulumi up: validation.diagnosticsOnDeploy


class FakeDiagnose:
    """Stands in for the live run: each node of the pools it is given gets ``state``; remembers its calls."""

    def __init__(self, state: str = "healthy", error: Exception | None = None) -> None:
        self.state, self.error = state, error
        self.calls: list[dict[str, Any]] = []

    def __call__(self, model: Any, level: Any, wanted: Any = None, *, kubeconfig_text: Any, skip: Any) -> list[NodeResult]:
        self.calls.append({"pools": [p.name for p in model.pools], "level": level, "skip": list(skip)})
        if self.error is not None:
            raise self.error
        part = "" if self.state == "healthy" else "dcgm-diag: PCIe"
        return [NodeResult(f"{p.name}-0", p.name, Grade("node", self.state, part), (), None) for p in model.pools]  # type: ignore[arg-type]


def deploy_model(on: bool, stack: str = "prod") -> Any:
    model = stack_model(stack)
    validation = model.config.validation.model_copy(update={"diagnostics_on_deploy": on})
    return replace(model, config=model.config.model_copy(update={"validation": validation}))


def healthy_collector(model: Any) -> Any:
    snapshot = healthy_snapshot(model, plugin_targets(model), nodes_in_every_pool(model, 2))
    return lambda *args, **kwargs: snapshot


def test_the_deploy_hook_runs_level_1_diagnostics_only_when_asked() -> None:
    for on in (False, True):
        model = deploy_model(on)
        diagnose = FakeDiagnose()
        outcome = run_deploy_validation(
            model, plugin_targets(model), "kubeconfig", "fail", collect=healthy_collector(model), diagnose=diagnose
        )
        assert outcome.passed
        assert diagnose.calls == ([{"pools": ["train", "infer", "inferfull"], "level": 1, "skip": []}] if on else [])
        assert ("3 of 3 GPU node(s) healthy" in outcome.report) is on


def test_the_deploy_hook_diagnoses_amd_nodes_too() -> None:
    model = deploy_model(True, "amd")
    diagnose = FakeDiagnose()
    outcome = run_deploy_validation(
        model, plugin_targets(model), "kubeconfig", "fail", collect=healthy_collector(model), diagnose=diagnose
    )
    assert outcome.passed and diagnose.calls == [{"pools": ["mi300x"], "level": 1, "skip": []}]
    assert "vendor diagnostics (amd-smi RAS, RVS): 1 of 1 GPU node(s) healthy" in outcome.report


@pytest.mark.parametrize("state", ["unhealthy", "inconclusive"])
def test_a_node_not_proven_fails_the_deploy(state: str) -> None:
    model = deploy_model(True)
    outcome = run_deploy_validation(
        model, plugin_targets(model), "kubeconfig", "fail", collect=healthy_collector(model), diagnose=FakeDiagnose(state)
    )
    assert not outcome.passed
    assert f"FAIL gpu-diagnostic train/train-0: {state}: dcgm-diag: PCIe" in outcome.report


def test_diagnostics_that_cannot_run_fail_the_deploy_in_one_line() -> None:
    model = deploy_model(True)
    broken = FakeDiagnose(error=ValueError("cannot list the GPU nodes: 403"))
    outcome = run_deploy_validation(
        model, plugin_targets(model), "kubeconfig", "fail", collect=healthy_collector(model), diagnose=broken
    )
    assert not outcome.passed and "vendor diagnostics could not run" in outcome.report
