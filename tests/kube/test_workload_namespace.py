"""GpuWorkloadNamespace: the objects a workload namespace gets, as the Kubernetes provider would receive them,
whether the platform builds it or another stack does, with placement values it only knows as outputs."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.schema import generate_schema

from aks_gpu.config.models import WorkloadConfig
from aks_gpu.kube.team_role import team_role_manifest
from aks_gpu.kube.workload_manifests import Manifest, PodPlacement, TolerationSpec, pod_placement, workload_manifests
from aks_gpu.kube.workload_namespace import (
    GpuWorkloadNamespace,
    GpuWorkloadNamespaceArgs,
)
from aks_gpu.mock_engine import PlanResult, ResourceRecord, kube_manifest
from aks_gpu.naming import TEAM_ROLE_NAME, type_token
from aks_gpu.resolved.model import PlatformModel, ResolvedWorkload
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.specs import WorkloadSpec
from tests.conftest import PROJECT_DIR, MockHarness, minimal_raw, raw_stack, stack_model

GROUP_A = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
GROUP_B = "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
SPOT_TOLERATION = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
VIAS = ["component", "stack"]


def model_of(**overrides: Any) -> PlatformModel:
    return validate_stack(minimal_raw(**overrides), "stacks/Pulumi.test.yaml").model


def workload_of(workload: dict[str, Any], **overrides: Any) -> ResolvedWorkload:
    return model_of(**{"aks-gpu:workloads": [workload]}, **overrides).workloads[0]


def platform_resources(model: PlatformModel) -> tuple[str, ...]:
    return tuple(sorted({pool.resource.name for pool in model.pools}))


def manifests_of(workload: ResolvedWorkload, resources: tuple[str, ...] = ()) -> list[Manifest]:
    return workload_manifests(workload.config, workload.resource_name, resources)


def placement_of(workload: ResolvedWorkload) -> PodPlacement:
    return pod_placement(workload.resource_name, workload.node_selector, [t.to_kube() for t in workload.tolerations])


def export_outputs(component: GpuWorkloadNamespace, key: str) -> None:
    pulumi.export(
        key,
        {
            "namespace": component.namespace_name,
            "resource": component.resource_name,
            "quotaKey": component.quota_key,
            "quota": component.gpu_quota,
            "placement": component.pod_placement,
        },
    )


COMPONENT_TYPE = type_token("GpuWorkloadNamespace")


def namespace_args(workload: ResolvedWorkload, other_gpu_resources: Sequence[str] = ()) -> GpuWorkloadNamespaceArgs:
    """A platform's workload as another stack would pass it to the public component: plain values, spec form."""
    args = GpuWorkloadNamespaceArgs(
        # JSON mode: lists, not tuples, as the spec types say; no None, as a spec leaves a key out instead.
        workload=cast(WorkloadSpec, workload.config.model_dump(mode="json", exclude_none=True)),
        node_selector=dict(workload.node_selector),
        tolerations=[cast(TolerationSpec, t.to_kube()) for t in workload.tolerations],
        other_gpu_resources=list(other_gpu_resources),
    )
    if workload.resource_name:
        args["resource_name"] = workload.resource_name
    return args


def run(harness: MockHarness, *workloads: ResolvedWorkload, resources: tuple[str, ...] = ()) -> PlanResult:
    """The component alone, as the platform would build it."""

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        for workload in workloads:
            component = GpuWorkloadNamespace(
                f"test-{workload.name}", namespace_args(workload, resources), pulumi.ResourceOptions(provider=provider)
            )
            export_outputs(component, workload.name)

    return harness.run(program)


@functools.cache
def whole_stack(stack: str) -> PlanResult:
    """The real ``__main__.py`` for a stack file: what ``GpuPlatform`` builds. One run per stack."""
    return MockHarness().run_stack(stack)


def workload_records(result: PlanResult) -> list[ResourceRecord]:
    """The Kubernetes objects registered under a GpuWorkloadNamespace, whoever built it."""
    components = {r.urn for r in result.resources if r.type == COMPONENT_TYPE}
    return [r for r in result.resources if r.parent in components and kube_manifest(r) is not None]


def objects(result: PlanResult) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """Rendered workload-namespace objects keyed by (kind, namespace, name)."""
    found = {}
    for record in workload_records(result):
        manifest = kube_manifest(record)
        assert manifest is not None
        meta = manifest["metadata"]
        found[(manifest["kind"], meta.get("namespace"), meta["name"])] = manifest
    return found


