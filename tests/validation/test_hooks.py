"""The deploy-time validation hook: what ``pulumi up`` does after the device plugin is created or updated,
for ``validation.onDeploy`` fail, warn and off."""

from __future__ import annotations

import asyncio
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from aks_gpu.cluster.probe import ProbeError
from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.resolved.targets import PluginTarget, plugin_targets
from aks_gpu.validation.hooks import (
    DeployValidationError,
    hook_binding,
    pools_validated_by,
    pools_validated_by_release,
    report_outcome,
    run_deploy_validation,
    validation_hook,
    validation_hooks,
)
from tests.cluster.fake_apiserver import ExecBehaviour, FakeApiServer, FakeCluster
from tests.cluster.snapshots import edited, fixture_text, healthy_snapshot, node_name, nodes_in_every_pool
from tests.conftest import MockHarness, raw_stack, stack_model

KUBECONFIG = "apiVersion: v1\nkind: Config\n# the stack's kubeconfig\n"
DRIVER_NOT_LOADED = "60_error_nvidia-smi_failed_gpu-operator_driver_pod.txt"


@pytest.fixture(scope="module")
def healthy(model: PlatformModel, targets: dict[str, PluginTarget]) -> ClusterSnapshot:
    """Two nodes in every pool: none is left "not checked: no nodes yet", which the hook would warn of."""
    return healthy_snapshot(model, targets, nodes_in_every_pool(model, 2))


@pytest.fixture(scope="module")
def broken(healthy: ClusterSnapshot) -> ClusterSnapshot:
    """One training node whose driver is not loaded: nvidia-smi fails there."""
    snapshot = edited(healthy)
    snapshot.smi[node_name("train", 1)] = fixture_text(DRIVER_NOT_LOADED)
    snapshot.exec_errors[node_name("train", 1)] = "command exited with code 9"
    return snapshot


class FakeCollector:
    """Stands in for the live probe: returns a snapshot (or raises) and remembers how it was called."""

    def __init__(self, snapshot: ClusterSnapshot | None = None, error: Exception | None = None) -> None:
        self.snapshot, self.error = snapshot, error
        self.calls: list[dict[str, Any]] = []

    def __call__(self, model: PlatformModel, targets: Any, **kwargs: Any) -> ClusterSnapshot:
        self.calls.append({"pools": [p.name for p in model.pools], "targets": sorted(targets), **kwargs})
        if self.error is not None:
            raise self.error
        assert self.snapshot is not None
        return self.snapshot


# ---------------------------------------------------------------- run_deploy_validation


def test_a_healthy_cluster_passes_with_the_stack_settings(model, targets, healthy) -> None:
    collector = FakeCollector(healthy)
    outcome = run_deploy_validation(model, targets, KUBECONFIG, "fail", collect=collector)
    assert outcome.passed
    assert outcome.report.startswith("aks-gpu post-deploy validation passed: 0 failed")
    settings = model.config.validation
    assert collector.calls == [
        {
            "pools": ["train", "infer", "inferfull"],
            "targets": ["infer", "inferfull", "train"],
            "kubeconfig_text": KUBECONFIG,
            "concurrency": settings.concurrency,
            "timeout_s": float(settings.exec_timeout_seconds),
            "retries": settings.retries,
        }
    ]


def test_a_failed_check_fails_the_outcome_and_the_report_names_node_and_check(model, targets, broken) -> None:
    outcome = run_deploy_validation(model, targets, KUBECONFIG, "fail", collect=FakeCollector(broken))
    assert not outcome.passed
    assert "validation FAILED" in outcome.report
    assert f"FAIL smi-error train/{node_name('train', 1)}: driver_not_loaded" in outcome.report
    assert KUBECONFIG not in outcome.report


def without_smi(snapshot: ClusterSnapshot, simulated: bool) -> ClusterSnapshot:
    """Every node's SMI output gone, as a fresh `aksgpu local up` reads its nodes: kwok answers no exec."""
    gone = edited(snapshot)
    for node in gone.nodes:
        if simulated:
            node.setdefault("metadata", {}).setdefault("annotations", {})["kwok.x-k8s.io/node"] = "fake"
        gone.exec_errors[node["metadata"]["name"]] = "no exec found for container"
    gone.smi.clear()
    return gone


