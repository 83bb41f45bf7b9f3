"""The `aksgpu plan` contract: files, determinism, masked secrets, the error path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.aks_facts import immutable_fields
from aks_gpu.cli import main
from aks_gpu.cli.deployed_state import previous_plan_state
from aks_gpu.mock_engine import (
    FAKE_OBJECT_ID,
    UNKNOWN,
    DuplicateUrnError,
    PlanResult,
    ResourceRecord,
    run_program,
)
from aks_gpu.mock_engine.changes import plan_changes
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
    # prod's pools are protected: the engine would refuse the replacement, so the plan exits 1
    assert plan("prod", out, "--config-file", str(stack_file)) == 1
    printed = " ".join(capsys.readouterr().out.split())
    assert "blocked" in printed and "platform-infer-pool" in printed and "gpuInstanceProfile is fixed at creation" in printed


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


def told(previous: dict[str, Any], result: PlanResult) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.name, c.action, c.fields) for c in plan_changes(previous_plan_state(previous, "before"), result).changes]


def test_a_driver_change_is_a_replacement(prod_result: PlanResult) -> None:
    """Switching devicePlugin.mode flips gpuProfile.driver, which AKS fixes at creation (data/immutable_fields.yaml):
    prod's train pool is protected, so the engine refuses it."""
    changes = told(previous_of(prod_result, "train", gpuProfile={"driver": "None"}), prod_result)
    assert changes == [("platform-train-pool", "blocked", ("gpuProfile.driver",))]


def test_os_sku_changes_in_place(prod_result: PlanResult) -> None:
    assert told(previous_of(prod_result, "train", osSKU="AzureLinux"), prod_result) == [
        ("platform-train-pool", "update", ("osSKU",))
    ]


def test_every_fixed_field_names_its_source() -> None:
    for fields in immutable_fields().values():
        for fixed in fields:
            assert fixed.source.startswith("https://") and (fixed.quote or fixed.note), fixed.field


# ---------------------------------------------------------------- the plan folder, when things go wrong


def test_a_truncated_previous_plan_is_reported_and_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "resources.json").write_text('{"project": "aks-gpu", "stack": "dev", "resources": [{"urn": "urn:pulumi:de')
    assert plan("dev", out) == 0
    captured = capsys.readouterr()
    stderr = " ".join(captured.err.split())
    assert "ignoring the previous plan" in stderr and "not valid JSON" in stderr and "resources.json" in stderr
    assert "Traceback" not in captured.err + captured.out
    assert json.loads((out / "resources.json").read_text())["stack"] == "dev"  # replaced by a whole plan


@pytest.mark.parametrize(
    "content",
    [
        b"[]",
        b'{"resources": 5}',
        b'{"resources": [1]}',
        b'{"resources": [{"urn": "u", "inputs": []}]}',
        b"\xff\xfe",
        b"[" * 100_000,
    ],
)
def test_a_previous_plan_of_the_wrong_shape_is_ignored_with_a_warning(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aks_gpu.cli.plan import read_previous_plan

    (tmp_path / "resources.json").write_bytes(content)
    assert read_previous_plan(tmp_path / "resources.json") is None
    assert "ignoring the previous plan" in capsys.readouterr().err


def test_out_pointing_at_a_file_exits_2_and_leaves_it_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    assert plan("dev", target) == 2
    captured = capsys.readouterr()
    assert "is a file, not a folder" in captured.err and "Traceback" not in captured.err
    assert target.read_text() == "mine"


def test_out_holding_other_files_is_refused_not_emptied(tmp_path: Path) -> None:
    from aks_gpu.mock_engine import PlanWriteError, write_plan

    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(PlanWriteError, match=r"holds files that are not part of a plan \(keep.txt\)"):
        write_plan(tiny_plan("a", 1), tmp_path)
    assert (tmp_path / "keep.txt").read_text() == "mine"


def tiny_plan(stack: str, manifests: int) -> PlanResult:
    records = [
        ResourceRecord(
            urn=f"urn:pulumi:{stack}::aks-gpu::kubernetes:core/v1:ConfigMap::cm{index}",
            type="kubernetes:core/v1:ConfigMap",
            name=f"cm{index}",
            parent=None,
            custom=True,
            inputs={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{index}"}, "data": {"x": "y" * 2000}},
            options={},
        )
        for index in range(manifests)
    ]
    return PlanResult(project="aks-gpu", stack=stack, resources=records, outputs={})


def test_two_plans_written_into_one_folder_at_once_never_leave_a_broken_plan(tmp_path: Path) -> None:
    import threading

    from aks_gpu.mock_engine import write_plan

    out = tmp_path / "out"
    failures: list[BaseException] = []

    def write_plans(stack: str, manifests: int) -> None:
        try:
            for _ in range(25):
                write_plan(tiny_plan(stack, manifests), out)
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            failures.append(error)

    writers = [threading.Thread(target=write_plans, args=(stack, count)) for stack, count in (("a", 3), ("b", 9))]
    for writer in writers:
        writer.start()
    whole = 0
    try:
        while any(writer.is_alive() for writer in writers):
            try:
                document = json.loads((out / "resources.json").read_text())  # never half a file: this must parse
                assert document["stack"] in ("a", "b") and len(document["resources"]) in (3, 9)
                for path in (out / "manifests").iterdir():
                    assert yaml.safe_load(path.read_text())["data"]["x"] == "y" * 2000
            except FileNotFoundError:
                # Between the two renames of a swap there is no folder, and one moved aside vanishes under a
                # reader listing it; what is read is always whole.
                continue
            whole += 1
    finally:
        for writer in writers:
            writer.join(timeout=60)
    assert failures == []
    document = json.loads((out / "resources.json").read_text())
    assert len(list((out / "manifests").iterdir())) == len(document["resources"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "no staging folder is left behind"
    assert whole > 0
