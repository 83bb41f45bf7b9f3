"""The advice on generated histories at its boundaries: the MIG profile that just holds a workload and the one above it,
time-slicing where no MIG exists, release at the idle line, replicas sized together, and the label shapes a scrape
produces (exported_*, the later `hostname`, GPUs without profiling metrics)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from aks_gpu.advise.recommend import HEADROOM, Advice, NodeFacts, Pricing, advise, profile_memory_mib
from aks_gpu.advise.series import AdviceInputError, parse_query_range
from aks_gpu.advise.usage import IDLE_ACTIVITY, owner_of_pod, read_usage
from aks_gpu.audit.prices import load_prices
from aks_gpu.catalog import load_catalog
from tests.advise.histories import Gpu, dcgm_responses, query_range

DAY = 288  # 5-minute steps
A100 = "NVIDIA A100 80GB PCIe"
A100_40 = "NVIDIA A100-SXM4-40GB"
H100 = "NVIDIA H100 80GB HBM3"
# Standard_NC24ads_A100_v4 (one A100 80GB) a month at the eastus table's list price (components/aks_gpu/data/gpu_prices.yaml).
A100_MONTH = load_prices().monthly("eastus", "Standard_NC24ads_A100_v4")[0]  # type: ignore[index]


def advice_of(gpus: Sequence[Gpu], steps: int = DAY, pools: dict[str, NodeFacts] | None = None, **options: object) -> Advice:
    responses = dcgm_responses(gpus, steps, **options)  # type: ignore[arg-type]
    series = {metric: parse_query_range(metric, text) for metric, text in responses.items()}
    catalog = load_catalog()
    return advise(read_usage(series, catalog), Pricing(prices=load_prices(), catalog=catalog, pools=pools or {}))


def one(memory_mib: float, activity: float, model: str = A100, pod: str = "app-7d9c5b6f4-x2k9p") -> Gpu:
    return Gpu(
        "aks-infer-31245367-vmss000000",
        0,
        model_name=model,
        pod=("team", pod, "main"),
        memory=lambda n: memory_mib,
        activity=lambda n: activity,
    )


def decided(gpu: Gpu) -> tuple[str, str | None]:
    (recommendation,) = advice_of([gpu]).recommendations
    return recommendation.recommend, recommendation.profile


def test_the_smallest_profile_that_holds_the_peak_memory_with_headroom() -> None:
    fits = profile_memory_mib("1g.10gb") / (1 + HEADROOM)
    assert decided(one(fits - 1, 0.05)) == ("mig", "1g.10gb")
    assert decided(one(fits + 1, 0.05)) == ("mig", "2g.20gb")
    # 40 GB instances hold what 20 GB ones cannot; past the 4g.40gb only the whole GPU (7g) is left: no MIG.
    assert decided(one(profile_memory_mib("2g.20gb") / (1 + HEADROOM) + 1, 0.05)) == ("mig", "3g.40gb")
    assert decided(one(profile_memory_mib("4g.40gb") / (1 + HEADROOM) + 1, 0.05))[0] != "mig"


def test_the_compute_share_decides_as_well_as_the_memory() -> None:
    # p95 activity x 7 slices x 1.2 headroom: up to one slice fits 1g, beyond it 2g.
    one_slice = 1 / 7 / (1 + HEADROOM)
    assert decided(one(2000, one_slice - 0.001)) == ("mig", "1g.10gb")
    assert decided(one(2000, one_slice + 0.001)) == ("mig", "2g.20gb")
    assert decided(one(2000, 4 / 7 / (1 + HEADROOM) + 0.001))[0] != "mig"


def test_each_gpu_model_has_its_own_profiles() -> None:
    assert decided(one(3000, 0.05, model=A100_40)) == ("mig", "1g.5gb")
    assert decided(one(30000, 0.05, model=H100)) == ("mig", "3g.40gb")


def test_time_slicing_where_the_gpu_has_no_mig() -> None:
    # A batch Job's pod (a Deployment's is a service, never time-sliced: tests/advise/test_kinds.py).
    job = "batch-q8zt4"
    (recommendation,) = advice_of([one(3000, 0.2, model="Tesla T4", pod=job)]).recommendations
    # 16 GB T4 = 15,258 MiB: four of 3,600 MiB fit by memory, four of 24% by compute; capped at four.
    assert (recommendation.recommend, recommendation.per_gpu) == ("time-slicing", 4)
    (recommendation,) = advice_of([one(3000, 0.35, model="Tesla T4", pod=job)]).recommendations
    assert (recommendation.recommend, recommendation.per_gpu) == ("time-slicing", 2)
    (recommendation,) = advice_of([one(3000, 0.5, model="Tesla T4", pod=job)]).recommendations
    assert recommendation.recommend == "keep"


def test_release_only_when_idle_through_the_window() -> None:
    assert decided(one(20000, IDLE_ACTIVITY))[0] == "release"
    busy_once = one(20000, 0.0)
    busy_once.activity = lambda n: 0.5 if n == 100 else 0.0
    assert decided(busy_once)[0] != "release"


def test_replicas_of_one_owner_get_the_profile_the_busiest_needs() -> None:
    small = one(3000, 0.05, pod="llm-7d9c5b6f4-x2k9p")
    large = Gpu(
        "aks-infer-31245367-vmss000001",
        0,
        model_name=A100,
        pod=("team", "llm-7d9c5b6f4-q8zt4", "main"),
        memory=lambda n: 15000,
        activity=lambda n: 0.05,
    )
    recommendations = advice_of([small, large]).recommendations
    assert {(r.usage.pod, r.profile) for r in recommendations} == {
        ("llm-7d9c5b6f4-x2k9p", "2g.20gb"),
        ("llm-7d9c5b6f4-q8zt4", "2g.20gb"),
    }
    assert {r.usage.owner for r in recommendations} == {"llm"}


def test_the_pool_change_packs_workloads_onto_fewer_gpus() -> None:
    gpus = [
        Gpu(
            f"aks-infer-31245367-vmss00000{n}",
            0,
            model_name=A100,
            pod=("team", f"svc{n}-7d9c5b6f4-x2k9p", "main"),
            memory=lambda s: 5000,
            activity=lambda s: 0.05,
        )
        for n in range(8)
    ]
    pools = {"infer": NodeFacts("infer", "Standard_NC24ads_A100_v4", "eastus")}
    (change,) = advice_of(gpus, pools=pools).pool_changes
    assert (change.pool, change.mig_value, change.per_gpu, change.gpus_now, change.gpus_after) == ("infer", "MIG1g", 7, 8, 2)
    assert change.monthly_saving == pytest.approx(6 * A100_MONTH, abs=0.01)
    assert change.nodes_freed == 6  # one GPU a node


def test_multi_gpu_and_mig_workloads_are_kept() -> None:
    pair = [
        Gpu("aks-train-31245367-vmss000000", n, model_name=H100, pod=("ml", "trainer-0", "main"), memory=lambda s: 3000)
        for n in range(2)
    ]
    (recommendation,) = advice_of(pair).recommendations
    assert (recommendation.recommend, recommendation.usage.gpus) == ("keep", 2)
    on_mig = one(3000, 0.05)
    on_mig.extra = {"GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "7"}
    (recommendation,) = advice_of([on_mig]).recommendations
    assert recommendation.recommend == "keep" and "1g.10gb holds it, and no smaller instance does" in recommendation.why


def test_a_scrape_with_honor_labels_false_reads_the_exported_pod() -> None:
    # GpuMonitoring's scrape keeps the target's pod/namespace (the exporter's own); the workload's are exported_*.
    (recommendation,) = advice_of([one(3000, 0.05)], exported=True).recommendations
    assert (recommendation.usage.namespace, recommendation.usage.pod) == ("team", "app-7d9c5b6f4-x2k9p")


def test_the_later_exporters_hostname_label_and_gpu_util_without_profiling() -> None:
    (recommendation,) = advice_of([one(3000, 0.05)], hostname_label="hostname").recommendations
    assert recommendation.usage.hosts == ("aks-infer-31245367-vmss000000",)
    (recommendation,) = advice_of([one(3000, 0.05)], activity_metric="DCGM_FI_DEV_GPU_UTIL").recommendations
    assert recommendation.usage.activity_metric == "DCGM_FI_DEV_GPU_UTIL" and recommendation.profile == "1g.10gb"


def test_too_few_samples_are_not_evaluated() -> None:
    advice = advice_of([one(3000, 0.05)], steps=5)
    assert not advice.recommendations
    assert [entry.what for entry in advice.usage.not_evaluated] == ["team/app-7d9c5b6f4-x2k9p"]


def test_kube_pod_owner_names_the_owner() -> None:
    responses = dcgm_responses([one(3000, 0.05, pod="web-0")], DAY)
    series = {metric: parse_query_range(metric, text) for metric, text in responses.items()}
    owner = {
        "metric": {"namespace": "team", "pod": "web-0", "owner_kind": "StatefulSet", "owner_name": "web"},
        "values": [[0, "1"]],
    }
    series["kube_pod_owner"] = parse_query_range("kube_pod_owner", query_range([owner]))
    (workload,) = read_usage(series, load_catalog()).workloads
    assert (workload.owner_kind, workload.owner) == ("StatefulSet", "web")


@pytest.mark.parametrize(
    ("pod", "owner"),
    [("llm-7d9c5b6f4-x2k9p", "llm"), ("batch-q8zt4", "batch"), ("db-0", "db"), ("standalone", "standalone")],
)
def test_owner_read_off_the_pod_name(pod: str, owner: str) -> None:
    assert owner_of_pod(pod) == owner


def test_nan_samples_are_left_out_and_errors_name_the_metric() -> None:
    text = query_range([{"metric": {"a": "b"}, "values": [[1, "NaN"], [2, "5"], [3, "+Inf"]]}])
    (series,) = parse_query_range("m", text)
    assert list(series.values) == [5.0] and (series.start, series.end) == (1.0, 3.0)
    assert list(series.times()) == [2.0]  # each value's time, the samples left out skipped
    gap = query_range([{"metric": {}, "values": [[0, "1"], [300, "2"], [1200, "3"], [1500, "4"]]}])
    (series,) = parse_query_range("m", gap)
    assert series.runs == ((0.0, 2), (1200.0, 2)) and list(series.times()) == [0.0, 300.0, 1200.0, 1500.0]
    with pytest.raises(AdviceInputError, match="m: not a Prometheus query_range response: not JSON"):
        parse_query_range("m", "{")
    with pytest.raises(AdviceInputError, match="did not succeed"):
        parse_query_range("m", json.dumps({"status": "error", "error": "bad query"}))
    with pytest.raises(AdviceInputError, match='series 0 has a sample that is not \\[time, "value"\\]'):
        parse_query_range("m", query_range([{"metric": {}, "values": [[1]]}]))