def test_simulated_nodes_without_smi_output_are_not_checked_rather_than_failed(model, targets, healthy) -> None:
    outcome = run_deploy_validation(model, targets, KUBECONFIG, "fail", collect=FakeCollector(without_smi(healthy, True)))
    assert outcome.passed, outcome.report
    assert outcome.report.startswith("aks-gpu post-deploy validation passed: 0 failed")
    assert f"{len(healthy.nodes)} GPU node(s) not checked: simulated node" in outcome.report.splitlines()[0]
    # A node that is not simulated and gives no output still fails smi-error.
    real = run_deploy_validation(model, targets, KUBECONFIG, "fail", collect=FakeCollector(without_smi(healthy, False)))
    assert not real.passed and "FAIL smi-error" in real.report and "simulated" not in real.report


def test_an_unreadable_cluster_fails_the_outcome(model, targets) -> None:
    outcome = run_deploy_validation(
        model,
        targets,
        KUBECONFIG,
        "warn",
        collect=FakeCollector(error=ProbeError("cannot read the cluster at https://x: HTTP 403")),
    )
    assert not outcome.passed and "HTTP 403" in outcome.report
    outcome = run_deploy_validation(model, targets, None, "fail", collect=FakeCollector(error=AssertionError("not called")))
    assert not outcome.passed and "kubeconfig had not resolved" in outcome.report


SECRET_TOKEN = "zq9f8e7d6c5b4a39281706t0k"


@pytest.mark.parametrize(
    "kubeconfig",
    [
        f"apiVersion: v1\nusers:\n- name: admin\n  user: {{token: {SECRET_TOKEN}, : }}\n",  # a YAML error on its line
        f"users:\n- name: admin\n  user:\n    token: {SECRET_TOKEN}\n   bad: indent\n",
        f'{{"users": [{{"name": "admin", "user": {{"token": "{SECRET_TOKEN}"}}}}], "contexts": "{SECRET_TOKEN}"}}',
    ],
)
def test_a_broken_kubeconfig_on_the_hook_path_never_echoes_its_content(model, targets, kubeconfig: str) -> None:
    outcome = run_deploy_validation(model, targets, kubeconfig, "fail")  # the real probe
    assert not outcome.passed and "could not read the cluster" in outcome.report
    assert SECRET_TOKEN not in outcome.report and SECRET_TOKEN[:10] not in outcome.report
    with pytest.raises(DeployValidationError) as error:
        report_outcome(outcome)
    assert SECRET_TOKEN not in str(error.value)


def test_a_bug_in_the_probe_fails_the_step_with_one_line_and_no_secret(model, targets) -> None:
    collector = FakeCollector(error=RuntimeError(f"Invalid header value b'Bearer {SECRET_TOKEN}'"))
    outcome = run_deploy_validation(model, targets, KUBECONFIG, "fail", collect=collector)
    assert not outcome.passed
    assert "could not run: internal error: RuntimeError at" in outcome.report and "file an issue" in outcome.report
    assert SECRET_TOKEN not in outcome.report and "\n" not in outcome.report


def test_a_hook_scoped_to_one_pool_checks_only_that_pool(model, targets, broken) -> None:
    collector = FakeCollector(broken)
    outcome = run_deploy_validation(model, targets, KUBECONFIG, "fail", collect=collector, pools=["infer"])
    assert outcome.passed  # the broken node is in train
    assert collector.calls[0]["pools"] == ["infer"] and collector.calls[0]["targets"] == ["infer"]
    assert {r.pool for r in outcome.results} == {"infer"}
    with pytest.raises(ValueError, match="no such GPU pool: gpu9"):
        run_deploy_validation(model, targets, KUBECONFIG, "fail", collect=collector, pools=["gpu9"])


def test_long_reports_list_the_first_failures_and_count_the_rest(model, targets, healthy) -> None:
    many = healthy_snapshot(model, targets, {"train": 30})
    many = edited(many)
    for index in range(30):
        many.smi[node_name("train", index)] = fixture_text(DRIVER_NOT_LOADED)
    outcome = run_deploy_validation(model, targets, KUBECONFIG, "fail", collect=FakeCollector(many), pools=["train"])
    assert outcome.report.count("  FAIL ") == 20
    assert "... and 10 more (FAIL)" in outcome.report


