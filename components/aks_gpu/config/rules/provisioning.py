"""The rules of AKS Automatic and node auto-provisioning (NAP, Karpenter): which GPU pools may be NodePools, what an
Automatic cluster takes (its network, tier, system nodes) and what a NAP cluster refuses (autoscaled agent pools), and
what aks-gpu does not carry onto a NodePool yet. Pure: config in, problems (with key paths) out. Each refusal's source
is its entry in components/aks_gpu/data/arm_refusals.yaml."""

from __future__ import annotations

from aks_gpu import naming
from aks_gpu.aks_facts import refusal_tag
from aks_gpu.config.models import GpuPoolConfig, PlatformConfig, StackConfig
from aks_gpu.config.problems import Problem

P = naming.CONFIG_NAMESPACE


def provisioning_rules(config: PlatformConfig) -> list[Problem]:
    problems: list[Problem] = []
    cluster = config.cluster if isinstance(config, StackConfig) else None
    if isinstance(config, StackConfig):
        problems += _automatic_rules(config)
    for index, pool in enumerate(config.gpu_pools):
        path = f"{P}:gpuPools[{index}]"
        nap = pool.effective_provisioning(cluster) == "nap"
        if nap and cluster is not None and not cluster.node_auto_provisioning:
            problems.append(
                Problem(
                    f"{path}.provisioning",
                    "a NAP pool is a Karpenter NodePool, and NodePools exist only on a cluster with node auto-provisioning: "
                    "set cluster.nodeProvisioning Auto or cluster.sku Automatic " + refusal_tag("nap-needs-node-provisioning"),
                )
            )
        if nap:
            problems += _nap_pool_rules(pool, path)
        elif cluster is not None and cluster.node_auto_provisioning and pool.autoscaling:
            problems.append(
                Problem(
                    f"{path}.autoscaling",
                    "a cluster with node auto-provisioning takes fixed-size agent pools only: make the pool provisioning "
                    "nap, or autoscaling false with a count " + refusal_tag("nap-no-autoscaled-agent-pools"),
                )
            )
    return problems


def _automatic_rules(config: StackConfig) -> list[Problem]:
    cluster = config.cluster
    problems: list[Problem] = []
    if cluster.node_auto_provisioning:
        # CPU pools are always autoscaled (CpuPoolConfig): refused beside NAP like any autoscaled agent pool.
        for index, _ in enumerate(config.cpu_pools):
            problems.append(
                Problem(
                    f"{P}:cpuPools[{index}]",
                    "a cluster with node auto-provisioning takes no autoscaled agent pools, and CPU pools are autoscaled: "
                    "node auto-provisioning brings CPU nodes for pending CPU pods itself "
                    + refusal_tag("nap-no-autoscaled-cpu-pools"),
                )
            )
    if cluster.sku != "Automatic":
        return problems
    if cluster.node_provisioning == "Manual":
        problems.append(
            Problem(
                f"{P}:cluster.nodeProvisioning",
                "AKS Automatic manages its nodes with node auto-provisioning; remove nodeProvisioning "
                + refusal_tag("automatic-node-provisioning"),
            )
        )
    if cluster.network_policy != "cilium":
        problems.append(
            Problem(
                f"{P}:cluster.networkPolicy",
                f"{cluster.network_policy!r}: AKS Automatic runs Azure CNI Overlay powered by Cilium; use cilium "
                + refusal_tag("automatic-network-cilium"),
            )
        )
    if cluster.sku_tier == "Free":
        problems.append(
            Problem(
                f"{P}:cluster.skuTier",
                "AKS Automatic clusters are Standard tier; use Standard (or Premium) " + refusal_tag("automatic-free-tier"),
            )
        )
    if "system_pool" in cluster.model_fields_set and not cluster.existing:
        problems.append(
            Problem(
                f"{P}:cluster.systemPool",
                "AKS Automatic runs managed system node pools that AKS creates and scales; remove systemPool "
                + refusal_tag("automatic-managed-system-pool"),
            )
        )
    return problems


def _nap_pool_rules(pool: GpuPoolConfig, path: str) -> list[Problem]:
    """What an agent pool key means that the NodePool and AKSNodeClass aks-gpu builds (azure/node_provisioning.py)
    cannot carry: refused, not silently dropped."""
    problems: list[Problem] = []
    if pool.mig_profile is not None:
        problems.append(
            Problem(
                f"{path}.migProfile",
                "an AKSNodeClass has no GPU instance profile (karpenter.azure.com/v1beta1, data/karpenter_azure.yaml): "
                "MIG on a NAP pool is not supported by aks-gpu; use an agent pool",
            )
        )
    for key, given in (("spot", pool.spot), ("nvmeCache", pool.nvme_cache), ("zones", bool(pool.zones))):
        if given:
            problems.append(Problem(f"{path}.{key}", "not carried onto a NAP pool's NodePool by aks-gpu yet; use an agent pool"))
    if pool.os_disk_type == "Ephemeral":
        problems.append(
            Problem(
                f"{path}.osDiskType",
                "NAP chooses the OS disk kind itself (ephemeral where the VM's disk holds osDiskSizeGb, else managed): "
                "remove osDiskType",
                "warning",
            )
        )
    if not pool.autoscaling:
        problems.append(
            Problem(f"{path}.autoscaling", "a NAP pool always scales (0 to maxCount nodes); remove autoscaling and count")
        )
    if pool.min_count > 0:
        # A NodePool has limits, not a floor: Karpenter makes nodes for pending pods only (karpenter.sh/v1).
        problems.append(Problem(f"{path}.minCount", "a NodePool keeps no nodes without pending pods; remove minCount"))
    return problems
