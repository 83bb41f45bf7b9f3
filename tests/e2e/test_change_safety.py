"""Change safety, judged by the real engine (issue 41): the program in Azure mode under the real Pulumi CLI (v3.274.1,
tools/go/versions) with the azure-native stand-in (tests/e2e/azure_stand_in.py: the provider's own replace rules,
data/azure_native_rules.yaml), the in-cluster layer on a local kwok cluster. A base stack is deployed (`up`); each
stack-file change is then previewed, and `aksgpu plan --against <pulumi stack export>` must tell it as the preview
does: the action per URN (create, update, replace, delete), `blocked` where the engine refuses to replace a protected
resource, and the order of a replacement (an AgentPool is deleted first).

Every shipped stack also previews cleanly from nothing through the same tier."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import PROJECT_DIR
from tests.e2e.azure_mode import AzureStack, Preview, changed, export_of, preview_of, shipped_config, with_cluster
from tests.e2e.conftest import TOOLS, run_aksgpu, start, stop

STACK = "dev"
AZURE = "$azure-native:"
CHART_UNREACHABLE = "is not a valid chart repository or cannot be reached"
POOL_URN = "azure-native:containerservice:AgentPool::platform-dev-pool"
CLUSTER_URN = "azure-native:containerservice:ManagedCluster::platform-cluster-aks"
SHIPPED = sorted(
    path.name.removeprefix("Pulumi.").removesuffix(".yaml") for path in (PROJECT_DIR / "stacks").glob("Pulumi.*.yaml")
)


def gpu_pool(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A change of the dev stack's GPU pool (the first of aks-gpu:gpuPools)."""

    def apply(config: dict[str, Any]) -> dict[str, Any]:
        def pools(old: list[dict[str, Any]]) -> list[dict[str, Any]]:
            edit(old[0])
            return old

        return changed(config, "aks-gpu:gpuPools", pools)

    return apply


def setting(key: str, **values: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A change of a top-level setting's keys (aks-gpu:cluster networkPolicy=calico)."""
    return lambda config: changed(config, key, lambda old: {**(old or {}), **values})


def system_pool(config: dict[str, Any]) -> dict[str, Any]:
    def edit(cluster: dict[str, Any]) -> dict[str, Any]:
        return {**cluster, "systemPool": {**cluster.get("systemPool", {}), "vmSize": "Standard_D8ds_v5"}}

    return changed(config, "aks-gpu:cluster", edit)


# The stack-file changes of issue 41 on an unprotected stack (the shipped dev stack, deployed once).
SCENARIOS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "vmSize": gpu_pool(lambda pool: pool.update(vmSize="Standard_NC8as_T4_v3")),
    "maxPods": gpu_pool(lambda pool: pool.update(maxPods=60)),
    "osDiskType": gpu_pool(lambda pool: pool.update(osDiskType="Ephemeral")),
    "spot": gpu_pool(lambda pool: pool.update(spot=False)),
    "gpuProfile.driver": setting("aks-gpu:devicePlugin", mode="gpu-operator"),
    "taint": gpu_pool(lambda pool: pool.update(taints=["team=vision:NoSchedule"])),
    "maxCount": gpu_pool(lambda pool: pool.update(maxCount=3)),
    "networkPolicy": setting("aks-gpu:cluster", networkPolicy="calico"),
}


class Plan:
    """`aksgpu plan --against` of a changed stack file: its exit status and changes.json."""

    def __init__(self, root: Path, name: str, config: dict[str, Any], against: Path) -> None:
        folder = root / "plans" / name
        folder.mkdir(parents=True)
        stack_file = folder / f"Pulumi.{STACK}.yaml"
        stack_file.write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
        command = ["plan", "--stack", STACK, "--config-file", str(stack_file), "--out", str(folder / "out")]
        self.done = run_aksgpu(PROJECT_DIR, *command, "--against", str(against), "--accept-replace", timeout=300)
        written = folder / "out" / "changes.json"
        self.changes: list[dict[str, Any]] = json.loads(written.read_text())["changes"] if written.is_file() else []

    def actions(self) -> dict[str, str]:
        return {change["urn"]: change["action"] for change in self.changes}


def blocked_in(preview: Preview) -> set[str]:
    """The URNs the engine refused to replace or delete because they are protected."""
    return set(re.findall(r'unable to (?:replace|delete) resource "(urn:pulumi:[^"]+)"', preview.error or ""))


