"""The code in README.md and docs/*.md keeps working: Python compiles (and the composing guide's stack runs against
the platform's outputs), YAML parses, stack-config examples pass the stack file's validation, and the GPU pod
examples would be admitted by the platform's policy."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.admission.evaluate import evaluate
from aks_gpu.admission.kinds import known_kinds
from aks_gpu.admission.policy import RESOURCE_RULES, render_policy, workload_namespaces
from aks_gpu.mock_engine import PlanResult, run_mocked
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, raw_stack, stack_model
from tests.examples.test_team_stack import PLATFORM_STACK, PlatformStackMocks, manifest, prod_outputs, restricted_prod

DOCUMENTS = [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").glob("*.md"))]
# An opening or closing fence, possibly indented (a block inside a list item).
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*$")
STACK_CONFIG_NAMESPACES = ("aks-gpu", "azure-native")
# The kinds whose pod spec the GPU admission policy reads.
POD_KINDS = frozenset(
    known.kind for known in known_kinds() if any(known.group == g and known.plural in rs for g, rs in RESOURCE_RULES)
)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(PROJECT_DIR)}:{self.line}"


def code_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, each dedented by its fence's indentation."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, end = opening["indent"], index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
        blocks.append(Block(path, index + 2, opening["lang"], "\n".join(body) + "\n"))
        index = end + 1
    return blocks


@functools.cache
def all_blocks() -> tuple[Block, ...]:
    return tuple(block for path in DOCUMENTS for block in code_blocks(path))


def of_lang(*langs: str) -> list[Block]:
    return [block for block in all_blocks() if block.lang in langs]


def yaml_documents() -> list[tuple[Block, Any]]:
    return [(block, document) for block in of_lang("yaml", "yml") for document in yaml.safe_load_all(block.text)]


def stack_config_of(document: Any) -> dict[str, Any] | None:
    """A stack file's config (``config:`` and namespaced keys, or the keys alone); None for other YAML."""
    if isinstance(document, dict) and set(document) == {"config"}:
        document = document["config"]
    if not isinstance(document, dict) or not document:
        return None
    if all(isinstance(key, str) and key.partition(":")[0] in STACK_CONFIG_NAMESPACES and ":" in key for key in document):
        return document
    return None


# ---------------------------------------------------------------- the parser itself


def test_code_blocks_are_found_with_their_language_and_indentation(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\nx = 1\n```\n\n- item\n\n  ```yaml\n  a: 1\n  ```\n\n```\nplain\n```\n", encoding="utf-8")
    found = [(b.lang, b.text, b.line) for b in code_blocks(page)]
    assert found == [("python", "x = 1\n", 4), ("yaml", "a: 1\n", 10), ("", "plain\n", 14)]


# ---------------------------------------------------------------- Python


def test_python_blocks_compile() -> None:
    blocks = of_lang("python", "py")
    assert blocks, "no Python block in README.md or docs/"
    for block in blocks:
        compile(block.text, block.where, "exec")


def composing_stack_block() -> Block:
    [block] = [b for b in of_lang("python") if b.path.name == "composing.md" and "StackReference(" in b.text]
    return block


def test_the_composing_guides_python_stack_runs_against_the_platforms_outputs() -> None:
    block = composing_stack_block()
    assert PLATFORM_STACK in block.text
    code = compile(block.text, block.where, "exec")

    def program() -> None:
        # The docs' own example, run under mocks.
        exec(code, {"__name__": "__main__"})

    mocks = PlatformStackMocks({PLATFORM_STACK: prod_outputs()})
    result: PlanResult = run_mocked(program, "dev", project="team", mocks=mocks)
    assert result.outputs["namespace"] == "team-vision"
    assert manifest(result, "ResourceQuota", "team-vision", "gpu-quota")["spec"]["hard"] == {"requests.nvidia.com/gpu": "16"}


# ---------------------------------------------------------------- YAML


def test_yaml_blocks_parse() -> None:
    assert of_lang("yaml", "yml")
    for block in of_lang("yaml", "yml"):
        try:
            list(yaml.safe_load_all(block.text))
        except yaml.YAMLError as error:
            pytest.fail(f"{block.where}: {error}")


def test_stack_config_examples_pass_the_stack_file_validation() -> None:
    # Each example on top of the prod stack file (examples show only the keys they are about).
    examples = [(block, config) for block, document in yaml_documents() if (config := stack_config_of(document))]
    assert len(examples) >= 2, [block.where for block, _ in examples]
    for block, config in examples:
        validate_stack({**raw_stack("prod"), **config}, block.where)


def test_the_stack_config_detector_leaves_other_yaml_alone() -> None:
    assert stack_config_of({"config": {"aks-gpu:workloads": []}}) == {"aks-gpu:workloads": []}
    assert stack_config_of({"aks-gpu:gpuPools": []}) == {"aks-gpu:gpuPools": []}
    assert stack_config_of({"apiVersion": "v1", "kind": "Pod"}) is None
    assert stack_config_of({"config": {"platformStack": {"type": "string"}}}) is None


def test_gpu_pod_examples_are_admitted_by_the_platforms_policy() -> None:
    # Pods and Jobs the docs show in the prod stack's namespaces, judged the way the cluster would.
    examples = [
        (block, document)
        for block, document in yaml_documents()
        if isinstance(document, dict)
        and document.get("kind") in POD_KINDS
        and document.get("metadata", {}).get("namespace") in workload_namespaces(stack_model("prod"))
    ]
    assert examples
    for model in (stack_model("prod"), restricted_prod()):
        decisions = evaluate([d for _, d in examples], render_policy(model), workload_namespaces(model))
        for (block, _), decision in zip(examples, decisions, strict=True):
            assert decision.actions, f"{block.where}: {decision.note}"
            assert decision.allowed, f"{block.where}: {decision.messages}"


def test_the_composing_guides_pools_output_is_prods_as_planned() -> None:
    """The guide shows `pools` of prod as the platform exports it, every key camelCase (the PoolOutput TypedDict)."""
    import json

    from tests.conftest import planned_result

    guide = PROJECT_DIR / "docs" / "composing.md"
    [shown] = [json.loads(block.text) for block in code_blocks(guide) if block.lang == "json" and '"train"' in block.text]
    assert shown == planned_result("prod").outputs["pools"]
