"""Snapshots of the wrong shape, hand-made and generated (hypothesis): ``aksgpu validate --snapshot`` ends in exit
2 naming the file and the object, or in check results; never a traceback. One node's unreadable SMI file fails
that node, not the run."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aks_gpu.cli import main
from aks_gpu.cluster import snapshot as snapshot_module
from aks_gpu.cluster.snapshot import ClusterSnapshot, SnapshotError, read_snapshot, write_snapshot
from aks_gpu.resolved.targets import plugin_targets
from aks_gpu.validation.checks import run_checks
from tests.cluster.snapshots import healthy_snapshot, node_name
from tests.conftest import PROJECT_DIR, stack_model

PROD = stack_model("prod")
TARGETS = plugin_targets(PROD)
BUDGET = settings(max_examples=120, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def healthy() -> ClusterSnapshot:
    return healthy_snapshot(PROD, TARGETS, {"train": 1, "infer": 1})


def validate(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", str(folder)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, " ".join(captured.err.split()), captured.out


def save(snapshot: ClusterSnapshot, folder: Path, **lists: Any) -> Path:
    write_snapshot(snapshot, folder)
    for name, items in lists.items():
        (folder / f"{name}.json").write_text(json.dumps({"kind": "List", "items": items}), encoding="utf-8")
    return folder


def broken(edit: str, value: Any) -> tuple[str, list[dict[str, Any]]]:
    """The healthy snapshot's list ``edit`` names (``nodes.0.metadata``) with that field set to ``value``."""
    list_name, index, *path = edit.split(".")
    items = copy.deepcopy(getattr(healthy(), list_name))
    target: Any = items[int(index)]
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value
    return list_name, items


@pytest.mark.parametrize(
    ("edit", "value", "expected"),
    [
        ("nodes.0.metadata", "aks-train-0", "metadata must be an object, not the string"),
        ("pods.0.metadata.labels", ["app"], "metadata.labels must be an object of strings, not a list"),
        ("nodes.0.status", "Ready", "status must be an object, not the string"),
        ("daemonsets.0.status.numberReady", "x", 'status.numberReady must be a whole number, not the string "x"'),
        ("nodes.0.status.allocatable", {"nvidia.com/gpu": "\u00b2"}, "status.allocatable must be an object of quantity strings"),
        ("nodes.0.status.allocatable", {"nvidia.com/gpu": 8}, "quantity strings"),
        ("nodes.0.status.conditions", [{"type": "Ready", "status": True}], "status.conditions[0].status must be a string"),
        ("pods.0.status.containerStatuses", ["running"], "status.containerStatuses[0] must be an object"),
        ("nodes.0.metadata.name", None, "metadata.name is missing"),
    ],
)
def test_a_field_of_the_wrong_type_names_the_file_the_object_and_the_field(
    edit: str, value: Any, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    list_name, items = broken(edit, value)
    folder = save(healthy(), tmp_path / "snap", **{list_name: items})
    code, stderr, _ = validate(folder, capsys)
    assert code == 2
    assert f"{list_name}.json" in stderr and "items[0]" in stderr and expected in stderr, stderr


def test_an_item_that_is_not_an_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = save(healthy(), tmp_path / "snap", pods=["a pod"])
    code, stderr, _ = validate(folder, capsys)
    assert code == 2 and "pods.json" in stderr and 'items[0] is the string "a pod", not a Pod object' in stderr


def test_deep_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = save(healthy(), tmp_path / "snap")
    (folder / "nodes.json").write_text('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    code, stderr, _ = validate(folder, capsys)
    assert code == 2 and "nodes.json" in stderr and "nested too deeply" in stderr


def test_a_list_file_that_is_a_fifo_does_not_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = save(healthy(), tmp_path / "snap")
    (folder / "pods.json").unlink()
    os.mkfifo(folder / "pods.json")
    started = time.monotonic()
    code, stderr, _ = validate(folder, capsys)
    assert code == 2 and "pods.json" in stderr and "not a regular file" in stderr
    assert time.monotonic() - started < 10


def test_one_unreadable_smi_file_fails_that_node_and_the_others_are_checked(tmp_path: Path, capsys, monkeypatch) -> None:
    snapshot = healthy()
    folder = save(snapshot, tmp_path / "snap")
    fifo, huge = node_name("train", 0), node_name("infer", 0)
    (folder / "smi" / f"{fifo}.txt").unlink()
    os.mkfifo(folder / "smi" / f"{fifo}.txt")
    monkeypatch.setattr(snapshot_module, "MAX_SMI_FILE_BYTES", len(snapshot.smi[huge]) - 1)

    back = read_snapshot(folder)
    assert "named pipe" in back.exec_errors[fifo] and fifo not in back.smi
    assert "over the" in back.exec_errors[huge] and "limit" in back.exec_errors[huge] and huge not in back.smi
    code, _, stdout = validate(folder, capsys)
    assert code == 1  # the two nodes fail their smi checks; the run reports every node
    assert fifo in stdout and huge in stdout


# ---------------------------------------------------------------- generated


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=12),
        st.sampled_from(["x", "\u00b2", "True", "8", "-1", "1e999", "[/x]"]),
    ),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)),
    max_leaves=8,
)
FIELDS = st.sampled_from(
    [
        ("metadata",),
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("metadata", "labels"),
        ("metadata", "labels", "aks-gpu/pool"),
        ("spec",),
        ("spec", "nodeName"),
        ("spec", "unschedulable"),
        ("status",),
        ("status", "conditions"),
        ("status", "allocatable"),
        ("status", "allocatable", "nvidia.com/gpu"),
        ("status", "phase"),
        ("status", "containerStatuses"),
        ("status", "numberReady"),
        ("status", "desiredNumberScheduled"),
        ("spec", "template"),
        ("spec", "template", "metadata", "labels"),
        ("spec", "selector"),
        ("kind",),
        ("x",),
    ]
)


