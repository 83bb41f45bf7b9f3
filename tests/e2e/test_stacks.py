"""Every shipped stack's in-cluster layer against the real API server, deployed by the real Pulumi CLI: `up`, a
second `up` with no change, `status`, the scheduler's placements, the quota, `destroy` clean, `down` closes the port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.kube.kueue import gpu_ceilings
from aks_gpu.naming import serves_label
from tests.conftest import PROJECT_DIR, STACK_NAMES, stack_config, stack_model
from tests.e2e.conftest import ENV, Clusters, LocalCluster


@pytest.fixture(scope="module", params=STACK_NAMES)
def cluster(request: pytest.FixtureRequest, clusters: Clusters) -> Iterator[LocalCluster]:
    # The session's cluster of the stack (the admission and live-path modules may have used it, read-only); this
    # module's last tests destroy and stop it, so it is released here.
    try:
        yield clusters.get(request.param)
    finally:
        clusters.release(request.param)


def test_up_then_a_second_up_changes_nothing(cluster: LocalCluster) -> None:
    first = cluster.first_up  # type: ignore[attr-defined]
    assert '"create"' in first.stdout, first.stdout
    again = cluster.aksgpu("local", "up", "--stack", cluster.stack)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Pulumi changes: none" in again.stdout
    assert "is running at https://127.0.0.1:" in again.stderr


def test_status_reports_the_cluster_and_no_pending_change(cluster: LocalCluster) -> None:
    done = cluster.aksgpu("local", "status", "--stack", cluster.stack, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    status = json.loads(done.stdout)
    assert set(status) == {"running", "server", "kubernetesVersion", "nodes", "gpuNodes", "pulumi", "kueue", "karpenter"}
    assert set(status["pulumi"]) == {"cli", "stack", "resources", "pendingChanges"}
    model = stack_model(cluster.stack)
    assert status["running"] is True and status["server"].startswith("https://127.0.0.1:")
    assert status["kubernetesVersion"].startswith("v1.36.")
    # The system pool, the GPU pools and the CPU user pools, one node each.
    cpu_pools = len(stack_config(cluster.stack).cpu_pools)
    assert status["nodes"] == 1 + len(model.pools) + cpu_pools and status["gpuNodes"] == len(model.pools)
    assert status["pulumi"]["pendingChanges"] == 0 and status["pulumi"]["resources"] > 5
    # Kueue runs for a queueing stack only; none of these stacks has NAP pools, so Karpenter runs for none of them.
    assert isinstance(status["kueue"], int) == (model.config.queueing is not None)
    assert status["karpenter"] is None


def test_secrets_are_files_of_the_owner_only(cluster: LocalCluster) -> None:
    root = cluster.kubeconfig.parent
    for path in (cluster.kubeconfig, root / "passphrase", *root.glob("kwok/clusters/*/pki/*.key")):
        assert path.stat().st_mode & 0o077 == 0, path


def pod(name: str, namespace: str, spec: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec})


def wait_scheduled(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    done = cluster.kubectl("wait", "-n", namespace, f"pod/{name}", "--for=condition=PodScheduled", "--timeout=60s")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = cluster.json("get", "-n", namespace, f"pod/{name}")
    return result


def node_pool(cluster: LocalCluster, node: str) -> str:
    labels = cluster.json("get", f"node/{node}")["metadata"]["labels"]
    return str(labels["kubernetes.azure.com/agentpool"])


def test_the_scheduler_places_gpu_work_on_its_pool_and_general_work_off_gpu_nodes(cluster: LocalCluster) -> None:
    model = stack_model(cluster.stack)
    for workload in model.workloads:
        if workload.resource_name is None:
            continue
        pool = workload.pools[0]
        spec = {
            "nodeSelector": dict(pool.node_selector),
            "tolerations": [t.to_kube() for t in pool.tolerations],
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {workload.resource_name: "1"}}}],
        }
        created = cluster.kubectl("apply", "-f", "-", stdin=pod("gpu-work", workload.name, spec))
        assert created.returncode == 0, created.stderr
        placed = wait_scheduled(cluster, workload.name, "gpu-work")
        assert node_pool(cluster, placed["spec"]["nodeName"]) == pool.name
        general = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]}
        created = cluster.kubectl("apply", "-f", "-", stdin=pod("cpu-work", "default", general))
        # Only the system pool is untainted for it, and CriticalAddonsOnly keeps it off there too: it stays pending,
        # on no GPU node.
        assert created.returncode == 0, created.stderr
        cpu = cluster.json("get", "-n", "default", "pod/cpu-work")
        assert cpu["spec"].get("nodeName") is None or node_pool(cluster, cpu["spec"]["nodeName"]) not in {
            p.name for p in model.pools
        }
        cluster.kubectl("delete", "-n", workload.name, "pod/gpu-work", "--wait=false")
        cluster.kubectl("delete", "-n", "default", "pod/cpu-work", "--wait=false")
        break


def test_what_a_team_writes_lands_on_its_own_types_pools(cluster: LocalCluster) -> None:
    # docs/admission.md, "What a team writes": the namespace and a GPU limit, no toleration, no selector. AKS's
    # ExtendedResourceToleration tolerates the GPU taint, PodNodeSelector merges the namespace's serves.aks-gpu/<type>
    # selector, and the scheduler then has only the pools of that type (issue 33 item 2); a pod without GPUs in the
    # same namespace goes to a CPU pool, the only untainted pool that serves the type (item 7).
    model = stack_model(cluster.stack)
    cpu_pools = {pool.name for pool in stack_config(cluster.stack).cpu_pools}
    made: list[tuple[str, str]] = []
    try:
        for index, workload in enumerate(w for w in model.workloads if w.resource_name):
            own = {pool.name for pool in workload.pools}
            gpu = {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": {workload.resource_name: "1"}}}]}
            cpu = {"containers": [{"name": "main", "image": "busybox"}]}
            for kind, spec, allowed in (("gpu", gpu, own), ("cpu", cpu, cpu_pools)):
                if not allowed:
                    continue
                name = f"as-written-{kind}-{index}"
                created = cluster.kubectl("create", "-f", "-", stdin=pod(name, workload.name, spec))
                assert created.returncode == 0, created.stderr
                made.append((workload.name, name))
                placed = wait_scheduled(cluster, workload.name, name)
                assert placed["spec"]["nodeSelector"] == {serves_label(workload.type): "true"}, placed["spec"]
                assert node_pool(cluster, placed["spec"]["nodeName"]) in allowed, (workload.name, kind, allowed)
        assert made, f"stack {cluster.stack} has no workload namespace with a GPU pool"
    finally:
        for namespace, name in made:
            cluster.kubectl("delete", "-n", namespace, f"pod/{name}", "--wait=false")


# What a GPU pod asks of a pool's VM size (issue 40 A3): per stack, (workload namespace, cpu, whether AKS runs it). An
# ND96isr_H100_v5 node has 96 vCPUs, 1,060m kept for the kubelet: an 80-CPU training pod runs there. An NC4as_T4_v3 node
# has 4 vCPUs, 140m kept: a pod asking 4 CPUs never runs there.
SIZED = {"prod": ("gpu-training", "80", True), "dev": ("gpu-dev", "4", False)}


def test_the_scheduler_judges_cpu_by_the_pools_vm_size(cluster: LocalCluster) -> None:
    if cluster.stack not in SIZED:
        pytest.skip(f"no CPU-sized case for stack {cluster.stack}")
    namespace, cpu, fits = SIZED[cluster.stack]
    workload = next(w for w in stack_model(cluster.stack).workloads if w.name == namespace)
    assert workload.resource_name is not None
    pool = workload.pools[0]
    asks = {"cpu": cpu, "memory": "8Gi"}
    spec = {
        "nodeSelector": dict(pool.node_selector),
        "tolerations": [t.to_kube() for t in pool.tolerations],
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": asks, "limits": {**asks, workload.resource_name: "1"}}}
        ],
    }
    created = cluster.kubectl("create", "-f", "-", stdin=pod("sized", namespace, spec))
    assert created.returncode == 0, created.stderr
    try:
        if fits:
            placed = wait_scheduled(cluster, namespace, "sized")
            assert node_pool(cluster, placed["spec"]["nodeName"]) == pool.name
            return
        deadline = time.monotonic() + 30
        message = ""
        while time.monotonic() < deadline and "Insufficient cpu" not in message:
            conditions = cluster.json("get", "-n", namespace, "pod/sized")["status"].get("conditions") or []
            message = " ".join(str(c.get("message", "")) for c in conditions if c.get("type") == "PodScheduled")
            time.sleep(0.5)
        assert "Insufficient cpu" in message, message
        assert cluster.json("get", "-n", namespace, "pod/sized")["spec"].get("nodeName") is None
    finally:
        cluster.kubectl("delete", "-n", namespace, "pod/sized", "--wait=false")


def test_the_server_enforces_the_gpu_quota(cluster: LocalCluster) -> None:
    model = stack_model(cluster.stack)
    workload = next((w for w in model.workloads if w.resource_name and w.config.gpu_quota), None)
    if workload is None:
        pytest.skip(f"stack {cluster.stack} sets no GPU quota")
    pool = workload.pools[0]
    # With queueing the quota is the ceiling of what Kueue may admit (gpuQuota plus what the team may borrow).
    over = gpu_ceilings(model).get(workload.name, workload.config.gpu_quota) + 1
    spec = {
        "nodeSelector": dict(pool.node_selector),
        "tolerations": [t.to_kube() for t in pool.tolerations],
        "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {workload.resource_name: str(over)}}}],
    }
    done = cluster.kubectl("create", "--dry-run=server", "-f", "-", stdin=pod("over-quota", workload.name, spec))
    assert done.returncode != 0
    assert "exceeded quota" in done.stderr, done.stderr


def deployed_state(cluster: LocalCluster) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The stack's config as `local up` deployed it, and the resources of its file-backend state."""
    import yaml

    from aks_gpu.local.control_plane import LocalPaths

    paths = LocalPaths(cluster.project, cluster.stack)
    config = yaml.safe_load((paths.workspace / f"Pulumi.{cluster.stack}.yaml").read_text())["config"]
    (state_file,) = paths.state.glob(f".pulumi/stacks/*/{cluster.stack}.json")
    return config, json.loads(state_file.read_text())["checkpoint"]["latest"]["resources"]


