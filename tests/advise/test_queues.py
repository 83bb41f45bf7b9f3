"""``aksgpu advise --stack`` on a queueing stack: a team whose nominal GPUs idled through the window while another team
of its type borrowed, read from Kueue's ClusterQueue gauges (kueue_cluster_queue_resource_usage and _nominal_quota,
labelled as sigs.k8s.io/kueue@v0.17.0 pkg/metrics/metrics.go labels them)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.advise.metrics import KUEUE_NOMINAL_METRIC, KUEUE_USAGE_METRIC
from aks_gpu.advise.queues import Team, queue_advice
from aks_gpu.advise.series import parse_query_range
from aks_gpu.advise.sources import TOKEN_ENV
from aks_gpu.cli import main
from tests.advise.histories import START, STEP, query_range
from tests.advise.test_live import TOKEN, fixture_answers, prometheus
from tests.conftest import FIXTURES_DIR, PROJECT_DIR

DCGM = FIXTURES_DIR / "advise" / "dcgm"
GPU = "nvidia.com/gpu"
STEPS = 288  # a day of 5-minute samples
# The teams stack's workloads (stacks/Pulumi.teams.yaml).
TEAMS = [
    Team("research", "training", 16, None),
    Team("vision", "training", 16, 12),
    Team("serving", "inference", 3, None),
]


def gauge(metric: str, queue: str, cohort: str, flavor: str, value: Callable[[int], float]) -> dict[str, Any]:
    labels = {
        "__name__": metric,
        "cohort": cohort,
        "cluster_queue": queue,
        "flavor": flavor,
        "resource": GPU,
        "replica_role": "leader",
        "instance": "10.224.0.40:8443",
        "job": "kueue-controller-manager",
    }
    return {"metric": labels, "values": [[START + n * STEP, str(value(n))] for n in range(STEPS)]}


def constant(value: float) -> Callable[[int], float]:
    return lambda step: value


def responses(used: Mapping[str, Callable[[int], float]], nominal: Mapping[str, float]) -> dict[str, str]:
    cohort = {team.namespace: team.type for team in TEAMS}
    flavor = {"training": "train", "inference": "infer"}
    return {
        KUEUE_USAGE_METRIC: query_range([gauge(KUEUE_USAGE_METRIC, q, cohort[q], flavor[cohort[q]], f) for q, f in used.items()]),
        KUEUE_NOMINAL_METRIC: query_range(
            [gauge(KUEUE_NOMINAL_METRIC, q, cohort[q], flavor[cohort[q]], constant(v)) for q, v in nominal.items()]
        ),
    }


def advice_of(documents: dict[str, str], teams: Sequence[Team] = TEAMS) -> Any:
    series = {name: parse_query_range(name, text) for name, text in documents.items()}
    return queue_advice(series, teams)


NOMINAL = {"research": 16, "vision": 16, "serving": 3}


def test_a_team_idle_below_its_nominal_while_the_other_borrows_is_told_to_lower_its_quota() -> None:
    # research never used more than 6 of its 16; vision ran at 24 (8 borrowed) half the day.
    used = {"research": lambda n: 6 if n % 3 else 2, "vision": lambda n: 24 if n < STEPS // 2 else 16, "serving": lambda n: 1}
    (advice,) = advice_of(responses(used, NOMINAL))

    assert (advice.namespace, advice.flavor, advice.nominal, advice.peak_used, advice.idle) == ("research", "train", 16, 6, 10)
    assert [(b.namespace, b.peak_borrowed) for b in advice.borrowers] == [("vision", 8)]
    # research lends all its quota already: the advice is its quota, not its lendingLimit.
    assert (advice.suggested_gpu_quota, advice.suggested_lending_limit) == (6, None)
    assert "lower its gpuQuota from 16 to 6" in advice.text() and "vision borrowed up to 8" in advice.text()


def test_a_lending_limit_that_holds_the_idle_gpus_back_is_told_to_rise() -> None:
    used = {"research": lambda n: 26, "vision": lambda n: 2, "serving": lambda n: 3}
    (advice,) = advice_of(responses(used, NOMINAL))

    assert (advice.namespace, advice.idle, advice.lending_limit) == ("vision", 14, 12)
    assert (advice.suggested_gpu_quota, advice.suggested_lending_limit) == (2, 14)
    assert "raise its lendingLimit from 12 to 14" in advice.text()


def test_no_advice_when_nobody_borrows_or_the_idle_team_has_no_peer_of_its_type() -> None:
    # Both training teams under their quota; serving idle, but no other inference team could have used its GPUs.
    used = {"research": lambda n: 10, "vision": lambda n: 4, "serving": lambda n: 0}
    assert advice_of(responses(used, NOMINAL)) == ()


def test_a_team_that_used_its_whole_nominal_quota_at_some_time_is_not_idle() -> None:
    used = {"research": lambda n: 16 if n == 100 else 3, "vision": lambda n: 24, "serving": lambda n: 0}
    assert advice_of(responses(used, NOMINAL)) == ()


def test_a_queue_without_usage_series_is_not_judged_idle() -> None:
    # Kueue reported research's nominal quota but no usage: no evidence it idled.
    used = {"vision": lambda n: 24, "serving": lambda n: 0}
    assert advice_of(responses(used, NOMINAL)) == ()


def advise_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    main(["advise", *argv, "--json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_the_cli_reads_kueues_gauges_with_a_queueing_stack_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "metrics"
    shutil.copytree(DCGM, folder)
    used = {"research": lambda n: 4, "vision": lambda n: 20, "serving": lambda n: 1}
    for name, text in responses(used, NOMINAL).items():
        (folder / f"{name}.json").write_text(text, encoding="utf-8")
    project = ["--project-dir", str(PROJECT_DIR)]

    document = advise_json(capsys, "--metrics", str(folder), "--stack", "teams", *project)
    (row,) = document["queueAdvice"]
    assert row == {
        "namespace": "research",
        "workloadType": "training",
        "flavor": "train",
        "resource": GPU,
        "nominalGpus": 16,
        "peakUsedGpus": 4,
        "idleGpus": 12,
        "borrowers": [{"namespace": "vision", "peakBorrowedGpus": 4}],
        "gpuQuota": 16,
        "lendingLimit": None,
        "suggestedGpuQuota": 4,
        "suggestedLendingLimit": None,
        "why": row["why"],
    }
    assert row["why"].startswith("research used at most 4 of its 16 nominal nvidia.com/gpu on flavor train")
    # A stack without queueing, or no stack: the gauges are not read.
    assert advise_json(capsys, "--metrics", str(folder), "--stack", "prod", *project)["queueAdvice"] == []
    assert advise_json(capsys, "--metrics", str(folder))["queueAdvice"] == []

    main(["advise", "--metrics", str(folder), "--stack", "teams", *project])
    assert "lower its gpuQuota from 16 to 4" in " ".join(capsys.readouterr().out.split())


def test_a_live_prometheus_is_asked_for_kueues_gauges_with_a_queueing_stack(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    used = {"research": lambda n: 4, "vision": lambda n: 20, "serving": lambda n: 1}
    gauges = responses(used, NOMINAL)

    def answer(handler: BaseHTTPRequestHandler) -> None:
        query = handler.path.split("query=", 1)[1].split("&", 1)[0]
        if query in gauges:
            body = gauges[query].encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        else:
            fixture_answers(handler)

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    project = ["--project-dir", str(PROJECT_DIR)]
    with prometheus(answer) as server:
        document = advise_json(capsys, "--prometheus", server.url, "--since", "3h", "--stack", "teams", *project)
        asked = {request["path"].split("query=", 1)[1].split("&", 1)[0] for request in server.requests}
    assert [(row["namespace"], row["suggestedGpuQuota"]) for row in document["queueAdvice"]] == [("research", 4)]
    assert {KUEUE_USAGE_METRIC, KUEUE_NOMINAL_METRIC} <= asked
    # Without a queueing stack Prometheus is not asked for them.
    with prometheus(answer) as server:
        advise_json(capsys, "--prometheus", server.url, "--since", "3h")
        asked = {request["path"].split("query=", 1)[1].split("&", 1)[0] for request in server.requests}
    assert not asked & {KUEUE_USAGE_METRIC, KUEUE_NOMINAL_METRIC}
