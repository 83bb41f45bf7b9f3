"""What a team can do with the platform's own team RBAC, against the real API server of `aksgpu local up --stack prod`
(issue 40 B1 and B4): the stack's workloads bind a team's Entra group (`roleBindings`, role edit), and every request
here is made as a member of that group (kubectl --as/--as-group: the server authorizes it with that user's RBAC).

A team cannot undo its own network isolation (no NetworkPolicy writes) and still does the rest of what Kubernetes'
`edit` lets it do; it cannot run a pod at the system priority classes that preempt another team's pods."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from aks_gpu.admission.namespace_admission import quota_refusal
from aks_gpu.kube.workload_manifests import namespace_facts
from aks_gpu.naming import TEAM_ROLE_NAME
from tests.conftest import stack_model
from tests.e2e.conftest import LocalCluster, project_copy, start_in, stop
from tests.kube.test_workload_namespace import rule_triples

STACK = "prod"
GROUP = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
MEMBER = ("--as=team-member@example.com", f"--as-group={GROUP}")
TRAINING, INFERENCE = "gpu-training", "gpu-inference"


@pytest.fixture(scope="module")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The prod stack with its team's group bound to `edit` in both workload namespaces, in a project of its own (the
    shipped stack file binds no group: its group ids are the operator's)."""
    def bound_to_the_group(config: dict[str, Any]) -> None:
        for workload in config["aks-gpu:workloads"]:
            workload["roleBindings"] = [{"groupObjectId": GROUP, "role": "edit"}]

    cluster = start_in(project_copy(tmp_path_factory.mktemp("team-rbac"), edits={STACK: bound_to_the_group}), STACK)
    try:
        yield cluster
    finally:
        stop(cluster)


def as_member(cluster: LocalCluster, *args: str, stdin: str | None = None) -> Any:
    return cluster.kubectl(*args, *MEMBER, stdin=stdin)


def policy(name: str, namespace: str, spec: dict[str, Any]) -> str:
    metadata = {"name": name, "namespace": namespace}
    return json.dumps({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata, "spec": spec})


ALLOW_ALL = {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{}], "egress": [{}]}


def test_a_second_up_changes_nothing(prod: LocalCluster) -> None:
    """The team role, the bindings and the priority quotas read back as written (no diff the real engine would replay)."""
    again = prod.aksgpu("local", "up", "--stack", STACK)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Pulumi changes: none" in again.stdout


# ---------------------------------------------------------------- B1: the team's own network isolation


def test_a_team_member_cannot_add_an_allow_all_policy(prod: LocalCluster) -> None:
    done = as_member(prod, "create", "-f", "-", stdin=policy("allow-all", TRAINING, ALLOW_ALL))
    assert done.returncode != 0, f"a team member created an allow-all NetworkPolicy: {done.stdout}"
    assert "forbidden" in done.stderr.lower(), done.stderr


def test_a_team_member_cannot_delete_the_deny_all_policy(prod: LocalCluster) -> None:
    done = as_member(prod, "delete", "-n", TRAINING, "networkpolicy/deny-cross-namespace", "--dry-run=server")
    assert done.returncode != 0, f"a team member deleted deny-cross-namespace: {done.stdout}"
    assert "forbidden" in done.stderr.lower(), done.stderr
    assert prod.json("get", "-n", TRAINING, "networkpolicy/deny-cross-namespace")["spec"]["policyTypes"] == ["Ingress", "Egress"]


def test_a_team_member_cannot_widen_an_allow_from_policy_to_every_namespace(prod: LocalCluster) -> None:
    widened = json.dumps({"spec": {"ingress": [{"from": [{"namespaceSelector": {}}]}]}})
    target = "networkpolicy/allow-from-inference-gateway"
    done = as_member(prod, "patch", "-n", INFERENCE, target, "--type=merge", "-p", widened, "--dry-run=server")
    assert done.returncode != 0, f"a team member widened allow-from-inference-gateway: {done.stdout}"
    assert "forbidden" in done.stderr.lower(), done.stderr


