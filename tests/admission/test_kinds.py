"""Kinds as the API server serves them: the plural a request and a denial name, and the scope (a cluster-scoped
object has no namespace: `-` in the table, null in JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from aks_gpu.admission.evaluate import evaluate
from aks_gpu.admission.kinds import guess_plural, kind_of, known_kinds
from aks_gpu.admission.policy import render_policy, workload_namespaces
from tests.admission.test_cli import run
from tests.conftest import stack_model

DEVICE_CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com, namespace: team-a}
spec:
  selectors:
    - cel: {expression: "device.driver == 'gpu.example.com'"}
---
apiVersion: example.com/v1
kind: GpuPolicy
metadata: {name: policy}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: team-a}
"""


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        # restmapper.go UnsafeGuessKindToResource: lower case, then the three endings.
        ("Pod", "pods"),
        ("Ingress", "ingresses"),
        ("NetworkPolicy", "networkpolicies"),
        ("Gateway", "gatewaies"),  # any final y: the guess is wrong here, hence the data file
        ("Endpoints", "endpoints"),
        ("DeviceClass", "deviceclasses"),
        ("", ""),
    ],
)
def test_an_unknown_kind_is_pluralised_as_the_rest_mapper_guesses(kind: str, plural: str) -> None:
    assert guess_plural(kind) == plural


def test_a_kind_of_the_data_file_keeps_its_own_plural_and_scope() -> None:
    assert kind_of("gateway.networking.k8s.io", "Gateway").plural == "gateways"
    assert not kind_of("resource.k8s.io", "DeviceClass").namespaced
    assert kind_of("example.com", "GpuPolicy").namespaced  # unknown: namespaced, guessed
    # The same kind name in another group is another resource (Volcano's Job is not batch's).
    assert kind_of("batch.volcano.sh", "Job") != kind_of("batch", "Job")
    keys = [(entry.group, entry.kind) for entry in known_kinds()]
    assert len(keys) == len(set(keys))


def test_a_cluster_scoped_object_is_shown_without_a_namespace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "dra.yaml"
    manifest.write_text(DEVICE_CLASS)
    assert run(["admission", "check", "--stack", "prod", "--json", str(manifest)]) == 0
    decisions = json.loads(capsys.readouterr().out)
    assert [(d["kind"], d["namespace"]) for d in decisions] == [
        ("DeviceClass", None),  # its metadata.namespace is ignored, as the server clears it
        ("GpuPolicy", "default"),
        ("Gateway", "team-a"),
    ]
    assert run(["admission", "check", "--stack", "prod", "--wide", str(manifest)]) == 0
    output = " ".join(capsys.readouterr().out.split())
    assert "│ DeviceClass/gpu.example.com │ - │ admitted │" in output
    assert "deviceclasss" not in output and "gatewaies" not in output
    # The note names the resource as the server does.
    model = stack_model("prod")
    [device_class, _, gateway] = evaluate(yaml.safe_load_all(DEVICE_CLASS), render_policy(model), workload_namespaces(model))
    assert "deviceclasses.resource.k8s.io (CREATE) is not a resource the policy checks" in device_class.note
    assert "gateways.gateway.networking.k8s.io (CREATE)" in gateway.note
