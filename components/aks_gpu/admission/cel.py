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
  API server (and, with ``failurePolicy: Fail``, denies every request);
- the API server's runtime cost (:mod:`aks_gpu.admission.cost`): every identifier, selection, index, literal
  list or map and function call is charged as cel-go's cost tracker charges it, and the comprehension macros
  (``all``, ``exists``, ``exists_one``, ``filter``, ``map``) run as cel-go expands them, stopping where cel-go stops
  and charging their loop condition, step and result. An expression or variable over the per-call limit ends in
  cel-go's ``operation cancelled: actual cost limit exceeded``.

Nothing here knows about policies; :mod:`aks_gpu.admission.evaluate` drives it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
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
from celpy.evaluation import CELEvalError, Evaluator, base_functions, boolean

from aks_gpu.admission import cost
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


_TRUE, _FALSE = celtypes.BoolType(True), celtypes.BoolType(False)


def _logical_or(left: Any, right: Any) -> Any:
    # CEL: true wins over an error on either side; two errors give one of them (cel-python would raise a
    # TypeError that spells out both error objects, which makes for an unreadable denial message).
    if (isinstance(left, celtypes.BoolType) and left) or (isinstance(right, celtypes.BoolType) and right):
        return _TRUE
    return _either_error(left, right) or _FALSE


def _logical_and(left: Any, right: Any) -> Any:
    if (isinstance(left, celtypes.BoolType) and not left) or (isinstance(right, celtypes.BoolType) and not right):
        return _FALSE
    return _either_error(left, right) or _TRUE


def _either_error(left: Any, right: Any) -> CELEvalError | None:
    for side in (left, right):
        if isinstance(side, CELEvalError):
            return side
    for side in (left, right):
        if not isinstance(side, celtypes.BoolType):
            raise TypeError(f"no such overload: logical operator applied to {type(side).__name__}")
    return None


# cel-python's comparisons (bool_eq, ...) wrap their operator anew (functools.wraps) on every call, which costs more
# than the comparison itself: the same wrappers, made once.
_COMPARISONS: dict[str, Callable[..., Any]] = {
    name: boolean(function)
    for name, function in {
        "_<_": operator.lt,
        "_<=_": operator.le,
        "_>_": operator.gt,
        "_>=_": operator.ge,
        "_==_": operator.eq,
        "_!=_": operator.ne,
    }.items()
}

_KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {
    **_COMPARISONS,
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


# ---------------------------------------------------------------- the cost of calls

# Operators with no cost of their own in cel-go (the logical operators and ?: are not calls there).
_FREE_CALLS = frozenset({"_&&_", "_||_", "_?_:_"})


def _costed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    if name in _FREE_CALLS:
        return function
    if name == "_[_]":
        # An index is a qualifier of an attribute in cel-go: one step.
        def indexed(*args: Any) -> Any:
            cost.charge(cost.SELECT_AND_IDENT_COST)
            return function(*args)

        return indexed

    def call(*args: Any) -> Any:
        result = function(*args)
        cost.charge(cost.call_cost(name, args))
        return result

    return call


KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: _costed(name, function) for name, function in {**base_functions, **_KUBERNETES_FUNCTIONS}.items()
}


# ---------------------------------------------------------------- the evaluator

_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "filter", "map"})


