"""The snapshot files the audit adds: namespaces.json, resourcequotas.json, networkpolicies.json and meta.json are
written deterministically, read back equal, absent when the snapshot has none; and whatever a hand-made file holds,
reading and auditing it ends in an audit or an input error naming the file, never an exception."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aks_gpu.audit.engine import run_audit
from aks_gpu.cluster.snapshot import SnapshotError, parse_rfc3339, read_snapshot, write_snapshot
from tests.audit.clusters import COLLECTED_AT, clean_snapshot
from tests.cluster.test_snapshot_shapes import BUDGET, JSON_VALUES, set_field

CLEAN = clean_snapshot()


def test_the_optional_files_read_back_equal(tmp_path: Path) -> None:
    written = write_snapshot(CLEAN, tmp_path)
    back = read_snapshot(tmp_path)

    names = [str(path.relative_to(tmp_path)) for path in written]
    assert names[:11] == [
        "nodes.json",
        "daemonsets.json",
        "pods.json",
        "namespaces.json",
        "resourcequotas.json",
        "networkpolicies.json",
        "nodepools.json",
        "clusterqueues.json",
        "workloads.json",
        "events.json",
        "meta.json",
    ]
    key = lambda item: (item["metadata"].get("namespace", ""), item["metadata"]["name"])  # noqa: E731
    assert back.namespaces == sorted(CLEAN.namespaces or [], key=key)
    assert back.resourcequotas == sorted(CLEAN.resourcequotas or [], key=key)
    assert back.networkpolicies == sorted(CLEAN.networkpolicies or [], key=key)
    assert back.nodepools == []
    assert (back.clusterqueues, back.workloads, back.events) == ([], [], [])
    assert back.collected_at == COLLECTED_AT and back.not_collected == {}
    assert json.loads((tmp_path / "meta.json").read_text(encoding="utf-8")) == {"collectedAt": COLLECTED_AT}


def test_a_snapshot_without_them_writes_none_and_removes_an_earlier_collections(tmp_path: Path) -> None:
    write_snapshot(CLEAN, tmp_path)
    bare = replace(
        CLEAN,
        namespaces=None,
        resourcequotas=None,
        networkpolicies=None,
        nodepools=None,
        clusterqueues=None,
        workloads=None,
        events=None,
        collected_at=None,
    )
    write_snapshot(bare, tmp_path)

    assert sorted(path.name for path in tmp_path.iterdir() if path.is_file()) == ["daemonsets.json", "nodes.json", "pods.json"]
    back = read_snapshot(tmp_path)
    optional = (
        back.namespaces,
        back.resourcequotas,
        back.networkpolicies,
        back.nodepools,
        back.clusterqueues,
        back.workloads,
        back.events,
    )
    assert (*optional, back.collected_at) == (None,) * 8


def test_what_the_collector_was_refused_is_kept_in_meta_json(tmp_path: Path) -> None:
    refused = replace(CLEAN, networkpolicies=None, not_collected={"networkpolicies.json": "HTTP 403: forbidden"})
    write_snapshot(refused, tmp_path)

    assert read_snapshot(tmp_path).not_collected == {"networkpolicies.json": "HTTP 403: forbidden"}


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("2025-10-20T08:00:00Z", datetime(2025, 10, 20, 8, tzinfo=UTC)),
        ("2025-10-20t08:00:00z", datetime(2025, 10, 20, 8, tzinfo=UTC)),
        ("2025-10-20T10:00:00.123456789+02:00", datetime(2025, 10, 20, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))),
        ("2025-10-20 08:00:00-05:30", datetime(2025, 10, 20, 8, tzinfo=timezone(-timedelta(hours=5, minutes=30)))),
    ],
)
def test_rfc_3339_times(text: str, moment: datetime) -> None:
    assert parse_rfc3339(text) == moment


@pytest.mark.parametrize(
    "text", ["2025-10-20T08:00:00", "2025-10-20", "2025-13-01T00:00:00Z", "yesterday", "2025-10-20T25:00:00Z", ""]
)
def test_what_is_no_rfc_3339_time(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rfc3339(text)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "expected an object"),
        ('{"collectedAt": 20251020}', "collectedAt: not an RFC 3339 time"),
        ('{"collectedAt": "2025-10-20T08:00:00Z", "notCollected": ["x"]}', "notCollected must be an object"),
        ("{", "not JSON"),
    ],
)
def test_a_meta_json_that_cannot_be_read_is_refused(tmp_path: Path, content: str, message: str) -> None:
    write_snapshot(CLEAN, tmp_path)
    (tmp_path / "meta.json").write_text(content, encoding="utf-8")

    with pytest.raises(SnapshotError, match=message) as error:
        read_snapshot(tmp_path)
    assert "meta.json" in str(error.value)


# The fields the audit reads, where a wrong value must be refused or read, never crash it.
AUDIT_FIELDS = st.sampled_from(
    [
        ("nodes", ("spec", "taints")),
        ("nodes", ("spec", "taints", "0")),
        ("nodes", ("metadata", "labels", "kubernetes.azure.com/node-image-version")),
        ("nodes", ("status", "capacity", "nvidia.com/gpu")),
        ("pods", ("spec", "containers")),
        ("pods", ("spec", "containers", "0", "resources", "limits")),
        ("pods", ("spec", "initContainers")),
        ("pods", ("spec", "overhead")),
        ("pods", ("metadata", "ownerReferences")),
        ("pods", ("metadata", "annotations")),
        ("pods", ("status", "phase")),
        ("namespaces", ("metadata", "labels")),
        ("resourcequotas", ("spec", "hard")),
        ("resourcequotas", ("spec", "scopes")),
        ("resourcequotas", ("spec", "scopeSelector")),
        ("networkpolicies", ("spec", "podSelector")),
        ("networkpolicies", ("spec", "policyTypes")),
        ("networkpolicies", ("spec", "ingress")),
        ("networkpolicies", ("spec",)),
    ]
)


def _set(item: Any, path: tuple[str, ...], value: Any) -> None:
    """``set_field`` that steps into lists by index too (``spec.containers.0``)."""
    target = item
    for part in path[:-1]:
        if isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        elif isinstance(target, dict):
            target = target.setdefault(part, {})
        else:
            return
    if isinstance(target, dict):
        set_field(target, (path[-1],), value)


@BUDGET
@given(where=AUDIT_FIELDS, index=st.integers(0, 9), value=JSON_VALUES)
def test_any_field_the_audit_reads_set_to_anything_is_refused_or_audited(
    tmp_path_factory: Any, where: tuple[str, tuple[str, ...]], index: int, value: Any
) -> None:
    list_name, path = where
    items = copy.deepcopy(getattr(CLEAN, list_name))
    _set(items[index % len(items)], path, value)
    folder = tmp_path_factory.mktemp("snap")
    write_snapshot(CLEAN, folder)
    (folder / f"{list_name}.json").write_text(json.dumps({"kind": "List", "items": items}), encoding="utf-8")
    try:
        run_audit(read_snapshot(folder), shapes_checked=True)
    except SnapshotError as error:
        assert f"{list_name}.json" in str(error)