def set_field(item: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    target: Any = item
    for part in path[:-1]:
        if not isinstance(target, dict):
            return
        target = target.setdefault(part, {})
    if isinstance(target, dict):
        target[path[-1]] = value


@BUDGET
@given(
    list_name=st.sampled_from(["nodes", "pods", "daemonsets"]),
    index=st.integers(0, 5),
    field=FIELDS,
    value=JSON_VALUES,
    replace_item=st.booleans(),
)
def test_any_field_set_to_anything_is_refused_or_checked(
    tmp_path_factory: Any, list_name: str, index: int, field: tuple[str, ...], value: Any, replace_item: bool
) -> None:
    snapshot = healthy()
    items = copy.deepcopy(getattr(snapshot, list_name))
    position = index % len(items)
    if replace_item:
        items[position] = value
    else:
        set_field(items[position], field, value)
    folder = tmp_path_factory.mktemp("snap")
    write_snapshot(snapshot, folder)
    (folder / f"{list_name}.json").write_text(json.dumps({"items": items}), encoding="utf-8")
    try:
        back = read_snapshot(folder)
    except SnapshotError as error:
        assert f"{list_name}.json" in str(error)
        return
    run_checks(PROD, TARGETS, back)  # whatever was accepted, the checks judge it without crashing


@BUDGET
@given(content=st.one_of(st.binary(max_size=200), JSON_VALUES.map(lambda value: json.dumps(value).encode())))
def test_any_list_file_content_is_refused_or_checked(tmp_path_factory: Any, content: bytes) -> None:
    folder = tmp_path_factory.mktemp("snap")
    write_snapshot(healthy(), folder)
    (folder / "daemonsets.json").write_bytes(content)
    try:
        back = read_snapshot(folder)
    except SnapshotError as error:
        assert "daemonsets.json" in str(error)
        return
    run_checks(PROD, TARGETS, back)
