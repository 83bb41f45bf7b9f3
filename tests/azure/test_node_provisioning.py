"""NAP GPU pools: the NodePool and AKSNodeClass a pool with provisioning nap becomes, held to the CRDs' facts
(components/aks_gpu/data/karpenter.yaml), and the cluster an Automatic or NAP stack asks AKS for."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from pulumi_azure_native import containerservice as cs

from aks_gpu import aks_facts
from aks_gpu.aks_facts import karpenter_facts, kubernetes_calendar
from aks_gpu.azure.node_pool import agent_pool_inputs
from aks_gpu.azure.node_provisioning import azure_node_class_ref, node_class_manifest, node_pool_manifest
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.model import ResolvedPool, resolve
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import MockHarness, minimal_raw

ON = kubernetes_calendar().read_on
MANAGED_CLUSTER = "azure-native:containerservice:ManagedCluster"
AGENT_POOL = "azure-native:containerservice:AgentPool"


def nap_raw(sku: str = "Automatic", **pool: Any) -> dict[str, Any]:
    raw = copy.deepcopy(minimal_raw())
    if sku == "Automatic":
        raw["aks-gpu:cluster"]["sku"] = "Automatic"
    else:
        raw["aks-gpu:cluster"]["nodeProvisioning"] = "Auto"
        raw["aks-gpu:gpuPools"][0]["provisioning"] = "nap"
    raw["aks-gpu:gpuPools"][0].update(pool)
    return raw


def nap_pool(**pool: Any) -> ResolvedPool:
    [resolved] = resolve(validate_stack(nap_raw(**pool), "s", today=ON).config).pools
    return resolved


def test_a_nodepool_carries_the_taint_and_labels_an_agent_pool_carries() -> None:
    pool = nap_pool()
    template = node_pool_manifest(pool, azure_node_class_ref(pool))["spec"]["template"]
    agent = agent_pool_inputs(pool)
    assert template["metadata"]["labels"] == agent["node_labels"]
    assert [f"{t['key']}={t['value']}:{t['effect']}" for t in template["spec"]["taints"]] == agent["node_taints"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in template["spec"]["taints"]


def test_requirements_pin_the_vm_size_and_its_gpus() -> None:
    pool = nap_pool()
    requirements = {
        r["key"]: r["values"]
        for r in node_pool_manifest(pool, azure_node_class_ref(pool))["spec"]["template"]["spec"]["requirements"]
    }
    assert requirements["node.kubernetes.io/instance-type"] == ["Standard_NC24ads_A100_v4"]
    assert requirements["karpenter.azure.com/sku-gpu-manufacturer"] == ["nvidia"]
    assert requirements["karpenter.azure.com/sku-gpu-count"] == ["1"]
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]


def test_limits_stop_at_max_count_nodes_and_their_gpus() -> None:
    pool = nap_pool(vmSize="Standard_ND96asr_v4", maxCount=3)
    limits = node_pool_manifest(pool, azure_node_class_ref(pool))["spec"]["limits"]
    assert limits == {"nodes": "3", "nvidia.com/gpu": "24"}


def test_training_nodes_are_removed_only_when_empty_and_never_expire() -> None:
    pool = nap_pool()
    spec = node_pool_manifest(pool, azure_node_class_ref(pool))["spec"]
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["disruption"]["consolidateAfter"] == "10m"
    # No node under a running job is taken for packing or for drift (a new node image): budgets of 0 for both.
    assert {"nodes": "0", "reasons": ["Underutilized", "Drifted"]} in spec["disruption"]["budgets"]
    assert spec["template"]["spec"]["expireAfter"] == "Never"


def test_serving_pools_may_be_packed_one_node_at_a_time() -> None:
    pool = nap_pool(nap={"consolidation": "WhenEmptyOrUnderutilized", "consolidateAfterMinutes": 5})
    disruption = node_pool_manifest(pool, azure_node_class_ref(pool))["spec"]["disruption"]
    assert disruption == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "5m",
        "budgets": [{"nodes": "1"}],
    }


@pytest.mark.parametrize(
    "pool",
    [{}, {"osSku": "AzureLinux", "osDiskSizeGb": 256, "maxPods": 110}, {"managedGpu": True}],
    ids=["defaults", "azure-linux", "managed-gpu"],
)
def test_the_objects_keep_to_the_crds(pool: dict[str, Any]) -> None:
    facts = karpenter_facts()
    resolved = nap_pool(**pool)
    node_class = node_class_manifest(resolved, {"managed-by": "aks-gpu"})
    klass = facts["node_class"]
    assert node_class["apiVersion"] == f"{klass['group']}/{klass['version']}" and klass["version"] in klass["served_versions"]
    spec = node_class["spec"]
    assert set(spec) <= set(klass["spec_fields"])
    assert spec["imageFamily"] in klass["image_families"]
    assert spec["gpu"]["mode"] in klass["gpu_modes"]
    assert klass["max_pods"]["minimum"] <= spec["maxPods"] <= klass["max_pods"]["maximum"]
    if "osDiskSizeGB" in spec:
        assert klass["os_disk_size_gb"]["minimum"] <= spec["osDiskSizeGB"] <= klass["os_disk_size_gb"]["maximum"]
    for key, value in spec["tags"].items():
        assert len(key) <= klass["tag_key_max"] and not set(key) & set(klass["tag_key_forbidden"])
        assert len(value) <= klass["tag_value_max"]
    pool_facts = facts["node_pool"]
    node_pool = node_pool_manifest(resolved, azure_node_class_ref(resolved))
    assert node_pool["apiVersion"] == "karpenter.sh/v1" and node_pool["kind"] == "NodePool"
    disruption = node_pool["spec"]["disruption"]
    assert disruption["consolidationPolicy"] in pool_facts["consolidation_policies"]
    for duration in (disruption["consolidateAfter"], node_pool["spec"]["template"]["spec"]["expireAfter"]):
        assert re.fullmatch(pool_facts["duration_pattern"], duration)
    for budget in disruption["budgets"]:
        assert re.fullmatch(pool_facts["budget_nodes_pattern"], budget["nodes"])
        assert set(budget.get("reasons", ())) <= set(pool_facts["budget_reasons"])
    # No label in the provider's restricted domain on the nodes.
    restricted = facts["labels"]["restricted_domains"]
    assert not [key for key in node_pool["spec"]["template"]["metadata"]["labels"] if key.split("/")[0] in restricted]
    ref = node_pool["spec"]["template"]["spec"]["nodeClassRef"]
    assert (ref["group"], ref["kind"], ref["name"]) == (klass["group"], klass["kind"], node_class["metadata"]["name"])


def test_the_managed_gpu_experience_is_the_node_classes_tag() -> None:
    tags = node_class_manifest(nap_pool(managedGpu=True))["spec"]["tags"]
    assert tags["EnableManagedGPUExperience"] == "true"
    assert "EnableManagedGPUExperience" not in node_class_manifest(nap_pool())["spec"]["tags"]


def test_an_operator_owned_driver_is_gpu_mode_none() -> None:
    pool = nap_pool(gpuDriver="None")
    assert node_class_manifest(pool)["spec"]["gpu"] == {"mode": "None"}


def test_an_automatic_stack_plans_nodepools_and_no_gpu_agent_pool(harness: MockHarness) -> None:
    result = harness.run_stack("test", nap_raw())
    [cluster] = result.by_type(MANAGED_CLUSTER)
    assert cluster.inputs["sku"] == {"name": "Automatic", "tier": "Standard"}
    assert cluster.inputs["nodeProvisioningProfile"]["mode"] == "Auto"
    assert "agentPoolProfiles" not in cluster.inputs
    assert cluster.inputs["sku"]["name"] in {e.value for e in cs.ManagedClusterSKUName}
    assert not result.by_type(AGENT_POOL)
    [node_pool] = result.by_type("kubernetes:karpenter.sh/v1:NodePool")
    [node_class] = result.by_type("kubernetes:karpenter.azure.com/v1beta1:AKSNodeClass")
    assert node_pool.inputs["metadata"]["name"] == node_class.inputs["metadata"]["name"] == "aks-gpu-gpu"
    assert node_pool.inputs["metadata"]["labels"]["app.kubernetes.io/part-of"] == "aks-gpu"


def test_a_standard_nap_cluster_keeps_a_fixed_size_system_pool(harness: MockHarness) -> None:
    result = harness.run_stack("test", nap_raw(sku="Standard"))
    [cluster] = result.by_type(MANAGED_CLUSTER)
    assert cluster.inputs["sku"]["name"] == "Base"
    assert cluster.inputs["nodeProvisioningProfile"]["mode"] in {e.value for e in cs.NodeProvisioningMode}
    [system] = cluster.inputs["agentPoolProfiles"]
    assert system["enableAutoScaling"] is False and system["count"] == 2
    assert "minCount" not in system and "maxCount" not in system


# ---------------------------------------------------------------- the managed GPU refusal, read from the installed SDK

FAKE_GPU_PROFILE = '''
class GPUProfileArgs:
    def __init__(__self__, *,
                 driver: pulumi.Input[Optional[Union[_builtins.str, 'GPUDriver']]] = None,
                 nvidia: Optional[pulumi.Input['NvidiaGPUProfileArgs']] = None):
        """GPU settings for the Agent Pool."""

class IPTagArgs:
    pass
'''


@pytest.fixture
def sdk_with_managed_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An azure-native SDK whose GPUProfileArgs carries `nvidia`, as an SDK on API 2026-08-01 would."""
    (tmp_path / "containerservice").mkdir()
    (tmp_path / "containerservice" / "_inputs.py").write_text(FAKE_GPU_PROFILE, encoding="utf-8")
    monkeypatch.setattr(aks_facts, "azure_native_dir", lambda: tmp_path)
    return tmp_path


