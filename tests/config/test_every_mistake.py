"""One run names every independent mistake of a stack file, as a compiler does (issue 40, A4): a value the models
refuse is set aside and the rest validated again and judged by the rules; only what depends on a value set aside is
held back. Before, a type error anywhere hid every rule's finding, so a four-mistake file took four runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aks_gpu.cli import main
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, STACKS_DIR

PROD = (STACKS_DIR / "Pulumi.prod.yaml").read_text(encoding="utf-8")

# Each mistake: (text as shipped, text with the mistake, the key path its error names).
MISTAKES = {
    "misspelt key": ("      protect: true\n      upgrade:", "      protec: true\n      upgrade:", "aks-gpu:gpuPools[0].protec"),
    "type error": ("gpuQuota: 32", "gpuQuota: lots", "aks-gpu:workloads[0].gpuQuota"),
    "bad taint": (
        "      maxCount: 2\n      workload: inference",
        '      maxCount: 2\n      taints: ["gpu=yes:Sometimes"]\n      workload: inference',
        "aks-gpu:gpuPools[2].taints[0]",
    ),
    # A rule across keys, judged on what did parse.
    "mig and time-slicing": (
        "      migProfile: MIG1g\n",
        "      migProfile: MIG1g\n      timeSlicingReplicas: 2\n",
        "aks-gpu:gpuPools[1].timeSlicingReplicas",
    ),
    "bad mig profile": ("      migProfile: MIG1g\n", "      migProfile: 3g.20gb\n", "aks-gpu:gpuPools[1].migProfile"),
    "bad enum": ("skuTier: Standard", "skuTier: Standrd", "aks-gpu:cluster.skuTier"),
    "misspelt top-level key": ("aks-gpu:admission:", "aks-gpu:admision:", "aks-gpu:admision"),
    # What YAML reads two ways (Pulumi: octal 8; others: 10) is refused where it stands, not before every other key.
    "leading zero": ("      maxCount: 3\n", "      maxCount: 03\n", "aks-gpu:gpuPools[1].maxCount"),
    # The first pool left out whole (its name is required): the pools after it keep their index as written.
    "bad first pool name": ("    - name: train\n", "    - name: Train\n", "aks-gpu:gpuPools[0].name"),
}


def with_mistakes(names: tuple[str, ...]) -> str:
    text = PROD
    for name in names:
        old, new, _ = MISTAKES[name]
        assert text.count(old) >= 1, name
        text = text.replace(old, new, 1)
    return text


def errors_of(text: str, tmp_path: Path) -> dict[str, str]:
    from aks_gpu.config.loader import load_stack_file

    path = tmp_path / "Pulumi.mix.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        validate_stack(load_stack_file(path), "mix")
    return {problem.path: problem.message for problem in caught.value.errors}


@pytest.mark.parametrize(
    "mix",
    [
        ("misspelt key", "type error", "bad taint", "mig and time-slicing"),
        ("bad first pool name", "mig and time-slicing", "bad enum"),
        ("bad mig profile", "misspelt top-level key", "bad taint", "type error"),
        ("bad enum", "misspelt key", "mig and time-slicing", "misspelt top-level key", "bad taint"),
        ("leading zero", "bad enum", "mig and time-slicing"),
    ],
    ids=lambda mix: "+".join(word.split()[0] for word in mix),
)
def test_every_independent_mistake_is_named_in_one_run(mix: tuple[str, ...], tmp_path: Path) -> None:
    errors = errors_of(with_mistakes(mix), tmp_path)
    assert sorted(errors) == sorted(MISTAKES[name][2] for name in mix), errors


def test_the_command_line_prints_every_mistake_of_a_four_mistake_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.mix.yaml"
    path.write_text(with_mistakes(("misspelt key", "type error", "bad taint", "mig and time-slicing")), encoding="utf-8")
    code = main(["rules", "--stack", "mix", "--config-file", str(path), "--project-dir", str(PROJECT_DIR)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    named = re.findall(r"error \S+: (aks-gpu:\S+):", err)
    assert named == [MISTAKES[name][2] for name in ("misspelt key", "bad taint", "type error", "mig and time-slicing")]


def test_what_depends_on_a_value_set_aside_is_held_back(tmp_path: Path) -> None:
    # gpuQuota 300 is more than the inference pools can offer: a warning of its own ...
    quota = ("gpuQuota: 30", "gpuQuota: 300")
    path = tmp_path / "Pulumi.alone.yaml"
    path.write_text(PROD.replace(*quota), encoding="utf-8")
    from aks_gpu.config.loader import load_stack_file

    warned = [p.path for p in validate_stack(load_stack_file(path), "alone").warnings]
    assert "aks-gpu:workloads[1].gpuQuota" in warned
    # ... that depends on the inference pools: with one of them left out (its name refused), or its MIG profile set
    # aside, what the pools offer is unknown, and the warning is held back.
    for mistake in ("bad mig profile", "bad first pool name"):
        old, new, key = (
            MISTAKES[mistake]
            if mistake != "bad first pool name"
            else ("    - name: inferfull", "    - name: InferFull", "aks-gpu:gpuPools[2].name")
        )
        text = PROD.replace(*quota).replace(old, new, 1)
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ConfigError) as caught:
            validate_stack(load_stack_file(path), "alone")
        assert [p.path for p in caught.value.problems if p.path.startswith("aks-gpu:workloads")] == [], mistake
        assert key in {p.path for p in caught.value.errors}
