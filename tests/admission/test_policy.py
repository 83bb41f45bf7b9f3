"""The rendered ValidatingAdmissionPolicy and binding: what a cluster of each stack gets."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from kubernetes.client.models import (
    V1MutatingAdmissionPolicy,
    V1MutatingAdmissionPolicyBinding,
    V1ValidatingAdmissionPolicy,
    V1ValidatingAdmissionPolicyBinding,
)

from aks_gpu.admission.chain import DEFAULT_TOLERATIONS_ANNOTATION
from aks_gpu.admission.dra import gpu_devices
from aks_gpu.admission.engine import ENGINE_NAMES, engine_named
from aks_gpu.admission.evaluate import build_request, compile_bindings, evaluate, evaluate_request
from aks_gpu.admission.policy import (
    BINDING_NAME,
    DEVICE_ENV_POLICY_NAME,
    POLICY_NAME,
    gpu_resource_names,
    pools_by_type,
    render_policy,
    workload_namespaces,
)
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import STACK_NAMES, minimal_raw, raw_stack, stack_model

# CEL words Kubernetes reserves: a field with one of these names must be written __name__, so a plain `.name`
# selection of one would not compile on a real API server. https://kubernetes.io/docs/reference/using-api/cel/#escaping
CEL_RESERVED = ("as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
                "package", "namespace", "return", "var", "void", "while")  # fmt: skip
# Functions and macros of standard CEL (matches: RE2, https://github.com/google/cel-spec/blob/master/doc/langdef.md),
# cel-go's string extension and the Kubernetes quantity library.
KUBERNETES_CEL_CALLS = {
    "has", "size", "string", "all", "exists", "filter", "map", "startsWith", "matches", "join", "quantity", "compareTo",
    "isGreaterThan",
}  # fmt: skip


def model_with(**admission: Any) -> PlatformModel:
    raw = raw_stack("prod")
    raw["aks-gpu:admission"] = {**raw.get("aks-gpu:admission", {}), **admission}
    return validate_stack(raw, "test").model


def expressions(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    found = [c["expression"] for c in spec.get("matchConditions", [])] + [v["expression"] for v in spec["variables"]]
    for validation in spec["validations"]:
        found += [validation["expression"], validation["messageExpression"]]
    return found


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_gets_the_named_policy_and_binding(stack: str) -> None:
    policy, binding, env_policy, env_binding, dra_policy, dra_binding, *rest = render_policy(stack_model(stack))
    service_policy, service_binding, pdb_policy, pdb_binding, void_policy, void_binding = rest
    assert (policy["kind"], policy["metadata"]["name"]) == ("ValidatingAdmissionPolicy", POLICY_NAME)
    assert (binding["kind"], binding["metadata"]["name"]) == ("ValidatingAdmissionPolicyBinding", BINDING_NAME)
    assert (env_policy["kind"], env_policy["metadata"]["name"]) == ("ValidatingAdmissionPolicy", DEVICE_ENV_POLICY_NAME)
    assert (env_binding["kind"], env_binding["metadata"]["name"]) == ("ValidatingAdmissionPolicyBinding", "aks-gpu-device-env")
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert binding["spec"]["policyName"] == "aks-gpu-gpu-placement"
    assert env_binding["spec"]["policyName"] == "aks-gpu-device-env"
    assert binding["spec"]["validationActions"] == env_binding["spec"]["validationActions"]
    assert policy["spec"]["failurePolicy"] == env_policy["spec"]["failurePolicy"] == "Fail"
    # The device-env policy judges ConfigMaps and Secrets, in the namespaces the placement policy judges.
    [rule] = env_policy["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"], rule["operations"]) == ([""], ["configmaps", "secrets"], ["CREATE", "UPDATE"])
    assert env_policy["spec"]["matchConstraints"]["namespaceSelector"] == policy["spec"]["matchConstraints"]["namespaceSelector"]
    # The DRA claim policy judges ResourceClaims and their templates, in the same namespaces, with the same actions.
    assert (dra_policy["metadata"]["name"], dra_binding["spec"]["policyName"]) == ("aks-gpu-dra-claims",) * 2
    [rule] = dra_policy["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["apiGroups"], rule["resources"]) == (["resource.k8s.io"], ["resourceclaims", "resourceclaimtemplates"])
    assert dra_policy["spec"]["matchConstraints"]["namespaceSelector"] == policy["spec"]["matchConstraints"]["namespaceSelector"]
    assert dra_binding["spec"]["validationActions"] == binding["spec"]["validationActions"]
    assert dra_policy["spec"]["failurePolicy"] == "Fail"
    # Services (externalIPs) and PodDisruptionBudgets, in the same namespaces, with the same actions.
    for other, other_binding, group, resource in (
        (service_policy, service_binding, "", "services"),
        (pdb_policy, pdb_binding, "policy", "poddisruptionbudgets"),
    ):
        [rule] = other["spec"]["matchConstraints"]["resourceRules"]
        assert (rule["apiGroups"], rule["resources"]) == ([group], [resource])
        assert other["spec"]["matchConstraints"]["namespaceSelector"] == policy["spec"]["matchConstraints"]["namespaceSelector"]
        assert other_binding["spec"] == {
            "policyName": other["metadata"]["name"],
            "validationActions": binding["spec"]["validationActions"],
        }
    # The mutating policy: Pod CREATE in the same namespaces.
    assert (void_policy["kind"], void_binding["kind"]) == ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
    assert void_binding["spec"] == {"policyName": "aks-gpu-device-void"}
    [rule] = void_policy["spec"]["matchConstraints"]["resourceRules"]
    assert (rule["resources"], rule["operations"]) == (["pods"], ["CREATE"])
    assert void_policy["spec"]["matchConstraints"]["namespaceSelector"] == policy["spec"]["matchConstraints"]["namespaceSelector"]


def test_prod_denies_and_dev_warns_and_audits() -> None:
    assert render_policy(stack_model("prod"))[1]["spec"]["validationActions"] == ["Deny"]
    assert render_policy(stack_model("dev"))[1]["spec"]["validationActions"] == ["Warn", "Audit"]


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_manifests_fit_the_kubernetes_schema(stack: str) -> None:
    # The client's pydantic models forbid unknown fields and check types and required fields.
    manifests = render_policy(stack_model(stack))
    for policy, binding in zip(manifests[::2], manifests[1::2], strict=True):
        if policy["kind"] == "MutatingAdmissionPolicy":
            V1MutatingAdmissionPolicy.model_validate(policy)
            V1MutatingAdmissionPolicyBinding.model_validate(binding)
        else:
            check_policy_schema(policy, binding)


def check_policy_schema(policy: dict[str, Any], binding: dict[str, Any]) -> None:
    parsed = V1ValidatingAdmissionPolicy.model_validate(policy)
    V1ValidatingAdmissionPolicyBinding.model_validate(binding)
    spec = parsed.spec
    assert spec is not None and spec.match_constraints is not None
    # Enumerations the schema types as plain strings.
    # https://kubernetes.io/docs/reference/kubernetes-api/policy-resources/validating-admission-policy-v1/
    assert spec.failure_policy in {"Fail", "Ignore"}
    assert spec.match_constraints.match_policy in {"Exact", "Equivalent"}
    for rule in spec.match_constraints.resource_rules or []:
        assert set(rule.operations or []) <= {"CREATE", "UPDATE", "DELETE", "CONNECT", "*"}
        assert rule.scope in {"Cluster", "Namespaced", "*"}
    assert set(binding["spec"]["validationActions"]) <= {"Deny", "Warn", "Audit"}
    for validation in spec.validations or []:
        assert validation.reason in {"Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"}
    names = [v.name for v in spec.variables or []]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in names)


def test_matches_pods_and_every_workload_template_on_create_and_update() -> None:
    rules = render_policy(stack_model("prod"))[0]["spec"]["matchConstraints"]["resourceRules"]
    matched = {(group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]}
    assert matched == {
        ("", "pods"),
        ("", "pods/ephemeralcontainers"),
        ("", "replicationcontrollers"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
    }
    assert all(rule["operations"] == ["CREATE", "UPDATE"] and rule["apiVersions"] == ["v1"] for rule in rules)


def exempt_of(model: PlatformModel) -> list[str]:
    selector = render_policy(model)[0]["spec"]["matchConstraints"]["namespaceSelector"]
    [expression] = selector["matchExpressions"]
    assert (expression["key"], expression["operator"]) == ("kubernetes.io/metadata.name", "NotIn")
    return list(expression["values"])


def test_exempt_namespaces_are_derived_from_what_the_stack_installs() -> None:
    # prod: cilium, storage v2, remediation on: AKS's kube-system, the stack's gpu-resources and the quarantine engine's.
    assert exempt_of(stack_model("prod")) == ["kube-system", "gpu-resources", "nvsentinel"]
    raw = raw_stack("prod")
    raw["aks-gpu:cluster"]["networkPolicy"] = "calico"
    raw["aks-gpu:storage"] = {"flavour": "v1"}
    calico_v1 = validate_stack(raw, "test").model
    assert exempt_of(calico_v1) == ["kube-system", "gpu-resources", "calico-system", "tigera-operator", "acstor", "nvsentinel"]
    # The user's list comes on top, each namespace once.
    assert exempt_of(model_with(exemptNamespaces=["ray-system", "kube-system"])) == [
        "kube-system",
        "gpu-resources",
        "nvsentinel",
        "ray-system",
    ]


def test_a_workload_namespace_cannot_be_exempt() -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:admission"] = {"exemptNamespaces": ["gpu-training"]}
    with pytest.raises(ConfigError) as error:
        validate_stack(raw, "test")
    assert any(
        p.path == "aks-gpu:admission.exemptNamespaces" and "gpu-training is a workload namespace" in p.message
        for p in error.value.problems
    )
    raw = raw_stack("prod")
    raw["aks-gpu:workloads"][0]["name"] = "kube-system"
    with pytest.raises(ConfigError) as error:
        validate_stack(raw, "test")
    assert any(p.path == "aks-gpu:workloads[0].name" and "exempt" in p.message for p in error.value.problems)


def test_gpu_resource_names_come_from_the_pools() -> None:
    raw = minimal_raw(
        **{
            "aks-gpu:gpuPools": [
                {"name": "infer", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "inference",
                 "migProfile": "MIG1g"},
            ],
            "aks-gpu:workloads": [{"name": "team-a", "type": "inference", "gpuQuota": 7}],
            "aks-gpu:devicePlugin": {"migStrategy": "mixed"},
        }
    )  # fmt: skip
    model = validate_stack(raw, "test").model
    names = gpu_resource_names(model)
    # The GPU device classes asked as DRA extended resources are GPU requests too (no pool offers them).
    device_classes = tuple(f"deviceclass.resource.kubernetes.io/{c}" for c in gpu_devices().classes)
    plugin = ("amd.com/gpu", "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb")
    assert names == tuple(sorted((*plugin, *device_classes)))
    assert "deviceclass.resource.kubernetes.io/gpu.nvidia.com" in names
    variables = {v["name"]: v["expression"] for v in render_policy(model)[0]["spec"]["variables"]}
    assert variables["gpuResourceNames"] == "[" + ", ".join(f"'{name}'" for name in names) + "]"


def test_the_policy_and_the_audit_count_the_same_whole_gpu_resources() -> None:
    from aks_gpu.admission import policy
    from aks_gpu.cluster import inventory

    assert set(policy.WHOLE_GPU_RESOURCES) == set(inventory.WHOLE_GPU_RESOURCES)


@pytest.mark.parametrize(
    ("resource", "is_gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-3g.40gb", True),
        ("nvidia.com/mig-1g.10gb.shared", True),
        ("amd.com/gpu", True),
        ("amd.com/cpx_nps4", True),
        ("amd.com/spx_nps1", True),
        # The vendors' NICs (NVIDIA Network Operator's SR-IOV / host-device / RDMA plugins) are no GPUs.
        ("nvidia.com/hostdev", False),
        ("nvidia.com/rdma_shared_device_a", False),
        ("nvidia.com/mig-", False),
        ("rdma/ib", False),
        ("example.com/gpu", False),
    ],
)
def test_what_counts_as_a_gpu_resource(resource: str, is_gpu: bool) -> None:
    # In default, without a toleration: a GPU request is refused (not a workload namespace), anything else passes.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": {resource: "1"}}}]},
    }
    [decision] = evaluate([pod], render_policy(stack_model("prod")))
    assert decision.allowed is not is_gpu, decision.messages


def test_pools_by_type_follow_the_model() -> None:
    assert pools_by_type(stack_model("prod")) == {"inference": ("infer", "inferfull"), "training": ("train",)}


def gpu_pod(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        },
    }


def test_gpu_requests_outside_workload_namespaces_are_denied_unless_widened() -> None:
    namespaces = workload_namespaces(stack_model("prod"))
    restricted = evaluate([gpu_pod("ray"), gpu_pod("gpu-training")], render_policy(stack_model("prod")), namespaces)
    assert [d.allowed for d in restricted] == [False, True]
    assert "namespace ray is not one" in restricted[0].messages[0]
    one_more = render_policy(model_with(gpuNamespaces=["ray"]))
    assert [d.allowed for d in evaluate([gpu_pod("ray"), gpu_pod("web")], one_more)] == [True, False]
    assert "also allowed: ray" in evaluate([gpu_pod("web")], one_more)[0].messages[0]
    anywhere = render_policy(model_with(restrictToWorkloadNamespaces=False))
    assert all(d.allowed for d in evaluate([gpu_pod("ray"), gpu_pod("default")], anywhere))
    # Widened or not, a workload namespace's GPU pods still select only their own pools.
    wrong = gpu_pod("gpu-training")
    wrong["spec"]["nodeSelector"] = {"aks-gpu/pool": "infer"}
    assert not evaluate([wrong], anywhere, namespaces)[0].allowed


def node_name_pod(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "web", **metadata},
        "spec": {"nodeName": "aks-train-12345678-vmss000000", "containers": [{"name": "c"}]},
    }


def test_node_name_is_refused_from_clients_not_from_the_scheduler_or_the_kubelet() -> None:
    bindings = compile_bindings(render_policy(stack_model("prod")))
    scheduled = node_name_pod()
    relabelled = copy.deepcopy(scheduled)
    relabelled["spec"]["containers"][0]["image"] = "nginx:2"  # a spec change on a pod the scheduler bound
    update = evaluate_request(build_request(relabelled, operation="UPDATE", old_object=scheduled), bindings)
    assert update.allowed, update.messages
    created = evaluate_request(build_request(scheduled), bindings)
    assert not created.allowed and created.messages[0].startswith("spec.nodeName is set (aks-train-12345678-vmss000000)")
    # The kubelet's mirror pod of a static pod: created by the node, annotated as a mirror.
    mirror = node_name_pod(annotations={"kubernetes.io/config.mirror": "abc"})
    by_node = build_request(mirror, user=("system:node:aks-train-12345678-vmss000000", ["system:nodes"]))
    assert evaluate_request(by_node, bindings).allowed
    assert not evaluate_request(build_request(mirror), bindings).allowed  # the annotation alone is not enough


def test_an_ephemeral_container_added_later_is_judged() -> None:
    bindings = compile_bindings(render_policy(stack_model("prod")))
    running = gpu_pod("gpu-training")
    running["spec"]["nodeName"] = "aks-train-12345678-vmss000000"
    debugged = copy.deepcopy(running)
    debugged["spec"]["ephemeralContainers"] = [
        {"name": "debug", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    ]
    namespaces = workload_namespaces(stack_model("prod"))
    request = build_request(debugged, namespaces, "UPDATE", running, subresource="ephemeralcontainers")
    decision = evaluate_request(request, bindings)
    assert not decision.allowed
    assert decision.messages == (
        "container debug sets NVIDIA_VISIBLE_DEVICES: the NVIDIA container runtime hands a container the GPUs this "
        "variable names, past the scheduler and the GPU quota. Remove it and ask for GPUs in resources.limits (the "
        "device plugin sets it for the GPUs a container is given)",
    )


def test_an_ephemeral_container_taking_a_device_prefix_is_judged() -> None:
    # kubectl debug with envFrom: prefix NVIDIA_ over a ConfigMap key VISIBLE_DEVICES spells NVIDIA_VISIBLE_DEVICES.
    bindings = compile_bindings(render_policy(stack_model("prod")))
    running = gpu_pod("gpu-training")
    running["spec"]["nodeName"] = "aks-train-12345678-vmss000000"
    debugged = copy.deepcopy(running)
    debugged["spec"]["ephemeralContainers"] = [
        {"name": "debug", "image": "busybox", "envFrom": [{"prefix": "NVIDIA_", "configMapRef": {"name": "gpus"}}]}
    ]
    namespaces = workload_namespaces(stack_model("prod"))
    request = build_request(debugged, namespaces, "UPDATE", running, subresource="ephemeralcontainers")
    [message] = evaluate_request(request, bindings).messages
    assert message.startswith("container debug takes variables with envFrom prefix NVIDIA_: ")


def test_disabled_admission_renders_nothing() -> None:
    assert render_policy(model_with(enabled=False)) == []


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_expressions_stay_within_kubernetes_cel(stack: str) -> None:
    manifests = render_policy(model_with(restrictToWorkloadNamespaces=True) if stack == "prod" else stack_model(stack))
    compile_bindings(render_policy(stack_model(stack)))  # every expression parses
    for expression in expressions(manifests[0]) + expressions(manifests[2]):
        without_strings = re.sub(r"'(?:[^'\\]|\\.)*'", "''", expression)
        calls = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", without_strings))
        assert calls <= KUBERNETES_CEL_CALLS, f"not a Kubernetes CEL function: {calls - KUBERNETES_CEL_CALLS}"
        reserved = re.findall(rf"\.({'|'.join(CEL_RESERVED)})\b", without_strings)
        assert not reserved, f"field selection of a reserved CEL word {reserved} in {expression}"
        assert "?." not in without_strings and ".orValue" not in without_strings  # no optional types needed


def test_an_action_listed_twice_is_a_config_error() -> None:
    raw = minimal_raw(**{"aks-gpu:admission": {"validationActions": ["Warn", "Audit", "Warn"]}})
    with pytest.raises(ConfigError) as error:
        validate_stack(raw, "test")
    [problem] = error.value.problems
    assert problem.path == "aks-gpu:admission.validationActions"
    assert "listed more than once: Warn" in problem.message


# ---------------------------------------------------------------- what a tenant must not walk around (issue 40, B)


def gpu_daemonset(namespace: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    pod = gpu_pod(namespace)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "ds", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "ds"}},
            "template": {"metadata": {"labels": {"app": "ds"}}, "spec": {**pod["spec"], "tolerations": tolerations}},
        },
    }


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_no_tenant_pod_tolerates_the_quarantine_taint(engine: str) -> None:
    model = stack_model("prod")
    wildcard = gpu_pod("gpu-training")
    wildcard["spec"]["tolerations"] = [{"operator": "Exists"}]
    by_key = gpu_pod("gpu-training")
    by_key["spec"]["tolerations"] += [
        {"key": "aks-gpu/gpu-quarantine", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
    daemonset = gpu_daemonset("gpu-inference", [{"operator": "Exists"}])
    other_effect = gpu_pod("gpu-training")  # tolerates a NoExecute taint of that key only: not the quarantine
    other_effect["spec"]["tolerations"] += [{"key": "aks-gpu/gpu-quarantine", "operator": "Exists", "effect": "NoExecute"}]
    objects = [wildcard, by_key, daemonset, other_effect, gpu_pod("gpu-training")]
    decisions = evaluate(objects, render_policy(model), workload_namespaces(model), engine_named(engine))
    assert [d.allowed for d in decisions] == [False, False, False, True, True]
    assert (
        decisions[0]
        .messages[0]
        .startswith(
            "the pod tolerates the quarantine taint aks-gpu/gpu-quarantine=fault:NoSchedule (an empty key with operator Exists)"
        )
    )
    assert "(aks-gpu/gpu-quarantine)" in decisions[1].messages[0]


def job_selecting(namespace: str, selector: dict[str, str]) -> dict[str, Any]:
    pod = gpu_pod(namespace)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": namespace},
        "spec": {"template": {"spec": {**pod["spec"], "nodeSelector": selector, "restartPolicy": "Never"}}},
    }


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_template_is_judged_with_the_node_selector_its_pods_get(engine: str) -> None:
    # Standard_ND96isr_H100_v5 is the VM size of train (training) and inferfull (inference): the namespace's node
    # selector, which PodNodeSelector gives the Job's Pods, keeps each to its own pool.
    model = stack_model("prod")
    h100 = {"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"}
    a100 = {"node.kubernetes.io/instance-type": "Standard_NC24ads_A100_v4"}  # infer only
    objects = [job_selecting("gpu-training", h100), job_selecting("gpu-inference", h100), job_selecting("gpu-training", a100)]
    decisions = evaluate(objects, render_policy(model), workload_namespaces(model), engine_named(engine))
    assert [d.allowed for d in decisions] == [True, True, False]
    assert decisions[2].messages[0].endswith("this pod selects no GPU pool of this stack")


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_services_with_external_ips_are_refused(engine: str) -> None:
    model = stack_model("prod")

    def service(namespace: str, **spec: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": namespace},
                "spec": {"ports": [{"port": 80}], **spec}}  # fmt: skip

    objects = [service("gpu-inference", externalIPs=["10.0.0.10"]), service("team-web", externalIPs=["8.8.8.8"]),
               service("gpu-inference"), service("kube-system", externalIPs=["10.0.0.10"])]  # fmt: skip
    decisions = evaluate(objects, render_policy(model), workload_namespaces(model), engine_named(engine))
    assert [d.allowed for d in decisions] == [False, False, True, True]
    assert decisions[0].messages[0].startswith("Service s sets spec.externalIPs (10.0.0.10): ")


@pytest.mark.parametrize(
    ("budget", "allowed"),
    [
        ({"maxUnavailable": 0}, False),
        ({"maxUnavailable": "0%"}, False),
        ({"minAvailable": "100%"}, False),
        ({"maxUnavailable": 1}, True),
        ({"maxUnavailable": "10%"}, True),
        ({"minAvailable": "99%"}, True),
        ({"minAvailable": 2}, True),  # against the replicas: not judged (docs/admission.md)
    ],
)
def test_disruption_budgets_that_allow_no_disruption_are_refused(budget: dict[str, Any], allowed: bool) -> None:
    model = stack_model("prod")
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "gpu-training"},
        "spec": {"selector": {"matchLabels": {"app": "trainer"}}, **budget},
    }
    for engine in ENGINE_NAMES:
        [decision] = evaluate([pdb], render_policy(model), workload_namespaces(model), engine_named(engine))
        assert decision.allowed is allowed, decision.messages
        if not allowed:
            assert decision.messages[0].startswith("PodDisruptionBudget b allows no disruption (")


def mixed_mig(config: dict[str, Any]) -> dict[str, Any]:
    """The prod stack's config (a stack file's ``config``) under the mixed MIG strategy, each inference pool with a
    namespace of its own (docs/admission.md); changed in place and returned."""
    config["aks-gpu:devicePlugin"] = {**config["aks-gpu:devicePlugin"], "migStrategy": "mixed"}
    workloads = config["aks-gpu:workloads"]
    inference = next(w for w in workloads if w["name"] == "gpu-inference")
    workloads.append({**copy.deepcopy(inference), "name": "gpu-inference-full", "pool": "inferfull", "gpuQuota": 16})
    inference.update(pool="infer", gpuQuota=14)
    return config


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_what_a_team_writes_for_a_mig_slice_is_admitted_under_the_mixed_strategy(engine: str) -> None:
    # docs/admission.md, "What a team writes": the namespace and the resource, nothing else.
    model = validate_stack(mixed_mig(raw_stack("prod")), "test").model
    [infer] = [pool for pool in model.pools if pool.name == "infer"]
    assert infer.gpu_taint.aks() == "nvidia.com/mig-1g.10gb=present:NoSchedule"
    slice_pod = gpu_pod("gpu-inference")
    del slice_pod["spec"]["tolerations"]
    slice_pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": 1}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "gpu-inference"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": slice_pod["spec"]},
        },
    }
    squatter = {**copy.deepcopy(slice_pod), "spec": {"containers": [{"name": "c"}], "tolerations": [
        {"key": "nvidia.com/mig-1g.10gb", "operator": "Exists"}]}}  # fmt: skip
    decisions = evaluate(
        [slice_pod, deployment, squatter], render_policy(model), workload_namespaces(model), engine_named(engine)
    )
    assert [d.allowed for d in decisions] == [True, True, False]
    assert (
        decisions[2].messages[0].startswith("the pod requests no GPU but tolerates the GPU node taint (nvidia.com/mig-1g.10gb)")
    )
    # A slice's taint is a GPU taint: no namespace hands its toleration out by default (the infer pool has no other).
    assert DEFAULT_TOLERATIONS_ANNOTATION not in workload_namespaces(model)["gpu-inference"]["metadata"].get("annotations", {})