class _KubernetesEvaluator(Evaluator):
    """cel-python's interpreter with CEL's own ``has()`` semantics, cel-go's comprehensions and its cost."""

    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        # Macro bodies (all, exists, filter, map) get the same evaluator, so has() stays strict inside them.
        return _KubernetesEvaluator(ast, activation=self.activation)

    def primary(self, tree: lark.Tree[Any]) -> Any:
        child = tree.children[0]
        if isinstance(child, lark.Tree):
            if child.data == "ident":
                cost.charge(cost.SELECT_AND_IDENT_COST)
            elif child.data == "list_lit" and not _constant(child):
                # A literal of constants is built once when the program is planned (cel-go OptOptimize).
                cost.charge(cost.LIST_CREATE_BASE_COST)
            elif child.data == "map_lit" and not _constant(child):
                cost.charge(cost.MAP_CREATE_BASE_COST)
        return super().primary(tree)

    def member_dot(self, tree: lark.Tree[Any]) -> Any:
        value = super().member_dot(tree)
        cost.charge(cost.SELECT_AND_IDENT_COST + _relative(tree))
        return value

    def member_index(self, tree: lark.Tree[Any]) -> Any:
        value = super().member_index(tree)  # _[_] charges the index itself
        # A key that is itself an attribute path qualifies the attribute in cel-go: its root identifier is free.
        cost.charge(_relative(tree) - (cost.SELECT_AND_IDENT_COST if _attribute_path(tree.children[1]) else 0))
        return value

    def conditionalor(self, tree: lark.Tree[Any]) -> Any:
        return self._logical(tree, stop_at=True)

    def conditionaland(self, tree: lark.Tree[Any]) -> Any:
        return self._logical(tree, stop_at=False)

    def _logical(self, tree: lark.Tree[Any], stop_at: bool) -> Any:
        """cel-go's || and &&: left to right, the right side is not evaluated once the left decides (an error on
        the left does not decide: the right may still)."""
        if len(tree.children) != 2:
            return self.visit_children(tree)[0]
        left = self.visit(cast("lark.Tree[Any]", tree.children[0]))
        if isinstance(left, celtypes.BoolType) and bool(left) == stop_at:
            return left
        right = self.visit(cast("lark.Tree[Any]", tree.children[1]))
        combine = _logical_or if stop_at else _logical_and
        try:
            return combine(left, right)
        except TypeError as error:
            return CELEvalError(str(error), TypeError, None, tree=tree)

    def expr(self, tree: lark.Tree[Any]) -> Any:
        if len(tree.children) != 3:
            return super().expr(tree)
        # cel-go plans a?b:c as a conditional attribute: a branch that is an attribute path is resolved as a
        # qualification of it, its root identifier uncharged (a bare identifier costs nothing).
        condition = self.visit(cast("lark.Tree[Any]", tree.children[0]))
        if isinstance(condition, CELEvalError):
            return condition
        if not isinstance(condition, celtypes.BoolType):
            return CELEvalError("no such overload: ?: needs a bool condition", TypeError, None)
        branch = cast("lark.Tree[Any]", tree.children[1 if condition else 2])
        value = self.visit(branch)
        if _attribute_path(branch):
            cost.charge(-cost.SELECT_AND_IDENT_COST)
        return value

    def relation(self, tree: lark.Tree[Any]) -> Any:
        operator = tree.children[0] if len(tree.children) == 2 else None
        if not isinstance(operator, lark.Tree) or operator.data != "relation_in":
            return super().relation(tree)
        container_tree = cast("lark.Tree[Any]", tree.children[1])
        kind = _in_kind(container_tree)
        if kind == "empty":
            return celtypes.BoolType(False)  # folded to false when the program is planned: nothing is evaluated
        left = self.visit(cast("lark.Tree[Any]", operator.children[0]))
        container = self.visit(container_tree)
        for side in (left, container):
            if isinstance(side, CELEvalError):
                return side
        if kind == "list":
            cost.charge(cost.actual_size(container))  # in_list: O(n)
        elif kind == "dyn":
            cost.charge(1)  # dispatched at run time (a map key test, or a list the checker could not type)
        try:
            return _IN(left, container)
        except TypeError:
            return CELEvalError(f"no such overload: in applied to {type(container).__name__}", TypeError, None, tree=tree)

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        macro = str(cast(lark.Token, tree.children[1]).value)
        if macro not in _COMPREHENSIONS:
            return super().member_dot_arg(tree)
        return self._comprehension(tree, macro)

    def _comprehension(self, tree: lark.Tree[Any], macro: str) -> Any:
        """A macro as cel-go expands it (parser/macro.go) and folds it (interpreter/interpretable.go): the loop
        condition is evaluated before each step and ends the loop once it is false; each part is charged."""
        target = self.visit(cast("lark.Tree[Any]", tree.children[0]))
        if isinstance(target, CELEvalError):
            return target
        if not isinstance(target, (list, Mapping)):
            return CELEvalError(f"got '{type(target).__name__}', expected iterable type", TypeError, None)
        arguments = cast("lark.Tree[Any]", tree.children[2])
        variable_tree, body = cast("tuple[lark.Tree[Any], lark.Tree[Any]]", tuple(arguments.children))
        variable = str(cast(lark.Token, next(variable_tree.find_data("ident")).children[0]).value)
        nested = self.sub_evaluator(body)

        def walked(item: Any) -> Any:
            try:
                return nested.evaluate({variable: item})
            except CELEvalError as error:
                return error

        # A long list or map: the body as closures where it can be (the same values and charges, far faster).
        predicate = (_BodyCompiler(self, variable).compile(body) if len(target) >= COMPILED_FROM else None) or walked

        accumulator: Any
        if macro in ("all", "exists"):
            accumulator = celtypes.BoolType(macro == "all")
            combine = _logical_and if macro == "all" else _logical_or
            # all: @not_strictly_false(@result); exists: @not_strictly_false(!@result): an identifier and calls.
            condition_cost = 2 if macro == "all" else 3
            charge, decided = cost.charger(), macro != "all"
            for item in target:
                charge(condition_cost)
                if isinstance(accumulator, celtypes.BoolType) and bool(accumulator) == decided:
                    break
                charge(cost.SELECT_AND_IDENT_COST)  # @result in the step
                try:
                    accumulator = combine(accumulator, predicate(item))
                except TypeError as error:
                    accumulator = CELEvalError(str(error), TypeError, None)
        elif macro == "exists_one":
            count: Any = 0
            for item in target:
                kept = predicate(item)  # step: pred ? @result + 1 : @result (a bare branch identifier is free)
                if isinstance(kept, CELEvalError):
                    return kept
                if kept:
                    cost.charge(cost.SELECT_AND_IDENT_COST + 1)
                    count += 1
            cost.charge(cost.SELECT_AND_IDENT_COST + 1)  # result: @result == 1
            return celtypes.BoolType(count == 1)
        else:
            kept_items: list[Any] = []
            for item in target:
                if macro == "filter":
                    kept = predicate(item)  # step: pred ? @result + [item] : @result
                    if isinstance(kept, CELEvalError):
                        return kept
                    if not isinstance(kept, celtypes.BoolType):
                        return CELEvalError("no such overload", TypeError, None)
                    if kept:
                        kept_items.append(item)
                        # @result, the item, [item] built, the + call; the other branch, a bare @result, is free
                        cost.charge(2 * cost.SELECT_AND_IDENT_COST + cost.LIST_CREATE_BASE_COST + 1)
                else:
                    mapped = predicate(item)  # step: @result + [f(item)]
                    if isinstance(mapped, CELEvalError):
                        return mapped
                    kept_items.append(mapped)
                    cost.charge(2 * cost.SELECT_AND_IDENT_COST + cost.LIST_CREATE_BASE_COST)
            accumulator = celtypes.ListType(kept_items)
        cost.charge(cost.SELECT_AND_IDENT_COST)  # the result: @result
        return accumulator

    def macro_has_eval(self, exprlist: lark.Tree[Any]) -> Any:
        selection = _field_selection(exprlist)
        if selection is None:
            return CELEvalError("invalid argument to has() macro", SyntaxError, None)
        operand_tree, field_name = selection
        # cel-go tests presence as one attribute: the operand's path, its root identifier being the test's step.
        operand = self.visit(operand_tree)
        if isinstance(operand, CELEvalError):
            return operand
        if isinstance(operand, Mapping):
            return celtypes.BoolType(celtypes.StringType(field_name) in operand)
        return CELEvalError(f"has() needs a map or message, not {type(operand).__name__}", TypeError, None)


