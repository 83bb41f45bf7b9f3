"""The audit over cluster states in kubectl's shapes: a clean cluster, then each finding alone, what is not
checked when a file is missing, and what --stack adds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import date
from typing import Any

import pytest
import yaml

from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.node_images import image_build_date
from aks_gpu.audit.registry import FINDING_IDS
from aks_gpu.audit.report import AuditReport, Gap
from aks_gpu.audit.stack import expectations
from aks_gpu.cluster.inventory import NODE_IMAGE_LABEL, read_pods
from aks_gpu.cluster.snapshot import ClusterSnapshot, SnapshotError
from aks_gpu.kube.workload_manifests import network_policy_manifests
from aks_gpu.resolved.stack import validate_stack
from tests.audit.clusters import (
    COLLECTED_AT,
    INFER_0,
    PROD,
    TRAIN_0,
    TRAIN_1,
    clean_snapshot,
    edited,
    find_node,
    fixture,
    gpu_nodes,
    npd_condition,
    workload_pod,
)
from tests.conftest import HEALTH_FIXTURES_DIR, raw_stack

CLEAN = clean_snapshot()
STACK = expectations(PROD, "prod")


def audit(snapshot: ClusterSnapshot, stack: bool = False) -> AuditReport:
    return run_audit(snapshot, STACK if stack else None)


def ids(report: AuditReport) -> set[str]:
    return {finding.id for finding in report.findings}


# What the SMI output every node's snapshot carries (nvidia-smi -q -x, as `validate collect` saves it) cannot show.
SMI_SHOWS_NOT = "does not show what"


def gaps(report: AuditReport) -> tuple[Gap, ...]:
    """What was not checked, but for the health ids a node's saved SMI output cannot show (see the clean test)."""
    return tuple(gap for gap in report.not_checked if SMI_SHOWS_NOT not in gap.reason)


def broken(edit: Callable[[ClusterSnapshot], Any]) -> ClusterSnapshot:
    snapshot = edited(CLEAN)
    edit(snapshot)
    return snapshot


def outside(items: list[dict[str, Any]] | None, namespace: str) -> list[dict[str, Any]]:
    return [item for item in items or [] if item["metadata"]["namespace"] != namespace]


def pods_of(snapshot: ClusterSnapshot, node: str) -> list[dict[str, Any]]:
    return [pod for pod in snapshot.pods if pod["spec"].get("nodeName") == node]


# ---------------------------------------------------------------- a clean cluster


@pytest.mark.parametrize("stack", [False, True], ids=["no stack", "--stack prod"])
def test_a_cluster_built_as_the_article_asks_has_no_finding_and_nothing_unchecked(stack: bool) -> None:
    report = audit(CLEAN, stack)

    assert report.findings == ()
    assert not report.failed
    assert gaps(report) == ()
    # nvidia-smi -q -x shows no Xid event, no NVLink state, and (on these GPUs) no retired pages: those health ids
    # are not checked on the nodes, never passed; ras-uncorrectable is AMD's and not asked of NVIDIA nodes.
    assert {(gap.ids, gap.count) for gap in report.not_checked} == {
        (("retired-pages-pending", "xid", "gpu-reset-required", "nvlink-inactive"), 2),
        (
            (
                "row-remap-failure",
                "row-remap-pending",
                "retired-pages-pending",
                "xid",
                "gpu-reset-required",
                "nvlink-inactive",
                "fabric-not-ready",
            ),
            1,
        ),
    }
    assert all(gap.practice == "health" and "kernel log" in gap.reason for gap in report.not_checked)
    assert "xid" not in report.checked and "ras-uncorrectable" not in report.checked
    assert report.gpu_nodes == 3
    assert {pool.pool: (pool.gpu_nodes, int(pool.gpus_allocatable), int(pool.gpus_requested)) for pool in report.pools} == {
        "infer": (1, 7, 7),
        "train": (2, 16, 16),
    }
    assert {ns.namespace: (ns.quota, ns.deny_all) for ns in report.namespaces} == {
        # 14 MIG slices of the infer pool plus the inferfull pool's 2 nodes x 8 whole GPUs.
        "gpu-inference": ({"nvidia.com/gpu": "30"}, True),
        "gpu-training": ({"nvidia.com/gpu": "32"}, True),
    }
    assert "gpu-pod-unfenced" in report.checked and "node-image-stale" in report.checked and "gpu-condition" in report.checked


@pytest.mark.parametrize("stack", [False, True], ids=["no stack", "--stack prod"])
def test_a_whole_gpu_inference_node_serving_its_namespace_has_no_finding(stack: bool) -> None:
    # The inferfull pool scaled up for an 8-GPU model: its node's pod is in gpu-inference, as the namespace's
    # selector (serves.aks-gpu/inference) allows, and uses all 8 H100s.
    report = audit(clean_snapshot({"train": 2, "infer": 1, "inferfull": 1}), stack)

    assert report.findings == ()
    assert gaps(report) == ()
    assert report.gpu_nodes == 4
    assert {pool.pool: (pool.gpu_nodes, int(pool.gpus_allocatable), int(pool.gpus_requested)) for pool in report.pools} == {
        "infer": (1, 7, 7),
        "inferfull": (1, 8, 8),
        "train": (2, 16, 16),
    }


