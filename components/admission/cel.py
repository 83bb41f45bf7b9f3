"""CEL the way the Kubernetes API server evaluates it in admission policies, on top of cel-python (``celpy``).

cel-python implements the CEL language and its standard macros; this module adds, in this one place, what
Kubernetes puts on top and the policy uses:

- ``list.join(separator)`` from cel-go's extended string library, which Kubernetes enables in every CEL
  environment (https://kubernetes.io/docs/reference/using-api/cel/#cel-options-language-features-and-libraries,
  https://pkg.go.dev/github.com/google/cel-go/ext#Strings);
- the Kubernetes quantity library: ``quantity``, ``isQuantity`` and the members ``compareTo``,
  ``isGreaterThan``, ``isLessThan``, ``isInteger``, ``asInteger``
  (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-quantity-library);
- the standard ``has()`` macro with CEL's own semantics: ``has(a.b)`` is an error when ``a`` itself is
  missing. cel-python answers ``false`` there, which would let an expression pass here that errors on a real
  API server (and, with ``failurePolicy: Fail``, denies every request).

Nothing here knows about policies; :mod:`aks_gpu.admission.evaluate` drives it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from fractions import Fraction
from functools import cache
from typing import Any, cast

import celpy
import lark
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator

from aks_gpu.admission.engine import CelError, composited_variable_error
from aks_gpu.admission.quantity import INT64, Quantity

__all__ = ["CelError", "CelPythonEngine", "LazyVariables", "Program", "Quantity", "compile_expression", "to_python"]


# ---------------------------------------------------------------- Kubernetes quantity library


def _quantity(text: Any) -> Quantity:
    if not isinstance(text, str):
        raise TypeError(f"quantity() takes a string, not {type(text).__name__}")
    return Quantity.parse(text)


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        _quantity(text)
    except (TypeError, ValueError):
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _quantities(receiver: Any, other: Any) -> tuple[Fraction, Fraction]:
    if not isinstance(receiver, Quantity) or not isinstance(other, Quantity):
        raise TypeError("expects two quantities")
    return receiver.value, other.value


def _compare_to(receiver: Any, other: Any) -> celtypes.IntType:
    left, right = _quantities(receiver, other)
    return celtypes.IntType((left > right) - (left < right))


def _is_greater_than(receiver: Any, other: Any) -> celtypes.BoolType:
    left, right = _quantities(receiver, other)
    return celtypes.BoolType(left > right)


def _is_less_than(receiver: Any, other: Any) -> celtypes.BoolType:
    left, right = _quantities(receiver, other)
    return celtypes.BoolType(left < right)


def _is_integer(receiver: Any) -> celtypes.BoolType:
    if not isinstance(receiver, Quantity):
        raise TypeError("isInteger() is a member of quantity")
    value = receiver.value
    return celtypes.BoolType(value.denominator == 1 and -INT64 <= value < INT64)


def _as_integer(receiver: Any) -> celtypes.IntType:
    if not _is_integer(receiver):
        raise ValueError(f"cannot convert value to integer: {getattr(receiver, 'text', receiver)}")
    return celtypes.IntType(int(cast(Quantity, receiver).value))


# ---------------------------------------------------------------- cel-go extended strings


def _join(items: Any, separator: Any = "") -> celtypes.StringType:
    if not isinstance(items, list) or not isinstance(separator, str):
        raise TypeError("join() is a member of list(string) and takes a string separator")
    if not all(isinstance(item, str) for item in items):
        raise TypeError("join() needs a list of strings")
    return celtypes.StringType(str(separator).join(str(item) for item in items))


# ---------------------------------------------------------------- CEL's logical operators


def _logical_or(left: Any, right: Any) -> Any:
    # CEL: true wins over an error on either side; two errors give one of them (cel-python would raise a
    # TypeError that spells out both error objects, which makes for an unreadable denial message).
    if any(isinstance(side, celtypes.BoolType) and side for side in (left, right)):
        return celtypes.BoolType(True)
    return _either_error(left, right) or celtypes.BoolType(False)


def _logical_and(left: Any, right: Any) -> Any:
    if any(isinstance(side, celtypes.BoolType) and not side for side in (left, right)):
        return celtypes.BoolType(False)
    return _either_error(left, right) or celtypes.BoolType(True)


def _either_error(left: Any, right: Any) -> CELEvalError | None:
    for side in (left, right):
        if isinstance(side, CELEvalError):
            return side
    for side in (left, right):
        if not isinstance(side, celtypes.BoolType):
            raise TypeError(f"no such overload: logical operator applied to {type(side).__name__}")
    return None


KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "_||_": _logical_or,
    "_&&_": _logical_and,
    "join": _join,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
}


# ---------------------------------------------------------------- the evaluator


class _KubernetesEvaluator(Evaluator):
    """cel-python's interpreter with CEL's own ``has()`` semantics."""

    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        # Macro bodies (all, exists, filter, map) get the same evaluator, so has() stays strict inside them.
        return _KubernetesEvaluator(ast, activation=self.activation)

    def macro_has_eval(self, exprlist: lark.Tree[Any]) -> Any:
        selection = _field_selection(exprlist)
        if selection is None:
            return CELEvalError("invalid argument to has() macro", SyntaxError, None)
        operand_tree, field_name = selection
        operand = self.visit(operand_tree)
        if isinstance(operand, CELEvalError):
            return operand
        if isinstance(operand, Mapping):
            return celtypes.BoolType(celtypes.StringType(field_name) in operand)
        return CELEvalError(f"has() needs a map or message, not {type(operand).__name__}", TypeError, None)


def _field_selection(exprlist: lark.Tree[Any]) -> tuple[lark.Tree[Any], str] | None:
    """The ``a`` and ``f`` of ``has(a.f)``: the one argument, unwrapped down to its field selection."""
    if len(exprlist.children) != 1:
        return None
    node: Any = exprlist.children[0]
    while isinstance(node, lark.Tree) and node.data != "member_dot" and len(node.children) == 1:
        node = node.children[0]
    if not isinstance(node, lark.Tree) or node.data != "member_dot":
        return None
    operand, name = node.children
    return cast("lark.Tree[Any]", operand), str(cast(lark.Token, name).value)


class _Runner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _KubernetesEvaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


@cache
def _environment() -> celpy.Environment:
    # Building the CEL grammar takes a fifth of a second: only when the first expression is compiled.
    return celpy.Environment(runner_class=_Runner)


@dataclass(frozen=True)
class Program:
    """One compiled CEL expression."""

    source: str
    _runner: celpy.Runner = field(repr=False, compare=False)

    def run(self, activation: Mapping[str, Any]) -> Any:
        """Evaluate against ``activation`` (plain Python values, or ``LazyVariables``); the CEL value or CelError."""
        context = {name: value if isinstance(value, LazyVariables) else to_cel(value) for name, value in activation.items()}
        try:
            return self._runner.evaluate(context)
        except CELEvalError as error:
            raise CelError(self.source, _reason(error)) from None
        except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as error:
            raise CelError(self.source, str(error)) from None


def compile_expression(source: str) -> Program:
    """Parse one CEL expression; ``CelError`` for a syntax error."""
    environment = _environment()
    try:
        ast = environment.compile(source)
    except CELParseError as error:
        raise CelError(source, f"syntax error: {error}") from None
    return Program(source=source, _runner=environment.program(ast, functions=KUBERNETES_FUNCTIONS))


class LazyVariables(celtypes.MapType):
    """``variables`` of an admission policy: each one computed the first time an expression reads it.

    The API server evaluates variables lazily, so an error in a variable that no expression reaches is no
    error at all; computing them eagerly would deny requests the server admits.
    """

    def __init__(self, programs: Mapping[str, Program], activation: Callable[[], Mapping[str, Any]]) -> None:
        super().__init__()
        self._programs = dict(programs)
        self._activation = activation
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: Any) -> Any:
        key = str(name)
        if key not in self._programs:
            raise KeyError(name)
        if key not in self._values:
            try:
                self._values[key] = self._programs[key].run(self._activation())
            except CelError as error:
                # Passed along as a CEL error value: it fails only the expressions that read it.
                self._values[key] = CELEvalError(composited_variable_error(key, error.reason), RuntimeError, None)
        return self._values[key]

    def __contains__(self, name: object) -> bool:
        return str(name) in self._programs

    def __iter__(self) -> Iterator[Any]:
        return iter(self._programs)

    def __len__(self) -> int:
        return len(self._programs)


def to_cel(value: Any) -> Any:
    """Plain data (what YAML gives) as CEL values; dates and other scalars become strings, as in JSON."""
    if isinstance(value, (celtypes.MapType, celtypes.ListType)):
        return value
    if isinstance(value, Mapping):
        return celtypes.MapType({celtypes.StringType(str(k)): to_cel(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([to_cel(item) for item in value])
    if isinstance(value, (datetime, date)):
        return celtypes.StringType(value.isoformat())
    return json_to_cel(value)


def to_python(value: Any) -> Any:
    """A CEL result as plain Python (bool, int, float, str, list, dict, None)."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, Mapping):
        return {to_python(k): to_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_python(item) for item in value]
    return value


def _reason(error: CELEvalError) -> str:
    # celpy labels every ValueError "return error for overflow"; the cause says what actually went wrong.
    cause = error.__cause__
    if isinstance(cause, (TypeError, ValueError)) and str(cause):
        return str(cause)
    args = [arg for arg in error.args if isinstance(arg, str)]
    return args[0] if args else str(error)


class _Bound:
    """One request's activation for cel-python: plain data turned into CEL values once, variables lazily."""

    def __init__(self, base: Mapping[str, Any], variables: Sequence[tuple[str, Program]]) -> None:
        self.activation: dict[str, Any] = {name: to_cel(value) for name, value in base.items()}
        self.activation["variables"] = LazyVariables(dict(variables), lambda: self.activation)

    def run(self, program: Program) -> Any:
        return to_python(program.run(self.activation))


class CelPythonEngine:
    """cel-python with the Kubernetes functions of this module."""

    name = "cel-python"

    def compile(self, source: str, variable_names: Sequence[str] = ()) -> Program:
        # cel-python resolves variables.<name> at run time, from LazyVariables.
        return compile_expression(source)

    def bind(self, base: Mapping[str, Any], variables: Sequence[tuple[str, Any]]) -> _Bound:
        return _Bound(base, variables)