# Comprehensions over at least this many elements run their body through _BodyCompiler.
COMPILED_FROM = 16
_Closure = Callable[[Any], Any]


class _BodyCompiler:
    """A comprehension's body as Python closures of its variable, where every node that reads the variable is one
    of a few kinds (the variable, a field selection, a method call such as ``v.startsWith(prefix)``, a relation,
    ``!``, ``&&``, ``||``, ``?:``, ``has()``): each closure does what :class:`_KubernetesEvaluator` does for its node,
    the same value (error values included) and the same charges in the same order. A part that does not read the
    variable has the same value and cost on every step, so it is evaluated once, by the evaluator itself, and then
    only charged. Any other node reading the variable (a nested macro, a function call): None, and the evaluator
    walks the body. This is what lets a list of 55,000 hostnames be costed in a fraction of a second: the parse
    tree is walked once, not once per element."""

    def __init__(self, evaluator: _KubernetesEvaluator, variable: str) -> None:
        self.evaluator = evaluator
        self.variable = variable

    def compile(self, tree: Any) -> _Closure | None:
        """``tree``: a node as the parser made it (a part that does not read the variable is evaluated as it is)."""
        node = _unwrap(tree)
        if not isinstance(node, lark.Tree) or not isinstance(tree, lark.Tree):
            return None
        if not self._reads_variable(node):
            return self._invariant(tree)
        data, children = node.data, node.children
        if data == "ident":
            return self._ident()
        if data == "member_dot":
            return self._member_dot(node)
        if data == "member_index":
            return self._member_index(node)
        if data == "member_dot_arg" and str(children[1]) not in _CELPY_MACROS:
            return self._method(node)
        if data == "relation" and len(children) == 2:
            return self._relation(node)
        if data in ("conditionalor", "conditionaland") and len(children) == 2:
            return self._logical(node, stop_at=data == "conditionalor")
        if data == "unary" and len(children) == 2:
            return self._unary(node)
        if data == "expr" and len(children) == 3:
            return self._conditional(node)
        if data == "ident_arg" and str(children[0]) == "has" and len(children) == 2:
            return self._has(children[1])
        return None

    def _reads_variable(self, node: lark.Tree[Any]) -> bool:
        return any(str(found.children[0]) == self.variable for found in node.find_data("ident"))

    def _invariant(self, node: lark.Tree[Any]) -> _Closure:
        cached: list[tuple[Any, int]] = []

        def value(_: Any) -> Any:
            if cached:
                result, spent = cached[0]
                if spent:
                    cost.charge(spent)
                return result
            tracker = cost.CURRENT.get()
            before = tracker.cost if tracker is not None else 0
            result = self.evaluator.visit(node)
            cached.append((result, (tracker.cost - before) if tracker is not None else 0))
            return result

        return value

    def _ident(self) -> _Closure:
        charge = cost.charger()

        def value(item: Any) -> Any:
            charge(cost.SELECT_AND_IDENT_COST)
            return item

        return value

    def _member_dot(self, node: lark.Tree[Any]) -> _Closure | None:
        operand = self.compile(node.children[0])
        if operand is None:
            return None
        name = str(cast(lark.Token, node.children[1]).value)
        charge = cost.SELECT_AND_IDENT_COST + _relative(node)

        def value(item: Any) -> Any:
            member = operand(item)
            result: Any
            if isinstance(member, CELEvalError):
                result = member
            elif isinstance(member, celtypes.MessageType):
                result = member.get(name)
            elif isinstance(member, celtypes.MapType):
                try:
                    result = member[name]
                except KeyError:
                    result = CELEvalError(f"no such member in mapping: {name!r}", KeyError, None, tree=node)
            else:
                message = f"{member!r} with type: '{type(member)}' does not support field selection"
                result = CELEvalError(message, TypeError, None, tree=node)
            cost.charge(charge)
            return result

        return value

    def _member_index(self, node: lark.Tree[Any]) -> _Closure | None:
        operand, key = self.compile(node.children[0]), self.compile(node.children[1])
        if operand is None or key is None:
            return None
        function = self.evaluator.activation.resolve_function("_[_]")  # charges the index itself
        # A key that is itself an attribute path qualifies the attribute in cel-go: its root identifier is free.
        charge = _relative(node) - (cost.SELECT_AND_IDENT_COST if _attribute_path(node.children[1]) else 0)
        where = "applied to '({}, {})'"

        def value(item: Any) -> Any:
            member, index = operand(item), key(item)
            result: Any
            try:
                result = function(member, index)
            except TypeError as ex:
                result = _error(f"found no matching overload for _[_] {where.format(type(member), type(index))}", ex, tree=node)
            except KeyError as ex:
                result = _error("no such key", ex, tree=node)
            except IndexError as ex:
                result = _error("invalid_argument", ex, tree=node)
            cost.charge(charge)
            return result

        return value

    def _method(self, node: lark.Tree[Any]) -> _Closure | None:
        receiver = self.compile(node.children[0])
        arguments = [self.compile(argument) for argument in (node.children[2].children if len(node.children) == 3 else ())]
        token = cast(lark.Token, node.children[1])
        try:
            function = self.evaluator.activation.resolve_function(token.value)
        except KeyError:
            return None
        if receiver is None or any(argument is None for argument in arguments):
            return None
        compiled = cast(list[_Closure], arguments)

        def called(member: Any, values: Sequence[Any]) -> Any:
            if isinstance(member, CELEvalError):
                return member
            for value in values:
                if isinstance(value, CELEvalError):
                    return value
            try:
                return function(member, *values)
            except ValueError as ex:
                return _error("return error for overflow", ex, token=token)
            except (TypeError, AttributeError) as ex:
                return _error("no such overload", ex, token=token)

        if len(compiled) == 1:
            [argument] = compiled
            return lambda item: called(receiver(item), (argument(item),))  # the receiver first, then the argument
        return lambda item: called(receiver(item), [argument(item) for argument in compiled])

    def _relation(self, node: lark.Tree[Any]) -> _Closure | None:
        operator, container_tree = cast("tuple[lark.Tree[Any], lark.Tree[Any]]", tuple(node.children))
        left = self.compile(operator.children[0])
        right = self.compile(container_tree)
        if left is None or right is None:
            return None
        if operator.data == "relation_in":
            kind = _in_kind(container_tree)
            if kind == "empty":
                return lambda _: celtypes.BoolType(False)

            strings: list[tuple[Any, frozenset[str] | None]] = []  # the last container, and its strings

            def contained(item: Any) -> Any:
                element, container = left(item), right(item)
                for side in (element, container):
                    if isinstance(side, CELEvalError):
                        return side
                if kind == "list":
                    cost.charge(cost.actual_size(container))
                elif kind == "dyn":
                    cost.charge(1)
                if type(element) is celtypes.StringType and isinstance(container, (celtypes.ListType, celtypes.MapType)):
                    # A string among strings (a list's items, a map's keys): what operator_in answers, by one lookup
                    # (no comparison of two strings raises), the set built once for a container read on every step.
                    if not strings or strings[0][0] is not container:
                        plain = all(type(member) is celtypes.StringType for member in container)
                        strings[:] = [(container, frozenset(str(member) for member in container) if plain else None)]
                    members = strings[0][1]
                    if members is not None:
                        return _TRUE if str(element) in members else _FALSE
                try:
                    return _IN(element, container)
                except TypeError:
                    return CELEvalError(f"no such overload: in applied to {type(container).__name__}", TypeError, None, tree=node)

            return contained
        function = self.evaluator.activation.resolve_function(_RELATIONS[operator.data])

        def related(item: Any) -> Any:
            first, second = left(item), right(item)
            try:
                return function(first, second)
            except TypeError as ex:
                detail = f"found no matching overload for {operator.data!r} applied to '({type(first)}, {type(second)})'"
                return _error(detail, ex, tree=node)

        return related

    def _logical(self, node: lark.Tree[Any], stop_at: bool) -> _Closure | None:
        left, right = self.compile(node.children[0]), self.compile(node.children[1])
        if left is None or right is None:
            return None
        combine = _logical_or if stop_at else _logical_and

        def value(item: Any) -> Any:
            first = left(item)
            if isinstance(first, celtypes.BoolType) and bool(first) == stop_at:
                return first
            try:
                return combine(first, right(item))
            except TypeError as error:
                return CELEvalError(str(error), TypeError, None, tree=node)

        return value

    def _unary(self, node: lark.Tree[Any]) -> _Closure | None:
        operator = cast("lark.Tree[Any]", node.children[0])
        operand = self.compile(node.children[1])
        if operand is None:
            return None
        function = self.evaluator.activation.resolve_function({"unary_not": "!_", "unary_neg": "-_"}[operator.data])

        def value(item: Any) -> Any:
            right = operand(item)
            try:
                return function(right)
            except TypeError as ex:
                return _error(f"found no matching overload for {operator.data!r} applied to '({type(right)})'", ex, tree=node)
            except ValueError as ex:
                return _error("return error for overflow", ex, tree=node)

        return value

    def _conditional(self, node: lark.Tree[Any]) -> _Closure | None:
        parts = [self.compile(child) for child in node.children]
        if any(part is None for part in parts):
            return None
        condition, yes, no = cast(list[_Closure], parts)
        paths = [_attribute_path(node.children[1]), _attribute_path(node.children[2])]

        def value(item: Any) -> Any:
            decided = condition(item)
            if isinstance(decided, CELEvalError):
                return decided
            if not isinstance(decided, celtypes.BoolType):
                return CELEvalError("no such overload: ?: needs a bool condition", TypeError, None)
            result = (yes if decided else no)(item)
            if paths[0 if decided else 1]:
                cost.charge(-cost.SELECT_AND_IDENT_COST)
            return result

        return value

    def _has(self, exprlist: lark.Tree[Any]) -> _Closure | None:
        selection = _field_selection(exprlist)
        if selection is None:
            return None
        operand_tree, field_name = selection
        operand = self.compile(operand_tree)
        if operand is None:
            return None
        key = celtypes.StringType(field_name)

        def value(item: Any) -> Any:
            found = operand(item)
            if isinstance(found, CELEvalError):
                return found
            if isinstance(found, Mapping):
                return celtypes.BoolType(key in found)
            return CELEvalError(f"has() needs a map or message, not {type(found).__name__}", TypeError, None)

        return value