def test_the_json_report_is_the_contract() -> None:
    report = audit(broken(lambda s: find_node(s, TRAIN_0)["spec"].update(taints=[]))).to_dict()

    assert set(report) == {"findings", "summary"}
    (finding,) = report["findings"]
    assert list(finding) == ["id", "severity", "node", "namespace", "pod", "message"]
    assert finding["id"] == "gpu-node-untainted" and finding["severity"] == "fail"
    assert finding["node"] == TRAIN_0 and finding["namespace"] is None and finding["pod"] is None
    summary = report["summary"]
    assert summary["collectedAt"] == COLLECTED_AT and summary["fail"] == 1 and summary["warn"] == 0
    assert {pool["pool"]: pool["idleNodes"] for pool in summary["pools"]} == {"infer": 0, "train": 0}


# ---------------------------------------------------------------- each finding alone


def test_gpu_node_untainted_alone() -> None:
    report = audit(broken(lambda s: find_node(s, TRAIN_1)["spec"].update(taints=[])))

    (finding,) = report.findings
    assert (finding.id, finding.severity, finding.node) == ("gpu-node-untainted", "fail", TRAIN_1)
    assert "nvidia.com/gpu=present:NoSchedule" in finding.message and "--node-taints" in finding.message
    assert report.failed


def test_aks_walkthroughs_sku_gpu_taint_fences_a_node_too_but_prefer_no_schedule_does_not() -> None:
    sku = audit(
        broken(lambda s: find_node(s, TRAIN_0)["spec"].update(taints=[{"key": "sku", "value": "gpu", "effect": "NoSchedule"}]))
    )
    soft = audit(
        broken(
            lambda s: find_node(s, TRAIN_0)["spec"].update(
                taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "PreferNoSchedule"}]
            )
        )
    )

    assert sku.findings == ()
    (finding,) = soft.findings
    assert finding.id == "gpu-node-untainted" and "PreferNoSchedule" in finding.message


def test_with_the_stack_a_node_needs_its_pools_own_taint() -> None:
    # sku=gpu fences a node in general, but the prod stack taints its pools nvidia.com/gpu=present:NoSchedule.
    snapshot = broken(
        lambda s: find_node(s, TRAIN_0)["spec"].update(taints=[{"key": "sku", "value": "gpu", "effect": "NoSchedule"}])
    )

    assert audit(snapshot).findings == ()
    (finding,) = audit(snapshot, stack=True).findings
    assert finding.id == "gpu-node-untainted" and "pool train of stack prod" in finding.message
    assert "pulumi up --stack prod" in finding.message


def test_gpu_squatter_alone() -> None:
    def squat(snapshot: ClusterSnapshot) -> None:
        pod = workload_pod("web", "frontend-7d9c8b6f5-q2w8r", TRAIN_0, {}, owner=("ReplicaSet", "frontend-7d9c8b6f5"))
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "4Gi"}}
        snapshot.pods.append(pod)

    report = audit(broken(squat))

    (finding,) = report.findings
    assert (finding.id, finding.severity, finding.node, finding.namespace, finding.pod) == (
        "gpu-squatter",
        "fail",
        TRAIN_0,
        "web",
        "frontend-7d9c8b6f5-q2w8r",
    )
    assert "tolerates the node's GPU taint" in finding.message


@pytest.mark.parametrize(
    ("namespace", "owner", "annotations", "phase"),
    [
        ("monitoring", ("DaemonSet", "node-exporter"), {}, "Running"),  # a DaemonSet pod runs on every node by design
        ("kube-system", ("ReplicaSet", "metrics-server-5f8b"), {}, "Running"),
        ("gpu-operator", ("ReplicaSet", "gpu-operator-6d7f"), {}, "Running"),
        ("kube-amd-gpu", ("ReplicaSet", "amd-gpu-operator-controller-manager-7b9"), {}, "Running"),
        ("default", ("Node", TRAIN_0), {"kubernetes.io/config.mirror": "3f1c9a"}, "Running"),  # a kubelet's static pod
        ("web", ("ReplicaSet", "frontend-7d9c"), {}, "Succeeded"),  # finished: it holds nothing
    ],
)
def test_pods_that_belong_on_a_gpu_node_are_no_squatters(
    namespace: str, owner: tuple[str, str], annotations: dict[str, str], phase: str
) -> None:
    def add(snapshot: ClusterSnapshot) -> None:
        pod = workload_pod(namespace, f"{owner[1]}-abcde", TRAIN_0, {}, owner=owner, phase=phase)
        pod["metadata"]["annotations"] = annotations
        snapshot.pods.append(pod)

    assert audit(broken(add)).findings == ()


def test_the_stacks_exempt_namespaces_hold_no_squatters_either() -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:admission"]["exemptNamespaces"] = ["monitoring"]
    model = validate_stack(raw, "prod").model
    snapshot = broken(
        lambda s: s.pods.append(
            workload_pod("monitoring", "grafana-5d4c-abcde", TRAIN_0, {}, owner=("ReplicaSet", "grafana-5d4c"))
        )
    )

    assert ids(audit(snapshot)) == {"gpu-squatter"}
    assert run_audit(snapshot, expectations(model, "prod")).findings == ()


