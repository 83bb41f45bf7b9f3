"""node-image-stale against the latest node image AKS offers a pool (the pool's upgrade profile, as `az aks nodepool
get-upgrades` prints it, in the snapshot's nodepool-upgrades.json), and by age where the snapshot has none; the message
says which rule judged."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.node_images import latest_node_images
from aks_gpu.cluster.inventory import NODE_IMAGE_LABEL
from aks_gpu.cluster.snapshot import NODEPOOL_UPGRADES_FILE, ClusterSnapshot, SnapshotError, read_snapshot, write_snapshot
from tests.audit.clusters import AUDIT_FIXTURES_DIR, FRESH_IMAGE, INFER_0, TRAIN_0, TRAIN_1, clean_snapshot, edited, find_node

PROFILE = json.loads(
    (AUDIT_FIXTURES_DIR / "nodepool-upgrades_az-aks-nodepool-get-upgrades_aks-docs.json").read_text(encoding="utf-8")
)
NEWER = "AKSUbuntu-2204gen2containerd-202510.13.0"  # a week after the clean snapshot's FRESH_IMAGE


def profile(pool: str, latest: str) -> dict[str, Any]:
    """The documented output, for another pool and image (the id's agentPools segment names the pool)."""
    item: dict[str, Any] = copy.deepcopy(PROFILE)
    item["id"] = item["id"].replace("/agentPools/nodepool1/", f"/agentPools/{pool}/")
    item["latestNodeImageVersion"] = latest
    return item


def stale(snapshot: ClusterSnapshot) -> dict[str, str]:
    return {f.node or "": f.message for f in run_audit(snapshot).findings if f.id == "node-image-stale"}


def test_the_documented_output_names_its_pool_and_image() -> None:
    assert latest_node_images([PROFILE]) == {"nodepool1": "AKSUbuntu-1604-2020.10.28"}
    # The REST shape nests it under properties; a profile with neither id nor version is skipped.
    rest = {"id": PROFILE["id"], "properties": {"latestNodeImageVersion": "AKSUbuntu-2204-202510.13.0"}}
    assert latest_node_images([rest, {"name": "default"}]) == {"nodepool1": "AKSUbuntu-2204-202510.13.0"}


def test_a_fresh_image_behind_the_latest_offered_is_stale() -> None:
    # FRESH_IMAGE is 14 days old: the age rule passes it, the pool's profile does not.
    snapshot = replace(edited(clean_snapshot()), nodepool_upgrades=[profile("train", NEWER), profile("infer", FRESH_IMAGE)])
    found = stale(snapshot)
    assert set(found) == {TRAIN_0, TRAIN_1}
    assert f"older than {NEWER}, the latest AKS offers pool train" in found[TRAIN_0]
    assert NODEPOOL_UPGRADES_FILE in found[TRAIN_0] and "judged by age" not in found[TRAIN_0]


def test_an_image_newer_than_the_profile_is_not_stale() -> None:
    snapshot = replace(edited(clean_snapshot()), nodepool_upgrades=[profile("train", "AKSUbuntu-2204gen2containerd-202509.01.0")])
    assert stale(snapshot) == {}


def test_without_a_profile_the_age_rule_judges_and_says_so() -> None:
    snapshot = edited(clean_snapshot())
    find_node(snapshot, INFER_0)["metadata"]["labels"][NODE_IMAGE_LABEL] = "AKSUbuntu-2204gen2containerd-202401.09.0"
    snapshot = replace(snapshot, nodepool_upgrades=[profile("train", FRESH_IMAGE)])
    found = stale(snapshot)
    assert list(found) == [INFER_0]
    assert "judged by age" in found[INFER_0] and "pool infer" in found[INFER_0]


def test_with_profiles_for_every_pool_no_collection_time_is_needed() -> None:
    snapshot = replace(
        edited(clean_snapshot()), collected_at=None, nodepool_upgrades=[profile("train", NEWER), profile("infer", NEWER)]
    )
    report = run_audit(snapshot)
    assert "node-image-stale" in report.checked
    assert not [gap for gap in report.not_checked if "node-image-stale" in gap.ids]
    assert {f.node for f in report.findings if f.id == "node-image-stale"} == {TRAIN_0, TRAIN_1, INFER_0}


def test_the_file_round_trips_through_a_snapshot_folder(tmp_path: Path) -> None:
    snapshot = replace(edited(clean_snapshot()), nodepool_upgrades=[profile("train", NEWER)])
    write_snapshot(snapshot, tmp_path)
    assert read_snapshot(tmp_path).nodepool_upgrades == [profile("train", NEWER)]
    # One object, as `az aks nodepool get-upgrades` prints it for one pool, is read too.
    (tmp_path / NODEPOOL_UPGRADES_FILE).write_text(json.dumps(PROFILE), encoding="utf-8")
    assert read_snapshot(tmp_path).nodepool_upgrades == [PROFILE]
    # Absent from the snapshot: the file is removed, so an earlier collection's is not read.
    write_snapshot(replace(snapshot, nodepool_upgrades=None), tmp_path)
    assert read_snapshot(tmp_path).nodepool_upgrades is None


@pytest.mark.parametrize("text", ['"AKSUbuntu"', "[1, 2]", "{not json"])
def test_a_file_of_another_shape_is_refused(tmp_path: Path, text: str) -> None:
    write_snapshot(edited(clean_snapshot()), tmp_path)
    (tmp_path / NODEPOOL_UPGRADES_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(SnapshotError, match=NODEPOOL_UPGRADES_FILE):
        read_snapshot(tmp_path)
