"""What a tenant holding a workload namespace's `edit` tried against the platform (issue 40, B2-B6), and the mixed MIG
strategy's documented manifest (A2), against the real API server, scheduler and controllers of `aksgpu local`: each
bypass is refused, or neutralised, by the stack's admission policies, and what the docs tell a team to write lands
where they say."""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from aks_gpu.naming import QUARANTINE_TAINT_EFFECT, QUARANTINE_TAINT_KEY, QUARANTINE_TAINT_VALUE
from tests.admission.test_policy import mixed_mig
from tests.conftest import PROJECT_DIR, raw_stack
from tests.e2e.conftest import LocalCluster, stop
from tests.e2e.kube import Answer, Server

STACK = "prod"
MIXED_STACK = "mixedmig"
SCHEDULED_TIMEOUT_S = 60


def pod(name: str, namespace: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": containers, **spec},
    }


def gpu_container(name: str = "main", resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {"name": name, "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": {"limits": {resource: "1"}}}


def wait_scheduled(cluster: LocalCluster, namespace: str, selector: list[str]) -> dict[str, Any]:
    """The first Pod (``selector``: ``pod/<name>`` or ``-l``, ``<labels>``) once the scheduler bound it."""
    deadline = time.monotonic() + SCHEDULED_TIMEOUT_S
    while True:
        found = cluster.json("get", "-n", namespace, *selector)
        pods: list[dict[str, Any]] = found.get("items", [found]) if found.get("kind") == "List" else [found]
        bound = [p for p in pods if p.get("spec", {}).get("nodeName")]
        if bound:
            return bound[0]
        assert time.monotonic() < deadline, f"not scheduled in {SCHEDULED_TIMEOUT_S} s: {selector} in {namespace}"
        time.sleep(1)


def node_pool(cluster: LocalCluster, node: str) -> str:
    return str(cluster.json("get", f"node/{node}")["metadata"]["labels"]["kubernetes.azure.com/agentpool"])


def pool_node(cluster: LocalCluster, pool: str) -> str:
    nodes = cluster.json("get", "nodes", "-l", f"kubernetes.azure.com/agentpool={pool}")["items"]
    return str(nodes[0]["metadata"]["name"])


def refused(answer: Answer, text: str) -> None:
    assert answer.decision == "denied", answer
    assert text in answer.line, answer.line


@contextlib.contextmanager
def created(cluster: LocalCluster, server: Server, obj: dict[str, Any]) -> Iterator[Answer]:
    """The server's answer to creating ``obj`` for real; whatever it admitted is deleted afterwards."""
    answer = server.create(obj, dry_run=False)
    try:
        yield answer
    finally:
        if answer.decision == "admitted":
            metadata = obj["metadata"]
            cluster.kubectl("delete", "-n", metadata["namespace"], f"{obj['kind'].lower()}/{metadata['name']}", "--wait=false")


# ---------------------------------------------------------------- B3: the quarantine


@pytest.fixture
def quarantined(prod: LocalCluster) -> Iterator[str]:
    """A train node as the quarantine engine leaves it: cordoned and tainted (docs/remediation.md)."""
    node = pool_node(prod, "train")
    taint = f"{QUARANTINE_TAINT_KEY}={QUARANTINE_TAINT_VALUE}:{QUARANTINE_TAINT_EFFECT}"
    for args in (("cordon", node), ("taint", "node", node, taint, "--overwrite")):
        done = prod.kubectl(*args)
        assert done.returncode == 0, done.stderr
    try:
        yield node
    finally:
        prod.kubectl("taint", "node", node, f"{QUARANTINE_TAINT_KEY}-")
        prod.kubectl("uncordon", node)


def test_a_gpu_pod_cannot_tolerate_its_way_onto_a_quarantined_node(prod: LocalCluster, server: Server, quarantined: str) -> None:
    everything = pod("walk-around", "gpu-training", [gpu_container()], tolerations=[{"operator": "Exists"}])
    with created(prod, server, everything) as answer:
        refused(answer, "tolerates the quarantine taint aks-gpu/gpu-quarantine=fault:NoSchedule")
    by_key = pod(
        "walk-around-by-key",
        "gpu-training",
        [gpu_container()],
        tolerations=[
            {"key": QUARANTINE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        ],
    )
    with created(prod, server, by_key) as answer:
        refused(answer, f"tolerates the quarantine taint {QUARANTINE_TAINT_KEY}")
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "everywhere", "namespace": "gpu-training"},
        "spec": {
            "selector": {"matchLabels": {"app": "everywhere"}},
            "template": {"metadata": {"labels": {"app": "everywhere"}}, "spec": copy.deepcopy(everything["spec"])},
        },
    }
    refused(server.create(daemonset, dry_run=True), "tolerates the quarantine taint")
    # What a team writes is admitted and never lands on the quarantined node (the only train node: it stays Pending).
    with created(prod, server, pod("as-written", "gpu-training", [gpu_container()])) as answer:
        assert answer.decision == "admitted", answer
        time.sleep(3)
        assert prod.json("get", "-n", "gpu-training", "pod/as-written")["spec"].get("nodeName") != quarantined


# ---------------------------------------------------------------- B5: externalIPs, B4: disruption budgets


def test_a_service_cannot_claim_external_ips(server: Server) -> None:
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "intercept", "namespace": "gpu-inference"},
        "spec": {"ports": [{"port": 443}], "externalIPs": ["20.0.0.1"]},
    }
    refused(server.create(service, dry_run=True), "sets spec.externalIPs (20.0.0.1)")
    del service["spec"]["externalIPs"]
    assert server.create(service, dry_run=True).decision == "admitted"


