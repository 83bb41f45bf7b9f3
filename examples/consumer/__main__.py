"""A team's cluster: one GPU pool and the team's namespace (components/gpu_team.py)."""

import pulumi
from components.gpu_team import GpuTeamCluster

config = pulumi.Config()
team = GpuTeamCluster(
    "vision",
    {
        "resource_group": config.require("resourceGroup"),
        "team": "team-vision",
        "vm_size": "Standard_NC24ads_A100_v4",
        "max_nodes": 2,
    },
)
pulumi.export("namespace", team.namespace.namespace_name)
pulumi.export("kubeconfig", team.kubeconfig)
