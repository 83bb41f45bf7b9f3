"""docs/runbooks.md: one section per alert that any stack of stacks/ defines, the page each alert's ``runbook_url``
points to. Regenerate it with ``PYTHONPATH=$PWD python -m tests.monitoring.runbooks``; the tests hold the page to
the rules."""

from __future__ import annotations

from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.monitoring.rules import AlertRule, rule_groups
from tests.conftest import PROJECT_DIR, STACK_NAMES, stack_model

RUNBOOKS = PROJECT_DIR / "docs" / "runbooks.md"


def every_alert() -> dict[str, AlertRule]:
    """Each alert of every stack, once (a per-pool alert by its first pool), in the order the rules define them."""
    alerts: dict[str, AlertRule] = {}
    for stack in STACK_NAMES:
        for group in rule_groups(stack_model(stack), critical_xid_codes()):
            for rule in group.rules:
                alerts.setdefault(rule.alert, rule)
    return alerts


def runbooks_markdown() -> str:
    lines = [
        "# Alert runbooks",
        "",
        "What each alert of `aksgpu rules` (and the stack's monitoring) means and what to do; each alert's",
        "`runbook_url` annotation points to its section. The summary is the alert's one-line `summary` annotation",
        "(`{{ $labels.node }}` and the like are filled in when it fires). Generated from",
        "`components/aks_gpu/monitoring/rules.py` by `tests/monitoring/runbooks.py`.",
        "",
    ]
    for name, rule in every_alert().items():
        lines += [
            f"## {name}",
            "",
            f"Severity `{rule.severity}`, firing "
            + (
                f"after {rule.for_minutes} minute(s) of the condition." if rule.for_minutes else "as soon as the condition holds."
            ),
            "",
            f"- **Summary**: {rule.summary}",
            f"- **What to do**: {rule.runbook}",
            f"- **Reads**: {rule.source} (`{'`, `'.join(rule.metrics)}`)",
            "",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    RUNBOOKS.write_text(runbooks_markdown(), encoding="utf-8")
