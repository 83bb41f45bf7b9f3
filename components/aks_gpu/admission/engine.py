"""The CEL engines the offline evaluator can run the policy with, behind one small interface.

Two independent implementations of CEL evaluate the same rendered expressions:

- ``cel-python`` (:mod:`aks_gpu.admission.cel`): pure Python, installs everywhere; about 14 ms per object.
- ``cel-cpp`` (:mod:`aks_gpu.admission.cel_cpp`): Google's C++ CEL through ``cel-expr-python``, the same
  lineage as cel-go, which the API server runs; well under 1 ms per object. Wheels exist for Linux x86_64,
  macOS arm64 and Windows x64.

Each carries the Kubernetes CEL functions the policy uses, implemented once per engine. ``aksgpu admission
check`` uses cel-cpp where it is installed and cel-python otherwise; the tests run the whole corpus through both
and fail on any difference in decision or message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

ENGINE_NAMES = ("cel-cpp", "cel-python")


class CelError(Exception):
    """A CEL expression that does not compile, or an evaluation that ends in an error."""

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(f"{reason} (in `{expression}`)")
        self.expression = expression
        self.reason = reason


def composited_variable_error(name: str, reason: str) -> str:
    """A variable that failed, as the API server words it to the expression that read it
    (k8s.io/apiserver pkg/admission/plugin/cel/composition.go)."""
    return f'composited variable "{name}" fails to evaluate: {reason}'


class Compiled(Protocol):
    """One compiled expression; ``source`` is its text."""

    @property
    def source(self) -> str: ...


class Bound(Protocol):
    """One request's activation (object, request, ... and the policy's variables)."""

    def run(self, program: Any) -> Any:
        """The expression's value as plain Python (bool, int, str, list, dict, None); CelError on an error."""
        ...


class Engine(Protocol):
    name: str

    def compile(self, source: str, variable_names: Sequence[str] = ()) -> Compiled:
        """CelError for a syntax (or, where the engine checks, a type) error; ``variable_names`` are the policy's
        ``variables``, which the expression may read as ``variables.<name>``."""
        ...

    def bind(self, base: Mapping[str, Any], variables: Sequence[tuple[str, Any]]) -> Bound:
        """``base`` holds object, oldObject, request, namespaceObject and params as plain data; ``variables`` the
        compiled ``variables`` of the policy, in order (each may read the ones before)."""
        ...


def cpp_available() -> bool:
    try:
        import cel_expr_python  # noqa: F401
    except ImportError:
        return False
    return True


def engine_named(name: str) -> Engine:
    """The engine by name; ``auto``: cel-cpp when installed, else cel-python."""
    if name == "auto":
        name = "cel-cpp" if cpp_available() else "cel-python"
    if name == "cel-cpp":
        from aks_gpu.admission.cel_cpp import CelCppEngine

        return CelCppEngine()
    if name == "cel-python":
        from aks_gpu.admission.cel import CelPythonEngine

        return CelPythonEngine()
    raise ValueError(f"unknown CEL engine {name!r}; choose from auto, {', '.join(ENGINE_NAMES)}")
