"""A cluster snapshot: everything the post-deploy checks read, as data, and its folder format on disk.

``aksgpu validate collect --out DIR`` writes a snapshot and ``aksgpu validate --snapshot DIR`` checks one
offline, with the same checks the live path runs. The folder holds:

- ``nodes.json``, ``daemonsets.json``, ``pods.json``: Kubernetes ``List`` objects, as
  ``kubectl get nodes -o json``, ``kubectl get daemonsets -A -o json`` and ``kubectl get pods -A -o json``
  print them (a bare JSON array of objects is read too);
- ``smi/<node-name>.txt``: stdout and stderr of the SMI command run in that node's device plugin pod;
- ``smi/<node-name>.error``: why running it failed (a timeout, no device plugin pod on the node, the
  API server refusing the exec), one line of text. A node with neither file was not reached at all.
  A node with both ran the command and the note says what else happened (a non-zero exit, output cut
  short by the timeout); the checks read its output and show the note beside it.

A snapshot is easy to build by hand from kubectl, so a cluster this tool cannot reach can still be
checked: save the three lists, then ``kubectl exec`` the SMI command into ``smi/<node>.txt`` per node.

Writing is deterministic: the same snapshot gives byte-identical files (items sorted by namespace and
name, keys sorted, LF line ends), so two collections can be compared with ``diff``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NODES_FILE = "nodes.json"
DAEMONSETS_FILE = "daemonsets.json"
PODS_FILE = "pods.json"
SMI_DIR = "smi"
SMI_SUFFIX = ".txt"
ERROR_SUFFIX = ".error"

# Node names are DNS subdomains (RFC 1123). Checking them keeps a hostile or broken name such as
# "../x" from becoming a path outside the snapshot folder.
# https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-subdomain-names
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class SnapshotError(ValueError):
    """A snapshot folder that cannot be read or a snapshot that cannot be written; the message says why."""


@dataclass(frozen=True)
class ClusterSnapshot:
    """What the checks read from a cluster. ``smi`` and ``exec_errors`` are keyed by node name."""

    nodes: list[dict[str, Any]]
    daemonsets: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    smi: dict[str, str]
    exec_errors: dict[str, str]


def read_snapshot(directory: Path | str) -> ClusterSnapshot:
    """Read a snapshot folder; raises ``SnapshotError`` naming the file when one is missing or malformed.

    ``smi/`` may be missing or empty (then every node reads as "exec failed"); files there with other
    suffixes are ignored, so notes kept beside the outputs do no harm.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise SnapshotError(f"{folder}: no such snapshot folder (write one with `aksgpu validate collect --out {folder}`)")
    smi: dict[str, str] = {}
    exec_errors: dict[str, str] = {}
    smi_folder = folder / SMI_DIR
    if smi_folder.is_dir():
        for path in sorted(smi_folder.iterdir()):
            if not path.is_file():
                continue
            if path.name.endswith(SMI_SUFFIX):
                smi[path.name.removesuffix(SMI_SUFFIX)] = _read_text(path)
            elif path.name.endswith(ERROR_SUFFIX):
                exec_errors[path.name.removesuffix(ERROR_SUFFIX)] = _read_text(path).strip()
    return ClusterSnapshot(
        nodes=_read_list(folder / NODES_FILE),
        daemonsets=_read_list(folder / DAEMONSETS_FILE),
        pods=_read_list(folder / PODS_FILE),
        smi=smi,
        exec_errors=exec_errors,
    )


def write_snapshot(snapshot: ClusterSnapshot, directory: Path | str) -> list[Path]:
    """Write ``snapshot`` under ``directory`` (created if needed) and return the files written, in order.

    Outputs in ``smi/`` left by an earlier collection into the same folder are removed, so a node that is
    gone since then does not come back from a stale file.
    """
    folder = Path(directory)
    names = sorted(set(snapshot.smi) | set(snapshot.exec_errors))
    bad = [name for name in names if not _NODE_NAME.match(name)]
    if bad:
        raise SnapshotError(f"not a Kubernetes node name, refusing to use it as a file name: {', '.join(map(repr, bad))}")
    smi_folder = folder / SMI_DIR
    smi_folder.mkdir(parents=True, exist_ok=True)

    written: list[Path] = []
    for file_name, items in ((NODES_FILE, snapshot.nodes), (DAEMONSETS_FILE, snapshot.daemonsets), (PODS_FILE, snapshot.pods)):
        written.append(_write_bytes(folder / file_name, _list_json(items)))

    keep: set[Path] = set()
    for name in names:
        if name in snapshot.smi:
            keep.add(smi_folder / f"{name}{SMI_SUFFIX}")
            written.append(_write_bytes(smi_folder / f"{name}{SMI_SUFFIX}", snapshot.smi[name].encode("utf-8")))
        if name in snapshot.exec_errors:
            keep.add(smi_folder / f"{name}{ERROR_SUFFIX}")
            note = snapshot.exec_errors[name].strip() + "\n"
            written.append(_write_bytes(smi_folder / f"{name}{ERROR_SUFFIX}", note.encode("utf-8")))
    for stale in smi_folder.iterdir():
        if stale.is_file() and stale.name.endswith((SMI_SUFFIX, ERROR_SUFFIX)) and stale not in keep:
            stale.unlink()
    return written


def _list_json(items: Sequence[Mapping[str, Any]]) -> bytes:
    ordered = sorted(items, key=_object_key)
    document = {"apiVersion": "v1", "items": ordered, "kind": "List", "metadata": {"resourceVersion": ""}}
    return (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _object_key(item: Mapping[str, Any]) -> tuple[str, str]:
    metadata = item.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def _write_bytes(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def _read_text(path: Path) -> str:
    # SMI output is mostly ASCII but prints "°C" and may come from a log in another encoding; a stray
    # byte must not hide the driver version.
    return path.read_bytes().decode("utf-8", errors="replace")


def _read_list(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise SnapshotError(f"{path}: missing from the snapshot (save it with kubectl ... -o json)")
    try:
        document = json.loads(_read_text(path))
    except json.JSONDecodeError as error:
        raise SnapshotError(f"{path}: not JSON ({error})") from None
    items = document.get("items") if isinstance(document, dict) else document
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise SnapshotError(f"{path}: expected a Kubernetes List (an object with 'items') or an array of objects")
    return items
