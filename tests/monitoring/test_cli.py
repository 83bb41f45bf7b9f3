"""`aksgpu rules`: the stack's rules as a rule file (or a PrometheusRule), the same ones GpuMonitoring deploys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aks_gpu.cli import main
from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.manifests import labelled
from aks_gpu.monitoring.rules import advice_recording_groups, prometheus_rule_manifest, rule_file, rule_groups
from tests.conftest import PROJECT_DIR, raw_stack, stack_model
from tests.monitoring import promtool


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["rules", "--project-dir", str(PROJECT_DIR), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_prints_the_stacks_rule_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "--stack", "prod")
    assert code == 0
    document = yaml.safe_load(out)
    model = stack_model("prod")
    assert document == rule_file(rule_groups(model, critical_xid_codes()), advice_recording_groups(model))
    assert "honor_labels false" in err and "nodes=[aks-gpu/pool]" in err
    # What a team does with it: hand it to promtool / their Prometheus.
    (tmp_path / "gpu.rules.yaml").write_text(out, encoding="utf-8")
    done = promtool.check_rules(tmp_path / "gpu.rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_prints_a_prometheus_rule_object(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--stack", "amd", "--format", "prometheusrule")
    assert code == 0
    model = stack_model("amd")
    groups, recording = rule_groups(model, critical_xid_codes()), advice_recording_groups(model)
    assert yaml.safe_load(out) == labelled(prometheus_rule_manifest(groups, model, recording))


def test_writes_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "rules.yaml"
    code, out, err = run(capsys, "--stack", "dev", "--out", str(target))
    assert code == 0 and out == ""
    assert f"recording rules to {target}" in err.replace("\n", "")
    assert yaml.safe_load(target.read_text(encoding="utf-8"))["groups"][0]["name"] == "aks-gpu-health"


def test_monitoring_off_still_prints_the_rules_and_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    raw = raw_stack("dev")
    raw["aks-gpu:monitoring"] = {"enabled": False}
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump({"config": raw}), encoding="utf-8")
    code, out, err = run(capsys, "--stack", "dev", "--config-file", str(stack_file))
    assert code == 0 and yaml.safe_load(out)["groups"]
    assert "monitoring.enabled is false" in err


def test_a_bad_stack_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "--stack", "nope")
    assert code == 2 and out == "" and "no such stack file" in err
    raw = raw_stack("dev")
    raw["aks-gpu:monitoring"] = {"engine": "grafana"}
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump({"config": raw}), encoding="utf-8")
    code, out, err = run(capsys, "--stack", "dev", "--config-file", str(stack_file))
    assert code == 2 and "aks-gpu:monitoring.engine" in err


def test_the_rule_builders_import_no_pulumi() -> None:
    """The rules and exporter builders are pure: neither the Pulumi SDK nor the Azure one is loaded by them (the
    command line's package imports every command, which issue 17's light-command work deals with)."""
    probe = (
        "import sys; import aks_gpu.monitoring.rules, aks_gpu.monitoring.exporters, aks_gpu.monitoring.azure; "
        "print(sorted(m for m in sys.modules if m == 'pulumi' or m.startswith(('pulumi.', 'pulumi_'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=PROJECT_DIR, check=True)
    assert done.stdout.strip() == "[]"


def test_without_promtool_the_rule_tests_fail_and_say_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never a silent skip: a machine without promtool gets a failing test with the install command."""
    monkeypatch.delenv("AKSGPU_PROMTOOL", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match="apt-get install --no-install-recommends prometheus"):
        promtool.promtool()
    monkeypatch.setenv("AKSGPU_PROMTOOL", "/nonexistent/promtool")
    with pytest.raises(pytest.fail.Exception, match="AKSGPU_PROMTOOL=/nonexistent/promtool"):
        promtool.promtool()


def test_the_plan_names_the_exporters_and_rule_groups(tmp_path: Path) -> None:
    from tests.conformance import plan_with_cli

    printed = plan_with_cli("dev", tmp_path / "dev")
    assert "monitoring: Azure Monitor managed Prometheus; dcgm-exporter on dev; rule groups aks-gpu-health" in printed
    assert "PrometheusRuleGroup" in printed and "PodMonitor" in printed


@pytest.mark.parametrize(("stack", "manifest"), [("prod", "dcgm-exporter"), ("amd", "amd-metrics-exporter")])
def test_the_stacks_own_admission_policy_admits_its_exporters(
    capsys: pytest.CaptureFixture[str], stack: str, manifest: str
) -> None:
    """The exporters tolerate the GPU taints without asking for a GPU, which the placement policy refuses elsewhere:
    they must land in a namespace it exempts, or the deploy fails at the API server."""
    from tests.conformance import planned

    path = planned(stack).out_dir / "manifests" / f"daemonset-gpu-resources-{manifest}.yaml"
    code = main(["admission", "check", "--stack", stack, "--project-dir", str(PROJECT_DIR), "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert '"allowed": true' in out


def test_an_unwritable_out_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "--stack", "dev", "--out", str(tmp_path / "missing" / "rules.yaml"))
    assert code == 2 and out == "" and "cannot write" in err