def of_kind(result: PlanResult, kind: str, namespace: str | None) -> dict[str, dict[str, Any]]:
    return {name: m for (k, ns, name), m in objects(result).items() if k == kind and ns == namespace}


def rendered(harness: MockHarness, stack: str, via: str) -> PlanResult:
    """A stack's workload namespaces, built by its platform or by the component alone from its model."""
    if via == "stack":
        return whole_stack(stack)
    model = stack_model(stack)
    return run(harness, *model.workloads, resources=platform_resources(model))


def placements(result: PlanResult, via: str) -> dict[str, Any]:
    """Pod placement per namespace: the platform stack's `namespaces` export, or the component's own output."""
    if via == "stack":
        return dict(result.outputs["namespaces"])
    return {name: output["placement"] for name, output in result.outputs.items()}


# ---------------------------------------------------------------- prod and dev stacks


@pytest.mark.parametrize("via", VIAS)
def test_prod_objects_are_named_and_namespaced(harness: MockHarness, via: str) -> None:
    assert set(objects(rendered(harness, "prod", via))) == {
        ("Namespace", None, "gpu-training"),
        ("ResourceQuota", "gpu-training", "gpu-quota"),
        ("ResourceQuota", "gpu-training", "system-priority"),
        ("LimitRange", "gpu-training", "default-requests"),
        ("NetworkPolicy", "gpu-training", "deny-cross-namespace"),
        ("NetworkPolicy", "gpu-training", "allow-dns"),
        ("Namespace", None, "gpu-inference"),
        ("ResourceQuota", "gpu-inference", "gpu-quota"),
        ("ResourceQuota", "gpu-inference", "system-priority"),
        ("LimitRange", "gpu-inference", "default-requests"),
        ("NetworkPolicy", "gpu-inference", "deny-cross-namespace"),
        ("NetworkPolicy", "gpu-inference", "allow-dns"),
        ("NetworkPolicy", "gpu-inference", "allow-from-inference-gateway"),
    }


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_platform_renders_exactly_what_the_component_alone_renders(harness: MockHarness, stack: str) -> None:
    from_stack = objects(whole_stack(stack))
    assert from_stack and from_stack == objects(rendered(harness, stack, "component"))


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_no_kubernetes_object_lacks_a_name_and_children_hang_off_the_component(
    harness: MockHarness, stack: str, via: str
) -> None:
    result = rendered(harness, stack, via)
    records = workload_records(result)
    namespaces = {r.parent: r for r in records if r.inputs["kind"] == "Namespace"}
    assert len(namespaces) == len(stack_model(stack).workloads)
    for record in records:
        assert record.inputs["metadata"].get("name"), record.urn
        assert record.options["provider"] is not None
        if record.inputs["kind"] != "Namespace":
            # Everything inside a namespace waits for the namespace, and sits in its own workload's one.
            namespace = namespaces[record.parent]
            assert record.inputs["metadata"]["namespace"] == namespace.inputs["metadata"]["name"]
            assert namespace.urn in record.options["dependsOn"]


@pytest.mark.parametrize("via", VIAS)
def test_dev_namespace_gets_the_time_sliced_gpu_quota(harness: MockHarness, via: str) -> None:
    result = rendered(harness, "dev", via)
    quota = of_kind(result, "ResourceQuota", "gpu-dev")["gpu-quota"]
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}
    assert placements(result, via)["gpu-dev"]["tolerations"] == [GPU_TOLERATION, SPOT_TOLERATION]
    # Its one pool is spot: PodTolerationRestriction hands every Pod the spot toleration, never the GPU one.
    annotations = of_kind(result, "Namespace", None)["gpu-dev"]["metadata"]["annotations"]
    assert json.loads(annotations["scheduler.alpha.kubernetes.io/defaultTolerations"]) == [SPOT_TOLERATION]


