"""``aksgpu admission check``: output, JSON contract and exit codes, through ``register`` on a parser of our own."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from components.cli import admission
from components.cli.common import report_config_error
from components.config import ConfigError

OBJECTS = Path(__file__).parent / "objects"
GOOD = str(OBJECTS / "pods-good.yaml")
BAD = str(OBJECTS / "pods-bad.yaml")

GPU_POD_WITHOUT_TOLERATION = """\
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: gpu-training}
spec:
  containers:
    - {name: trainer, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
"""


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aksgpu")
    admission.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    try:
        exit_code: int = args.handler(args)
    except ConfigError as exc:  # what components.cli.main does with it
        return report_config_error(exc)
    return exit_code


def test_all_admitted_exits_0_and_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["admission", "check", "--stack", "prod", GOOD]) == 0
    output = capsys.readouterr().out
    assert "validationActions ['Deny']" in output
    assert "Pod/trainer-limit-only" in output
    assert output.count("│ admitted │") == 12 and "│ denied" not in output
    assert "12 admitted, 0 denied" in output


def test_any_denied_exits_1_and_names_the_container(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["admission", "check", "--stack", "prod", GOOD, BAD]) == 1
    output = capsys.readouterr().out
    row = next(line for line in output.splitlines() if "Pod/gpu-no-tolerations" in line)
    assert "│ denied" in row and "container trainer requests" in row  # the message starts on the row
    assert output.count("│ denied") == 12
    assert "12 admitted, 12 denied" in output


def test_json_is_the_only_thing_on_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(GPU_POD_WITHOUT_TOLERATION)
    assert run(["admission", "check", "--stack", "prod", "--json", str(pod)]) == 1
    decisions = json.loads(capsys.readouterr().out)
    assert decisions == [
        {
            "kind": "Pod",
            "namespace": "gpu-training",
            "name": "trainer",
            "allowed": False,
            "messages": [
                "container trainer requests nvidia GPUs, but the pod does not tolerate the GPU node taint "
                "nvidia.com/gpu=present:NoSchedule: add tolerations: [{key: nvidia.com/gpu, operator: Exists, "
                "effect: NoSchedule}] to the pod spec"
            ],
        }
    ]


def test_warn_only_stack_still_reports_denied_and_says_what_the_cluster_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(GPU_POD_WITHOUT_TOLERATION)
    assert run(["admission", "check", "--stack", "dev", str(pod)]) == 1
    output = " ".join(capsys.readouterr().out.split())
    assert "validationActions ['Warn', 'Audit']" in output
    assert "denied" in output and "the cluster would admit the denied ones and only warn or audit" in output


def test_disabled_admission_admits_everything(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.off.yaml"
    stack.write_text(
        "config:\n  azure-native:location: swedencentral\n"
        "  aks-gpu:cluster: {resourceGroup: rg, name: aks}\n  aks-gpu:admission: {enabled: false}\n"
    )
    assert run(["admission", "check", "--stack", "off", "--config-file", str(stack), BAD]) == 0
    assert "admission is disabled" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("kind: Pod\nmetadata: {name: [unclosed\n", "not valid YAML"),
        ("apiVersion: v1\nmetadata: {name: p}\n", "object without kind"),
        ("- just\n- a list\n", "not a Kubernetes object"),
        ("apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, metadata: {name: p}}\n", "items[0]: object without kind"),
    ],
)
def test_unreadable_objects_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, complaint: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    assert run(["admission", "check", "--stack", "prod", "--json", GOOD, str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert complaint in " ".join(captured.err.split())


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(["admission", "check", "--stack", "prod", str(tmp_path / "nowhere.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_broken_stack_config_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.broken.yaml"
    stack.write_text("config:\n  azure-native:location: swedencentral\n  aks-gpu:admission: {validationActions: [Deny, Warn]}\n")
    assert run(["admission", "check", "--stack", "broken", "--config-file", str(stack), GOOD]) == 2
    assert "invalid stack config" in capsys.readouterr().err


def test_no_files_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        run(["admission", "check", "--stack", "prod"])
    assert exit_info.value.code == 2