def managed_agent_pool_raw() -> dict[str, Any]:
    raw = copy.deepcopy(minimal_raw())
    raw["aks-gpu:gpuPools"][0]["managedGpu"] = True
    return raw


def test_the_installed_sdk_has_no_managed_gpu_so_an_agent_pool_is_refused() -> None:
    assert aks_facts.gpu_profile_fields() == {"driver"}
    with pytest.raises(ConfigError) as caught:
        validate_stack(managed_agent_pool_raw(), "s", today=ON)
    assert any("[refusal managed-gpu-api-unreachable]" in p.message for p in caught.value.errors)


def test_a_provider_that_carries_it_lifts_the_refusal(sdk_with_managed_gpu: Path) -> None:
    assert aks_facts.sdk_has_managed_gpu()
    validated = validate_stack(managed_agent_pool_raw(), "s", today=ON)
    assert [p.path for p in validated.warnings if p.path.endswith("managedGpu")] == ["aks-gpu:gpuPools[0].managedGpu"]
    [pool] = resolve(validated.config).pools
    assert agent_pool_inputs(pool)["gpu_profile"] == {"driver": "Install", "nvidia": {"management_mode": "Managed"}}


def test_a_nap_pool_takes_the_managed_gpu_with_the_sdk_as_it_is() -> None:
    validated = validate_stack(nap_raw(managedGpu=True), "s", today=ON)
    assert "managed-gpu-api-unreachable" not in " ".join(p.message for p in validated.warnings)
