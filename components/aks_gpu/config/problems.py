"""Config problems: what is wrong, where (stack file and key path), and what is allowed."""

from __future__ import annotations

import difflib
import re
import reprlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]

# A message is read in a terminal: one line, bounded. A value is shown at most this long, however large it is
# (a 1 KB alias bomb once printed 52 MB of stderr), and a key path or message is cut past these lengths.
MAX_VALUE_SHOWN = 120
MAX_PATH_SHOWN = 200
MAX_MESSAGE_SHOWN = 600
# Control characters (newlines, ESC of terminal escape sequences, ...) would let a value forge report lines
# or recolour a terminal: they are shown escaped.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = 4


def shown(value: object) -> str:
    """A bounded ``repr`` of a value for a message: long strings, big collections and huge numbers are cut."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - an int beyond Python's 4,300-digit str() limit, an odd __repr__
        text = f"<{type(value).__name__}>"
    return clipped(text, MAX_VALUE_SHOWN)


def clipped(text: str, limit: int) -> str:
    """``text`` on one line (control characters escaped), at most ``limit`` characters."""
    text = _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def did_you_mean(given: str, names: Iterable[str], count: int = 1) -> str:
    """``"; did you mean `gpuQuota`?"`` (``"; did you mean `a` (or `b`, `c`)?"``): the ``count`` names closest to
    ``given``, compared case-insensitively, as a compiler suggests them; empty when none is close."""
    by_lower: dict[str, str] = {}
    for name in names:
        by_lower.setdefault(name.lower(), name)
    close = difflib.get_close_matches(given.lower(), list(by_lower), n=count, cutoff=0.6)
    if not close:
        return ""
    first, *others = (f"`{by_lower[name]}`" for name in close)
    return f"; did you mean {first}" + (f" (or {', '.join(others)})" if others else "") + "?"


def nearest_name(given: str, names: Iterable[str]) -> str | None:
    """The one name ``did_you_mean`` would suggest first, or None."""
    by_lower = {name.lower(): name for name in names}
    close = difflib.get_close_matches(given.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def edit_distance(first: str, second: str, limit: int = 3) -> int:
    """The Levenshtein distance between two short names (insertions, deletions, substitutions), capped at ``limit``:
    "aksgpu" is 1 from "aks-gpu", "azure-native" far."""
    if abs(len(first) - len(second)) >= limit:
        return limit
    previous = list(range(len(second) + 1))
    for row, char in enumerate(first, 1):
        current = [row]
        for column, other in enumerate(second, 1):
            current.append(min(previous[column] + 1, current[column - 1] + 1, previous[column - 1] + (char != other)))
        previous = current
    return min(previous[-1], limit)


@dataclass(frozen=True)
class Problem:
    """One finding about a stack file, addressed by the key path a user would edit.

    ``follows`` is the key path of the problem this one follows from (a MIG profile that cannot be checked because the
    vmSize is a typo): where that key has an error of its own, the cause is reported once, and this one not
    (``causes_once``)."""

    path: str
    message: str
    severity: Severity = "error"
    follows: str | None = None
    # An encrypted value's default stands in for it offline (``aks_gpu.config.loader.read_config``): what the stack
    # would build from the value cannot be shown, so ``aksgpu plan`` refuses to present the default as the stack's.
    stand_in: bool = False

    def render(self, source: str) -> str:
        where = f"{clipped(source, MAX_PATH_SHOWN)}: {clipped(self.path, MAX_PATH_SHOWN)}"
        return f"{where}: {clipped(self.message, MAX_MESSAGE_SHOWN)}"


class ConfigError(Exception):
    """The stack config is invalid; ``problems`` holds one entry per problem, errors first."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(p.render(source) for p in problems))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


def causes_once(problems: list[Problem]) -> list[Problem]:
    """The problems without those that only follow from another key's error: one typo, one error."""
    errors = {problem.path for problem in problems if problem.severity == "error" and problem.follows is None}
    return [problem for problem in problems if problem.follows is None or problem.follows not in errors]