def test_device_plugin_missing_alone() -> None:
    def unplug(snapshot: ClusterSnapshot) -> None:
        status = find_node(snapshot, TRAIN_1)["status"]
        for key in ("capacity", "allocatable"):
            del status[key]["nvidia.com/gpu"]
        snapshot.pods[:] = [
            pod
            for pod in snapshot.pods
            if not (pod["spec"].get("nodeName") == TRAIN_1 and pod["metadata"]["namespace"] == "gpu-training")
        ]

    report = audit(broken(unplug))

    (finding,) = report.findings
    assert (finding.id, finding.severity, finding.node) == ("device-plugin-missing", "fail", TRAIN_1)
    # Found by its labels, so the message says why it counts as a GPU node.
    assert "label accelerator=nvidia" in finding.message and "nothing in its capacity" in finding.message


def test_a_capacity_of_zero_is_no_gpu_resource() -> None:
    def zero(snapshot: ClusterSnapshot) -> None:
        status = find_node(snapshot, INFER_0)["status"]
        status["capacity"]["nvidia.com/gpu"] = status["allocatable"]["nvidia.com/gpu"] = "0"
        snapshot.pods[:] = [pod for pod in snapshot.pods if pod["metadata"]["namespace"] != "gpu-inference"]

    (finding,) = audit(broken(zero)).findings
    assert finding.id == "device-plugin-missing" and "capacity nvidia.com/gpu is 0" in finding.message


def test_with_the_stack_the_pools_own_resource_is_expected() -> None:
    # The inference pool is MIG 1g with the single strategy: nvidia.com/gpu x 7. A plugin running the mixed
    # strategy advertises nvidia.com/mig-1g.10gb instead: a GPU resource, but not the one the stack's pods ask for.
    def mixed(snapshot: ClusterSnapshot) -> None:
        status = find_node(snapshot, INFER_0)["status"]
        for key in ("capacity", "allocatable"):
            del status[key]["nvidia.com/gpu"]
            status[key]["nvidia.com/mig-1g.10gb"] = "7"
        pod = next(pod for pod in snapshot.pods if pod["metadata"]["namespace"] == "gpu-inference")
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": "7"}}

    snapshot = broken(mixed)
    assert ids(audit(snapshot)) == {"gpu-pod-unfenced"}  # the quota is on nvidia.com/gpu, not on the MIG resource
    report = audit(snapshot, stack=True)
    assert ids(report) == {"device-plugin-missing", "gpu-pod-unfenced"}
    finding = next(f for f in report.findings if f.id == "device-plugin-missing")
    assert "no nvidia.com/gpu, the resource pool infer of stack prod exposes" in finding.message
    assert "nvidia.com/mig-1g.10gb x 7 instead" in finding.message


def test_node_image_stale_alone() -> None:
    def age(snapshot: ClusterSnapshot) -> None:
        for node in gpu_nodes(snapshot):
            node["metadata"]["labels"][NODE_IMAGE_LABEL] = "AKSUbuntu-2204gen2containerd-202508.20.0"  # 61 days before

    report = audit(broken(age))

    assert ids(report) == {"node-image-stale"}
    assert len(report.findings) == 3 and all(finding.severity == "warn" for finding in report.findings)
    assert "built on 2025-08-20, 61 days before the snapshot" in report.findings[0].message
    assert not report.failed


def test_sixty_days_is_not_stale_yet() -> None:
    def age(snapshot: ClusterSnapshot) -> None:
        for node in gpu_nodes(snapshot):
            node["metadata"]["labels"][NODE_IMAGE_LABEL] = "AKSUbuntu-2204gen2containerd-202508.21.0"

    assert audit(broken(age)).findings == ()


def test_node_image_mixed_alone() -> None:
    report = audit(
        broken(
            lambda s: find_node(s, TRAIN_1)["metadata"]["labels"].update(
                {NODE_IMAGE_LABEL: "AKSUbuntu-2204gen2containerd-202510.13.0"}
            )
        )
    )

    (finding,) = report.findings
    assert (finding.id, finding.severity, finding.node) == ("node-image-mixed", "warn", None)
    assert "pool train runs 2 node images" in finding.message and "--node-image-only" in finding.message


@pytest.mark.parametrize(
    ("version", "built"),
    [
        ("AKSUbuntu-2204gen2containerd-202509.23.0", date(2025, 9, 23)),  # today's YYYYMM.DD.V
        ("AKSCBLMariner-V2katagen2-202503.13.0", date(2025, 3, 13)),
        ("AKSUbuntu-1804gen2containerd-2022.01.19", date(2022, 1, 19)),  # before 2023: YYYY.MM.DD
        ("AKSUbuntu-1604-2020.10.08", date(2020, 10, 8)),
        ("AKSUbuntu-2204gen2containerd", None),  # a base image carries no date
        ("AKSWindows-23H2-gen2", None),
        ("AKSUbuntu-2204gen2containerd-202513.40.0", None),  # no such day: not a guess
    ],
)
def test_node_image_build_dates(version: str, built: date | None) -> None:
    assert image_build_date(version) == built


