"""The table of what ARM and AKS refuse (components/aks_gpu/data/arm_refusals.yaml): every rule has its source, its example
is refused at its key with exit 2, and no rule refuses anything the table does not list."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.aks_facts import Refusal, kubernetes_calendar, refusal_tag, refusals
from aks_gpu.cli import main
from aks_gpu.config import rules as rules_module
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, minimal_raw

SOURCE = "stacks/Pulumi.test.yaml"
ON = kubernetes_calendar().read_on


def with_example(refusal: Refusal) -> dict[str, Any]:
    raw = copy.deepcopy(minimal_raw())
    example = refusal.example
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], **example.get("cluster", {})}
    raw["aks-gpu:gpuPools"][0] = {**raw["aks-gpu:gpuPools"][0], **example.get("pool", {})}
    raw.update(example.get("stack", {}))
    return raw


def test_the_base_of_every_example_is_valid() -> None:
    validate_stack(minimal_raw(), SOURCE, today=ON)


@pytest.mark.parametrize("refusal", list(refusals().values()), ids=list(refusals()))
def test_each_refusal_is_refused_at_its_key(refusal: Refusal) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_stack(with_example(refusal), SOURCE, today=ON)
    tagged = [p for p in caught.value.errors if p.severity == "error" and refusal_tag(refusal.id) in p.message]
    assert [p.path for p in tagged] == [refusal.reported_at], [p.render(SOURCE) for p in caught.value.errors]


@pytest.mark.parametrize("refusal", list(refusals().values()), ids=list(refusals()))
def test_each_refusal_names_where_it_comes_from(refusal: Refusal) -> None:
    assert refusal.source.startswith("https://"), refusal.id
    assert refusal.quote.strip() and refusal.refuses.strip()
    # The documented key is the reported key with its list index generalised.
    assert re.sub(r"\[\d+\]", "[]", refusal.reported_at) == refusal.key


def test_the_rules_emit_only_refusals_the_table_has_and_every_one_it_has() -> None:
    # The rules are a package (config/rules/): every module of it is read.
    text = "".join(path.read_text(encoding="utf-8") for path in sorted(Path(rules_module.__file__).parent.glob("*.py")))
    emitted = set(re.findall(r'refusal_tag\("([a-z0-9-]+)"\)', text))
    assert emitted == set(refusals())


def test_an_unlisted_refusal_cannot_be_raised() -> None:
    with pytest.raises(KeyError):
        refusal_tag("made-up-rule")


def test_a_refused_stack_exits_2_naming_the_key_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refusal = refusals()["spot-no-max-surge"]
    stack_file = tmp_path / "Pulumi.bad.yaml"
    stack_file.write_text(yaml.safe_dump({"config": with_example(refusal)}), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["plan", "--stack", "bad", "--config-file", str(stack_file), "--out", str(out), "--project-dir", str(PROJECT_DIR)]
    assert main(argv) == 2
    assert "aks-gpu:gpuPools[0].upgrade.maxSurge" in capsys.readouterr().err
    assert not out.exists()


def test_the_config_docs_table_lists_every_refusal() -> None:
    docs = (PROJECT_DIR / "docs" / "config.md").read_text(encoding="utf-8")
    section = docs.split("## What Azure would refuse, refused in the plan", 1)[1].split("\n## ", 1)[0]
    assert sorted(id_ for id_ in refusals() if f"`{id_}`" not in section) == []
