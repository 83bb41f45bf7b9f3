"""GpuNodePool: taints, labels, autoscaling, spot, MIG, driver mode and the options that keep GPU nodes safe."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_azure_native import containerservice as cs

from aks_gpu.aks_facts import fixed_at_creation
from aks_gpu.azure.node_pool import agent_pool_inputs
from aks_gpu.config.models import PlatformConfig
from aks_gpu.mock_engine import PlanResult
from aks_gpu.resolved.model import resolve
from tests.conftest import MockHarness, minimal_raw, planned_result

AGENT_POOL = "azure-native:containerservice:AgentPool"


def pools(result: PlanResult) -> dict[str, Any]:
    """The GPU pools (the CPU pools have no gpuProfile)."""
    return {r.inputs["agentPoolName"]: r for r in result.by_type(AGENT_POOL) if "gpuProfile" in r.inputs}


def test_the_cpu_pool_is_untainted_autoscaled_and_serves_every_workload_type_after_the_gpu_pools() -> None:
    result = planned_result("prod")
    records = result.by_type(AGENT_POOL)
    [cpu] = [r for r in records if "gpuProfile" not in r.inputs]
    assert cpu.inputs["agentPoolName"] == "cpu"
    assert cpu.inputs["mode"] == "User"
    assert not cpu.inputs.get("nodeTaints")
    assert (cpu.inputs["enableAutoScaling"], cpu.inputs["minCount"], cpu.inputs["maxCount"]) == (True, 0, 3)
    assert cpu.inputs["nodeLabels"] == {
        "aks-gpu/pool": "cpu",
        "serves.aks-gpu/inference": "true",
        "serves.aks-gpu/training": "true",
    }
    assert cpu.options["ignoreChanges"] == ["count"]
    assert cpu.options["replaceOnChanges"] == sorted(fixed_at_creation("azure-native:containerservice:AgentPool"))
    # AKS runs one agent pool operation at a time: the CPU pool waits for the last GPU pool.
    assert records.index(cpu) == len(records) - 1


def test_prod_training_pool_inputs() -> None:
    train = pools(planned_result("prod"))["train"].inputs
    assert train == {
        "agentPoolName": "train",
        "resourceGroupName": "rg-gpu-prod",
        "resourceName": "aks-gpu-prod",
        "mode": "User",
        "vmSize": "Standard_ND96isr_H100_v5",
        "osType": "Linux",
        "osSKU": "Ubuntu",
        "osDiskType": "Managed",
        "maxPods": 30,
        "nodeTaints": ["nvidia.com/gpu=present:NoSchedule"],
        "nodeLabels": {
            "accelerator": "nvidia",
            "aks-gpu/workload": "training",
            "serves.aks-gpu/training": "true",
            "aks-gpu/pool": "train",
            # Picks this pool's file from the device plugin's ConfigMap.
            "nvidia.com/device-plugin.config": "train",
            # NVSentinel's labeler marks the driver installed only beside this label (docs/remediation.md).
            "nvidia.com/gpu.present": "true",
        },
        "gpuProfile": {"driver": "Install"},
        # A training pool: a node whose drain a long job blocks stays cordoned, the upgrade goes on (data/disruption.yaml).
        "upgradeSettings": {
            "maxSurge": "1",
            "drainTimeoutInMinutes": 60,
            "nodeSoakDurationInMinutes": 5,
            "undrainableNodeBehavior": "Cordon",
        },
        "enableAutoScaling": True,
        "minCount": 0,
        "maxCount": 4,
        "count": 0,
    }


def test_prod_inference_pool_is_split_by_mig() -> None:
    infer = pools(planned_result("prod"))["infer"].inputs
    assert infer["gpuInstanceProfile"] == "MIG1g"
    assert infer["gpuInstanceProfile"] in {e.value for e in cs.GPUInstanceProfile}
    assert (infer["minCount"], infer["maxCount"]) == (1, 3)


def test_pool_options_never_fight_the_autoscaler_and_replace_safely() -> None:
    for record in pools(planned_result("prod")).values():
        assert record.options["ignoreChanges"] == ["count"]
        assert record.options["deleteBeforeReplace"] is True
        assert record.options["protect"] is True
        # Every field AKS fixes at creation is replaced, not sent as an update AKS refuses (data/immutable_fields.yaml).
        assert record.options["replaceOnChanges"] == sorted(fixed_at_creation("azure-native:containerservice:AgentPool"))
        assert {"vmSize", "maxPods", "osDiskType", "gpuProfile.driver", "spotMaxPrice"} <= set(record.options["replaceOnChanges"])
    assert pools(planned_result("dev"))["dev"].options["protect"] is False


def test_dev_spot_pool() -> None:
    result = planned_result("dev")
    dev = pools(result)["dev"].inputs
    assert dev["scaleSetPriority"] == "Spot" and dev["scaleSetEvictionPolicy"] == "Delete" and dev["spotMaxPrice"] == -1
    # ARM refuses maxSurge on spot pools; the shipped dev stack sends no upgrade settings at all.
    assert "upgradeSettings" not in dev
    # AKS adds the spot taint itself; sending it would be refused.
    assert dev["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    tolerations = result.outputs["pools"]["dev"]["tolerations"]
    assert {
        "key": "kubernetes.azure.com/scalesetpriority",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    } in tolerations
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in tolerations


def a100_pool(**fields: Any) -> dict[str, Any]:
    """One NC24ads_A100_v4 training pool, with the fields a test changes."""
    return {
        "name": "gpu",
        "vendor": "nvidia",
        "vmSize": "Standard_NC24ads_A100_v4",
        "workload": "training",
        "maxCount": 2,
    } | fields


def test_user_taints_and_labels_are_added_to_the_vendor_ones(harness: MockHarness) -> None:
    pool = a100_pool(
        **{
            "taints": ["team=vision:NoSchedule"],
            "labels": {"cost-center": "ml"},
            "zones": ["1"],
            "osSku": "AzureLinux",
            "osDiskType": "Ephemeral",
        }
    )
    result = harness.run_stack("test", minimal_raw(**{"aks-gpu:gpuPools": [pool]}))
    inputs = pools(result)["gpu"].inputs
    assert inputs["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule", "team=vision:NoSchedule"]
    assert inputs["nodeLabels"]["cost-center"] == "ml" and inputs["nodeLabels"]["accelerator"] == "nvidia"
    assert inputs["availabilityZones"] == ["1"] and inputs["osSKU"] == "AzureLinux" and inputs["osDiskType"] == "Ephemeral"
    outputs = result.outputs["pools"]["gpu"]
    assert {"key": "team", "operator": "Equal", "value": "vision", "effect": "NoSchedule"} in outputs["tolerations"]
    assert outputs["nodeSelector"] == {"aks-gpu/pool": "gpu"}


def test_fixed_size_pool_has_a_count_and_no_ignore(harness: MockHarness) -> None:
    pool = a100_pool(autoscaling=False, count=2)
    record = pools(harness.run_stack("test", minimal_raw(**{"aks-gpu:gpuPools": [pool]})))["gpu"]
    assert record.inputs["enableAutoScaling"] is False and record.inputs["count"] == 2
    assert "minCount" not in record.inputs and record.options["ignoreChanges"] == []


@pytest.mark.parametrize(
    ("mode", "driver"),
    [("daemonset", "Install"), ("gpu-operator", "None")],
)
def test_driver_mode_follows_who_installs_the_driver(mode: str, driver: str) -> None:
    assert pool_inputs(a100_pool(), devicePlugin={"mode": mode})["gpu_profile"] == {"driver": driver}


def test_amd_pool_gets_no_aks_driver(harness: MockHarness) -> None:
    pool = {"name": "mi300", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "training", "maxCount": 1}
    result = harness.run_stack("test", minimal_raw(**{"aks-gpu:gpuPools": [pool]}))
    inputs = pools(result)["mi300"].inputs
    assert inputs["gpuProfile"] == {"driver": "None"}
    assert inputs["nodeTaints"] == ["amd.com/gpu=present:NoSchedule"] and inputs["nodeLabels"]["accelerator"] == "amd"
    assert result.outputs["pools"]["mi300"]["resourceName"] == "amd.com/gpu"
    assert result.outputs["pools"]["mi300"]["resourceCountPerNode"] == 8


def test_pool_outputs_name_the_schedulable_resource() -> None:
    outputs = planned_result("prod").outputs["pools"]
    assert outputs["train"]["resourceName"] == "nvidia.com/gpu" and outputs["train"]["resourceCountPerNode"] == 8
    assert outputs["infer"]["resourceName"] == "nvidia.com/gpu" and outputs["infer"]["resourceCountPerNode"] == 7
    assert outputs["infer"]["migStrategy"] == "single"


def test_mixed_strategy_exposes_the_mig_resource(harness: MockHarness) -> None:
    pool = a100_pool(migProfile="MIG1g")
    raw = minimal_raw(**{"aks-gpu:gpuPools": [pool], "aks-gpu:devicePlugin": {"migStrategy": "mixed"}})
    outputs = harness.run_stack("test", raw).outputs["pools"]["gpu"]
    assert outputs["resourceName"] == "nvidia.com/mig-1g.10gb" and outputs["resourceCountPerNode"] == 7


def test_nvme_pools_carry_the_acstor_v1_io_engine_label_only_under_v1(harness: MockHarness) -> None:
    from tests.conftest import raw_stack

    raw = raw_stack("prod")
    assert "acstor.azure.com/io-engine" not in pools(harness.run_stack("prod", raw))["train"].inputs["nodeLabels"]
    raw["aks-gpu:storage"] = {"flavour": "v1"}
    labelled = pools(harness.run_stack("prod", raw))
    assert labelled["train"].inputs["nodeLabels"]["acstor.azure.com/io-engine"] == "acstor"
    assert "acstor.azure.com/io-engine" not in labelled["infer"].inputs["nodeLabels"]


# ---------------------------------------------------------------- what AKS accepts from a pool (pure builder)


def pool_inputs(pool: dict[str, Any], **sections: Any) -> dict[str, Any]:
    """The AgentPool inputs the builder makes for one pool, without the engine."""
    config = PlatformConfig.model_validate({"gpuPools": [pool], **sections})
    return agent_pool_inputs(resolve(config).pools[0])


def test_spot_pools_get_no_upgrade_settings() -> None:
    # ARM: "Spot pools can't set max surge" (data/arm_refusals.yaml, spot-no-max-surge), and no drain happens.
    inputs = pool_inputs(a100_pool(spot=True))
    assert "upgrade_settings" not in inputs and inputs["scale_set_priority"] == "Spot"


def test_regular_pools_surge_one_node_by_default() -> None:
    assert pool_inputs(a100_pool(workload="batch"))["upgrade_settings"] == {
        "max_surge": "1",
        "drain_timeout_in_minutes": 30,
        "node_soak_duration_in_minutes": 0,
    }


def test_a_training_pool_keeps_an_undrainable_node_cordoned_and_lets_the_upgrade_go_on() -> None:
    # A long job whose PDB blocks the drain: with Cordon the upgrade continues on the other nodes and does not fail;
    # AKS's own default (Schedule) fails it (data/disruption.yaml, upgrade-options.md and the SDK's enum).
    assert pool_inputs(a100_pool())["upgrade_settings"]["undrainable_node_behavior"] == "Cordon"
    # Other workload types keep AKS's default: nothing is sent.
    assert "undrainable_node_behavior" not in pool_inputs(a100_pool(workload="inference"))["upgrade_settings"]
    # A pool's own choice wins over its type's default.
    own = a100_pool(upgrade={"undrainableNodeBehavior": "Schedule"})
    assert pool_inputs(own)["upgrade_settings"]["undrainable_node_behavior"] == "Schedule"
    assert (
        pool_inputs(a100_pool(workload="inference", upgrade={"undrainableNodeBehavior": "Cordon"}))["upgrade_settings"][
            "undrainable_node_behavior"
        ]
        == "Cordon"
    )
    # The value the SDK of the pinned provider takes.
    assert cs.UndrainableNodeBehavior("Cordon") == cs.UndrainableNodeBehavior.CORDON


def test_max_unavailable_upgrades_in_place_without_surge() -> None:
    settings = pool_inputs(a100_pool(upgrade={"maxUnavailable": "1"}))["upgrade_settings"]
    assert settings["max_surge"] == "0" and settings["max_unavailable"] == "1"


def test_gpu_operator_partitions_mig_when_it_owns_the_driver() -> None:
    """With the operator's driver, AKS is not asked for gpuInstanceProfile; the MIG manager gets the label."""
    inputs = pool_inputs(a100_pool(migProfile="MIG1g"), devicePlugin={"mode": "gpu-operator"})
    assert "gpu_instance_profile" not in inputs and inputs["gpu_profile"] == {"driver": "None"}
    assert inputs["node_labels"]["nvidia.com/mig.config"] == "all-1g.10gb"
    # AKS's driver: AKS partitions, as in daemonset mode.
    aks = pool_inputs(a100_pool(migProfile="MIG1g", gpuDriver="Install"), devicePlugin={"mode": "gpu-operator"})
    assert aks["gpu_instance_profile"] == "MIG1g" and "nvidia.com/mig.config" not in aks["node_labels"]
    assert pool_inputs(a100_pool(migProfile="MIG1g"))["gpu_instance_profile"] == "MIG1g"


def test_gpu_pools_are_created_one_after_the_other(harness: MockHarness) -> None:
    """AKS runs one agent pool operation at a time (409 OperationNotAllowed otherwise): each pool depends on the one
    before it in the stack file."""
    raw = minimal_raw(**{"aks-gpu:gpuPools": [a100_pool(name="a"), a100_pool(name="b"), a100_pool(name="c")]})
    by_name = pools(harness.run_stack("test", raw))
    assert not any(r.urn in by_name["a"].options["dependsOn"] for r in by_name.values())
    assert by_name["a"].urn in by_name["b"].options["dependsOn"]
    assert by_name["b"].urn in by_name["c"].options["dependsOn"]
    assert by_name["a"].urn not in by_name["c"].options["dependsOn"]