def agree(plan: Plan, preview: Preview) -> None:
    """The plan tells each change as the preview makes it: the same action for the same URNs."""
    assert plan.done.returncode in (0, 1), plan.done.stdout[-3000:] + plan.done.stderr[-3000:]
    told = plan.actions()
    blocked = {urn for urn, action in told.items() if action == "blocked"}
    if blocked or blocked_in(preview):
        assert blocked == blocked_in(preview), (blocked, (preview.error or "")[-3000:])
        return
    ops = preview.ops()
    if preview.error is not None:
        # The only error a preview may end with here: a Helm chart the engine cannot fetch (no network in this tier;
        # devicePlugin.mode gpu-operator installs NVIDIA's chart). Its in-cluster side is then incomplete, so the
        # Azure resources are compared.
        assert CHART_UNREACHABLE in preview.error, preview.error[-3000:]
        told = {urn: action for urn, action in told.items() if AZURE in urn}
        ops = {urn: action for urn, action in ops.items() if AZURE in urn}
    differing = {
        urn: (told.get(urn), ops.get(urn), preview.diffs.get(urn))
        for urn in set(told) | set(ops)
        if told.get(urn) != ops.get(urn)
    }
    assert not differing, json.dumps(differing, indent=1)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AzureStack, Path]]:
    """The dev stack in Azure mode, deployed once, and its `pulumi stack export`."""
    root = tmp_path_factory.mktemp("change-safety")
    stack = with_cluster(root, STACK, shipped_config(STACK))
    try:
        stack.up()
        yield stack, stack.export(root / "deployed.json")
    finally:
        stack.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_plan_tells_a_change_as_the_engine_makes_it(deployed: tuple[AzureStack, Path], scenario: str) -> None:
    stack, export = deployed
    config = SCENARIOS[scenario](stack.config)
    preview = stack.preview(config)
    agree(Plan(stack.root, scenario, config, export), preview)
    # An AgentPool is replaced delete-first (its name is its identity in the cluster): the program asks it, and the
    # provider's own rule says so too (data/azure_native_rules.yaml).
    for urn, action in preview.ops().items():
        if action == "replace" and "$azure-native:containerservice:AgentPool::" in urn:
            assert preview.delete_first(urn), preview.steps[urn]


def test_a_system_pool_change_is_refused_by_the_plan_and_dropped_by_the_engine(deployed: tuple[AzureStack, Path]) -> None:
    """The program sends cluster.systemPool only when it creates the cluster (ignoreChanges: agentPoolProfiles): the
    engine drops the change without a word, so the plan refuses it (exit 2) with what to do instead."""
    stack, export = deployed
    config = system_pool(stack.config)
    preview = stack.preview(config)
    assert preview.error is None, preview.error[-3000:]
    assert not any(CLUSTER_URN in urn for urn in preview.ops()), preview.ops()
    plan = Plan(stack.root, "systemPool", config, export)
    assert plan.done.returncode == 2, plan.done.stdout[-2000:] + plan.done.stderr[-2000:]
    assert "systemPool" in " ".join(plan.done.stderr.split())


@pytest.fixture(scope="module")
def protected(deployed: tuple[AzureStack, Path]) -> tuple[AzureStack, dict[str, Any], Path]:
    """The same stack with its cluster and GPU pool protected (an `up` that changes only that), and its export. After
    the unprotected scenarios: they need the stack as it was."""
    stack, _ = deployed
    config = setting("aks-gpu:cluster", protect=True)(gpu_pool(lambda pool: pool.update(protect=True))(stack.config))
    stack.up(config)
    return stack, config, stack.export(stack.root / "protected.json")


@pytest.mark.parametrize(
    ("scenario", "protected_urn"), [("vmSize", POOL_URN), ("networkPolicy", CLUSTER_URN)], ids=["pool", "cluster"]
)
def test_a_protected_resource_the_engine_would_replace_is_blocked(
    protected: tuple[AzureStack, dict[str, Any], Path], scenario: str, protected_urn: str
) -> None:
    stack, base, export = protected
    config = SCENARIOS[scenario](base)
    preview = stack.preview(config)
    assert any(protected_urn in urn for urn in blocked_in(preview)), (preview.error or "")[-3000:]
    plan = Plan(stack.root, f"protected-{scenario}", config, export)
    assert plan.done.returncode == 1
    agree(plan, preview)


@pytest.mark.parametrize("stack", SHIPPED)
def test_every_shipped_stack_previews_cleanly_in_azure_mode(stack: str, tmp_path: Path) -> None:
    """From nothing: every resource a create, no error (the program in Azure mode, its own config)."""
    azure = AzureStack(tmp_path, stack, shipped_config(stack))
    try:
        preview = azure.preview()
    finally:
        azure.close()
    assert preview.error is None, preview.error[-3000:]
    assert preview.steps and set(preview.ops().values()) == {"create"}


def test_in_given_cluster_mode_the_kubernetes_provider_judges_the_objects(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`aksgpu local up` deploys the dev stack in the given-cluster mode; a change of the pool's time-slicing replicas
    changes the device plugin's ConfigMap data, which the real Kubernetes provider replaces (enableConfigMapMutable is
    off): the plan says replace for it too, and the same for every other object."""
    from aks_gpu.local.control_plane import LocalPaths
    from aks_gpu.local.engine import PulumiRun
    from aks_gpu.program import run_platform

    cluster = start(tmp_path_factory, STACK)
    try:
        paths = LocalPaths(cluster.project, STACK)
        deployed = yaml.safe_load((paths.workspace / f"Pulumi.{STACK}.yaml").read_text(encoding="utf-8"))["config"]
        with PulumiRun(paths, TOOLS, deployed, run_platform).stack() as stack:
            export = export_of(stack, cluster.project / "deployed.json")
        config = gpu_pool(lambda pool: pool.update(timeSlicingReplicas=2))(deployed)
        with PulumiRun(paths, TOOLS, config, run_platform).stack() as stack:
            preview = preview_of(stack)
        assert preview.error is None, preview.error[-3000:]
        replaced = [urn for urn, action in preview.ops().items() if action == "replace"]
        assert any("kubernetes:core/v1:ConfigMap::" in urn for urn in replaced), preview.ops()
        agree(Plan(cluster.project, "given-cluster", config, export), preview)
    finally:
        stop(cluster)