def test_gpu_pod_unfenced_alone_without_a_quota() -> None:
    report = audit(replace(CLEAN, resourcequotas=outside(CLEAN.resourcequotas, "gpu-training")))

    assert ids(report) == {"gpu-pod-unfenced"}
    assert {(f.namespace, f.node) for f in report.findings} == {("gpu-training", TRAIN_0), ("gpu-training", TRAIN_1)}
    assert "no ResourceQuota on requests.nvidia.com/gpu" in report.findings[0].message
    assert next(ns for ns in report.namespaces if ns.namespace == "gpu-training").quota == {}


def without_deny_all(namespace: str) -> ClusterSnapshot:
    def open_up(snapshot: ClusterSnapshot) -> None:
        policies = snapshot.networkpolicies or []
        policies[:] = [
            p
            for p in policies
            if not (p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == "deny-cross-namespace")
        ]

    return broken(open_up)


def test_gpu_pod_unfenced_alone_without_a_deny_all_policy() -> None:
    report = audit(without_deny_all("gpu-training"))

    assert {(f.id, f.namespace) for f in report.findings} == {("gpu-pod-unfenced", "gpu-training")}
    # allow-dns isolates every pod's egress (it allows DNS alone); nothing isolates ingress any more.
    assert all("no NetworkPolicy that denies all ingress:" in f.message for f in report.findings)
    assert all("reopening" not in f.message for f in report.findings)


def test_policies_add_up_the_allow_policies_alone_still_fence_a_namespace() -> None:
    """gpu-inference without its deny-all keeps allow-from-inference-gateway (every pod, Ingress: only from there) and
    allow-dns (every pod, Egress: only DNS): each direction is still isolated, and nothing is opened wide."""
    report = audit(without_deny_all("gpu-inference"))

    assert not [f for f in report.findings if f.namespace == "gpu-inference"]
    assert next(ns for ns in report.namespaces if ns.namespace == "gpu-inference").deny_all is True


def network_policy(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata, "spec": spec}


def with_policy(namespace: str, name: str, spec: dict[str, Any]) -> AuditReport:
    def add(snapshot: ClusterSnapshot) -> None:
        (snapshot.networkpolicies or []).append(network_policy(namespace, name, spec))

    return audit(broken(add))


def reopened(report: AuditReport, namespace: str) -> set[str]:
    """What the findings of ``namespace``'s pods say it has (their ``found``, less the pod and the risk), once."""
    return {f.found.split("which has ", 1)[1].rsplit(": ", 1)[0] for f in report.findings if f.namespace == namespace}


def test_an_allow_all_policy_beside_the_deny_all_reopens_the_namespace_both_ways() -> None:
    report = with_policy(
        "gpu-training", "allow-all", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{}], "egress": [{}]}
    )

    assert ids(report) == {"gpu-pod-unfenced"}
    assert {(f.namespace, f.node) for f in report.findings} == {("gpu-training", TRAIN_0), ("gpu-training", TRAIN_1)}
    assert reopened(report, "gpu-training") == {
        "NetworkPolicy allow-all reopening ingress from every namespace and every address; "
        "egress to every namespace and every address"
    }
    assert next(ns for ns in report.namespaces if ns.namespace == "gpu-training").deny_all is False
    assert all("Delete or narrow NetworkPolicy allow-all" in f.remedy for f in report.findings)
    assert all("aks-gpu-team-edit" in f.remedy for f in report.findings)
    # The deny-all is there: nobody is told to add it.
    assert all("deny-cross-namespace" not in f.remedy for f in report.findings)


def test_an_allow_policy_widened_to_every_namespace_reopens_ingress() -> None:
    def widen(snapshot: ClusterSnapshot) -> None:
        for policy in snapshot.networkpolicies or []:
            if policy["metadata"]["name"] == "allow-from-inference-gateway":
                policy["spec"]["ingress"] = [{"from": [{"namespaceSelector": {}}]}]

    report = audit(broken(widen))
    said = "NetworkPolicy allow-from-inference-gateway reopening ingress from every namespace"
    assert reopened(report, "gpu-inference") == {said}


NAME_LABEL = "kubernetes.io/metadata.name"


@pytest.mark.parametrize(
    ("peer", "said"),
    [
        ({"ipBlock": {"cidr": "0.0.0.0/0"}}, "every address (0.0.0.0/0: the internet and the API server), IMDS 169.254.169.254"),
        (
            {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}},
            "every address (0.0.0.0/0 except 169.254.169.254/32: the internet and the API server)",
        ),
        ({"ipBlock": {"cidr": "169.254.0.0/16"}}, "IMDS 169.254.169.254"),
        ({"ipBlock": {"cidr": "::/0"}}, "every address (::/0: the internet and the API server)"),
        ({"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "db"}}}, "every namespace"),
        (
            {"namespaceSelector": {"matchExpressions": [{"key": NAME_LABEL, "operator": "NotIn", "values": ["gpu-training"]}]}},
            "every namespace (its namespaceSelector matches all 3 others)",
        ),
        (
            {"namespaceSelector": {"matchExpressions": [{"key": NAME_LABEL, "operator": "Exists"}]}},
            "every namespace (its namespaceSelector matches all 3 others)",
        ),
    ],
)
def test_egress_opened_to_every_namespace_every_address_or_imds_unfences(peer: dict[str, Any], said: str) -> None:
    # No policyTypes: a policy with egress rules isolates (and here opens) egress too.
    report = with_policy("gpu-training", "wide", {"podSelector": {}, "egress": [{"to": [peer]}]})
    assert reopened(report, "gpu-training") == {f"NetworkPolicy wide reopening egress to {said}"}


@pytest.mark.parametrize(
    "spec",
    [
        {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}]},
        {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"a": "b"}}}]}]},
        {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]},
        # Egress rules of a policy whose policyTypes leave Egress out are not applied.
        {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [], "egress": [{}]},
    ],
    ids=["a-cidr", "named-namespaces", "own-namespace", "egress-not-in-policy-types"],
)
def test_narrow_allows_keep_the_namespace_fenced(spec: dict[str, Any]) -> None:
    report = with_policy("gpu-training", "narrow", spec)
    assert not [f for f in report.findings if f.namespace == "gpu-training"]


