"""Generated stack files and config values (hypothesis): the loader and the validator end in a config or a
``ConfigError`` with bounded, one-line messages, never another exception. The budget is fixed (a few hundred
examples, the same ones every run) so the suite stays lean and its results repeatable."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aks_gpu.config.loader import load_stack_file
from aks_gpu.config.problems import MAX_MESSAGE_SHOWN, MAX_PATH_SHOWN, ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, minimal_raw

BUDGET = settings(max_examples=150, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
PROD_TEXT = (PROJECT_DIR / "stacks" / "Pulumi.prod.yaml").read_text(encoding="utf-8")
# What a hostile value is made of: YAML indicators, rich markup, control characters, huge numbers, tags.
HOSTILE_TEXT = st.sampled_from(
    ["[bold red]DEV[/bold red]", "[/x]", "\x1b[31mred", "a\nb", "&a", "*a", "!!binary", "%TAG", "? x", "- -", "{", "}", "'", '"']
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    HOSTILE_TEXT,
    st.integers(min_value=10**30, max_value=10**60),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)),
    max_leaves=20,
)
# Text a stack file may hold around and inside the real one.
FRAGMENTS = st.sampled_from(
    [
        ": ",
        "\n",
        "  ",
        "- ",
        "&x ",
        "*x",
        "!!set ",
        "!!binary ",
        "!!python/object:os.system ",
        "<<: *x\n",
        "[",
        "]",
        "{",
        "}",
        "? ",
        "---\n",
        "...\n",
        "%YAML 1.1\n",
        "\t",
        "\x00",
        "\ufeff",
        "2025-01-01",
        ".nan",
        "1e999",
        "13:30",
        "yes",
        "~",
        "|\n",
        ">-\n",
        "'",
        '"',
        "#",
        "@",
        "`",
        "9" * 500,
    ]
)


def assert_clean(error: ConfigError) -> None:
    assert error.problems, "a ConfigError says what is wrong"
    for problem in error.problems:
        line = problem.render(error.source)
        assert "\n" not in line
        assert len(line) <= 2 * MAX_PATH_SHOWN + MAX_MESSAGE_SHOWN + 4


def check_file(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    try:
        raw = load_stack_file(path)
    except ConfigError as error:
        assert_clean(error)
        return
    assert isinstance(raw, dict) and all(isinstance(key, str) for key in raw)
    try:
        validate_stack(raw, str(path))
    except ConfigError as error:
        assert_clean(error)


@BUDGET
@given(cut=st.integers(min_value=0, max_value=len(PROD_TEXT)), inserted=st.lists(FRAGMENTS, max_size=4))
def test_a_stack_file_with_fragments_inserted_loads_or_is_refused(tmp_path_factory: Any, cut: int, inserted: list[str]) -> None:
    text = PROD_TEXT[:cut] + "".join(inserted) + PROD_TEXT[cut:]
    check_file(tmp_path_factory.mktemp("f") / "Pulumi.x.yaml", text.encode("utf-8", errors="surrogatepass"))


@BUDGET
@given(content=st.binary(max_size=300))
def test_arbitrary_bytes_load_or_are_refused(tmp_path_factory: Any, content: bytes) -> None:
    check_file(tmp_path_factory.mktemp("b") / "Pulumi.x.yaml", content)


@BUDGET
@given(value=VALUES)
def test_any_value_dumped_as_yaml_under_any_key(tmp_path_factory: Any, value: Any) -> None:
    try:
        body = yaml.safe_dump({"config": {"aks-gpu:cluster": value, "kubernetes:x": value}}, allow_unicode=True)
    except yaml.YAMLError:
        return
    check_file(tmp_path_factory.mktemp("v") / "Pulumi.x.yaml", body.encode("utf-8", errors="surrogatepass"))


KEYS = st.sampled_from(
    [
        "aks-gpu:cluster",
        "aks-gpu:gpuPools",
        "aks-gpu:workloads",
        "aks-gpu:admission",
        "aks-gpu:validation",
        "aks-gpu:storage",
        "aks-gpu:devicePlugin",
        "azure-native:location",
        "kubernetes:x",
        "aks-gpu:nope",
    ]
)


@BUDGET
@given(
    key=KEYS,
    path=st.lists(st.one_of(st.integers(0, 2), st.sampled_from(["name", "vmSize", "tags", "labels", "x"])), max_size=3),
    value=VALUES,
    as_json=st.booleans(),
)
def test_any_value_at_any_place_of_a_valid_config_validates_or_is_refused(
    key: str, path: list[Any], value: Any, as_json: bool
) -> None:
    raw: dict[str, Any] = copy.deepcopy(minimal_raw())
    if as_json:
        import json

        raw[key] = json.dumps(value)  # Pulumi hands structured config to the program as JSON text
    else:
        target: Any = raw
        parent: Any = None
        step: Any = key
        for part in [key, *path]:
            parent, step = target, part
            if isinstance(target, dict) and isinstance(part, str):
                target = target.setdefault(part, {})
            elif isinstance(target, list) and isinstance(part, int) and part < len(target):
                target = target[part]
            else:
                break
        if isinstance(parent, dict) or (isinstance(parent, list) and isinstance(step, int) and step < len(parent)):
            parent[step] = value
    try:
        validate_stack(raw, "stacks/Pulumi.x.yaml")
    except ConfigError as error:
        assert_clean(error)
