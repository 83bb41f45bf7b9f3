"""The URNs of every shipped stack, committed: a change to one is a resource replaced (for a GPU pool, every node
drained), so ``tests/test_urns.py`` fails on any URN that changes without an alias.

- ``<stack>.txt``: the URNs the program registers today, one per line, sorted.
- ``<stack>.retired.txt``: URNs of earlier releases (a stack deployed then still has them in its state). Each must
  be taken over by exactly one of today's resources through its aliases, as the engine resolves them.

After a deliberate change (a new resource; a rename that carries its alias), rewrite the lists with
``python -m tests.urns`` and commit them with the change; move the URNs a rename replaces into ``<stack>.retired.txt``
by hand, so the aliases stay proven.
"""

from __future__ import annotations

from pathlib import Path

URN_DIR = Path(__file__).resolve().parent


def current_file(stack: str) -> Path:
    return URN_DIR / f"{stack}.txt"


def retired_file(stack: str) -> Path:
    return URN_DIR / f"{stack}.retired.txt"


def read_urns(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]


def write_current(stack: str, urns: list[str]) -> Path:
    path = current_file(stack)
    path.write_text("".join(f"{urn}\n" for urn in sorted(urns)), encoding="utf-8")
    return path


def main() -> int:
    from tests.conftest import STACK_NAMES, planned_result

    for stack in STACK_NAMES:
        print(f"wrote {write_current(stack, [r.urn for r in planned_result(stack).resources])}")
    return 0