def _error(message: str, cause: Exception, **where: Any) -> CELEvalError:
    error = CELEvalError(message, cause.__class__, cause.args, **where)
    error.__cause__ = cause
    return error


# cel-python's own macros (member_dot_arg names it evaluates as macros, not as method calls).
_CELPY_MACROS = frozenset({"map", "filter", "all", "exists", "exists_one", "reduce", "min"})
_RELATIONS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_ge": "_>=_",
    "relation_gt": "_>_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
}
_IN = base_functions["_in_"]
_PASSTHROUGH = frozenset(
    {
        "expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
        "unary", "member", "primary", "paren_expr",
    }
)
# The variables of the policy being evaluated: name -> static kind ("list", "map:list", ...), as the API server's
# checker types them from their expressions.
VARIABLE_KINDS: ContextVar[Mapping[str, str] | None] = ContextVar("aks_gpu_cel_variable_kinds", default=None)


def _unwrap(node: Any) -> Any:
    while isinstance(node, lark.Tree) and node.data in _PASSTHROUGH and len(node.children) == 1:
        node = node.children[0]
    return node


def _attribute_path(node: Any) -> bool:
    """An identifier followed by field selections and indexes: what cel-go plans as one attribute."""
    node = _unwrap(node)
    while isinstance(node, lark.Tree) and node.data in ("member_dot", "member_index"):
        node = _unwrap(node.children[0])
    return isinstance(node, lark.Tree) and node.data == "ident"


