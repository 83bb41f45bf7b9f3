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
    # The placement policy keeps its URN; the device-env policy (ConfigMaps and Secrets) and the DRA claim policy
    # come beside it.
    assert set(policies) == {"admission-policy", "admission-device-env-policy", "admission-dra-claims-policy"}
    assert set(bindings) == {"admission-binding", "admission-device-env-binding", "admission-dra-claims-binding"}
    for prefix in ("admission", "admission-device-env", "admission-dra-claims"):
        policy, binding = policies[f"{prefix}-policy"], bindings[f"{prefix}-binding"]
        assert policy.parent == binding.parent == component.urn
        assert policy.options["provider"] == binding.options["provider"] == "cluster-id"
        assert binding.options["dependsOn"] == [policy.urn]  # the binding waits for the policy it names

    manifests = result.manifests()
    applied_policy = manifests["validatingadmissionpolicy-_-aks-gpu-gpu-placement.yaml"]
    applied_binding = manifests["validatingadmissionpolicybinding-_-aks-gpu-gpu-placement.yaml"]
    applied_env = manifests["validatingadmissionpolicy-_-aks-gpu-device-env.yaml"]
    applied_env_binding = manifests["validatingadmissionpolicybinding-_-aks-gpu-device-env.yaml"]
    applied_dra = manifests["validatingadmissionpolicy-_-aks-gpu-dra-claims.yaml"]
    applied_dra_binding = manifests["validatingadmissionpolicybinding-_-aks-gpu-dra-claims.yaml"]
    assert [applied_policy, applied_binding, applied_env, applied_env_binding, applied_dra, applied_dra_binding] == [
        labelled(m) for m in render_policy(stack_model(stack))
    ]
    assert applied_binding["spec"] == {"policyName": "aks-gpu-gpu-placement", "validationActions": actions}
    assert applied_env_binding["spec"] == {"policyName": "aks-gpu-device-env", "validationActions": actions}
    assert applied_dra_binding["spec"] == {"policyName": "aks-gpu-dra-claims", "validationActions": actions}
    assert applied_policy["spec"]["failurePolicy"] == "Fail"
    rules = applied_policy["spec"]["matchConstraints"]["resourceRules"]
    assert {resource for rule in rules for resource in rule["resources"]} >= {"pods", "deployments", "cronjobs", "jobs"}


def test_disabled_admission_registers_nothing(harness: MockHarness) -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:admission"] = {"enabled": False}
    result = plan(harness, validate_stack(raw, "test").model)
    assert result.by_type(POLICY_TYPE) == [] and result.by_type(BINDING_TYPE) == []
    assert len(result.by_type("aks-gpu:index:GpuAdmissionPolicy")) == 1


def test_plans_are_deterministic(harness: MockHarness) -> None:
    model = stack_model("prod")
    assert plan(harness, model).manifests() == plan(harness, model).manifests()


def test_the_component_exempts_calico_only_when_told_the_cluster_runs_it(harness: MockHarness) -> None:
    def exempt(result: PlanResult) -> list[str]:
        # The three policies (placement, device-env, DRA claims) leave out the same namespaces.
        selectors = [record.inputs["spec"]["matchConstraints"]["namespaceSelector"] for record in result.by_type(POLICY_TYPE)]
        assert len(selectors) == 3 and selectors[0] == selectors[1] == selectors[2]
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
