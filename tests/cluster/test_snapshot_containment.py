"""A snapshot is handed around (that is what it is for): one someone else made must not carry the reader's own files
out into ``validate --json``, the audit's JSON or its HTML report. Written as the attacker: symlinks from inside the
snapshot to a kubeconfig with a token, a password file, a git credential line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aks_gpu.cli import audit, validate
from aks_gpu.cluster.snapshot import (
    META_FILE,
    NAMESPACES_FILE,
    NODES_FILE,
    SMI_DIR,
    SnapshotError,
    read_snapshot,
    write_snapshot,
)
from aks_gpu.gpu.smi import parse_smi
from aks_gpu.resolved.targets import plugin_targets
from tests.cluster.snapshots import edited, healthy_snapshot, node_name
from tests.conftest import PROJECT_DIR, stack_model

PROD = stack_model("prod")
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZWFkZXIifQ.c2lnbmF0dXJlLW9mLXRoZS1yZWFkZXI"
SECRETS = {
    "kubeconfig": f"users:\n- name: me\n  user:\n    token: {TOKEN}\n",
    "shadow": "root:$6$Zq8mN3vR$6tY1wX4pL7kJ0hG5fD2sQ9aB8cE7dF6gH5jK4lM3nP2qR1sT0uV9wX8yZ7:19700:0:99999:7:::\n",
    "git-credentials": "https://reader:ghp_R3aderPersonalAccessT0ken0123456789@github.com\n",
}


def secret_parts() -> list[str]:
    return [TOKEN[20:50], "6tY1wX4pL7kJ0hG5", "ghp_R3aderPersonal", "reader:ghp"]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A healthy snapshot whose first node's SMI output and error note are symlinks to the reader's secrets."""
    home = tmp_path / "home"
    home.mkdir()
    for name, text in SECRETS.items():
        (home / name).write_text(text)
    folder = tmp_path / "snapshot"
    write_snapshot(edited(healthy_snapshot(PROD, plugin_targets(PROD), {"train": 2, "infer": 1})), folder)
    first, second = node_name("train", 0), node_name("train", 1)
    (folder / SMI_DIR / f"{first}.txt").unlink()
    (folder / SMI_DIR / f"{first}.txt").symlink_to(home / "kubeconfig")
    (folder / SMI_DIR / f"{first}.error").symlink_to(home / "shadow")
    (folder / SMI_DIR / f"{second}.error").symlink_to(os.path.relpath(home / "git-credentials", folder / SMI_DIR))
    return folder


def assert_no_secret(text: str) -> None:
    for part in secret_parts():
        assert part not in text, f"{part!r} of the reader's secrets is in the output"


def run(module: object, argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="aksgpu")
    module.register(parser.add_subparsers(dest="command"))  # type: ignore[attr-defined]
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


def test_symlinks_out_of_the_snapshot_are_not_followed(hostile: Path) -> None:
    snapshot = read_snapshot(hostile)
    first, second = node_name("train", 0), node_name("train", 1)
    assert first not in snapshot.smi
    assert "outside the snapshot" in snapshot.exec_errors[first] and "outside the snapshot" in snapshot.exec_errors[second]
    assert_no_secret(json.dumps(snapshot.smi) + json.dumps(snapshot.exec_errors))


def test_validate_json_carries_none_of_the_readers_files(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(validate, ["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", str(hostile), "--json"])
    out, err = capsys.readouterr()
    assert code == 1  # the node whose output is not there fails its checks
    assert_no_secret(out + err)
    assert "outside the snapshot" in out


def test_the_audit_and_its_html_carry_none_of_the_readers_files(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "report.html"
    run(audit, ["audit", "--snapshot", str(hostile), "--json", "--html", str(html)])
    out, err = capsys.readouterr()
    assert_no_secret(out + err + html.read_text())


@pytest.mark.parametrize("name", [NODES_FILE, NAMESPACES_FILE, META_FILE])
def test_a_list_or_meta_file_linked_out_of_the_snapshot_is_refused(name: str, hostile: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"kind": "List", "items": []}))
    target = hostile / name
    if target.exists():
        target.unlink()
    target.symlink_to(outside)
    with pytest.raises(SnapshotError, match="outside the snapshot"):
        read_snapshot(hostile)


def test_an_smi_folder_linked_out_of_the_snapshot_is_refused(hostile: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (hostile / SMI_DIR).rename(elsewhere)
    (hostile / SMI_DIR).symlink_to(elsewhere)
    with pytest.raises(SnapshotError, match="outside the snapshot"):
        read_snapshot(hostile)


def test_a_symlink_that_stays_inside_the_snapshot_is_read(hostile: Path) -> None:
    first = node_name("train", 0)
    (hostile / SMI_DIR / f"{first}.txt").unlink()
    (hostile / SMI_DIR / f"{first}.error").unlink()
    (hostile / SMI_DIR / f"{first}.txt").symlink_to(f"{node_name('train', 1)}.txt")
    snapshot = read_snapshot(hostile)
    assert snapshot.smi[first] == snapshot.smi[node_name("train", 1)]


@pytest.mark.parametrize("text", SECRETS.values())
def test_an_excerpt_of_output_that_is_not_smi_carries_no_credential(text: str) -> None:
    # The snapshot's own file, not SMI output: its first line is quoted to say what it is, credentials left out.
    message = parse_smi(text.replace("users:\n- name: me\n  user:\n    ", "")).error
    assert message is not None and "starts with" in message.message
    assert_no_secret(message.message)


def test_a_collection_that_fails_midway_leaves_the_previous_snapshot_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk while writing the third file: before, the first two files were already the new collection's.
    import errno

    from aks_gpu.cluster import snapshot as snapshot_module

    first = edited(healthy_snapshot(PROD, plugin_targets(PROD), {"train": 2, "infer": 1}))
    write_snapshot(first, tmp_path)
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    second = edited(healthy_snapshot(PROD, plugin_targets(PROD), {"train": 1, "infer": 1}))
    original = snapshot_module._StagedFiles.add
    calls = []

    def disk_fills(self: object, path: Path, content: bytes) -> None:
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, path, content)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshot_module._StagedFiles, "add", disk_fills)
    with pytest.raises(OSError, match="No space"):
        write_snapshot(second, tmp_path)
    after = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert after == before  # every file as it was, and no temporary one left
