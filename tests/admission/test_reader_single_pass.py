"""The reader's single pass over libyaml's events (admission/reader.py ``_plain_documents``, issue 40 C3: a 75,000-key
Pod took a second to read) reads a YAML file exactly as PyYAML's ``load_all`` with the reader's strict loader does:
the same values, of the same types, or it leaves the file to PyYAML, which then gives the same objects or the same
error. Hand-made scalars first (YAML 1.1's booleans, octals, sexagesimals, timestamps, the empty scalar), then
generated files (hypothesis)."""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aks_gpu.admission import reader
from aks_gpu.admission.reader import MAX_DEPTH, InputError, read_documents
from tests.admission.cost_objects import gpu_pod_with_node_selector_keys

# Every first character an implicit resolver claims, and the values PyYAML reads as something other than a string.
SCALARS = (
    "yes", "No", "on", "OFF", "y", "n", "true", "False", "~", "null", "Null", "", "0", "010", "0o17", "0x1F", "0b101",
    "1_000", "-1", "+1", "1:20", "-1:30:00", "1.5", "1e3", "6.8523015e+5", "1_0.5", ".inf", "-.INF", ".NaN", ".", "-",
    "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "1.0.0", "0.1.2a", "12345678901234567890",
    "+.5", "0x", "tRUE", "nvidia.com/gpu", "example.com/key-1", "<<", "=", "'quoted'", '"double"', "a b", "x: y",
)  # fmt: skip


def typed(value: Any) -> Any:
    """``value`` with each scalar's type (bool and int, str and date are told apart) and NaN comparable."""
    if isinstance(value, dict):
        return ("map", [(typed(key), typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [typed(item) for item in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if isinstance(value, (datetime, date)):
        return (type(value).__name__, value.isoformat())
    return (type(value).__name__, value)


def pyyaml(text: str) -> Any:
    """What the reader read before the single pass: the documents, or the error PyYAML raises."""
    try:
        return typed(list(yaml.load_all(text, Loader=reader._StrictLoader)))
    except (yaml.YAMLError, ValueError) as error:
        return ("error", type(error).__name__)


def same_as_pyyaml(text: str) -> bool:
    """The single pass reads ``text`` as PyYAML does, or leaves it to PyYAML; True where it read it itself."""
    read = reader._plain_documents(text)
    if read is None:
        return False
    assert typed(read) == pyyaml(text), text
    return True


@pytest.mark.parametrize("scalar", SCALARS)
def test_every_scalar_is_read_as_pyyaml_reads_it_as_a_value_a_key_and_in_a_list(scalar: str) -> None:
    for text in (f"v: {scalar}\n", f"{scalar}: v\n", f"- {scalar}\n- [{scalar}, x]\n", f"{{k: {scalar}}}\n", f"{scalar}\n"):
        same_as_pyyaml(text)


def test_a_manifest_and_the_hostile_pod_are_read_in_the_single_pass() -> None:
    manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: gpu-training}\nspec:\n  containers:\n  - {name: c}\n"
    assert same_as_pyyaml(manifest)
    assert same_as_pyyaml(f"---\n{manifest}---\n{manifest}...\n---\n")  # several documents, an empty one
    assert same_as_pyyaml(yaml.safe_dump(gpu_pod_with_node_selector_keys(2_000)))
    assert same_as_pyyaml("")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a: &x {b: 1}\nc: *x\n", "an anchor and its alias"),
        ("base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n", "a merge key"),
        ("= : 1\n", "a value key"),
        ("a: !!str 1\n", "an explicit tag"),
        ("a: !custom 1\n", "a tag PyYAML has no constructor for"),
        ("a: 1\na: 2\n", "a duplicate key"),
        ("? [a, b]\n: c\n", "a list as a key"),
        ("a: [1, 2\n", "not YAML"),
        ("a: " + "1" * 5000 + "\n", "an integer Python will not read"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nesting past the limit"),
    ],
)
def test_what_the_single_pass_leaves_to_pyyaml(text: str, why: str) -> None:
    assert reader._plain_documents(text) is None, why


def outcome(text: str) -> Any:
    """What the check makes of a file: its objects (source, values, why refused) or the one error."""
    try:
        return [(item.source, typed(item.obj), item.refused, item.unrendered) for item in read_documents(text, "f.yaml")]
    except InputError as error:
        return str(error)


MANIFEST = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: gpu-training}\nspec:\n  containers:\n  - {name: c}\n"


@pytest.mark.parametrize(
    "text",
    [
        MANIFEST,
        MANIFEST.replace("{name: c}", "{name: c, resources: {limits: {nvidia.com/gpu: 1.5}}}"),  # refused (422)
        MANIFEST.replace("namespace: gpu-training", "namespace: gpu-training, labels: {on: yes}"),  # a bool key
        MANIFEST.replace("{name: c}", "{name: c, env: [{name: A, value: 010}]}"),  # a number as a string field
        MANIFEST + "---\n" + MANIFEST.replace("kind: Pod", "kind: Pod\nkind: Pod"),  # a duplicate key
        MANIFEST.replace("- {name: c}", "- &c {name: c}\n  initContainers: [*c]"),
        "apiVersion: v1\nkind: List\nitems:\n- " + MANIFEST.replace("\n", "\n  "),
        "{{ .Values.x }}\n",
    ],
)
def test_a_file_ends_as_it_did_before_the_single_pass(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    single = outcome(text)
    monkeypatch.setattr(reader, "_plain_documents", lambda _: None)
    assert single == outcome(text)


def test_aliases_still_share_what_they_name_as_pyyaml_makes_them() -> None:
    [document] = read_documents("apiVersion: v1\nkind: ConfigMap\nmetadata: &m {name: a}\ndata: {x: y}\nextra: *m\n", "f")
    assert document.obj["extra"] is document.obj["metadata"]


KEYS = st.sampled_from([*SCALARS, "name", "kind", "a", "b"]) | st.text(max_size=6)
LEAVES = st.sampled_from(SCALARS) | st.text(max_size=8) | st.integers() | st.booleans() | st.none() | st.floats()
DATA = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=20)
# Bounded and deterministic, as the reader's other generated tests.
BUDGET = settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))


@BUDGET
@given(DATA, st.sampled_from([None, True, False]))
def test_any_dumped_data_is_read_as_pyyaml_reads_it(data: Any, flow: bool | None) -> None:
    same_as_pyyaml(yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True))
    same_as_pyyaml(yaml.safe_dump_all([data, data], default_flow_style=flow))


@BUDGET
@given(st.lists(st.sampled_from([*SCALARS, ": ", "- ", "\n", "  ", "{", "}", "[", "]", ", ", "#", "---\n", "?"]), max_size=14))
def test_any_text_of_yaml_s_pieces_is_read_as_pyyaml_reads_it(pieces: list[str]) -> None:
    same_as_pyyaml("".join(pieces))