@pytest.mark.parametrize("via", VIAS)
def test_prod_quota_caps_gpus_cpu_memory_and_pods(harness: MockHarness, via: str) -> None:
    found = objects(rendered(harness, "prod", via))
    assert found[("ResourceQuota", "gpu-training", "gpu-quota")]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "32",
        "requests.cpu": "384",
        "requests.memory": "7000Gi",
        "pods": "200",
    }
    # Both inference pools: 14 of infer's MIG slices plus inferfull's 2 nodes x 8 GPUs (and their 2 x 96 vCPUs).
    assert found[("ResourceQuota", "gpu-inference", "gpu-quota")]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "30",
        "requests.cpu": "288",
        "requests.memory": "4000Gi",
        "pods": "100",
    }


@pytest.mark.parametrize("via", VIAS)
def test_outputs_tell_other_stacks_where_and_how_to_place_jobs(harness: MockHarness, via: str) -> None:
    found = placements(rendered(harness, "prod", via), via)
    # Two inference pools (infer's MIG slices, inferfull's whole GPUs): selected by workload type, not one pool.
    assert found["gpu-inference"] == {
        "nodeSelector": {"aks-gpu/workload": "inference"},
        "tolerations": [GPU_TOLERATION],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    assert found["gpu-training"]["nodeSelector"] == {"aks-gpu/pool": "train"}


def test_component_outputs_name_the_namespace_resource_and_quota(harness: MockHarness) -> None:
    inference = run(harness, *stack_model("prod").workloads).outputs["gpu-inference"]
    assert inference["namespace"] == "gpu-inference"
    assert inference["resource"] == "nvidia.com/gpu" and inference["quotaKey"] == "requests.nvidia.com/gpu"
    assert inference["quota"] == 30


def test_two_platforms_can_hold_the_same_workload_without_urn_clashes(harness: MockHarness) -> None:
    [workload] = stack_model("dev").workloads

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        for prefix in ("blue", "green"):
            GpuWorkloadNamespace(f"{prefix}-gpu-dev", namespace_args(workload), pulumi.ResourceOptions(provider=provider))

    result = harness.run(program)  # a duplicate URN raises
    assert len([r for r in result.resources if r.type == "kubernetes:core/v1:Namespace"]) == 2


# ---------------------------------------------------------------- namespace


def test_namespace_carries_the_workload_labels_and_baseline_pod_security_by_default(harness: MockHarness) -> None:
    workload = stack_model("prod").workloads[0]
    labels = objects(run(harness, workload))[("Namespace", None, "gpu-training")]["metadata"]["labels"]
    assert labels["workload"] == "training" and labels["aks-gpu/workload"] == "training"
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    # Teams are told what `restricted` would refuse without being blocked by it.
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"


def test_restricted_pod_security_on_request() -> None:
    workload = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "podSecurity": "restricted"})
    labels = manifests_of(workload)[0]["metadata"]["labels"]
    assert {key: value for key, value in labels.items() if key.startswith("pod-security.kubernetes.io/")} == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }


# ---------------------------------------------------------------- quota and limit range


def test_pvc_and_storage_quota_from_config() -> None:
    quota = {"persistentVolumeClaims": 5, "requestsStorage": "2Ti"}
    workload = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "quota": quota})
    hard = manifests_of(workload)[1]["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "2", "persistentvolumeclaims": "5", "requests.storage": "2Ti"}


MIG_MIXED = {
    "aks-gpu:gpuPools": [
        {"name": "train", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training", "maxCount": 2},
        {
            "name": "infer",
            "vendor": "nvidia",
            "vmSize": "Standard_NC24ads_A100_v4",
            "workload": "inference",
            "migProfile": "MIG1g",
            "maxCount": 3,
        },
    ],
    "aks-gpu:workloads": [
        {"name": "team-train", "type": "training", "gpuQuota": 2},
        {"name": "team-infer", "type": "inference", "gpuQuota": 14},
    ],
    "aks-gpu:devicePlugin": {"migStrategy": "mixed"},
}


def test_mig_mixed_quota_uses_the_mig_resource_name(harness: MockHarness) -> None:
    model = model_of(**MIG_MIXED)
    result = run(harness, *model.workloads)
    hard = of_kind(result, "ResourceQuota", "team-infer")["gpu-quota"]["spec"]["hard"]
    assert hard == {"requests.nvidia.com/mig-1g.10gb": "14"}
    assert result.outputs["team-infer"]["placement"]["resources"] == {"limits": {"nvidia.com/mig-1g.10gb": 1}}


def test_other_gpu_resources_of_the_platform_are_capped_at_zero(harness: MockHarness) -> None:
    model = model_of(**MIG_MIXED)
    result = run(harness, *model.workloads, resources=platform_resources(model))
    # Without the zero, the inference team could take whole GPUs of the training pool unmetered.
    assert of_kind(result, "ResourceQuota", "team-infer")["gpu-quota"]["spec"]["hard"] == {
        "requests.nvidia.com/mig-1g.10gb": "14",
        "requests.nvidia.com/gpu": "0",
    }
    assert of_kind(result, "ResourceQuota", "team-train")["gpu-quota"]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "2",
        "requests.nvidia.com/mig-1g.10gb": "0",
    }


def test_workload_no_pool_serves_gets_no_gpu_at_all() -> None:
    model = model_of(**{"aks-gpu:workloads": [{"name": "notebooks", "type": "notebooks", "gpuQuota": 0}]})
    [workload] = model.workloads
    hard = manifests_of(workload, platform_resources(model))[1]["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "0"}
    assert placement_of(workload)["resources"] == {"limits": {}}


def test_limit_range_gives_default_requests(harness: MockHarness) -> None:
    workload = stack_model("prod").workloads[0]
    limit_range = objects(run(harness, workload))[("LimitRange", "gpu-training", "default-requests")]
    assert limit_range["spec"] == {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "1Gi"}}]}
    custom = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "defaultRequests": {"cpu": "2", "memory": "8Gi"}})
    assert manifests_of(custom)[2]["spec"]["limits"][0]["defaultRequest"] == {"cpu": "2", "memory": "8Gi"}