def test_a_policy_that_opens_some_pods_reopens_the_namespace_and_one_that_isolates_some_pods_fences_none() -> None:
    some = {"podSelector": {"matchLabels": {"app": "proxy"}}, "policyTypes": ["Ingress"], "ingress": [{}]}
    assert reopened(with_policy("gpu-training", "proxy", some), "gpu-training") == {
        "NetworkPolicy proxy reopening ingress from every namespace and every address"
    }

    def replace_deny_all(snapshot: ClusterSnapshot) -> None:
        for policy in snapshot.networkpolicies or []:
            if policy["metadata"]["namespace"] == "gpu-training" and policy["metadata"]["name"] == "deny-cross-namespace":
                policy["spec"]["podSelector"] = {"matchLabels": {"app": "one"}}

    report = audit(broken(replace_deny_all))
    assert all("no NetworkPolicy that denies all ingress:" in f.message for f in report.findings if f.namespace == "gpu-training")


def test_with_the_stack_a_policy_it_does_not_make_is_deleted_and_its_own_wide_allow_narrowed_in_its_config() -> None:
    raw = raw_stack("prod")
    training = next(w for w in raw["aks-gpu:workloads"] if w["name"] == "gpu-training")
    training["network"] = {"allowEgress": [{"cidr": "0.0.0.0/0"}]}
    model = validate_stack(raw, "prod").model
    workload = next(w for w in model.workloads if w.name == "gpu-training")
    own = [m for m in network_policy_manifests(workload.config) if m["metadata"]["name"].startswith("allow-egress-")]

    def add(snapshot: ClusterSnapshot) -> None:
        allow_all = {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}
        (snapshot.networkpolicies or []).extend([*own, network_policy("gpu-training", "allow-all", allow_all)])

    report = run_audit(broken(add), expectations(model, "prod"))
    remedies = {f.remedy for f in report.findings if f.namespace == "gpu-training"}
    assert remedies == {
        "Delete or narrow NetworkPolicy allow-all (the stack does not make it); bind teams to aks-gpu-team-edit, which "
        "writes no NetworkPolicy; Narrow the network settings of workload gpu-training in stack prod: they make "
        "allow-egress-0-0-0-0-0"
    }


def test_a_peer_of_the_wrong_shape_is_refused_naming_the_field() -> None:
    def bad(snapshot: ClusterSnapshot) -> None:
        policy = network_policy("gpu-training", "bad", {"egress": [{"to": [{"ipBlock": {"cidr": 10}}]}]})
        (snapshot.networkpolicies or []).append(policy)

    with pytest.raises(SnapshotError) as error:
        audit(broken(bad))
    assert "NetworkPolicy bad" in str(error.value) and "spec.egress[0].to" in str(error.value)


@pytest.mark.parametrize("stack", [False, True], ids=["no stack", "--stack prod"])
def test_a_namespace_with_its_deny_all_policy_is_never_asked_for_one(stack: bool) -> None:
    """The namespace table says it has a deny-all policy: the finding about its missing quota asks for the quota only."""
    report = audit(replace(CLEAN, resourcequotas=outside(CLEAN.resourcequotas, "gpu-training")), stack)

    row = next(ns for ns in report.namespaces if ns.namespace == "gpu-training")
    assert (row.deny_all, row.quota) == (True, {})
    messages = [f.message for f in report.findings if f.namespace == "gpu-training"]
    assert messages and all("ResourceQuota" in m and "NetworkPolicy" not in m and "deny" not in m for m in messages)
    if stack:
        assert all("restores its gpu-quota" in m and "deny-cross-namespace" not in m for m in messages)


def test_a_namespace_with_its_gpu_quota_is_never_asked_for_one() -> None:
    policies = outside(CLEAN.networkpolicies, "gpu-training")
    report = audit(replace(CLEAN, networkpolicies=policies))

    row = next(ns for ns in report.namespaces if ns.namespace == "gpu-training")
    assert row.deny_all is False and row.quota == {"nvidia.com/gpu": "32"}
    messages = [f.message for f in report.findings if f.namespace == "gpu-training"]
    assert messages and all("deny-cross-namespace NetworkPolicy" in m and "ResourceQuota" not in m for m in messages)


