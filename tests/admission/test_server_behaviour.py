"""What the API server does around the policy, repeated offline (issue #23): quantities as resource.ParseQuantity
reads them, []byte data as Go's encoding/base64 decodes it, the object validation that refuses a pod before any
admission policy, and the message line the server answers a denial with."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from aks_gpu.admission.evaluate import evaluate
from aks_gpu.admission.policy import render_policy, workload_namespaces
from aks_gpu.admission.quantity import Quantity
from aks_gpu.admission.reader import InputError, read_text
from tests.admission.test_evaluate import pod, policy
from tests.conftest import stack_model


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1E", 10**18),
        ("0E", 0),
        ("1E3", 1000),
        ("1e-3", Fraction(1, 1000)),
        ("1Ei", 2**60),
        ("2Ki", 2048),
        ("1.", 1),
        (".5", Fraction(1, 2)),
    ],
)
def test_quantities_parse_as_parse_quantity_does(text: str, value: Fraction | int) -> None:
    # "1E" is the exa suffix, not an exponent without digits (apimachinery resource/quantity.go).
    assert Quantity.parse(text).value == value


@pytest.mark.parametrize("text", ["1\n", "1 ", "1e", "e3", "1Gb", "- 1", ""])
def test_what_parse_quantity_refuses_is_refused_whole(text: str) -> None:
    with pytest.raises(ValueError, match=r"quantities must match the regular expression"):
        Quantity.parse(text)


def test_a_valid_exa_quantity_is_checked_not_an_input_error() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {memory: 1E}}}]}\n"
    [item] = read_text(text, "f.yaml")
    model = stack_model("prod")
    [decision] = evaluate([item.obj], render_policy(model), workload_namespaces(model))
    assert decision.allowed


def secret(value: str) -> str:
    return (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: gpu-training}\n"
        f'data: {{NVIDIA_VISIBLE_DEVICES: "{value}"}}\n'
    )


def test_secret_data_is_decoded_as_go_decodes_it() -> None:
    model = stack_model("prod")

    def decide(text: str) -> Any:
        return evaluate([read_text(text, "f.yaml")[0].obj], render_policy(model), workload_namespaces(model))[0]

    # Go's encoding/base64 skips newlines: "dm9p\nZA==" is "void", which selects no GPU.
    assert decide(secret("dm9p\\nZA==")).allowed
    assert decide(secret("dm9pZA==")).allowed
    # "all" (YWxs), with or without a newline, is held by the device-env policy.
    assert not decide(secret("YW\\nxs")).allowed
    with pytest.raises(InputError, match=r"illegal base64 data \(the API server refuses it"):
        read_text(secret("dm9p!ZA=="), "f.yaml")


def refusal(spec: str, kind: str = "Pod") -> str:
    api_version = {"Deployment": "apps/v1"}.get(kind, "v1")
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: p, namespace: gpu-training}}\nspec: {spec}\n"
    with pytest.raises(InputError) as error:
        read_text(text, "f.yaml")
    return str(error.value).split("(422): ", 1)[1]


GPU = "{name: c, resources: {limits: {nvidia.com/gpu: %s}}}"


@pytest.mark.parametrize(
    ("spec", "server"),
    [
        # Extended resources are integers (a Pod's requests are defaulted from its limits first).
        (
            f"{{containers: [{GPU % '500m'}]}}",
            'Pod "p" is invalid: [spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an '
            'integer, spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "500m": must be an integer]',
        ),
        (
            "{containers: [{name: c, resources: {requests: {nvidia.com/gpu: 1}}}]}",
            'Pod "p" is invalid: spec.containers[0].resources.limits: Required value: Limit must be set for non '
            "overcommitable resources",
        ),
        (
            "{containers: [{name: c, resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}}]}",
            'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
            "nvidia.com/gpu limit of 2",
        ),
        (
            f"{{containers: [{GPU % 1}], tolerations: [{{key: nvidia.com/gpu, operator: Exists, value: present}}]}}",
            'Pod "p" is invalid: spec.tolerations[0].operator: Invalid value: "present": value must be empty when '
            "`operator` is 'Exists'",
        ),
        (
            f"{{containers: [{GPU % 1}], tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule, "
            "tolerationSeconds: 60}]}",
            'Pod "p" is invalid: spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be \'NoExecute\' '
            "when `tolerationSeconds` is set",
        ),
        (
            "{containers: [{name: c}], tolerations: [{operator: Equal, value: x}]}",
            'Pod "p" is invalid: spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when '
            '`key` is empty, which means "match all values and all keys"',
        ),
        (
            "{containers: [{name: c, resources: {limits: {cpu: '-1'}}}]}",
            'Pod "p" is invalid: [spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or '
            'equal to 0, spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0]',
        ),
    ],
)
def test_objects_the_api_server_refuses_before_admission(spec: str, server: str) -> None:
    assert refusal(spec) == server


def test_a_template_is_validated_without_pod_defaulting() -> None:
    """A Deployment's template keeps a limit alone (no request to compare); a request without a limit is refused."""
    template = "{selector: {}, template: {spec: {containers: [%s]}}}"
    text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: " + template % (GPU % 1) + "\n"
    assert read_text(text, "f.yaml")
    assert refusal(template % "{name: c, resources: {requests: {nvidia.com/gpu: 1}}}", kind="Deployment").startswith(
        'Deployment.apps "p" is invalid: spec.template.spec.containers[0].resources.limits: Required value'
    )


def test_the_denial_is_the_servers_line_first_failing_rule_first() -> None:
    validations = [
        {"expression": "false", "message": "first"},
        {"expression": "false", "message": "second"},
    ]
    [decision] = evaluate([pod(name="web")], policy(validations))
    assert decision.message == "pods \"web\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied request: first"
    assert decision.messages == ("first", "second")


def test_a_message_expression_over_5_kib_falls_back_to_the_message() -> None:
    # celconfig.MaxEvaluatedMessageExpressionSizeBytes: 5 KiB; longer is dropped, the static message is used.
    validations: list[dict[str, Any]] = [
        {"expression": "false", "message": " static ", "messageExpression": "'" + "x" * 5121 + "'"},
        {"expression": "false", "message": "unused", "messageExpression": "'" + "x" * 5120 + "'"},
    ]
    [decision] = evaluate([pod()], policy(validations))
    assert decision.messages == ("static", "x" * 5120)


def test_a_failing_variable_is_named_as_the_server_names_it() -> None:
    validations = [{"expression": "variables.broken == 1"}]
    [decision] = evaluate([pod()], policy(validations, variables=[{"name": "broken", "expression": "object.spec.nope"}]))
    assert decision.messages[0].startswith(
        "expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: "
    )


def test_failure_policy_stays_fail() -> None:
    """With Ignore, an expression that errors (the server's cost limit included: "operation cancelled: actual cost
    limit exceeded", a pod with 75,000 nodeSelector keys) would admit the pod: a bypass. Every policy stays Fail."""
    for stack in ("prod", "dev", "amd"):
        for manifest in render_policy(stack_model(stack)):
            if manifest["kind"] == "ValidatingAdmissionPolicy":
                assert manifest["spec"]["failurePolicy"] == "Fail", manifest["metadata"]["name"]