def _relative(tree: lark.Tree[Any]) -> int:
    """1 when this selection or index starts a path on a computed value (a call, a literal, a parenthesis):
    cel-go plans it as a relative attribute, one step more than a path from an identifier."""
    operand = _unwrap(tree.children[0])
    if isinstance(operand, lark.Tree) and operand.data in ("member_dot", "member_index"):
        return 0
    return 0 if isinstance(operand, lark.Tree) and operand.data == "ident" else 1


def _path(node: Any) -> list[str] | None:
    node = _unwrap(node)
    names: list[str] = []
    while isinstance(node, lark.Tree) and node.data == "member_dot":
        names.insert(0, str(node.children[1]))
        node = _unwrap(node.children[0])
    if isinstance(node, lark.Tree) and node.data == "ident":
        return [str(node.children[0]), *names]
    return None


# The typed fields of `request` that are lists (k8s.io/apiserver pkg/admission/plugin/cel: the request type).
_TYPED_LISTS = {("request", "userInfo", "groups")}


def static_kind(node: Any, variables: Mapping[str, str]) -> str:
    """What the API server's checker knows of an expression's type, as far as cost needs it: "list", "map:list"
    (a map of lists), "map" or "dyn". ``object`` and ``oldObject`` are dyn, so anything read from them is too."""
    node = _unwrap(node)
    if not isinstance(node, lark.Tree):
        return "dyn"
    if node.data == "list_lit":
        return "list"
    if node.data == "map_lit":
        values = [child for index, child in enumerate(node.children[0].children) if index % 2] if node.children else []
        return "map:list" if values and all(static_kind(v, variables) == "list" for v in values) else "map"
    if node.data == "member_dot_arg" and str(node.children[1]) in ("filter", "map"):
        return "list"
    if node.data == "addition" and len(node.children) == 2:
        operator, right = node.children
        added = isinstance(operator, lark.Tree) and operator.data == "addition_add"
        if added and "list" in (static_kind(operator.children[0], variables), static_kind(right, variables)):
            return "list"
        return "dyn"
    if node.data == "expr" and len(node.children) == 3:
        branches = {static_kind(node.children[1], variables), static_kind(node.children[2], variables)}
        return branches.pop() if len(branches) == 1 else "dyn"
    if node.data == "member_index":
        return "list" if static_kind(node.children[0], variables) == "map:list" else "dyn"
    path = _path(node)
    if path is not None:
        if path[0] == "variables" and len(path) == 2:
            return variables.get(path[1], "dyn")
        if path[0] == "variables" and len(path) == 3 and variables.get(path[1]) == "map:list":
            return "list"
        if tuple(path) in _TYPED_LISTS:
            return "list"
    return "dyn"