def test_the_articles_and_the_kubernetes_docs_deny_all_policies_fence_a_namespace_but_deny_ingress_does_not() -> None:
    def only(policy: dict[str, Any]) -> ClusterSnapshot:
        return replace(CLEAN, networkpolicies=[*outside(CLEAN.networkpolicies, "gpu-training"), policy])

    assert audit(only(fixture("networkpolicy_deny-cross-namespace_aks-gpu-article.json"))).findings == ()
    assert audit(only(fixture("networkpolicy_default-deny-all_kubernetes-docs.json"))).findings == ()
    report = audit(only(fixture("networkpolicy_default-deny-ingress_kubernetes-docs.json")))
    assert ids(report) == {"gpu-pod-unfenced"}
    assert "no NetworkPolicy that denies all egress" in report.findings[0].message


def test_the_kubernetes_docs_gpu_quota_fences_a_namespace_and_a_scoped_one_does_not() -> None:
    docs_quota = fixture("resourcequota_extended-resource-gpu_kubernetes-docs.json")

    def quota(item: dict[str, Any]) -> ClusterSnapshot:
        return replace(CLEAN, resourcequotas=[*outside(CLEAN.resourcequotas, "gpu-training"), item])

    assert audit(quota(docs_quota)).findings == ()
    scoped = {
        **docs_quota,
        "spec": {
            **docs_quota["spec"],
            "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]},
        },
    }
    report = audit(quota(scoped))
    assert ids(report) == {"gpu-pod-unfenced"} and "has scopes" in report.findings[0].message


def test_gpu_idle_alone() -> None:
    report = audit(
        broken(
            lambda s: s.pods.__setitem__(
                slice(None),
                [
                    p
                    for p in s.pods
                    if not (p["spec"].get("nodeName") == TRAIN_1 and p["metadata"]["namespace"] == "gpu-training")
                ],
            )
        )
    )

    (finding,) = report.findings
    assert (finding.id, finding.severity, finding.node) == ("gpu-idle", "warn", TRAIN_1)
    assert "pool train: none of its 8 nvidia.com/gpu is requested (1 pod(s) run there, none asks for a GPU)" in finding.message
    assert {pool.pool: pool.idle_nodes for pool in report.pools} == {"infer": 0, "train": 1}


def test_a_finished_job_leaves_its_node_idle_and_a_pod_starting_there_does_not() -> None:
    def phase(value: str) -> ClusterSnapshot:
        def edit(snapshot: ClusterSnapshot) -> None:
            for pod in pods_of(snapshot, TRAIN_1):
                if pod["metadata"]["namespace"] == "gpu-training":
                    pod["status"]["phase"] = value

        return broken(edit)

    assert ids(audit(phase("Succeeded"))) == {"gpu-idle"}
    assert audit(phase("Pending")).findings == ()  # bound and starting: the scheduler counts its GPUs


def test_a_node_whose_gpus_are_all_unhealthy_is_idle_with_the_reason() -> None:
    # The real node status of NVIDIA/k8s-device-plugin#58: capacity 16 GPUs, allocatable 0.
    text = (HEALTH_FIXTURES_DIR / "16_kubectl-get-node_gpu_allocatable_zero.yaml.txt").read_text(encoding="utf-8")
    status = yaml.safe_load(text)["status"]

    def replace_status(snapshot: ClusterSnapshot) -> None:
        node = find_node(snapshot, TRAIN_1)
        node["status"].update(allocatable=status["allocatable"], capacity=status["capacity"])
        snapshot.pods[:] = [
            p
            for p in snapshot.pods
            if not (p["spec"].get("nodeName") == TRAIN_1 and p["metadata"]["namespace"] == "gpu-training")
        ]

    (finding,) = audit(broken(replace_status)).findings
    assert finding.id == "gpu-idle" and "none of its 16 nvidia.com/gpu is requested (only 0 allocatable" in finding.message


def test_gpu_condition_alone() -> None:
    def xid(snapshot: ClusterSnapshot) -> None:
        conditions = find_node(snapshot, TRAIN_0)["status"]["conditions"]
        conditions[:] = [c for c in conditions if c["type"] != "XIDErrors"]
        conditions.append(npd_condition("XIDErrors", "True", "XIDErrors", "XID errors present in kernel log"))

    # The node stays schedulable, so gpu-node-faulty-schedulable fails beside the condition (test_faulty.py).
    finding, unfenced = audit(broken(xid)).findings
    assert (finding.id, finding.severity, finding.node) == ("gpu-condition", "fail", TRAIN_0)
    assert (unfenced.id, unfenced.node) == ("gpu-node-faulty-schedulable", TRAIN_0)
    assert finding.message.startswith(
        "Node Problem Detector condition XIDErrors=True (XIDErrors: XID errors present in kernel log)"
    )


def test_smi_health_findings_alone_from_a_real_output() -> None:
    # gpud's real A10 nvidia-smi -q with a pending row remap (tests/fixtures/health/SOURCES.md, fixture 30).
    text = (HEALTH_FIXTURES_DIR / "30_nvidia-smi-q_a10_535.129.03_row_remap_pending.txt").read_text(encoding="utf-8")
    report = audit(broken(lambda s: s.smi.__setitem__(INFER_0, text)))

    unfenced, finding = report.findings
    assert (finding.id, finding.severity, finding.node) == ("row-remap-pending", "fail", INFER_0)
    assert (unfenced.id, unfenced.node) == ("gpu-node-faulty-schedulable", INFER_0)
    assert finding.message.startswith("GPU 00000000:07:00.0: ") and "reset" in finding.message


