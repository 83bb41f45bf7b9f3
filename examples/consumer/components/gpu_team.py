"""``GpuTeamCluster``: a team's own AKS cluster with one GPU pool and the team's namespace on it, from aks-gpu's parts.

The library checks each part's args with the same rules as a stack file; this component only wires them: the pool
joins the cluster, the namespace places its pods from the pool's outputs (node selector, tolerations, GPU resource),
and every Kubernetes object goes through the cluster's own provider.
"""

from __future__ import annotations

from typing import TypedDict

import pulumi

from aks_gpu import GpuCluster, GpuNodePool, GpuPoolSpec, GpuWorkloadNamespace


class GpuTeamClusterArgs(TypedDict):
    resource_group: str
    """The resource group of the cluster."""
    team: str
    """The team's namespace, a DNS label."""
    vm_size: str
    """The GPU VM size of the pool, e.g. Standard_NC24ads_A100_v4."""
    max_nodes: int
    """The pool autoscales from zero to this many nodes."""


class GpuTeamCluster(pulumi.ComponentResource):
    cluster: GpuCluster
    pool: GpuNodePool
    namespace: GpuWorkloadNamespace
    kubeconfig: pulumi.Output[str]

    def __init__(self, name: str, args: GpuTeamClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("team:index:GpuTeamCluster", name, None, opts)
        self.cluster = GpuCluster(
            f"{name}-cluster",
            {"cluster": {"resource_group": args["resource_group"], "name": f"aks-{args['team']}"}, "location": "swedencentral"},
            pulumi.ResourceOptions(parent=self),
        )
        pool: GpuPoolSpec = {
            "name": "gpu",
            "vendor": "nvidia",
            "vm_size": args["vm_size"],
            "workload": "training",
            "min_count": 0,
            "max_count": args["max_nodes"],
        }
        self.pool = GpuNodePool(
            f"{name}-gpu",
            {
                "pool": pool,
                "resource_group_name": self.cluster.resource_group_name,
                "cluster_name": self.cluster.cluster_name,
            },
            pulumi.ResourceOptions(parent=self),
        )
        self.namespace = GpuWorkloadNamespace(
            f"{name}-ns",
            {
                "workload": {"name": args["team"], "type": "training", "gpu_quota": args["max_nodes"]},
                "resource_name": self.pool.resource_name,
                "node_selector": self.pool.node_selector,
                "tolerations": self.pool.tolerations,
            },
            pulumi.ResourceOptions(parent=self, provider=self.cluster.provider),
        )
        self.kubeconfig = self.cluster.kubeconfig
        self.register_outputs({"kubeconfig": self.kubeconfig, "namespace": self.namespace.namespace_name})
