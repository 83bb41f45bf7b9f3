"""``run_checks`` over snapshots of the prod stack (8x H100 training pool, A100 MIG inference pool, 8x H100
whole-GPU inference pool) and a few other pools, each test breaking one thing the way it breaks on a real cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.gpu.health import read_smi_and_health
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.resolved.targets import plugin_targets
from aks_gpu.validation.checks import CHECK_IDS, CheckResult, run_checks
from tests.cluster.snapshots import (
    amd_smi_json,
    edited,
    find_node,
    fixture_text,
    healthy_snapshot,
    node_name,
    nodes_in_every_pool,
    nvidia_smi_table,
    pods_on,
    set_not_ready,
    smi_for,
)
from tests.conftest import HEALTH_FIXTURES_DIR, raw_stack, stack_model

PROD = stack_model("prod")
TRAIN_0, TRAIN_1 = node_name("train", 0), node_name("train", 1)
INFER_0, INFER_1 = node_name("infer", 0), node_name("infer", 1)
INFERFULL_0, INFERFULL_1 = node_name("inferfull", 0), node_name("inferfull", 1)
POOLS = tuple(pool.name for pool in PROD.pools)
NODES = tuple(node_name(pool, index) for pool in POOLS for index in range(2))  # prod_snapshot()'s GPU nodes, in order
PER_NODE = ("device-plugin-ready", "gpu-schedulable", "smi-error", "driver-version", "gpu-count", "mig-mode", "gpu-health")


def model_with(pool_changes: dict[str, dict[str, Any]] | None = None, **stack_changes: Any) -> PlatformModel:
    """The prod stack with some pool keys (by pool name) or top-level keys changed, as a stack file would."""
    raw = copy.deepcopy(raw_stack("prod"))
    for pool in raw["aks-gpu:gpuPools"]:
        pool.update((pool_changes or {}).get(pool["name"], {}))
    raw.update(stack_changes)
    return validate_stack(raw, "test").model


def prod_snapshot(model: PlatformModel = PROD, **nodes: int) -> ClusterSnapshot:
    """Two nodes in every pool of ``model`` (prod: train, infer, inferfull), ``nodes[pool]`` where given."""
    return edited(healthy_snapshot(model, plugin_targets(model), nodes_in_every_pool(model, 2, **nodes)))


def check(snapshot: ClusterSnapshot, model: PlatformModel = PROD) -> list[CheckResult]:
    return run_checks(model, plugin_targets(model), snapshot)


def one(results: list[CheckResult], check_id: str, node: str | None, pool: str | None = None) -> CheckResult:
    found = [r for r in results if r.id == check_id and r.node == node and (pool is None or r.pool == pool)]
    assert len(found) == 1, f"expected one {check_id} result for {node}, got {found}"
    return found[0]


def not_passing(results: list[CheckResult]) -> set[tuple[str, str | None, str]]:
    return {(r.id, r.node, r.status) for r in results if r.status != "pass"}


# ---------------------------------------------------------------- healthy


def test_a_healthy_cluster_passes_every_check_on_every_gpu_node() -> None:
    results = check(prod_snapshot())

    assert not_passing(results) == set()
    assert NODES == (TRAIN_0, TRAIN_1, INFER_0, INFER_1, INFERFULL_0, INFERFULL_1)
    for node in NODES:
        assert {r.id for r in results if r.node == node} == set(PER_NODE)
    for pool in POOLS:
        assert {r.id for r in results if r.pool == pool and r.node is None} == {"device-plugin-ready", "driver-consistency"}
    # The system node and the coredns pod of the snapshot are no GPU pool's business.
    assert {r.node for r in results} == {None, *NODES}


def test_pass_messages_say_what_was_found() -> None:
    results = check(prod_snapshot())

    assert one(results, "driver-version", TRAIN_0).message == "driver 565.57.01 >= minDriverVersion 550.54"
    assert one(results, "gpu-count", TRAIN_0).message == "8 GPU(s), as Standard_ND96isr_H100_v5 has"
    assert "nvidia.com/gpu x 7" in one(results, "gpu-schedulable", INFER_0).message
    assert "single strategy" in one(results, "gpu-schedulable", INFER_0).message
    assert one(results, "mig-mode", INFER_0).message == "MIG on, 7 x 1g.10gb (1 GPU(s) x 7)"
    assert one(results, "driver-consistency", None, "train").message == "all 2 node(s) read run driver 565.57.01"
    # The whole-GPU inference pool: the same H100 VM as training, no MIG, every GPU schedulable.
    assert one(results, "gpu-count", INFERFULL_0).message == "8 GPU(s), as Standard_ND96isr_H100_v5 has"
    assert "nvidia.com/gpu x 8" in one(results, "gpu-schedulable", INFERFULL_0).message
    assert one(results, "mig-mode", INFERFULL_0).status == "pass"


def test_results_come_in_pool_order_pool_wide_first_then_nodes_by_name() -> None:
    snapshot = prod_snapshot()
    snapshot.nodes.reverse()  # the API server's order is not the report's
    results = check(snapshot)

    keys = [(r.pool, r.node) for r in results]
    assert keys[:2] == [("train", None), ("train", None)]
    nodes_in_order = list(dict.fromkeys(node for _, node in keys if node))
    assert nodes_in_order == list(NODES)
    per_node = [r.id for r in results if r.node == TRAIN_0]
    assert per_node == [c for c in CHECK_IDS if c in PER_NODE]


def test_each_node_output_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def counting(text: str, vendor: Any = "auto", **options: Any) -> Any:
        calls.append(text)
        return read_smi_and_health(text, vendor, **options)

    monkeypatch.setattr("aks_gpu.validation.checks.read_smi_and_health", counting)
    check(prod_snapshot(train=3, infer=2, inferfull=1))
    assert len(calls) == 6


# ---------------------------------------------------------------- driver-version, driver-consistency


def test_a_driver_older_than_the_minimum_fails_with_the_upgrade_command() -> None:
    model = model_with({"train": {"minDriverVersion": "570.86"}})
    results = check(prod_snapshot(model), model)

    failed = one(results, "driver-version", TRAIN_0)
    assert failed.status == "fail"
    assert "driver 565.57.01 is older than the pool's minDriverVersion 570.86" in failed.message
    assert "az aks nodepool upgrade -g rg-gpu-prod --cluster-name aks-gpu-prod -n train --node-image-only" in failed.message
    assert one(results, "driver-version", INFER_0).status == "pass"  # its minimum is still 550.54


def test_with_gpu_driver_none_the_advice_is_not_a_node_image_upgrade() -> None:
    model = model_with({"train": {"minDriverVersion": "570.86", "gpuDriver": "None"}})
    failed = one(check(prod_snapshot(model), model), "driver-version", TRAIN_0)
    assert failed.status == "fail"
    assert "gpuDriver None: AKS installs no driver" in failed.message
    assert "--node-image-only" not in failed.message


@pytest.mark.parametrize(
    ("minimum", "status"),
    [
        ("565.100", "fail"),  # as text "565.57.01" > "565.100"; as versions 57 < 100
        ("565.9", "pass"),  # as text "565.57.01" < "565.9"; as versions 57 > 9
        ("565.57.1", "pass"),  # the same version written without the leading zero
        ("565", "pass"),
    ],
)
def test_driver_versions_compare_as_versions_not_text(minimum: str, status: str) -> None:
    model = model_with({"train": {"minDriverVersion": minimum}})
    assert one(check(prod_snapshot(model), model), "driver-version", TRAIN_0).status == status


def test_without_a_minimum_the_version_found_is_reported() -> None:
    model = model_with({"train": {"minDriverVersion": None}})
    result = one(check(prod_snapshot(model), model), "driver-version", TRAIN_0)
    assert result.status == "pass"
    assert result.message == "driver 565.57.01 (the pool sets no minDriverVersion)"


def test_mixed_drivers_in_a_pool_fail_consistency_and_name_the_nodes() -> None:
    snapshot = prod_snapshot(train=3)
    train_2 = node_name("train", 2)
    snapshot.smi[train_2] = smi_for(PROD.pool("train"), driver="550.127.05")
    results = check(snapshot)

    consistency = one(results, "driver-consistency", None, "train")
    assert consistency.status == "fail"
    assert f"565.57.01 on 2 node(s) ({TRAIN_0}, {TRAIN_1})" in consistency.message
    assert f"550.127.05 on 1 node(s) ({train_2})" in consistency.message
    assert "node image upgrade is probably half done" in consistency.message
    # Both versions meet the minimum: only the consistency check fails.
    assert not_passing(results) == {("driver-consistency", None, "fail")}


# ---------------------------------------------------------------- device-plugin-ready


def test_a_crashing_plugin_pod_fails_the_daemonset_and_its_node() -> None:
    snapshot = prod_snapshot()
    (pod,) = pods_on(snapshot, TRAIN_1)
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    pod["status"]["containerStatuses"][0]["ready"] = False
    (daemonset,) = snapshot.daemonsets  # one DaemonSet serves the three NVIDIA pools, 2 nodes each
    daemonset["status"].update(numberReady=5, numberUnavailable=1)
    del daemonset["status"]["numberAvailable"]  # the API server leaves zero and unset counts out
    results = check(snapshot)

    train = one(results, "device-plugin-ready", None, "train")
    assert train.status == "fail"
    assert "nvidia-device-plugin-daemonset: 6 desired, 5 ready, 0 available" in train.message
    assert f"1 of this pool's 2 node(s) have no ready plugin pod ({TRAIN_1})" in train.message
    node = one(results, "device-plugin-ready", TRAIN_1)
    assert node.status == "fail"
    assert "CrashLoopBackOff" in node.message
    assert f"kubectl -n gpu-resources describe pod {pod['metadata']['name']}" in node.message
    assert one(results, "device-plugin-ready", TRAIN_0).status == "pass"
    # The inference pools share the DaemonSet but none of their nodes is hit: told, not failed.
    for pool in ("infer", "inferfull"):
        infer = one(results, "device-plugin-ready", None, pool)
        assert infer.status == "warn"
        assert "every node of this pool has a ready plugin pod" in infer.message


def test_a_missing_daemonset_fails_every_pool_it_serves() -> None:
    snapshot = prod_snapshot()
    snapshot.daemonsets.clear()
    results = check(snapshot)
    for pool in POOLS:
        result = one(results, "device-plugin-ready", None, pool)
        assert result.status == "fail"
        assert (
            "no DaemonSet in namespace gpu-resources runs pods labelled app.kubernetes.io/name=nvidia-device-plugin"
            in result.message
        )


def test_a_daemonset_scheduling_no_pod_on_the_pool_fails() -> None:
    snapshot = prod_snapshot(train=0, infer=1, inferfull=0)
    snapshot.pods[:] = [pod for pod in snapshot.pods if pod["spec"].get("nodeName") != INFER_0]
    (daemonset,) = snapshot.daemonsets
    daemonset["status"].update(desiredNumberScheduled=0, numberReady=0, numberAvailable=0)
    result = one(check(snapshot), "device-plugin-ready", None, "infer")
    assert result.status == "fail"
    assert "it schedules no pod although the pool has 1 node(s)" in result.message


def test_a_node_without_a_plugin_pod_fails() -> None:
    snapshot = prod_snapshot()
    snapshot.pods[:] = [pod for pod in snapshot.pods if pod["spec"].get("nodeName") != INFER_1]
    result = one(check(snapshot), "device-plugin-ready", INFER_1)
    assert result.status == "fail"
    assert result.message.startswith("no device plugin pod (namespace gpu-resources")
    assert "tolerations" in result.message


def test_a_ready_pod_wins_over_an_old_one_still_terminating() -> None:
    snapshot = prod_snapshot()
    (pod,) = pods_on(snapshot, TRAIN_0)
    old = copy.deepcopy(pod)
    old["metadata"].update(name="nvidia-device-plugin-daemonset-bbbbb", deletionTimestamp="2025-01-01T00:00:00Z")
    snapshot.pods.append(old)
    assert one(check(snapshot), "device-plugin-ready", TRAIN_0).status == "pass"


# ---------------------------------------------------------------- gpu-schedulable


def test_a_node_without_the_gpu_resource_is_not_schedulable() -> None:
    snapshot = prod_snapshot()
    del find_node(snapshot, TRAIN_0)["status"]["allocatable"]["nvidia.com/gpu"]
    result = one(check(snapshot), "gpu-schedulable", TRAIN_0)
    assert result.status == "fail"
    assert result.message.startswith("allocatable has no nvidia.com/gpu: the device plugin has not registered the GPUs")


def test_a_mig_node_exposing_the_mixed_resource_points_at_the_strategy() -> None:
    snapshot = prod_snapshot()
    allocatable = find_node(snapshot, INFER_0)["status"]["allocatable"]
    del allocatable["nvidia.com/gpu"]
    allocatable["nvidia.com/mig-1g.10gb"] = "7"
    result = one(check(snapshot), "gpu-schedulable", INFER_0)
    assert result.status == "fail"
    assert "advertises nvidia.com/mig-1g.10gb x 7 instead" in result.message
    assert "migStrategy" in result.message


def test_a_mig_node_counting_whole_gpus_fails_with_the_expected_count() -> None:
    snapshot = prod_snapshot()
    find_node(snapshot, INFER_0)["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    result = one(check(snapshot), "gpu-schedulable", INFER_0)
    assert result.status == "fail"
    assert "nvidia.com/gpu x 1 allocatable, expected 7 (1 GPU(s) x 7 MIG 1g.10gb slices, single strategy)" in result.message
    assert "whole GPUs, not MIG slices" in result.message


def test_time_slicing_not_in_effect_fails_on_the_dev_pool() -> None:
    dev = stack_model("dev")  # one T4, 4 time-slicing replicas
    snapshot = edited(healthy_snapshot(dev, plugin_targets(dev), {"dev": 1}))
    healthy = check(snapshot, dev)
    assert not_passing(healthy) == set()
    assert one(healthy, "mig-mode", node_name("dev", 0)).message == "MIG off: this GPU has no MIG"

    find_node(snapshot, node_name("dev", 0))["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    result = one(check(snapshot, dev), "gpu-schedulable", node_name("dev", 0))
    assert result.status == "fail"
    assert "expected 4 (1 GPU(s) x 4 time-slicing replicas)" in result.message
    assert "time-slicing is not in effect" in result.message


def test_a_cordoned_node_warns() -> None:
    snapshot = prod_snapshot()
    find_node(snapshot, TRAIN_0)["spec"]["unschedulable"] = True
    result = one(check(snapshot), "gpu-schedulable", TRAIN_0)
    assert result.status == "warn"
    assert f"kubectl uncordon {TRAIN_0}" in result.message


# ---------------------------------------------------------------- smi-error and exec failures


@pytest.mark.parametrize(
    ("fixture", "kind", "advice"),
    [
        ("60_error_nvidia-smi_failed_gpu-operator_driver_pod.txt", "driver_not_loaded", "--node-image-only"),
        ("61_error_nvidia-smi_failed_after_kernel_upgrade.txt", "driver_not_loaded", "reimage"),
        ("63_error_nvml_mismatch_570.124.txt", "driver_library_mismatch", "drain the node and restart it"),
        ("64_error_nvml_mismatch_with_proc_version.txt", "driver_library_mismatch", "drain the node and restart it"),
    ],
)
def test_real_smi_errors_fail_with_what_to_do(fixture: str, kind: str, advice: str) -> None:
    snapshot = prod_snapshot()
    snapshot.smi[TRAIN_1] = fixture_text(fixture)
    results = check(snapshot)

    error = one(results, "smi-error", TRAIN_1)
    assert error.status == "fail"
    assert error.message.startswith(f"{kind}: ")
    assert advice in error.message
    # What needs a working nvidia-smi is not checked rather than failed a second time.
    for dependent in ("gpu-count", "mig-mode"):
        assert one(results, dependent, TRAIN_1).status == "warn"
        assert one(results, dependent, TRAIN_1).message.startswith("not checked: `nvidia-smi` reports an error")
    assert one(results, "smi-error", TRAIN_0).status == "pass"


def test_a_mismatch_that_names_the_loaded_module_still_compares_its_version() -> None:
    snapshot = prod_snapshot()
    snapshot.smi[TRAIN_1] = fixture_text("64_error_nvml_mismatch_with_proc_version.txt")  # kernel module 520.56.06
    results = check(snapshot)
    assert one(results, "driver-version", TRAIN_1).status == "fail"
    assert "driver 520.56.06 is older than the pool's minDriverVersion 550.54" in one(results, "driver-version", TRAIN_1).message


def test_an_exec_that_timed_out_is_a_failure_with_its_reason_and_a_command_to_retry() -> None:
    snapshot = prod_snapshot()
    (pod,) = pods_on(snapshot, INFER_1)
    pod_name = pod["metadata"]["name"]
    del snapshot.smi[INFER_1]
    snapshot.exec_errors[INFER_1] = f"exec into gpu-resources/{pod_name} failed: timed out after 30 s"
    results = check(snapshot)

    error = one(results, "smi-error", INFER_1)
    assert error.status == "fail"
    assert f"could not run `nvidia-smi -q -x`: exec into gpu-resources/{pod_name} failed: timed out after 30 s" in error.message
    assert f"kubectl -n gpu-resources exec {pod_name} -c nvidia-device-plugin-ctr -- nvidia-smi" in error.message
    for dependent in ("driver-version", "gpu-count", "mig-mode"):
        assert one(results, dependent, INFER_1).status == "warn"
    consistency = one(results, "driver-consistency", None, "infer")
    assert consistency.status == "pass"
    assert "1 node(s) not read" in consistency.message


def test_a_node_with_no_output_and_no_reason_says_so() -> None:
    snapshot = prod_snapshot()
    del snapshot.smi[TRAIN_0]
    error = one(check(snapshot), "smi-error", TRAIN_0)
    assert error.status == "fail"
    assert "no output was collected from this node" in error.message


def test_output_and_a_collector_note_are_both_shown() -> None:
    snapshot = prod_snapshot()
    snapshot.smi[TRAIN_0] = fixture_text("60_error_nvidia-smi_failed_gpu-operator_driver_pod.txt")
    snapshot.exec_errors[TRAIN_0] = "command exited with code 9"
    error = one(check(snapshot), "smi-error", TRAIN_0)
    assert error.message.startswith("driver_not_loaded: NVIDIA-SMI has failed")
    assert error.message.endswith("(collector: command exited with code 9)")


def test_output_of_another_tool_is_unrecognized() -> None:
    snapshot = prod_snapshot()
    snapshot.smi[TRAIN_0] = fixture_text("50_amd-smi_default_8xmi300x_rocm7.0.0.txt")  # the NVIDIA pool reads nvidia formats only
    error = one(check(snapshot), "smi-error", TRAIN_0)
    assert error.status == "fail"
    assert error.message.startswith("unrecognized: ")
    assert "aksgpu smi parse" in error.message


# ---------------------------------------------------------------- NotReady, scale to zero, foreign nodes


def test_a_not_ready_node_fails_with_the_kubelet_reason_and_nothing_crashes() -> None:
    snapshot = prod_snapshot()
    set_not_ready(snapshot, TRAIN_1, "NodeStatusUnknown", "Kubelet stopped posting node status.")
    del snapshot.smi[TRAIN_1]
    snapshot.exec_errors[TRAIN_1] = "node NotReady (NodeStatusUnknown: Kubelet stopped posting node status.)"
    snapshot.daemonsets[0]["status"].update(numberReady=3, numberAvailable=3)  # its pod there counts as not ready
    results = check(snapshot)

    for check_id in ("device-plugin-ready", "gpu-schedulable"):
        result = one(results, check_id, TRAIN_1)
        assert result.status == "fail"
        assert "NotReady: Ready is Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)" in result.message
    smi_error = one(results, "smi-error", TRAIN_1)
    assert smi_error.status == "fail"
    assert smi_error.message.endswith("the node is NotReady (see device-plugin-ready): validate again once it is Ready")
    assert {(r.pool, r.node) for r in results if r.status == "fail"} == {("train", TRAIN_1), ("train", None)}
    assert (
        f"1 of this pool's 2 node(s) have no ready plugin pod ({TRAIN_1})"
        in one(results, "device-plugin-ready", None, "train").message
    )


def test_a_node_without_a_ready_condition_is_not_ready() -> None:
    snapshot = prod_snapshot()
    find_node(snapshot, TRAIN_0)["status"]["conditions"] = []
    result = one(check(snapshot), "gpu-schedulable", TRAIN_0)
    assert result.status == "fail"
    assert "reports no Ready condition" in result.message


def test_a_pool_scaled_to_zero_is_not_checked_and_never_passes() -> None:
    results = check(prod_snapshot(train=0))  # train: minCount 0

    assert not any(result.status == "fail" for result in results)  # nothing fails: the exit status stays 0
    no_nodes = one(results, "gpu-schedulable", None, "train")
    assert no_nodes.status == "warn"
    assert no_nodes.message.startswith("not checked: no nodes yet: the pool scales from zero")
    assert "aks-gpu/pool=train" in no_nodes.message
    consistency = one(results, "driver-consistency", None, "train")
    assert consistency.status == "warn" and consistency.message.startswith("not checked: no nodes yet")
    assert [r.id for r in results if r.pool == "train"] == ["device-plugin-ready", "gpu-schedulable", "driver-consistency"]


def test_a_pool_that_keeps_nodes_but_has_none_fails() -> None:
    result = one(check(prod_snapshot(infer=0)), "gpu-schedulable", None, "infer")  # infer: minCount 1
    assert result.status == "fail"
    assert "keeps at least 1" in result.message
    assert "GPU quota" in result.message


def test_nodes_of_pools_not_in_the_stack_are_ignored() -> None:
    snapshot = prod_snapshot()
    stranger = copy.deepcopy(find_node(snapshot, TRAIN_0))
    stranger["metadata"]["name"] = "aks-old-11111111-vmss000000"
    stranger["metadata"]["labels"][POOL_LABEL] = "old"
    stranger["status"]["conditions"] = []
    snapshot.nodes.append(stranger)
    results = check(snapshot)
    assert not_passing(results) == set()
    assert "aks-old-11111111-vmss000000" not in {r.node for r in results}


# ---------------------------------------------------------------- gpu-count


def test_a_node_that_lost_a_gpu_fails_the_count() -> None:
    snapshot = prod_snapshot()
    snapshot.smi[TRAIN_0] = nvidia_smi_table(gpus=7, gpu_name="NVIDIA H100 80GB HBM3", memory_mib=81559)
    result = one(check(snapshot), "gpu-count", TRAIN_0)
    assert result.status == "fail"
    assert result.message.startswith("`nvidia-smi` lists 7 GPU(s), Standard_ND96isr_H100_v5 has 8: 1 GPU(s) are not visible")
    assert "Xid 79" in result.message


# ---------------------------------------------------------------- mig-mode


def test_mig_off_where_the_pool_expects_it_fails() -> None:
    snapshot = prod_snapshot()
    snapshot.smi[INFER_0] = nvidia_smi_table(gpus=1, gpu_name="NVIDIA A100 80GB PCIe", memory_mib=81920)
    result = one(check(snapshot), "mig-mode", INFER_0)
    assert result.status == "fail"
    assert result.message.startswith("MIG is off for GPU(s) 0 but the pool's migProfile MIG1g (1g.10gb) needs it")
    assert "gpuInstanceProfile" in result.message


@pytest.mark.parametrize(("devices", "why"), [(5, "not fully partitioned"), (0, "no GPU instance was created")])
def test_a_wrong_mig_slice_count_fails(devices: int, why: str) -> None:
    snapshot = prod_snapshot()
    snapshot.smi[INFER_1] = smi_for(PROD.pool("infer"), mig_devices_per_gpu=devices)
    result = one(check(snapshot), "mig-mode", INFER_1)
    assert result.status == "fail"
    assert result.message.startswith(
        f"{devices} MIG device(s), expected 7 (1 GPU(s) x 7 x 1g.10gb) (per GPU, where not 7: GPU 0: {devices})"
    )
    assert why in result.message


def test_the_repair_advice_follows_who_partitions_the_pool() -> None:
    # AKS partitions from gpuInstanceProfile when it creates the node; with the GPU Operator owning the driver,
    # its MIG manager does, and a reimage alone would not tell the user where to look.
    aks = one(check(_short_of_slices(PROD), PROD), "mig-mode", INFER_1)
    assert aks.message.endswith("reimage the node so AKS partitions it again")
    stack_changes: dict[str, Any] = {"aks-gpu:devicePlugin": {"mode": "gpu-operator"}}
    operator = model_with(None, **stack_changes)
    assert operator.pool("infer").mig_partitioner == "gpu-operator"
    result = one(check(_short_of_slices(operator), operator), "mig-mode", INFER_1)
    assert result.status == "fail"
    assert "nvidia.com/mig.config.state" in result.message and "reimage" not in result.message


def _short_of_slices(model: PlatformModel) -> ClusterSnapshot:
    snapshot = prod_snapshot(model)
    snapshot.smi[INFER_1] = smi_for(model.pool("infer"), mig_devices_per_gpu=5)
    return snapshot


def test_mig_on_where_the_pool_has_no_profile_fails() -> None:
    snapshot = prod_snapshot()
    snapshot.smi[TRAIN_0] = nvidia_smi_table(
        gpus=8, gpu_name="NVIDIA H100 80GB HBM3", memory_mib=81559, mig=True, mig_devices_per_gpu=7
    )
    result = one(check(snapshot), "mig-mode", TRAIN_0)
    assert result.status == "fail"
    assert result.message.startswith("MIG is on for GPU(s) 0, 1, 2, 3, 4, 5, 6, 7 but the pool has no migProfile")


def h100_mig_model() -> PlatformModel:
    """An 8x H100 pool split into 1g.10gb slices: what ``nvidia-smi -L`` of fixture 30 shows."""
    return model_with({"infer": {"vmSize": "Standard_ND96isr_H100_v5", "maxCount": 2}})


def test_nvidia_smi_list_output_with_profiles_counts_56_slices() -> None:
    model = h100_mig_model()
    snapshot = prod_snapshot(model, train=0, infer=1)
    find_node(snapshot, INFER_0)["status"]["allocatable"]["nvidia.com/gpu"] = "56"
    snapshot.smi[INFER_0] = fixture_text("30_nvidia-smi_L_8xh100_mig_7x1g.10gb.txt")
    results = check(snapshot, model)

    assert one(results, "mig-mode", INFER_0).message == "MIG on, 56 x 1g.10gb (8 GPU(s) x 7)"
    assert one(results, "gpu-count", INFER_0).status == "pass"
    assert one(results, "gpu-schedulable", INFER_0).status == "pass"
    # -L prints no driver version: said, not guessed.
    assert one(results, "driver-version", INFER_0).status == "warn"


def test_mig_slices_of_another_profile_fail() -> None:
    model = model_with({"infer": {"vmSize": "Standard_ND96isr_H100_v5", "maxCount": 2, "migProfile": "MIG2g"}})
    snapshot = prod_snapshot(model, train=0, infer=1)
    snapshot.smi[INFER_0] = fixture_text("30_nvidia-smi_L_8xh100_mig_7x1g.10gb.txt")
    result = one(check(snapshot, model), "mig-mode", INFER_0)
    assert result.status == "fail"
    assert result.message.startswith(
        "MIG devices of profile(s) 1g.10gb on this node, but the pool's migProfile is MIG2g (2g.20gb)"
    )


def test_an_output_without_mig_information_warns() -> None:
    snapshot = prod_snapshot()
    # nvidia-smi -L of a GPU with no MIG devices: the format shows no MIG mode.
    snapshot.smi[INFER_0] = "GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-5a1c7e2b-9d3f-4e8a-b6c1-0f2d3e4a5b6c)\n"
    result = one(check(snapshot), "mig-mode", INFER_0)
    assert result.status == "warn"
    assert "shows no MIG information" in result.message


# ---------------------------------------------------------------- AMD


def test_an_amd_pool_checks_driver_and_count_and_has_no_mig_row() -> None:
    raw = copy.deepcopy(raw_stack("prod"))
    raw["aks-gpu:gpuPools"] = [
        {
            "name": "mi300",
            "vendor": "amd",
            "vmSize": "Standard_ND96isr_MI300X_v5",
            "workload": "training",
            "maxCount": 2,
            "minDriverVersion": "6.10",
        }
    ]
    raw["aks-gpu:workloads"] = [{"name": "gpu-training", "type": "training", "gpuQuota": 16}]
    model = validate_stack(raw, "test").model
    targets = plugin_targets(model)
    results = run_checks(model, targets, healthy_snapshot(model, targets, {"mi300": 1}))
    node = node_name("mi300", 0)

    assert not_passing(results) == set()
    assert {r.id for r in results if r.node == node} == set(PER_NODE) - {"mig-mode"}
    assert one(results, "driver-version", node).message == "driver 6.12.12 >= minDriverVersion 6.10"
    assert one(results, "gpu-schedulable", node).message.startswith("amd.com/gpu x 8 allocatable")
    assert one(results, "smi-error", node).message.startswith(
        "`sh -c amd-smi static --json; amd-smi metric --ecc --json` ran: 8 GPU(s)"
    )
    assert one(results, "gpu-health", node).message.startswith("no health problem: `sh -c amd-smi")
    assert "checked ras-uncorrectable on 8 GPU(s)" in one(results, "gpu-health", node).message


def test_an_amd_node_without_amdgpu_fails_with_amd_advice() -> None:
    raw = copy.deepcopy(raw_stack("prod"))
    raw["aks-gpu:gpuPools"] = [{"name": "mi300", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "training"}]
    raw["aks-gpu:workloads"] = [{"name": "gpu-training", "type": "training", "gpuQuota": 16}]
    model = validate_stack(raw, "test").model
    targets = plugin_targets(model)
    snapshot = healthy_snapshot(model, targets, {"mi300": 1})
    snapshot.smi[node_name("mi300", 0)] = fixture_text("70_error_amd-smi_no_amdgpu_wsl.txt")
    result = one(run_checks(model, targets, snapshot), "smi-error", node_name("mi300", 0))
    assert result.status == "fail"
    assert result.message.startswith("driver_not_loaded: ")
    assert "AKS installs no AMD driver" in result.message


# ---------------------------------------------------------------- GPU Operator


def test_with_the_gpu_operator_one_shared_daemonset_serves_every_pool() -> None:
    model = model_with({"train": {"minDriverVersion": "570.86"}}, **{"aks-gpu:devicePlugin": {"mode": "gpu-operator"}})
    snapshot = prod_snapshot(model)
    assert len(snapshot.daemonsets) == 1  # the operator's nvidia-device-plugin-daemonset
    results = check(snapshot, model)

    for pool in POOLS:
        daemonset = one(results, "device-plugin-ready", None, pool)
        assert daemonset.status == "pass"
        assert "nvidia-device-plugin-daemonset: 6 desired, 6 ready, 6 available" in daemonset.message
    assert one(results, "device-plugin-ready", INFER_1).status == "pass"
    old = one(results, "driver-version", TRAIN_0)
    assert old.status == "fail"
    # The operator owns the driver there (gpuDriver None): no node image upgrade would change it.
    assert "GPU Operator" in old.message
    assert "--node-image-only" not in old.message


# ---------------------------------------------------------------- gpu-health


def xml_with(snapshot: ClusterSnapshot, node: str, old: str, new: str, count: int = 1) -> None:
    """Change one value in the node's `nvidia-smi -q -x` (the first ``count`` GPUs)."""
    assert old in snapshot.smi[node]
    snapshot.smi[node] = snapshot.smi[node].replace(old, new, count)


