"""Config mistakes of the first hour (issue 35): each answered with the right key and the cause, once, as the command
line prints it (``aksgpu rules``, the lightest command that loads a stack)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from aks_gpu.cli import main
from aks_gpu.config.problems import ConfigError, edit_distance
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, STACKS_DIR, minimal_raw

DEV = (STACKS_DIR / "Pulumi.dev.yaml").read_text(encoding="utf-8")
PROD = (STACKS_DIR / "Pulumi.prod.yaml").read_text(encoding="utf-8")


def rules(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """Exit code and the error lines ``aksgpu rules`` prints for a stack file of ``text``."""
    stack_file = tmp_path / "Pulumi.mistake.yaml"
    stack_file.write_text(text, encoding="utf-8")
    code = main(["rules", "--stack", "mistake", "--config-file", str(stack_file), "--project-dir", str(PROJECT_DIR)])
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    lines = re.split(r" (?=(?:error|warning) )", err)
    return code, [line.strip() for line in lines if line.strip().startswith("error ")]


def replaced(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


@pytest.mark.parametrize("namespace", ["aksgpu", "aks_gpu", "aks-gpus", "Aks-Gpu", "ask-gpu"])
def test_a_namespace_typo_is_an_error_naming_the_right_key(
    namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a warning and exit 0, the workloads (their quotas and deny-all policies) dropped from the plan.
    code, errors = rules(tmp_path, replaced(DEV, "aks-gpu:workloads", f"{namespace}:workloads"), capsys)
    assert code == 2
    assert errors == [
        f"error {tmp_path}/Pulumi.mistake.yaml: {namespace}:workloads: config namespace '{namespace}' is not read by "
        "this program; did you mean `aks-gpu:workloads`?"
    ]


def test_another_providers_namespace_stays_a_warning() -> None:
    assert edit_distance("azure-native", "aks-gpu") > 2 and edit_distance("kubernetes", "aks-gpu") > 2
    validated = validate_stack(minimal_raw(**{"datadog:apiKey": "x"}), "stack.yaml")
    assert [p.severity for p in validated.warnings if p.path == "datadog:apiKey"] == ["warning"]


def test_an_unquoted_version_says_yaml_read_a_number_and_to_quote_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, [error] = rules(tmp_path, replaced(DEV, 'kubernetesVersion: "1.36"', "kubernetesVersion: 1.30"), capsys)
    assert code == 2
    assert "should be a valid string" not in error
    assert "YAML read the unquoted value as the number 1.3" in error
    assert 'kubernetesVersion: "1.30"' in error


@pytest.mark.parametrize(("snake", "camel"), [("max_count", "maxCount"), ("min_count", "minCount"), ("vm_size", "vmSize")])
def test_a_python_field_name_is_refused_naming_the_key(
    snake: str, camel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # pydantic's populate_by_name (which the components' snake_case args need) let a stack file say max_count.
    line = next(line for line in DEV.splitlines() if line.strip().startswith(f"{camel}:") and line.startswith("      "))
    code, errors = rules(tmp_path, replaced(DEV, line, line.replace(f"{camel}:", f"{snake}:")), capsys)
    assert code == 2
    assert len(errors) == 1 and f".{snake}: unknown key; did you mean `{camel}`?" in errors[0]


def test_the_components_still_take_snake_case_args() -> None:
    from aks_gpu.config.loader import read_sections

    pool = {"name": "gpu", "vendor": "nvidia", "vm_size": "Standard_NC24ads_A100_v4", "workload": "training", "max_count": 2}
    config, problems = read_sections({"gpu_pools": [pool]})
    assert problems == [] and config is not None and config.gpu_pools[0].max_count == 2


def test_a_stack_that_does_not_exist_lists_the_stacks_that_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--stack", "staging", "--project-dir", str(PROJECT_DIR)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no stack 'staging'" in err and "the stacks there are amd, dev, prod, teams (--stack NAME)" in err
    assert "--config-file FILE" in err


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        # A vmSize typo on a MIG pool: the MIG profile cannot be checked without the size, which is the one mistake.
        ("vmSize: Standard_NC24ads_A100_v4", "vmSize: Standard_NC24ads_A100_v5", "gpuPools[1].vmSize"),
        # A misspelt required key: unknown and "is required" are one mistake.
        ("namespace: inference-gateway", "namespac: inference-gateway", "allowFromNamespaces[0].namespac"),
    ],
    ids=["vm-size", "required-key"],
)
def test_one_typo_is_one_error(old: str, new: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, errors = rules(tmp_path, replaced(PROD, old, new), capsys)
    assert code == 2
    assert len(errors) == 1 and key in errors[0], errors


def test_the_required_key_a_typo_stands_for_is_named_in_its_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, [error] = rules(tmp_path, replaced(PROD, "namespace: inference-gateway", "namespac: inference-gateway"), capsys)
    assert "unknown key; did you mean `namespace`? (`namespace` is required)" in error


def old_version(minor: str) -> dict[str, object]:
    return minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", "kubernetesVersion": minor}})


@pytest.mark.parametrize("day", [dt.date(2026, 8, 1), dt.date(2026, 12, 2)])
def test_end_of_life_suggests_only_long_term_support_still_open(day: dt.date) -> None:
    # 1.30: end of life 2025-08-22, long-term support until 2026-07-31 (data/aks_versions.yaml).
    with pytest.raises(ConfigError) as caught:
        validate_stack(old_version("1.30"), "s", today=day)
    [error] = [p.message for p in caught.value.errors if p.path.endswith("kubernetesVersion")]
    assert "under long-term support until" not in error
    assert "its long-term support ended on 2026-07-31 too" in error


def test_end_of_life_still_suggests_an_open_long_term_support_window() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_stack(old_version("1.33"), "s", today=dt.date(2026, 12, 2))
    [error] = [p.message for p in caught.value.errors if p.path.endswith("kubernetesVersion")]
    assert "keep 1.33 under long-term support until 2027-07-31" in error
