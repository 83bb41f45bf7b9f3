"""The admission check's reader on hostile input: every file ends in objects or one InputError that names the file and
the object, never another exception, and within bounds. Hand-made cases first, then generated ones (hypothesis)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aks_gpu.admission.cel import compile_expression
from aks_gpu.admission.engine import engine_named
from aks_gpu.admission.evaluate import evaluate
from aks_gpu.admission.policy import render_policy, workload_namespaces
from aks_gpu.admission.reader import MAX_DEPTH, InputError, read_text
from tests.conftest import stack_model

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: gpu-training}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
    - {name: trainer, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
"""


def refused(text: str) -> str:
    with pytest.raises(InputError) as error:
        read_text(text, "f.yaml")
    return str(error.value)


API_VERSIONS = {"Deployment": "apps/v1", "Job": "batch/v1", "CronJob": "batch/v1"}


def doc(metadata: str = "{name: p}", spec: str | None = "{containers: [{name: c}]}", kind: str = "Pod") -> str:
    # A built-in kind in its own group: a Deployment in v1 would be another resource (kubectl: no matches for kind).
    text = f"apiVersion: {API_VERSIONS.get(kind, 'v1')}\nkind: {kind}\nmetadata: {metadata}\n"
    return text + (f"spec: {spec}\n" if spec is not None else "")


def limits(value: str) -> str:
    return f"{{containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: {value}}}}}}}]}}"


# cel-python raises the recursion limit when it builds its parser; done here, before hypothesis watches the limit.
compile_expression("1")
GPU_FIELD = "spec.containers[0].resources.limits['nvidia.com/gpu']"


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "f.yaml: no objects found"),
        ("---\n---\n", "f.yaml: no objects found"),
        ("# only a comment\n", "f.yaml: no objects found"),
        ("kind: List\napiVersion: v1\nitems: []\n", "f.yaml: no objects found"),
        (doc(metadata="oops"), "f.yaml#1 Pod/(no name): metadata: a mapping is required, not a string"),
        (doc(spec="[1]"), "f.yaml#1 Pod/p: spec: a mapping is required, not a list"),
        (doc(metadata="{name: p, labels: [a, b]}"), "metadata.labels: a mapping is required, not a list"),
        (doc(metadata="{name: p, labels: {version: 1}}"), "metadata.labels.version: a string is required, not a number"),
        (doc(metadata="{name: 7}"), "metadata.name: a string is required"),
        (doc(spec="{containers: []}"), "spec.containers: a non-empty list of containers is required"),
        (doc(spec=None), "f.yaml#1 Pod/p: spec: required for a Pod"),
        (
            doc(metadata="{name: d}", spec="{template: 3}", kind="Deployment"),
            "Deployment/d: spec.template: a mapping is required",
        ),
        (doc(spec=limits("9" * 400)), f"{GPU_FIELD}: a 400-digit integer does not fit in 64 bits"),
        (doc(spec=limits("'" + "9" * 400 + "'")), f"{GPU_FIELD}: not a quantity the API server accepts: quantity too long"),
        (doc(spec=limits(".inf")), "inf is not a number JSON can carry"),
        (doc(spec=limits("'1e999999'")), "quantity exponent out of range"),
        (doc(spec=limits("two")), f"{GPU_FIELD}: not a quantity the API server accepts"),
        (doc(spec="{containers: [{name: c}], tolerations: {key: a}}"), "spec.tolerations: a list is required, not a mapping"),
        (doc(spec="{containers: [{name: c}], nodeName: 5}"), "spec.nodeName: a string is required"),
        (doc() + "metadata: {name: q}\n", "duplicate key 'metadata'"),
        # ConfigMap and Secret data are maps of strings; a number there never reaches the device-env policy.
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\ndata: {NVIDIA_VISIBLE_DEVICES: 1}\n",
            "ConfigMap/m: data.NVIDIA_VISIBLE_DEVICES: a string is required, not a number",
        ),
        (doc("{name: m}", None, "ConfigMap") + "binaryData: [a]\n", "ConfigMap/m: binaryData: a mapping is required"),
        (doc("{name: s}", None, "Secret") + "stringData: {K: true}\n", "Secret/s: stringData.K: a string is required"),
        (
            doc(spec="{containers: [{name: c, env: [{name: X, value: 1}]}]}"),
            "spec.containers[0].env[0].value: a string is required",
        ),
        (doc(metadata="{name: p, annotations: {1: a}}"), "key 1 is not a string"),
        (doc(spec="{containers: [{name: c}], x: !!binary aGVsbG8=}"), "a YAML bytes value has no JSON form"),
        (doc(spec="{containers: [{name: c}], x: !!set {a}}"), "has no JSON form"),
        ("\x00\x01\x02", "not valid YAML"),
    ],
)
def test_refused_with_the_file_the_object_and_the_field(text: str, complaint: str) -> None:
    assert complaint in refused(text)