@pytest.mark.parametrize(
    ("budget", "admitted"),
    [
        ({"maxUnavailable": 0}, False),
        ({"maxUnavailable": "0%"}, False),
        ({"minAvailable": "100%"}, False),
        ({"maxUnavailable": 1}, True),
    ],
)
def test_a_disruption_budget_must_allow_a_disruption(server: Server, budget: dict[str, Any], admitted: bool) -> None:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "pin", "namespace": "gpu-training"},
        "spec": {"selector": {"matchLabels": {"app": "trainer"}}, **budget},
    }
    answer = server.create(pdb, dry_run=True)
    if admitted:
        assert answer.decision == "admitted", answer
    else:
        refused(answer, "PodDisruptionBudget pin allows no disruption")


# ---------------------------------------------------------------- B6: a template's node selector


@pytest.mark.parametrize(("namespace", "pool"), [("gpu-training", "train"), ("gpu-inference", "inferfull")])
def test_a_job_selecting_its_vm_size_is_admitted_and_lands_on_its_own_pool(
    prod: LocalCluster, server: Server, namespace: str, pool: str
) -> None:
    # Standard_ND96isr_H100_v5 is the size of train (training) and inferfull (inference).
    name = f"by-size-{pool}"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "template": {
                "metadata": {"labels": {"job": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"},
                    "containers": [gpu_container()],
                },
            }
        },
    }
    answer = server.create(job, dry_run=False)
    assert answer.decision == "admitted", answer
    try:
        placed = wait_scheduled(prod, namespace, ["pods", "-l", f"job={name}"])
        assert node_pool(prod, placed["spec"]["nodeName"]) == pool
    finally:
        prod.kubectl("delete", "-n", namespace, f"job/{name}", "--cascade=foreground", "--wait=false")


# ---------------------------------------------------------------- B2: one GPU must not buy the whole node


def test_a_gpu_less_container_of_a_gpu_pod_sees_no_gpu(prod: LocalCluster, server: Server) -> None:
    # A CUDA image sets NVIDIA_VISIBLE_DEVICES=all: without a value of its own, the sidecar would see every GPU of the
    # node under the device plugin's envvar strategy while the quota counts 1.
    sidecar = {"name": "sidecar", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"}
    chosen = {**sidecar, "name": "chosen", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]}
    written = pod("one-gpu", "gpu-training", [gpu_container(), sidecar, chosen], initContainers=[{**sidecar, "name": "setup"}])
    with created(prod, server, written) as answer:
        assert answer.decision == "admitted", answer
        stored = prod.json("get", "-n", "gpu-training", "pod/one-gpu")["spec"]
        env = {c["name"]: c.get("env") for c in stored["containers"] + stored["initContainers"]}
        assert env == {
            "main": None,  # the device plugin sets it for the GPU it hands out
            "sidecar": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
            "chosen": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}],
            "setup": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
        }
    # A pod without GPUs is left as written.
    with created(prod, server, pod("no-gpu", "gpu-training", [sidecar])) as answer:
        assert answer.decision == "admitted", answer
        assert "env" not in prod.json("get", "-n", "gpu-training", "pod/no-gpu")["spec"]["containers"][0]


# ---------------------------------------------------------------- A2: a MIG slice under the mixed strategy


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("local-mixed")
    shutil.copy(PROJECT_DIR / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / "stacks").mkdir()
    (root / "stacks" / f"Pulumi.{MIXED_STACK}.yaml").write_text(
        yaml.safe_dump({"config": mixed_mig(raw_stack(STACK))}), encoding="utf-8"
    )
    (root / ".tools").symlink_to(PROJECT_DIR / ".tools")
    cluster = LocalCluster(root, MIXED_STACK)
    done = cluster.aksgpu("local", "up", "--stack", MIXED_STACK, "--nodes-per-pool", "1")
    try:
        assert done.returncode == 0, done.stderr[-3000:]
        yield cluster
    finally:
        stop(cluster)


def test_what_a_team_writes_for_a_mig_slice_lands_on_the_mig_pool(mixed: LocalCluster) -> None:
    written = pod("slice", "gpu-inference", [gpu_container(resource="nvidia.com/mig-1g.10gb")])
    created = mixed.kubectl("create", "-f", "-", stdin=json.dumps(written))
    assert created.returncode == 0, created.stderr
    try:
        placed = wait_scheduled(mixed, "gpu-inference", ["pod/slice"])
        assert node_pool(mixed, placed["spec"]["nodeName"]) == "infer"
    finally:
        mixed.kubectl("delete", "-n", "gpu-inference", "pod/slice", "--wait=false")
    # The pool is tainted by the slice it offers, which ExtendedResourceToleration tolerated for the pod.
    taints = mixed.json("get", f"node/{pool_node(mixed, 'infer')}")["spec"]["taints"]
    assert {"key": "nvidia.com/mig-1g.10gb", "value": "present", "effect": "NoSchedule"} in taints
    # The offline check agrees on the same stack file.
    manifest = mixed.project / "slice.yaml"
    manifest.write_text(yaml.safe_dump(written), encoding="utf-8")
    stack_file = mixed.project / "stacks" / f"Pulumi.{MIXED_STACK}.yaml"
    checked = mixed.aksgpu(
        "admission", "check", "--stack", MIXED_STACK, "--config-file", str(stack_file), "--json", str(manifest)
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)[0]["decision"] == "admitted"
