"""The diagnostic schedule in the cluster (`validation.diagnosticsSchedule`), on the prod stack's local cluster with the
schedule on: `aksgpu local up` applies its CronJob, ServiceAccount, RBAC, ConfigMap and fence (the admission policy) on
the real API server; then the CronJob's own command runs here, as a process, under the CronJob's ServiceAccount.

The stand-in for the pod: a token of that ServiceAccount from the API server's TokenRequest (`kubectl create token`,
what the kubelet asks for to mount a pod's projected token) in a kubeconfig, in place of `--in-cluster` (which reads
the same kind of token from the file the kubelet mounts); the ConfigMap's file, read from the API server, in place of
its mount. The API server authenticates the same user, system:serviceaccount:gpu-resources:aks-gpu-diagnostics, and
so authorizes and admits every call as it would the pod's. What it cannot know: the image (kwok runs no container).

kwok serves the recorded outputs as in test_diagnostics.py: the node whose recorded `dcgmi diag` fails is tainted and
cordoned, the healthy one is not; the ServiceAccount's token cannot do anything else to nodes or pods."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.naming import (
    DIAGNOSTIC_TAINT_VALUE,
    DIAGNOSTICS_FENCE_POLICY,
    DIAGNOSTICS_SCHEDULE_NAME,
    GPU_NAMESPACE,
    POOL_LABEL,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
)
from aks_gpu.validation.schedule import CONFIG_DIR, SECTIONS_FILE
from tests.e2e.conftest import LocalCluster, project_copy, start_in, stop
from tests.e2e.test_diagnostics import STACK, Served, quarantine, served

__all__ = ["served"]  # test_diagnostics' fixture: the recorded outputs kwok serves, on this module's cluster

IMAGE = "example.azurecr.io/aks-gpu@sha256:" + "5" * 64
FENCED = f"ValidatingAdmissionPolicy '{DIAGNOSTICS_FENCE_POLICY}'"


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The prod stack with the schedule on (a made-up digest: kwok pulls no image), in a project of its own."""
    def schedule_on(config: dict[str, Any]) -> None:
        config["aks-gpu:validation"]["diagnosticsSchedule"] = {"enabled": True, "level": 2, "image": IMAGE}

    cluster = start_in(project_copy(tmp_path_factory.mktemp("diagnostics-schedule"), edits={STACK: schedule_on}), STACK)
    try:
        yield cluster
    finally:
        stop(cluster)


