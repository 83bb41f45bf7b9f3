"""GpuWorkloadNamespace: the objects a workload namespace gets, as the Kubernetes provider would receive them."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.config import validate_config
from components.kube.workload_namespace import (
    GpuWorkloadNamespace,
    GpuWorkloadNamespaceArgs,
    pod_placement,
    workload_manifests,
)
from components.model import PlatformModel, ResolvedWorkload, resolve
from components.plan import PlanResult, kube_manifest
from tests.conftest import MockHarness, minimal_raw, stack_model

GROUP_A = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
GROUP_B = "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"
COMPONENT = "aks-gpu:index:GpuWorkloadNamespace"


def model_of(**overrides: Any) -> PlatformModel:
    return resolve(validate_config(minimal_raw(**overrides), "stacks/Pulumi.test.yaml").config)


def workload_of(workload: dict[str, Any], **overrides: Any) -> ResolvedWorkload:
    return model_of(**{"aks-gpu:workloads": [workload]}, **overrides).workloads[0]


def platform_resources(model: PlatformModel) -> tuple[str, ...]:
    return tuple(sorted({pool.resource.name for pool in model.pools}))


def run(harness: MockHarness, *workloads: ResolvedWorkload, resources: tuple[str, ...] = ()) -> PlanResult:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        for workload in workloads:
            component = GpuWorkloadNamespace(
                f"test-{workload.name}",
                GpuWorkloadNamespaceArgs(workload=workload, platform_gpu_resources=resources),
                pulumi.ResourceOptions(provider=provider),
            )
            pulumi.export(
                workload.name,
                {
                    "namespace": component.namespace_name,
                    "resource": component.resource_name,
                    "quotaKey": component.quota_key,
                    "quota": component.gpu_quota,
                    "placement": component.pod_placement,
                },
            )

    return harness.run(program)


def objects(result: PlanResult) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """Rendered Kubernetes objects keyed by (kind, namespace, name)."""
    found = {}
    for record in result.resources:
        manifest = kube_manifest(record)
        if manifest is not None:
            meta = manifest["metadata"]
            found[(manifest["kind"], meta.get("namespace"), meta["name"])] = manifest
    return found


def of_kind(result: PlanResult, kind: str, namespace: str) -> dict[str, dict[str, Any]]:
    return {name: m for (k, ns, name), m in objects(result).items() if k == kind and ns == namespace}


# ---------------------------------------------------------------- prod and dev stacks


def test_prod_objects_are_named_and_namespaced(harness: MockHarness) -> None:
    model = stack_model("prod")
    result = run(harness, *model.workloads, resources=platform_resources(model))
    assert set(objects(result)) == {
        ("Namespace", None, "gpu-training"),
        ("ResourceQuota", "gpu-training", "gpu-quota"),
        ("LimitRange", "gpu-training", "default-requests"),
        ("NetworkPolicy", "gpu-training", "deny-cross-namespace"),
        ("NetworkPolicy", "gpu-training", "allow-dns"),
        ("Namespace", None, "gpu-inference"),
        ("ResourceQuota", "gpu-inference", "gpu-quota"),
        ("LimitRange", "gpu-inference", "default-requests"),
        ("NetworkPolicy", "gpu-inference", "deny-cross-namespace"),
        ("NetworkPolicy", "gpu-inference", "allow-dns"),
        ("NetworkPolicy", "gpu-inference", "allow-from-inference-gateway"),
    }


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_no_kubernetes_object_lacks_a_name_and_children_hang_off_the_component(harness: MockHarness, stack: str) -> None:
    model = stack_model(stack)
    result = run(harness, *model.workloads, resources=platform_resources(model))
    components = {r.urn: r for r in result.resources if r.type == COMPONENT}
    namespaces = {r.urn for r in result.resources if r.type == "kubernetes:core/v1:Namespace"}
    kube = [r for r in result.resources if r.type.startswith("kubernetes:") and r.custom and "kind" in r.inputs]
    assert len(components) == len(model.workloads) and kube
    for record in kube:
        assert record.inputs["metadata"].get("name"), record.urn
        assert record.parent in components
        assert record.options["provider"] is not None
        if record.inputs["kind"] != "Namespace":
            # Everything inside a namespace waits for the namespace, and sits in its own workload's one.
            workload = components[record.parent].name.removeprefix("test-")
            assert record.inputs["metadata"]["namespace"] == workload
            assert set(record.options["dependsOn"]) & namespaces


def test_dev_namespace_gets_the_time_sliced_gpu_quota(harness: MockHarness) -> None:
    [workload] = stack_model("dev").workloads
    result = run(harness, workload)
    quota = of_kind(result, "ResourceQuota", "gpu-dev")["gpu-quota"]
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}
    assert result.outputs["gpu-dev"]["placement"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"},
    ]


def test_outputs_tell_other_stacks_where_and_how_to_place_jobs(harness: MockHarness) -> None:
    model = stack_model("prod")
    result = run(harness, *model.workloads)
    inference = result.outputs["gpu-inference"]
    assert inference["namespace"] == "gpu-inference"
    assert inference["resource"] == "nvidia.com/gpu" and inference["quotaKey"] == "requests.nvidia.com/gpu"
    assert inference["quota"] == 14
    assert inference["placement"] == {
        "nodeSelector": {"aks-gpu/pool": "infer"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    assert result.outputs["gpu-training"]["placement"]["nodeSelector"] == {"aks-gpu/pool": "train"}


def test_two_platforms_can_hold_the_same_workload_without_urn_clashes(harness: MockHarness) -> None:
    [workload] = stack_model("dev").workloads

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        for prefix in ("blue", "green"):
            GpuWorkloadNamespace(
                f"{prefix}-gpu-dev", GpuWorkloadNamespaceArgs(workload=workload), pulumi.ResourceOptions(provider=provider)
            )

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
    labels = workload_manifests(workload)[0]["metadata"]["labels"]
    assert {key: value for key, value in labels.items() if key.startswith("pod-security.kubernetes.io/")} == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }


# ---------------------------------------------------------------- quota and limit range


def test_prod_quota_caps_gpus_cpu_memory_and_pods(harness: MockHarness) -> None:
    workload = stack_model("prod").workloads[0]
    quota = objects(run(harness, workload))[("ResourceQuota", "gpu-training", "gpu-quota")]
    assert quota["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "32",
        "requests.cpu": "384",
        "requests.memory": "7000Gi",
        "pods": "200",
    }


def test_pvc_and_storage_quota_from_config() -> None:
    quota = {"persistentVolumeClaims": 5, "requestsStorage": "2Ti"}
    workload = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "quota": quota})
    hard = workload_manifests(workload)[1]["spec"]["hard"]
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
    hard = workload_manifests(workload, platform_resources(model))[1]["spec"]["hard"]
    assert hard == {"requests.nvidia.com/gpu": "0"}
    assert pod_placement(workload)["resources"] == {"limits": {}}


def test_limit_range_gives_default_requests(harness: MockHarness) -> None:
    workload = stack_model("prod").workloads[0]
    limit_range = objects(run(harness, workload))[("LimitRange", "gpu-training", "default-requests")]
    assert limit_range["spec"] == {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "1Gi"}}]}
    custom = workload_of({"name": "team-a", "type": "training", "gpuQuota": 2, "defaultRequests": {"cpu": "2", "memory": "8Gi"}})
    assert workload_manifests(custom)[2]["spec"]["limits"][0]["defaultRequest"] == {"cpu": "2", "memory": "8Gi"}


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
    policies = {m["metadata"]["name"]: m["spec"] for m in workload_manifests(workload) if m["kind"] == "NetworkPolicy"}
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
    names = [sorted(m["metadata"]["name"] for m in workload_manifests(w)) for w in (forward, backward)]
    assert names[0] == names[1]
    [ten] = [m for m in workload_manifests(forward) if m["metadata"]["name"] == "allow-egress-10-0-0-0-8"]
    assert [rule["ports"] for rule in ten["spec"]["egress"]] == [
        [{"protocol": "TCP", "port": 443}],
        [{"protocol": "UDP", "port": 53}],
    ]


# ---------------------------------------------------------------- role bindings


def test_entra_groups_are_bound_to_edit_and_view(harness: MockHarness) -> None:
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
    assert edit["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}
    assert edit["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": GROUP_A}]
    # Tokens carry group ids in lower case and Kubernetes compares names exactly.
    assert found[f"entra-view-{group_b}"]["subjects"][0]["name"] == group_b
    assert found[f"entra-view-{group_b}"]["roleRef"]["name"] == "view"


def test_no_role_bindings_unless_configured() -> None:
    workload = stack_model("prod").workloads[0]
    assert not [m for m in workload_manifests(workload) if m["kind"] == "RoleBinding"]


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
    placement = pod_placement(workload)
    assert placement["nodeSelector"] == {"aks-gpu/workload": "training"}
    assert {t["key"] for t in placement["tolerations"]} == {"nvidia.com/gpu", "kubernetes.azure.com/scalesetpriority"}
    assert placement["resources"] == {"limits": {"nvidia.com/gpu": 1}}
