"""Planning is deterministic across processes: two `aksgpu plan` processes with different hash seeds write
byte-identical files. (tests/test_plan.py plans twice in one process, where set and dict orders repeat by
construction; a fresh process with another ``PYTHONHASHSEED`` iterates sets of strings in another order, so
only this catches output that depends on it.)

Besides every stack of ``stacks/``, a generated stack with many pools and namespaces (``bench/stacks.py``) is
planned too: the more names there are, the surer a set iterated into a file shows up as a difference.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aks_gpu.resolved.stack import validate_stack
from bench.stacks import generated_stack, write_stack_file
from tests.conformance import PROJECT_DIR, STACK_NAMES

HASH_SEEDS = ("1", "2")
GENERATED_POOLS = 12


def plan_in_subprocesses(stack: str, out_root: Path, config_file: Path | None = None) -> list[Path]:
    """`python -m aks_gpu.cli plan` once per hash seed, concurrently; returns the output folders."""
    runs = []
    for seed in HASH_SEEDS:
        out_dir = out_root / f"seed-{seed}"
        command = [sys.executable, "-m", "aks_gpu.cli", "plan", "--stack", stack, "--out", str(out_dir)]
        command += ["--project-dir", str(PROJECT_DIR)]
        if config_file is not None:
            command += ["--config-file", str(config_file)]
        env = {**os.environ, "PYTHONHASHSEED": seed}
        process = subprocess.Popen(command, cwd=PROJECT_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        runs.append((out_dir, process))
    for out_dir, process in runs:
        printed, _ = process.communicate(timeout=600)
        assert process.returncode == 0, f"plan into {out_dir} exited {process.returncode}:\n{printed[-3000:]}"
    return [out_dir for out_dir, _ in runs]


def assert_identical_trees(first: Path, second: Path) -> None:
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files, f"{first} is empty"
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    differing = [str(f) for f in files if (first / f).read_bytes() != (second / f).read_bytes()]
    assert differing == [], "different bytes under different hash seeds"


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_plans_from_two_processes_are_byte_identical(stack: str, tmp_path: Path) -> None:
    assert_identical_trees(*plan_in_subprocesses(stack, tmp_path))


def test_a_large_generated_stack_plans_identically_in_two_processes(tmp_path: Path) -> None:
    stack_file = write_stack_file(tmp_path / "Pulumi.generated.yaml", generated_stack(GENERATED_POOLS))
    first, second = plan_in_subprocesses("generated", tmp_path, stack_file)
    assert_identical_trees(first, second)
    assert len(list((first / "manifests").glob("*.yaml"))) > GENERATED_POOLS


def test_the_comparison_sees_a_difference(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "resources.json").write_text("{}" if name == "a" else "{ }")
    with pytest.raises(AssertionError, match="different bytes"):
        assert_identical_trees(tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize("pools", [1, 4, 10, 50, 99])
def test_generated_stacks_are_valid_configs(pools: int) -> None:
    """The benchmark's stacks pass every config rule, so the benchmark measures planning, not an error path."""
    validated = validate_stack(generated_stack(pools), f"generated-{pools}")
    assert len(validated.config.gpu_pools) == pools and len(validated.config.workloads) == pools
    # Not a warning: every shape's VM size is recorded in swedencentral (data/vm_size_regions.yaml).
    assert not validated.warnings, [w.message for w in validated.warnings]
    vendors = {pool.vendor for pool in validated.config.gpu_pools}
    assert vendors == ({"nvidia", "amd"} if pools >= 4 else {"nvidia"})