# ---------------------------------------------------------------- network policies


def test_deny_cross_namespace_is_exactly_the_articles(harness: MockHarness) -> None:
    model = stack_model("prod")
    result = run(harness, *model.workloads)
    for namespace in ("gpu-training", "gpu-inference"):
        policy = of_kind(result, "NetworkPolicy", namespace)["deny-cross-namespace"]
        assert policy["apiVersion"] == "networking.k8s.io/v1"
        assert policy["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}


def test_dns_egress_to_coredns_is_on_by_default(harness: MockHarness) -> None:
    workload = stack_model("prod").workloads[0]
    policy = of_kind(run(harness, workload), "NetworkPolicy", "gpu-training")["allow-dns"]
    assert policy["spec"] == {
        "podSelector": {},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            }
        ],
    }


def test_dns_policy_is_off_when_disabled(harness: MockHarness) -> None:
    workload = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "network": {"allowDns": False}})
    assert set(of_kind(run(harness, workload), "NetworkPolicy", "team-a")) == {"deny-cross-namespace"}


def test_opt_in_allows_are_each_their_own_object() -> None:
    network = {
        "allowSameNamespace": True,
        "allowToNamespaces": ["feature-store", "feature-store"],
        "allowFromNamespaces": [{"namespace": "inference-gateway", "ports": [8000, 8001]}, {"namespace": "monitoring"}],
        "allowEgress": [
            {"cidr": "10.20.0.0/16", "ports": [443]},
            {"cidr": "fd00::/8", "protocol": "UDP"},
        ],
    }
    workload = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "network": network})
    policies = {m["metadata"]["name"]: m["spec"] for m in manifests_of(workload) if m["kind"] == "NetworkPolicy"}
    assert list(policies) == [
        "deny-cross-namespace",
        "allow-dns",
        "allow-same-namespace",
        "allow-from-inference-gateway",
        "allow-from-monitoring",
        "allow-to-feature-store",
        "allow-egress-10-20-0-0-16",
        "allow-egress-fd00---8",
    ]
    assert policies["allow-same-namespace"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    assert policies["allow-same-namespace"]["egress"] == [{"to": [{"podSelector": {}}]}]
    gateway = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "inference-gateway"}}}
    assert policies["allow-from-inference-gateway"] == {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [gateway], "ports": [{"protocol": "TCP", "port": 8000}, {"protocol": "TCP", "port": 8001}]}],
    }
    # No ports: everything from that namespace.
    assert "ports" not in policies["allow-from-monitoring"]["ingress"][0]
    assert policies["allow-to-feature-store"]["policyTypes"] == ["Egress"]
    assert policies["allow-to-feature-store"]["egress"] == [
        {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "feature-store"}}}]}
    ]
    assert policies["allow-egress-10-20-0-0-16"]["egress"] == [
        {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}], "ports": [{"protocol": "TCP", "port": 443}]}
    ]
    # No ports: every port, of the stated protocol only.
    assert policies["allow-egress-fd00---8"]["egress"] == [
        {"to": [{"ipBlock": {"cidr": "fd00::/8"}}], "ports": [{"protocol": "UDP"}]}
    ]


