"""The recording rules that keep the daily peaks `aksgpu advise` reads, under promtool: each records the last day's
maximum and 95th percentile of a pod's GPU, keeps every exporter label, forgets a spike once it has left the day, and
records nothing for a GPU no pod holds. The expected values are worked out by hand from the input series."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.monitoring.exporter_pins import default_exporter_pins
from aks_gpu.monitoring.rules import (
    ADVICE_GROUP,
    advice_record_name,
    advice_recording_groups,
    rule_file,
    rule_groups,
)
from tests.conftest import STACK_NAMES, stack_model
from tests.monitoring import promtool
from tests.monitoring.test_promtool import H100, MI300X, TRAINER, series
from tests.monitoring.test_rules import metric_names

# A trainer's H100 over two days at 5-minute steps: 1,000 MiB throughout but for one 30,000 MiB sample at 12h.
# 144 samples (0h-11h55), the spike, then 431 more: the series ends at 48h.
MEMORY = "1000x143 30000 1000x431"
# Its graphics engine: 0.2 but for 14 samples at 0.9 in the first day (fewer than 5% of the day's 289 samples).
ACTIVITY = "0.2x99 0.9x13 0.2x461"
IDLE_GPU = {key: value for key, value in H100.items() if key != "UUID"} | {"UUID": "GPU-idle-0000"}


def _promtool_case(tmp_path: Path, input_series: list[dict[str, str]], tests: list[dict[str, Any]], stack: str) -> str:
    model = stack_model(stack)
    promtool.write_yaml(tmp_path / "rules.yaml", rule_file((), advice_recording_groups(model)))
    test_file = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1h",
        "tests": [{"interval": "5m", "input_series": input_series, "promql_expr_test": tests}],
    }
    done = promtool.test_rules(promtool.write_yaml(tmp_path / "test.yaml", test_file))
    return "" if done.returncode == 0 else done.stdout + done.stderr


def _labels(*parts: dict[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for part in parts:
        merged |= part
    return merged


def test_the_day_peak_and_p95_of_a_pods_gpu_memory_are_recorded(tmp_path: Path) -> None:
    trainer_gpu = _labels(H100, TRAINER)
    input_series = [
        series("DCGM_FI_DEV_FB_USED", trainer_gpu, MEMORY),
        series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", trainer_gpu, ACTIVITY),
        # A GPU no pod holds: the audit's idle finding, not a workload; nothing is recorded for it.
        series("DCGM_FI_DEV_FB_USED", IDLE_GPU, "0x575"),
    ]
    peak = advice_record_name("DCGM_FI_DEV_FB_USED", "max")
    p95 = advice_record_name("DCGM_FI_DEV_FB_USED", "p95")
    activity_p95 = advice_record_name("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "p95")
    activity_peak = advice_record_name("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "max")
    tests = [
        # At 24h the day holds the spike: the peak is it, the 95th percentile is not (1 sample of 289).
        {"expr": peak, "eval_time": "24h", "exp_samples": [{"labels": _series_labels(peak, trainer_gpu), "value": 30000}]},
        {"expr": p95, "eval_time": "24h", "exp_samples": [{"labels": _series_labels(p95, trainer_gpu), "value": 1000}]},
        {
            "expr": activity_peak,
            "eval_time": "24h",
            "exp_samples": [{"labels": _series_labels(activity_peak, trainer_gpu), "value": 0.9}],
        },
        {
            "expr": activity_p95,
            "eval_time": "24h",
            "exp_samples": [{"labels": _series_labels(activity_p95, trainer_gpu), "value": 0.2}],
        },
        # A day after the spike it has left the window: the daily peak is the day's, not the history's.
        {"expr": peak, "eval_time": "37h", "exp_samples": [{"labels": _series_labels(peak, trainer_gpu), "value": 1000}]},
    ]
    failure = _promtool_case(tmp_path, input_series, tests, "prod")
    assert not failure, failure


def test_amd_gpus_are_recorded_under_the_rocm_exporters_names(tmp_path: Path) -> None:
    amd_gpu = _labels(MI300X, TRAINER)
    peak = advice_record_name("gpu_used_vram", "max")
    activity = advice_record_name("gpu_gfx_activity", "p95")
    input_series = [series("gpu_used_vram", amd_gpu, "4096x287"), series("gpu_gfx_activity", amd_gpu, "0x287")]
    tests = [
        {"expr": peak, "eval_time": "23h", "exp_samples": [{"labels": _series_labels(peak, amd_gpu), "value": 4096}]},
        {"expr": activity, "eval_time": "23h", "exp_samples": [{"labels": _series_labels(activity, amd_gpu), "value": 0}]},
    ]
    failure = _promtool_case(tmp_path, input_series, tests, "amd")
    assert not failure, failure


def _series_labels(record: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{key}="{value}"' for key, value in labels.items())
    return f"{record}{{{inner}}}"


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stacks_recording_rules_read_published_metrics_and_pass_promtool(stack: str, tmp_path: Path) -> None:
    model = stack_model(stack)
    recording = advice_recording_groups(model)
    pins = default_exporter_pins()
    if not model.pools:
        assert recording == ()
        return
    (group,) = recording
    assert group.name == ADVICE_GROUP
    for rule in group.rules:
        assert metric_names(rule.expr) == {rule.metric}
        assert rule.metric in pins.dcgm_metrics | pins.amd_metrics, f"{rule.record} reads {rule.metric}, not published"
    written = promtool.write_yaml(tmp_path / "rules.yaml", rule_file(rule_groups(model, critical_xid_codes()), recording))
    done = promtool.check_rules(written)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_stack_records_only_its_own_vendors_metrics() -> None:
    recorded = {rule.metric for group in advice_recording_groups(stack_model("amd")) for rule in group.rules}
    vendors = {pool.vendor for pool in stack_model("amd").pools}
    assert ("gpu_used_vram" in recorded) == ("amd" in vendors)
    assert ("DCGM_FI_DEV_FB_USED" in recorded) == ("nvidia" in vendors)
