"""CEL the way the Kubernetes API server evaluates it in admission policies, on Google's cel-cpp.

The second, independent engine (:mod:`aks_gpu.admission.engine`): ``cel-expr-python`` binds cel-cpp, Google's
C++ implementation of CEL, which checks every expression against declared functions before it runs (an
undeclared function is a compile error here, as in cel-go). On top of the standard library it gets what
Kubernetes adds and the policy uses, in this one place:

- ``list.join(separator)`` and the rest of cel-go's extended string library, here cel-cpp's own strings
  extension (https://kubernetes.io/docs/reference/using-api/cel/#cel-options-language-features-and-libraries);
- the Kubernetes quantity library: ``quantity``, ``isQuantity`` and the members ``compareTo``,
  ``isGreaterThan``, ``isLessThan``, ``isInteger``, ``asInteger``
  (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-quantity-library). cel-expr-python cannot
  return an opaque Python object, so a quantity travels as a one-key map holding its exact value; only these
  functions read it.

Variables: the API server evaluates a policy's ``variables`` lazily. cel-expr-python converts an activation
eagerly, so they are computed here in order, each with the ones before it; one that ends in an error is left out,
and an expression that reads it reports that variable's error, as a lazy evaluation would.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_strings

from aks_gpu.admission.engine import CelError, composited_variable_error
from aks_gpu.admission.quantity import INT64, Quantity

QUANTITY_KEY = "kubernetes.io/quantity"
ROOT_VARIABLES = ("object", "oldObject", "request", "namespaceObject", "params", "variables")
DYN = cel.Type.DYN
# Declared as maps: cel-cpp dispatches a member function on the receiver's runtime type, which dyn does not name.
QUANTITY = cel.Type.Map(cel.Type.STRING, DYN)


def _as_quantity(value: Any) -> Fraction:
    if not isinstance(value, dict) or set(value) != {QUANTITY_KEY}:
        raise TypeError("expects a quantity")
    numerator, denominator = value[QUANTITY_KEY]
    return Fraction(int(numerator), int(denominator))


def _quantity(text: str) -> dict[str, list[int]]:
    value = Quantity.parse(text).value
    return {QUANTITY_KEY: [value.numerator, value.denominator]}


def _is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except ValueError:
        return False
    return True


def _compare_to(receiver: Any, other: Any) -> int:
    left, right = _as_quantity(receiver), _as_quantity(other)
    return (left > right) - (left < right)


def _is_integer(receiver: Any) -> bool:
    value = _as_quantity(receiver)
    return value.denominator == 1 and -INT64 <= value < INT64


def _as_integer(receiver: Any) -> int:
    if not _is_integer(receiver):
        raise ValueError("cannot convert value to integer")
    return int(_as_quantity(receiver))


def _overload(name: str, result: Any, parameters: list[Any], impl: Callable[..., Any], member: bool) -> Any:
    return cel.FunctionDecl(name, [cel.Overload(f"kubernetes_{name}", result, parameters, is_member=member, impl=impl)])


def _kubernetes_functions() -> list[Any]:
    string, boolean, integer = cel.Type.STRING, cel.Type.BOOL, cel.Type.INT
    return [
        _overload("quantity", QUANTITY, [string], _quantity, member=False),
        _overload("isQuantity", boolean, [string], _is_quantity, member=False),
        _overload("compareTo", integer, [QUANTITY, QUANTITY], _compare_to, member=True),
        _overload("isGreaterThan", boolean, [QUANTITY, QUANTITY], lambda a, b: _as_quantity(a) > _as_quantity(b), member=True),
        _overload("isLessThan", boolean, [QUANTITY, QUANTITY], lambda a, b: _as_quantity(a) < _as_quantity(b), member=True),
        _overload("isInteger", boolean, [QUANTITY], _is_integer, member=True),
        _overload("asInteger", integer, [QUANTITY], _as_integer, member=True),
    ]


@cache
def _environment(variable_names: tuple[str, ...] = ()) -> Any:
    """The environment for a policy with these ``variables``: each is declared as the qualified name
    ``variables.<name>`` (CEL resolves ``variables.x`` to it), so an activation carries every variable as its own
    value and an expression converts only what it reads. Referring to an undeclared variable does not compile."""
    declared = {name: DYN for name in ROOT_VARIABLES if name != "variables"}
    declared |= {f"variables.{name}": DYN for name in variable_names}
    return cel.NewEnv(variables=declared, extensions=[ext_strings.ExtStrings()], functions=_kubernetes_functions())


_VARIABLE_READ = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)")
_ROOT_READ = re.compile(r"\b(?:" + "|".join(ROOT_VARIABLES) + r")\b")


@dataclass(frozen=True)
class CppProgram:
    source: str
    expression: Any
    # The variables it reads, and whether it reads nothing of the request (a literal: computed once).
    reads: frozenset[str] = frozenset()
    constant: bool = False
    value: list[Any] = field(default_factory=list, compare=False)  # the constant's value, once computed


def compile_expression(source: str, variable_names: tuple[str, ...] = ()) -> CppProgram:
    try:
        expression = _environment(tuple(variable_names)).compile(source)
    except RuntimeError as error:
        raise CelError(source, f"compile error: {error}") from None
    # Read from the text: a root name inside a string literal only makes the program look non-constant.
    reads = frozenset(_VARIABLE_READ.findall(source))
    return CppProgram(source=source, expression=expression, reads=reads, constant=not _ROOT_READ.search(source))


class _Bound:
    """Variables are computed in order, a batch at a time: every variable whose inputs are ready shares one
    activation (building one converts the whole activation, so one per variable would cost more than the
    expressions). Literal variables are computed once per policy."""

    def __init__(self, base: Mapping[str, Any], variables: Sequence[tuple[str, CppProgram]]) -> None:
        self._data = {name: value for name, value in base.items() if name != "variables"}
        self._errors: dict[str, str] = {}
        self._environment = _environment(tuple(name for name, _ in variables))
        activation = self._activation()
        done: set[str] = set()
        for name, program in variables:
            if program.reads - done:
                activation = self._activation()  # it reads a variable computed since the last activation
                done = {key.removeprefix("variables.") for key in self._data if key.startswith("variables.")}
                done |= set(self._errors)
            try:
                self._data[f"variables.{name}"] = self._constant(program, activation)
            except CelError as error:
                self._errors[name] = error.reason
        self._final = self._activation()

    def _constant(self, program: CppProgram, activation: Any) -> Any:
        if not program.constant:
            return self._eval(program, activation)
        if not program.value:
            program.value.append(self._eval(program, activation))
        return program.value[0]

    def _activation(self) -> Any:
        try:
            return self._environment.Activation(data=self._data)
        except (RuntimeError, TypeError, ValueError) as error:
            raise CelError("<activation>", f"the object cannot be read as CEL data: {error}") from None

    def _eval(self, program: CppProgram, activation: Any) -> Any:
        try:
            value = program.expression.eval(activation)
        except (RuntimeError, TypeError, ValueError) as error:
            raise CelError(program.source, str(error)) from None
        if value.type() == cel.Type.ERROR:
            reason = str(value.plain_value())
            failed = next((name for name in _VARIABLE_READ.findall(program.source) if name in self._errors), None)
            if failed is not None and ("not found" in reason.lower() or "no value with name" in reason.lower()):
                reason = composited_variable_error(failed, self._errors[failed])
            raise CelError(program.source, reason)
        return value.plain_value()

    def run(self, program: CppProgram) -> Any:
        return self._eval(program, self._final)


class CelCppEngine:
    """cel-cpp with the Kubernetes functions of this module."""

    name = "cel-cpp"

    def compile(self, source: str, variable_names: Sequence[str] = ()) -> CppProgram:
        return compile_expression(source, tuple(variable_names))

    def bind(self, base: Mapping[str, Any], variables: Sequence[tuple[str, Any]]) -> _Bound:
        return _Bound(base, variables)