def test_the_real_engine_registers_the_mock_engines_urns(cluster: LocalCluster) -> None:
    # The URN drift test (tests/test_urns.py) and `aksgpu plan` ask the mock engine; the real one must agree on the
    # same program and config, or a URN the drift test holds still is not the one Pulumi deploys.
    from aks_gpu.mock_engine.runner import run_program

    config, resources = deployed_state(cluster)
    deployed = {r["urn"] for r in resources if not r["type"].startswith("pulumi:")}
    planned = {r.urn for r in run_program(PROJECT_DIR, cluster.stack, config).resources if not r.type.startswith("pulumi:")}
    assert deployed == planned, {"only deployed": sorted(deployed - planned), "only planned": sorted(planned - deployed)}


def test_the_post_deploy_hook_ran_under_the_real_engine(cluster: LocalCluster) -> None:
    # The hook is bound to the device plugin's resources in the state, and its verdict is in the first up's output
    # (warn here: local up runs it with onDeploy warn, the simulated nodes having no GPU to run nvidia-smi on).
    _, resources = deployed_state(cluster)
    bound = [r for r in resources if (r.get("resourceHooks") or {}).get("AfterCreate")]
    assert bound, "no resource carries the post-deploy validation hook"
    first = cluster.first_up  # type: ignore[attr-defined]
    verdicts = [line for line in first.stdout.splitlines() if line.startswith("post-deploy hook (run by the Pulumi engine): ")]
    assert verdicts and all("aks-gpu post-deploy validation " in line for line in verdicts), first.stdout
    # A fresh cluster's GPU nodes have no recorded SMI output: "not checked", never "FAILED" for that alone (the
    # output is folded at the terminal's width: read as one line).
    said = " ".join(first.stdout.split())
    assert "post-deploy validation FAILED" not in said and "GPU node(s) not checked: simulated node" in said, said


