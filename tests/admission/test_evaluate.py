"""The offline evaluator follows the API server: matching, match conditions, messages, failure policy, UPDATE."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aks_gpu.admission.evaluate import PolicyError, build_request, compile_bindings, evaluate, evaluate_request, prepare
from aks_gpu.admission.policy import render_policy, workload_namespaces
from tests.conftest import stack_model


def policy(validations: list[dict[str, Any]], **spec: Any) -> list[dict[str, Any]]:
    """A small policy on pods (plus its binding) to exercise the evaluator apart from the GPU rules."""
    body: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}
            ]
        },
        "validations": validations,
        **spec,
    }
    binding_spec = {"policyName": "p", "validationActions": ["Deny"], **body.pop("binding", {})}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"},
            "spec": body,
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "b"},
            "spec": binding_spec,
        },
    ]


def pod(name: str = "p1", namespace: str | None = None, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": labels or {}}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [{"name": "c"}], **spec}}


HAS_LABEL = {"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels", "message": "needs a team label"}


def test_message_expression_wins_then_message_then_the_expression() -> None:
    validations = [
        {"expression": "false", "message": "static", "messageExpression": "'dynamic ' + object.metadata.name"},
        {"expression": "false", "message": "static fallback", "messageExpression": "object.nope"},  # errors
        {"expression": "false", "message": "blank fallback", "messageExpression": "'  '"},
        {"expression": "1 == 2"},
    ]
    [decision] = evaluate([pod()], policy(validations))
    assert decision.messages == ("dynamic p1", "static fallback", "blank fallback", "failed expression: 1 == 2")
    assert not decision.allowed and decision.actions == ("Deny",)


def test_an_evaluation_error_denies_under_fail_and_is_ignored_under_ignore() -> None:
    broken = [{"expression": "object.spec.nope == 1"}]
    [denied] = evaluate([pod()], policy(broken))
    assert not denied.allowed
    # The reason is the engine's own wording (cel-python: "no such member", cel-cpp: "Key not found in map").
    assert denied.messages[0].startswith("expression 'object.spec.nope == 1' resulted in error: ")
    assert "nope" in denied.messages[0]
    [ignored] = evaluate([pod()], policy(broken, failurePolicy="Ignore"))
    assert ignored.allowed


def test_namespace_defaults_and_namespace_selector() -> None:
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]}
    manifests = policy([HAS_LABEL], matchConstraints={**policy([])[0]["spec"]["matchConstraints"], "namespaceSelector": selector})
    in_default, in_system = evaluate([pod(), pod(namespace="kube-system")], manifests)
    assert (in_default.namespace, in_default.allowed) == ("default", False)
    assert (in_system.allowed, in_system.messages) == (True, ())
    assert "outside the policy's namespaceSelector" in in_system.note


def test_namespace_labels_come_from_the_given_namespaces() -> None:
    selector = {"matchLabels": {"gpu": "yes"}}
    manifests = policy([HAS_LABEL], matchConstraints={**policy([])[0]["spec"]["matchConstraints"], "namespaceSelector": selector})
    namespaces = {"ml": {"metadata": {"name": "ml", "labels": {"gpu": "yes"}}}}
    in_ml, elsewhere = evaluate([pod(namespace="ml"), pod(namespace="web")], manifests, namespaces)
    assert not in_ml.allowed and elsewhere.allowed


def test_object_selector_exclude_rules_and_binding_match_resources() -> None:
    constraints = policy([])[0]["spec"]["matchConstraints"]
    by_label = policy([HAS_LABEL], matchConstraints={**constraints, "objectSelector": {"matchLabels": {"checked": "true"}}})
    checked, unchecked = evaluate([pod(labels={"checked": "true"}), pod()], by_label)
    assert not checked.allowed and unchecked.allowed

    excluded = policy(
        [HAS_LABEL],
        matchConstraints={
            **constraints,
            "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["*"], "operations": ["*"], "resources": ["pods"]}],
        },
    )
    assert evaluate([pod()], excluded)[0].allowed

    narrowed = policy([HAS_LABEL], binding={"matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}})
    namespaces = {"prod": {"metadata": {"labels": {"env": "prod"}}}}
    in_prod, in_dev = evaluate([pod(namespace="prod"), pod(namespace="dev")], narrowed, namespaces)
    assert not in_prod.allowed and in_dev.allowed


def test_a_false_match_condition_skips_the_policy() -> None:
    manifests = policy(
        [HAS_LABEL], matchConditions=[{"name": "only-web", "expression": "object.metadata.name.startsWith('web')"}]
    )
    web, other = evaluate([pod("web-1"), pod("db-1")], manifests)
    assert not web.allowed
    assert other.allowed and other.note == "p: match condition 'only-web' is false"


def test_a_binding_without_its_policy_is_refused() -> None:
    _, binding = policy([HAS_LABEL])
    with pytest.raises(PolicyError, match="no policy named 'p'"):
        evaluate([pod()], [binding])


def test_requests_default_to_limits_for_pods_only() -> None:
    limits = {"limits": {"nvidia.com/gpu": 2}}
    prepared = prepare(pod(containers=[{"name": "c", "resources": copy.deepcopy(limits)}], tolerations=None))
    # Quantities as the API server stores them: strings, whatever the YAML wrote.
    assert prepared["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "2"}
    assert "tolerations" not in prepared["spec"]  # a null field is dropped, as decoding does
    deployment = {"kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": limits}]}}}}
    assert "requests" not in prepare(deployment)["spec"]["template"]["spec"]["containers"][0]["resources"]


GPU_POD = pod(
    "trainer",
    namespace="gpu-training",
    containers=[{"name": "trainer", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
)


def test_update_of_an_unchanged_pod_spec_is_not_rechecked() -> None:
    # A pod admitted before the policy existed must stay manageable (labels, finalizers) without a fix. Checked on
    # kube-apiserver 1.36.3 with AKS's admission plugins (2026-12-02): a training pod pinned to the inference pool,
    # created with the binding removed, was then relabelled (admitted) and given a new image (denied).
    model = stack_model("prod")
    bindings = compile_bindings(render_policy(model))
    namespaces = workload_namespaces(model)
    on_inference_pool = copy.deepcopy(GPU_POD)
    on_inference_pool["spec"]["nodeSelector"] = {"aks-gpu/pool": "infer"}
    # As the server stored it: after AKS's mutating plugins (the GPU toleration, the namespace's node selector), which
    # ran at its creation; ExtendedResourceToleration runs again on every update and finds its toleration there.
    stored = build_request(on_inference_pool, namespaces).object
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"]["labels"] = {"team": "a"}
    unchanged = evaluate_request(build_request(relabelled, namespaces, operation="UPDATE", old_object=stored), bindings)
    assert unchanged.allowed and "created-or-pod-spec-changed" in unchanged.note

    changed = copy.deepcopy(stored)
    changed["spec"]["containers"][0]["image"] = "busybox:2"
    decision = evaluate_request(build_request(changed, namespaces, operation="UPDATE", old_object=stored), bindings)
    assert not decision.allowed and "this pod selects no GPU pool of this stack" in decision.messages[0]

    created = evaluate_request(build_request(on_inference_pool, namespaces), bindings)
    assert not created.allowed


def test_an_update_gets_the_gpu_toleration_too() -> None:
    # ExtendedResourceToleration admits CREATE and UPDATE of pods (plugin/pkg/admission/extendedresourcetoleration):
    # an old pod stored without the toleration is compared with one that has it, so its update is judged again.
    bindings = compile_bindings(render_policy(stack_model("prod")))
    relabelled = copy.deepcopy(GPU_POD)
    relabelled["metadata"]["labels"] = {"team": "a"}
    request = build_request(relabelled, operation="UPDATE", old_object=GPU_POD)
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in request.object["spec"]["tolerations"]
    assert request.old_object is not None and "tolerations" not in request.old_object["spec"]
    assert "created-or-pod-spec-changed" not in evaluate_request(request, bindings).note


def test_warn_only_bindings_still_report_the_violation() -> None:
    [decision] = evaluate([GPU_POD], render_policy(stack_model("dev")))
    assert not decision.allowed
    assert decision.actions == ("Warn", "Audit")


def test_request_as_policies_read_it() -> None:
    request = build_request({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"}})
    seen = request.to_cel()
    assert seen["kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert seen["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert (seen["namespace"], seen["name"], seen["operation"]) == ("ml", "d", "CREATE")
    assert request.namespace_object is not None
    assert request.namespace_object["metadata"]["labels"] == {"kubernetes.io/metadata.name": "ml"}
