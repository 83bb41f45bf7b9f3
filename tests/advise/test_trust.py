"""What the advice trusts (issue 42): enough history before a workload is resized, samples no GPU can report dropped and
counted, the pods of a Job read as the Job's, the exporter's own pod never a workload, GPUs no pod held reported as
idle capacity of their pool, MIG profiles that free nothing never advised, and the exit status saying "GPUs freed" only
when some are."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.advise.recommend import HEADROOM, Advice, NodeFacts, Pricing, advise, profile_memory_mib
from aks_gpu.advise.series import AdviceInputError, parse_query_range
from aks_gpu.advise.usage import (
    ACTIVITY_OUT_OF_RANGE,
    MEMORY_ABOVE_TOTAL,
    SENTINEL,
    SUMMARY_HISTORY,
    owner_of_pod,
    read_usage,
)
from aks_gpu.audit.prices import load_prices
from aks_gpu.catalog import load_catalog
from aks_gpu.cli import main
from tests.advise.histories import Gpu, dcgm_responses, query_range
from tests.conftest import FIXTURES_DIR

DAY = 288  # 5-minute steps
WEEK = 7 * DAY
A100 = "NVIDIA A100 80GB PCIe"
# Standard_NC24ads_A100_v4 (one A100 80GB) a month at the eastus table's list price (components/aks_gpu/data/gpu_prices.yaml).
A100_MONTH = load_prices().monthly("eastus", "Standard_NC24ads_A100_v4")[0]  # type: ignore[index]
DCGM = FIXTURES_DIR / "advise" / "dcgm"


def gpu(
    n: int,
    pod: str | None,
    memory: Callable[[int], float] = lambda step: 3000.0,
    activity: Callable[[int], float] = lambda step: 0.05,
) -> Gpu:
    return Gpu(
        f"aks-infer-31245367-vmss00000{n}",
        0,
        model_name=A100,
        pod=("team", pod, "main") if pod else None,
        memory=memory,
        activity=activity,
    )


def series_of(responses: dict[str, str], keep: Callable[[str | None, int], bool] | None = None) -> dict[str, Any]:
    """The parsed series, with only the samples ``keep(pod, step)`` keeps (a pod's samples lost, or not yet there)."""
    if keep is not None:
        for metric, text in list(responses.items()):
            document = json.loads(text)
            for entry in document["data"]["result"]:
                pod = entry["metric"].get("pod")
                entry["values"] = [value for n, value in enumerate(entry["values"]) if keep(pod, n)]
            responses[metric] = json.dumps(document)
    return {metric: parse_query_range(metric, text) for metric, text in responses.items()}


def advice_on(series: dict[str, Any], pools: dict[str, NodeFacts] | None = None, **options: Any) -> Advice:
    catalog = load_catalog()
    return advise(read_usage(series, catalog, **options), Pricing(prices=load_prices(), catalog=catalog, pools=pools or {}))


def not_evaluated(advice: Advice) -> dict[str, str]:
    return {entry.what: entry.why for entry in advice.usage.not_evaluated}


# --- history -------------------------------------------------------------------------------------------------------


def test_a_service_deployed_100_minutes_ago_is_not_resized() -> None:
    # A week of an old service, and a new one whose first sample is 100 minutes before the window's end.
    responses = dcgm_responses([gpu(0, "old-7d9c5b6f4-x2k9p"), gpu(1, "new-58dd9c4bf-q8zt4")], WEEK)
    advice = advice_on(series_of(responses, lambda pod, n: pod != "new-58dd9c4bf-q8zt4" or n >= WEEK - 20))
    assert [one.usage.pod for one in advice.recommendations] == ["old-7d9c5b6f4-x2k9p"]
    why = not_evaluated(advice)["team/new-58dd9c4bf-q8zt4"]
    assert "too little history: 1 h 40 min observed" in why and "needs 1 d" in why


def test_a_day_of_history_is_enough_and_a_day_less_a_step_is_not() -> None:
    advice = advice_on(series_of(dcgm_responses([gpu(0, "app-7d9c5b6f4-x2k9p")], DAY)))
    assert [one.recommend for one in advice.recommendations] == ["mig"]
    advice = advice_on(series_of(dcgm_responses([gpu(0, "app-7d9c5b6f4-x2k9p")], DAY - 1)))
    assert not advice.recommendations and "too little history" in not_evaluated(advice)["team/app-7d9c5b6f4-x2k9p"]


def test_a_pod_started_two_days_ago_is_judged_on_its_own_life_not_the_week() -> None:
    responses = dcgm_responses([gpu(0, "old-7d9c5b6f4-x2k9p"), gpu(1, "young-58dd9c4bf-q8zt4")], WEEK)
    advice = advice_on(series_of(responses, lambda pod, n: pod != "young-58dd9c4bf-q8zt4" or n >= WEEK - 2 * DAY))
    young = next(one for one in advice.recommendations if one.usage.pod == "young-58dd9c4bf-q8zt4")
    assert young.usage.span == 2 * 86_400 and young.usage.share == 1.0


@pytest.mark.parametrize(("kept", "evaluated"), [(2, False), (3, True)])
def test_a_history_mostly_missing_is_not_evaluated(kept: int, evaluated: bool) -> None:
    # Two days, samples for 2 of every 5 steps (40%): below the half the rule needs; 3 of 5 (60%) is enough.
    responses = dcgm_responses([gpu(0, "app-7d9c5b6f4-x2k9p")], 2 * DAY)
    advice = advice_on(series_of(responses, lambda pod, n: n % 5 < kept or n == 2 * DAY - 1))
    assert bool(advice.recommendations) is evaluated
    if not evaluated:
        assert "samples for 40% of the 2 d observed" in not_evaluated(advice)["team/app-7d9c5b6f4-x2k9p"]


def test_daily_summaries_need_two_days() -> None:
    from aks_gpu.advise.sources import summarised

    exporters = summarised()

    def summaries(days: int) -> dict[str, Any]:
        series: dict[str, Any] = {}
        for exporter in exporters:
            if exporter.vendor != "nvidia":
                continue
            for metric in exporter.metric_names:
                value = "3000" if "FB_USED" in metric else "0.05"
                labels = {"__name__": metric, "UUID": "GPU-1", "modelName": A100, "Hostname": "aks-infer-31245367-vmss000000"}
                entry = {
                    "metric": labels | {"namespace": "team", "pod": "app-7d9c5b6f4-x2k9p"},
                    "values": [[1_764_547_200 + day * 86_400, value] for day in range(days)],
                }
                series[metric] = parse_query_range(metric, query_range([entry]))
        return series

    assert not advice_on(summaries(1), exporters=exporters, history=SUMMARY_HISTORY).recommendations
    assert advice_on(summaries(2), exporters=exporters, history=SUMMARY_HISTORY).recommendations


# --- impossible samples --------------------------------------------------------------------------------------------


def test_impossible_samples_are_dropped_and_counted() -> None:
    # A small workload whose exporter reported, now and then, what no A100 80GB can: 4294967295 MiB, DCGM's int32 blank,
    # 90,000 MiB (above its 81,920), and activity of 1.5 and -0.2.
    odd_memory = {10: 4294967295.0, 20: float(0x7FFFFFF0), 30: 90_000.0}
    odd_activity = {40: 1.5, 50: -0.2, 60: 140737488355328.0}
    workload = gpu(
        0,
        "app-7d9c5b6f4-x2k9p",
        memory=lambda n: odd_memory.get(n, 3000.0),
        activity=lambda n: odd_activity.get(n, 0.05),
    )
    (recommendation,) = advice_on(series_of(dcgm_responses([workload], DAY))).recommendations
    usage = recommendation.usage
    assert usage.peak_memory_mib == 3000 and usage.peak_activity == pytest.approx(0.05)
    assert (recommendation.recommend, recommendation.profile) == ("mig", "1g.10gb")
    assert usage.dropped == {SENTINEL: 3, MEMORY_ABOVE_TOTAL: 1, ACTIVITY_OUT_OF_RANGE: 2}
    assert usage.samples == DAY - 3  # memory's count (the fewer), per GPU


def test_memory_at_the_gpus_total_is_kept() -> None:
    full = gpu(0, "big-7d9c5b6f4-x2k9p", memory=lambda n: 81_920.0, activity=lambda n: 0.9)
    (recommendation,) = advice_on(series_of(dcgm_responses([full], DAY))).recommendations
    assert recommendation.usage.peak_memory_mib == 81_920 and recommendation.usage.dropped == {}


# --- owners --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "owner"),
    [
        ("eval-run-42-x7k2p", "eval-run-42"),  # a Job whose name ends in a short segment
        ("finetune-7b-q8zt4", "finetune-7b"),
        ("nightly-2024-x7k2p", "nightly-2024"),  # digits the hash alphabet has no place for (0, 2)
        ("llm-7d9c5b6f4-x2k9p", "llm"),  # a Deployment's pod: a 9-character pod-template-hash
        ("api-5c8f974db6-x2k9p", "api"),
    ],
)
def test_a_jobs_pods_belong_to_the_job(pod: str, owner: str) -> None:
    assert owner_of_pod(pod) == owner


