"""The `aksgpu plan` contract: files, determinism, masked secrets, the error path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from components.cli import main
from components.plan import DuplicateUrnError
from tests.conftest import PROJECT_DIR, STACK_NAMES, MockHarness


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
    assert "replace" in printed and "gpuInstanceProfile 'MIG1g' -> 'MIG2g'" in printed


def test_duplicate_urns_are_refused(harness: MockHarness) -> None:
    import pulumi

    class Thing(pulumi.ComponentResource):
        def __init__(self, name: str) -> None:
            super().__init__("aks-gpu:test:Thing", name, None, None)
            self.register_outputs({})

    with pytest.raises(DuplicateUrnError):
        harness.run(lambda: (Thing("same"), Thing("same")))
