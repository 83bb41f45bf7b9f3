"""The offline plan runs resource hooks as the engine runs them: the real ``__main__.py``, its device plugin
DaemonSet's post-deploy validation hook called back over gRPC after the DaemonSet is created, reading a (fake)
cluster on 127.0.0.1 with the kubeconfig the cluster's credentials call returns. ``onDeploy: fail`` fails the plan
with the engine's own wording, ``warn`` warns and succeeds."""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterator
from typing import Any

import pytest
from pulumi.runtime.mocks import MockCallArgs

from components.kube.plugin_targets import plugin_targets
from components.plan import HookFailedError, PlanMocks, PlanResult, run_program
from components.validation.snapshot import ClusterSnapshot
from tests.conftest import PROJECT_DIR, raw_stack, stack_model
from tests.validation.fake_apiserver import FakeApiServer, FakeCluster
from tests.validation.snapshots import edited, fixture_text, healthy_snapshot, node_name

DAEMONSET = "kubernetes:apps/v1:DaemonSet"
DRIVER_NOT_LOADED = "60_error_nvidia-smi_failed_gpu-operator_driver_pod.txt"


class FakeClusterMocks(PlanMocks):
    """``PlanMocks`` whose cluster credentials point at the fake API server (a token kubeconfig, no kubelogin)."""

    def __init__(self, kubeconfig: str) -> None:
        super().__init__()
        self.kubeconfig = kubeconfig

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        if args.token == "azure-native:containerservice:listManagedClusterUserCredentials":
            encoded = base64.b64encode(self.kubeconfig.encode()).decode()
            return {"kubeconfigs": [{"name": "clusterUser", "value": encoded}]}, []
        return super().call(args)


@functools.cache
def dev_snapshot(broken: bool) -> ClusterSnapshot:
    """The dev stack deployed with two nodes in its pool; broken: the second node's driver is not loaded."""
    model = stack_model("dev")
    snapshot = healthy_snapshot(model, plugin_targets(model), {"dev": 2})
    if broken:
        snapshot = edited(snapshot)
        snapshot.smi[node_name("dev", 1)] = fixture_text(DRIVER_NOT_LOADED)
    return snapshot


@pytest.fixture
def fake_cluster(request: pytest.FixtureRequest) -> Iterator[FakeApiServer]:
    with FakeApiServer(FakeCluster.from_snapshot(dev_snapshot(broken=request.param == "broken"))) as server:
        yield server


def plan_dev(server: FakeApiServer, on_deploy: str) -> PlanResult:
    raw = raw_stack("dev")
    raw["aks-gpu:validation"] = {**raw.get("aks-gpu:validation", {}), "onDeploy": on_deploy, "retries": 0}
    return run_program(PROJECT_DIR, "dev", raw, mocks=FakeClusterMocks(server.kubeconfig_text()), run_hooks=True)


@pytest.mark.parametrize("fake_cluster", ["broken"], indirect=True)
def test_on_deploy_fail_fails_the_plan_end_to_end(fake_cluster: FakeApiServer) -> None:
    with pytest.raises(HookFailedError) as caught:
        plan_dev(fake_cluster, "fail")
    [run] = caught.value.runs
    assert run.kind == "after_create" and run.urn.endswith(f"{DAEMONSET}::dev-gpu-daemonset-nvidia-device-plugin-daemonset")
    message = str(caught.value)
    assert message.startswith(f"after hook {run.hook!r} failed: [dev-gpu-daemonset-nvidia-device-plugin-daemonset] ")
    assert "aks-gpu post-deploy validation FAILED" in message
    assert f"FAIL smi-error dev/{node_name('dev', 1)}: driver_not_loaded" in message
    # The hook read the cluster: both nodes' plugin pods were exec'd into.
    assert fake_cluster.stats.exec_attempts == {node_name("dev", 0): 1, node_name("dev", 1): 1}


@pytest.mark.parametrize("fake_cluster", ["broken"], indirect=True)
def test_on_deploy_warn_warns_and_the_plan_succeeds(fake_cluster: FakeApiServer) -> None:
    result = plan_dev(fake_cluster, "warn")
    [run] = result.hook_runs
    assert run.error == ""
    [report] = [w for w in result.warnings if "post-deploy validation" in w]
    assert "validation FAILED" in report and f"dev/{node_name('dev', 1)}" in report
    assert result.by_type(DAEMONSET)


@pytest.mark.parametrize("fake_cluster", ["healthy"], indirect=True)
def test_a_healthy_cluster_passes_the_hook(fake_cluster: FakeApiServer) -> None:
    result = plan_dev(fake_cluster, "fail")
    assert [(run.kind, run.error) for run in result.hook_runs] == [("after_create", "")]
    assert not [w for w in result.warnings if "post-deploy validation" in w]
