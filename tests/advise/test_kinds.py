"""What kind of workload the advice sizes (issue 42): services on their bursts and never time-sliced, distributed jobs
kept whole, workloads already on a MIG instance resized both ways, and each workload's duty cycle, with interactive
owners idle most of the week shared or released. Histories of a week at 5-minute steps, as Azure's managed Prometheus
stores the DCGM exporter's series."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.advise.recommend import HEADROOM, Advice, Pricing, advise, profile_memory_mib
from aks_gpu.advise.series import parse_query_range
from aks_gpu.advise.usage import read_usage
from aks_gpu.audit.prices import load_prices
from aks_gpu.catalog import load_catalog
from aks_gpu.cli import main
from tests.advise.histories import Gpu, dcgm_responses, query_range
from tests.advise.test_trust import A100, DAY, WEEK, series_of

HOUR = 12  # 5-minute steps
T4 = "Tesla T4"


def hour_of_day(n: int) -> int:
    return (n // HOUR) % 24


def weekday(n: int) -> int:
    return n // DAY % 7  # the window starts on Monday 2025-12-01


def on(
    host: int,
    pod: str,
    memory: Callable[[int], float] = lambda n: 3000.0,
    activity: Callable[[int], float] = lambda n: 0.05,
    *,
    model: str = A100,
    namespace: str = "team",
    extra: dict[str, str] | None = None,
) -> Gpu:
    return Gpu(
        f"aks-infer-31245367-vmss{host:06d}",
        0,
        model_name=model,
        pod=(namespace, pod, "main"),
        memory=memory,
        activity=activity,
        extra=extra or {},
    )


def owners(*pods: tuple[str, str, str], namespace: str = "team") -> Any:
    """kube-state-metrics' kube_pod_owner for (pod, owner kind, owner name)."""
    result = [
        {
            "metric": {"namespace": namespace, "pod": pod, "owner_kind": kind, "owner_name": name, "owner_is_controller": "true"},
            "values": [[1_764_547_200, "1"]],
        }
        for pod, kind, name in pods
    ]
    return parse_query_range("kube_pod_owner", query_range(result))


def advice_of(
    gpus: Sequence[Gpu],
    kinds: Sequence[tuple[str, str, str]] = (),
    *,
    steps: int = WEEK,
    keep: Callable[[str | None, int], bool] | None = None,
    serving: frozenset[str] = frozenset(),
) -> Advice:
    series = series_of(dcgm_responses(gpus, steps), keep)
    if kinds:
        series["kube_pod_owner"] = owners(*kinds)
    catalog = load_catalog()
    return advise(read_usage(series, catalog), Pricing(prices=load_prices(), catalog=catalog), serving)


def decided(advice: Advice) -> dict[str, tuple[str, str | None]]:
    return {one.usage.pod: (one.recommend, one.profile) for one in advice.recommendations}


# --- 2. services are sized on their bursts -------------------------------------------------------------------------


def rush_hour(n: int) -> float:
    """5% all day, 30% from 09:00 to 10:00 UTC: the burst is 1 hour in 24, under the p95 of the samples."""
    return 0.30 if hour_of_day(n) == 9 else 0.05


def test_a_service_is_sized_on_its_daily_burst_not_the_p95_of_its_samples() -> None:
    service = on(0, "chat-7d9c5b6f4-x2k9p", activity=rush_hour)
    (one,) = advice_of([service]).recommendations
    assert one.sized_as == "serving" and one.usage.kind == "Deployment"
    assert one.usage.p95_activity == pytest.approx(0.05)  # the p95 of the samples misses the rush hour
    assert one.usage.burst_activity == pytest.approx(0.30)
    # 30% + 20% is 2.5 of 7 slices: 3g.40gb, not the 1g.10gb the p95 would give (a service that slows at its peak)
    assert (one.recommend, one.profile) == ("mig", "3g.40gb")
    assert "bursts 30.0%" in one.why


def test_batch_work_of_the_same_shape_is_sized_on_its_p95() -> None:
    job = on(0, "nightly-x7k2p", activity=rush_hour)
    (one,) = advice_of([job], [("nightly-x7k2p", "Job", "nightly")]).recommendations
    assert one.sized_as == "batch" and (one.recommend, one.profile) == ("mig", "1g.10gb")


def test_a_single_burst_in_the_week_does_not_size_a_service() -> None:
    # One spike of 90% in the whole week (one hour in 168): the 99th percentile of the hourly peaks leaves it out.
    spike = on(0, "chat-7d9c5b6f4-x2k9p", activity=lambda n: 0.9 if n == 3 * DAY + 5 else 0.05)
    (one,) = advice_of([spike]).recommendations
    assert (one.recommend, one.profile) == ("mig", "1g.10gb")


