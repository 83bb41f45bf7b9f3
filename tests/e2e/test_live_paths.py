"""The live paths of `aksgpu audit`, `aksgpu audit collect` and `aksgpu validate` against the prod stack's local
cluster (the real API server, TLS, RBAC), as a ServiceAccount holding exactly the RBAC docs/audit.md states: list
nodes, pods, daemonsets, namespaces, resourcequotas and networkpolicies cluster-wide, and `get` and `create` on
`pods/exec`. Each runs with no 403, reports the simulated GPU nodes and exits with its documented status.

The exec goes through the real server's path too (the API server to kwok, which plays the kubelet): kwok runs an
exec only where an Exec/ClusterExec resource maps the pod to a local command, and `aksgpu local` defines none, so
kwok answers "no exec found" and every GPU node's SMI check fails naming its exec failure (validate: exit 1;
collect: `smi/<node>.error`)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import stack_model
from tests.e2e.conftest import Clusters, LocalCluster

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
- {{apiGroups: [""], resources: [nodes, pods, namespaces, resourcequotas], verbs: [list]}}
- {{apiGroups: [apps], resources: [daemonsets], verbs: [list]}}
- {{apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [list]}}
- {{apiGroups: [""], resources: [pods/exec], verbs: [get, create]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ACCOUNT}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ACCOUNT}}}
subjects: [{{kind: ServiceAccount, name: {ACCOUNT}, namespace: {NAMESPACE}}}]
"""
KWOK_NO_EXEC = "no exec found for container"


@pytest.fixture(scope="module")
def prod(clusters: Clusters) -> LocalCluster:
    return clusters.get(STACK)


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
    assert can("get", "secrets", "-A") == "no" and can("create", "pods", "-n", NAMESPACE) == "no"


def test_a_live_audit_reads_the_gpu_nodes_with_that_rbac(prod: LocalCluster, reader: Path) -> None:
    done = prod.aksgpu("audit", "--kubeconfig", str(reader), "--json", timeout=120)
    report: dict[str, Any] = json.loads(done.stdout)
    summary = report["summary"]
    # docs/audit.md: 0 nothing fails, 1 a finding fails.
    assert done.returncode == (1 if summary["fail"] else 0), done.stderr[-2000:]
    no_forbidden(done, json.dumps(summary["notChecked"]))
    assert summary["gpuNodes"] == len(gpu_nodes(prod)) == len(stack_model(STACK).pools)
    assert {p["pool"] for p in summary["pools"]} == {p.name for p in stack_model(STACK).pools}
    assert summary["cluster"]["context"] == ACCOUNT


def test_audit_collect_writes_the_snapshot_with_that_rbac(prod: LocalCluster, reader: Path, tmp_path: Path) -> None:
    out = tmp_path / "snap"
    done = prod.aksgpu("audit", "collect", "--kubeconfig", str(reader), "--out", str(out), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    no_forbidden(done)
    names = {"nodes.json", "daemonsets.json", "pods.json", "namespaces.json", "resourcequotas.json", "networkpolicies.json"}
    assert names | {"meta.json"} <= {p.name for p in out.iterdir()}
    meta = json.loads((out / "meta.json").read_text())
    assert "notCollected" not in meta, meta
    # The exec went through the API server to kwok (no 403 on pods/exec), which has no exec for the pod.
    errors = {p.name.removesuffix(".error"): p.read_text() for p in (out / "smi").glob("*.error")}
    assert set(errors) == gpu_nodes(prod)
    for node, text in errors.items():
        assert KWOK_NO_EXEC in text and "403" not in text, (node, text)


def test_validate_names_each_nodes_exec_failure_and_exits_1(prod: LocalCluster, reader: Path) -> None:
    done = prod.aksgpu("validate", "--stack", STACK, "--kubeconfig", str(reader), "--json", timeout=180)
    no_forbidden(done)
    report = json.loads(done.stdout)
    # docs/validation.md: 1 a check failed (an exec that fails is a failed check of that node, not a crash).
    assert done.returncode == 1 and report["passed"] is False, done.stderr[-2000:]
    by = {(c["id"], c["node"]): c for c in report["checks"]}
    for node in gpu_nodes(prod):
        assert by[("device-plugin-ready", node)]["status"] == "pass"
        assert by[("gpu-schedulable", node)]["status"] == "pass"
        smi = by[("smi-error", node)]
        assert smi["status"] == "fail" and KWOK_NO_EXEC in smi["message"], smi
    failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    assert failed == {"smi-error"}, failed