def test_a_team_member_still_reads_the_policies_and_does_the_rest_of_edits_work(prod: LocalCluster) -> None:
    for namespace in (TRAINING, INFERENCE):
        for verb, resource in (
            ("get", "networkpolicies.networking.k8s.io"),
            ("create", "jobs.batch"),
            ("create", "deployments.apps"),
            ("delete", "pods"),
            ("create", "pods/exec"),
            ("create", "poddisruptionbudgets.policy"),
            ("create", "resourceclaims.resource.k8s.io"),
            ("update", "secrets"),
        ):
            done = as_member(prod, "auth", "can-i", verb, resource, "-n", namespace)
            assert done.stdout.strip() == "yes", (namespace, verb, resource, done.stdout, done.stderr)
        for verb in ("create", "update", "patch", "delete", "deletecollection"):
            done = as_member(prod, "auth", "can-i", verb, "networkpolicies.networking.k8s.io", "-n", namespace)
            assert done.stdout.strip() == "no", (namespace, verb, done.stdout)
    # Nothing outside its namespaces.
    assert as_member(prod, "auth", "can-i", "create", "pods", "-n", "default").stdout.strip() == "no"


def test_the_team_role_is_the_servers_edit_without_network_policy_writes(prod: LocalCluster) -> None:
    """Transcribed from Kubernetes' bootstrap policy, judged by the server's own aggregated `edit`."""
    edit = rule_triples(prod.json("get", "clusterrole/edit"))
    team = rule_triples(prod.json("get", f"clusterrole/{TEAM_ROLE_NAME}"))
    network_writes = {
        (group, "networkpolicies", verb)
        for group in ("networking.k8s.io", "extensions")
        for verb in ("create", "update", "patch", "delete", "deletecollection")
    }
    assert network_writes <= edit
    assert team == edit - network_writes, (sorted(team - edit), sorted(edit - network_writes - team))
    bindings = prod.json("get", "rolebindings", "-n", TRAINING)["items"]
    refs = {(b["roleRef"]["name"], s["name"]) for b in bindings for s in b["subjects"] if s["kind"] == "Group"}
    assert (TEAM_ROLE_NAME, GROUP) in refs and ("edit", GROUP) not in refs


# ---------------------------------------------------------------- B4: cross-team preemption


def pod(name: str, namespace: str, priority_class: str | None) -> str:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec})


@pytest.mark.parametrize("priority_class", ["system-node-critical", "system-cluster-critical"])
def test_a_team_pod_at_a_system_priority_class_is_refused_in_a_workload_namespace(
    prod: LocalCluster, priority_class: str
) -> None:
    plain = as_member(prod, "create", "--dry-run=server", "-f", "-", stdin=pod("ordinary", TRAINING, None))
    assert plain.returncode == 0, plain.stderr
    done = as_member(prod, "create", "-f", "-", stdin=pod("preempts", TRAINING, priority_class))
    if done.returncode == 0:
        prod.kubectl("delete", "-n", TRAINING, "pod/preempts", "--wait=false")
    assert done.returncode != 0, f"a team pod at {priority_class} was admitted in {TRAINING}"
    # The offline check says what the server says.
    facts = namespace_facts(stack_model(STACK))[TRAINING]
    said = quota_refusal(json.loads(pod("preempts", TRAINING, priority_class)), facts)
    assert said and said in done.stderr, (said, done.stderr)


# ---------------------------------------------------------------- B1: what the audit makes of an allow-all policy


def test_a_live_audit_reports_an_allow_all_policy_beside_the_deny_all(prod: LocalCluster) -> None:
    """Written with the cluster admin's rights (no team can now): the audit weighs it with the deny-all and reports
    the namespace unfenced, naming the policy and what it opens."""
    workload = next(w for w in stack_model(STACK).workloads if w.name == TRAINING)
    gpu = {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": {workload.resource_name: "1"}}}]}
    gpu_pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fenced", "namespace": TRAINING}, "spec": gpu})
    made = [prod.kubectl("create", "-f", "-", stdin=text) for text in (gpu_pod, policy("allow-all", TRAINING, ALLOW_ALL))]
    try:
        assert all(done.returncode == 0 for done in made), [done.stderr for done in made]
        done = prod.kubectl("wait", "-n", TRAINING, "pod/fenced", "--for=condition=PodScheduled", "--timeout=60s")
        assert done.returncode == 0, done.stderr
        audited = prod.aksgpu("audit", "--kubeconfig", str(prod.kubeconfig), "--json", timeout=180)
        report = json.loads(audited.stdout)
        found = [f for f in report["findings"] if f["id"] == "gpu-pod-unfenced" and f["namespace"] == TRAINING]
        assert found, (audited.stdout[-3000:], audited.stderr[-2000:])
        assert "NetworkPolicy allow-all reopening ingress from every namespace and every address" in found[0]["message"]
        row = next(ns for ns in report["summary"]["namespaces"] if ns["namespace"] == TRAINING)
        assert row["denyAll"] is False
    finally:
        prod.kubectl("delete", "-n", TRAINING, "pod/fenced", "networkpolicy/allow-all", "--wait=false")