def test_an_earlier_releases_state_is_taken_over_through_the_aliases(cluster: LocalCluster) -> None:
    # The state an earlier release left (tests/urns/<stack>.retired.txt: the URNs before the renames), imported into
    # the real engine: its preview must update in place, never create, delete or replace, as the mock engine's alias
    # model (aks_gpu.mock_engine.previous_urns) says.
    from aks_gpu.local.control_plane import LocalPaths, tools_dir
    from aks_gpu.local.engine import PulumiRun
    from aks_gpu.mock_engine import previous_urns
    from aks_gpu.mock_engine.runner import run_program
    from aks_gpu.program import run_platform
    from tests.urns import read_urns, retired_file

    config, _ = deployed_state(cluster)
    records = run_program(PROJECT_DIR, cluster.stack, config).resources
    older = {new: old for new, old in previous_urns(records, set(read_urns(retired_file(cluster.stack)))).items() if new != old}
    if not older:
        pytest.skip(f"no retired URN of stack {cluster.stack} names an in-cluster resource")
    paths = LocalPaths(cluster.project, cluster.stack)
    with PulumiRun(paths, tools_dir(cluster.project), config, run_platform).stack() as stack:
        from pulumi.automation import Deployment

        current = stack.export_stack()
        text = json.dumps(current.deployment)
        for new, old in older.items():
            # A URN stands alone in the state ("urn", "parent", dependencies) or before "::<id>" in a provider reference.
            text = text.replace(f'"{new}"', f'"{old}"').replace(f'"{new}::', f'"{old}::')
        stack.import_stack(Deployment(version=current.version, deployment=json.loads(text)))
        try:
            preview = stack.preview(color="never")
        finally:
            stack.import_stack(current)
    changes = {op: count for op, count in preview.change_summary.items() if count}
    assert not set(changes) & {"create", "delete", "replace", "create-replacement", "delete-replaced"}, (changes, older)


