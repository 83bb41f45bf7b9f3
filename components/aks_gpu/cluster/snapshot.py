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
- optional, for ``aksgpu audit``: ``namespaces.json``, ``resourcequotas.json``, ``networkpolicies.json`` (as
  ``kubectl get namespaces -o json``, ``kubectl get resourcequotas -A -o json``, ``kubectl get networkpolicies -A
  -o json``) and ``meta.json``: ``{"collectedAt": "<RFC 3339 time>"}``, plus ``notCollected`` (file name -> why the
  collector could not read it, e.g. RBAC), and ``cluster``: ``{"context": ..., "server": ...}``, the kubeconfig
  context and API server it was read from (what the audit's report names). A file that is absent is None in the
  snapshot: what depends on it is "not checked", never "passed".
- optional, for the queueing checks of ``aksgpu audit``: ``clusterqueues.json`` and ``workloads.json``, Kueue's
  ClusterQueues and Workloads (kueue.x-k8s.io/v1beta2) as ``kubectl get clusterqueues -o json`` and ``kubectl get
  workloads -A -o json`` print them; ``[]`` where the cluster has no Kueue API.
- optional, for the planned-disruption checks of ``aksgpu audit``: ``events.json``, core/v1 Events on Nodes as
  ``kubectl get events -A --field-selector involvedObject.kind=Node -o json`` prints them (AKS node auto-repair's and
  the Node Problem Detector's scheduled-event events; the collector keeps those, the newest few of each node and
  reason).
- optional, for the node image rule of ``aksgpu audit``: ``nodepool-upgrades.json``, the GPU pools' upgrade profiles
  as ``az aks nodepool get-upgrades`` prints them (one object, or a JSON array of them): with it a node image is judged
  against the latest one AKS offers its pool (``latestNodeImageVersion``), not by its age.

A snapshot is easy to build by hand from kubectl, so a cluster this tool cannot reach can still be
checked: save the three lists, then ``kubectl exec`` the SMI command into ``smi/<node>.txt`` per node.

Writing is deterministic: the same snapshot gives byte-identical files (items sorted by namespace and
name, keys sorted, LF line ends), so two collections can be compared with ``diff``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from aks_gpu.config.problems import clipped
from aks_gpu.input_files import InputFileError, decode_utf8, read_bounded

NODES_FILE = "nodes.json"
DAEMONSETS_FILE = "daemonsets.json"
PODS_FILE = "pods.json"
NAMESPACES_FILE = "namespaces.json"
RESOURCE_QUOTAS_FILE = "resourcequotas.json"
NETWORK_POLICIES_FILE = "networkpolicies.json"
META_FILE = "meta.json"
NODEPOOL_UPGRADES_FILE = "nodepool-upgrades.json"
# Karpenter's NodePools (karpenter.sh/v1): node auto-provisioning's GPU capacity on AKS Automatic and NAP clusters.
NODEPOOLS_FILE = "nodepools.json"
# Kueue's ClusterQueues and Workloads (kueue.x-k8s.io/v1beta2): GPU queues, where the cluster runs Kueue.
CLUSTER_QUEUES_FILE = "clusterqueues.json"
WORKLOADS_FILE = "workloads.json"
# core/v1 Events on Nodes (involvedObject.kind=Node): AKS node auto-repair's and the scheduled events'.
EVENTS_FILE = "events.json"
# The optional lists and the kind of their items.
_OPTIONAL_FILES = (
    (NAMESPACES_FILE, "Namespace"),
    (RESOURCE_QUOTAS_FILE, "ResourceQuota"),
    (NETWORK_POLICIES_FILE, "NetworkPolicy"),
    (NODEPOOLS_FILE, "NodePool"),
    (CLUSTER_QUEUES_FILE, "ClusterQueue"),
    (WORKLOADS_FILE, "Workload"),
    (EVENTS_FILE, "Event"),
)
SMI_DIR = "smi"
SMI_SUFFIX = ".txt"
ERROR_SUFFIX = ".error"

# Node names are DNS subdomains (RFC 1123). Checking them keeps a hostile or broken name such as
# "../x" from becoming a path outside the snapshot folder.
# https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-subdomain-names
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


# What is read from a snapshot folder, at most. A list file holds what `kubectl get ... -o json` prints; the
# probe saves only the GPU nodes and the device plugin pods, a few KB each. An SMI output is a few KB to a few
# hundred KB (`nvidia-smi -q -x` on 8 GPUs); one past its limit fails that node's checks, not the run.
MAX_LIST_FILE_BYTES = 512 << 20
MAX_SMI_FILE_BYTES = 16 << 20
MAX_META_FILE_BYTES = 1 << 20  # meta.json: a time and a few notes


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
    # Optional (None: the file is absent, so what depends on it was not checked).
    namespaces: list[dict[str, Any]] | None = None
    resourcequotas: list[dict[str, Any]] | None = None
    networkpolicies: list[dict[str, Any]] | None = None
    nodepools: list[dict[str, Any]] | None = None
    clusterqueues: list[dict[str, Any]] | None = None
    workloads: list[dict[str, Any]] | None = None
    events: list[dict[str, Any]] | None = None  # events.json: Events on Nodes
    collected_at: str | None = None  # meta.json's collectedAt, RFC 3339
    # nodepool-upgrades.json: `az aks nodepool get-upgrades` outputs (AgentPoolUpgradeProfile), one per pool.
    nodepool_upgrades: list[dict[str, Any]] | None = None
    not_collected: dict[str, str] = field(default_factory=dict)  # optional file -> why the collector has none
    cluster: dict[str, str] = field(default_factory=dict)  # meta.json's cluster: "context" and "server", where known

    def optional_lists(self) -> tuple[tuple[str, list[dict[str, Any]] | None], ...]:
        return (
            (NAMESPACES_FILE, self.namespaces),
            (RESOURCE_QUOTAS_FILE, self.resourcequotas),
            (NETWORK_POLICIES_FILE, self.networkpolicies),
            (NODEPOOLS_FILE, self.nodepools),
            (CLUSTER_QUEUES_FILE, self.clusterqueues),
            (WORKLOADS_FILE, self.workloads),
            (EVENTS_FILE, self.events),
        )


def read_snapshot(directory: Path | str, *, collect: str | None = None) -> ClusterSnapshot:
    """Read a snapshot folder; raises ``SnapshotError`` naming the file when one is missing or malformed.

    ``collect`` is the command that writes one, said when the folder is missing (``{out}`` is the folder); by
    default the stack-less ``aksgpu audit collect --out DIR``.

    ``smi/`` may be missing or empty (then every node reads as "exec failed"); files there with other
    suffixes are ignored, so notes kept beside the outputs do no harm.
    """
    folder = Path(directory)
    if not folder.is_dir():
        command = (collect or "aksgpu audit collect --out {out}").replace("{out}", str(folder))
        raise SnapshotError(f"{folder}: no such snapshot folder (write one with `{command}`)")
    # Snapshots are handed around: nothing in one is followed outside it (a symlink smi/<node>.txt -> ~/.kube/config
    # would put the reader's token into the report). The folder named on the command line is the reader's own choice.
    root = folder.resolve()
    smi: dict[str, str] = {}
    exec_errors: dict[str, str] = {}
    smi_folder = folder / SMI_DIR
    unreadable: dict[str, str] = {}
    if smi_folder.is_dir() and not _inside(root, smi_folder):
        raise SnapshotError(f"{smi_folder}: a symlink to a folder outside the snapshot: not followed")
    if smi_folder.is_dir():
        for path in sorted(smi_folder.iterdir()):
            if path.is_dir() or not path.name.endswith((SMI_SUFFIX, ERROR_SUFFIX)):
                continue
            node = path.name.removesuffix(SMI_SUFFIX).removesuffix(ERROR_SUFFIX)
            try:
                text = _read_text(_contained(root, path), MAX_SMI_FILE_BYTES)
            except InputFileError as error:
                # One node's unreadable file fails that node's checks, with the reason; the others go on.
                unreadable[node] = f"{SMI_DIR}/{path.name} {error}"
                continue
            if path.name.endswith(SMI_SUFFIX):
                smi[node] = text
            else:
                exec_errors[node] = text.strip()
    for node, note in unreadable.items():
        exec_errors[node] = f"{exec_errors[node]}; {note}" if node in exec_errors else note
    optional = {
        name: _read_list(folder / name, kind, root) if os.path.lexists(folder / name) else None for name, kind in _OPTIONAL_FILES
    }
    collected_at, not_collected, cluster = _read_meta(folder / META_FILE, root)
    upgrades_path = folder / NODEPOOL_UPGRADES_FILE
    upgrades = _read_upgrades(upgrades_path, root) if os.path.lexists(upgrades_path) else None
    return ClusterSnapshot(
        nodes=_read_list(folder / NODES_FILE, "Node", root),
        daemonsets=_read_list(folder / DAEMONSETS_FILE, "DaemonSet", root),
        pods=_read_list(folder / PODS_FILE, "Pod", root),
        smi=smi,
        exec_errors=exec_errors,
        namespaces=optional[NAMESPACES_FILE],
        resourcequotas=optional[RESOURCE_QUOTAS_FILE],
        networkpolicies=optional[NETWORK_POLICIES_FILE],
        nodepools=optional[NODEPOOLS_FILE],
        clusterqueues=optional[CLUSTER_QUEUES_FILE],
        workloads=optional[WORKLOADS_FILE],
        events=optional[EVENTS_FILE],
        collected_at=collected_at,
        not_collected=not_collected,
        cluster=cluster,
        nodepool_upgrades=upgrades,
    )


def _read_upgrades(path: Path, root: Path) -> list[dict[str, Any]]:
    """``az aks nodepool get-upgrades`` output: one profile object, or an array of them."""
    try:
        document = json.loads(_read_text(_contained(root, path), MAX_META_FILE_BYTES))
    except (InputFileError, ValueError) as error:
        raise SnapshotError(f"{path.name}: {error}") from None
    profiles = [document] if isinstance(document, dict) else document
    if not isinstance(profiles, list) or not all(isinstance(item, dict) for item in profiles):
        raise SnapshotError(
            f"{path.name}: expected what `az aks nodepool get-upgrades` prints (an object), or an array of those"
        )
    return profiles


def write_snapshot(snapshot: ClusterSnapshot, directory: Path | str) -> list[Path]:
    """Write ``snapshot`` under ``directory`` (created if needed) and return the files written, in order.

    Every file is first written beside its place; only when all are written are they renamed into place, so a full
    disk, a file-size limit or Ctrl-C while writing leaves the previous snapshot as it was (and no temporary file),
    never half of each. Outputs in ``smi/`` left by an earlier collection into the same folder are then removed, so a
    node that is gone since then does not come back from a stale file.
    """
    folder = Path(directory)
    names = sorted(set(snapshot.smi) | set(snapshot.exec_errors))
    bad = [name for name in names if not _NODE_NAME.fullmatch(name)]
    if bad:
        raise SnapshotError(f"not a Kubernetes node name, refusing to use it as a file name: {', '.join(map(repr, bad))}")
    smi_folder = folder / SMI_DIR
    smi_folder.mkdir(parents=True, exist_ok=True)

    staged = _StagedFiles()
    keep: set[Path] = set()
    try:
        for file_name, items in (
            (NODES_FILE, snapshot.nodes),
            (DAEMONSETS_FILE, snapshot.daemonsets),
            (PODS_FILE, snapshot.pods),
        ):
            staged.add(folder / file_name, _list_json(items))
        absent = _stage_optional(snapshot, folder, staged)
        for name in names:
            if name in snapshot.smi:
                keep.add(smi_folder / f"{name}{SMI_SUFFIX}")
                staged.add(smi_folder / f"{name}{SMI_SUFFIX}", snapshot.smi[name].encode("utf-8"))
            if name in snapshot.exec_errors:
                keep.add(smi_folder / f"{name}{ERROR_SUFFIX}")
                note = snapshot.exec_errors[name].strip() + "\n"
                staged.add(smi_folder / f"{name}{ERROR_SUFFIX}", note.encode("utf-8"))
        written = staged.commit()
    except BaseException:
        staged.abort()
        raise
    for path in absent:
        if path.is_file():
            path.unlink()
    for stale in smi_folder.iterdir():
        if stale.is_file() and stale.name.endswith((SMI_SUFFIX, ERROR_SUFFIX)) and stale not in keep:
            stale.unlink()
    return written


def _stage_optional(snapshot: ClusterSnapshot, folder: Path, staged: _StagedFiles) -> list[Path]:
    """Stage the optional lists and meta.json; returns those the snapshot lacks, to be removed once the rest is in
    place, so an earlier collection's is not read."""
    absent: list[Path] = []
    for file_name, items in snapshot.optional_lists():
        if items is not None:
            staged.add(folder / file_name, _list_json(items))
        else:
            absent.append(folder / file_name)
    meta: dict[str, Any] = {}
    if snapshot.collected_at is not None:
        meta["collectedAt"] = snapshot.collected_at
    if snapshot.not_collected:
        meta["notCollected"] = dict(snapshot.not_collected)
    if snapshot.cluster:
        meta["cluster"] = dict(snapshot.cluster)
    if snapshot.nodepool_upgrades is not None:
        profiles = sorted(snapshot.nodepool_upgrades, key=lambda item: str(item.get("id", "")))
        staged.add(folder / NODEPOOL_UPGRADES_FILE, (json.dumps(profiles, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    else:
        absent.append(folder / NODEPOOL_UPGRADES_FILE)
    if meta:
        staged.add(folder / META_FILE, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    else:
        absent.append(folder / META_FILE)
    return absent


class _StagedFiles:
    """Files written beside their place (``.NAME.<random>.new``), renamed into place together by ``commit``: whatever
    stood there (a named pipe, whose opening for writing would wait for a reader for ever, or a symlink, which would
    be written through) is replaced, and a reader never finds a file half-written."""

    def __init__(self) -> None:
        self.staged: list[tuple[str, Path]] = []

    def add(self, path: Path, content: bytes) -> None:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
        self.staged.append((temporary, path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes it private; the mode open() would have given

    def commit(self) -> list[Path]:
        for temporary, path in self.staged:
            os.replace(temporary, path)
        done = [path for _, path in self.staged]
        self.staged = []
        return done

    def abort(self) -> None:
        for temporary, _ in self.staged:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        self.staged = []


# RFC 3339 date-time (https://www.rfc-editor.org/rfc/rfc3339#section-5.6): an offset is required.
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$",
    re.ASCII,  # \d is any Unicode digit otherwise: full-width digits (U+FF10..U+FF19) are no RFC 3339 time
)


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 time (``2025-03-01T09:30:00Z``, fractions up to nanoseconds as Go writes them, any offset) as
    an aware datetime; raises ValueError for anything else (a time without an offset is not RFC 3339)."""
    match = _RFC3339.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"not an RFC 3339 time such as 2025-03-01T09:30:00Z: {str(text)[:60]!r}")
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    micro = int((match.group(7) or "0").ljust(6, "0")[:6])
    offset = timedelta(0)
    if match.group(9):
        offset = timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
        offset = -offset if match.group(9) == "-" else offset
    # datetime() refuses a month 13 or a second 60 (a leap second, which Kubernetes never writes) with ValueError.
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=timezone(offset))


def rfc3339(moment: datetime) -> str:
    """``moment`` in UTC as RFC 3339 with a Z, to the second (what meta.json's collectedAt holds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path``, every symlink on it followed, is within the snapshot folder ``root`` (resolved)."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop: not inside anything
        return False


def _contained(root: Path, path: Path) -> Path:
    """``path`` with its symlinks resolved, when that stays within the snapshot folder ``root``; ``InputFileError``
    otherwise. The result is opened without following a symlink again (``read_bounded(follow_symlinks=False)``), so
    one swapped in since is refused too."""
    if not _inside(root, path):
        raise InputFileError("is a symlink to a file outside the snapshot: not followed (copy the file into the snapshot)")
    return path.resolve()


def _read_meta(path: Path, root: Path) -> tuple[str | None, dict[str, str], dict[str, str]]:
    if not os.path.lexists(path):
        return None, {}, {}
    try:
        document = json.loads(_read_text(_contained(root, path), MAX_META_FILE_BYTES))
    except InputFileError as error:
        raise SnapshotError(f"{path}: {error}") from None
    except (ValueError, RecursionError) as error:
        raise SnapshotError(f"{path}: not JSON ({str(error)[:120]})") from None
    if not isinstance(document, dict):
        raise SnapshotError(f"{path}: expected an object such as {{\"collectedAt\": \"2025-03-01T09:30:00Z\"}}")
    collected = document.get("collectedAt")
    if collected is not None:
        try:
            parse_rfc3339(collected)
        except ValueError as error:
            raise SnapshotError(f"{path}: collectedAt: {error}") from None
    notes = document.get("notCollected") or {}
    if not isinstance(notes, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in notes.items()):
        raise SnapshotError(f"{path}: notCollected must be an object of file name -> reason (strings)")
    cluster = document.get("cluster") or {}
    if not isinstance(cluster, dict) or not all(
        key in ("context", "server") and isinstance(value, str) for key, value in cluster.items()
    ):
        raise SnapshotError(f'{path}: cluster must be an object such as {{"context": "prod", "server": "https://..."}}')
    return collected, dict(notes), dict(cluster)


def _list_json(items: Sequence[Mapping[str, Any]]) -> bytes:
    ordered = sorted(items, key=_object_key)
    document = {"apiVersion": "v1", "items": ordered, "kind": "List", "metadata": {"resourceVersion": ""}}
    return (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _object_key(item: Mapping[str, Any]) -> tuple[str, str]:
    metadata = item.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def _umask() -> int:
    # Read by setting it: there is no other way. Written after the probe's threads are done.
    current = os.umask(0o022)
    os.umask(current)
    return current


def _read_text(path: Path, limit: int) -> str:
    # SMI output is mostly ASCII but prints "°C" and may come from a log in another encoding; a stray
    # byte must not hide the driver version.
    return read_bounded(path, limit, follow_symlinks=False).decode("utf-8", errors="replace")


def _read_list(path: Path, kind: str, root: Path) -> list[dict[str, Any]]:
    if not os.path.lexists(path):
        raise SnapshotError(f"{path}: missing from the snapshot (save it with kubectl ... -o json)")
    try:
        real = _contained(root, path)
    except InputFileError as error:
        raise SnapshotError(f"{path}: {error}") from None
    if not real.is_file():
        raise SnapshotError(f"{path}: not a regular file (save it with kubectl ... -o json)")
    try:
        # JSON is UTF-8 (RFC 8259, section 8.1): a file in another encoding (PowerShell 5.1 redirects write UTF-16)
        # is named as such, rather than read as replacement characters and reported as "not JSON".
        document = json.loads(decode_utf8(read_bounded(real, MAX_LIST_FILE_BYTES, follow_symlinks=False)))
    except InputFileError as error:
        hint = (
            " (for pods, save only the device plugin namespaces: kubectl get pods -n <namespace> -o json)"
            if "limit" in str(error)
            else ""
        )
        raise SnapshotError(f"{path}: {error}{hint}") from None
    except RecursionError:
        raise SnapshotError(f"{path}: JSON nested too deeply to read (Kubernetes objects are a few dozen levels deep)") from None
    except ValueError as error:  # JSONDecodeError, or an integer past Python's 4,300-digit limit
        if not isinstance(error, json.JSONDecodeError):
            raise SnapshotError(f"{path}: holds a number of more than 4,300 digits (the limit)") from None
        raise SnapshotError(f"{path}: not JSON ({str(error)[:120]})") from None
    items = document.get("items") if isinstance(document, dict) else document
    if not isinstance(items, list):
        raise SnapshotError(f"{path}: expected a Kubernetes List (an object with 'items') or an array of objects")
    problem = shape_problem(items, kind)
    if problem is not None:
        raise SnapshotError(f"{path}: {problem}")
    return items


# ---------------------------------------------------------------- the shape of what the checks read
#
# The checks, the audit and the probe read these fields, as the Kubernetes API defines them (core/v1 Node, Pod,
# Namespace, ResourceQuota, apps/v1 DaemonSet, networking.k8s.io/v1 NetworkPolicy:
# https://kubernetes.io/docs/reference/kubernetes-api/). An object where one of them has
# another type (string metadata, list labels, "x" as a count) is not what an API server or kubectl writes:
# the whole file is refused, naming the object and the field, rather than crashing a check or misreading it.
# Fields not listed are not read, so they are not checked. Every field may be absent or null except
# metadata and metadata.name.

_Check = Callable[[Any], bool]
# A Kubernetes resource quantity ("8", "500m", "16Gi", "1e3"), ASCII digits only.
# https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
_QUANTITY = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$")


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_map(value: Any) -> bool:
    return isinstance(value, dict)


def _is_str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _is_quantity_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) and _QUANTITY.fullmatch(v) for v in value.values())


def _is_map_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_selector(value: Any) -> bool:
    if not isinstance(value, dict) or not _is_str_map(value.get("matchLabels") or {}):
        return False
    expressions = value.get("matchExpressions") or []
    return isinstance(expressions, list) and all(
        isinstance(e, dict)
        and isinstance(e.get("key"), str)
        and isinstance(e.get("operator"), str)
        and _is_str_list(e.get("values") or [])
        for e in expressions
    )


def _is_peer(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    block = value.get("ipBlock")
    if block is not None and not (
        isinstance(block, dict) and isinstance(block.get("cidr"), str) and _is_str_list(block.get("except") or [])
    ):
        return False
    return all(value.get(key) is None or _is_selector(value[key]) for key in ("podSelector", "namespaceSelector"))


def _is_peer_list(value: Any) -> bool:
    return isinstance(value, list) and all(_is_peer(peer) for peer in value)


_WHAT: dict[_Check, str] = {
    _is_str: "a string",
    _is_int: "a whole number",
    _is_bool: "true or false",
    _is_map: "an object",
    _is_str_map: "an object of strings",
    _is_quantity_map: 'an object of quantity strings (such as "8" or "16Gi")',
    _is_str_list: "a list of strings",
    _is_map_list: "a list of objects",
    _is_peer_list: "a list of peers (ipBlock with a cidr string; podSelector, namespaceSelector as label selectors)",
}

_METADATA: dict[str, _Check] = {
    "metadata": _is_map,
    "metadata.name": _is_str,
    "metadata.namespace": _is_str,
    "metadata.uid": _is_str,
    "metadata.labels": _is_str_map,
    "metadata.deletionTimestamp": _is_str,
    "spec": _is_map,
    "status": _is_map,
}
_CONDITION: dict[str, _Check] = {"type": _is_str, "status": _is_str, "reason": _is_str, "message": _is_str}
_CONTAINER_STATUS: dict[str, _Check] = {
    "name": _is_str,
    "ready": _is_bool,
    "state": _is_map,
    "state.waiting": _is_map,
    "state.waiting.reason": _is_str,
    "state.terminated": _is_map,
    "state.terminated.reason": _is_str,
    "state.running": _is_map,
}
# What `aksgpu audit` reads of a container: what it requests (components/aks_gpu/cluster/inventory.py).
_CONTAINER: dict[str, _Check] = {
    "name": _is_str,
    "restartPolicy": _is_str,
    "resources": _is_map,
    "resources.requests": _is_quantity_map,
    "resources.limits": _is_quantity_map,
}
_FIELDS: dict[str, dict[str, _Check]] = {
    "Node": {
        **_METADATA,
        "spec.unschedulable": _is_bool,
        "status.allocatable": _is_quantity_map,
        "status.capacity": _is_quantity_map,
    },
    "Pod": {
        **_METADATA,
        "metadata.annotations": _is_str_map,
        "spec.nodeName": _is_str,
        "spec.overhead": _is_quantity_map,
        "status.phase": _is_str,
    },
    # The optional lists `aksgpu audit` reads (core/v1 Namespace and ResourceQuota, networking.k8s.io/v1 NetworkPolicy).
    "Namespace": dict(_METADATA),
    "ResourceQuota": {**_METADATA, "spec.hard": _is_quantity_map, "spec.scopes": _is_str_list, "spec.scopeSelector": _is_map},
    "NetworkPolicy": {
        **_METADATA,
        "spec.podSelector": _is_map,
        "spec.podSelector.matchLabels": _is_str_map,
        "spec.policyTypes": _is_str_list,
    },
    "DaemonSet": {
        **_METADATA,
        "spec.selector": _is_map,
        "spec.selector.matchLabels": _is_str_map,
        "spec.template": _is_map,
        "spec.template.metadata": _is_map,
        "spec.template.metadata.labels": _is_str_map,
        **{
            f"status.{count}": _is_int
            for count in (
                "desiredNumberScheduled",
                "currentNumberScheduled",
                "numberReady",
                "numberAvailable",
                "numberUnavailable",
                "numberMisscheduled",
                "updatedNumberScheduled",
            )
        },
    },
    # Karpenter's NodePool (karpenter.sh/v1): what the "automatic" practice reads (audit/nap.py).
    "NodePool": {
        **_METADATA,
        "spec.template": _is_map,
        "spec.template.metadata": _is_map,
        "spec.template.metadata.labels": _is_str_map,
        "spec.template.spec": _is_map,
        "spec.template.spec.expireAfter": _is_str,
        "spec.disruption": _is_map,
        "spec.disruption.consolidationPolicy": _is_str,
        "spec.limits": _is_map,
    },
    # Kueue's ClusterQueue and Workload (kueue.x-k8s.io/v1beta2, sigs.k8s.io/kueue@v0.17.0
    # apis/kueue/v1beta2/clusterqueue_types.go, workload_types.go): what the queueing checks read (audit/queueing.py).
    "ClusterQueue": {**_METADATA, "spec.cohortName": _is_str},
    # core/v1 Event (k8s.io/api v0.36.3 core/v1/types.go, Event, EventSource, EventSeries): what the disruption checks
    # read (audit/disruption.py). Times are RFC 3339 strings; count and series.count whole numbers.
    "Event": {
        **_METADATA,
        "involvedObject": _is_map,
        "involvedObject.kind": _is_str,
        "involvedObject.name": _is_str,
        "reason": _is_str,
        "message": _is_str,
        "type": _is_str,
        "source": _is_map,
        "source.component": _is_str,
        "reportingComponent": _is_str,
        "count": _is_int,
        "firstTimestamp": _is_str,
        "lastTimestamp": _is_str,
        "eventTime": _is_str,
        "series": _is_map,
        "series.count": _is_int,
        "series.lastObservedTime": _is_str,
    },
    "Workload": {
        **_METADATA,
        "spec.queueName": _is_str,
        "status.admission": _is_map,
        "status.admission.clusterQueue": _is_str,
    },
}
# Lists of objects inside an object, each item checked with its own fields.
_LISTS: dict[str, dict[str, dict[str, _Check]]] = {
    "Node": {"status.conditions": _CONDITION, "spec.taints": {"key": _is_str, "value": _is_str, "effect": _is_str}},
    "Pod": {
        "status.conditions": _CONDITION,
        "status.containerStatuses": _CONTAINER_STATUS,
        "status.initContainerStatuses": _CONTAINER_STATUS,
        "metadata.ownerReferences": {"kind": _is_str, "name": _is_str},
        "spec.containers": _CONTAINER,
        "spec.initContainers": _CONTAINER,
    },
    "DaemonSet": {},
    "Namespace": {},
    "ResourceQuota": {"spec.scopeSelector.matchExpressions": {"scopeName": _is_str, "operator": _is_str}},
    "NetworkPolicy": {
        "spec.podSelector.matchExpressions": {"key": _is_str, "operator": _is_str, "values": _is_str_list},
        "spec.ingress": {"from": _is_peer_list},
        "spec.egress": {"to": _is_peer_list},
    },
    "NodePool": {
        "spec.template.spec.requirements": {"key": _is_str, "operator": _is_str, "values": _is_str_list},
        "spec.template.spec.taints": {"key": _is_str, "value": _is_str, "effect": _is_str},
        "spec.disruption.budgets": {"nodes": _is_str, "reasons": _is_str_list},
    },
    "Event": {},
    "ClusterQueue": {
        "spec.resourceGroups": {"coveredResources": _is_str_list, "flavors": _is_map_list},
        "status.flavorsUsage": {"name": _is_str, "resources": _is_map_list},
        "status.flavorsReservation": {"name": _is_str, "resources": _is_map_list},
        "status.conditions": _CONDITION,
    },
    "Workload": {
        "status.conditions": _CONDITION,
        "spec.podSets": {"name": _is_str, "count": _is_int},
        "status.admission.podSetAssignments": {"name": _is_str, "flavors": _is_str_map, "resourceUsage": _is_quantity_map},
    },
}
_REQUIRED = ("metadata", "metadata.name")


def shape_problem(items: Sequence[Any], kind: str) -> str | None:
    """What is wrong with the first object of ``items`` (objects of a kind of ``_FIELDS``) that has a
    field of the wrong type, naming the object and the field; None when every object reads as the API has it."""
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            return f"items[{index}] is {_type_name(item)}, not a {kind} object"
        name = _field(item, "metadata.name")
        where = f"items[{index}] ({kind} {name})" if isinstance(name, str) else f"items[{index}] ({kind})"
        # `kubectl get nodes,pods -o json` writes one List of both kinds; each item carries its kind there (an API
        # server's list leaves it out). One of another kind is not read as this one.
        other = item.get("kind")
        if other is not None and other != kind:
            shown = clipped(str(other), 60) if isinstance(other, str) else _type_name(other)
            return f"items[{index}] is a {shown}, not a {kind}: save each kind in its own file (kubectl get <kind> -o json)"
        problem = _fields_problem(item, _FIELDS[kind], _REQUIRED)
        if problem is None:
            for list_path, fields in _LISTS[kind].items():
                entries = _field(item, list_path)
                if entries is None:
                    continue
                if not isinstance(entries, list):
                    problem = f"{list_path} must be a list, not {_type_name(entries)}"
                    break
                for position, entry in enumerate(entries):
                    if not isinstance(entry, dict):
                        problem = f"{list_path}[{position}] must be an object, not {_type_name(entry)}"
                    else:
                        inner = _fields_problem(entry, fields, ())
                        problem = f"{list_path}[{position}].{inner}" if inner else None
                    if problem:
                        break
                if problem:
                    break
        if problem is not None:
            return f"{where}: {problem}"
    return None


def _fields_problem(item: Mapping[str, Any], fields: Mapping[str, _Check], required: Sequence[str]) -> str | None:
    for path, check in fields.items():
        value = _field(item, path)
        if value is None:
            if path in required:
                return f"{path} is missing"
            continue
        if not check(value):
            return f"{path} must be {_WHAT[check]}, not {_type_name(value)}"
    return None


def _field(item: Mapping[str, Any], path: str) -> Any:
    value: Any = item
    for part in path.split("."):
        if not isinstance(value, dict):
            return None  # the parent's own check reports it
        value = value.get(part)
    return value


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {json.dumps(text)}"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# The outputs of the active diagnostics (`aksgpu validate --deep --snapshot DIR`): diag/<node>/<tool>.txt, the tool
# named as aks_gpu.validation.diagnostics.tools names it (cuda-context.txt, nccl.txt, dcgm-diag.txt).
DIAG_DIR = "diag"


def read_diag_outputs(directory: Path | str) -> dict[str, dict[str, str]]:
    """Per node, per tool, the recorded output of ``<directory>/diag/<node>/<tool>.txt``. Nothing is followed outside
    the folder; a file that cannot be read (too large, not a regular file, a symlink out) is left out, so its tool
    reads as "no output" and its node is inconclusive. No ``diag/`` folder: no outputs."""
    folder = Path(directory)
    root = folder.resolve()
    found: dict[str, dict[str, str]] = {}
    diag = folder / DIAG_DIR
    if not diag.is_dir() or not _inside(root, diag):
        return found
    for node_dir in sorted(diag.iterdir()):
        if not node_dir.is_dir() or not _inside(root, node_dir):
            continue
        for path in sorted(node_dir.iterdir()):
            if not path.name.endswith(SMI_SUFFIX):
                continue
            try:
                found.setdefault(node_dir.name, {})[path.name.removesuffix(SMI_SUFFIX)] = _read_text(
                    _contained(root, path), MAX_SMI_FILE_BYTES
                )
            except InputFileError:
                continue
    return found
