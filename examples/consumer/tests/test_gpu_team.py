"""Unit tests of the team's component, written as Pulumi's testing guide says, with the mocks aks-gpu ships for
what its components ask Azure (https://www.pulumi.com/docs/iac/guides/testing/unit/)."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from aks_gpu.testing import AksGpuMocks


class TeamMocks(AksGpuMocks):
    """The library's mocks, extended as a consumer extends them: every resource registered is kept, to be looked at
    once the program ran. What this class does not answer itself goes to ``super()``."""

    def __init__(self) -> None:
        super().__init__()
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.resources.append(args)
        return super().new_resource(args)


mocks = TeamMocks()
pulumi.runtime.set_mocks(mocks, preview=False)

from components.gpu_team import GpuTeamCluster, GpuTeamClusterArgs  # noqa: E402 - after the mocks, as the guide says

ARGS: GpuTeamClusterArgs = {
    "resource_group": "rg-vision",
    "team": "team-vision",
    "vm_size": "Standard_NC24ads_A100_v4",
    "max_nodes": 2,
}
OUTPUTS = ("kubeconfig", "cluster", "selector", "tolerations", "resource", "placement")


def built(name: str, args: GpuTeamClusterArgs = ARGS) -> tuple[dict[str, Any], dict[str, pulumi.runtime.MockResourceArgs]]:
    """Build a GpuTeamCluster and wait for everything it registers: its outputs, and its resources by type."""
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> pulumi.Output[None]:
        team = GpuTeamCluster(name, args)
        placed = pulumi.Output.all(
            team.kubeconfig,
            team.cluster.cluster_name,
            team.pool.node_selector,
            team.pool.tolerations,
            team.pool.resource_name,
            team.namespace.pod_placement,
        )
        return placed.apply(lambda values: outputs.update(zip(OUTPUTS, values, strict=True)))

    program()  # returns once every registration of the program is done
    return outputs, {r.typ: r for r in mocks.resources if r.name.startswith(f"{name}-")}


def test_the_namespace_places_gpu_pods_on_the_teams_pool() -> None:
    outputs, _ = built("placement")
    assert outputs["selector"] == {"aks-gpu/pool": "gpu"}
    assert outputs["placement"]["nodeSelector"] == outputs["selector"]
    assert outputs["placement"]["tolerations"] == outputs["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in outputs["tolerations"]
    assert outputs["resource"] == "nvidia.com/gpu"


def test_the_cluster_gives_an_exec_kubeconfig_and_the_pool_joins_it() -> None:
    outputs, resources = built("joined")
    assert "command: kubelogin" in outputs["kubeconfig"] and "devicecode" not in outputs["kubeconfig"]
    assert outputs["cluster"] == "aks-team-vision"
    pool = resources["azure-native:containerservice:AgentPool"]
    assert pool.inputs["resourceName"] == "aks-team-vision"
    assert pool.inputs["vmSize"] == "Standard_NC24ads_A100_v4"
    assert pool.inputs["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]


def test_the_namespace_quota_is_in_the_pools_gpu_resource() -> None:
    built("quota")
    # The namespace has two quotas: its GPU quota and the one that keeps system priority classes out.
    hard = [r.inputs["spec"]["hard"] for r in mocks.resources if r.name.startswith("quota-") and r.typ.endswith("ResourceQuota")]
    assert [quota["requests.nvidia.com/gpu"] for quota in hard if "requests.nvidia.com/gpu" in quota] == ["2"]


def test_a_bad_setting_is_refused_with_its_key_and_no_pool_is_made() -> None:
    # The library checks its args with the stack file's rules: a pool cannot scale to -1 nodes.
    with pytest.raises(pulumi.InputPropertiesError) as caught:
        built("refused", {**ARGS, "max_nodes": -1})
    assert "pool.maxCount" in str(caught.value)
    pools = [r for r in mocks.resources if r.typ == "azure-native:containerservice:AgentPool"]
    assert not [r for r in pools if r.name.startswith("refused-")]