@pytest.fixture(scope="module")
def token_kubeconfig(prod: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig of the admin's cluster entry and a token of the CronJob's ServiceAccount (TokenRequest)."""
    done = prod.kubectl("create", "token", DIAGNOSTICS_SCHEDULE_NAME, "-n", GPU_NAMESPACE, "--duration", "1h")
    assert done.returncode == 0, done.stderr
    admin = yaml.safe_load(prod.kubeconfig.read_text())
    context = {"cluster": admin["clusters"][0]["name"], "user": DIAGNOSTICS_SCHEDULE_NAME}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"][:1],
        "users": [{"name": DIAGNOSTICS_SCHEDULE_NAME, "user": {"token": done.stdout.strip()}}],
        "contexts": [{"name": DIAGNOSTICS_SCHEDULE_NAME, "context": context}],
        "current-context": DIAGNOSTICS_SCHEDULE_NAME,
    }
    path = tmp_path_factory.mktemp("sa") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def as_schedule(prod: LocalCluster, kubeconfig: Path, *args: str, stdin: str | None = None) -> Any:
    """kubectl with the ServiceAccount's token: its ``--kubeconfig`` follows the admin's, and the last one given wins
    (before the command's own arguments: an exec's ``--`` would take it for the remote command)."""
    return prod.kubectl("--kubeconfig", str(kubeconfig), *args, stdin=stdin)


def cron_job_command(prod: LocalCluster, kubeconfig: Path, folder: Path) -> list[str]:
    """The CronJob's command line as the API server holds it, with the pod's two inputs swapped for their stand-ins:
    the ConfigMap's file (read from the API server) for its mount, and ``--kubeconfig`` of the token for
    ``--in-cluster``."""
    cron_job = prod.json("get", "cronjob", DIAGNOSTICS_SCHEDULE_NAME, "-n", GPU_NAMESPACE)
    container = cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGE
    command = [*container["command"], *container["args"]]
    assert command[0] == "aksgpu"
    config_map = prod.json("get", "configmap", DIAGNOSTICS_SCHEDULE_NAME, "-n", GPU_NAMESPACE)
    stack_file = folder / SECTIONS_FILE
    stack_file.write_text(config_map["data"][SECTIONS_FILE])
    swapped = {f"{CONFIG_DIR}/{SECTIONS_FILE}": [str(stack_file)], "--in-cluster": ["--kubeconfig", str(kubeconfig)]}
    return [part for word in command[1:] for part in swapped.get(word, [word])]


def test_the_stack_applies_the_schedule_and_its_fence(prod: LocalCluster) -> None:
    cron_job = prod.json("get", "cronjob", DIAGNOSTICS_SCHEDULE_NAME, "-n", GPU_NAMESPACE)
    assert cron_job["spec"]["schedule"] == "17 2 * * 0" and cron_job["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == DIAGNOSTICS_SCHEDULE_NAME
    assert prod.json("get", "validatingadmissionpolicybinding", DIAGNOSTICS_FENCE_POLICY)["spec"]["validationActions"] == ["Deny"]
    # What the ServiceAccount may do, as the API server's authorizer answers.
    user = f"system:serviceaccount:{GPU_NAMESPACE}:{DIAGNOSTICS_SCHEDULE_NAME}"
    allowed = {
        ("patch", "nodes", None): "yes",
        ("create", "pods", GPU_NAMESPACE): "yes",
        ("create", "pods/exec", GPU_NAMESPACE): "yes",
        ("create", "pods", "gpu-training"): "no",
        ("create", "pods/exec", "gpu-training"): "no",
        ("patch", "nodes --subresource=status", None): "no",
        ("delete", "nodes", None): "no",
        ("get", "secrets", GPU_NAMESPACE): "no",
    }
    for (verb, resource, namespace), answer in allowed.items():
        where = ["-n", namespace] if namespace else []
        done = prod.kubectl("auth", "can-i", verb, *resource.split(), *where, f"--as={user}")
        assert done.stdout.strip() == answer, (verb, resource, namespace, done.stdout, done.stderr)


def test_the_cron_jobs_command_quarantines_a_failing_node_and_not_a_healthy_one(
    prod: LocalCluster, served: Served, token_kubeconfig: Path, tmp_path: Path
) -> None:
    done = prod.aksgpu(*cron_job_command(prod, token_kubeconfig, tmp_path), timeout=600)
    assert done.returncode == 1, done.stderr[-3000:]
    nodes = {node["node"]: node for node in json.loads(done.stdout)["nodes"]}
    assert nodes[served.failing]["verdict"] == "unhealthy: dcgm-diag: PCIe (all GPUs)"
    assert nodes[served.failing]["action"] == "quarantine"
    assert nodes[served.healthy]["state"] == "healthy" and nodes[served.healthy]["action"] in ("none", "proven")
    assert quarantine(prod, served.failing) == ([DIAGNOSTIC_TAINT_VALUE], True)
    assert quarantine(prod, served.healthy) == ([], False)


def _pod(name: str, namespace: str) -> str:
    container = {"name": "c", "image": "busybox", "securityContext": {"privileged": True}}
    spec = {"containers": [container], "hostPID": True, "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec})


def _plugin_pod(prod: LocalCluster) -> str:
    pods = prod.json("get", "pods", "-n", GPU_NAMESPACE)["items"]
    names = [p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith("nvidia-device-plugin")]
    assert names, [p["metadata"]["name"] for p in pods]
    return str(names[0])


@pytest.fixture
def node(prod: LocalCluster, served: Served) -> str:
    return served.healthy


ATTACKS: dict[str, tuple[list[str], str]] = {
    # name: (kubectl arguments, with NODE for the node; what must refuse it: the fence, or RBAC)
    "label a node": (["label", "node", "NODE", "attacker=1"], "fence"),
    "annotate a node": (["annotate", "node", "NODE", "attacker=1"], "fence"),
    "remove the GPU taint": (["taint", "node", "NODE", "nvidia.com/gpu-"], "fence"),
    "add a NoExecute diagnostic taint": (
        ["taint", "node", "NODE", f"{QUARANTINE_TAINT_KEY}={DIAGNOSTIC_TAINT_VALUE}:NoExecute"],
        "fence",
    ),
    "set the provider id": (["patch", "node", "NODE", "-p", '{"spec":{"providerID":"azure:///attacker"}}'], "fence"),
    "patch the node's status": (
        ["patch", "node", "NODE", "--subresource=status", "-p", '{"status":{"capacity":{"nvidia.com/gpu":"0"}}}'],
        "rbac",
    ),
    "delete a node": (["delete", "node", "NODE", "--wait=false"], "rbac"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_service_account_cannot_change_a_node_otherwise(
    prod: LocalCluster, token_kubeconfig: Path, node: str, attack: str
) -> None:
    args, refused_by = ATTACKS[attack]
    before = prod.json("get", "node", node)
    done = as_schedule(prod, token_kubeconfig, *(node if a == "NODE" else a for a in args))
    assert done.returncode != 0, f"{attack}: admitted\n{done.stdout}"
    assert (FENCED in done.stderr) if refused_by == "fence" else ("forbidden" in done.stderr and FENCED not in done.stderr), (
        done.stderr
    )
    after = prod.json("get", "node", node)
    assert after["metadata"].get("labels") == before["metadata"].get("labels")
    assert after["spec"] == before["spec"]


@pytest.fixture
def outsider(prod: LocalCluster) -> str:
    """A node the schedule does not diagnose: one without the pool label (the system pool's)."""
    nodes = prod.json("get", "nodes", "-l", f"!{POOL_LABEL}")["items"]
    assert nodes, "no node outside the GPU pools"
    return str(sorted(n["metadata"]["name"] for n in nodes)[0])


@pytest.mark.parametrize("action", ["cordon", "taint"])
def test_the_service_account_cannot_quarantine_a_node_it_does_not_diagnose(
    prod: LocalCluster, token_kubeconfig: Path, outsider: str, action: str
) -> None:
    taint = f"{QUARANTINE_TAINT_KEY}={DIAGNOSTIC_TAINT_VALUE}:{QUARANTINE_TAINT_EFFECT}"
    args = ["cordon", outsider] if action == "cordon" else ["taint", "node", outsider, taint]
    try:
        done = as_schedule(prod, token_kubeconfig, *args)
        # kubectl cordon prints the denial and still exits 0 (kubectl 1.36.3): the node's state is the proof.
        assert FENCED in done.stderr, done.stderr
        assert quarantine(prod, outsider) == ([], False)
    finally:
        prod.kubectl("uncordon", outsider)
        prod.kubectl("taint", "node", outsider, f"{QUARANTINE_TAINT_KEY}-")


def test_the_service_account_may_taint_and_cordon_with_its_own_taint_only(
    prod: LocalCluster, token_kubeconfig: Path, node: str
) -> None:
    taint = f"{QUARANTINE_TAINT_KEY}={DIAGNOSTIC_TAINT_VALUE}:{QUARANTINE_TAINT_EFFECT}"
    try:
        for args in (["taint", "node", node, taint], ["cordon", node]):
            done = as_schedule(prod, token_kubeconfig, *args)
            assert done.returncode == 0, done.stderr
        assert quarantine(prod, node) == ([DIAGNOSTIC_TAINT_VALUE], True)
    finally:
        prod.kubectl("uncordon", node)
        prod.kubectl("taint", "node", node, f"{QUARANTINE_TAINT_KEY}-")


def test_the_service_account_cannot_create_a_privileged_pod_anywhere(prod: LocalCluster, token_kubeconfig: Path) -> None:
    elsewhere = as_schedule(prod, token_kubeconfig, "create", "-f", "-", stdin=_pod("attacker", "gpu-training"))
    assert elsewhere.returncode != 0 and "forbidden" in elsewhere.stderr and FENCED not in elsewhere.stderr, elsewhere.stderr
    # In its own namespace RBAC lets it create pods (its diagnostic pods), and gpu-resources is privileged for the GPU
    # agents: only the fence stops a privileged pod there, even one named as a diagnostic pod.
    for name in ("attacker", "gpu-diag-attacker"):
        here = as_schedule(prod, token_kubeconfig, "create", "-f", "-", stdin=_pod(name, GPU_NAMESPACE))
        assert here.returncode != 0 and FENCED in here.stderr, here.stderr


def test_the_service_account_cannot_exec_into_or_delete_another_pod(prod: LocalCluster, token_kubeconfig: Path) -> None:
    workload = as_schedule(prod, token_kubeconfig, "exec", "-n", "gpu-training", "any-pod", "--", "true")
    assert workload.returncode != 0 and "forbidden" in workload.stderr and FENCED not in workload.stderr, workload.stderr
    plugin = _plugin_pod(prod)
    exec_plugin = as_schedule(prod, token_kubeconfig, "exec", "-n", GPU_NAMESPACE, plugin, "--", "true")
    assert exec_plugin.returncode != 0 and FENCED in exec_plugin.stderr, exec_plugin.stderr
    delete_plugin = as_schedule(prod, token_kubeconfig, "delete", "pod", "-n", GPU_NAMESPACE, plugin, "--wait=false")
    assert delete_plugin.returncode != 0 and FENCED in delete_plugin.stderr, delete_plugin.stderr
