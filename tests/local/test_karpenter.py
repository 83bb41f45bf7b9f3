"""aksgpu local's Karpenter (kwok provider): the instance types made from the GPU catalog for a stack's NAP pools, which
each pool's NodePool must select (its VM size alone), the real NodePool CRD in place of the stand-in, and the NodePools
pointed at kwok's node class while the AKSNodeClasses are still created."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.aks_facts import karpenter_facts, kubernetes_calendar
from aks_gpu.audit.prices import Prices
from aks_gpu.azure.node_provisioning import node_pool_manifest
from aks_gpu.config.loader import load_stack_file
from aks_gpu.local import karpenter
from aks_gpu.local.crds import stand_in_crds
from aks_gpu.local.karpenter import KWOK_NODE_CLASS, instance_types, karpenter_crds, kwok_node_class, kwok_node_class_ref
from aks_gpu.naming import ARCH_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL
from aks_gpu.resolved.model import ResolvedPool, resolve
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import MockHarness

NAP_STACK = Path(__file__).parents[1] / "e2e" / "stacks" / "Pulumi.nap.yaml"
ON = kubernetes_calendar().read_on
SKU = karpenter_facts()["labels"]


def nap_raw() -> dict[str, Any]:
    return load_stack_file(NAP_STACK)


def stack(raw: dict[str, Any] | None = None) -> tuple[Any, dict[str, ResolvedPool]]:
    config = validate_stack(raw if raw is not None else nap_raw(), str(NAP_STACK), today=ON).config
    model = resolve(config)
    return (config, model), {pool.name: pool for pool in model.pools}


def node_labels(instance_type: dict[str, Any]) -> dict[str, str]:
    """The labels kwok's provider puts on a node of the instance type: its name, architecture and OS, and each key of its
    offering's requirements (sigs.k8s.io/karpenter v1.14.1 kwok/cloudprovider/cloudprovider.go, addInstanceLabels)."""
    [offering] = instance_type["offerings"]
    labels = {INSTANCE_TYPE_LABEL: instance_type["name"], ARCH_LABEL: instance_type["architecture"], OS_LABEL: "linux"}
    for requirement in offering["Requirements"]:
        assert requirement["operator"] == "In" and len(requirement["values"]) == 1
        labels[requirement["key"]] = requirement["values"][0]
    return labels


def selects(requirements: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    for requirement in requirements:
        value = labels.get(requirement["key"])
        operator = requirement["operator"]
        if operator == "In" and value not in requirement["values"]:
            return False
        if operator == "NotIn" and value in requirement["values"]:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator == "DoesNotExist" and value is not None:
            return False
        if operator in ("Gt", "Lt"):
            if value is None:
                return False
            bound = int(requirement["values"][0])
            if (int(value) <= bound) if operator == "Gt" else (int(value) >= bound):
                return False
    return True


def test_each_nap_nodepool_selects_the_instance_type_of_its_own_vm_size_alone() -> None:
    (config, model), pools = stack()
    types = {t["name"]: t for t in instance_types(config, model)}
    assert set(types) == {"Standard_NC24ads_A100_v4", "Standard_NC4as_T4_v3"}
    for pool in pools.values():
        requirements = node_pool_manifest(pool, kwok_node_class_ref(pool))["spec"]["template"]["spec"]["requirements"]
        chosen = [name for name, instance_type in types.items() if selects(requirements, node_labels(instance_type))]
        assert chosen == [pool.config.vm_size], pool.name


def test_an_instance_type_is_its_sizes_gpus_vcpus_and_memory_at_the_regions_price(monkeypatch: pytest.MonkeyPatch) -> None:
    (config, model), _ = stack()
    types = {t["name"]: t for t in instance_types(config, model)}
    a100 = types["Standard_NC24ads_A100_v4"]
    # Azure's size page: 24 vCPUs, 220 GiB, one A100; swedencentral's list price in data/gpu_prices.yaml.
    assert a100["resources"]["nvidia.com/gpu"] == "1"
    assert a100["resources"]["cpu"] == "24"
    assert a100["resources"]["memory"] == f"{220 * 1024 * 1024}Ki"  # 220 GiB
    labels = node_labels(a100)
    assert labels[SKU["sku_cpu"]] == "24" and labels[SKU["sku_memory"]] == str(220 * 1024)
    assert labels[SKU["sku_gpu_count"]] == "1" and labels[SKU["sku_gpu_manufacturer"]] == "nvidia"
    assert labels[SKU["sku_family"]] == "N" and labels[SKU["sku_name"]] == "Standard_NC24ads_A100_v4"
    assert labels["topology.kubernetes.io/region"] == "swedencentral"
    assert a100["offerings"][0]["Price"] == 4.775
    assert types["Standard_NC4as_T4_v3"]["offerings"][0]["Price"] == 0.558
    # A region the price table does not record: the offering is free rather than missing.
    monkeypatch.setattr(karpenter, "load_prices", lambda: Prices(currency="USD", hours_per_month=730, tables={}))
    assert {t["offerings"][0]["Price"] for t in instance_types(config, model)} == {0.0}


def test_two_nap_pools_of_one_size_share_one_instance_type() -> None:
    raw = copy.deepcopy(nap_raw())
    raw["aks-gpu:gpuPools"][1]["vmSize"] = raw["aks-gpu:gpuPools"][0]["vmSize"]
    (config, model), _ = stack(raw)
    assert [t["name"] for t in instance_types(config, model)] == ["Standard_NC24ads_A100_v4"]


def test_a_nap_stack_gets_the_real_nodepool_crd_and_keeps_the_aksnodeclass_stand_in() -> None:
    def kinds(crds: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(crd["spec"]["group"], crd["spec"]["names"]["kind"]) for crd in crds}

    assert {("karpenter.sh", "NodePool"), ("karpenter.azure.com", "AKSNodeClass")} <= kinds(stand_in_crds())
    nap = kinds(stand_in_crds(real_node_pools=True))
    assert ("karpenter.sh", "NodePool") not in nap and ("karpenter.azure.com", "AKSNodeClass") in nap
    stream = [{"kind": "CustomResourceDefinition", "metadata": {"name": "nodepools.karpenter.sh"}}, None, {"kind": "List"}]
    assert karpenter_crds(stream) == [stream[0]]


def test_locally_the_nodepools_name_kwoks_node_class_and_the_aksnodeclasses_are_still_created(
    harness: MockHarness,
) -> None:
    from aks_gpu.cli.local import local_program
    from aks_gpu.program import run_platform

    local = harness.run(local_program, "nap", nap_raw())
    azure = harness.run(run_platform, "nap", nap_raw())
    for result, node_class in ((local, KWOK_NODE_CLASS), (azure, None)):
        node_pools = result.by_type("kubernetes:karpenter.sh/v1:NodePool")
        assert len(node_pools) == 2 and len(result.by_type("kubernetes:karpenter.azure.com/v1beta1:AKSNodeClass")) == 2
        refs = [r.inputs["spec"]["template"]["spec"]["nodeClassRef"] for r in node_pools]
        if node_class is not None:
            assert refs == [node_class.to_kube()] * 2
        else:
            assert [ref["kind"] for ref in refs] == ["AKSNodeClass"] * 2
    # The one swap: the same resources, the same URNs.
    assert sorted(r.urn for r in local.resources) == sorted(r.urn for r in azure.resources)
    assert kwok_node_class()["kind"] == KWOK_NODE_CLASS.kind
