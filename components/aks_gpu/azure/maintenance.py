"""Planned-maintenance windows in the shape the AKS MaintenanceConfiguration API takes. Pure."""

from __future__ import annotations

from typing import Any

from aks_gpu.config.models import MaintenanceWindow

# The AKS-managed configuration names: the only two that govern auto-upgrade and node OS upgrade.
# https://learn.microsoft.com/azure/aks/planned-maintenance#schedule-configuration-types
NODE_OS_CONFIG_NAME = "aksManagedNodeOSUpgradeSchedule"
AUTO_UPGRADE_CONFIG_NAME = "aksManagedAutoUpgradeSchedule"


def schedule_args(window: MaintenanceWindow) -> dict[str, Any]:
    if window.schedule == "daily":
        return {"daily": {"interval_days": window.interval_days}}
    if window.schedule == "absoluteMonthly":
        return {"absolute_monthly": {"day_of_month": window.day_of_month, "interval_months": window.interval_months}}
    if window.schedule == "relativeMonthly":
        return {
            "relative_monthly": {
                "day_of_week": window.day_of_week,
                "interval_months": window.interval_months,
                "week_index": window.week_index,
            }
        }
    return {"weekly": {"day_of_week": window.day_of_week, "interval_weeks": window.interval_weeks}}


def maintenance_window_args(window: MaintenanceWindow) -> dict[str, Any]:
    args: dict[str, Any] = {
        "schedule": schedule_args(window),
        "duration_hours": window.duration_hours,
        "start_time": window.start_time,
        "utc_offset": window.utc_offset,
    }
    if window.start_date:
        args["start_date"] = window.start_date
    if window.not_allowed_dates:
        args["not_allowed_dates"] = [{"start": d.start, "end": d.end} for d in window.not_allowed_dates]
    return args