def test_deep_nesting_is_refused_not_a_crash() -> None:
    assert f"nested deeper than {MAX_DEPTH} levels" in refused(POD + "  x: " + "[" * 200 + "]" * 200 + "\n")
    assert "f.yaml" in refused("[" * 20_000 + "]" * 20_000)


def test_an_alias_bomb_is_stopped_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n" + "\n".join("  " + line for line in lines) + "\n"
    started = time.perf_counter()
    assert "more than 2,000,000 values" in refused(bomb)
    assert time.perf_counter() - started < 20


def test_good_objects_come_through_with_their_source() -> None:
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(POD)]})
    objects = read_text(POD + "---\n" + listed, "f.yaml")
    assert [item.source for item in objects] == ["f.yaml#1", "f.yaml#2.items[0]"]
    assert objects[0].obj["metadata"]["name"] == "trainer"


# ---------------------------------------------------------------- generated input

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["0", "1", "0m", "1000m", "2Gi", "1e3", "-1", "nvidia.com/gpu", "Exists", "NoSchedule", "[/x]"]),
)
KEYS = st.sampled_from(
    ["metadata", "spec", "name", "namespace", "labels", "containers", "initContainers", "ephemeralContainers", "resources",
     "limits", "requests", "nvidia.com/gpu", "tolerations", "key", "operator", "effect", "nodeName", "nodeSelector",
     "affinity", "env", "value", "template", "jobTemplate", "x"]
)  # fmt: skip
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5), max_leaves=30
)
KINDS = st.sampled_from(["Pod", "Deployment", "CronJob", "Job", "DaemonSet", "Namespace", "ConfigMap", "List"])


def mutated_pods() -> st.SearchStrategy[dict[str, Any]]:
    """The corpus's shape with any field replaced by anything."""
    base = yaml.safe_load(POD)

    def replace(path: list[str], value: Any, kind: str) -> dict[str, Any]:
        pod: dict[str, Any] = yaml.safe_load(POD)
        pod["kind"] = kind
        target: Any = pod
        for step in path[:-1]:
            target = target.setdefault(step, {}) if isinstance(target, dict) else target
        if isinstance(target, dict):
            target[path[-1]] = value
        return pod

    paths = st.lists(KEYS, min_size=1, max_size=4)
    return st.one_of(st.just(base), st.builds(replace, paths, VALUES, KINDS))


# Bounded and deterministic: the same 120 examples every run, and no example database written into the checkout.
BUDGET = settings(
    max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@BUDGET
@given(st.one_of(mutated_pods(), VALUES))
def test_any_document_is_read_or_refused_never_a_crash_and_evaluates(document: Any) -> None:
    try:
        text = yaml.safe_dump(document, allow_unicode=True)
    except yaml.YAMLError:
        return
    try:
        objects = read_text(text, "gen.yaml")
    except InputError as error:
        assert str(error).startswith("gen.yaml")
        return
    model = stack_model("prod")
    manifests = render_policy(model)
    by_engine = [
        evaluate([item.obj for item in objects], manifests, workload_namespaces(model), engine=engine_named(name))
        for name in ("cel-python", "cel-cpp")
    ]
    # What the reader lets through is something both engines judge, and alike.
    assert [(d.allowed, d.messages) for d in by_engine[0]] == [(d.allowed, d.messages) for d in by_engine[1]]
    for decision in by_engine[0]:
        assert not any("resulted in error" in message for message in decision.messages), decision.messages


@BUDGET
@given(st.text(max_size=200))
def test_any_text_is_read_or_refused(text: str) -> None:
    try:
        read_text(text, "t.yaml")
    except InputError as error:
        assert str(error).startswith("t.yaml")


JSON_POD = (
    '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "gpu-training", "labels": {"tier": %s}},'
    ' "spec": {"containers": [{"name": "c", "image": "busybox"}]}}'
)


def test_a_json_file_is_read_as_json_as_kubectl_reads_it() -> None:
    """kubectl decodes text that starts with `{` as JSON (YAMLOrJSONDecoder), where 1e3 is a number, and the API
    server refuses a number as a label value; YAML 1.1 would have read it as the string "1e3" and let it through.
    A stream of two JSON objects is two objects; a duplicate key is still refused."""
    assert "metadata.labels.tier: a string is required, not a number" in refused(JSON_POD % "1e3")
    assert [
        item.obj["metadata"]["labels"]["tier"] for item in read_text(JSON_POD % '"a"' + "\n" + JSON_POD % '"b"', "f.json")
    ] == [
        "a",
        "b",
    ]
    assert "duplicate key" in refused(JSON_POD.replace('"image": "busybox"', '"image": "busybox", "image": "x"') % '"a"')
