"""`aksgpu plan` tells each change of a stack file as the engine will make it (issue 41): against the previous plan in
--out or a `pulumi stack export` (--against), in changes.json and a table, with the exit codes of the contract."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.aks_facts import immutable_fields, kubernetes_replace_rules
from aks_gpu.azure.cluster import MANAGED_CLUSTER_TYPE as MANAGED_CLUSTER
from aks_gpu.azure.node_pool import AGENT_POOL_TYPE as AGENT_POOL
from aks_gpu.cli import main
from aks_gpu.cli.deployed_state import SECRET_SIG, SIG_KEY, previous_plan_state
from aks_gpu.mock_engine import FAKE_SUBSCRIPTION, SECRET, PlanResult, run_program
from aks_gpu.mock_engine.changes import (
    KUBERNETES_PROVIDER,
    Change,
    ChangeSet,
    Deployed,
    plan_changes,
)
from tests.cli.test_table_widths import terminal_width
from tests.conftest import PROJECT_DIR, planned_result, raw_stack

# ---------------------------------------------------------------- helpers


def state_of(result: PlanResult, **protect: bool) -> Deployed:
    """``result`` as the deployed state (a previous plan), with some pools' protection as given (pool name -> flag)."""
    document = json.loads(json.dumps(result.to_json()))
    for record in document["resources"]:
        pool = record["inputs"].get("agentPoolName") if record["type"] == AGENT_POOL else None
        if pool in protect:
            record["options"]["protect"] = protect[pool]
    return previous_plan_state(document, "before")


def with_pool_inputs(deployed: Deployed, pool: str, **inputs: Any) -> Deployed:
    """``deployed`` with one pool's inputs changed (what it was deployed with, before the stack file changed)."""
    resources = dict(deployed.resources)
    for urn, resource in resources.items():
        if resource.type == AGENT_POOL and resource.inputs.get("agentPoolName") == pool:
            resources[urn] = type(resource)(urn, resource.type, {**resource.inputs, **inputs}, resource.protect, resource.custom)
    return Deployed(deployed.against, resources)


def planned(stack: str, change: Any) -> PlanResult:
    """The plan of a shipped stack with its stack file changed by ``change(raw)``."""
    raw = copy.deepcopy(raw_stack(stack))
    change(raw)
    return run_program(PROJECT_DIR, stack, raw)


def only(changes: ChangeSet, action: str) -> list[Change]:
    return [change for change in changes.changes if change.action == action]


def of_pool(changes: ChangeSet, pool: str) -> Change:
    [found] = [c for c in changes.changes if c.type == AGENT_POOL and c.name.endswith(f"-{pool}-pool")]
    return found


def plan(stack_file: Path, out: Path, *extra: str) -> int:
    stack = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return main(
        ["plan", "--stack", stack, "--config-file", str(stack_file), "--out", str(out), "--project-dir", str(PROJECT_DIR), *extra]
    )


@pytest.fixture
def prod_file(tmp_path: Path) -> Path:
    stack_file = tmp_path / "Pulumi.prod.yaml"
    shutil.copy(PROJECT_DIR / "stacks" / "Pulumi.prod.yaml", stack_file)
    return stack_file


def edit(stack_file: Path, old: str, new: str) -> None:
    text = stack_file.read_text()
    assert old in text
    stack_file.write_text(text.replace(old, new, 1))


# ---------------------------------------------------------------- the program and the rules


def test_an_unchanged_stack_has_no_changes() -> None:
    result = planned_result("prod")
    assert plan_changes(state_of(result), result).changes == ()


def test_a_preview_plan_of_an_unchanged_stack_has_no_changes() -> None:
    """--preview records what Azure computes as unknown: for a deployed resource, that is what it has."""
    deployed = planned_result("prod")
    preview = run_program(PROJECT_DIR, "prod", raw_stack("prod"), preview=True)
    assert plan_changes(state_of(deployed), preview).changes == ()


