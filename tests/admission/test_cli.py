"""``aksgpu admission check``: output, JSON contract and exit codes, through ``register`` on a parser of our own."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from aks_gpu.cli import admission
from aks_gpu.cli.common import in_section, report_config_error
from aks_gpu.config.loader import load_stack_file
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack

OBJECTS = Path(__file__).parent / "objects"
GOOD = str(OBJECTS / "pods-good.yaml")
BAD = str(OBJECTS / "pods-bad.yaml")

# A training pod that asks for the inference pool. (A GPU pod without the GPU toleration is admitted: AKS's
# ExtendedResourceToleration adds it, tests/admission/objects/pods-bad.yaml.)
GPU_POD_ON_THE_WRONG_POOL = """\
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: gpu-training}
spec:
  nodeSelector: {aks-gpu/pool: infer}
  containers:
    - {name: trainer, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
"""
EXPECT = "expect.aks-gpu.test/"


def expected(*paths: str) -> list[dict[str, str]]:
    """Each object's expected decision and message, as its annotations give them (tests/admission/test_objects.py)."""
    found = []
    for path in paths:
        for document in yaml.safe_load_all(Path(path).read_text()):
            if document:
                annotations = document["metadata"]["annotations"]
                found.append(
                    {
                        "name": document["metadata"]["name"],
                        "decision": annotations[f"{EXPECT}decision"],
                        "message": annotations.get(f"{EXPECT}message", ""),
                    }
                )
    return found


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aksgpu")
    admission.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    try:
        exit_code: int = args.handler(args)
    except ConfigError as exc:  # what aks_gpu.cli.main does with it
        return report_config_error(exc)
    return exit_code


def test_all_admitted_exits_0_and_prints_a_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    documents = [d for d in yaml.safe_load_all(Path(GOOD).read_text()) if d]
    admitted = [d for d in documents if d["metadata"]["annotations"][f"{EXPECT}decision"] == "admitted"]
    good = tmp_path / "admitted.yaml"
    good.write_text(yaml.safe_dump_all(admitted))
    assert run(["admission", "check", "--stack", "prod", "--wide", str(good)]) == 0
    output = capsys.readouterr().out
    assert "validationActions ['Deny']" in output
    assert "Pod/trainer-limit-only" in output
    assert output.count("│ admitted │") == len(admitted) >= 10 and "│ denied" not in output
    assert f"{len(admitted)} admitted, 0 denied" in output


def test_any_denied_exits_1_and_names_the_container(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["admission", "check", "--stack", "prod", "--wide", GOOD, BAD]) == 1
    output = capsys.readouterr().out
    row = next(line for line in output.splitlines() if "Pod/amd-gpu " in line)
    # The row starts with the API server's own answer; the rule's message follows in it.
    assert "│ denied" in row and 'pods "amd-gpu" is forbidden:' in row
    assert "container rocm requests amd.com/gpu" in " ".join(output.split())
    cases = expected(GOOD, BAD)
    denied = sum(case["decision"] == "denied" for case in cases)
    assert output.count("│ denied") == denied >= 5
    assert f"{len(cases) - denied} admitted, {denied} denied" in output


def test_json_is_the_only_thing_on_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(GPU_POD_ON_THE_WRONG_POOL)
    assert run(["admission", "check", "--stack", "prod", "--json", str(pod)]) == 1
    decisions = json.loads(capsys.readouterr().out)
    assert decisions == [
        {
            "kind": "Pod",
            "namespace": "gpu-training",
            "name": "trainer",
            "decision": "denied",
            "allowed": False,
            # The API server's answer, verbatim (dispatcher.go; checked against cel-go + k8s.io/apiserver, see
            # tests/fixtures/kubernetes_cel/SOURCES.md).
            # (kube-apiserver 1.36.3 with AKS's admission plugins answered this Status message, 2026-12-02.)
            "message": "pods \"trainer\" is forbidden: ValidatingAdmissionPolicy 'aks-gpu-gpu-placement' with binding "
            "'aks-gpu-gpu-placement' denied request: namespace gpu-training runs training work: its GPU pods may "
            "select only training pools, with nodeSelector aks-gpu/workload: training or aks-gpu/pool: one of train "
            "(or the same in required node affinity); this pod selects no GPU pool of this stack",
            "messages": [
                "namespace gpu-training runs training work: its GPU pods may select only training pools, with "
                "nodeSelector aks-gpu/workload: training or aks-gpu/pool: one of train (or the same in required node "
                "affinity); this pod selects no GPU pool of this stack"
            ],
            # What a cluster also runs and this check could not (tests/admission/test_namespace_admission.py).
            "notEvaluated": [
                "ResourceQuota usage by other pods (the namespace is taken as empty: used = 0)",
                "other admission webhooks and policies of the cluster",
            ],
            "warnings": [],
        }
    ]


def test_warn_only_stack_still_reports_denied_and_says_what_the_cluster_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(GPU_POD_ON_THE_WRONG_POOL)
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
    # The file that cannot be read stops nothing else: the other file is still decided, and the exit status is 2.
    assert [d["name"] for d in json.loads(captured.out)] == [case["name"] for case in expected(GOOD)]
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


def test_an_empty_file_is_an_input_error_not_all_admitted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n# nothing here\n")
    assert run(["admission", "check", "--stack", "prod", "--json", str(empty)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "empty.yaml: no objects found" in captured.err


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        (b"\x89PNG\r\n\x1a\n\xff\xfe\x00", "not UTF-8 text (byte 0x89 at offset 0)"),
        (
            b"apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: [x]}\nspec: {containers: [{name: c}]}\n",
            "bad.yaml#1 Pod/p: metadata.namespace: a string is required, not a list",
        ),
        (
            b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: "
            + b"{nvidia.com/gpu: "
            + b"7" * 400
            + b"}}}]}\n",
            "bad.yaml#1 Pod/p: spec.containers[0].resources.limits['nvidia.com/gpu']: a 400-digit integer does not fit",
        ),
    ],
)
def test_hostile_files_exit_2_naming_file_and_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, complaint: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    assert run(["admission", "check", "--stack", "prod", str(bad)]) == 2
    assert complaint in " ".join(capsys.readouterr().err.split())


def test_a_folder_is_every_yaml_file_in_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "team" / "nested").mkdir(parents=True)
    (tmp_path / "team" / "nested" / "bad.yml").write_text(Path(BAD).read_text())
    (tmp_path / "team" / "good.yaml").write_text(Path(GOOD).read_text())
    (tmp_path / "team" / "README.md").write_text("not an object")
    assert run(["admission", "check", "--stack", "prod", "--json", str(tmp_path / "team")]) == 1
    names = [d["name"] for d in json.loads(capsys.readouterr().out)]
    assert names == [case["name"] for case in expected(GOOD, BAD)]  # good.yaml before nested/bad.yml: name order