def _owner_series(*owners: tuple[str, str, str]) -> Any:
    result = [
        {"metric": {"namespace": "team", "pod": pod, "owner_kind": kind, "owner_name": name}, "values": [[0, "1"]]}
        for pod, kind, name in owners
    ]
    return parse_query_range("kube_pod_owner", query_range(result))


def test_kube_pod_owner_is_preferred_to_the_pods_name() -> None:
    series = series_of(dcgm_responses([gpu(0, "train-58dd9c4bf-x7k2p")], DAY))
    series["kube_pod_owner"] = _owner_series(("train-58dd9c4bf-x7k2p", "Job", "train-58dd9c4bf"))
    (recommendation,) = advice_on(series).recommendations
    assert (recommendation.usage.owner_kind, recommendation.usage.owner) == ("Job", "train-58dd9c4bf")


def test_a_file_where_every_pod_label_is_the_exporters_own_is_an_error() -> None:
    # Scraped with honor_labels false and no GPU mapped to a pod: every series carries only the target's pod.
    responses = dcgm_responses([gpu(0, None), gpu(1, None)], DAY, exported=True)
    with pytest.raises(AdviceInputError, match="no series carries a workload's pod label"):
        read_usage(series_of(responses), load_catalog())


def test_a_daemonsets_pod_is_never_the_workload() -> None:
    # An exporter of another name, known as a DaemonSet's pod from kube_pod_owner; the scrape kept its pod label.
    responses = dcgm_responses([gpu(0, "gpu-agent-x7k2p"), gpu(1, "app-7d9c5b6f4-x2k9p")], DAY)
    series = series_of(responses)
    series["kube_pod_owner"] = _owner_series(("gpu-agent-x7k2p", "DaemonSet", "gpu-agent"))
    advice = advice_on(series)
    assert [one.usage.pod for one in advice.recommendations] == ["app-7d9c5b6f4-x2k9p"]
    assert [(idle.gpu_model, idle.gpus) for idle in advice.idle_capacity] == [("A100-80GB", 1)]


