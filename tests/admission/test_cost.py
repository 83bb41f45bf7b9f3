"""The API server's CEL runtime cost limits, in both engines (issue #23).

kube-apiserver cancels an expression or variable whose cost passes 1,000,000 and a binding whose validations pass
10,000,000 (k8s.io/apiserver pkg/apis/cel/config.go), costing as cel-go's runtime cost tracker does. What the real
environment decided (cel-go v0.26.0 + k8s.io/apiserver v0.36.3, through vaph: tests/fixtures/kubernetes_cel/SOURCES.md)
is kept in tests/fixtures/kubernetes_cel/costs/; these tests hold both engines to it: the decision, the server's
message line and, for cel-python, the cost itself. The large objects near the limits are in bench/admission_cost.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.admission import cost
from aks_gpu.admission import evaluate as evaluate_module
from aks_gpu.admission.engine import ENGINE_NAMES, cpp_available, engine_named
from aks_gpu.admission.evaluate import Decision, build_request, compile_bindings, evaluate, evaluate_request
from aks_gpu.admission.policy import render_policy, workload_namespaces
from tests.admission import cost_limit_cases, cost_objects
from tests.conftest import stack_model

COSTS = Path(__file__).parent.parent / "fixtures" / "kubernetes_cel" / "costs"
LIMITS = json.loads((COSTS / "limits.json").read_text())["decisions"]
POLICY_OBJECTS = json.loads((COSTS / "policy-objects.json").read_text())["decisions"]


def _same_as_server(decision: Decision, server: dict[str, Any], engine: str) -> None:
    assert decision.allowed is server["allowed"], (engine, decision.messages)
    if not server["allowed"]:
        assert decision.message.split(" is forbidden: ", 1)[1] == server["message"], engine


@pytest.fixture(scope="module")
def limit_decisions() -> dict[str, dict[str, Decision]]:
    cases = cost_limit_cases.cases()
    return {
        engine: dict(zip(cases, evaluate(cases.values(), cost_limit_cases.manifests(), engine=engine_named(engine)), strict=True))
        for engine in ENGINE_NAMES
    }


@pytest.mark.parametrize("case", sorted(LIMITS))
def test_the_cost_limits_decide_as_the_server(limit_decisions: dict[str, dict[str, Decision]], case: str) -> None:
    """Per-call limit on an expression, a variable (and a variable's error absorbed by ||), a matchCondition;
    the per-binding budget: each just under and just over, decided and worded as the server did."""
    server = LIMITS[case]
    for engine in ENGINE_NAMES:
        _same_as_server(limit_decisions[engine][case], server, engine)
    recorded = server["costs"]
    if any(recorded.values()):  # the server reports no cost for a policy it stopped (budget, matchConditions)
        assert dict(limit_decisions["cel-python"][case].costs) == recorded


@pytest.fixture(scope="module")
def prod() -> tuple[list[Any], dict[str, Any]]:
    model = stack_model("prod")
    return render_policy(model), workload_namespaces(model)


@pytest.mark.parametrize("case", sorted(cost_objects.SMALL))
@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_the_placement_policy_costs_what_the_server_counted(
    prod: tuple[list[Any], dict[str, Any]], case: str, engine: str
) -> None:
    """The prod placement policy on pods whose cost grows with the square of their tolerations: cel-python counts
    the server's cost to the unit, and both engines give the server's decision and message."""
    manifests, namespaces = prod
    decision = evaluate([cost_objects.SMALL[case]], manifests, namespaces, engine=engine_named(engine))[0]
    _same_as_server(decision, POLICY_OBJECTS[case], engine)
    if engine == "cel-python" or decision.costs:
        _same_cost(dict(decision.costs), POLICY_OBJECTS[case])


def _same_cost(costs: dict[str, int], server: dict[str, Any]) -> None:
    """The server's cost to the unit; where an evaluation was cancelled, to within a few units (cel-go checks the
    limit after each step, the model after each charge; the server's own count there varies with map order)."""
    assert set(costs) == set(server["costs"])
    cancelled = cost.LIMIT_EXCEEDED_MESSAGE in server["message"]
    for policy, counted in server["costs"].items():
        assert abs(costs[policy] - counted) <= (10 if cancelled else 0), (policy, costs[policy], counted)


def test_cel_cpp_iteration_budget_is_not_the_servers(
    prod: tuple[list[Any], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """cel-cpp stops after 10,000 comprehension iterations; the server costs 10,001 env vars at far under its limit
    and admits the pod. With the size gate out of the way, cel-cpp's budget error must be re-decided by the cost
    model, not reported as a denial."""
    if not cpp_available():
        pytest.skip("cel-cpp is not installed")
    monkeypatch.setattr(evaluate_module, "COSTED_ABOVE_VALUES", 10**9)
    monkeypatch.setattr(evaluate_module, "COSTED_ABOVE_CHARACTERS", 10**9)
    manifests, namespaces = prod
    pod = cost_objects.pod_with_env(1, 10_001)
    bindings = compile_bindings(manifests, engine_named("cel-cpp"))
    decision = evaluate_request(build_request(pod, namespaces), bindings)
    assert decision.allowed, decision.messages
    assert decision.costs  # decided by the cost-tracking evaluation


def test_objects_under_the_size_gate_stay_far_from_the_limit(prod: tuple[list[Any], dict[str, Any]]) -> None:
    """cel-cpp decides objects under the size gate alone: the policies' costliest shape (a toleration list tested
    against itself, quadratic) at the gate costs a small part of the per-call limit."""
    manifests, namespaces = prod
    count = 1
    gate = evaluate_module.COSTED_ABOVE_VALUES
    while evaluate_module.object_size(cost_objects.cpu_pod_with_gpu_tolerations(count + 1))[0] <= gate:
        count += 1
    pod = cost_objects.cpu_pod_with_gpu_tolerations(count)
    decision = evaluate([pod], manifests, namespaces, engine=engine_named("cel-python"))[0]
    assert sum(decision.costs.values()) < cost.PER_CALL_LIMIT / 20


# ---------------------------------------------------------------- compiled comprehension bodies

ITEMS = [
    {"key": f"k{index}", "value": "x" * (index % 13), "n": index, **({"effect": "NoSchedule"} if index % 3 else {})}
    for index in range(40)
] + [{"key": "example.com/gpu", "n": 99}, {"n": "not a number"}, {"key": 7}]
BODIES = [
    "items.exists(i, has(i.key) && i.key.startsWith('k3'))",
    "items.all(i, !has(i.effect) || i.effect == 'NoSchedule')",
    "items.filter(i, has(i.key) && i.key in names).map(i, i.key)",
    "items.filter(i, has(i.value) && i.value.endsWith('xx') && size(i.value) > 3)",
    "items.exists(i, i.key.startsWith(prefix + '-'))",
    "items.filter(i, i.n > 10 ? i.key in labels : i['key'] == 'k1')",
    "items.all(i, i.n < 100)",
    "items.map(i, has(i.key) ? i.key : 'none')",
    "labels.filter(k, labels[k] == 'b' || k in names)",
    "names.exists_one(n, n in ['k5', 'k6'] && !(n in []))",
    "items.exists(i, i.missing == 1)",
]


@pytest.mark.parametrize("source", BODIES)
def test_compiled_comprehension_bodies_charge_and_answer_as_the_evaluator(source: str) -> None:
    """A long list's comprehension body runs as closures (cel._BodyCompiler); every value, error and unit of cost
    is the tree-walking evaluator's, which runs the same expression when the compiler is kept out."""
    from aks_gpu.admission import cel

    activation = {
        "items": ITEMS,
        "names": [f"k{index}" for index in range(0, 40, 3)],
        "labels": {f"k{index}": "ab"[index % 2] for index in range(30)},
        "prefix": "k1",
    }
    program = cel.compile_expression(source)

    def run() -> tuple[Any, int]:
        spent: list[int] = []
        try:
            value = program.run(activation, spent.append)
        except cel.CelError as error:
            value = f"error: {error.reason}"
        return value, spent[0]

    compiled = run()
    original = cel.COMPILED_FROM
    try:
        cel.COMPILED_FROM = 10**9
        walked = run()
    finally:
        cel.COMPILED_FROM = original
    assert compiled == walked


def test_a_large_object_is_turned_into_cel_values_once_for_all_the_bindings_that_read_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 40 C3: every binding of a request binds the same object, and the conversion of a large one is a tenth of
    what checking it costs: the namespace's conversion, between two bindings, made the next one convert it again."""
    from aks_gpu.admission import cel

    converted: list[str] = []
    to_cel = cel.to_cel

    def counted(value: Any) -> Any:
        if type(value) is dict and value.get("kind") == "Pod":
            converted.append(str(value["metadata"]["name"]))
        return to_cel(value)

    monkeypatch.setattr(cel, "to_cel", counted)
    pod = cost_objects.gpu_pod_with_node_selector_keys(300)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-training"}}
    engine = engine_named("cel-python")
    for _ in range(3):  # three bindings of one request: each binds the object, no old object, the namespace
        engine.bind({"object": pod, "oldObject": None, "namespaceObject": namespace, "request": {"operation": "CREATE"}}, [])
    assert converted == ["node-selector-300"]
