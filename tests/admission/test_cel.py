"""CEL as the API server evaluates it: the Kubernetes functions and the semantics cel-python lacks."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.admission.cel import CelError, LazyVariables, Quantity, compile_expression, to_python


def run(expression: str, **activation: Any) -> Any:
    return to_python(compile_expression(expression).run(activation))


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("1", "1000m", 0),
        ("2", "1", 1),
        ("1Gi", "1G", 1),
        ("512Mi", "0.5Gi", 0),
        ("500Mi", "0.5Gi", -1),
        ("1e3", "1k", 0),
        ("100m", "0.1", 0),
        ("3", "4", -1),
    ],
)
def test_quantities_compare_by_value_not_spelling(left: str, right: str, expected: int) -> None:
    assert run(f"quantity('{left}').compareTo(quantity('{right}'))") == expected


def test_quantity_members() -> None:
    assert run("quantity('8').isInteger() && quantity('8').asInteger() == 8") is True
    assert run("quantity('1500m').isInteger()") is False
    assert run("quantity('2Gi').isGreaterThan(quantity('2G')) && quantity('1').isLessThan(quantity('1001m'))") is True
    assert run("isQuantity('1.5Gi') && !isQuantity('1.5 Gi') && !isQuantity('')") is True
    assert Quantity.parse("+.5Ki").value == 512


def test_an_invalid_quantity_is_an_error() -> None:
    with pytest.raises(CelError, match="quantities must match"):
        run("quantity('eight')")


def test_join_from_the_extended_string_library() -> None:
    assert run("['a', 'b', 'c'].join(', ')") == "a, b, c"
    assert run("[].join('-')") == ""
    assert run("['x', 'y'].join()") == "xy"
    with pytest.raises(CelError, match="list of strings"):
        run("[1, 2].join(', ')")


def test_has_tests_the_last_field_and_errors_when_the_operand_is_missing() -> None:
    pod = {"spec": {"containers": [{"name": "a"}]}}
    assert run("has(pod.spec.containers)", pod=pod) is True
    assert run("has(pod.spec.tolerations)", pod=pod) is False
    # CEL (and the API server): selecting a field of a missing field is an error, not false.
    with pytest.raises(CelError, match="no such member"):
        run("has(pod.spec.affinity.nodeAffinity)", pod=pod)
    with pytest.raises(CelError):
        run("pod.spec.containers.exists(c, has(c.resources.limits))", pod=pod)


def test_logical_operators_absorb_errors_the_cel_way() -> None:
    pod: dict[str, Any] = {"spec": {}}
    assert run("pod.spec.missing || true", pod=pod) is True
    assert run("false && pod.spec.missing", pod=pod) is False
    with pytest.raises(CelError, match="no such member in mapping: 'missing'"):
        run("pod.spec.missing || pod.spec.other", pod=pod)


def test_variables_are_computed_lazily_and_once() -> None:
    calls: list[str] = []
    programs = {"ok": compile_expression("object.n + 1"), "broken": compile_expression("object.nope")}
    obj = {"n": 1}

    def activation() -> dict[str, Any]:
        calls.append("read")
        return {"object": obj}

    variables = LazyVariables(programs, activation)
    # An error in a variable no expression reads is no error (the API server evaluates variables lazily).
    assert run("variables.ok * 2 == 4", variables=variables) is True
    assert run("variables.ok", variables=variables) == 2
    assert calls == ["read"]
    with pytest.raises(CelError, match=r"variables\.broken"):
        run("variables.broken == 1", variables=variables)


def test_a_syntax_error_names_the_expression() -> None:
    with pytest.raises(CelError, match=r"(?s)syntax error.*in `size\(\(`"):
        compile_expression("size((")