# ---------------------------------------------------------------- the hook itself


def build_hook(harness: MockHarness, model, targets, mode, collector, kubeconfig: str = KUBECONFIG) -> Any:
    """Create the hook while a (mocked) Pulumi program runs, bound to a Kubernetes object as the platform
    binds it to the device plugin DaemonSet; the kubeconfig is a secret Output, as GpuCluster gives it."""
    made: list[Any] = []

    def program() -> None:
        hook = validation_hook("prod-plugin", model, targets, pulumi.Output.secret(kubeconfig), mode, collect=collector)
        made.append(hook)
        k8s.core.v1.ConfigMap(
            "prod-plugin-stand-in",
            metadata={"name": "stand-in", "namespace": "gpu-resources"},
            data={"k": "v"},
            opts=pulumi.ResourceOptions(hooks=hook_binding(hook)),
        )

    harness.run(program, stack="prod")
    return made[0]


def hook_args() -> pulumi.ResourceHookArgs:
    return pulumi.ResourceHookArgs(
        urn="urn:pulumi:prod::aks-gpu::kubernetes:apps/v1:DaemonSet::prod-plugin-train",
        id="gpu-resources/nvidia-device-plugin-daemonset",
        name="prod-plugin-train",
        type="kubernetes:apps/v1:DaemonSet",
        new_inputs={},
        new_outputs={},
    )


def call(hook: Any) -> None:
    result = hook.callback(hook_args())
    if result is not None:
        asyncio.run(result)


def test_off_builds_no_hook(harness, model, targets) -> None:
    made: list[Any] = []
    # Outputs only inside a (mocked) program: one made outside leaves the runtime unable to run the next.
    harness.run(lambda: made.append(validation_hook("prod-plugin", model, targets, pulumi.Output.secret(KUBECONFIG), "off")))
    assert made == [None]
    assert hook_binding(None) is None


def test_fail_mode_raises_the_report_and_reads_the_stack_kubeconfig(harness, model, targets, broken) -> None:
    collector = FakeCollector(broken)
    hook = build_hook(harness, model, targets, "fail", collector)
    assert hook.name == "prod-plugin-validate"
    with pytest.raises(DeployValidationError) as raised:
        call(hook)
    message = str(raised.value)
    assert message.startswith("[prod-plugin-train] aks-gpu post-deploy validation FAILED")
    assert f"FAIL smi-error train/{node_name('train', 1)}" in message
    assert "`aksgpu validate --stack prod`" in message
    assert collector.calls[0]["kubeconfig_text"] == KUBECONFIG  # the secret's plain text, resolved at program time


def test_warn_mode_logs_the_report_and_lets_the_update_through(harness, model, targets, broken, monkeypatch) -> None:
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: warnings.append(message))
    hook = build_hook(harness, model, targets, "warn", FakeCollector(broken))
    call(hook)  # no exception: the step succeeds
    assert len(warnings) == 1 and "validation FAILED" in warnings[0]


def test_a_passing_validation_is_only_noted(harness, model, targets, healthy, monkeypatch) -> None:
    notes: list[str] = []
    monkeypatch.setattr(pulumi.log, "info", lambda message, *a, **k: notes.append(message))
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: pytest.fail(f"unexpected warning: {message}"))
    call(build_hook(harness, model, targets, "fail", FakeCollector(healthy)))
    assert len(notes) == 1 and "validation passed" in notes[0]


def test_the_hook_probes_a_live_cluster_end_to_end(harness) -> None:
    """No fake collector: the hook's own probe reads a (fake) API server with the kubeconfig from the Output,
    with the stack's validation settings (a 1 s exec timeout, no retries, so the hung node is quick)."""
    validation = {**raw_stack("prod")["aks-gpu:validation"], "execTimeoutSeconds": 1, "retries": 0}
    model = validate_stack({**raw_stack("prod"), "aks-gpu:validation": validation}, "test").model
    targets = plugin_targets(model)
    cluster = FakeCluster.from_snapshot(healthy_snapshot(model, targets, {"train": 2, "infer": 2}))
    cluster.behaviours[node_name("infer", 0)] = ExecBehaviour(hang=True)
    with FakeApiServer(cluster) as server:
        hook = build_hook(harness, model, targets, "fail", None, kubeconfig=server.kubeconfig_text())
        with pytest.raises(DeployValidationError, match=r"timed out after 1 s \(after 1 attempt\)"):
            call(hook)
    assert server.stats.exec_attempts == {node_name(pool, i): 1 for pool in ("train", "infer") for i in range(2)}