def test_a_folder_without_objects_is_an_input_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing to check")
    assert run(["admission", "check", "--stack", "prod", str(tmp_path)]) == 2
    assert "a folder without any .yaml, .yml, .json file" in capsys.readouterr().err


def test_markup_in_names_is_shown_literally(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: '[bold red]x[/bold red]', namespace: '[/x]'}\n"
        "spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}\n"
    )
    assert run(["admission", "check", "--stack", "prod", str(pod)]) == 1
    output = capsys.readouterr().out
    assert "[bold red]x[/bold red]" in output and "[/x]" in output


@pytest.mark.parametrize("engine", ["cel-python", "cel-cpp"])
def test_either_engine_can_be_chosen(capsys: pytest.CaptureFixture[str], engine: str) -> None:
    assert run(["admission", "check", "--stack", "prod", "--engine", engine, "--json", BAD]) == 1
    decisions = json.loads(capsys.readouterr().out)
    assert [d["allowed"] for d in decisions] == [case["decision"] == "admitted" for case in expected(BAD)]


def test_past_500_objects_the_denied_ones_are_listed_and_the_admitted_counted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = "apiVersion: v1\nkind: Pod\nmetadata: {name: web-%d}\nspec: {containers: [{name: c}]}\n"
    bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: '[/x]-%d', namespace: default}\n"
    bad += "spec: {nodeName: n, containers: [{name: c}]}\n"
    many = tmp_path / "many.yaml"
    many.write_text("---\n".join([good % i for i in range(600)] + [bad % i for i in range(3)]))
    assert run(["admission", "check", "--stack", "prod", str(many)]) == 1
    output = capsys.readouterr().out
    assert "web-1 " not in output and output.count("denied Pod/[/x]-") == 3
    assert (
        "denied Pod/[/x]-2 in default (" in output
        and "with binding 'aks-gpu-gpu-placement' denied request: spec.nodeName is set (n)" in output
    )
    assert "600 admitted, 3 denied (more than 500 objects: only the denied ones are listed" in " ".join(output.split())


