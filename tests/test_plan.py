"""The `aksgpu plan` contract: files, determinism, masked secrets, the error path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from components.aks_facts import immutable_fields
from components.cli import main
from components.plan import FAKE_OBJECT_ID, UNKNOWN, DuplicateUrnError, PlanResult, replacements, run_program
from tests.conftest import PROJECT_DIR, STACK_NAMES, MockHarness, raw_stack


def plan(stack: str, out: Path, *extra: str) -> int:
    return main(["plan", "--stack", stack, "--out", str(out), "--project-dir", str(PROJECT_DIR), *extra])


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_plan_writes_resources_json_in_the_contract_shape(stack: str, tmp_path: Path) -> None:
    assert plan(stack, tmp_path) == 0
    document = json.loads((tmp_path / "resources.json").read_text())
    assert document["project"] == "aks-gpu" and document["stack"] == stack
    assert set(document) == {"project", "stack", "resources", "outputs"}
    urns = {r["urn"] for r in document["resources"]}
    for resource in document["resources"]:
        assert {"urn", "type", "name", "parent", "custom", "inputs"} <= set(resource)
        assert (
            resource["parent"] is None
            or resource["parent"] in urns
            or resource["parent"].endswith("pulumi:pulumi:Stack::aks-gpu-" + stack)
        )
        assert isinstance(resource["custom"], bool)
    types = {r["type"] for r in document["resources"]}
    assert "aks-gpu:index:GpuPlatform" in types


def test_inputs_are_camel_case_as_the_provider_receives_them(tmp_path: Path) -> None:
    assert plan("prod", tmp_path) == 0
    resources = json.loads((tmp_path / "resources.json").read_text())["resources"]
    pool = next(
        r for r in resources if r["type"] == "azure-native:containerservice:AgentPool" and r["inputs"]["agentPoolName"] == "infer"
    )
    assert pool["inputs"]["gpuInstanceProfile"] == "MIG1g"
    assert pool["inputs"]["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert pool["inputs"]["minCount"] == 1 and isinstance(pool["inputs"]["minCount"], int)


def test_secrets_are_masked_in_plan_files(tmp_path: Path) -> None:
    assert plan("prod", tmp_path) == 0
    text = (tmp_path / "resources.json").read_text()
    document = json.loads(text)
    assert document["outputs"]["kubeconfig"] == "[secret]"
    provider = next(r for r in document["resources"] if r["type"] == "pulumi:providers:kubernetes")
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    assert "kubelogin" not in text and "BEGIN CERTIFICATE" not in text


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_planning_twice_gives_identical_files(stack: str, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    assert plan(stack, first) == 0 and plan(stack, second) == 0
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for relative in files:
        assert (first / relative).read_bytes() == (second / relative).read_bytes(), relative


def test_config_error_exits_2_with_file_and_key_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "Pulumi.bad.yaml"
    text = (PROJECT_DIR / "stacks" / "Pulumi.prod.yaml").read_text().replace("migProfile: MIG1g", "migProfile: MIG9g")
    bad.write_text(text)
    out = tmp_path / "out"
    assert plan("bad", out, "--config-file", str(bad)) == 2
    captured = capsys.readouterr()
    assert "aks-gpu:gpuPools[1].migProfile" in captured.err
    assert "MIG9g" in captured.err and "Pulumi.bad.yaml" in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not out.exists()


def test_missing_stack_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert plan("nosuchstack", tmp_path / "out") == 2
    assert "no such stack file" in capsys.readouterr().err


def test_summary_lists_components_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert plan("prod", tmp_path) == 0
    printed = capsys.readouterr().out
    assert "aks-gpu:index:GpuPlatform" in printed and "azure-native:containerservice:AgentPool" in printed
    assert "resources.json" in printed


def test_changing_an_immutable_pool_field_is_shown_as_a_replacement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack_file = tmp_path / "Pulumi.prod.yaml"
    shutil.copy(PROJECT_DIR / "stacks" / "Pulumi.prod.yaml", stack_file)
    out = tmp_path / "out"
    assert plan("prod", out, "--config-file", str(stack_file)) == 0
    capsys.readouterr()
    stack_file.write_text(stack_file.read_text().replace("migProfile: MIG1g", "migProfile: MIG2g"))
    assert plan("prod", out, "--config-file", str(stack_file)) == 0
    printed = capsys.readouterr().out
    assert "replace" in printed and "gpuInstanceProfile 'MIG1g' -> 'MIG2g' cannot change in place" in printed


def test_duplicate_urns_are_refused(harness: MockHarness) -> None:
    import pulumi

    class Thing(pulumi.ComponentResource):
        def __init__(self, name: str) -> None:
            super().__init__("aks-gpu:test:Thing", name, None, None)
            self.register_outputs({})

    with pytest.raises(DuplicateUrnError):
        harness.run(lambda: (Thing("same"), Thing("same")))


# ---------------------------------------------------------------- preview mode (as `pulumi preview` runs it)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_plans_in_preview_mode_and_deterministically(stack: str, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    assert plan(stack, first, "--preview") == 0 and plan(stack, second, "--preview") == 0
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for relative in files:
        assert (first / relative).read_bytes() == (second / relative).read_bytes(), relative
    document = json.loads((first / "resources.json").read_text())
    [cluster] = [r for r in document["resources"] if r["type"] == "azure-native:containerservice:ManagedCluster"]
    # Nothing exists yet: what Azure computes is unknown, what the program sends is known.
    pools = [r for r in document["resources"] if r["type"] == "azure-native:containerservice:AgentPool"]
    assert pools and all(p["inputs"]["resourceName"] == UNKNOWN for p in pools)
    assert cluster["inputs"]["resourceName"] == f"aks-gpu-{stack}"
    [grant] = [r for r in document["resources"] if r["type"] == "azure-native:authorization:RoleAssignment"]
    assert grant["inputs"]["scope"] == UNKNOWN and grant["inputs"]["principalId"] == FAKE_OBJECT_ID


def test_preview_and_up_register_the_same_resources(harness: MockHarness) -> None:
    up = harness.run_stack("prod")
    preview = run_program(PROJECT_DIR, "prod", raw_stack("prod"), preview=True)
    assert [r.urn for r in preview.resources] == [r.urn for r in up.resources]


# ---------------------------------------------------------------- what Azure cannot change in place


def previous_of(result: PlanResult, pool: str, **changed: Any) -> dict[str, Any]:
    """A previous plan document: ``result`` with one pool's inputs changed back."""
    document: dict[str, Any] = json.loads(json.dumps(result.to_json()))
    for record in document["resources"]:
        if record["type"] == "azure-native:containerservice:AgentPool" and record["inputs"]["agentPoolName"] == pool:
            record["inputs"].update(changed)
    return document


