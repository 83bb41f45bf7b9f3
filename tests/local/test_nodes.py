"""The simulated nodes of `aksgpu local`: what the scheduler and the audit see of each pool, as AKS would show it."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.local.nodes import node_manifests, node_name, zone_of
from aks_gpu.naming import POOL_LABEL, serves_label, vendor_resource
from tests.conftest import STACK_NAMES, stack_config, stack_model


def nodes_of(stack: str, per_pool: int = 1) -> list[dict[str, Any]]:
    return node_manifests(stack_config(stack), stack_model(stack), per_pool)


def by_pool(nodes: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    pools: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        pools.setdefault(node["metadata"]["labels"]["kubernetes.azure.com/agentpool"], []).append(node)
    return pools


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_pool_and_the_system_pool_get_their_nodes(stack: str) -> None:
    config, model = stack_config(stack), stack_model(stack)
    pools = by_pool(nodes_of(stack, 2))
    assert set(pools) == {
        config.cluster.system_pool.name,
        *(pool.name for pool in model.pools),
        *(pool.name for pool in config.cpu_pools),
    }
    assert all(len(nodes) == 2 for nodes in pools.values())
    names = [node["metadata"]["name"] for nodes in pools.values() for node in nodes]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_the_system_pool_takes_critical_addons_only_and_has_no_gpu(stack: str) -> None:
    config = stack_config(stack)
    system = by_pool(nodes_of(stack))[config.cluster.system_pool.name][0]
    assert system["spec"]["taints"] == [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}]
    assert system["metadata"]["labels"]["kubernetes.azure.com/mode"] == "system"
    assert not [name for name in system["status"]["allocatable"] if name.startswith(("nvidia.com/", "amd.com/"))]


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_a_cpu_pool_is_untainted_gpu_free_and_serves_every_workload_type(stack: str) -> None:
    # The pods of a workload namespace that ask for no GPU (a Ray head, an MPI launcher) go there: the namespace's node
    # selector (serves.aks-gpu/<type>=true) must find a node, or they never schedule.
    config, model = stack_config(stack), stack_model(stack)
    assert config.cpu_pools, "every shipped stack has a CPU user pool"
    for cpu in config.cpu_pools:
        node = by_pool(nodes_of(stack))[cpu.name][0]
        assert node["spec"].get("taints", []) == []
        assert node["metadata"]["labels"]["kubernetes.azure.com/mode"] == "user"
        for workload in model.workloads:
            assert node["metadata"]["labels"][serves_label(workload.type)] == "true"
        assert not [name for name in node["status"]["allocatable"] if name.startswith(("nvidia.com/", "amd.com/"))]


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_a_gpu_pool_shows_its_placement_labels_taints_and_gpu_resource(stack: str) -> None:
    model = stack_model(stack)
    pools = by_pool(nodes_of(stack))
    for pool in model.pools:
        node = pools[pool.name][0]
        labels = node["metadata"]["labels"]
        # A pod the platform places on this pool selects and tolerates exactly what the node shows.
        assert all(labels.get(key) == value for key, value in pool.node_selector.items())
        assert labels[POOL_LABEL] == pool.name
        assert labels["node.kubernetes.io/instance-type"] == pool.config.vm_size
        assert labels["kubernetes.azure.com/mode"] == "user"
        assert labels["kubernetes.azure.com/node-image-version"].startswith(("AKSUbuntu-", "AzureLinux"))
        taints = {(t["key"], t["value"], t["effect"]) for t in node["spec"]["taints"]}
        assert (vendor_resource(pool.vendor), "present", "NoSchedule") in taints
        assert {(t.key, t.value, t.effect) for t in pool.taints} <= taints
        assert node["status"]["allocatable"][pool.resource.name] == str(pool.resource.count_per_node)
        assert node["status"]["capacity"][pool.resource.name] == str(pool.resource.count_per_node)
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"


def test_a_time_sliced_pool_advertises_gpus_times_replicas() -> None:
    # dev: one T4 (Standard_NC4as_T4_v3) shared by 4 replicas.
    node = by_pool(nodes_of("dev"))["dev"][0]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert node["metadata"]["labels"]["kubernetes.azure.com/scalesetpriority"] == "spot"
    assert {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"} in node["spec"]["taints"]


def test_node_names_are_aks_vmss_names_and_stable() -> None:
    assert node_name("aks-gpu-prod", "train", 0) == node_name("aks-gpu-prod", "train", 0)
    assert node_name("aks-gpu-prod", "train", 37).endswith("vmss000011")
    assert node_name("aks-gpu-prod", "train", 0) != node_name("aks-gpu-dev", "train", 0)
    assert zone_of("swedencentral", ("1", "2"), 3) == "swedencentral-2" and zone_of("x", (), 0) == "0"


def test_no_node_at_all_is_refused() -> None:
    with pytest.raises(ValueError):
        nodes_of("dev", 0)


def cpu_millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(quantity) * 1000


def test_a_node_offers_its_vm_sizes_cpu_and_memory_less_what_aks_reserves() -> None:
    # prod's training pool: ND96isr_H100_v5, 96 vCPUs and 1,900 GiB (Azure's size page), 30 pods. An 80-CPU training
    # pod fits it, as on AKS; a 96-CPU one does not (AKS keeps 1,060m for the kubelet).
    train = by_pool(nodes_of("prod"))["train"][0]["status"]
    assert train["capacity"]["cpu"] == "96" and train["capacity"]["memory"] == f"{1900 * 1024 * 1024}Ki"
    assert 80_000 < cpu_millicores(train["allocatable"]["cpu"]) < 96_000
    # 20 MiB x 30 pods + 50 MiB kube-reserved and the 100 MiB eviction threshold.
    assert train["allocatable"]["memory"] == f"{(1900 * 1024 - 650 - 100) * 1024}Ki"
    assert train["allocatable"]["pods"] == train["capacity"]["pods"] == "30"


def test_a_t4_node_is_a_four_vcpu_node() -> None:
    # dev's NC4as_T4_v3: 4 vCPUs, 28 GiB. A pod asking 4 CPUs stays Pending on AKS (140m reserved): locally too.
    dev = by_pool(nodes_of("dev"))["dev"][0]["status"]
    assert dev["capacity"]["cpu"] == "4"
    assert cpu_millicores(dev["allocatable"]["cpu"]) == 4000 - 140


def test_the_ephemeral_storage_is_the_os_disk_less_the_kubelets_nodefs_threshold() -> None:
    pools = by_pool(nodes_of("prod"))
    # A GPU pool's OS disk is Managed unless it asks otherwise (osDiskType): 1,024 GiB at 64+ vCPUs.
    train = pools["train"][0]["status"]
    assert train["capacity"]["ephemeral-storage"] == f"{1024 * 1024 * 1024}Ki"
    assert train["allocatable"]["ephemeral-storage"] == f"{1024 * 1024 * 1024 - 1024 * 1024 * 1024 // 10}Ki"
    # The system pool asks no OS disk: AKS makes it ephemeral, the size of D4ds_v5's 150 GiB temp disk.
    system = pools[stack_config("prod").cluster.system_pool.name][0]["status"]
    assert system["capacity"]["ephemeral-storage"] == f"{150 * 1024 * 1024}Ki"


def test_the_system_pool_has_akss_default_max_pods_for_azure_cni_overlay() -> None:
    system = by_pool(nodes_of("prod"))[stack_config("prod").cluster.system_pool.name][0]["status"]
    assert system["allocatable"]["pods"] == "250"


def test_a_nap_pool_gets_no_node_ahead_karpenter_makes_them() -> None:
    import copy

    from aks_gpu.aks_facts import kubernetes_calendar
    from aks_gpu.local.crds import stand_in_crds
    from aks_gpu.resolved.model import resolve
    from aks_gpu.resolved.stack import validate_stack
    from tests.conftest import minimal_raw

    raw = copy.deepcopy(minimal_raw())
    raw["aks-gpu:cluster"]["sku"] = "Automatic"
    config = validate_stack(raw, "s", today=kubernetes_calendar().read_on).config
    pools = {node["metadata"]["labels"].get(POOL_LABEL) for node in node_manifests(config, resolve(config), 1)}
    assert "gpu" not in pools
    # Its NodePool and AKSNodeClass are still stored by the local server: cluster-scoped stand-ins of NAP's CRDs.
    crds = {crd["metadata"]["name"]: crd["spec"] for crd in stand_in_crds()}
    assert crds["nodepools.karpenter.sh"]["scope"] == "Cluster"
    assert [v["name"] for v in crds["aksnodeclasses.karpenter.azure.com"]["versions"]] == ["v1beta1"]
