"""The offline plan runs resource hooks as the engine runs them: the real ``__main__.py``, its device plugin
DaemonSet's post-deploy validation hook called back over gRPC after the DaemonSet is created, reading a (fake)
cluster on 127.0.0.1 with the kubeconfig the cluster's credentials call returns. ``onDeploy: fail`` fails the plan
with the engine's own wording, ``warn`` warns and succeeds."""

from __future__ import annotations

import base64
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from pulumi.runtime.mocks import MockCallArgs

from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.mock_engine import FAKE_TENANT, HookFailedError, PlanMocks, PlanResult, run_mocked, run_program
from aks_gpu.resolved.targets import plugin_targets
from tests.cluster.fake_apiserver import FakeApiServer, FakeCluster
from tests.cluster.snapshots import edited, fixture_text, healthy_snapshot, node_name
from tests.conftest import PROJECT_DIR, raw_stack, stack_model

DAEMONSET = "kubernetes:apps/v1:DaemonSet"
DRIVER_NOT_LOADED = "60_error_nvidia-smi_failed_gpu-operator_driver_pod.txt"


# What the fake kubelogin prints: an ExecCredential, as kubelogin get-token does for the Kubernetes client.
# https://kubernetes.io/docs/reference/access-authn-authz/authentication/#input-and-output-formats
FAKE_KUBELOGIN = """#!{python}
import json, sys
with open({log!r}, "a", encoding="utf-8") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {{"token": "fake-token"}}}}))
"""