def test_a_warning_from_smi_health_warns() -> None:
    text = (HEALTH_FIXTURES_DIR / "31_nvidia-smi-q_8xh100_535.161.08_hw_slowdown_power_brake.txt").read_text(encoding="utf-8")
    report = audit(broken(lambda s: s.smi.__setitem__(TRAIN_0, text)))

    assert ids(report) == {"hw-slowdown"} and not report.failed
    # All eight GPUs show the same slowdown: one finding of the node naming each GPU, not eight identical rows.
    (finding,) = report.findings
    assert finding.message.startswith("8 GPUs (00000000:19:00.0, 00000000:3B:00.0, 00000000:4C:00.0, ")
    assert finding.message.count("00000000:") == 8


def test_every_finding_id_comes_from_the_registry() -> None:
    assert {
        "gpu-node-untainted",
        "gpu-squatter",
        "gpu-pod-unfenced",
        "node-image-stale",
        "node-image-mixed",
        "gpu-idle",
        "device-plugin-missing",
    } <= set(FINDING_IDS)
    assert {"row-remap-pending", "xid", "gpu-condition"} <= set(FINDING_IDS)


# ---------------------------------------------------------------- what is not checked


@pytest.mark.parametrize(
    ("field", "file", "ids_not_checked"),
    [
        ("resourcequotas", "resourcequotas.json", ("gpu-pod-unfenced",)),
        ("networkpolicies", "networkpolicies.json", ("gpu-pod-unfenced",)),
        ("namespaces", "namespaces.json", ()),
    ],
)
def test_an_absent_file_is_not_checked_never_passed(field: str, file: str, ids_not_checked: tuple[str, ...]) -> None:
    absent = {
        "resourcequotas": replace(CLEAN, resourcequotas=None),
        "networkpolicies": replace(CLEAN, networkpolicies=None),
        "namespaces": replace(CLEAN, namespaces=None),
    }[field]

    # What the absent file would have shown cannot be judged: it is neither a finding nor a pass.
    report = audit(absent)

    (gap,) = gaps(report)
    assert gap.ids == ids_not_checked and file in gap.reason and gap.practice == "isolation"
    namespace = next(ns for ns in report.namespaces if ns.namespace == "gpu-training")
    assert {"resourcequotas": namespace.quota, "networkpolicies": namespace.deny_all, "namespaces": namespace.labels}[
        field
    ] is None


def test_without_quotas_and_policies_isolation_is_not_checked_at_all() -> None:
    snapshot = replace(CLEAN, resourcequotas=None, networkpolicies=None)
    report = audit(snapshot)

    assert report.findings == () and "gpu-pod-unfenced" not in report.checked
    assert [gap.reason.split(" ")[0] for gap in gaps(report)] == ["resourcequotas.json", "networkpolicies.json"]


def test_a_file_the_collector_was_refused_says_why() -> None:
    snapshot = ClusterSnapshot(
        **{
            **CLEAN.__dict__,
            "networkpolicies": None,
            "not_collected": {"networkpolicies.json": "HTTP 403: networkpolicies is forbidden"},
        }
    )

    (gap,) = gaps(audit(snapshot))
    assert "networkpolicies.json is not in the snapshot (HTTP 403: networkpolicies is forbidden)" in gap.reason


def test_without_collected_at_node_image_age_is_not_checked() -> None:
    def age(snapshot: ClusterSnapshot) -> None:
        for node in gpu_nodes(snapshot):
            node["metadata"]["labels"][NODE_IMAGE_LABEL] = "AKSUbuntu-2204gen2containerd-202401.09.0"

    old = broken(age)
    report = audit(replace(old, collected_at=None))

    assert report.findings == () and "node-image-stale" not in report.checked
    (gap,) = gaps(report)
    assert gap.ids == ("node-image-stale",) and "meta.json" in gap.reason


def test_nodes_without_smi_output_or_conditions_are_counted_as_not_checked() -> None:
    def strip(snapshot: ClusterSnapshot) -> None:
        snapshot.smi.clear()
        snapshot.exec_errors[TRAIN_0] = "exec into gpu-resources/nvidia-device-plugin-daemonset-x: HTTP 403: forbidden"
        for node in gpu_nodes(snapshot):
            node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]

    report = audit(broken(strip))

    assert report.findings == ()
    assert [(gap.ids[0], gap.count) for gap in report.not_checked] == [
        ("ecc-uncorrectable", 2),
        ("ecc-uncorrectable", 1),
        ("gpu-condition", 3),
        ("gpu-node-faulty-schedulable", 3),
    ]
    assert "HTTP 403" in report.not_checked[1].reason
    assert "gpu-node-faulty-schedulable" not in report.checked
    assert "gpu-condition" not in report.checked and "row-remap-pending" not in report.checked


def test_no_gpu_node_at_all_is_an_empty_audit() -> None:
    snapshot = ClusterSnapshot(
        nodes=[n for n in CLEAN.nodes if n not in gpu_nodes(CLEAN)], daemonsets=[], pods=[], smi={}, exec_errors={}
    )
    report = audit(snapshot)

    assert report.gpu_nodes == 0 and report.findings == () and report.pools == ()


