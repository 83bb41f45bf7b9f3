"""The API server's runtime cost of a CEL evaluation, and its limits.

kube-apiserver runs every admission policy expression with a cost tracker (cel-go
``interpreter/runtimecost.go``) and cancels an evaluation the moment its cost passes the per-call limit:

- ``PER_CALL_LIMIT``: 1,000,000 for each expression and each variable (``PerCallLimit``,
  k8s.io/apiserver ``pkg/apis/cel/config.go``). An expression over it ends in the error
  ``operation cancelled: actual cost limit exceeded``; a variable over it fails every expression that reads it
  (``composited variable "<name>" fails to evaluate: ...``).
- ``RUNTIME_BUDGET``: 10,000,000 for all the validations of one binding, their variables included
  (``RuntimeCELCostBudget``, same file; ``pkg/admission/plugin/cel/condition.go`` subtracts each expression's
  cost and stops with ``OUT_OF_BUDGET_MESSAGE`` once it would go below zero).

The cost is cel-go's: 1 for each identifier, field selection and index; nothing for constants, ``&&``, ``||`` and
``?:``; 10 for building a list, 30 for a map; for a function call what ``call_cost`` says (cel-go
``runtimecost.go`` ``costCall``: most calls 1, string and list operations by the size of their operands); a
comprehension costs what its loop condition, step and result cost on each step, as cel-go's macros expand them
(``parser/macro.go``). :mod:`aks_gpu.admission.cel` charges these as it evaluates; the numbers are checked against
the real environment's (tests/fixtures/kubernetes_cel/costs/policy-objects.json).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sized
from contextvars import ContextVar
from dataclasses import dataclass

PER_CALL_LIMIT = 1_000_000
RUNTIME_BUDGET = 10_000_000
LIMIT_EXCEEDED_MESSAGE = "operation cancelled: actual cost limit exceeded"
OUT_OF_BUDGET_MESSAGE = "validation failed due to running out of cost budget, no further validation rules will be run"

# cel-go common/cost.go
SELECT_AND_IDENT_COST = 1
LIST_CREATE_BASE_COST = 10
MAP_CREATE_BASE_COST = 30
STRING_TRAVERSAL_COST_FACTOR = 0.1
REGEX_STRING_LENGTH_COST_FACTOR = 0.25


class CostLimitExceededError(Exception):
    """An evaluation passed its per-call limit; cel-go cancels it on the spot."""

    def __init__(self) -> None:
        super().__init__(LIMIT_EXCEEDED_MESSAGE)


@dataclass
class CostTracker:
    """The running cost of one expression's evaluation (one program run, as cel-go creates one per Eval)."""

    limit: int = PER_CALL_LIMIT
    cost: int = 0

    def charge(self, amount: int) -> None:
        self.cost += amount
        if self.cost > self.limit:
            raise CostLimitExceededError()


# The tracker of the evaluation under way; none outside one (the functions then charge nothing).
CURRENT: ContextVar[CostTracker | None] = ContextVar("aks_gpu_cel_cost", default=None)


def charge(amount: int) -> None:
    tracker = CURRENT.get()
    if tracker is not None and amount:
        tracker.charge(amount)


def charger() -> Callable[[int], None]:
    """What :func:`charge` does, bound to the evaluation under way (for a loop that charges on every step)."""
    tracker = CURRENT.get()
    return tracker.charge if tracker is not None else _free


def _free(amount: int) -> None:
    return None


def actual_size(value: object) -> int:
    """cel-go ``actualSize``: the size of strings (in code points), bytes, lists and maps; 1 for anything else."""
    if isinstance(value, (str, bytes, list, tuple)):
        return len(value)
    if isinstance(value, (int, float)):  # bools, CEL ints and doubles: no ABC check for the commonest values
        return 1
    if isinstance(value, Mapping) and isinstance(value, Sized):
        return len(value)
    return 1


def _traversal(size: int | float) -> int:
    return math.ceil(size * STRING_TRAVERSAL_COST_FACTOR)


def call_cost(function: str, args: tuple[object, ...]) -> int:
    """The cost of one call of ``function`` (CEL's name: ``_==_``, ``startsWith``, ...) with these arguments.

    cel-go ``CostTracker.costCall``; the Kubernetes library functions the policies call (quantity and its members)
    are O(1) in k8s.io/apiserver ``pkg/cel/library/cost.go`` and fall to the default of 1."""
    if function in ("startsWith", "endsWith") and args:
        return _traversal(actual_size(args[0]))
    if function == "_in_" and len(args) == 2:
        # InList is O(n) in the list; a key test on a map is O(1).
        return actual_size(args[1]) if isinstance(args[1], (list, tuple)) else 1
    if function in ("_==_", "_!=_") and len(args) == 2:
        return _traversal(min(actual_size(args[0]), actual_size(args[1])))
    if function in ("_<_", "_<=_", "_>_", "_>=_") and len(args) == 2:
        if isinstance(args[0], (str, bytes)) and isinstance(args[1], (str, bytes)):
            return _traversal(min(len(args[0]), len(args[1])))
        return 1
    if function == "_+_" and len(args) == 2:
        if isinstance(args[0], (str, bytes)) and isinstance(args[1], (str, bytes)):
            return _traversal(len(args[0]) + len(args[1]))
        return 1
    if function == "matches" and len(args) == 2:
        text = _traversal(1 + actual_size(args[0]))
        return text * math.ceil(actual_size(args[1]) * REGEX_STRING_LENGTH_COST_FACTOR)
    if function == "contains" and len(args) == 2:
        return _traversal(actual_size(args[0])) * _traversal(actual_size(args[1]))
    return 1
