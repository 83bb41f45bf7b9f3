"""Policies and objects that cross the API server's CEL cost limits cheaply (issue #23).

A regular expression match costs ``ceil((1 + len(text)) * 0.1) * ceil(len(regex) * 0.25)`` in cel-go
(interpreter/runtimecost.go), so one call on a 100,000-character string with a 400-character pattern costs about
1,000,000: the per-call limit is crossed in one step, in microseconds, on either side of it. ``tools/admission-server-decisions``
records what the real environment decides for ``cases()`` under ``manifests()``
(tests/fixtures/kubernetes_cel/costs/limits.json); tests/admission/test_cost.py holds both engines to it.
"""

from __future__ import annotations

from typing import Any

PATTERN = "^x*" + "y?" * 198 + "$"  # 400 characters, linear to match: cost factor ceil(400 * 0.25) = 100
MATCH = "object.data.text.matches(object.data.pattern)"
# object.data.text and object.data.pattern: 3 each; the match: ceil((1 + n) * 0.1) * 100.
UNDER = 99_989  # 9,999 * 100 + 6 = 999,906: under the per-call limit
OVER = 99_999  # 10,000 * 100 + 6 = 1,000,006: over it


def _policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
                ],
                "objectSelector": {"matchLabels": {"cost-test": name}},
            },
            **spec,
        },
    }


def _binding(policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy},  # named as its policy, as the stacks name theirs
        "spec": {"policyName": policy, "validationActions": ["Deny"]},
    }


POLICIES = {
    # One validation: over the per-call limit it ends in an error, and failurePolicy Fail denies.
    "cost-expression": {"validations": [{"expression": MATCH}]},
    # The same through a variable: the expression that reads it gets the composited variable's error.
    "cost-variable": {
        "variables": [{"name": "matched", "expression": MATCH}],
        "validations": [{"expression": "variables.matched"}],
    },
    # A variable over the limit read under ||: CEL's || absorbs the error when the other side is true.
    "cost-variable-absorbed": {
        "variables": [{"name": "matched", "expression": MATCH}],
        "validations": [{"expression": "variables.matched || true"}],
    },
    # Ten validations under the per-call limit fit the 10,000,000 budget of a binding; eleven do not.
    "cost-budget-10": {"validations": [{"expression": MATCH}] * 10},
    "cost-budget-11": {"validations": [{"expression": MATCH}] * 11},
    # A matchCondition over the per-call limit.
    "cost-match-condition": {
        "matchConditions": [{"name": "matched", "expression": MATCH}],
        "validations": [{"expression": "true"}],
    },
}


def manifests() -> list[dict[str, Any]]:
    found = []
    for name, spec in POLICIES.items():
        found += [_policy(name, **spec), _binding(name)]
    return found


def _config_map(policy: str, length: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{policy}-{length}", "namespace": "default", "labels": {"cost-test": policy}},
        "data": {"text": "x" * length, "pattern": PATTERN},
    }


def cases() -> dict[str, dict[str, Any]]:
    found = {}
    for policy in POLICIES:
        lengths = (UNDER, OVER) if not policy.startswith("cost-budget") else (UNDER,)
        for length in lengths:
            found[f"{policy}-{length}"] = _config_map(policy, length)
    return found