def test_destroy_leaves_nothing_in_the_state_or_on_the_server(cluster: LocalCluster) -> None:
    import yaml

    from aks_gpu.local.control_plane import LocalPaths, tools_dir
    from aks_gpu.local.engine import PulumiRun
    from aks_gpu.program import run_platform

    paths = LocalPaths(cluster.project, cluster.stack)
    config = yaml.safe_load((paths.workspace / f"Pulumi.{cluster.stack}.yaml").read_text())["config"]
    with PulumiRun(paths, tools_dir(cluster.project), config, run_platform).stack() as stack:
        # The passphrase encrypts the state's secrets: the kubeconfig the provider holds is never in clear on disk.
        (state_file,) = paths.state.glob(f".pulumi/stacks/*/{cluster.stack}.json")
        state = state_file.read_text()
        kubeconfig = cluster.kubeconfig.read_text()
        assert '"ciphertext"' in state and kubeconfig not in state and "current-context" not in state
        stack.destroy(color="never")
        assert not (stack.export_stack().deployment or {}).get("resources")
    namespaces = {n["metadata"]["name"] for n in cluster.json("get", "namespaces")["items"]}
    assert not namespaces & {w.name for w in stack_model(cluster.stack).workloads}


def plugin(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"pulumi-resource-kubernetes")
    except OSError:
        return False


def killed_mid_preview(cluster: LocalCluster) -> None:
    """`local status` (a pulumi preview) SIGKILLed once the provider plugin runs; what it leaves, `down` must end."""
    from aks_gpu.local.control_plane import LocalPaths
    from aks_gpu.local.engine import pulumi_processes

    home = LocalPaths(cluster.project, cluster.stack).pulumi_home
    command = [sys.executable, "-m", "aks_gpu.cli", "local", "status", "--stack", cluster.stack, "--json"]
    run = subprocess.Popen([*command, "--project-dir", str(cluster.project)], env=ENV, cwd=cluster.project,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(plugin(pid) for pid in pulumi_processes(home)):
            time.sleep(0.2)
    finally:
        run.kill()
        run.wait(timeout=10)


def stand_in_leftover(pulumi_home: Path) -> subprocess.Popen[bytes]:
    """A process as a killed run leaves it: this stack's PULUMI_HOME in its environment, deaf to SIGTERM (so `down`
    must fall back to SIGKILL). A real killed preview's CLI usually exits by itself within a second, once the
    Automation API server it talked to is gone, so it cannot show `down`'s report on every run; this one can."""
    deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(600)"
    process = subprocess.Popen([sys.executable, "-c", deaf], env={**ENV, "PULUMI_HOME": str(pulumi_home.resolve())},
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"\n"  # SIGTERM is ignored from here on
    return process


def test_down_closes_the_port(cluster: LocalCluster) -> None:
    from aks_gpu.local.control_plane import LocalPaths
    from aks_gpu.local.engine import pulumi_processes

    home = LocalPaths(cluster.project, cluster.stack).pulumi_home
    status = json.loads(cluster.aksgpu("local", "status", "--stack", cluster.stack, "--json").stdout)
    port = int(status["server"].rsplit(":", 1)[1])
    # One stack is enough to show it: a killed run may leave the Pulumi CLI and its provider; `down` ends them.
    if cluster.stack == "prod":
        killed_mid_preview(cluster)
        stand_in = stand_in_leftover(home)
    down = cluster.aksgpu("local", "down", "--stack", cluster.stack)
    assert down.returncode == 0, down.stderr
    if cluster.stack == "prod":
        assert stand_in.wait(timeout=30) == -9, "the SIGTERM-deaf leftover was not killed"
        report = " ".join(down.stderr.split())
        assert "Pulumi process(es) a killed run left" in report and str(stand_in.pid) in report, report
    assert pulumi_processes(LocalPaths(cluster.project, cluster.stack).pulumi_home) == []
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    stopped = json.loads(cluster.aksgpu("local", "status", "--stack", cluster.stack, "--json").stdout)
    assert stopped["running"] is False