def test_entries_for_the_same_peer_share_one_policy_whatever_the_order() -> None:
    rules = [
        {"cidr": "10.0.0.0/8", "ports": [443]},
        {"cidr": "172.16.0.0/12"},
        {"cidr": "10.0.0.0/8", "ports": [53], "protocol": "UDP"},
    ]
    forward = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "network": {"allowEgress": rules}})
    backward = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "network": {"allowEgress": rules[::-1]}})
    names = [sorted(m["metadata"]["name"] for m in manifests_of(w)) for w in (forward, backward)]
    assert names[0] == names[1]
    [ten] = [m for m in manifests_of(forward) if m["metadata"]["name"] == "allow-egress-10-0-0-0-8"]
    assert [rule["ports"] for rule in ten["spec"]["egress"]] == [
        [{"protocol": "TCP", "port": 443}],
        [{"protocol": "UDP", "port": 53}],
    ]


# ---------------------------------------------------------------- role bindings


def test_entra_groups_are_bound_to_the_team_role_and_view(harness: MockHarness) -> None:
    bindings = [
        {"groupObjectId": GROUP_A, "role": "edit"},
        {"groupObjectId": GROUP_B, "role": "view"},
        {"groupObjectId": GROUP_B.lower(), "role": "view"},
    ]
    workload = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "roleBindings": bindings})
    found = of_kind(run(harness, workload), "RoleBinding", "team-a")
    group_b = GROUP_B.lower()
    assert set(found) == {f"entra-edit-{GROUP_A}", f"entra-view-{group_b}"}
    edit = found[f"entra-edit-{GROUP_A}"]
    assert edit["apiVersion"] == "rbac.authorization.k8s.io/v1"
    # `edit` is the platform's team role (no NetworkPolicy writes); the object keeps its name, so its URN.
    assert edit["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TEAM_ROLE_NAME}
    assert edit["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": GROUP_A}]
    # Tokens carry group ids in lower case and Kubernetes compares names exactly.
    assert found[f"entra-view-{group_b}"]["subjects"][0]["name"] == group_b
    assert found[f"entra-view-{group_b}"]["roleRef"]["name"] == "view"


def test_no_role_bindings_unless_configured() -> None:
    workload = stack_model("prod").workloads[0]
    assert not [m for m in manifests_of(workload) if m["kind"] == "RoleBinding"]


def rule_triples(role: Manifest) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_team_role_reads_network_policies_and_writes_none() -> None:
    """The e2e compares the role with the real server's edit; here, what B1 needs of it without a server."""
    role = team_role_manifest()
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", TEAM_ROLE_NAME) and "aggregationRule" not in role
    triples = rule_triples(role)
    network = {(g, v) for g, r, v in triples if r == "networkpolicies"}
    assert network == {(g, v) for g in ("networking.k8s.io", "extensions") for v in ("get", "list", "watch")}
    # What a team runs its work with stays, PodDisruptionBudgets and DRA claims among it.
    for needed in (
        ("", "pods", "create"),
        ("", "pods/exec", "create"),
        ("batch", "jobs", "create"),
        ("apps", "deployments", "patch"),
        ("policy", "poddisruptionbudgets", "create"),
        ("resource.k8s.io", "resourceclaims", "create"),
    ):
        assert needed in triples, needed
    # Nothing edit lacks: no RBAC, no quota or limit range writes.
    reads = ("get", "list", "watch")
    assert not {g for g, _, _ in triples if g == "rbac.authorization.k8s.io"}
    assert not {(r, v) for _, r, v in triples if r in ("resourcequotas", "limitranges") and v not in reads}


def test_the_platform_registers_the_team_role_once_before_the_workload_namespaces(harness: MockHarness) -> None:
    records = whole_stack("prod").resources
    roles = [r for r in records if r.type.endswith(":ClusterRole") and r.inputs["metadata"]["name"] == TEAM_ROLE_NAME]
    assert len(roles) == 1
    namespaces = [r for r in records if r.type == type_token("GpuWorkloadNamespace")]
    assert namespaces and all(roles[0].urn in r.options["dependsOn"] for r in namespaces)