def test_a_service_is_never_time_sliced() -> None:
    # A T4 has no MIG: four of these fit one by memory and compute, but a service is not time-sliced.
    (service,) = advice_of([on(0, "chat-7d9c5b6f4-x2k9p", model=T4, activity=lambda n: 0.1)]).recommendations
    assert service.recommend == "keep" and "is not time-sliced" in service.why
    (job,) = advice_of([on(0, "batch-x7k2p", model=T4, activity=lambda n: 0.1)]).recommendations
    assert job.recommend == "time-slicing"


def test_a_namespace_of_the_inference_type_serves() -> None:
    pods = [on(0, "batch-x7k2p", model=T4, activity=lambda n: 0.1, namespace="gpu-inference")]
    series = series_of(dcgm_responses(pods, WEEK))
    catalog = load_catalog()
    usage = read_usage(series, catalog)
    (typed,) = advise(usage, Pricing(prices=load_prices(), catalog=catalog), frozenset({"gpu-inference"})).recommendations
    (untyped,) = advise(usage, Pricing(prices=load_prices(), catalog=catalog)).recommendations
    assert (typed.sized_as, typed.recommend) == ("serving", "keep")
    assert (untyped.sized_as, untyped.recommend) == ("batch", "time-slicing")


def test_the_stack_names_its_inference_namespaces(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The prod stack's gpu-inference namespace is of type inference: a Job's pod there is a service to the advice.
    pods = [on(0, "batch-x7k2p", model=T4, activity=lambda n: 0.1, namespace="gpu-inference")]
    for metric, text in dcgm_responses(pods, WEEK).items():
        (tmp_path / f"{metric}.json").write_text(text, encoding="utf-8")
    main(["advise", "--metrics", str(tmp_path), "--stack", "prod", "--json"])
    (row,) = json.loads(capsys.readouterr().out)["recommendations"]
    assert (row["sizedAs"], row["recommend"]) == ("serving", "keep")


# --- 4. distributed jobs are kept whole ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["PyTorchJob", "MPIJob", "RayCluster", "LeaderWorkerSet"])
def test_a_distributed_jobs_pods_are_not_split(kind: str) -> None:
    pods = [on(n, f"train-worker-{n}") for n in range(2)]
    advice = advice_of(pods, [(f"train-worker-{n}", kind, "train") for n in range(2)])
    assert {one.recommend for one in advice.recommendations} == {"keep"}
    assert all(one.sized_as == "distributed" and "no GPU-to-GPU P2P" in one.why for one in advice.recommendations)


def test_pods_that_start_and_end_together_are_one_job() -> None:
    # An indexed Job of four ranks that ran from day 2 to day 5, all started and ended within a step of each other.
    ranks = [f"ddp-{n}-x7k2p" for n in range(4)]
    # ... and a service that ran all week (the window is the samples' first to last)
    pods = [on(n, pod) for n, pod in enumerate(ranks)] + [on(9, "web-7d9c5b6f4-x2k9p")]
    live = lambda pod, n: pod not in ranks or 2 * DAY + ranks.index(pod or "") % 2 <= n < 5 * DAY  # noqa: E731
    advice = advice_of(pods, [(pod, "Job", "ddp") for pod in ranks], keep=live)
    job = [one for one in advice.recommendations if one.usage.owner == "ddp"]
    assert len(job) == 4 and {one.recommend for one in job} == {"keep"}
    assert "4 pods that started and ended together" in job[0].why

    # The same Job's pods one after another (a work queue): each is sized on its own.
    def staggered(pod: str | None, n: int) -> bool:
        if pod not in ranks:
            return True
        rank = ranks.index(pod or "")
        return 2 * DAY + rank * 5 * HOUR <= n < 4 * DAY + rank * DAY // 2

    advice = advice_of(pods, [(pod, "Job", "ddp") for pod in ranks], keep=staggered)
    assert {one.recommend for one in advice.recommendations if one.usage.owner == "ddp"} == {"mig"}


def test_a_deployments_replicas_started_together_are_not_a_job() -> None:
    replicas = ["api-7d9c5b6f4-x2k9p", "api-7d9c5b6f4-q8zt4"]
    pods = [on(n, pod) for n, pod in enumerate(replicas)]
    advice = advice_of(pods, keep=lambda pod, n: n >= 2 * DAY)
    assert {one.recommend for one in advice.recommendations} == {"mig"}


# --- 5. workloads on a MIG instance are resized both ways ----------------------------------------------------------


def mig(profile: str, memory: float, activity: float, pod: str = "batch-x7k2p") -> Gpu:
    return on(0, pod, memory=lambda n: memory, activity=lambda n: activity, extra={"GPU_I_PROFILE": profile, "GPU_I_ID": "1"})


def test_a_workload_on_a_large_instance_is_sized_down() -> None:
    # 3g.40gb, 5,000 MiB and 10% of the instance (0.3 of its 3 slices): a 1g.10gb holds it.
    (one,) = advice_of([mig("3g.40gb", 5000, 0.10)]).recommendations
    assert (one.recommend, one.profile) == ("mig", "1g.10gb") and "size down" in one.why
    # It held half a GPU (3g: two a GPU), it takes a seventh.
    assert one.gpus_held == pytest.approx(0.5)


def test_memory_above_90_percent_of_the_instance_sizes_it_up() -> None:
    # 9,000 MiB on a 1g.10gb (9,537 MiB by its name): 94%, out of memory at the next burst.
    (one,) = advice_of([mig("1g.10gb", 9000, 0.05)]).recommendations
    assert (one.recommend, one.profile) == ("mig", "2g.20gb") and "size up" in one.why
    assert one.monthly_saving is None or one.monthly_saving < 0  # sizing up costs


def test_saturated_activity_sizes_it_up() -> None:
    # 95% of a 1g.10gb's one slice: what it would use is more than the instance gives.
    (one,) = advice_of([mig("1g.10gb", 2000, 0.95)]).recommendations
    assert (one.recommend, one.profile) == ("mig", "2g.20gb") and "saturated" in one.why


def test_an_instance_of_the_right_size_is_kept() -> None:
    (one,) = advice_of([mig("2g.20gb", 12000, 0.3)]).recommendations
    assert one.recommend == "keep"


@pytest.mark.parametrize("profile", ["1g.10gb", "2g.20gb", "3g.40gb", None])
@pytest.mark.parametrize("memory", [1000, 8000, 9000, 15000, 17000, 30000, 36000, 45000, 70000])
@pytest.mark.parametrize("pod", ["batch-x7k2p", "chat-7d9c5b6f4-x2k9p"])
def test_no_advice_gives_a_profile_below_the_peak_plus_headroom(profile: str | None, memory: float, pod: str) -> None:
    # The out-of-memory answers: a profile (or a time slice) whose memory is below what the workload peaked at.
    bursty = lambda n: 0.4 if hour_of_day(n) == 9 else 0.05  # noqa: E731
    gpu = on(0, pod, memory=lambda n: memory * (1.0 if n % 50 else 1.1), activity=bursty)
    if profile:
        gpu.extra = {"GPU_I_PROFILE": profile, "GPU_I_ID": "1"}
    (one,) = advice_of([gpu]).recommendations
    needed = memory * 1.1 * (1 + HEADROOM)
    if one.recommend == "mig":
        assert one.profile and profile_memory_mib(one.profile) >= needed
    if one.recommend == "time-slicing":
        assert one.per_gpu * needed <= one.usage.model.memory_gib * 1e9 / (1 << 20)
    if profile and profile_memory_mib(profile) < needed:
        assert one.recommend == "mig" or "size up" in one.why


# --- 7. duty cycle -------------------------------------------------------------------------------------------------


def office_hours(n: int) -> float:
    """Busy at 60% on weekdays from 09:00 to 17:00 UTC, idle otherwise."""
    return 0.6 if weekday(n) < 5 and 9 <= hour_of_day(n) < 17 else 0.0


def test_each_workload_has_its_duty_cycle_and_active_hours() -> None:
    (one,) = advice_of([on(0, "nb-0", activity=office_hours)]).recommendations
    assert one.usage.duty_cycle == pytest.approx(5 * 8 / (7 * 24), abs=0.001)
    assert one.usage.active_hours == tuple(range(9, 17))


def test_a_notebook_idle_most_of_the_week_shares_a_gpu() -> None:
    # A notebook StatefulSet of 20 GB, busy at 60% a quarter of the week: no MIG instance that two fit a GPU holds 72%,
    # and two such by their p95 do not fit one GPU; by its duty cycle, three share one (memory holds three).
    notebook = on(0, "nb-0", memory=lambda n: 20000.0, activity=office_hours)
    (one,) = advice_of([notebook], [("nb-0", "StatefulSet", "nb")]).recommendations
    assert one.sized_as == "interactive"
    assert (one.recommend, one.per_gpu) == ("time-slicing", 3)
    assert "09-17 UTC" in one.why and "active 23.8% of the time" in one.why


def test_a_notebook_too_large_to_share_is_a_release_candidate() -> None:
    notebook = on(0, "nb-0", memory=lambda n: 60000.0, activity=office_hours)
    (one,) = advice_of([notebook], [("nb-0", "StatefulSet", "nb")]).recommendations
    assert one.recommend == "keep" and "release its GPU when idle" in one.why and "09-17 UTC" in one.why


def test_a_busy_statefulset_is_a_service_not_a_notebook() -> None:
    busy = on(0, "db-0", memory=lambda n: 20000.0, activity=lambda n: 0.6)
    (one,) = advice_of([busy], [("db-0", "StatefulSet", "db")]).recommendations
    assert one.sized_as == "serving" and one.recommend == "keep"


def test_the_json_has_kind_duty_cycle_and_how_it_was_sized(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for metric, text in dcgm_responses([on(0, "chat-7d9c5b6f4-x2k9p", activity=office_hours)], WEEK).items():
        (tmp_path / f"{metric}.json").write_text(text, encoding="utf-8")
    main(["advise", "--metrics", str(tmp_path), "--json"])
    (row,) = json.loads(capsys.readouterr().out)["recommendations"]
    assert row["kind"] == "Deployment" and row["sizedAs"] == "serving"
    assert row["dutyCycle"] == pytest.approx(0.238, abs=0.001) and row["activeHours"] == list(range(9, 17))
    assert row["burstActivity"] == pytest.approx(0.6)


# --- 1. spans of a GPU whose samples lost their pod labels ---------------------------------------------------------


def relabelled(memory: Callable[[int], float], activity: Callable[[int], float]) -> list[Gpu]:
    """One GPU held all week by one pod, as two series: with its pod labels, and without them (the exporter restarted
    without the kubelet's pod-resources socket: dcgm-exporter#342, #477); which samples each has is the test's."""
    labelled = on(0, "chat-7d9c5b6f4-x2k9p", memory=memory, activity=activity)
    bare = Gpu(labelled.host, 0, model_name=A100, memory=memory, activity=activity)
    return [labelled, bare]


def test_a_span_without_labels_between_the_pods_samples_is_its_own() -> None:
    # Labels lost from day 2 to day 5, when the service peaked at 15,000 MiB (3,000 the rest of the week): read
    # without those days, a 1g.10gb would run it out of memory.
    gpus = relabelled(lambda n: 15000.0 if n == 3 * DAY else 3000.0, lambda n: 0.05)
    advice = advice_of(gpus, keep=lambda pod, n: (2 * DAY <= n < 5 * DAY) is (pod is None))
    (one,) = advice.recommendations
    assert one.usage.peak_memory_mib == 15000 and (one.recommend, one.profile) == ("mig", "2g.20gb")
    assert one.usage.unlabelled == 3 * DAY and one.usage.share == 1.0
    assert not advice.usage.not_evaluated


def test_a_pod_whose_labels_were_mostly_lost_is_evaluated_on_its_whole_week() -> None:
    gpus = relabelled(lambda n: 3000.0, lambda n: 0.05)
    (one,) = advice_of(gpus, keep=lambda pod, n: (DAY <= n < 6 * DAY) is (pod is None)).recommendations
    assert one.usage.samples == WEEK and one.usage.unlabelled == 5 * DAY


def test_busy_samples_without_labels_no_pod_held_are_refused_and_counted() -> None:
    # The pod ran days 0-3; the GPU was busy without labels on day 5 (no pod's labelled samples around it) and idle
    # without labels the rest of the time (a GPU between pods: not counted).
    gpus = relabelled(lambda n: 3000.0, lambda n: 0.5 if 5 * DAY <= n < 5 * DAY + HOUR else 0.0)
    gpus[0].activity = lambda n: 0.2
    advice = advice_of(gpus, keep=lambda pod, n: (n >= 3 * DAY) is (pod is None))
    (one,) = advice.recommendations
    assert one.usage.unlabelled == 0
    ((what, why),) = [(entry.what, entry.why) for entry in advice.usage.not_evaluated]
    assert what == f"{gpus[0].host} {gpus[0].uuid}" and why.startswith(f"{HOUR} busy sample(s) without a pod label")


def test_a_mig_instance_without_activity_is_sized_by_memory_and_never_released() -> None:
    # DCGM reports no utilisation percentage for a MIG instance (0): not idle, and not sized down on compute.
    responses = dcgm_responses([mig("3g.40gb", 5000, 0.0)], WEEK, activity_metric="DCGM_FI_DEV_GPU_UTIL")
    catalog = load_catalog()
    usage = read_usage(series_of(responses), catalog)
    (one,) = advise(usage, Pricing(prices=load_prices(), catalog=catalog)).recommendations
    assert one.recommend == "keep" and "not reported" in one.why
    responses = dcgm_responses([mig("1g.10gb", 9000, 0.0)], WEEK, activity_metric="DCGM_FI_DEV_GPU_UTIL")
    (one,) = advise(read_usage(series_of(responses), catalog), Pricing(prices=load_prices(), catalog=catalog)).recommendations
    assert (one.recommend, one.profile) == ("mig", "2g.20gb")