def test_the_cli_says_so_with_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for metric, text in dcgm_responses([gpu(0, None)], DAY, exported=True).items():
        (tmp_path / f"{metric}.json").write_text(text, encoding="utf-8")
    assert main(["advise", "--metrics", str(tmp_path)]) == 2
    assert "no series carries a workload's pod label" in capsys.readouterr().err


# --- idle capacity -------------------------------------------------------------------------------------------------


def test_gpus_no_pod_held_are_idle_capacity_with_the_mincount_change_and_its_saving() -> None:
    # Four one-GPU nodes of pool infer: one busy, three idle all week, minCount 4 holding them.
    gpus: Sequence[Gpu] = [gpu(0, "app-7d9c5b6f4-x2k9p", activity=lambda n: 0.9, memory=lambda n: 70_000.0)] + [
        gpu(n, None) for n in (1, 2, 3)
    ]
    pools = {"infer": NodeFacts("infer", "Standard_NC24ads_A100_v4", "eastus", min_count=4)}
    advice = advice_on(series_of(dcgm_responses(gpus, DAY)), pools=pools)
    (idle,) = advice.idle_capacity
    assert (idle.pool, idle.gpus, idle.nodes, idle.nodes_seen, idle.min_count, idle.min_count_after) == ("infer", 3, 3, 4, 4, 1)
    assert idle.monthly_saving == pytest.approx(3 * A100_MONTH, abs=0.01)
    assert not advice.usage.not_evaluated  # reported as capacity, not only "not evaluated"
    assert advice.frees_capacity