@pytest.mark.parametrize("via", VIAS)
def test_every_workload_namespace_refuses_pods_at_the_system_priority_classes(harness: MockHarness, via: str) -> None:
    result = rendered(harness, "prod", via)
    for namespace in ("gpu-training", "gpu-inference"):
        quota = of_kind(result, "ResourceQuota", namespace)["system-priority"]
        assert quota["spec"] == {
            "hard": {"pods": "0"},
            "scopeSelector": {
                "matchExpressions": [
                    {
                        "scopeName": "PriorityClass",
                        "operator": "In",
                        "values": ["system-cluster-critical", "system-node-critical"],
                    }
                ]
            },
        }


# ---------------------------------------------------------------- pod placement (pure)


def test_pod_placement_for_pools_of_one_type_selects_by_workload_label() -> None:
    pools = [
        {"name": "gpua", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training", "maxCount": 2},
        {
            "name": "gpub",
            "vendor": "nvidia",
            "vmSize": "Standard_NC48ads_A100_v4",
            "workload": "training",
            "maxCount": 2,
            "spot": True,
        },
    ]
    workload = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2}, **{"aks-gpu:gpuPools": pools})
    placement = placement_of(workload)
    assert placement["nodeSelector"] == {"aks-gpu/workload": "training"}
    assert {t["key"] for t in placement["tolerations"]} == {"nvidia.com/gpu", "kubernetes.azure.com/scalesetpriority"}
    assert placement["resources"] == {"limits": {"nvidia.com/gpu": 1}}


# ---------------------------------------------------------------- as another stack adds it


def run_args(harness: MockHarness, make_args: Callable[[], GpuWorkloadNamespaceArgs]) -> PlanResult:
    """The component as an application stack adds it; ``make_args`` runs inside the program, where outputs live."""

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        export_outputs(GpuWorkloadNamespace("team", make_args(), pulumi.ResourceOptions(provider=provider)), "team")

    return harness.run(program)


def from_platform_outputs() -> GpuWorkloadNamespaceArgs:
    # The shapes an application stack gets from the platform stack's outputs through a StackReference:
    # whole outputs, values picked out of them, and plain maps and lists holding outputs.
    pool: pulumi.Output[Any] = pulumi.Output.from_input(
        {"resource_name": "nvidia.com/mig-1g.10gb", "tolerations": [GPU_TOLERATION, SPOT_TOLERATION, GPU_TOLERATION]}
    )
    return {
        "workload": {"name": "team-infer", "type": "inference", "gpu_quota": 7},
        "resource_name": pool.apply(lambda p: p["resource_name"]),
        "node_selector": {"aks-gpu/pool": pulumi.Output.from_input("infer")},
        "tolerations": pool.apply(lambda p: p["tolerations"]),
        "other_gpu_resources": [pulumi.Output.from_input("nvidia.com/gpu"), "nvidia.com/mig-1g.10gb"],
    }


def test_placement_known_only_as_outputs_renders_the_quota_and_the_placement(harness: MockHarness) -> None:
    result = run_args(harness, from_platform_outputs)
    assert of_kind(result, "ResourceQuota", "team-infer")["gpu-quota"]["spec"]["hard"] == {
        "requests.nvidia.com/mig-1g.10gb": "7",
        "requests.nvidia.com/gpu": "0",
    }
    outputs = result.outputs["team"]
    assert outputs["placement"] == {
        "nodeSelector": {"aks-gpu/pool": "infer"},
        # Each taint tolerated once, however often the inputs list it.
        "tolerations": [GPU_TOLERATION, SPOT_TOLERATION],
        "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}},
    }
    assert outputs["resource"] == "nvidia.com/mig-1g.10gb" and outputs["quotaKey"] == "requests.nvidia.com/mig-1g.10gb"
    assert outputs["namespace"] == "team-infer" and outputs["quota"] == 7
    assert set(of_kind(result, "NetworkPolicy", "team-infer")) == {"deny-cross-namespace", "allow-dns"}
    # Tolerations known only as outputs (perhaps secret) are not written into a namespace annotation.
    namespace = of_kind(result, "Namespace", None)["team-infer"]
    assert "scheduler.alpha.kubernetes.io/defaultTolerations" not in namespace["metadata"]["annotations"]