SYSTEM_PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: agent, namespace: gpu-resources}
spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: v1
kind: Pod
metadata: {name: agent, namespace: kube-system}
spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: team-x}
spec: {containers: [{name: c, image: busybox}]}
"""


def test_a_system_namespace_is_called_one_not_a_namespace_the_stack_does_not_create(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(SYSTEM_PODS)
    assert run(["admission", "check", "--stack", "prod", "--json", str(pods)]) == 0
    first = [d["notEvaluated"][0] for d in json.loads(capsys.readouterr().out)]
    assert first == [
        "Pod Security and ResourceQuota of namespace gpu-resources, a system namespace (aks-gpu runs its agents there)",
        "Pod Security and ResourceQuota of namespace kube-system, a system namespace (AKS runs its agents there)",
        "Pod Security and ResourceQuota of a namespace the stack does not create (no workload namespace)",
    ]
    # Without GPU pools the stack creates no gpu-resources: the exemption stays, and the words say so.
    stack = tmp_path / "Pulumi.nopools.yaml"
    stack.write_text("config:\n  azure-native:location: swedencentral\n  aks-gpu:cluster: {resourceGroup: rg, name: aks}\n")
    assert run(["admission", "check", "--stack", "nopools", "--config-file", str(stack), "--json", str(pods)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["notEvaluated"][0] == (
        "Pod Security and ResourceQuota of namespace gpu-resources, the system namespace of the stack's GPU agents, "
        "created only with GPU pools (none here)"
    )


GENERATED = """\
apiVersion: v1
kind: Pod
metadata: {generateName: trainer-, namespace: default}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: v1
kind: Pod
metadata: {generateName: conflict-, namespace: gpu-training}
spec:
  nodeSelector: {serves.aks-gpu/training: "false"}
  containers: [{name: c, image: busybox}]
"""


def test_a_generatename_denial_names_the_object_as_the_server_does(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The registry names the object (prefix + 5 random characters) after mutating admission and before validating
    admission: a policy's denial names it, offline with "…" for the random part; PodNodeSelector, a mutating plugin,
    refuses before there is a name."""
    pods = tmp_path / "generated.yaml"
    pods.write_text(GENERATED)
    assert run(["admission", "check", "--stack", "prod", "--json", str(pods)]) == 1
    trainer, conflict = json.loads(capsys.readouterr().out)
    assert trainer["name"] == "trainer-\u2026"
    assert trainer["message"].startswith('pods "trainer-\u2026" is forbidden: ValidatingAdmissionPolicy')
    assert conflict["message"] == "pods is forbidden: pod node label selector conflicts with its namespace node label selector"
    assert conflict["name"] == "conflict-"
    assert run(["admission", "check", "--stack", "prod", str(pods)]) == 1
    assert "Pod/trainer-\u2026" in capsys.readouterr().out


def test_only_the_admission_sections_config_warnings_are_shown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A warning about monitoring changes no admission decision: the check leaves it to `aksgpu validate`; one about
    the admission section is shown."""
    text = (Path(__file__).parents[2] / "stacks" / "Pulumi.prod.yaml").read_text()
    text = text.replace(
        "  aks-gpu:admission:\n    validationActions: [Deny]\n",
        "  aks-gpu:admission:\n    validationActions: [Deny]\n    gpuNamespaces: [gpu-training]\n",
    )
    text = text.replace(
        "  aks-gpu:monitoring:\n", "  aks-gpu:monitoring:\n    prometheusOperator: {alertmanagerReceiver: team}\n"
    )
    stack = tmp_path / "Pulumi.warned.yaml"
    stack.write_text(text)
    config = ["--stack", "warned", "--config-file", str(stack)]
    # The stack as every command reads it: both warnings exist.
    warned = validate_stack(load_stack_file(stack), str(stack)).warnings
    assert {w.path for w in warned} >= {
        "aks-gpu:admission.gpuNamespaces",
        "aks-gpu:monitoring.prometheusOperator.alertmanagerReceiver",
    }
    assert in_section("aks-gpu:admission.gpuNamespaces", "admission")
    assert not in_section("aks-gpu:admissionExtra", "admission") and not in_section("aks-gpu:monitoring", "admission")
    assert run(["admission", "check", *config, "--json", GOOD]) in (0, 1)
    err = " ".join(capsys.readouterr().err.split())
    assert "aks-gpu:admission.gpuNamespaces: gpu-training is a workload namespace already" in err
    assert "alertmanagerReceiver" not in err and "monitoring" not in err
