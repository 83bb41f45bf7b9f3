"""NvmeCache: Azure Container Storage on the nvmeCache pools, its StorageClass/StoragePool, the volume
snippets workloads paste in, the rules that guard it, and the KAITO add-on that uses it."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from kubernetes import client as kube_client

from aks_gpu.config.problems import ConfigError
from aks_gpu.manifests import labelled
from aks_gpu.mock_engine import PlanResult
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.node_labels import nvme_node_labels
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.storage.manifests import (
    ACCEPT_EPHEMERAL_ANNOTATIONS,
    NODE_AFFINITY_ANNOTATION,
    persistent_claim,
    storage_class,
    storage_pool,
    volume_snippet,
)
from aks_gpu.storage.nvme_cache import NvmeCache, NvmeCacheArgs
from tests.conftest import MockHarness, minimal_raw, platform_sections, raw_stack, stack_model

SOURCE = "stacks/Pulumi.test.yaml"
EXTENSION = "azure-native:kubernetesconfiguration:Extension"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
STORAGE_POOL = "kubernetes:containerstorage.azure.com/v1:StoragePool"
CLUSTER = "azure-native:containerservice:ManagedCluster"


def model_of(raw: dict[str, Any]) -> PlatformModel:
    return validate_stack(raw, SOURCE).model


def prod_with(**overrides: Any) -> dict[str, Any]:
    return raw_stack("prod") | overrides


def plan_cache(harness: MockHarness, model: PlatformModel) -> PlanResult:
    """NvmeCache alone, as the platform wires it: a Kubernetes provider in opts, outputs exported."""

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        cache = NvmeCache(
            "nvme",
            NvmeCacheArgs(**platform_sections(model.config), resource_group_name="rg-gpu", cluster_name="aks-gpu"),
            opts=pulumi.ResourceOptions(provider=provider),
        )
        pulumi.export("storageClassName", cache.storage_class_name)
        pulumi.export("volumeSnippets", cache.volume_snippets)

    return harness.run(program)


def only(result: PlanResult, type_: str) -> Any:
    [record] = result.by_type(type_)
    return record


def affinity_values(affinity: dict[str, Any]) -> list[str]:
    [term] = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    [expression] = term["matchExpressions"]
    assert (expression["key"], expression["operator"]) == (POOL_LABEL, "In")
    return list(expression["values"])


def round_trips(manifest: dict[str, Any], model: str) -> bool:
    """The Kubernetes API types know every field: a misspelt or misplaced key is dropped on the way back."""
    api: Any = kube_client.ApiClient()
    typed = api.deserialize(json.dumps(manifest), model, "application/json")
    return bool(api.sanitize_for_serialization(typed) == manifest)


# ---------------------------------------------------------------- prod: v2 (the default flavour)


def test_prod_installs_the_v2_extension_on_the_cluster(harness: MockHarness) -> None:
    extension = only(plan_cache(harness, stack_model("prod")), EXTENSION)
    assert extension.inputs["extensionName"] == "acstor"
    assert extension.inputs["extensionType"] == "microsoft.azurecontainerstoragev2"
    assert extension.inputs["clusterRp"] == "Microsoft.ContainerService"
    assert extension.inputs["clusterResourceName"] == "managedClusters"
    assert (extension.inputs["clusterName"], extension.inputs["resourceGroupName"]) == ("aks-gpu", "rg-gpu")
    # The install guide's extension sends no identity; SystemAssigned has failed with BadRequest on AKS extensions.
    assert "identity" not in extension.inputs
    assert extension.inputs["autoUpgradeMinorVersion"] is True
    assert extension.inputs["configurationSettings"] == {"enable-azure-container-storage": "true"}
    # An Azure resource: the Kubernetes provider handed to the component must not be used for it.
    assert extension.options["provider"] is None
    assert extension.parent.endswith("aks-gpu:index:NvmeCache::nvme")


def test_prod_storage_class_keeps_the_driver_on_the_nvme_pool(harness: MockHarness) -> None:
    result = plan_cache(harness, stack_model("prod"))
    manifest = result.manifests()["storageclass-_-local-nvme.yaml"]
    assert manifest["provisioner"] == "localdisk.csi.acstor.io"
    assert manifest["reclaimPolicy"] == "Delete"
    assert manifest["volumeBindingMode"] == "WaitForFirstConsumer"
    affinity = yaml.safe_load(manifest["metadata"]["annotations"][NODE_AFFINITY_ANNOTATION])
    assert affinity_values(affinity) == ["train"]  # prod's only nvmeCache pool; not `infer`
    assert manifest == labelled(storage_class("local-nvme", POOL_LABEL, ["train"]))


def test_storage_class_goes_through_the_kubernetes_provider_after_the_extension(harness: MockHarness) -> None:
    result = plan_cache(harness, stack_model("prod"))
    extension, storage = only(result, EXTENSION), only(result, STORAGE_CLASS)
    assert storage.options["provider"] == "k8s-id"
    assert extension.urn in storage.options["dependsOn"]


def test_the_extension_waits_for_what_the_component_depends_on(harness: MockHarness) -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        earlier = k8s.core.v1.Namespace("earlier", metadata={"name": "earlier"}, opts=pulumi.ResourceOptions(provider=provider))
        NvmeCache(
            "nvme",
            NvmeCacheArgs(**platform_sections(stack_model("prod").config), resource_group_name="rg-gpu", cluster_name="aks-gpu"),
            opts=pulumi.ResourceOptions(provider=provider, depends_on=[earlier]),
        )

    result = harness.run(program)
    [earlier] = result.by_type("kubernetes:core/v1:Namespace")
    assert earlier.urn in only(result, EXTENSION).options["dependsOn"]


def test_prod_exports_the_class_name_and_a_snippet_for_the_namespace_that_asked(harness: MockHarness) -> None:
    outputs = plan_cache(harness, stack_model("prod")).outputs
    assert outputs["storageClassName"] == "local-nvme"
    snippets = outputs["volumeSnippets"]
    assert list(snippets) == ["gpu-training"]  # gpu-inference has no nvmeVolume
    snippet = snippets["gpu-training"]
    template = snippet["volume"]["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert template["storageClassName"] == "local-nvme"
    assert snippet["volumeMount"]["name"] == snippet["volume"]["name"]
    assert affinity_values(snippet["affinity"]["nodeAffinity"]) == ["train"]
    claim = snippet["persistentVolumeClaim"]
    assert claim["metadata"]["namespace"] == "gpu-training"
    assert claim["metadata"]["annotations"] == {"localdisk.csi.acstor.io/accept-ephemeral-storage": "true"}
    assert claim["spec"]["storageClassName"] == "local-nvme"


def test_storage_class_name_comes_from_config(harness: MockHarness) -> None:
    model = model_of(prod_with(**{"aks-gpu:storage": {"storageClassName": "scratch"}}))
    result = plan_cache(harness, model)
    assert "storageclass-_-scratch.yaml" in result.manifests()
    assert result.outputs["storageClassName"] == "scratch"
    assert (
        result.outputs["volumeSnippets"]["gpu-training"]["volume"]["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"]
        == "scratch"
    )


def test_extension_auto_upgrade_follows_config(harness: MockHarness) -> None:
    model = model_of(prod_with(**{"aks-gpu:storage": {"extensionAutoUpgrade": False}}))
    extension = only(plan_cache(harness, model), EXTENSION)
    assert extension.inputs["autoUpgradeMinorVersion"] is False
    assert "version" not in extension.inputs


def test_a_pinned_v1_extension_version_is_passed_when_auto_upgrade_is_off(harness: MockHarness) -> None:
    storage = {"flavour": "v1", "extensionAutoUpgrade": False, "extensionVersion": "2.1.0"}
    model = model_of(prod_with(**{"aks-gpu:storage": storage}))
    extension = only(plan_cache(harness, model), EXTENSION)
    assert (extension.inputs["version"], extension.inputs["autoUpgradeMinorVersion"]) == ("2.1.0", False)


def test_every_nvme_pool_is_in_the_affinity(harness: MockHarness) -> None:
    pools = [
        {"name": "traina", "vendor": "nvidia", "vmSize": "Standard_ND96isr_H100_v5", "workload": "training", "nvmeCache": True},
        {"name": "trainb", "vendor": "nvidia", "vmSize": "Standard_ND96isr_H200_v5", "workload": "training", "nvmeCache": True},
        {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "inference"},
    ]
    workloads = [{"name": "team-a", "type": "training", "gpuQuota": 8, "nvmeVolume": True}]
    result = plan_cache(harness, model_of(minimal_raw(**{"aks-gpu:gpuPools": pools, "aks-gpu:workloads": workloads})))
    annotation = result.manifests()["storageclass-_-local-nvme.yaml"]["metadata"]["annotations"][NODE_AFFINITY_ANNOTATION]
    assert affinity_values(yaml.safe_load(annotation)) == ["traina", "trainb"]
    assert affinity_values(result.outputs["volumeSnippets"]["team-a"]["affinity"]["nodeAffinity"]) == ["traina", "trainb"]


# ---------------------------------------------------------------- no NVMe pool: nothing at all


def test_dev_registers_nothing_but_the_component(harness: MockHarness) -> None:
    result = plan_cache(harness, stack_model("dev"))
    assert sorted(r.type for r in result.resources) == ["aks-gpu:index:NvmeCache", "pulumi:providers:kubernetes"]
    assert result.manifests() == {}
    assert result.outputs == {"storageClassName": "", "volumeSnippets": {}}


def test_v1_settings_without_an_nvme_pool_register_nothing_either(harness: MockHarness) -> None:
    result = plan_cache(harness, model_of(minimal_raw(**{"aks-gpu:storage": {"flavour": "v1"}})))
    assert result.by_type(EXTENSION) == [] and result.manifests() == {}


# ---------------------------------------------------------------- v1 (legacy) flavour, only when asked


def test_v1_installs_the_legacy_extension_in_the_acstor_namespace(harness: MockHarness) -> None:
    extension = only(plan_cache(harness, model_of(prod_with(**{"aks-gpu:storage": {"flavour": "v1"}}))), EXTENSION)
    assert extension.inputs["extensionType"] == "microsoft.azurecontainerstorage"
    assert extension.inputs["extensionName"] == "acstor"
    assert extension.inputs["scope"] == {"cluster": {"releaseNamespace": "acstor"}}
    assert "configurationSettings" not in extension.inputs


def test_v1_creates_a_storage_pool_and_uses_the_class_acstor_derives(harness: MockHarness) -> None:
    result = plan_cache(harness, model_of(prod_with(**{"aks-gpu:storage": {"flavour": "v1"}})))
    assert result.by_type(STORAGE_CLASS) == []  # ACStor v1 creates `acstor-<pool>` itself
    pool = only(result, STORAGE_POOL)
    assert only(result, EXTENSION).urn in pool.options["dependsOn"]
    manifest = result.manifests()["storagepool-acstor-local-nvme.yaml"]
    assert manifest["spec"] == {"poolType": {"ephemeralDisk": {"diskType": "nvme"}}}
    assert manifest == labelled(storage_pool("local-nvme"))
    assert result.outputs["storageClassName"] == "acstor-local-nvme"
    claim = result.outputs["volumeSnippets"]["gpu-training"]["persistentVolumeClaim"]
    assert claim["metadata"]["annotations"] == {"acstor.azure.com/accept-ephemeral-storage": "true"}
    assert claim["spec"]["storageClassName"] == "acstor-local-nvme"


def test_v1_node_label_is_only_for_v1() -> None:
    assert nvme_node_labels("v1") == {"acstor.azure.com/io-engine": "acstor"}
    assert nvme_node_labels("v2") == {}


# ---------------------------------------------------------------- manifests are valid Kubernetes objects


def test_manifests_and_snippets_use_only_fields_kubernetes_knows() -> None:
    assert round_trips(storage_class("local-nvme", POOL_LABEL, ["train"]), "V1StorageClass")
    for flavour in ("v2", "v1"):
        snippet = volume_snippet("team-a", "local-nvme", flavour, POOL_LABEL, ["train"])
        assert round_trips(snippet["volume"], "V1Volume")
        assert round_trips(snippet["volumeMount"], "V1VolumeMount")
        assert round_trips(snippet["affinity"], "V1Affinity")
        assert round_trips(snippet["persistentVolumeClaim"], "V1PersistentVolumeClaim")


def test_round_trip_check_catches_a_misplaced_field() -> None:
    broken = storage_class("local-nvme", POOL_LABEL, ["train"]) | {"volumeBindingModes": "Immediate"}
    assert not round_trips(broken, "V1StorageClass")


def test_a_persistent_claim_always_accepts_ephemeral_storage() -> None:
    for flavour in ("v2", "v1"):
        claim = persistent_claim("cache", "team-a", "local-nvme", flavour)
        assert claim["metadata"]["annotations"][ACCEPT_EPHEMERAL_ANNOTATIONS[flavour]] == "true"


# ---------------------------------------------------------------- rules


def errors_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_stack(raw, SOURCE)
    return [p.render(SOURCE) for p in caught.value.errors]


def warnings_of(raw: dict[str, Any]) -> list[str]:
    return [p.render(SOURCE) for p in validate_stack(raw, SOURCE).warnings]


def gpu_pool(**fields: Any) -> dict[str, Any]:
    base = {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training", "maxCount": 2}
    return base | fields


def test_nvme_cache_on_a_size_without_nvme_is_refused_with_the_key() -> None:
    [message] = errors_of(minimal_raw(**{"aks-gpu:gpuPools": [gpu_pool(vmSize="Standard_NC64as_T4_v3", nvmeCache=True)]}))
    assert message.startswith(f"{SOURCE}: aks-gpu:gpuPools[0].nvmeCache: Standard_NC64as_T4_v3 has no local NVMe")


def test_ephemeral_os_disk_on_a_single_nvme_disk_size_warns() -> None:
    raw = minimal_raw(**{"aks-gpu:gpuPools": [gpu_pool(nvmeCache=True, osDiskType="Ephemeral")]})
    assert any("aks-gpu:gpuPools[0].osDiskType" in w and "leaving none for the cache" in w for w in warnings_of(raw))


def test_ephemeral_os_disk_on_an_eight_disk_size_does_not_warn() -> None:
    pool = gpu_pool(vmSize="Standard_ND96isr_H100_v5", nvmeCache=True, osDiskType="Ephemeral")
    assert not any("osDiskType" in w for w in warnings_of(minimal_raw(**{"aks-gpu:gpuPools": [pool]})))


def test_nvme_cache_on_a_size_outside_the_catalog_warns() -> None:
    pool = gpu_pool(vmSize="Standard_ND96future_v9", gpuCount=8, gpuModel="H100-80GB", nvmeCache=True)
    warnings = warnings_of(minimal_raw(**{"aks-gpu:gpuPools": [pool]}))
    assert any("aks-gpu:gpuPools[0].nvmeCache" in w and "cannot be checked" in w for w in warnings)


def test_a_pinned_version_with_auto_upgrade_is_refused_once() -> None:
    pools = [gpu_pool(nvmeCache=True), gpu_pool(name="gpu2", nvmeCache=True)]
    storage = {"flavour": "v1", "extensionVersion": "2.1.0"}
    messages = errors_of(minimal_raw(**{"aks-gpu:gpuPools": pools, "aks-gpu:storage": storage}))
    assert [m for m in messages if "aks-gpu:storage.extensionVersion" in m] == [
        f"{SOURCE}: aks-gpu:storage.extensionVersion: '2.1.0' pins the Azure Container Storage extension, "
        "which needs extensionAutoUpgrade: false [refusal extension-version-needs-manual-upgrade]"
    ]


def test_v2_cannot_be_pinned_at_all() -> None:
    storage = {"extensionAutoUpgrade": False, "extensionVersion": "2.1.0"}
    messages = errors_of(minimal_raw(**{"aks-gpu:gpuPools": [gpu_pool(nvmeCache=True)], "aks-gpu:storage": storage}))
    assert [m for m in messages if "aks-gpu:storage.extensionVersion" in m and "cannot be pinned" in m]


def test_storage_settings_do_not_matter_without_an_nvme_pool() -> None:
    raw = minimal_raw(**{"aks-gpu:storage": {"extensionVersion": "2.1.0"}})
    assert validate_stack(raw, SOURCE).config.storage.extension_version == "2.1.0"


def test_prod_stack_file_passes_the_nvme_rules() -> None:
    warnings = warnings_of(raw_stack("prod"))
    assert not any("nvmeCache" in w or "storage." in w for w in warnings)


# ---------------------------------------------------------------- KAITO add-on (cluster.kaito)


def cluster_inputs(harness: MockHarness, **cluster: Any) -> dict[str, Any]:
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg-test", "name": "aks-test", **cluster}})
    result = harness.run_stack("test", raw)
    [record] = result.by_type(CLUSTER)
    return dict(record.inputs)


def test_kaito_turns_on_the_ai_toolchain_operator_with_oidc(harness: MockHarness) -> None:
    inputs = cluster_inputs(harness, kaito=True, workloadIdentity=False)
    assert inputs["aiToolchainOperatorProfile"] == {"enabled": True}
    # KAITO's workload identity needs the OIDC issuer even when the stack itself asks for no workload identity.
    assert inputs["oidcIssuerProfile"] == {"enabled": True}


def test_without_kaito_there_is_no_ai_toolchain_operator(harness: MockHarness) -> None:
    inputs = cluster_inputs(harness, workloadIdentity=False)
    assert "aiToolchainOperatorProfile" not in inputs
    assert inputs["oidcIssuerProfile"] == {"enabled": False}