def test_without_a_resource_name_the_namespace_gets_no_gpu(harness: MockHarness) -> None:
    def args() -> GpuWorkloadNamespaceArgs:
        return {
            "workload": {"name": "notebooks", "type": "notebooks", "gpu_quota": 0},
            "node_selector": {},
            "tolerations": [],
            "other_gpu_resources": pulumi.Output.from_input(["amd.com/gpu", "nvidia.com/gpu"]),
        }

    result = run_args(harness, args)
    hard = of_kind(result, "ResourceQuota", "notebooks")["gpu-quota"]["spec"]["hard"]
    assert hard == {"requests.amd.com/gpu": "0", "requests.nvidia.com/gpu": "0"}
    outputs = result.outputs["team"]
    assert outputs["placement"]["resources"] == {"limits": {}}
    assert outputs["resource"] == "" and outputs["quotaKey"] == ""


def test_a_bad_workload_spec_is_refused_naming_each_key_and_nothing_is_registered(harness: MockHarness) -> None:
    errors: list[str] = []
    specs: list[Any] = [
        {"name": "Team_A", "type": "training", "gpu_quota": -1, "quota": {"cpus": "4"}},
        {"name": "team-a", "type": "training", "gpu_quota": 1, "network": {"allow_egress": [{"cidr": "10.300.0.0/16"}]}},
    ]

    def program() -> None:
        for spec in specs:
            with pytest.raises(pulumi.RunError) as caught:
                GpuWorkloadNamespace("team", {"workload": spec, "node_selector": {}, "tolerations": []})
            errors.append(str(caught.value))

    result = harness.run(program)
    assert not [r for r in result.resources if r.type != "pulumi:pulumi:Stack"]
    shape, cidr = (message.splitlines() for message in errors)
    assert shape[0] == "invalid args for GpuWorkloadNamespace team:"
    assert sorted(line.strip().partition(":")[0] for line in shape[1:]) == [
        # Property paths in camelCase, as every language's SDK names the inputs; an unknown key as written.
        "workload.gpuQuota",
        "workload.name",
        "workload.quota.cpus",
    ]
    assert any("'Team_A' is not allowed: must be a DNS label" in line for line in shape)
    assert any("workload.quota.cpus: unknown key; did you mean `cpu`?" in line for line in shape)
    assert cidr[1].strip().startswith("workload.network.allowEgress[0].cidr: '10.300.0.0/16' is not an IPv4 or IPv6 network")


def test_host_bits_in_an_egress_cidr_are_a_warning(harness: MockHarness) -> None:
    def args() -> GpuWorkloadNamespaceArgs:
        workload: Any = {
            "name": "team-a",
            "type": "training",
            "gpu_quota": 1,
            "network": {"allow_egress": [{"cidr": "10.0.0.1/8"}]},
        }
        return {"workload": workload, "node_selector": {}, "tolerations": []}

    result = run_args(harness, args)
    assert any("workload.network.allowEgress[0].cidr: '10.0.0.1/8' has host bits set" in w for w in result.warnings)
    assert "allow-egress-10-0-0-1-8" in of_kind(result, "NetworkPolicy", "team-a")


