"""The per-pool GPU smoke Job: which pools get one (and why), and the Job a pool gets."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aks_gpu.manifests import labelled
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.validation.smoke import GpuValidation, smoke_job_manifest, smoke_job_manifests, smoke_plan
from tests.conftest import MockHarness, minimal_raw, platform_sections, raw_stack, stack_model


def model_of(raw: dict[str, Any]) -> PlatformModel:
    return validate_stack(raw, "test").model


def prod_with(
    pool_changes: dict[str, dict[str, Any]] | None = None, pins: dict[str, str] | None = None, **stack: Any
) -> PlatformModel:
    """The prod stack with some pool keys (by pool name) or top-level keys changed; ``pins`` gives workloads (by name)
    the pool they name."""
    raw = copy.deepcopy(raw_stack("prod"))
    for pool in raw["aks-gpu:gpuPools"]:
        pool.update((pool_changes or {}).get(pool["name"], {}))
    for workload in raw["aks-gpu:workloads"]:
        if workload["name"] in (pins or {}):
            workload["pool"] = (pins or {})[workload["name"]]
    raw.update(stack)
    return model_of(raw)


def decisions(model: PlatformModel) -> dict[str, tuple[bool, str]]:
    return {d.pool: (d.enabled, d.reason) for d in smoke_plan(model)}


# ---------------------------------------------------------------- which pools


def test_prod_tests_the_inference_pool_but_does_not_wake_the_training_pool() -> None:
    plan = decisions(stack_model("prod"))
    assert plan["train"] == (False, "off: minCount 0 would start a GPU node; set smokeTest: true to run it")
    assert plan["infer"] == (True, "on: minCount 1 keeps a GPU node running")
    # Nor the whole-GPU inference pool, which also scales from zero.
    assert plan["inferfull"] == (False, "off: minCount 0 would start a GPU node; set smokeTest: true to run it")


def test_smoke_test_true_runs_it_on_a_scale_to_zero_pool_and_says_what_it_costs() -> None:
    enabled, reason = decisions(prod_with({"train": {"smokeTest": True}}))["train"]
    assert enabled and "starts a GPU node" in reason


def test_smoke_test_false_and_the_stack_switch_turn_it_off() -> None:
    assert decisions(prod_with({"infer": {"smokeTest": False}}))["infer"] == (False, "off: smokeTest is false on this pool")
    validation = {**raw_stack("prod")["aks-gpu:validation"], "smokeJob": {"enabled": False}}
    model = prod_with({"train": {"smokeTest": True}}, **{"aks-gpu:validation": validation})
    assert {pool: enabled for pool, (enabled, _) in decisions(model).items()} == {
        "train": False,
        "infer": False,
        "inferfull": False,
    }
    assert smoke_job_manifests(model) == {}


def test_a_fixed_size_pool_of_zero_nodes_cannot_run_it_even_when_asked() -> None:
    pools = [
        {
            "name": "gpu",
            "vendor": "nvidia",
            "vmSize": "Standard_NC24ads_A100_v4",
            "workload": "training",
            "autoscaling": False,
            "count": 0,
            "smokeTest": True,
        }
    ]
    enabled, reason = decisions(model_of(minimal_raw(**{"aks-gpu:gpuPools": pools})))["gpu"]
    assert not enabled and "no autoscaler" in reason


# ---------------------------------------------------------------- the Job


def container_of(job: dict[str, Any]) -> dict[str, Any]:
    containers = job["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def test_the_job_runs_nvidia_smi_once_on_the_pool_with_one_gpu() -> None:
    model = stack_model("prod")
    job = smoke_job_manifests(model)["infer"]
    pod = job["spec"]["template"]["spec"]
    container = container_of(job)
    assert job["metadata"]["name"] == "gpu-smoke-infer" and job["metadata"]["namespace"] == "gpu-resources"
    assert container["command"] == ["nvidia-smi"]
    assert container["image"] == model.config.validation.smoke_job.image
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"  # MIG under the single strategy
    assert pod["nodeSelector"] == {"aks-gpu/pool": "infer"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    assert pod["restartPolicy"] == "Never"
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, model.config.validation.smoke_job.deadline_seconds)
    assert spec["ttlSecondsAfterFinished"] > 0


def test_the_job_is_hardened() -> None:
    job = smoke_job_manifests(stack_model("prod"))["infer"]
    pod = job["spec"]["template"]["spec"]
    security = container_of(job)["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
    assert "privileged" not in security
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_a_mig_pool_under_mixed_requests_its_mig_slice() -> None:
    plugin: dict[str, Any] = {"mode": "daemonset", "migStrategy": "mixed"}
    # Under mixed, infer's mig-1g.10gb and inferfull's whole GPUs differ: gpu-inference names its pool (config rules).
    model = prod_with(None, {"gpu-inference": "infer"}, **{"aks-gpu:devicePlugin": plugin})
    limits = container_of(smoke_job_manifests(model)["infer"])["resources"]["limits"]
    assert limits[model.pool("infer").resource.name] == "1"
    assert model.pool("infer").resource.name.startswith("nvidia.com/mig-")
    assert "nvidia.com/gpu" not in limits


def test_a_spot_pool_tolerates_the_spot_taint() -> None:
    model = stack_model("dev")
    pool = model.pool("dev")
    job = smoke_job_manifest(model, pool)  # built for the pool even though the plan keeps it off (minCount 0)
    keys = {t["key"] for t in job["spec"]["template"]["spec"]["tolerations"]}
    assert keys == {"nvidia.com/gpu", "kubernetes.azure.com/scalesetpriority"}


def test_an_amd_pool_runs_amd_smi_from_the_amd_image() -> None:
    model = stack_model("amd")
    job = smoke_job_manifest(model, model.pool("mi300x"))
    container = container_of(job)
    assert container["image"] == model.config.validation.smoke_job.amd_image
    assert "amd-smi static" in " ".join(container["command"])
    assert container["resources"]["limits"]["amd.com/gpu"] == "1"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


# ---------------------------------------------------------------- registered with Pulumi


def test_the_component_registers_one_job_per_enabled_pool(harness: MockHarness) -> None:
    model = prod_with({"train": {"smokeTest": False}})

    def program() -> None:
        GpuValidation("prod-smoke", platform_sections(model.config))

    result = harness.run(program, stack="prod")
    jobs = result.by_type("kubernetes:batch/v1:Job")
    assert [job.name for job in jobs] == ["prod-smoke-infer"]
    manifests = result.manifests()
    expected = labelled(smoke_job_manifest(model, model.pool("infer")))
    assert manifests["job-gpu-resources-gpu-smoke-infer.yaml"]["spec"] == expected["spec"]


@pytest.mark.parametrize("stack", ["prod", "dev", "amd"])
def test_every_stack_builds_its_jobs(stack: str, harness: MockHarness) -> None:
    model = stack_model(stack)
    result = harness.run(lambda: GpuValidation(f"{stack}-smoke", platform_sections(model.config)), stack=stack)
    enabled = sorted(d.pool for d in smoke_plan(model) if d.enabled)
    assert sorted(job.name.removeprefix(f"{stack}-smoke-") for job in result.by_type("kubernetes:batch/v1:Job")) == enabled
