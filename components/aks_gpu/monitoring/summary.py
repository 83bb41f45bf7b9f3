"""The monitoring part of ``aksgpu plan``'s summary. Pure."""

from __future__ import annotations

from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.monitoring.exporters import monitoring_summary
from aks_gpu.monitoring.rules import rule_groups
from aks_gpu.resolved.model import PlatformModel


def monitoring_lines(model: PlatformModel) -> list[str]:
    counts = {group.name: len(group.rules) for group in rule_groups(model, critical_xid_codes())}
    return monitoring_summary(model, counts)
