"""A diagnostic's verdict, as every reader of ``aks_gpu.gpu.diag`` gives it and a node's verdict combines them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

State = Literal["healthy", "unhealthy", "inconclusive"]


@dataclass(frozen=True)
class Grade:
    """One tool's verdict on one node. ``part`` names what failed (unhealthy) or why nothing can be said
    (inconclusive); it is empty when healthy. ``evidence`` holds the output lines the verdict rests on, ``warnings``
    what an expert would note without failing the node (a Warn result, a bandwidth that was not graded)."""

    tool: str
    state: State
    part: str = ""
    evidence: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.state if self.state == "healthy" else f"{self.state}: {self.part}"

    @property
    def passed(self) -> bool:
        return self.state == "healthy"


def combine(tool: str, grades: Iterable[Grade]) -> Grade:
    """A node's verdict from its tools' verdicts: unhealthy if any tool found a fault (a fault outranks a tool that
    could not run), else inconclusive if any could not run, else healthy. An empty set is inconclusive."""
    grades = list(grades)
    if not grades:
        return Grade(tool, "inconclusive", "no diagnostic ran")
    for state in ("unhealthy", "inconclusive"):
        found = [grade for grade in grades if grade.state == state]
        if found:
            part = "; ".join(f"{grade.tool}: {grade.part}" for grade in found)
            return Grade(
                tool, state, part, tuple(line for g in found for line in g.evidence), tuple(w for g in grades for w in g.warnings)
            )
    return Grade(tool, "healthy", warnings=tuple(w for g in grades for w in g.warnings))
