"""aks-gpu:queueing: borrowing and lending only with the engine on, within what the teams of one workload type hold."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw

SOURCE = "stacks/Pulumi.test.yaml"
QUEUEING = {"aks-gpu:queueing": {"engine": "kueue"}}


POOLS = [
    {"name": kind[:5], "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": kind, "maxCount": 8}
    for kind in ("training", "inference")
]


def teams(*workloads: dict[str, Any], queueing: bool = True) -> dict[str, Any]:
    config = {"aks-gpu:gpuPools": POOLS, "aks-gpu:workloads": list(workloads)}
    return minimal_raw(**config, **(QUEUEING if queueing else {}))


def team(name: str, kind: str = "training", quota: int = 2, **limits: int) -> dict[str, Any]:
    return {"name": name, "type": kind, "gpuQuota": quota, **limits}


def errors_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_stack(raw, SOURCE)
    return [p.render(caught.value.source) for p in caught.value.errors]


@pytest.mark.parametrize("key", ["borrowingLimit", "lendingLimit"])
def test_limits_need_the_queueing_engine(key: str) -> None:
    [message] = errors_of(teams({**team("team-a"), key: 1}, team("team-b"), queueing=False))
    assert message.startswith(f"{SOURCE}: aks-gpu:workloads[0].{key}: needs aks-gpu:queueing")


def test_a_team_lends_only_its_own_gpus() -> None:
    [message] = errors_of(teams(team("team-a", quota=2, lendingLimit=3), team("team-b")))
    assert "aks-gpu:workloads[0].lendingLimit: 3 is more than the team's own gpuQuota 2" in message


def test_borrowing_more_than_the_type_lends_warns_and_other_types_do_not_count() -> None:
    raw = teams(
        team("team-a", borrowingLimit=3),
        team("team-b", quota=4, lendingLimit=1),
        team("serving", kind="inference", quota=8),
    )
    [warning] = [w for w in validate_stack(raw, SOURCE).warnings if "borrowingLimit" in w.path]
    assert warning.path == "aks-gpu:workloads[0].borrowingLimit"
    assert "lend 1 GPUs in all" in warning.message


def test_limits_within_the_cohort_pass_quietly() -> None:
    raw = teams(team("team-a", borrowingLimit=2, lendingLimit=1), team("team-b", quota=4, borrowingLimit=1))
    validated = validate_stack(raw, SOURCE)
    assert not [w for w in validated.warnings if "Limit" in w.path]
    assert validated.config.queueing is not None and validated.config.queueing.engine == "kueue"


def test_an_engine_other_than_kueue_is_refused() -> None:
    [message] = errors_of(minimal_raw(**{"aks-gpu:queueing": {"engine": "volcano"}}))
    assert "aks-gpu:queueing.engine" in message
