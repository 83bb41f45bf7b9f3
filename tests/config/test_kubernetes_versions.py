"""The Kubernetes version against the AKS release calendar (components/aks_gpu/data/aks_versions.yaml), on fixed days."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from aks_gpu.aks_facts import kubernetes_calendar, minor_key
from aks_gpu.config.models import ClusterConfig
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import STACK_NAMES, minimal_raw, raw_stack

SOURCE = "stacks/Pulumi.test.yaml"
KEY = "aks-gpu:cluster.kubernetesVersion"
CALENDAR = kubernetes_calendar()
READ_ON = CALENDAR.read_on


def cluster(**fields: Any) -> dict[str, Any]:
    return minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg-test", "name": "aks-test", **fields}})


def problems_on(day: dt.date, **fields: Any) -> tuple[list[str], list[str]]:
    """(errors, warnings) at the version key on ``day``."""
    try:
        validated = validate_stack(cluster(**fields), SOURCE, today=day)
    except ConfigError as caught:
        errors = [p.message for p in caught.errors if p.path == KEY and p.severity == "error"]
        warnings = [p.message for p in caught.problems if p.path == KEY and p.severity == "warning"]
        return errors, warnings
    return [], [p.message for p in validated.warnings if p.path == KEY]


def test_the_calendar_names_its_source_and_the_day_it_was_read() -> None:
    assert CALENDAR.source.startswith("https://learn.microsoft.com/azure/aks/supported-kubernetes-versions")
    assert dt.date(2026, 12, 1) == READ_ON
    for version in CALENDAR.versions.values():
        assert version.ga < version.end_of_life < version.lts_end_of_life, version.minor
    minors = sorted(CALENDAR.versions, key=minor_key)
    assert minors == list(CALENDAR.versions), "keep the calendar in version order"


def test_the_default_is_a_supported_ga_version_with_room_to_spare() -> None:
    assert ClusterConfig.model_fields["kubernetes_version"].default == CALENDAR.default
    default = CALENDAR.versions[CALENDAR.default]
    assert default.ga <= READ_ON and (default.end_of_life - READ_ON).days > CALENDAR.warn_days
    assert problems_on(READ_ON) == ([], [])


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_shipped_stack_runs_a_supported_version(stack: str) -> None:
    version = raw_stack(stack)["aks-gpu:cluster"].get("kubernetesVersion", CALENDAR.default)
    assert ".".join(version.split(".")[:2]) in CALENDAR.supported(READ_ON)


def test_a_version_past_end_of_life_is_refused_with_what_to_use_instead() -> None:
    # 1.33: end of life Jul 2026 (supported-kubernetes-versions calendar).
    [error], _ = problems_on(READ_ON, kubernetesVersion="1.33")
    assert "reached end of life on AKS on 2026-07-31" in error and "supported on 2026-12-01: 1.35, 1.36, 1.37" in error
    assert "[refusal kubernetes-version-end-of-life]" in error
    # A patch version is judged by its minor.
    assert problems_on(READ_ON, kubernetesVersion="1.34.5")[0]


def test_end_of_life_is_the_last_day_of_the_month() -> None:
    assert problems_on(dt.date(2026, 11, 30), kubernetesVersion="1.34")[0] == []
    assert problems_on(dt.date(2026, 12, 1), kubernetesVersion="1.34")[0] != []


def test_long_term_support_on_premium_keeps_an_old_minor() -> None:
    lts = {"skuTier": "Premium", "supportPlan": "AKSLongTermSupport"}
    assert problems_on(READ_ON, kubernetesVersion="1.33", **lts) == ([], [])
    # LTS for 1.31 ended Nov 2026.
    [error], _ = problems_on(READ_ON, kubernetesVersion="1.31", **lts)
    assert "long-term support for 1.31 ended on 2026-11-30" in error


def test_long_term_support_needs_premium() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_stack(cluster(kubernetesVersion="1.33", supportPlan="AKSLongTermSupport"), SOURCE, today=READ_ON)
    paths = {p.path for p in caught.value.errors}
    # The tier is refused, and without LTS the version is past end of life too.
    assert {"aks-gpu:cluster.supportPlan", KEY} <= paths


def test_a_warning_within_sixty_days_of_end_of_life_and_none_before() -> None:
    eol = CALENDAR.versions["1.35"].end_of_life  # 2027-03-31
    errors, [warning] = problems_on(eol - dt.timedelta(days=60), kubernetesVersion="1.35")
    assert errors == [] and "leaves AKS support on 2027-03-31, in 60 days" in warning
    assert problems_on(eol - dt.timedelta(days=61), kubernetesVersion="1.35") == ([], [])


def test_a_version_before_its_aks_ga_is_a_warning() -> None:
    errors, [warning] = problems_on(dt.date(2026, 9, 15), kubernetesVersion="1.37")
    assert errors == [] and "not GA on AKS until 2026-10-01" in warning


def test_a_minor_the_calendar_does_not_list_is_refused() -> None:
    [error], _ = problems_on(READ_ON, kubernetesVersion="1.38")
    assert "not in the AKS release calendar data" in error and "read 2026-12-01" in error
    assert problems_on(READ_ON, kubernetesVersion="1.25")[0]


def test_an_adopted_cluster_is_not_judged_by_a_version_it_does_not_set() -> None:
    assert problems_on(READ_ON, kubernetesVersion="1.33", existing=True) == ([], [])


def test_the_loader_uses_the_real_date_when_none_is_given() -> None:
    # Past end of life on any day after 2025: refused without passing a date.
    with pytest.raises(ConfigError):
        validate_stack(cluster(kubernetesVersion="1.30"), SOURCE)


@pytest.mark.parametrize(
    ("version", "refused", "warned"),
    [
        ("1.36", False, False),  # AKS picks the newest patch
        ("1.36.2", False, False),  # the newest the release notes announced
        ("1.36.3", True, False),  # not announced
        ("1.36.0", False, True),  # older: AKS removes old patches
        ("1.35.6", False, False),
        ("1.35.10", True, False),  # compared as numbers, not text
    ],
)
def test_patch_versions_as_aks_announces_them(version: str, refused: bool, warned: bool) -> None:
    errors, warnings = problems_on(READ_ON, kubernetesVersion=version)
    assert any("kubernetes-patch-not-offered" in e for e in errors) is refused, errors
    assert any("AKS removes old patches" in w for w in warnings) is warned, warnings


def test_a_minor_without_announced_patches_is_not_checked_at_the_patch_level() -> None:
    minor = next(v for v in CALENDAR.versions.values() if v.latest_patch is None and v.minor >= "1.37")
    errors, warnings = problems_on(minor.ga, kubernetesVersion=f"{minor.minor}.99")
    assert not any("patch" in message for message in errors + warnings)


def test_a_version_without_mutating_admission_policies_says_the_device_void_policy_is_not_deployed() -> None:
    # On READ_ON both 1.35 and 1.36 are supported; 1.35 serves MutatingAdmissionPolicy only as a beta off by default.
    def warnings(version: str) -> list[str]:
        validated = validate_stack(cluster(kubernetesVersion=version), SOURCE, today=READ_ON)
        return [p.message for p in validated.warnings if p.path == "aks-gpu:admission"]

    assert [w for w in warnings("1.35") if "aks-gpu-device-void is not deployed" in w]
    assert warnings("1.36") == []