def test_a_given_cluster_object_the_kubernetes_provider_replaces_is_a_replacement(tmp_path: Path) -> None:
    """Given-cluster mode (cluster.kubeconfig): no Azure resource, the Kubernetes provider judges every change."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n")
    result = planned("prod", lambda raw: raw["aks-gpu:cluster"].update(kubeconfig=str(kubeconfig)))
    assert not [r for r in result.resources if r.type.startswith("azure-native:")]
    document = json.loads(json.dumps(result.to_json()))
    [config_map, *_] = [r for r in document["resources"] if r["type"] == "kubernetes:core/v1:ConfigMap"]
    config_map["inputs"]["data"] = {**config_map["inputs"].get("data", {}), "stale": "x"}
    [namespace, *_] = [r for r in document["resources"] if r["type"] == "kubernetes:core/v1:Namespace"]
    namespace["inputs"]["metadata"]["labels"] = {**namespace["inputs"]["metadata"].get("labels", {}), "stale": "x"}
    changes = plan_changes(previous_plan_state(document, "before"), result)
    assert {(c.name, c.action) for c in changes.changes} == {
        (config_map["name"], "replace"),  # data: the provider's enableConfigMapMutable is off
        (namespace["name"], "update"),  # a label changes in place
    }


@pytest.mark.parametrize("fixed", immutable_fields()[AGENT_POOL], ids=lambda fixed: fixed.field)
def test_every_field_fixed_at_creation_replaces_the_pool_and_says_why(fixed: Any) -> None:
    """The doomed updates: AKS refuses them, so the program replaces (replace_on_changes); the plan names the rule and
    the AKS source."""
    result = planned_result("dev")
    top, *rest = fixed.field.split(".")
    # (a size the catalog knows, so the GPUs the replacement takes down are known too)
    old: Any = "Standard_NC8as_T4_v3" if fixed.field == "vmSize" else "changed-" + fixed.field
    if rest:
        old = {rest[0]: old}
    deployed = with_pool_inputs(state_of(result), "dev", **{top: old})
    change = of_pool(plan_changes(deployed, result), "dev")
    assert change.action == "replace"
    assert fixed.field in change.fields
    assert fixed.field in change.why and fixed.source in change.why and "replaceOnChanges" in change.why
    # The dev pool's nodes, up to maxCount, each with its one T4.
    [pool] = raw_stack("dev")["aks-gpu:gpuPools"]
    assert change.impact == {"nodes": pool["maxCount"], "gpus": pool["maxCount"] * 1}


def test_a_protected_gpu_pool_replaced_is_blocked() -> None:
    result = planned_result("prod")
    deployed = with_pool_inputs(state_of(result), "infer", vmSize="Standard_NC48ads_A100_v4")
    change = of_pool(plan_changes(deployed, result), "infer")
    assert change.action == "blocked" and change.fields == ("vmSize",)
    assert "marked for protection" in change.why and "protect: false" in change.why
    # Unprotected in the state (or in the program) first, then it is a replacement.
    unprotected = with_pool_inputs(state_of(result, infer=False), "infer", vmSize="Standard_NC48ads_A100_v4")
    assert of_pool(plan_changes(unprotected, result), "infer").action == "replace"


def test_fields_that_change_in_place_are_updates() -> None:
    result = planned_result("prod")
    deployed = with_pool_inputs(state_of(result), "train", osSKU="AzureLinux", maxCount=9, nodeTaints=[])
    change = of_pool(plan_changes(deployed, result), "train")
    assert change.action == "update"
    assert set(change.fields) >= {"osSKU", "maxCount", "nodeTaints"}
    # the pool as planned: up to maxCount nodes of 8 GPUs each, none drained by the update
    [train] = [p for p in raw_stack("prod")["aks-gpu:gpuPools"] if p["name"] == "train"]
    assert change.impact == {"nodes": train["maxCount"], "gpus": train["maxCount"] * 8}


def test_the_autoscaled_count_is_no_change() -> None:
    result = planned_result("prod")
    deployed = with_pool_inputs(state_of(result), "train", count=3)
    assert plan_changes(deployed, result).changes == ()


@pytest.mark.parametrize(
    ("setting", "field"),
    [("dnsPrefix", "dnsPrefix"), ("networkPolicy", "networkProfile.networkPolicy")],
)
def test_a_replaced_cluster_takes_the_provider_and_everything_in_the_cluster_with_it(setting: str, field: str) -> None:
    """The cascade: the cluster's id and name are unknown until it is replaced; the Kubernetes provider's cluster
    identifier comes from its id (so it is replaced, and every object it serves), the pools' cluster (a path parameter
    of theirs) from its name. dnsPrefix is fixed at creation (data/immutable_fields.yaml); the network policy engine
    is one the azure-native provider replaces the cluster for (data/azure_native_rules.yaml)."""
    before = planned_result("dev")
    value = {"dnsPrefix": "other", "networkPolicy": "calico"}[setting]
    after = planned("dev", lambda raw: raw["aks-gpu:cluster"].update({setting: value}))
    changes = plan_changes(state_of(before), after)
    [cluster] = [c for c in changes.changes if c.type == MANAGED_CLUSTER]
    assert cluster.action == "replace" and field in cluster.fields and field in cluster.why
    assert "delete-first" in cluster.why
    replaced = {c.urn for c in changes.changes if c.action == "replace" and c.urn != cluster.urn}
    in_cluster = {r.urn for r in after.resources if r.custom and r.type.startswith("kubernetes:")}
    pools = {r.urn for r in after.by_type(AGENT_POOL)}
    [provider] = [r.urn for r in after.resources if r.type == KUBERNETES_PROVIDER]
    assert in_cluster and pools and in_cluster | pools | {provider} <= replaced
    assert cluster.impact == {"resources": len(replaced)}
    provider_change = next(c for c in changes.changes if c.urn == provider)
    assert "clusterIdentifier comes from" in provider_change.why and "pulumi-kubernetes" in provider_change.why
    pool_change = next(c for c in changes.changes if c.urn in pools)
    assert "resourceName comes from platform-cluster-aks" in pool_change.why and "path-parameter" in pool_change.why


def test_a_protected_cluster_replaced_is_blocked_and_so_are_its_protected_pools() -> None:
    before = planned_result("prod")
    after = planned("prod", lambda raw: raw["aks-gpu:cluster"].update(networkPolicy="calico"))
    changes = plan_changes(state_of(before), after)
    blocked = {(c.type, c.name) for c in only(changes, "blocked")}
    assert (MANAGED_CLUSTER, "platform-cluster-aks") in blocked
    protected_pools = {r.name for r in after.by_type(AGENT_POOL) if r.options["protect"]}
    assert protected_pools and {(AGENT_POOL, name) for name in protected_pools} <= blocked


def test_a_kubernetes_object_the_provider_replaces_is_a_replacement() -> None:
    """In the cluster the Kubernetes provider judges: a StorageClass parameter is forceNew in pulumi-kubernetes."""
    result = planned_result("prod")
    document = json.loads(json.dumps(result.to_json()))
    [storage_class] = [r for r in document["resources"] if r["type"] == "kubernetes:storage.k8s.io/v1:StorageClass"]
    storage_class["inputs"]["parameters"] = {**storage_class["inputs"].get("parameters", {}), "other": "x"}
    [job] = [r for r in document["resources"] if r["type"] == "kubernetes:batch/v1:Job"]
    job["inputs"]["spec"]["template"]["metadata"] = {"labels": {"changed": "yes"}}
    changes = plan_changes(previous_plan_state(document, "before"), result)
    by_type = {c.type: c for c in changes.changes}
    for kind in ("kubernetes:storage.k8s.io/v1:StorageClass", "kubernetes:batch/v1:Job"):
        assert by_type[kind].action == "replace", kind
        assert "f47bc2d6f199" in by_type[kind].why
    assert len(changes.changes) == 2


def test_a_resource_gone_from_the_program_is_deleted_and_blocked_when_protected() -> None:
    result = planned_result("prod")
    gone_cpu = planned("prod", lambda raw: raw.pop("aks-gpu:cpuPools"))
    [cpu] = plan_changes(state_of(result), gone_cpu).changes
    assert (cpu.action, cpu.impact) == ("delete", {"nodes": 3, "gpus": 0})
    gone_pool = planned("prod", lambda raw: raw["aks-gpu:gpuPools"].pop(2))
    inferfull = [c for c in plan_changes(state_of(result), gone_pool).changes if c.type == AGENT_POOL]
    assert [(c.name, c.action) for c in inferfull] == [("platform-inferfull-pool", "blocked")]
    assert inferfull[0].impact == {"nodes": 2, "gpus": 16}


def test_the_system_pool_vm_size_on_a_running_cluster_is_refused_with_what_to_do() -> None:
    before = planned_result("prod")
    after = planned("prod", lambda raw: raw["aks-gpu:cluster"].update(systemPool={"vmSize": "Standard_D8ds_v5"}))
    changes = plan_changes(state_of(before), after)
    [refusal] = changes.refusals
    assert refusal.setting == "cluster.systemPool.vmSize" and refusal.after == "Standard_D8ds_v5"
    assert "https://learn.microsoft.com/azure/aks/resize-node-pool" in refusal.what_to_do
    assert "new system pool" in refusal.what_to_do
    # Nothing deployed yet: the cluster is created with it, nothing to refuse.
    assert plan_changes(Deployed(None, {}), after).refusals == ()


def test_the_kubernetes_replace_rules_are_those_of_the_provider_the_e2e_tier_builds() -> None:
    """Each rule names its source at the commit of tools/go/versions' PULUMI_KUBERNETES_PROVIDER_VERSION."""
    versions = (PROJECT_DIR / "tools" / "go" / "versions").read_text()
    [pinned] = [line.split("=", 1)[1] for line in versions.splitlines() if line.startswith("PULUMI_KUBERNETES_PROVIDER_VERSION=")]
    commit = pinned.rsplit("-", 1)[1]
    for kind in ("kubernetes:storage.k8s.io/v1:StorageClass", "kubernetes:batch/v1:Job", "kubernetes:core/v1:ConfigMap"):
        rules = kubernetes_replace_rules(kind)
        assert {"metadata.name", "metadata.namespace"} < {rule.field for rule in rules}, kind
        assert all(rule.source.startswith("pulumi/pulumi-kubernetes ") and f"@{commit}" in rule.source for rule in rules)


