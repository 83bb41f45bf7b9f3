"""The monitoring section of a stack file: defaults, what is refused, what is warned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.cli import main
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import ONCALL_ACTION_GROUP, minimal_raw, raw_stack, stack_config

WORKSPACE = "/subscriptions/0000/resourceGroups/rg-obs/providers/Microsoft.Monitor/accounts/amw-shared"


def warnings_of(**overrides: Any) -> list[str]:
    return [w.render("test") for w in validate_stack(minimal_raw(**overrides), "test").warnings]


def errors_of(**overrides: Any) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        validate_stack(minimal_raw(**overrides), "test")
    return [p.render("test") for p in raised.value.errors]


def test_defaults() -> None:
    config = validate_stack(minimal_raw(), "test").config
    assert config.monitoring.enabled and config.monitoring.engine == "azure-monitor"
    assert config.monitoring.alerts.idle_minutes == 60
    assert warnings_of() == []


@pytest.mark.parametrize(
    ("monitoring", "key"),
    [
        ({"engine": "prometheus"}, "aks-gpu:monitoring.engine"),
        ({"azureMonitor": {"actionGroupIds": ["gpu-oncall"]}}, "aks-gpu:monitoring.azureMonitor.actionGroupIds[0]"),
        ({"azureMonitor": {"workspaceResourceId": "/subscriptions/x/resourceGroups/y/providers/Microsoft.Insights/components/z"}},
         "aks-gpu:monitoring.azureMonitor.workspaceResourceId"),
        ({"azureMonitor": {"workspaceName": "-amw"}}, "aks-gpu:monitoring.azureMonitor.workspaceName"),
        ({"alerts": {"idleMinutes": 5}}, "aks-gpu:monitoring.alerts.idleMinutes"),
        ({"alerts": {"idleUtilizationPercent": 0}}, "aks-gpu:monitoring.alerts.idleUtilizationPercent"),
        ({"scrapeInterval": 30}, "aks-gpu:monitoring.scrapeInterval"),
        ({"prometheusOperator": {"namespace": "Monitoring"}}, "aks-gpu:monitoring.prometheusOperator.namespace"),
    ],
)  # fmt: skip
def test_bad_values_are_refused_with_their_key(monitoring: dict[str, Any], key: str) -> None:
    errors = errors_of(**{"aks-gpu:monitoring": monitoring})
    assert any(key in error for error in errors), errors


def test_arm_ids_are_matched_case_insensitively_as_arm_does() -> None:
    group = "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Insights/actionGroups/oncall"
    config = validate_stack(minimal_raw(**{"aks-gpu:monitoring": {"azureMonitor": {"actionGroupIds": [group]}}}), "test").config
    assert config.monitoring.azure_monitor.action_group_ids == (group,)


def test_an_adopted_cluster_without_a_workspace_is_warned() -> None:
    cluster = {"resourceGroup": "rg-test", "name": "aks-test", "existing": True}
    (warning,) = warnings_of(**{"aks-gpu:cluster": cluster})
    assert "aks-gpu:monitoring.azureMonitor.workspaceResourceId" in warning and "only the GPU exporters" in warning
    heard = {"workspaceResourceId": WORKSPACE, "actionGroupIds": [ONCALL_ACTION_GROUP]}
    with_workspace = warnings_of(**{"aks-gpu:cluster": cluster, "aks-gpu:monitoring": {"azureMonitor": heard}})
    assert len(with_workspace) == 1 and "nodes=[aks-gpu/pool]" in with_workspace[0]
    # Off, or another engine: nothing to say.
    assert warnings_of(**{"aks-gpu:cluster": cluster, "aks-gpu:monitoring": {"enabled": False}}) == []
    assert warnings_of(**{"aks-gpu:cluster": cluster, "aks-gpu:monitoring": OPERATOR}) == []


def test_alerts_that_reach_nobody_are_refused() -> None:
    (error,) = errors_of(**{"aks-gpu:monitoring": {"azureMonitor": {}}})
    assert "aks-gpu:monitoring.azureMonitor.receivers" in error and "actionGroupIds" in error and "notify nobody" in error
    # Monitoring off creates no alert; a receiver or an existing action group is heard.
    assert warnings_of(**{"aks-gpu:monitoring": {"enabled": False}}) == []
    receivers = [{"name": "gpu-oncall", "email": "gpu-oncall@example.com"}]
    assert warnings_of(**{"aks-gpu:monitoring": {"azureMonitor": {"receivers": receivers}}}) == []
    # Without GPU pools nothing is monitored, so nothing is refused.
    assert validate_stack(minimal_raw(**{"aks-gpu:gpuPools": [], "aks-gpu:workloads": [], "aks-gpu:monitoring": {}}), "t")


def test_a_plan_without_a_receiver_exits_2_naming_the_key(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    raw = raw_stack("prod")
    del raw["aks-gpu:monitoring"]
    stack_file = tmp_path / "Pulumi.prod.yaml"
    stack_file.write_text(yaml.safe_dump({"config": raw}), encoding="utf-8")
    code = main(["plan", "--stack", "prod", "--config-file", str(stack_file)])
    captured = capsys.readouterr()
    assert code == 2, captured.out + captured.err
    assert "aks-gpu:monitoring.azureMonitor.receivers" in captured.err and "actionGroupIds" in captured.err


@pytest.mark.parametrize(
    ("receiver", "key"),
    [
        ({"name": "oncall"}, "aks-gpu:monitoring.azureMonitor.receivers[0]"),
        ({"name": "oncall", "email": "a@example.com", "webhook": "https://x.example.com"}, "receivers[0]"),
        ({"name": "oncall", "email": "not-an-address"}, "receivers[0].email"),
        ({"name": "oncall", "webhook": "http://pager.example.com/hook"}, "receivers[0].webhook"),
    ],
)  # fmt: skip
def test_a_receiver_is_one_email_or_one_https_webhook(receiver: dict[str, Any], key: str) -> None:
    errors = errors_of(**{"aks-gpu:monitoring": {"azureMonitor": {"receivers": [receiver]}}})
    assert any(key in error for error in errors), errors


def test_receiver_names_are_unique() -> None:
    twice = [{"name": "oncall", "email": "a@example.com"}, {"name": "OnCall", "webhook": "https://x.example.com/h"}]
    errors = errors_of(**{"aks-gpu:monitoring": {"azureMonitor": {"receivers": twice}}})
    assert any("aks-gpu:monitoring.azureMonitor.receivers" in e and "unique" in e for e in errors), errors


OPERATOR = {"engine": "prometheus-operator", "prometheusOperator": {"alertmanagerReceiver": "gpu-oncall"}}


def test_the_operator_engine_names_the_alertmanager_receiver() -> None:
    assert warnings_of(**{"aks-gpu:monitoring": OPERATOR}) == []
    key = "aks-gpu:monitoring.prometheusOperator.alertmanagerReceiver"
    # Unset: kube-prometheus-stack's default route ends at null, so it is not assumed to reach anyone.
    (error,) = errors_of(**{"aks-gpu:monitoring": {"engine": "prometheus-operator"}})
    assert key in error and "null" in error
    for nobody in ("null", "", " "):
        settings = {"engine": "prometheus-operator", "prometheusOperator": {"alertmanagerReceiver": nobody}}
        (error,) = errors_of(**{"aks-gpu:monitoring": settings})
        assert key in error and "notifies nobody" in error
    # With the azure-monitor engine it does nothing, and says so.
    heard = {"actionGroupIds": [ONCALL_ACTION_GROUP]}
    (warning,) = warnings_of(
        **{"aks-gpu:monitoring": {"azureMonitor": heard, "prometheusOperator": {"alertmanagerReceiver": "x"}}}
    )
    assert key in warning and "no effect" in warning


def test_the_amd_stack_routes_its_alerts_to_a_receiver() -> None:
    config = stack_config("amd")
    receiver = config.monitoring.prometheus_operator.alertmanager_receiver
    assert config.monitoring.engine == "prometheus-operator" and receiver not in (None, "", "null")


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_prod_and_dev_create_an_action_group_from_a_receiver(stack: str) -> None:
    settings = stack_config(stack).monitoring.azure_monitor
    assert settings.receivers, f"stacks/Pulumi.{stack}.yaml: aks-gpu:monitoring.azureMonitor.receivers"


def test_azure_settings_with_the_operator_engine_are_warned() -> None:
    (warning,) = warnings_of(**{"aks-gpu:monitoring": {**OPERATOR, "azureMonitor": {"workspaceName": "amw"}}})
    assert "aks-gpu:monitoring.azureMonitor" in warning and "no effect" in warning


GB200 = "Standard_ND128isr_NDR_GB200_v6"


def test_the_dcgm_exporter_runs_on_grace_pools_and_an_override_is_warned() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0]["vmSize"] = GB200
    errors = [p for p in validate_stack(raw, "test").warnings if "DCGM exporter" in p.message]
    assert errors == [], "the pinned exporter has a linux/arm64 build (components/aks_gpu/data/arm64_support.yaml)"
    raw["aks-gpu:monitoring"]["dcgmExporterImage"] = "registry.example.com/dcgm-exporter:1"
    warned = [w.render("test") for w in validate_stack(raw, "test").warnings]
    assert any("aks-gpu:monitoring.dcgmExporterImage" in w and "linux/arm64" in w for w in warned), warned