def aks_kubeconfig(server: str) -> str:
    """The exec kubeconfig listClusterUserCredentials returns for an Entra ID cluster (the shape of
    tests/fixtures/aks/), pointing at ``server``: device-code login until the platform rewrites it."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "kubelogin",
            "args": ["get-token", "--environment", "AzurePublicCloud", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630",
                     "--client-id", "80faf920-1908-4b52-b5ef-a8e7bedfc67a", "--tenant-id", FAKE_TENANT, "--login", "devicecode"],
            "interactiveMode": "IfAvailable",
            "provideClusterInfo": False,
        }
    }
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "aks", "cluster": {"server": server}}],
            "contexts": [{"name": "aks", "context": {"cluster": "aks", "user": "clusterUser_aks"}}],
            "current-context": "aks",
            "users": [{"name": "clusterUser_aks", "user": user}],
        }
    )


@pytest.fixture
def kubelogin_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``kubelogin`` first on PATH; the file it returns lists the arguments of every call."""
    log = tmp_path / "kubelogin-calls.txt"
    script = tmp_path / "bin" / "kubelogin"
    script.parent.mkdir()
    script.write_text(FAKE_KUBELOGIN.format(python=sys.executable, log=str(log)), encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return log


class FakeClusterMocks(PlanMocks):
    """``PlanMocks`` whose cluster credentials are AKS's exec kubeconfig for the fake API server."""

    def __init__(self, kubeconfig: str, preview: bool = False) -> None:
        super().__init__(preview=preview)
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


def plan_dev(server: FakeApiServer, on_deploy: str, preview: bool = False) -> PlanResult:
    raw = raw_stack("dev")
    raw["aks-gpu:validation"] = {**raw.get("aks-gpu:validation", {}), "onDeploy": on_deploy, "retries": 0}
    mocks = FakeClusterMocks(aks_kubeconfig(server.url), preview=preview)
    return run_program(PROJECT_DIR, "dev", raw, mocks=mocks, preview=preview, run_hooks=True)


@pytest.mark.parametrize("fake_cluster", ["broken"], indirect=True)
def test_on_deploy_fail_fails_the_plan_end_to_end(fake_cluster: FakeApiServer, kubelogin_calls: Path) -> None:
    with pytest.raises(HookFailedError) as caught:
        plan_dev(fake_cluster, "fail")
    [run] = caught.value.runs
    assert run.kind == "after_create" and run.urn.endswith(f"{DAEMONSET}::platform-gpu-daemonset-nvidia-device-plugin-daemonset")
    message = str(caught.value)
    assert message.startswith(f"after hook {run.hook!r} failed: [platform-gpu-daemonset-nvidia-device-plugin-daemonset] ")
    assert "aks-gpu post-deploy validation FAILED" in message
    assert f"FAIL smi-error dev/{node_name('dev', 1)}: driver_not_loaded" in message
    # The hook read the cluster: both nodes' plugin pods were exec'd into, with a token from kubelogin in the
    # non-interactive mode the platform wrote into the kubeconfig (never device code).
    assert fake_cluster.stats.exec_attempts == {node_name("dev", 0): 1, node_name("dev", 1): 1}
    calls = kubelogin_calls.read_text(encoding="utf-8").splitlines()
    assert calls and set(calls) == {"get-token --login azurecli --server-id 6dae42f8-4368-4678-94ff-3960e28e3630"}


@pytest.mark.parametrize("fake_cluster", ["broken"], indirect=True)
def test_on_deploy_warn_warns_and_the_plan_succeeds(fake_cluster: FakeApiServer, kubelogin_calls: Path) -> None:
    result = plan_dev(fake_cluster, "warn")
    [run] = result.hook_runs
    assert run.error == ""
    [report] = [w for w in result.warnings if "post-deploy validation" in w]
    assert "validation FAILED" in report and f"dev/{node_name('dev', 1)}" in report
    assert result.by_type(DAEMONSET)


@pytest.mark.parametrize("fake_cluster", ["healthy"], indirect=True)
def test_a_healthy_cluster_passes_the_hook(fake_cluster: FakeApiServer, kubelogin_calls: Path) -> None:
    result = plan_dev(fake_cluster, "fail")
    assert [(run.kind, run.error) for run in result.hook_runs] == [("after_create", "")]
    assert not [w for w in result.warnings if "post-deploy validation" in w]


@pytest.mark.parametrize("fake_cluster", ["broken"], indirect=True)
def test_hooks_do_not_run_in_a_preview(fake_cluster: FakeApiServer, kubelogin_calls: Path) -> None:
    # pulumi preview runs a hook only if it was registered with on_dry_run; the validation hook is not.
    result = plan_dev(fake_cluster, "fail", preview=True)
    assert result.hook_runs == [] and result.by_type(DAEMONSET)
    assert fake_cluster.stats.exec_attempts == {} and not kubelogin_calls.exists()


# ---------------------------------------------------------------- which resources' after hooks run when


def test_a_custom_resources_after_hook_runs_and_a_components_is_refused_not_run_early() -> None:
    # The engine runs a custom resource's after hooks when its step completes, a component's only at its
    # RegisterResourceOutputs (pulumi/pulumi pkg/resource/deploy/step.go): the offline plan runs the first and refuses
    # the second, instead of calling it before the component's children exist.
    called: list[str] = []

    def record(args: pulumi.ResourceHookArgs) -> None:
        called.append(args.urn)

    def custom_program() -> None:
        hook = pulumi.ResourceHook("record", record)
        k8s.core.v1.ConfigMap(
            "cm", data={"a": "b"}, opts=pulumi.ResourceOptions(hooks=pulumi.ResourceHookBinding(after_create=[hook]))
        )

    result = run_mocked(custom_program, "dev", run_hooks=True)
    assert [(run.hook, run.kind, run.error) for run in result.hook_runs] == [("record", "after_create", "")]
    assert len(called) == 1 and called[0].endswith("kubernetes:core/v1:ConfigMap::cm")

    def component_program() -> None:
        hook = pulumi.ResourceHook("record", record)
        pulumi.ComponentResource(
            "test:index:Thing", "thing", None, pulumi.ResourceOptions(hooks=pulumi.ResourceHookBinding(after_create=[hook]))
        )

    called.clear()
    with pytest.raises(HookFailedError, match="after hooks of custom resources only"):
        run_mocked(component_program, "dev", run_hooks=True)
    assert called == []