def _in_kind(container: lark.Tree[Any]) -> str:
    """How cel-go plans ``x in container``: "empty" (an empty literal: folded to false), "set" (a literal of
    constants: a set lookup, no call cost), "list" (in_list: its size) or "dyn" (1)."""
    node = _unwrap(container)
    if isinstance(node, lark.Tree) and node.data == "list_lit" and _constant(node):
        return "set" if node.children else "empty"
    return "list" if static_kind(container, VARIABLE_KINDS.get() or {}) == "list" else "dyn"


def _constant(literal: lark.Tree[Any]) -> bool:
    """A list or map literal made only of literals (nested literals included): cel-go builds it at plan time."""
    for node in literal.iter_subtrees():
        if node.data in ("ident", "ident_arg", "dot_ident", "dot_ident_arg", "member_dot", "member_dot_arg", "member_index"):
            return False
    return True


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

    @property
    def ast(self) -> lark.Tree[Any]:
        return self._runner.ast

    def run(self, activation: Mapping[str, Any], meter: Callable[[int], None] | None = None) -> Any:
        """Evaluate against ``activation`` (plain Python values, or ``LazyVariables``); the CEL value or CelError.

        The evaluation is costed as the API server costs it and cancelled past the per-call limit; ``meter``
        receives its cost (what it had spent when it was cancelled or failed, too)."""
        context = {name: value if isinstance(value, LazyVariables) else to_cel(value) for name, value in activation.items()}
        tracker = cost.CostTracker()
        token = cost.CURRENT.set(tracker)
        try:
            return self._runner.evaluate(context)
        except cost.CostLimitExceededError:
            raise CelError(self.source, cost.LIMIT_EXCEEDED_MESSAGE) from None
        except CELEvalError as error:
            raise CelError(self.source, _reason(error)) from None
        except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as error:
            raise CelError(self.source, str(error)) from None
        finally:
            cost.CURRENT.reset(token)
            if meter is not None:
                meter(tracker.cost)