# ---------------------------------------------------------------- the command: changes.json, exit codes, the table


def test_the_cli_blocks_a_protected_pool_and_writes_changes_json(prod_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert plan(prod_file, out) == 0
    first = json.loads((out / "changes.json").read_text())
    assert first["against"] is None and {c["action"] for c in first["changes"]} == {"create"}
    edit(prod_file, "vmSize: Standard_NC24ads_A100_v4", "vmSize: Standard_NC48ads_A100_v4")
    assert plan(prod_file, out, "--accept-replace") == 1  # blocked is never accepted
    document = json.loads((out / "changes.json").read_text())
    assert set(document) == {"against", "changes"} and document["against"].endswith("resources.json")
    [pool] = [c for c in document["changes"] if c["type"] == AGENT_POOL]
    assert set(pool) == {"type", "name", "urn", "action", "fields", "why", "impact"}
    assert (pool["name"], pool["action"], pool["fields"]) == ("platform-infer-pool", "blocked", ["vmSize"])
    assert pool["impact"] == {"nodes": 3, "gpus": 3}


def test_the_cli_exits_1_on_a_gpu_pool_replacement_unless_accepted(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.dev.yaml"
    shutil.copy(PROJECT_DIR / "stacks" / "Pulumi.dev.yaml", stack_file)
    out = tmp_path / "out"
    assert plan(stack_file, out) == 0
    edit(stack_file, "spot: true", "spot: true\n      maxPods: 50")
    # Each against the same previous plan: a plan written replaces it, and is what the next one compares with.
    accepted = tmp_path / "accepted"
    shutil.copytree(out, accepted)
    assert plan(stack_file, out) == 1
    assert plan(stack_file, accepted, "--accept-replace") == 0
    [change] = json.loads((accepted / "changes.json").read_text())["changes"]
    assert (change["action"], change["fields"]) == ("replace", ["maxPods"])
    assert not (accepted / "resources.accepted.json").exists()

    # A plan that did not pass is not what is deployed: the same plan again is told the same replacement (it said
    # nothing the second time before), against the last plan that passed, until one passes.
    assert plan(stack_file, out) == 1
    document = json.loads((out / "changes.json").read_text())
    assert document["against"].endswith("resources.accepted.json")
    assert [(c["action"], c["fields"]) for c in document["changes"]] == [("replace", ["maxPods"])]
    assert plan(stack_file, out, "--accept-replace") == 0
    assert not (out / "resources.accepted.json").exists()
    assert plan(stack_file, out) == 0
    assert json.loads((out / "changes.json").read_text())["changes"] == []


def test_the_cli_refuses_a_system_pool_change_with_exit_2(
    prod_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert plan(prod_file, out) == 0
    written = (out / "resources.json").read_bytes()
    edit(prod_file, "    protect: true\n", "    protect: true\n    systemPool: {vmSize: Standard_D8ds_v5}\n")
    capsys.readouterr()
    assert plan(prod_file, out) == 2
    stderr = " ".join(capsys.readouterr().err.split())
    assert "cluster.systemPool.vmSize 'Standard_D4ds_v5' -> 'Standard_D8ds_v5'" in stderr
    assert "resize-node-pool" in stderr and "Traceback" not in stderr
    assert (out / "resources.json").read_bytes() == written  # nothing was planned


def test_the_table_is_whole_at_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack_file = tmp_path / "Pulumi.dev.yaml"
    shutil.copy(PROJECT_DIR / "stacks" / "Pulumi.dev.yaml", stack_file)
    out = tmp_path / "out"
    assert plan(stack_file, out) == 0
    edit(stack_file, "spot: true", "spot: true\n      maxPods: 50")
    capsys.readouterr()
    with terminal_width(80):
        assert plan(stack_file, out, "--accept-replace") == 0
    printed = capsys.readouterr().out
    # the changes, from their title to the line after them
    section = printed[printed.index("changes against") : printed.index("smoke Job")]
    assert max(len(line) for line in section.splitlines()) <= 80
    [change] = json.loads((out / "changes.json").read_text())["changes"]
    words = " ".join(section.split())
    for value in (change["action"], change["type"], change["name"], *change["fields"], "nodes 2", "gpus 2"):
        assert value in words, value
    # the why, every character in order (wrapped, a word longer than a line folded, never cut)
    assert "".join(change["why"].split()) in "".join(section.split())


# ---------------------------------------------------------------- --against: a `pulumi stack export`

STACK_URN = "urn:pulumi:prod::aks-gpu::pulumi:pulumi:Stack::aks-gpu-prod"
CIPHERTEXT = "v1:Zm9vYmFyYmF6cXV4:c2VjcmV0LXZhbHVlLW5ldmVyLXByaW50ZWQ="


def encrypted(value: Any) -> Any:
    """The plan's masked secrets as an export holds them: encrypted."""
    if value == SECRET:
        return {SIG_KEY: SECRET_SIG, "ciphertext": CIPHERTEXT}
    if isinstance(value, dict):
        return {key: encrypted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [encrypted(item) for item in value]
    return value


def export_of(result: PlanResult) -> dict[str, Any]:
    """A `pulumi stack export` of a deployment of ``result``, as the CLI writes one (version 3)."""
    provider = "urn:pulumi:prod::aks-gpu::pulumi:providers:azure-native::default_3_29_0"
    resources: list[dict[str, Any]] = [
        {"urn": STACK_URN, "custom": False, "type": "pulumi:pulumi:Stack", "outputs": {"kubeconfig": encrypted(SECRET)}},
        {"urn": provider, "custom": True, "id": "p-1", "type": "pulumi:providers:azure-native", "inputs": {"version": "3.29.0"}},
    ]
    for record in result.to_json()["resources"]:
        inputs = dict(record["inputs"])
        if record["type"] == "azure-native:authorization:RoleAssignment":
            # the provider names a role assignment itself (a UUID), and its state keeps the name
            inputs |= {"roleAssignmentName": "5f0c2f43-3c4b-4c1b-9d8e-2a3c1d0e9f11", "__createBeforeDelete": True}
        resources.append(
            {
                "urn": record["urn"],
                "custom": record["custom"],
                "id": f"id-{record['name']}",
                "type": record["type"],
                "inputs": encrypted(inputs),
                "outputs": encrypted(record["inputs"]),
                "parent": record["parent"] or STACK_URN,
                "protect": record["options"]["protect"],
                "dependencies": record["options"]["dependsOn"],
                "provider": f"{provider}::p-1" if record["type"].startswith("azure-native:") else None,
            }
        )
    return {
        "version": 3,
        "deployment": {"manifest": {"time": "2026-12-01T00:00:00Z", "version": "v3.274.1"}, "resources": resources},
    }


def test_a_version_4_export_with_hooks_is_read(prod_file: Path, tmp_path: Path) -> None:
    """The real CLI exports this program's stacks as version 4 (features: hooks, for its post-deploy hook)."""
    export = tmp_path / "prod-export.json"
    export.write_text(json.dumps({**export_of(planned_result("prod")), "version": 4, "features": ["hooks"]}))
    assert plan(prod_file, tmp_path / "out", "--against", str(export)) == 0
    assert json.loads((tmp_path / "out" / "changes.json").read_text())["changes"] == []


def test_against_an_export_tells_the_same_changes_as_against_the_previous_plan(
    prod_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert plan(prod_file, out) == 0
    export = tmp_path / "prod-export.json"
    export.write_text(json.dumps(export_of(planned_result("prod"))))
    edit(prod_file, "minCount: 1\n      maxCount: 3", "minCount: 1\n      maxCount: 5")  # infer: in place
    edit(prod_file, "maxCount: 4", "maxCount: 6")  # train
    previous = tmp_path / "previous"
    shutil.copytree(out, previous)
    assert plan(prod_file, previous) == 0
    told = json.loads((previous / "changes.json").read_text())["changes"]
    capsys.readouterr()
    assert plan(prod_file, out, "--against", str(export)) == 0
    printed = capsys.readouterr().out
    against = json.loads((out / "changes.json").read_text())
    assert against["against"].endswith("prod-export.json")
    assert [(c["name"], c["action"], c["fields"]) for c in against["changes"]] == [
        (c["name"], c["action"], c["fields"]) for c in told
    ]
    assert {c["name"] for c in told} >= {"platform-infer-pool", "platform-train-pool"}
    assert CIPHERTEXT not in printed and CIPHERTEXT not in (out / "changes.json").read_text()


def test_against_a_hand_made_export_a_secret_is_compared_only_as_changed(tmp_path: Path, prod_file: Path) -> None:
    export = export_of(planned_result("prod"))
    [provider] = [r for r in export["deployment"]["resources"] if r["type"] == KUBERNETES_PROVIDER]
    # A rotated kubeconfig: another ciphertext of a secret; nothing can tell, so nothing changes.
    provider["inputs"]["kubeconfig"] = {SIG_KEY: SECRET_SIG, "ciphertext": "v1:b3RoZXI="}
    [cluster] = [r for r in export["deployment"]["resources"] if r["type"] == MANAGED_CLUSTER]
    # A value that was plain and is a secret now: a change, told by its path only.
    cluster["inputs"]["tags"]["owner"] = {SIG_KEY: SECRET_SIG, "plaintext": '"the-plain-secret"'}
    # What Azure gave back, which an offline plan cannot know: the role assignment's scope is the real cluster's id.
    [grant] = [r for r in export["deployment"]["resources"] if r["type"] == "azure-native:authorization:RoleAssignment"]
    grant["inputs"]["scope"] = grant["inputs"]["scope"].replace(FAKE_SUBSCRIPTION, "8f1c6a53-1d1e-4f8e-9d55-0e7c3b9a2f10")
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    assert plan(prod_file, tmp_path / "out", "--against", str(path)) == 0
    document = (tmp_path / "out" / "changes.json").read_text()
    [change] = json.loads(document)["changes"]
    assert (change["type"], change["action"], change["fields"]) == (MANAGED_CLUSTER, "update", ["tags.owner"])
    assert "the-plain-secret" not in document


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"version": 3, "deployment": {"resources": [{"urn": "urn:pulumi:prod', "not valid JSON"),
        ('{"version": 2, "deployment": {"resources": []}}', "only versions 3 and 4"),
        ('{"project": "aks-gpu", "resources": []}', "not a `pulumi stack export`"),
        ('{"version": 3, "deployment": {"resources": [{"urn": 5}]}}', "resources[0] is not a resource"),
        ('{"version": 3, "deployment": {"resources": [{"urn": "u", "type": "t", "inputs": []}]}}', "inputs is not an object"),
        (None, "no such file"),
    ],
    ids=["truncated", "wrong-version", "not-an-export", "bad-resource", "bad-inputs", "missing"],
)
def test_an_unreadable_against_file_exits_2_with_a_clear_message(
    content: str | None, message: str, prod_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "export.json"
    if content is not None:
        path.write_text(content)
    assert plan(prod_file, tmp_path / "out", "--against", str(path)) == 2
    captured = capsys.readouterr()
    stderr = " ".join(captured.err.split())
    assert message in stderr and "export.json" in stderr
    assert "Traceback" not in captured.err + captured.out
    assert not (tmp_path / "out").exists()
