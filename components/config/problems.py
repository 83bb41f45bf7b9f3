"""Config problems: what is wrong, where (stack file and key path), and what is allowed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One finding about a stack file, addressed by the key path a user would edit."""

    path: str
    message: str
    severity: Severity = "error"

    def render(self, source: str) -> str:
        return f"{source}: {self.path}: {self.message}"


class ConfigError(Exception):
    """The stack config is invalid; ``problems`` holds one entry per problem, errors first."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(p.render(source) for p in problems))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]