@cache
def compile_expression(source: str) -> Program:
    """Parse one CEL expression; ``CelError`` for a syntax error. Once per source: a Program is never changed by a run,
    and the prod stack's policies, their Pod Security baseline and their costed copies compile 133 expressions of 104
    sources (lark's parse is most of what any check costs on cel-python)."""
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

    def __init__(
        self,
        programs: Mapping[str, Program],
        activation: Callable[[], Mapping[str, Any]],
        meter: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__()
        self._programs = dict(programs)
        self._activation = activation
        self._meter = meter
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: Any) -> Any:
        key = str(name)
        if key not in self._programs:
            raise KeyError(name)
        if key not in self._values:
            try:
                self._values[key] = self._programs[key].run(self._activation(), self._meter)
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


# StringType(text) for a str, without StringType's Python-level __new__ (which, given a str, calls str.__new__ so): the
# same object, made in C, for the 200,000 strings of a large object.
_new_string = str.__new__
_STRING = celtypes.StringType


def _cel_map(value: Mapping[Any, Any]) -> celtypes.MapType:
    """``MapType({StringType(str(k)): to_cel(v) ...})`` without the dict in between: MapType's __init__ puts every item
    of it in again, in Python, hashing each key again with StringType's Python-level __hash__."""
    mapped = celtypes.MapType()
    dict.update(
        mapped,
        (
            (_new_string(_STRING, str(k)), _new_string(_STRING, v) if type(v) is str else to_cel(v))
            for k, v in value.items()
        ),
    )
    return mapped


