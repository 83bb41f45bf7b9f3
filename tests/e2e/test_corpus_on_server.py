"""The acceptance corpus (tests/fixtures/admission-corpus/) against the real API server of the prod stack's local
cluster: its expectations.yaml, which tests/admission/test_corpus.py holds `aksgpu admission check` to, must be what
the server decides, every run, so a change of the stack or the policy that turns a decision around shows here first.

What the server does with each object: a built-in object is created (dry run) as written; then each Pod it will have
created, from its template or, for a custom resource, from each template its operator reads (the model of
`aks_gpu.admission.workload_pods`, data/operator_pod_templates.yaml: the local cluster runs no operator), is created
(dry run) in the object's namespace, after AKS's mutating plugins, the policies, Pod Security and the quota, as its
controller would create it. The first refusal is the object's: `the pods it creates would be refused: ...` (or `the
pods its operator creates from <template path> would be refused: ...`), as the check words it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from aks_gpu.admission.check import pods_of
from tests.admission.test_corpus import EXPECTED, MANIFESTS
from tests.e2e.conftest import Clusters, LocalCluster
from tests.e2e.kube import Server, built_in

STACK = "prod"
FORBIDDEN = " is forbidden: "


@pytest.fixture(scope="module")
def server(clusters: Clusters) -> Iterator[Server]:
    prod: LocalCluster = clusters.get(STACK)
    yield Server(prod.kubeconfig)


def corpus() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.name}/{doc['metadata']['name']}", doc)
        for path in sorted(MANIFESTS.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def refusal(line: str) -> str:
    return line.split(FORBIDDEN, 1)[1]


def server_decides(server: Server, obj: dict[str, Any]) -> dict[str, str]:
    if built_in(obj):
        own = server.create(obj, dry_run=True)
        assert own.decision in ("admitted", "denied"), own
        if own.decision == "denied":
            return {"decision": "denied", "message": refusal(own.line)}
    pods, from_operator = pods_of(obj)
    for index, made in enumerate(pods):
        pod = copy.deepcopy(made.pod)
        metadata = pod.setdefault("metadata", {})
        metadata["namespace"] = obj["metadata"]["namespace"]
        metadata.setdefault("name", f"{obj['metadata']['name']}-{index}")
        answer = server.create(pod, dry_run=True)
        assert answer.decision in ("admitted", "denied"), (made.path, answer)
        if answer.decision == "denied":
            by = f"its operator creates from {made.path}" if from_operator else "it creates"
            return {"decision": "denied", "message": f"the pods {by} would be refused: {refusal(answer.line)}"}
    return {"decision": "admitted"}


@pytest.mark.parametrize(("name", "obj"), corpus(), ids=[name for name, _ in corpus()])
def test_the_server_decides_each_object_as_the_corpus_records(server: Server, name: str, obj: dict[str, Any]) -> None:
    expect = EXPECTED[name]
    said = server_decides(server, obj)
    assert said["decision"] == expect["decision"], said
    if expect["decision"] == "denied":
        assert said["message"].startswith(expect["message"]), said["message"]


def test_every_object_of_the_corpus_has_its_recorded_decision() -> None:
    assert {name for name, _ in corpus()} == set(EXPECTED)