def add_condition(snapshot: ClusterSnapshot, node: str, kind: str, status: str, reason: str, message: str) -> None:
    """An AKS Node Problem Detector condition, as `kubectl get node -o json` shows one (status, reason, message)."""
    find_node(snapshot, node)["status"]["conditions"].append(
        {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": "2025-06-01T03:57:41Z"}
    )


def test_healthy_gpus_pass_gpu_health_saying_what_was_read() -> None:
    results = check(prod_snapshot())
    train = one(results, "gpu-health", TRAIN_0)
    assert train.status == "pass"
    # H100 on NVSwitch: the fabric is read; A100 with MIG instances: no row remapper, so it is not claimed.
    assert "`nvidia-smi -q -x` checked ecc-uncorrectable, row-remap-failure" in train.message
    assert "fabric-not-ready on 8 GPU(s)" in train.message
    infer = one(results, "gpu-health", INFER_0)
    assert "row-remap" not in infer.message and "no Node Problem Detector GPU condition on the node" in infer.message


def test_a_pending_row_remap_fails_naming_the_gpu_and_the_reboot() -> None:
    snapshot = prod_snapshot()
    pending = "<remapped_row_pending>Yes</remapped_row_pending>"
    xml_with(snapshot, TRAIN_1, "<remapped_row_pending>No</remapped_row_pending>", pending)
    results = check(snapshot)
    failed = one(results, "gpu-health", TRAIN_1)
    assert failed.status == "fail"
    assert failed.message.startswith("GPU 0 (00000000:18:00.0): row-remap-pending: a row remap is pending")
    assert "drain the node and reboot it" in failed.message
    assert one(results, "gpu-health", TRAIN_0).status == "pass"
    assert one(results, "smi-error", TRAIN_1).status == "pass"  # the output itself is fine


def test_a_fabric_still_in_progress_fails() -> None:
    snapshot = prod_snapshot()
    xml_with(snapshot, TRAIN_0, "<state>Completed</state>", "<state>In Progress</state>", count=8)
    failed = one(check(snapshot), "gpu-health", TRAIN_0)
    # One entry for the eight GPUs, not four spelled out and "+4 more".
    assert failed.status == "fail" and failed.message.count("fabric-not-ready") == 1
    assert failed.message.startswith("8 GPUs (0, 1, 2, 3, 4, 5, 6, 7): fabric-not-ready: ") and "more" not in failed.message


def test_uncorrectable_ecc_since_the_driver_loaded_fails() -> None:
    snapshot = prod_snapshot()
    text = snapshot.smi[INFER_0]
    volatile = text.index("<volatile>")
    snapshot.smi[INFER_0] = text[:volatile] + text[volatile:].replace("<dram_uncorrectable>0<", "<dram_uncorrectable>1<", 1)
    failed = one(check(snapshot), "gpu-health", INFER_0)
    assert failed.status == "fail" and "ecc-uncorrectable: 1 uncorrectable ECC error(s) since the driver loaded" in failed.message


def test_a_lost_gpu_beside_the_xml_fails_the_node() -> None:
    # nvidia-smi -q -x on a node with a lost GPU prints the XML of the others and, beside it, the real line of
    # tests/fixtures/health/35 (the exec keeps both): the node fails gpu-health with the address and the reboot.
    snapshot = prod_snapshot()
    lost = (HEALTH_FIXTURES_DIR / "35_nvidia-smi_gpu_is_lost.txt").read_text(encoding="utf-8")
    snapshot.smi[TRAIN_0] = lost + snapshot.smi[TRAIN_0]
    results = check(snapshot)
    failed = one(results, "gpu-health", TRAIN_0)
    assert failed.status == "fail" and failed.message.startswith("GPU 0000:02:00.0: gpu-lost: the GPU at 0000:02:00.0 is lost")
    assert "reboot or reimage" in failed.message
    assert one(results, "gpu-health", TRAIN_1).status == "pass"


def test_a_true_npd_gpu_condition_fails_with_its_advice() -> None:
    snapshot = prod_snapshot()
    add_condition(snapshot, TRAIN_0, "XIDErrors", "True", "XIDErrors", "XID errors present in kernel log")
    add_condition(snapshot, TRAIN_0, "GPUMissing", "False", "GPUMissing", "Observed GPU count matches")
    results = check(snapshot)
    failed = one(results, "gpu-health", TRAIN_0)
    assert failed.status == "fail"
    assert failed.message.startswith(
        "Node Problem Detector condition XIDErrors=True (XIDErrors: XID errors present in kernel log)"
    )
    assert "aksgpu smi health" in failed.message


def test_npd_conditions_that_are_false_are_named_in_the_pass() -> None:
    snapshot = prod_snapshot()
    for kind in ("GPUMissing", "XIDErrors", "NVLinkStatusInactive", "IBLinkFlapping"):
        add_condition(snapshot, TRAIN_0, kind, "False", kind, "")
    passed = one(check(snapshot), "gpu-health", TRAIN_0)
    assert passed.status == "pass"
    assert "GPUMissing=False, XIDErrors=False, NVLinkStatusInactive=False, IBLinkFlapping=False" in passed.message


def test_clock_throttling_and_hw_slowdown_warn() -> None:
    snapshot = prod_snapshot()
    add_condition(snapshot, TRAIN_0, "GPUClockThrottling", "True", "GPUClockThrottling", "throttled")
    xml_with(
        snapshot,
        TRAIN_1,
        "<clocks_event_reason_hw_power_brake_slowdown>Not Active<",
        "<clocks_event_reason_hw_power_brake_slowdown>Active<",
    )
    results = check(snapshot)
    assert one(results, "gpu-health", TRAIN_0).status == "warn"
    slowed = one(results, "gpu-health", TRAIN_1)
    assert slowed.status == "warn" and "hw-slowdown: HW power brake active" in slowed.message


def test_npd_conditions_are_read_where_the_exec_failed() -> None:
    snapshot = prod_snapshot()
    del snapshot.smi[TRAIN_1]
    snapshot.exec_errors[TRAIN_1] = "timed out after 30 s"
    add_condition(snapshot, TRAIN_1, "GPUMissing", "True", "GPUMissing", "Observed GPU count does not match expected GPU count")
    failed = one(check(snapshot), "gpu-health", TRAIN_1)
    assert failed.status == "fail" and "GPUMissing=True" in failed.message and "reimage" in failed.message


def test_uncorrectable_ras_errors_fail_an_amd_node() -> None:
    raw = copy.deepcopy(raw_stack("prod"))
    raw["aks-gpu:gpuPools"] = [{"name": "mi300", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "training"}]
    raw["aks-gpu:workloads"] = [{"name": "gpu-training", "type": "training", "gpuQuota": 16}]
    model = validate_stack(raw, "test").model
    targets = plugin_targets(model)
    snapshot = healthy_snapshot(model, targets, {"mi300": 1})
    snapshot.smi[node_name("mi300", 0)] = amd_smi_json(uncorrectable={5: 3})
    failed = one(run_checks(model, targets, snapshot), "gpu-health", node_name("mi300", 0))
    assert failed.status == "fail" and failed.message.startswith("GPU 5: ras-uncorrectable: 3 uncorrectable RAS (ECC) error(s)")


# ---------------------------------------------------------------- one node's bad output stays with that node


HOSTILE_OUTPUTS = [
    "index, name\n0, " + "x" * (200 * 1024) + "\n",
    "index, memory.total [MiB]\n0, " + "9" * 400 + "\n",
    "index, name\n" + "9" * 4400 + ", A100\n",
    "index, name\n\u00b2, NVIDIA A100\n",
    '[{"gpu": 0, "vram": {"size": {"value": NaN, "unit": "MB"}}}]',
    "[" * 100_000,
    "<nvidia_smi_log>" + "<a>" * 50_000 + "</nvidia_smi_log>",
    "<nvidia_smi_log><gpu id='x'><pci>" + "<b>" * 5_000 + "</pci></gpu></nvidia_smi_log>",
    "\x00\xff" * 1000,
]


@pytest.mark.parametrize("text", HOSTILE_OUTPUTS, ids=range(len(HOSTILE_OUTPUTS)))
def test_a_hostile_output_on_one_node_fails_that_node_only(text: str) -> None:
    snapshot = prod_snapshot()
    snapshot.smi[TRAIN_1] = text
    results = check(snapshot)
    assert {r.node for r in results} == {None, *NODES}
    assert {r.id for r in results if r.node == TRAIN_1} == set(PER_NODE)  # every check gave that node a result
    assert one(results, "gpu-count", TRAIN_1).status != "pass"
    assert one(results, "gpu-health", TRAIN_0).status == "pass"


def test_a_parser_that_raises_is_contained_to_its_node(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = prod_snapshot()
    snapshot.smi[TRAIN_1] = "a text no test foresaw"
    real = read_smi_and_health

    def failing(text: str, vendor: Any = "auto", **options: Any) -> Any:
        if text == "a text no test foresaw":
            raise IndexError("tuple index out of range")
        return real(text, vendor, **options)

    monkeypatch.setattr("aks_gpu.validation.checks.read_smi_and_health", failing)
    results = check(snapshot)
    error = one(results, "smi-error", TRAIN_1)
    assert error.status == "fail"
    assert "unrecognized: the nvidia output parser failed on this node's output (IndexError: tuple index" in error.message
    assert one(results, "gpu-health", TRAIN_1).status == "warn"
    assert one(results, "smi-error", TRAIN_0).status == "pass"