# ---------------------------------------------------------------- what a pod requests


@pytest.mark.parametrize(
    ("containers", "init", "overhead", "expected"),
    [
        ([{"limits": {"nvidia.com/gpu": "2"}}], [], None, {"nvidia.com/gpu": 2}),  # a limit alone is the request
        (
            [{"requests": {"nvidia.com/gpu": "1"}}, {"limits": {"nvidia.com/mig-1g.10gb": "2"}}],
            [],
            None,
            {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2},
        ),
        (
            [{"limits": {"nvidia.com/gpu": "1"}}],
            [{"limits": {"nvidia.com/gpu": "4"}}],
            None,
            {"nvidia.com/gpu": 4},
        ),  # an init container's peak
        (
            [{"limits": {"nvidia.com/gpu": "1"}}],
            [{"limits": {"nvidia.com/gpu": "1"}, "restartPolicy": "Always"}],
            None,
            {"nvidia.com/gpu": 2},
        ),  # a sidecar adds up
        ([{"limits": {"nvidia.com/gpu": "0"}}], [], None, {}),  # zero is no GPU request
        ([{"limits": {"cpu": "2", "nvidia.com/mlnxnics": "1"}}], [], None, {}),  # an RDMA NIC is no GPU
        ([{"limits": {"amd.com/gpu": "8"}}], [], {"amd.com/gpu": "0"}, {"amd.com/gpu": 8}),
    ],
)
def test_effective_gpu_requests(
    containers: list[dict[str, Any]], init: list[dict[str, Any]], overhead: dict[str, str] | None, expected: dict[str, int]
) -> None:
    pod = workload_pod("ml", "job-0", TRAIN_0, {})
    pod["spec"]["containers"] = [{"name": f"c{i}", "resources": resources} for i, resources in enumerate(containers)]
    pod["spec"]["initContainers"] = [
        {
            "name": f"i{i}",
            "resources": {k: v for k, v in spec.items() if k != "restartPolicy"},
            **({"restartPolicy": spec["restartPolicy"]} if "restartPolicy" in spec else {}),
        }
        for i, spec in enumerate(init)
    ]
    if overhead:
        pod["spec"]["overhead"] = overhead

    (info,) = read_pods([pod])
    assert {name: int(value) for name, value in info.gpu_requests.items()} == expected


# ---------------------------------------------------------------- input it cannot read


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        (
            lambda s: find_node(s, TRAIN_0)["spec"].update(taints="nvidia.com/gpu=present:NoSchedule"),
            ["nodes.json", "Node aks-train", "spec.taints"],
        ),
        (
            lambda s: s.pods[-1]["spec"]["containers"][0]["resources"].update(limits={"nvidia.com/gpu": 8}),
            ["pods.json", "Pod", "resources.limits"],
        ),
        (
            lambda s: s.pods[-1]["spec"]["containers"][0]["resources"].update(
                limits={"nvidia.com/gpu": "9" * 80}, requests={"nvidia.com/gpu": "9" * 80}
            ),
            ["pods.json", "gpu-inference/", "not a Kubernetes quantity"],
        ),
        (
            lambda s: (s.networkpolicies or [])[0]["spec"].update(policyTypes="Ingress"),
            ["networkpolicies.json", "NetworkPolicy", "spec.policyTypes"],
        ),
        (
            lambda s: (s.resourcequotas or [])[0]["spec"].update(hard={"requests.nvidia.com/gpu": "lots"}),
            ["resourcequotas.json", "ResourceQuota gpu-quota", "spec.hard"],
        ),
    ],
    ids=["taints a string", "a number as a quantity", "an 80-digit quantity", "policyTypes a string", "a quota of words"],
)
def test_an_object_of_the_wrong_shape_is_an_input_error_naming_file_and_object(
    edit: Callable[[ClusterSnapshot], Any], names: list[str]
) -> None:
    with pytest.raises(SnapshotError) as error:
        audit(broken(edit))
    for name in names:
        assert name in str(error.value)


def test_health_ids_a_nodes_output_cannot_show_are_not_checked_there_never_passed() -> None:
    # A kernel log (a real journalctl -k with Xids, tests/fixtures/health/SOURCES.md, fixture 14) judges Xids and lost
    # GPUs but shows no ECC counter: on that node ECC is not checked, while nvidia-smi -q -x judges it on the others.
    text = (HEALTH_FIXTURES_DIR / "14_journalctl-k_xid45_after_xid149_xid145_nvlink.txt").read_text(encoding="utf-8")
    report = audit(broken(lambda s: s.smi.__setitem__(TRAIN_0, text)))

    assert "xid" in ids(report) and "xid" in report.checked and "ecc-uncorrectable" in report.checked
    [kernel_log] = [gap for gap in report.not_checked if TRAIN_0 in gap.reason]
    assert kernel_log.count == 1 and "ecc-uncorrectable" in kernel_log.ids and "xid" not in kernel_log.ids
    assert "ras-uncorrectable" not in kernel_log.ids  # AMD's reading, not asked of an NVIDIA node
    [others] = [gap for gap in report.not_checked if TRAIN_1 in gap.reason]
    assert others.ids == ("retired-pages-pending", "xid", "gpu-reset-required", "nvlink-inactive")
    assert "kernel log" in others.reason
