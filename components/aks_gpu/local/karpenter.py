"""How ``aksgpu local`` runs Karpenter for a stack with NAP pools: the controller of Karpenter's kwok cloud provider,
which ``make tools`` builds from Karpenter's core (sigs.k8s.io/karpenter, the version of the NodePool CRD the stacks'
NodePools are held to), as a process on this machine against the local control plane, with the real NodePool,
NodeClaim and KWOKNodeClass CRDs from the same module. Pure: the stack's model in, documents and settings out
(``local/engine.py`` writes them and starts the process).

What differs from AKS: the Azure provider (github.com/Azure/karpenter-provider-azure) is refused by the Go proxy, so the
cloud provider is kwok's, which makes a Node object for each NodeClaim (no VM) from the instance types it is given.
Each NAP NodePool names the ``KWOKNodeClass`` below instead of its ``AKSNodeClass`` (the one swap, through
``node_pool_manifest``'s node class argument); the AKSNodeClass objects are still created, under an open stand-in CRD
(``local/crds.py``). The instance types are the stack's NAP VM sizes, made from the GPU catalog and the node figures
``aksgpu local``'s simulated nodes use, labelled with the ``karpenter.azure.com/sku-*`` values the Azure provider gives
a size (its pkg/providers/instancetype/instancetype.go, computeRequirements, at the commit of data/karpenter.yaml's
labels source), so the NodePools' requirements select them as on Azure.

Sources (sigs.k8s.io/karpenter v1.14.1, the module zip): the instance types file, ``INSTANCE_TYPES_FILE_PATH``, a JSON
list of {name, offerings [{Price, Available, Requirements}], architecture, operatingSystems, resources}
(kwok/cloudprovider/helpers.go, InstanceTypeOptions); an offering's requirement keys become well-known labels and are
put on the node (kwok/cloudprovider/cloudprovider.go, addInstanceLabels); the KWOKNodeClass CRD defaults its status to
Ready (kwok/apis/v1alpha1/kwoknodeclass.go), which Create asks for; the operator's settings
(pkg/operator/options/options.go): DISABLE_LEADER_ELECTION, METRICS_PORT, HEALTH_PROBE_PORT (bound on 127.0.0.1 by the
recipe's one change, tools/go/recipes), and the provisioner's batch window, BATCH_IDLE_DURATION 1 s and
BATCH_MAX_DURATION 10 s by default, which ``aksgpu local`` keeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aks_gpu.aks_facts import karpenter_facts, node_rules
from aks_gpu.audit.prices import load_prices
from aks_gpu.azure.node_provisioning import NodeClassRef
from aks_gpu.config.models import StackConfig
from aks_gpu.local.nodes import simulated_gpu_pool, zone_of
from aks_gpu.naming import COMMON_LABELS, PACKAGE_NAME, REGION_LABEL, ZONE_LABEL, vendor_resource
from aks_gpu.resolved.model import PlatformModel, ResolvedPool

# The binary and the CRD stream the karpenter group of tools/go/recipes puts in .tools/bin.
KARPENTER_BINARY = "karpenter-kwok"
KARPENTER_CRDS = "karpenter-crds.yaml"
# The kwok provider's node class (kwok/apis/v1alpha1: group karpenter.kwok.sh, version v1alpha1, kind KWOKNodeClass),
# one for every NAP NodePool of the local cluster.
KWOK_NODE_CLASS = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", f"{PACKAGE_NAME}-local")
KWOK_NODE_CLASS_VERSION = "v1alpha1"
# The capacity type the NodePools ask for (azure/node_provisioning.py requirements): on-demand only.
CAPACITY_TYPE = "on-demand"
# The Azure provider's sku labels an instance type carries here, by data/karpenter.yaml's names (labels:).
SKU_LABELS = ("sku_name", "sku_family", "sku_cpu", "sku_memory", "sku_gpu_manufacturer", "sku_gpu_count")


def karpenter_version() -> str:
    """The Karpenter version ``make tools`` builds: the NodePool CRD's module version (data/karpenter.yaml)."""
    return str(karpenter_facts()["node_pool"]["module_version"])


def kwok_node_class_ref(pool: ResolvedPool) -> NodeClassRef:
    """The node class a NAP NodePool names on the local cluster: kwok's, whatever the pool."""
    return KWOK_NODE_CLASS


