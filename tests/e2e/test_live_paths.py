"""The live paths of `aksgpu audit`, `aksgpu audit collect` and `aksgpu validate` against the prod stack's local
cluster (the real API server, TLS, RBAC), as a ServiceAccount holding exactly the RBAC docs/audit.md states: list
nodes, pods, daemonsets, namespaces, resourcequotas, networkpolicies and events cluster-wide, and `get` and `create`
on `pods/exec`. Each runs with no 403, reports the simulated GPU nodes and exits with its documented status.

The exec goes through the real server's path too (the API server to kwok, which plays the kubelet): kwok runs an
exec only where an `Exec` maps the pod to a local command. Every GPU node but one gets an `Exec` for each of its pods
that serves a recorded `nvidia-smi -q -x` of its pool's GPU model (the example snapshot's, examples/snapshots/healthy)
through `aksgpu local`'s SMI stand-in, so its health is read and judged; the one left out shows what a node whose
exec fails reports (kwok: "no exec found"; validate: exit 1; collect: `smi/<node>.error`)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.cluster.snapshot import rfc3339
from aks_gpu.local.control_plane import recorded_output_name, smi_exec
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.targets import smi_command
from tests.audit.clusters import REBOOT_END, REBOOT_START, node_event
from tests.conftest import PROJECT_DIR, stack_model
from tests.e2e.conftest import LocalCluster

STACK = "prod"
ACCOUNT, NAMESPACE = "aksgpu-reader", "default"
# docs/audit.md ("A live audit needs...", "RBAC: list nodes, pods, daemonsets, ..."): the rules as written there.
READER_RBAC = f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {ACCOUNT}, namespace: {NAMESPACE}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ACCOUNT}}}
rules:
- {{apiGroups: [""], resources: [nodes, pods, namespaces, resourcequotas, events], verbs: [list]}}
- {{apiGroups: [apps], resources: [daemonsets], verbs: [list]}}
- {{apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [list]}}
- {{apiGroups: [karpenter.sh], resources: [nodepools], verbs: [list]}}
- {{apiGroups: [kueue.x-k8s.io], resources: [clusterqueues, workloads], verbs: [list]}}
- {{apiGroups: [""], resources: [pods/exec], verbs: [get, create]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ACCOUNT}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ACCOUNT}}}
subjects: [{{kind: ServiceAccount, name: {ACCOUNT}, namespace: {NAMESPACE}}}]
"""
KWOK_NO_EXEC = "no exec found for container"
# A recorded `nvidia-smi -q -x` per GPU model of the prod stack's pools (the healthy example snapshot's).
RECORDED_SMI = {
    "H100": PROJECT_DIR / "examples/snapshots/healthy/smi/aks-train-31415926-vmss000000.txt",
    "A100": PROJECT_DIR / "examples/snapshots/healthy/smi/aks-infer-31415926-vmss000000.txt",
}
EXEC_SERVED_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def reader(prod: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig of the ServiceAccount (a token from `kubectl create token`), against the local server."""
    applied = prod.kubectl("apply", "-f", "-", stdin=READER_RBAC)
    assert applied.returncode == 0, applied.stderr
    token = prod.kubectl("create", "token", ACCOUNT, "-n", NAMESPACE, "--duration=1h")
    assert token.returncode == 0, token.stderr
    admin = yaml.safe_load(prod.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": ACCOUNT, "user": {"token": token.stdout.strip()}}],
        "contexts": [{"name": ACCOUNT, "context": {"cluster": "local", "user": ACCOUNT}}],
        "current-context": ACCOUNT,
    }
    path = tmp_path_factory.mktemp("reader") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    yield path
    prod.kubectl("delete", "-f", "-", "--wait=false", stdin=READER_RBAC)


@dataclass(frozen=True)
class Served:
    recorded: dict[str, str]  # node: the SMI output its pods' execs print
    unserved: str  # the GPU node left without an Exec


@pytest.fixture(scope="module")
def served(prod: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pools = {pool.name: pool for pool in stack_model(STACK).pools}
    nodes = sorted(gpu_nodes(prod))
    # The system pool's nodes carry no aks-gpu pool label (node_labels.py labels the user pools only): read it off the
    # GPU nodes alone.
    pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][POOL_LABEL]
               for n in prod.json("get", "nodes")["items"] if n["metadata"]["name"] in nodes}
    unserved, served_nodes = nodes[-1], nodes[:-1]
    folders: dict[str, Path] = {}
    recorded: dict[str, str] = {}
    for node in served_nodes:
        model = pools[pool_of[node]].gpu_model
        assert model is not None
        (source,) = (path for key, path in RECORDED_SMI.items() if key in model.key)
        folder = folders.setdefault(pool_of[node], tmp_path_factory.mktemp(f"smi-{pool_of[node]}"))
        (folder / recorded_output_name(smi_command("nvidia"))).write_text(source.read_text())
        recorded[node] = source.read_text()
    pods = [p for p in prod.json("get", "pods", "-A")["items"] if p["spec"].get("nodeName") in recorded]
    execs = [smi_exec(p["metadata"]["namespace"], p["metadata"]["name"], None, folders[pool_of[p["spec"]["nodeName"]]])
             for p in pods]
    applied = prod.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": execs}))
    assert applied.returncode == 0, applied.stderr
    # kwok reads Exec objects from a watch: wait until each served node's pods answer with their recording.
    deadline = time.monotonic() + EXEC_SERVED_TIMEOUT_S
    waiting = {p["spec"]["nodeName"]: p for p in pods}
    while waiting and time.monotonic() < deadline:
        for node, pod in list(waiting.items()):
            done = prod.kubectl("exec", "-n", pod["metadata"]["namespace"], pod["metadata"]["name"], "--", *smi_command("nvidia"))
            if done.returncode == 0 and done.stdout == recorded[node]:
                del waiting[node]
        time.sleep(0.5)
    assert not waiting, f"kwok served no recorded SMI output on {sorted(waiting)}"
    yield Served(recorded, unserved)
    prod.kubectl("delete", "-f", "-", "--wait=false", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": execs}))


def gpu_nodes(prod: LocalCluster) -> set[str]:
    nodes = prod.json("get", "nodes")["items"]
    return {n["metadata"]["name"] for n in nodes if any(k.startswith("nvidia.com/") for k in n["status"]["allocatable"])}


def no_forbidden(done: subprocess.CompletedProcess[str], *more: str) -> None:
    for text in (done.stdout, done.stderr, *more):
        assert "403" not in text and "forbidden" not in text.lower(), text[-2000:]


def test_the_reader_may_do_what_the_docs_say_and_no_more(prod: LocalCluster, reader: Path) -> None:
    def can(*args: str) -> str:
        done = prod.kubectl("auth", "can-i", *args, f"--as=system:serviceaccount:{NAMESPACE}:{ACCOUNT}")
        return done.stdout.strip()

    assert can("list", "nodes") == "yes" and can("create", "pods", "--subresource=exec", "-n", "gpu-resources") == "yes"
    assert can("list", "events", "-A") == "yes" and can("create", "events", "-n", NAMESPACE) == "no"
    assert can("get", "secrets", "-A") == "no" and can("create", "pods", "-n", NAMESPACE) == "no"


def test_a_live_audit_reads_the_gpu_nodes_with_that_rbac(prod: LocalCluster, reader: Path, served: Served) -> None:
    # With --stack the live audit runs the stack's SMI command on every GPU node (without it, it runs no exec).
    done = prod.aksgpu("audit", "--stack", STACK, "--kubeconfig", str(reader), "--json", timeout=180)
    report: dict[str, Any] = json.loads(done.stdout)
    summary = report["summary"]
    # docs/audit.md: 0 nothing fails, 1 a finding fails.
    assert done.returncode == (1 if summary["fail"] else 0), done.stderr[-2000:]
    no_forbidden(done, json.dumps(summary["notChecked"]))
    assert summary["gpuNodes"] == len(gpu_nodes(prod)) == len(stack_model(STACK).pools)
    assert {p["pool"] for p in summary["pools"]} == {p.name for p in stack_model(STACK).pools}
    assert summary["cluster"]["context"] == ACCOUNT
    # Health was read from each served node's recording: the only node whose SMI output is missing is the unserved
    # one, whose exec kwok refused; a served node's gap, if any, is what nvidia-smi -q cannot show (the Xids are in the
    # kernel log), said of the output that was read. (kwok nodes carry no Node Problem Detector condition: that gap
    # names every node, rightly.)
    health = [n["reason"] for n in summary["notChecked"] if n["practice"] == "health"]
    unread = [r for r in health if r.startswith(("the SMI command failed on", "no SMI output in the snapshot"))]
    assert unread and all(served.unserved in r and KWOK_NO_EXEC in r for r in unread), health
    assert not any(node in r for r in unread for node in served.recorded), health
    read = [r for r in health if r.startswith("the SMI output of")]
    assert all(any(node in r for node in served.recorded) for r in read), health


def test_audit_collect_writes_the_snapshot_with_that_rbac(
    prod: LocalCluster, reader: Path, served: Served, tmp_path: Path
) -> None:
    out = tmp_path / "snap"
    done = prod.aksgpu("audit", "collect", "--kubeconfig", str(reader), "--out", str(out), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    no_forbidden(done)
    names = {"nodes.json", "daemonsets.json", "pods.json", "namespaces.json", "resourcequotas.json", "networkpolicies.json"}
    names.add("events.json")
    assert names | {"meta.json"} <= {p.name for p in out.iterdir()}
    meta = json.loads((out / "meta.json").read_text())
    assert "notCollected" not in meta, meta
    # No Kueue on the prod stack: its API answers 404 to a reader allowed to list it, and the lists are empty.
    assert [json.loads((out / name).read_text())["items"] for name in ("clusterqueues.json", "workloads.json")] == [[], []]
    # The execs went through the API server to kwok (no 403 on pods/exec): each served node's output is what its
    # recording holds, byte for byte; the unserved node's exec failure is kept as its error.
    assert {p.stem: p.read_text() for p in (out / "smi").glob("*.txt")} == served.recorded
    errors = {p.name.removesuffix(".error"): p.read_text() for p in (out / "smi").glob("*.error")}
    assert set(errors) == {served.unserved}
    assert KWOK_NO_EXEC in errors[served.unserved] and "403" not in errors[served.unserved]


def test_validate_judges_the_served_nodes_and_names_the_unserved_nodes_exec_failure(
    prod: LocalCluster, reader: Path, served: Served
) -> None:
    done = prod.aksgpu("validate", "--stack", STACK, "--kubeconfig", str(reader), "--json", timeout=180)
    no_forbidden(done)
    report = json.loads(done.stdout)
    # docs/validation.md: 1 a check failed (an exec that fails is a failed check of that node, not a crash).
    assert done.returncode == 1 and report["passed"] is False, done.stderr[-2000:]
    by = {(c["id"], c["node"]): c for c in report["checks"]}
    for node in gpu_nodes(prod):
        assert by[("device-plugin-ready", node)]["status"] == "pass"
        assert by[("gpu-schedulable", node)]["status"] == "pass"
    smi = by[("smi-error", served.unserved)]
    assert smi["status"] == "fail" and KWOK_NO_EXEC in smi["message"], smi
    failed = {(c["id"], c["node"]) for c in report["checks"] if c["status"] == "fail"}
    assert failed == {("smi-error", served.unserved)}, failed
    # A served node's SMI output was read and judged: its exec passed and its SMI checks ran and passed.
    for node in served.recorded:
        judged = {c["id"]: c["status"] for c in report["checks"] if c["node"] == node}
        assert by[("smi-error", node)]["status"] == "pass" and len(judged) > 2, judged
        assert set(judged.values()) <= {"pass", "warn"}, judged


def test_a_live_audit_reads_every_spelling_of_the_npd_conditions_the_api_server_keeps(
    prod: LocalCluster, reader: Path
) -> None:
    """The Xid condition as AKS's own e2e spells it (XIDError) and the GRID licence check's spaced spelling ("NVIDIA
    GRID Status Invalid", Azure/AgentBaker e2e/validators.go) go through the real API server's node status and are
    read by the live audit (components/aks_gpu/data/remediation.yaml, npd_gpu_checks)."""
    node = sorted(gpu_nodes(prod))[0]
    kinds = ("XIDError", "NVIDIA GRID Status Invalid")
    conditions = [
        {"type": kind, "status": "True", "reason": "Injected", "message": f"{kind} detected", "lastHeartbeatTime":
         "2026-12-07T00:00:00Z", "lastTransitionTime": "2026-12-07T00:00:00Z"}
        for kind in kinds
    ]
    patch = json.dumps({"status": {"conditions": conditions}})
    patched = prod.kubectl("patch", "node", node, "--subresource=status", "--type=strategic", "-p", patch)
    assert patched.returncode == 0, patched.stderr
    try:
        kept = {c["type"] for c in prod.json("get", "node", node)["status"]["conditions"]}
        assert set(kinds) <= kept, kept
        done = prod.aksgpu("audit", "--kubeconfig", str(reader), "--json", timeout=180)
        report: dict[str, Any] = json.loads(done.stdout)
        assert done.returncode == 1, done.stderr[-2000:]
        found = [f for f in report["findings"] if f["id"] == "gpu-condition" and f["node"] == node]
        assert {kind for kind in kinds if any(kind in f["message"] for f in found)} == set(kinds), found
        assert all(f["severity"] == "fail" for f in found)
    finally:
        # Strategic merge keys conditions by type: set them False, as NPD does when the problem is gone.
        healed = json.dumps({"status": {"conditions": [c | {"status": "False"} for c in conditions]}})
        prod.kubectl("patch", "node", node, "--subresource=status", "--type=strategic", "-p", healed)


def test_a_live_audit_reads_the_auto_repair_events_the_api_server_keeps_on_a_gpu_node(
    prod: LocalCluster, reader: Path
) -> None:
    """AKS node auto-repair's events (source aks-auto-repair, on the Node: node-auto-repair.md), created through the
    real API server in the default namespace as a legacy recorder writes them, are listed by the reader (the field
    selector involvedObject.kind=Node) and judged: one reboot of a GPU node in the window warns `node-auto-repaired`."""
    node = sorted(gpu_nodes(prod))[0]
    now = datetime.now(UTC).replace(microsecond=0)
    events = [
        node_event(node, "NodeRebootStart", REBOOT_START, "aks-auto-repair", rfc3339(now - timedelta(minutes=9))),
        node_event(node, "NodeRebootEnd", REBOOT_END, "aks-auto-repair", rfc3339(now - timedelta(minutes=4))),
    ]
    for event in events:  # what a client sends: the server sets uid, resourceVersion and creationTimestamp
        event["metadata"] = {key: event["metadata"][key] for key in ("name", "namespace")}
    created = prod.kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": events}))
    assert created.returncode == 0, created.stderr
    try:
        done = prod.aksgpu("audit", "--kubeconfig", str(reader), "--json", timeout=180)
        report: dict[str, Any] = json.loads(done.stdout)
        no_forbidden(done, json.dumps(report["summary"]["notChecked"]))
        found = [(f["node"], f["severity"]) for f in report["findings"] if f["id"] == "node-auto-repaired"]
        assert found == [(node, "warn")], report["findings"]
        assert report["summary"]["autoRepairs"] == {"gpuNodes": 1, "otherNodes": 0}
        assert "node-auto-repaired" in report["summary"]["checked"]
    finally:
        prod.kubectl("delete", "events", "-n", "default", *(event["metadata"]["name"] for event in events))