def to_cel(value: Any) -> Any:
    """Plain data (what YAML gives) as CEL values; dates and other scalars become strings, as in JSON."""
    kind = type(value)
    if kind is str:  # most of an object's values (the type itself: a subclass, a CEL string, goes the long way)
        return _new_string(_STRING, value)
    if kind is dict:
        return _cel_map(value)
    if kind is list:
        return celtypes.ListType([_new_string(_STRING, item) if type(item) is str else to_cel(item) for item in value])
    if isinstance(value, (celtypes.MapType, celtypes.ListType)):
        return value
    if isinstance(value, Mapping):
        return _cel_map(value)
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


# The last mappings turned into CEL values, and what each became: every binding of one request binds the same object,
# which is read, never changed, by the evaluation (a 3 MiB object takes a tenth of a second to convert). A binding binds
# up to three mappings (object, oldObject, namespaceObject; ``request`` is new each time), so one kept would be the
# namespace's, and the object would be converted again for every binding.
_KEPT_CONVERSIONS = 4
_LAST_CONVERTED: list[tuple[Any, Any]] = []


def _converted(value: Any) -> Any:
    for given, cel_value in _LAST_CONVERTED:
        if given is value:
            return cel_value
    cel_value = to_cel(value)
    if isinstance(value, Mapping):
        _LAST_CONVERTED[:] = [(value, cel_value), *_LAST_CONVERTED[: _KEPT_CONVERSIONS - 1]]
    return cel_value


class _Bound:
    """One request's activation for cel-python: plain data turned into CEL values once, variables lazily.

    ``cost`` is what the expressions run so far cost, the variables they computed included (the API server's
    per-binding budget counts both)."""

    def __init__(self, base: Mapping[str, Any], variables: Sequence[tuple[str, Program]]) -> None:
        self.cost = 0
        self.kinds = variable_kinds(variables)
        self.activation: dict[str, Any] = {name: _converted(value) for name, value in base.items()}
        self.activation["variables"] = LazyVariables(dict(variables), lambda: self.activation, self._spend)

    def _spend(self, amount: int) -> None:
        self.cost += amount

    def run(self, program: Program) -> Any:
        token = VARIABLE_KINDS.set(self.kinds)
        try:
            return to_python(program.run(self.activation, self._spend))
        finally:
            VARIABLE_KINDS.reset(token)


def variable_kinds(variables: Sequence[tuple[str, Program]]) -> dict[str, str]:
    """Each variable's static kind, in order (a variable may read the ones before it)."""
    kinds: dict[str, str] = {}
    for name, program in variables:
        kinds[name] = static_kind(program.ast, kinds)
    return kinds


class CelPythonEngine:
    """cel-python with the Kubernetes functions of this module."""

    name = "cel-python"

    def compile(self, source: str, variable_names: Sequence[str] = ()) -> Program:
        # cel-python resolves variables.<name> at run time, from LazyVariables.
        return compile_expression(source)

    def bind(self, base: Mapping[str, Any], variables: Sequence[tuple[str, Any]]) -> _Bound:
        return _Bound(base, variables)