@pytest.fixture(scope="module")
def prod_result() -> PlanResult:
    return run_program(PROJECT_DIR, "prod", raw_stack("prod"))


def test_a_driver_change_is_a_replacement(prod_result: PlanResult) -> None:
    """Switching devicePlugin.mode flips gpuProfile.driver, which AKS fixes at creation (data/immutable_fields.yaml)."""
    changes = replacements(previous_of(prod_result, "train", gpuProfile={"driver": "None"}), prod_result)
    assert [(c.field, c.before, c.after) for c in changes] == [("gpuProfile.driver", "None", "Install")]


@pytest.mark.parametrize(
    ("field", "old"),
    [("scaleSetPriority", "Spot"), ("spotMaxPrice", 0.5), ("scaleSetEvictionPolicy", "Deallocate"), ("vmSize", "x")],
)
def test_fields_fixed_at_creation_are_replacements(prod_result: PlanResult, field: str, old: Any) -> None:
    assert [c.field for c in replacements(previous_of(prod_result, "train", **{field: old}), prod_result)] == [field]


def test_os_sku_changes_in_place(prod_result: PlanResult) -> None:
    assert replacements(previous_of(prod_result, "train", osSKU="AzureLinux"), prod_result) == []


def test_every_fixed_field_names_its_source() -> None:
    for fields in immutable_fields().values():
        for fixed in fields:
            assert fixed.source.startswith("https://") and (fixed.quote or fixed.note), fixed.field