def test_warnings_alone_pass_but_are_shown(harness, model, targets, healthy, monkeypatch) -> None:
    cordoned = edited(healthy)
    next(n for n in cordoned.nodes if n["metadata"]["name"] == node_name("infer", 1))["spec"]["unschedulable"] = True
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: warnings.append(message))
    call(build_hook(harness, model, targets, "fail", FakeCollector(cordoned)))  # fail mode: a warning does not fail
    assert len(warnings) == 1
    assert f"warn gpu-schedulable infer/{node_name('infer', 1)}" in warnings[0] and "cordoned" in warnings[0]


# ---------------------------------------------------------------- wiring onto the device plugin resources


def operator_prod() -> PlatformModel:
    raw = {**raw_stack("prod"), "aks-gpu:devicePlugin": {"mode": "gpu-operator"}}
    return validate_stack(raw, "test").model


@pytest.mark.parametrize("stack", ["prod", "dev", "amd", "prod-operator"])
def test_every_pool_is_validated_by_exactly_one_plugin_resource(stack: str) -> None:
    """Each pool's validation hangs on the resource that creates the pods it execs into: our DaemonSet whose
    selector is the pool's target labels, else the GPU Operator release that creates them."""
    from aks_gpu.kube.device_plugin import plugin_manifests

    model = operator_prod() if stack == "prod-operator" else stack_model(stack)
    targets = plugin_targets(model)
    daemonsets = [m for m in plugin_manifests(model) if m["kind"] == "DaemonSet"]
    validated: list[str] = []
    for manifest in daemonsets:
        pools = pools_validated_by(manifest, targets)
        for pool in pools:
            assert manifest["spec"]["selector"]["matchLabels"] == targets[pool].pod_labels
        validated += pools
    for vendor in model.vendors:
        validated += pools_validated_by_release(targets, vendor, daemonsets)
    assert sorted(validated) == sorted(p.name for p in model.pools)


def test_only_operator_pools_hang_on_the_release() -> None:
    from aks_gpu.kube.device_plugin import plugin_manifests

    model = operator_prod()
    daemonsets = [m for m in plugin_manifests(model) if m["kind"] == "DaemonSet"]
    assert pools_validated_by_release(plugin_targets(model), "nvidia", daemonsets) == ("train", "infer", "inferfull")
    prod = stack_model("prod")
    prod_daemonsets = [m for m in plugin_manifests(prod) if m["kind"] == "DaemonSet"]
    assert pools_validated_by_release(plugin_targets(prod), "nvidia", prod_daemonsets) == ()


def test_the_hook_factory_gives_one_hook_per_set_of_pools(harness, model, targets, broken) -> None:
    collector = FakeCollector(broken)
    bindings: dict[str, Any] = {}

    def program() -> None:
        factory = validation_hooks("prod", model, targets, pulumi.Output.secret(KUBECONFIG), "fail", collect=collector)
        for pool in ("train", "infer"):
            binding = factory([pool])
            bindings[pool] = binding
            k8s.core.v1.ConfigMap(
                f"stand-in-{pool}", metadata={"name": pool}, data={"k": "v"}, opts=pulumi.ResourceOptions(hooks=binding)
            )
        assert factory(["train"]) is bindings["train"]  # asked again: the same hook, not a second one named alike
        assert factory([]) is None

    harness.run(program, stack="prod")
    train, infer = bindings["train"].after_create[0], bindings["infer"].after_update[0]
    assert (train.name, infer.name) == ("prod-validate-train", "prod-validate-infer")
    call(infer)  # the broken node is in train: the infer hook passes
    with pytest.raises(DeployValidationError, match="FAIL smi-error train/"):
        call(train)
    assert [c["pools"] for c in collector.calls] == [["infer"], ["train"]]


def test_off_gives_a_factory_of_no_hooks(harness, model, targets) -> None:
    made: list[Any] = []
    harness.run(lambda: made.append(validation_hooks("prod", model, targets, pulumi.Output.secret(KUBECONFIG), "off")))
    assert made[0](["train"]) is None