def kwok_node_class() -> dict[str, Any]:
    """The KWOKNodeClass (its spec has no required field; its status defaults to Ready)."""
    return {
        "apiVersion": f"{KWOK_NODE_CLASS.group}/{KWOK_NODE_CLASS_VERSION}",
        "kind": KWOK_NODE_CLASS.kind,
        "metadata": {"name": KWOK_NODE_CLASS.name, "labels": dict(COMMON_LABELS)},
    }


def nap_pools(model: PlatformModel) -> tuple[ResolvedPool, ...]:
    return tuple(pool for pool in model.pools if pool.nap)


def sku_family(vm_size: str) -> str:
    """The family letter of an Azure VM size (``Standard_NC24ads_A100_v4`` -> ``N``), as the Azure provider labels it
    (skewer's VMSizeType.Family; its test suite expects ``N`` for that size)."""
    return vm_size.removeprefix("Standard_")[:1]


def instance_type(pool: ResolvedPool, location: str) -> dict[str, Any]:
    """One NAP pool's VM size as a kwok instance type: what a node of that size shows here (vCPUs, memory, OS disk and
    maxPods as the simulated nodes show them, ``SimulatedPool.resources``), its whole GPUs as the Azure provider counts
    them (computeCapacity: nvidia.com/gpu or amd.com/gpu), one on-demand offering in the stack's region and the zone a
    pool without zones shows, at the list price of ``data/gpu_prices.yaml`` in the stack's region (0 where it has none)."""
    labels = karpenter_facts()["labels"]
    capacity, _ = simulated_gpu_pool(pool).resources()
    resources = {name: value for name, value in capacity.items() if name in ("cpu", "memory", "ephemeral-storage", "pods")}
    gpus = pool.gpus_per_node or 0
    resources[vendor_resource(pool.vendor)] = str(gpus)
    figures = node_rules().size(pool.config.vm_size)
    sku = {
        "sku_name": pool.config.vm_size,
        "sku_family": sku_family(pool.config.vm_size),
        "sku_gpu_manufacturer": pool.vendor,
        "sku_gpu_count": str(gpus),
    }
    if figures is not None:
        # sku-cpu: vCPUs; sku-memory: MiB (the provider's memoryMiB: GiB x 1024).
        sku["sku_cpu"] = str(figures.vcpus)
        sku["sku_memory"] = str(figures.memory_gib * 1024)
    requirements = [
        {"key": ZONE_LABEL, "operator": "In", "values": [zone_of(location, (), 0)]},
        {"key": REGION_LABEL, "operator": "In", "values": [location]},
        {"key": karpenter_facts()["node_pool"]["capacity_type_label"], "operator": "In", "values": [CAPACITY_TYPE]},
        *({"key": labels[name], "operator": "In", "values": [sku[name]]} for name in SKU_LABELS if name in sku),
    ]
    price = load_prices().hourly(location, pool.config.vm_size)
    return {
        "name": pool.config.vm_size,
        "offerings": [{"Price": price[0] if price is not None else 0.0, "Available": True, "Requirements": requirements}],
        "architecture": simulated_gpu_pool(pool).architecture,
        "operatingSystems": ["linux"],
        "resources": resources,
    }


def instance_types(config: StackConfig, model: PlatformModel) -> list[dict[str, Any]]:
    """The instance types file: one per VM size of the stack's NAP pools (the first pool of a size gives it)."""
    location = config.cluster.location or config.location
    found: dict[str, dict[str, Any]] = {}
    for pool in nap_pools(model):
        found.setdefault(pool.config.vm_size, instance_type(pool, location))
    return list(found.values())


def karpenter_environment(kubeconfig: Path, instance_types_file: Path, metrics_port: int, health_port: int) -> dict[str, str]:
    """The settings of the local process, by the environment variables its options read."""
    return {
        "KUBECONFIG": str(kubeconfig),
        "INSTANCE_TYPES_FILE_PATH": str(instance_types_file),
        # One process: no Lease to win first.
        "DISABLE_LEADER_ELECTION": "true",
        "METRICS_PORT": str(metrics_port),
        "HEALTH_PROBE_PORT": str(health_port),
    }


def karpenter_crds(documents: Iterable[Any]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of the module's stream (NodePool, NodeClaim, KWOKNodeClass)."""
    return [d for d in documents if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