def test_camel_case_args_from_another_language_reach_the_same_objects(harness: MockHarness) -> None:
    # What Pulumi's component provider hands the constructor when a TypeScript, Go or YAML stack creates it:
    # schema (camelCase) names mapped back to Python ones, integers arriving as floats.
    inputs = {
        "workload": {
            "name": "team-b",
            "type": "inference",
            "gpuQuota": 3.0,
            "network": {"allowSameNamespace": True},
            "roleBindings": [{"groupObjectId": GROUP_A, "role": "view"}],
        },
        "resourceName": "amd.com/gpu",
        "nodeSelector": {"aks-gpu/pool": "mi300x"},
        "tolerations": [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "otherGpuResources": ["nvidia.com/gpu"],
    }
    definition = Analyzer("aks-gpu").analyze([GpuWorkloadNamespace])["component_definitions"]["GpuWorkloadNamespace"]
    mapped = cast(GpuWorkloadNamespaceArgs, ComponentProvider([GpuWorkloadNamespace], "aks-gpu").map_inputs(inputs, definition))
    result = run_args(harness, lambda: mapped)
    assert of_kind(result, "ResourceQuota", "team-b")["gpu-quota"]["spec"]["hard"] == {
        "requests.amd.com/gpu": "3",
        "requests.nvidia.com/gpu": "0",
    }
    assert set(of_kind(result, "NetworkPolicy", "team-b")) == {"deny-cross-namespace", "allow-dns", "allow-same-namespace"}
    assert set(of_kind(result, "RoleBinding", "team-b")) == {f"entra-view-{GROUP_A}"}
    assert result.outputs["team"]["placement"]["tolerations"] == [
        {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]


# ---------------------------------------------------------------- the platform's args, the package schema


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_namespace_args_carry_the_workload_config_unchanged_as_plain_values(stack: str) -> None:
    extra = workload_of(
        {
            "name": "team-a",
            "type": "training",
            "gpuQuota": 2,
            "quota": {"cpu": "8", "persistentVolumeClaims": 3},
            "network": {"allowToNamespaces": ["x"], "allowEgress": [{"cidr": "10.0.0.0/8", "ports": [443]}]},
            "roleBindings": [{"groupObjectId": GROUP_B, "role": "edit"}],
        }
    )
    model = stack_model(stack)
    for workload in (*model.workloads, extra):
        args = namespace_args(workload, platform_resources(model))
        assert WorkloadConfig.model_validate(args["workload"]) == workload.config
        # Plain JSON values only: what a plan or another language could hold.
        assert json.loads(json.dumps(args)) == args
        assert args["node_selector"] == workload.node_selector
        assert args.get("resource_name") == workload.resource_name


def test_pulumi_schema_inference_accepts_the_component() -> None:
    analysis = Analyzer("aks-gpu").analyze([GpuWorkloadNamespace])
    component = analysis["component_definitions"]["GpuWorkloadNamespace"]
    inputs = component.inputs
    assert set(inputs) == {"workload", "resourceName", "nodeSelector", "tolerations", "otherGpuResources"}
    assert {name for name, prop in inputs.items() if prop.optional} == {"resourceName", "otherGpuResources"}
    # Where its pods go, and the workload's name, type and quota, may come from another stack's outputs.
    assert not any(inputs[name].plain for name in ("workload", "resourceName", "nodeSelector", "tolerations"))
    workload = analysis["type_definitions"]["WorkloadSpec"].properties
    assert {name for name, prop in workload.items() if not prop.plain} == {"name", "type", "gpuQuota"}
    assert {"namespaceName", "resourceName", "quotaKey", "gpuQuota", "podPlacement"} <= set(component.outputs)
    types = analysis["type_definitions"]
    assert set(types["PodPlacement"].properties) == {"nodeSelector", "tolerations", "resources"}
    assert {name for name, prop in types["TolerationSpec"].properties.items() if prop.optional} == {"value"}
    schema = generate_schema("aks-gpu", "0.0.0", None, analysis["component_definitions"], types, [])
    assert COMPONENT_TYPE in json.loads(json.dumps(schema.to_json()))["resources"]


def test_the_manifest_module_needs_no_pulumi() -> None:
    code = "import sys, aks_gpu.kube.workload_manifests; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pulumi'))"
    found = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_pod_placement_tolerates_each_taint_once_and_exists_carries_no_value() -> None:
    exists = {"key": "sku", "operator": "Exists", "value": "gpu", "effect": "NoSchedule"}
    placement = pod_placement("nvidia.com/gpu", {"aks-gpu/pool": "a"}, [SPOT_TOLERATION, exists, SPOT_TOLERATION])
    assert placement["tolerations"] == [SPOT_TOLERATION, {"key": "sku", "operator": "Exists", "effect": "NoSchedule"}]


def test_an_rdma_namespace_gets_its_policy_before_its_pod_security_is_relaxed(harness: MockHarness) -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:workloads"][0]["rdma"] = True
    model = validate_stack(raw, "test").model
    result = run(harness, model.workloads[0])
    [policy] = result.by_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    [binding] = result.by_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
    [namespace] = result.by_type("kubernetes:core/v1:Namespace")
    assert binding.options["dependsOn"] == [policy.urn]
    assert namespace.options["dependsOn"] == [policy.urn, binding.urn]
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert policy.inputs["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"] == ["gpu-training"]
