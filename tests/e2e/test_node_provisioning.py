"""Node auto-provisioning on the real engines: `aksgpu local up` of a stack whose GPU pools are Karpenter NodePools
(tests/e2e/stacks/Pulumi.nap.yaml) runs Karpenter's core with its kwok provider (built by make tools from
sigs.k8s.io/karpenter) against the local control plane; the real scheduler binds the pods to the nodes Karpenter makes.
The stack: train (Standard_NC24ads_A100_v4, 1 GPU, at most 2 nodes, an empty node removed at once) for the research
namespace, infer (Standard_NC4as_T4_v3, WhenEmptyOrUnderutilized after the default 10 minutes) for serving; no agent
pool and no CPU pool, so every node but the system pool's is one Karpenter made.

Karpenter's provisioner batches pending pods for 1 s of quiet, at most 10 s (its defaults, which `aksgpu local`
keeps), and its disruption controller looks for empty nodes every 10 s: the waits below are sized on those.

The tests run in order on one cluster, each leaving the state the next one starts from."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.config.loader import load_stack_file
from aks_gpu.local.control_plane import LOOPBACK
from aks_gpu.local.karpenter import KARPENTER_BINARY, KWOK_NODE_CLASS
from aks_gpu.naming import KARPENTER_NODEPOOL_LABEL, nap_object_name
from aks_gpu.resolved.model import ResolvedPool, resolve
from aks_gpu.resolved.stack import validate_stack
from tests.e2e.conftest import TOOLS, LocalCluster, project_copy, start_in, stop, until

STACK = "nap"
STACK_FILE = Path(__file__).parent / "stacks" / f"Pulumi.{STACK}.yaml"
GPU = "nvidia.com/gpu"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# Longer than Karpenter's batch window (10 s at most) and a provisioning round after it.
QUIET_S = 20.0

pytestmark = pytest.mark.skipif(
    not (TOOLS / KARPENTER_BINARY).exists(), reason=f"no .tools/bin/{KARPENTER_BINARY}: run `make tools` (make e2e does)"
)


def pools() -> dict[str, ResolvedPool]:
    config = validate_stack(load_stack_file(STACK_FILE), str(STACK_FILE)).config
    return {pool.name: pool for pool in resolve(config).pools}


@pytest.fixture(scope="module")
def nap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = start_in(project_copy(tmp_path_factory.mktemp("nap"), (STACK_FILE,)), STACK)
    try:
        yield cluster
    finally:
        stop(cluster)


def pod(name: str, namespace: str, gpus: int) -> str:
    """A bare pod as a team writes it: no node selector, no toleration (the namespace and admission add them)."""
    resources = {"limits": {GPU: str(gpus)}} if gpus else {"requests": {"cpu": "1", "memory": "1Gi"}}
    container = {"name": "main", "image": "busybox", "resources": resources}
    metadata = {"name": name, "namespace": namespace}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}})


def create(cluster: LocalCluster, name: str, namespace: str, gpus: int) -> None:
    done = cluster.kubectl("create", "-f", "-", stdin=pod(name, namespace, gpus))
    assert done.returncode == 0, done.stderr


def node_of(cluster: LocalCluster, namespace: str, name: str) -> str | None:
    node: str | None = cluster.json("get", "-n", namespace, f"pod/{name}")["spec"].get("nodeName")
    return node


def karpenter_nodes(cluster: LocalCluster, node_pool: str | None = None) -> list[dict[str, Any]]:
    selector = f"{KARPENTER_NODEPOOL_LABEL}={node_pool}" if node_pool else KARPENTER_NODEPOOL_LABEL
    items: list[dict[str, Any]] = cluster.json("get", "nodes", "-l", selector)["items"]
    return items


def node_claims(cluster: LocalCluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.json("get", "nodeclaims.karpenter.sh")["items"]
    return items


def delete_pods(cluster: LocalCluster, namespace: str, *names: str) -> None:
    done = cluster.kubectl("delete", "-n", namespace, *(f"pod/{name}" for name in names), "--wait=true", timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_pending_gpu_pod_brings_a_node_of_its_pool_and_binds_there(nap: LocalCluster) -> None:
    assert karpenter_nodes(nap) == []  # no NAP node before a pod asks for one
    create(nap, "train-0", "research", gpus=1)
    create(nap, "serve-0", "serving", gpus=1)
    for namespace, name, pool in (("research", "train-0", pools()["train"]), ("serving", "serve-0", pools()["infer"])):
        node_name = until(f"{namespace}/{name} bound", lambda n=namespace, p=name: node_of(nap, n, p))
        node = nap.json("get", f"node/{node_name}")
        labels = node["metadata"]["labels"]
        # Karpenter's: the NodePool of the pool, the pool's VM size (the instance type made from the catalog).
        assert labels[KARPENTER_NODEPOOL_LABEL] == nap_object_name(pool.name)
        assert labels[INSTANCE_TYPE] == pool.config.vm_size
        assert labels["karpenter.azure.com/sku-gpu-count"] == str(pool.gpus_per_node)
        # Ours, as an agent pool's nodes carry them: the pool's placement labels and its GPU taint.
        assert pool.node_labels.items() <= labels.items()
        assert node["spec"]["taints"] == [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints]
        assert node["status"]["allocatable"][GPU] == str(pool.gpus_per_node)
    # Locally the NodePools name kwok's node class; the AKSNodeClasses are there still (the stand-in CRD).
    node_pool = nap.json("get", f"nodepools.karpenter.sh/{nap_object_name('train')}")
    assert node_pool["spec"]["template"]["spec"]["nodeClassRef"] == KWOK_NODE_CLASS.to_kube()
    assert nap.json("get", f"aksnodeclasses.karpenter.azure.com/{nap_object_name('train')}")["spec"]["gpu"]
    assert len(node_claims(nap)) == 2


def test_a_pod_that_needs_no_gpu_never_brings_up_a_gpu_node(nap: LocalCluster) -> None:
    before = {node["metadata"]["name"] for node in karpenter_nodes(nap)}
    create(nap, "cpu-0", "research", gpus=0)

    def refused() -> bool:
        # Karpenter looked at the pod and found no NodePool whose taints it tolerates.
        events = nap.json("get", "-n", "research", "events", "--field-selector", "involvedObject.name=cpu-0")["items"]
        return any("did not tolerate taint" in event.get("message", "") for event in events)

    until("Karpenter's verdict on research/cpu-0", refused)
    time.sleep(QUIET_S)
    assert {node["metadata"]["name"] for node in karpenter_nodes(nap)} == before
    assert len(node_claims(nap)) == len(before)
    assert node_of(nap, "research", "cpu-0") is None
    delete_pods(nap, "research", "cpu-0")


def test_an_empty_gpu_node_goes_as_its_pools_disruption_says(nap: LocalCluster) -> None:
    # train: WhenEmpty after 1m, the node goes; infer: after the default 10 minutes, the node stays meanwhile.
    train = nap.json("get", f"nodepools.karpenter.sh/{nap_object_name('train')}")["spec"]["disruption"]
    assert (train["consolidationPolicy"], train["consolidateAfter"]) == ("WhenEmpty", "1m")
    [kept] = karpenter_nodes(nap, nap_object_name("infer"))
    delete_pods(nap, "research", "train-0")
    delete_pods(nap, "serving", "serve-0")
    start = time.monotonic()
    until("the empty train node removed", lambda: karpenter_nodes(nap, nap_object_name("train")) == [], timeout=240)
    print(f"empty train node removed {time.monotonic() - start:.1f}s after its pod")
    assert [node["metadata"]["name"] for node in karpenter_nodes(nap, nap_object_name("infer"))] == [kept["metadata"]["name"]]


def test_max_count_caps_the_nodes(nap: LocalCluster) -> None:
    # train: maxCount 2 of 1 GPU each; three 1-GPU pods: two nodes, the third pod stays pending.
    cap = pools()["train"].config.max_count
    names = [f"cap-{index}" for index in range(cap + 1)]
    for name in names:
        create(nap, name, "research", gpus=1)
    until(f"{cap} pods bound", lambda: sum(1 for name in names if node_of(nap, "research", name)) == cap)
    deadline = time.monotonic() + QUIET_S
    while time.monotonic() < deadline:
        assert len(karpenter_nodes(nap, nap_object_name("train"))) <= cap
        time.sleep(1)
    assert len(karpenter_nodes(nap, nap_object_name("train"))) == cap
    assert sum(1 for name in names if node_of(nap, "research", name) is None) == 1
    delete_pods(nap, "research", *names)


def listening_addresses(pid: int) -> set[str]:
    """The addresses the process listens on (TCP, IPv4 and IPv6), from /proc: its sockets' inodes in the tables."""
    inodes = set()
    for link in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(link)
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address = fields[1].split(":")[0]
                found.add(address if width == 32 else ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_status_shows_karpenter_and_down_stops_it(nap: LocalCluster) -> None:
    done = nap.aksgpu("local", "status", "--stack", STACK, "--json")
    assert done.returncode == 0, done.stderr
    pid = json.loads(done.stdout)["karpenter"]
    assert isinstance(pid, int)
    # Its metrics and health probe servers: on this machine's loopback only.
    assert listening_addresses(pid) == {LOOPBACK}
    down = nap.aksgpu("local", "down", "--stack", STACK, timeout=120)
    assert down.returncode == 0, down.stderr
    assert "stopped the stack's Karpenter process" in down.stderr
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