def test_the_html_page_shows_the_idle_capacity_and_why_savings_are_unpriced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "advice.html"
    main(["advise", "--metrics", str(DCGM), "--html", str(page)])
    capsys.readouterr()
    text = page.read_text(encoding="utf-8")
    assert 'id="idle-capacity"' in text and "1 A100-80GB GPU(s) no pod held in the window" in text
    assert 'id="unpriced"' in text and "VM size and region of aks-infer-31245367-vmss000002 not known" in text


def test_idle_capacity_without_prices_says_why() -> None:
    # southeastus: not one of the regions the price table's recording priced.
    pools = {"infer": NodeFacts("infer", "Standard_NC24ads_A100_v4", "southeastus", min_count=0)}
    gpus = [gpu(0, "app-7d9c5b6f4-x2k9p", activity=lambda n: 0.9, memory=lambda n: 70_000.0), gpu(1, None)]
    (idle,) = advice_on(series_of(dcgm_responses(gpus, DAY)), pools=pools).idle_capacity
    assert idle.monthly_saving is None
    assert idle.unpriced == "unpriced: Standard_NC24ads_A100_v4 in southeastus"
    assert idle.min_count_after is None  # minCount 0 does not hold the idle node


# --- MIG that frees nothing ----------------------------------------------------------------------------------------


def test_a_profile_with_one_instance_per_gpu_is_never_advised() -> None:
    # Compute for a little over 3 of 7 slices: only a 4g instance holds it, and one 4g fits a GPU: no MIG.
    needs_four = gpu(0, "app-7d9c5b6f4-x2k9p", activity=lambda n: 3 / 7 / (1 + HEADROOM) + 0.001)
    (recommendation,) = advice_on(series_of(dcgm_responses([needs_four], DAY))).recommendations
    assert recommendation.recommend != "mig"
    # Memory past the 3g.40gb (and so past every profile of two or more a GPU): no MIG either.
    big = gpu(0, "app-7d9c5b6f4-x2k9p", memory=lambda n: profile_memory_mib("3g.40gb") / (1 + HEADROOM) + 1)
    (recommendation,) = advice_on(series_of(dcgm_responses([big], DAY))).recommendations
    assert recommendation.recommend != "mig"


def test_exit_0_when_the_only_change_frees_no_gpu(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # One small service: a 1g.10gb instance holds it, but a MIG pool carrying it alone still takes a whole GPU.
    for metric, text in dcgm_responses([gpu(0, "app-7d9c5b6f4-x2k9p")], DAY).items():
        (tmp_path / f"{metric}.json").write_text(text, encoding="utf-8")
    assert main(["advise", "--metrics", str(tmp_path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    ((change,),) = [document["poolChanges"]]
    assert (change["recommend"], change["gpusNow"], change["gpusAfter"], change["gpusFreed"]) == ("mig", 1, 1, 0)
    assert "frees no GPU" in change["change"]


# --- pricing with the stack (item 9) -------------------------------------------------------------------------------


def test_advise_with_the_stack_never_asks_for_the_stack(capsys: pytest.CaptureFixture[str]) -> None:
    # The shipped stacks' prices: tests/advise/test_savings.py::test_the_shipped_stacks_price_their_pool_changes.
    code = main(["advise", "--metrics", str(DCGM), "--stack", "prod"])
    out = capsys.readouterr().out
    assert code == 1
    assert "name the stack" not in out and "--stack" not in out


def test_without_the_stack_the_note_names_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    main(["advise", "--metrics", str(DCGM)])
    out = capsys.readouterr().out
    assert (
        "VM size and region of aks-infer-31245367-vmss000002 not known (name the stack with --stack, or add kube_node_labels)"
        in out
    )
