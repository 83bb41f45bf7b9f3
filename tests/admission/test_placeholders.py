"""Manifests not rendered yet: placeholders in a name, namespace or resource quantity make the object "not
evaluated" (with where and what to render), a template file is not evaluated as a whole, and the run's exit status
comes from what could be evaluated (2 only when nothing could). Refused objects get their own entry."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.admission.placeholders import placeholder_kind, placeholders
from aks_gpu.admission.quantity import Quantity
from tests.admission.test_cli import run

GOOD_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: ok, namespace: gpu-training}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}]
"""
UNRENDERED = """\
apiVersion: v1
kind: Pod
metadata: {name: "{{ .Values.name }}", namespace: gpu-training}
spec:
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: "${NAMESPACE}"}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: "<your-image>", resources: {limits: {nvidia.com/gpu: FILLED_BY_VALIDATOR}}}]
"""
CHART = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
{{- if .Values.gpu }}
  labels: {gpu: "true"}
{{- end }}
"""
REFUSED = """\
apiVersion: v1
kind: Pod
metadata: {name: request-below-limit, namespace: gpu-training}
spec:
  containers: [{name: c, image: busybox, resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}}]
"""
# A lowercase RFC 1123 label or subdomain: what the API server accepts as a namespace or a Pod's name.
DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("{{ .Values.gpus }}", "a Go/Helm template"),
        ('{{- include "x" . }}', "a Go/Helm template"),
        ("${NAMESPACE}", "an environment variable for envsubst"),
        ("$GPU_COUNT", "an environment variable for envsubst"),
        ("$(NAMESPACE)", "an environment variable for envsubst"),
        ("<your-namespace>", "a placeholder to replace"),
        ("FILLED_BY_VALIDATOR", "a placeholder to replace"),
        ("CHANGEME", "a placeholder to replace"),
        ("gpu-training", None),
        ("1", None),
        ("500m", None),
        ("2Gi", None),
        ("1E", None),
        ("nvidia.com/gpu", None),
    ],
)
def test_a_placeholder_is_told_from_a_value(value: str, kind: str | None) -> None:
    assert placeholder_kind(value) == kind


@pytest.mark.parametrize(
    "value", ["{{ .Values.gpus }}", "${NAMESPACE}", "$GPU_COUNT", "$(NS)", "<your-namespace>", "FILLED_BY_VALIDATOR", "TODO"]
)
def test_what_is_left_unevaluated_is_never_something_the_server_would_take_as_written(value: str) -> None:
    """Skipping an object can hide nothing: every placeholder is refused by the server as a name, a namespace and a
    quantity alike, so no object the server would admit is left out of the decision."""
    assert not DNS_NAME.match(value)
    with pytest.raises(ValueError):
        Quantity.parse(value)


def test_only_the_fields_a_decision_reads_are_looked_at() -> None:
    job: dict[str, Any] = {
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "<your-image>", "args": ["${X}"]}]}}},
    }
    assert placeholders(job) == []
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"{{ .Values.resource }}": "1"}}
    assert placeholders(job) == [
        "spec.template.spec.containers[0].resources.limits: '{{ .Values.resource }}' (a Go/Helm template)"
    ]


def test_unrendered_objects_are_not_evaluated_and_the_others_decide_the_exit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, "mixed.yaml", UNRENDERED + "---\n" + GOOD_POD)
    assert run(["admission", "check", "--stack", "prod", "--json", path]) == 0
    decisions = json.loads(capsys.readouterr().out)
    assert [(d["name"], d["decision"], d["allowed"]) for d in decisions] == [
        ("{{ .Values.name }}", "not evaluated", None),
        ("train", "not evaluated", None),
        ("ok", "admitted", True),
    ]
    assert decisions[1]["message"] == (
        "not rendered yet: metadata.namespace: '${NAMESPACE}' (an environment variable for envsubst); "
        "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]: 'FILLED_BY_VALIDATOR' (a placeholder to "
        "replace); render it first (helm template, kustomize build, envsubst) and check what it renders"
    )
    assert run(["admission", "check", "--stack", "prod", "--wide", path]) == 0
    output = " ".join(capsys.readouterr().out.split())
    assert "│ not evaluated │" in output and "1 admitted, 0 denied, 2 not evaluated" in output


def test_nothing_evaluated_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(["admission", "check", "--stack", "prod", "--json", write(tmp_path, "u.yaml", UNRENDERED)]) == 2
    assert {d["decision"] for d in json.loads(capsys.readouterr().out)} == {"not evaluated"}


def test_a_template_file_is_not_evaluated_not_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chart, good = write(tmp_path, "chart.yaml", CHART), write(tmp_path, "good.yaml", GOOD_POD)
    assert run(["admission", "check", "--stack", "prod", "--json", chart, good]) == 0
    captured = capsys.readouterr()
    assert [d["name"] for d in json.loads(captured.out)] == ["ok"]
    assert "not evaluated" in captured.err and "an unrendered template ({{ ... }} at line 5)" in captured.err
    assert "error" not in captured.err
    assert run(["admission", "check", "--stack", "prod", chart]) == 2  # nothing else to evaluate


def test_an_object_refused_before_admission_has_its_own_entry(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The server refuses it (422) and decides the rest of the file: so does the check, and --json says so."""
    path = write(tmp_path, "f.yaml", REFUSED + "---\n" + GOOD_POD)
    assert run(["admission", "check", "--stack", "prod", "--json", path]) == 2
    captured = capsys.readouterr()
    refused, admitted = json.loads(captured.out)
    assert refused == {
        "kind": "Pod",
        "namespace": "gpu-training",
        "name": "request-below-limit",
        "decision": "refused",
        "allowed": False,
        "message": 'Pod "request-below-limit" is invalid: spec.containers[0].resources.requests: Invalid value: "1": '
        "must be equal to nvidia.com/gpu limit of 2",
        "messages": [
            'Pod "request-below-limit" is invalid: spec.containers[0].resources.requests: Invalid value: "1": '
            "must be equal to nvidia.com/gpu limit of 2"
        ],
        "notEvaluated": [],
        "warnings": [],
    }
    assert admitted["decision"] == "admitted"
    assert "the API server refuses it before admission (422)" in " ".join(captured.err.split())
    # A wrongly typed field the server cannot decode: refused too, naming the field; the object keeps its identity.
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: [x]}\nspec: {containers: [{name: c}]}\n"
    typed = write(tmp_path, "t.yaml", pod)
    assert run(["admission", "check", "--stack", "prod", "--json", typed]) == 2
    [entry] = json.loads(capsys.readouterr().out)
    assert (entry["name"], entry["namespace"], entry["decision"]) == ("p", "default", "refused")
    assert entry["message"] == "metadata.labels: a mapping is required, not a list"
