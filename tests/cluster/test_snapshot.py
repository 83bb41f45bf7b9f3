"""The snapshot folder format: what ``collect`` writes, what ``--snapshot`` reads, and the test builder's SMI text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aks_gpu.cluster.snapshot import ClusterSnapshot, SnapshotError, read_snapshot, write_snapshot
from aks_gpu.gpu.smi import parse_smi
from aks_gpu.resolved.targets import plugin_targets
from tests.cluster.snapshots import as_list_json, healthy_snapshot, node_name, nvidia_smi_table
from tests.conftest import stack_model

PROD = stack_model("prod")


def prod_snapshot() -> ClusterSnapshot:
    snapshot = healthy_snapshot(PROD, plugin_targets(PROD), {"train": 2, "infer": 1})
    snapshot.exec_errors[node_name("train", 1)] = "command exited with code 9"
    return snapshot


def tree(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_written_snapshot_reads_back_equal(tmp_path: Path) -> None:
    snapshot = prod_snapshot()
    written = write_snapshot(snapshot, tmp_path / "snap")
    back = read_snapshot(tmp_path / "snap")

    assert back.smi == snapshot.smi
    assert back.exec_errors == snapshot.exec_errors
    key = lambda item: (item["metadata"].get("namespace", ""), item["metadata"]["name"])  # noqa: E731
    assert back.nodes == sorted(snapshot.nodes, key=key)
    assert back.pods == sorted(snapshot.pods, key=key)
    assert back.daemonsets == sorted(snapshot.daemonsets, key=key)
    assert [str(path.relative_to(tmp_path / "snap")) for path in written] == [
        "nodes.json",
        "daemonsets.json",
        "pods.json",
        f"smi/{node_name('infer', 0)}.txt",
        f"smi/{node_name('train', 0)}.txt",
        f"smi/{node_name('train', 1)}.txt",
        f"smi/{node_name('train', 1)}.error",
    ]


def test_the_files_are_what_kubectl_prints(tmp_path: Path) -> None:
    write_snapshot(prod_snapshot(), tmp_path)
    nodes = json.loads((tmp_path / "nodes.json").read_text(encoding="utf-8"))
    assert nodes["kind"] == "List"
    assert nodes["apiVersion"] == "v1"
    assert {item["kind"] for item in nodes["items"]} == {"Node"}
    assert (tmp_path / "smi" / f"{node_name('train', 1)}.error").read_text(encoding="utf-8") == "command exited with code 9\n"


def test_writing_is_deterministic_whatever_order_the_api_server_used(tmp_path: Path) -> None:
    snapshot = prod_snapshot()
    shuffled = ClusterSnapshot(
        nodes=list(reversed(snapshot.nodes)),
        daemonsets=list(reversed(snapshot.daemonsets)),
        pods=list(reversed(snapshot.pods)),
        smi=dict(reversed(list(snapshot.smi.items()))),
        exec_errors=snapshot.exec_errors,
    )
    write_snapshot(snapshot, tmp_path / "a")
    write_snapshot(shuffled, tmp_path / "b")
    assert tree(tmp_path / "a") == tree(tmp_path / "b")


def test_outputs_left_by_an_earlier_collection_are_removed(tmp_path: Path) -> None:
    write_snapshot(prod_snapshot(), tmp_path)
    (tmp_path / "smi" / "notes.md").write_text("kept", encoding="utf-8")
    smaller = healthy_snapshot(PROD, plugin_targets(PROD), {"train": 1})
    write_snapshot(smaller, tmp_path)

    assert sorted(path.name for path in (tmp_path / "smi").iterdir()) == [f"{node_name('train', 0)}.txt", "notes.md"]
    assert read_snapshot(tmp_path).smi.keys() == {node_name("train", 0)}


def test_reads_kubectl_lists_and_bare_arrays_and_a_folder_without_smi(tmp_path: Path) -> None:
    snapshot = prod_snapshot()
    (tmp_path / "nodes.json").write_text(as_list_json(snapshot.nodes), encoding="utf-8")
    (tmp_path / "daemonsets.json").write_text(json.dumps(snapshot.daemonsets), encoding="utf-8")
    (tmp_path / "pods.json").write_text(as_list_json(snapshot.pods), encoding="utf-8")
    back = read_snapshot(tmp_path)
    assert back.nodes == snapshot.nodes
    assert back.daemonsets == snapshot.daemonsets
    assert back.smi == {}
    assert back.exec_errors == {}


def test_an_smi_file_with_a_stray_byte_still_shows_its_driver(tmp_path: Path) -> None:
    write_snapshot(healthy_snapshot(PROD, plugin_targets(PROD), {"train": 1}), tmp_path)
    path = tmp_path / "smi" / f"{node_name('train', 0)}.txt"
    path.write_bytes(path.read_bytes().replace(b"30C", b"30\xb0C", 1))  # a latin-1 degree sign
    text = read_snapshot(tmp_path).smi[node_name("train", 0)]
    assert parse_smi(text).driver_version == "565.57.01"


@pytest.mark.parametrize(
    ("break_it", "complaint"),
    [
        (lambda folder: (folder / "pods.json").unlink(), "pods.json: missing from the snapshot"),
        (lambda folder: (folder / "nodes.json").write_text("{not json", encoding="utf-8"), "nodes.json: not JSON"),
        (lambda folder: (folder / "daemonsets.json").write_text('{"items": 3}', encoding="utf-8"), "expected a Kubernetes List"),
        # Windows PowerShell 5.1's `kubectl get nodes -o json > nodes.json` writes UTF-16 with a byte order mark.
        (
            lambda folder: (folder / "nodes.json").write_bytes((folder / "nodes.json").read_text("utf-8").encode("utf-16")),
            "nodes.json: is UTF-16 encoded",
        ),
        (lambda folder: (folder / "pods.json").write_bytes(b'{"x": ' + b"9" * 5000 + b"}"), "more than 4,300 digits"),
    ],
)
def test_a_broken_snapshot_names_the_file(tmp_path: Path, break_it: object, complaint: str) -> None:
    write_snapshot(prod_snapshot(), tmp_path)
    break_it(tmp_path)  # type: ignore[operator]
    with pytest.raises(SnapshotError, match=complaint):
        read_snapshot(tmp_path)


def test_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no such snapshot folder"):
        read_snapshot(tmp_path / "nope")


@pytest.mark.parametrize("name", ["../escape", "a/b", "UPPER", ""])
def test_a_name_that_is_no_node_name_is_refused_as_a_file_name(tmp_path: Path, name: str) -> None:
    snapshot = ClusterSnapshot(nodes=[], daemonsets=[], pods=[], smi={name: "x"}, exec_errors={})
    with pytest.raises(SnapshotError, match="not a Kubernetes node name"):
        write_snapshot(snapshot, tmp_path / "snap")
    assert not (tmp_path / "escape").exists()


# ---------------------------------------------------------------- the builder's generated nvidia-smi


@pytest.mark.parametrize(("gpus", "mig", "devices"), [(8, False, 0), (1, True, 7), (2, True, 3), (1, True, 0)])
def test_generated_nvidia_smi_reads_as_what_it_claims(gpus: int, mig: bool, devices: int) -> None:
    text = nvidia_smi_table(
        gpus=gpus,
        gpu_name="NVIDIA A100 80GB PCIe",
        memory_mib=81920,
        driver="550.127.05",
        mig=mig,
        mig_devices_per_gpu=devices,
        seed=3,
    )
    report = parse_smi(text, "nvidia")
    assert report.error is None
    assert report.driver_version == "550.127.05"
    assert [(gpu.index, gpu.name, gpu.memory_total_mib, gpu.mig_mode) for gpu in report.gpus] == [
        (index, "NVIDIA A100 80GB PCIe", 81920, "Enabled" if mig else "Disabled") for index in range(gpus)
    ]
    assert len(report.mig_devices) == gpus * devices
    # The layout of the real 565 output (fixture 02): every box line 91 columns wide.
    assert {len(line) for line in text.splitlines() if line.startswith(("|", "+"))} == {91}


def test_writing_replaces_a_fifo_or_a_symlink_in_the_folder_rather_than_writing_through_it(tmp_path: Path) -> None:
    # Opening a named pipe for writing waits for a reader for ever; writing through a symlink would change the file
    # it points at (in a shared folder, anyone's). Each file is written beside and renamed into place.
    folder = tmp_path / "snap"
    folder.mkdir()
    os.mkfifo(folder / "nodes.json")
    elsewhere = tmp_path / "precious.txt"
    elsewhere.write_text("keep me", encoding="utf-8")
    (folder / "pods.json").symlink_to(elsewhere)
    write_snapshot(prod_snapshot(), folder)
    assert elsewhere.read_text(encoding="utf-8") == "keep me"
    assert (folder / "nodes.json").is_file() and not (folder / "pods.json").is_symlink()
    names = sorted(node["metadata"]["name"] for node in prod_snapshot().nodes)
    assert sorted(node["metadata"]["name"] for node in read_snapshot(folder).nodes) == names
    assert not [path.name for path in folder.iterdir() if path.name.startswith(".")]
