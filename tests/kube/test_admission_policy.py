"""``GpuAdmissionPolicy`` under the mock engine: what it registers, with which provider and order."""

from __future__ import annotations

from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s
import pytest

from aks_gpu.admission.component import GpuAdmissionPolicy, GpuAdmissionPolicyArgs
from aks_gpu.admission.policy import render_policy
from aks_gpu.manifests import labelled
from aks_gpu.mock_engine import PlanResult
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import MockHarness, platform_sections, raw_stack, stack_model

POLICY_TYPE = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING_TYPE = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
MUTATING_TYPE = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy"
MUTATING_BINDING_TYPE = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding"


def plan(harness: MockHarness, model: PlatformModel, **extra: str) -> PlanResult:
    def program() -> None:
        provider = k8s.Provider("cluster", kubeconfig="fake")
        args = cast(GpuAdmissionPolicyArgs, {**platform_sections(model.config), **extra})
        GpuAdmissionPolicy("admission", args, pulumi.ResourceOptions(provider=provider))

    return harness.run(program)


def only(result: PlanResult, type_: str) -> Any:
    [record] = result.by_type(type_)
    return record


@pytest.mark.parametrize(("stack", "actions"), [("prod", ["Deny"]), ("dev", ["Warn", "Audit"])])
def test_registers_the_policy_and_its_binding(harness: MockHarness, stack: str, actions: list[str]) -> None:
    result = plan(harness, stack_model(stack))
    policies = {record.name: record for record in result.by_type(POLICY_TYPE)}
    bindings = {record.name: record for record in result.by_type(BINDING_TYPE)}
    component = only(result, "aks-gpu:index:GpuAdmissionPolicy")
    # The placement policy keeps its URN; the device-env policy (ConfigMaps and Secrets), the DRA claim policy, the
    # Service and PodDisruptionBudget policies, and the mutating device-void policy come beside it.
    others = ("device-env", "dra-claims", "service-external-ips", "disruption-budgets")
    assert set(policies) == {"admission-policy", *(f"admission-{other}-policy" for other in others)}
    assert set(bindings) == {"admission-binding", *(f"admission-{other}-binding" for other in others)}
    mutating = {record.name: record for record in result.by_type(MUTATING_TYPE)}
    mutating_binding = only(result, MUTATING_BINDING_TYPE)
    assert set(mutating) == {"admission-device-void-policy"} and mutating_binding.name == "admission-device-void-binding"
    policies |= mutating
    bindings[mutating_binding.name] = mutating_binding
    for prefix in ("admission", *(f"admission-{other}" for other in (*others, "device-void"))):
        policy, binding = policies[f"{prefix}-policy"], bindings[f"{prefix}-binding"]
        assert policy.parent == binding.parent == component.urn
        assert policy.options["provider"] == binding.options["provider"] == "cluster-id"
        assert binding.options["dependsOn"] == [policy.urn]  # the binding waits for the policy it names

    manifests = result.manifests()
    names = ("gpu-placement", *others)
    applied = [
        manifests[f"{kind}-_-aks-gpu-{name}.yaml"]
        for name in names
        for kind in ("validatingadmissionpolicy", "validatingadmissionpolicybinding")
    ] + [
        manifests[f"{kind}-_-aks-gpu-device-void.yaml"] for kind in ("mutatingadmissionpolicy", "mutatingadmissionpolicybinding")
    ]
    assert applied == [labelled(m) for m in render_policy(stack_model(stack))]
    for name in names:
        binding_spec = manifests[f"validatingadmissionpolicybinding-_-aks-gpu-{name}.yaml"]["spec"]
        assert binding_spec == {"policyName": f"aks-gpu-{name}", "validationActions": actions}
    applied_policy = manifests["validatingadmissionpolicy-_-aks-gpu-gpu-placement.yaml"]
    assert applied_policy["spec"]["failurePolicy"] == "Fail"
    rules = applied_policy["spec"]["matchConstraints"]["resourceRules"]
    assert {resource for rule in rules for resource in rule["resources"]} >= {"pods", "deployments", "cronjobs", "jobs"}


def test_disabled_admission_registers_nothing(harness: MockHarness) -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:admission"] = {"enabled": False}
    result = plan(harness, validate_stack(raw, "test").model)
    assert result.by_type(POLICY_TYPE) == [] and result.by_type(BINDING_TYPE) == [] and result.by_type(MUTATING_TYPE) == []
    assert len(result.by_type("aks-gpu:index:GpuAdmissionPolicy")) == 1


def test_plans_are_deterministic(harness: MockHarness) -> None:
    model = stack_model("prod")
    assert plan(harness, model).manifests() == plan(harness, model).manifests()


def test_the_component_exempts_calico_only_when_told_the_cluster_runs_it(harness: MockHarness) -> None:
    def exempt(result: PlanResult) -> list[str]:
        # Every policy (placement, device-env, DRA claims, Services, disruption budgets, device-void) leaves out the
        # same namespaces.
        records = result.by_type(POLICY_TYPE) + result.by_type(MUTATING_TYPE)
        selectors = [record.inputs["spec"]["matchConstraints"]["namespaceSelector"] for record in records]
        assert len(selectors) == 6 and all(selector == selectors[0] for selector in selectors)
        return list(selectors[0]["matchExpressions"][0]["values"])

    # prod runs the quarantine engine (remediation.mode on): its namespace is exempt too.
    model = stack_model("prod")
    assert exempt(plan(harness, model)) == ["kube-system", "gpu-resources", "nvsentinel"]
    assert exempt(plan(harness, model, network_policy="calico")) == [
        "kube-system",
        "gpu-resources",
        "calico-system",
        "tigera-operator",
        "nvsentinel",
    ]
