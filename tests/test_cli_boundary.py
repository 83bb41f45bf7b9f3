"""The command line's edge: an exception nobody caught is an internal error (exit 3, one line, no traceback, no
secret), and every printer shows user and cluster text as written, never as rich markup."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pulumi
import pytest
from rich.console import Console

from aks_gpu import cli
from aks_gpu.admission.evaluate import Decision
from aks_gpu.admission.reader import SourcedObject
from aks_gpu.cli import catalog as catalog_command
from aks_gpu.cli import common, main
from aks_gpu.cli import plan as plan_cli
from aks_gpu.cli import validate as validate_cli
from aks_gpu.cli.admission import print_report
from aks_gpu.mock_engine import PlanResult, ResourceRecord
from aks_gpu.mock_engine.changes import Change, ChangeSet
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.validation.checks import CheckResult
from tests.conftest import PROJECT_DIR, MockHarness, minimal_raw, raw_stack

MARKUP = "[bold red]DEV[/bold red]"
BROKEN_MARKUP = "x[/x]"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2VuLXZhbHVl.sig"


def one_line(text: str) -> str:
    return " ".join(text.split())


def rendered(renderable: Any) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=400, color_system=None, emoji=False).print(renderable)
    return buffer.getvalue()


# ---------------------------------------------------------------- internal errors


@pytest.fixture
def crashing_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """``aksgpu catalog`` raising what a bug would, carrying a token in its text."""

    def crash(args: argparse.Namespace) -> int:
        raise RuntimeError(f"cannot use Authorization: Bearer {TOKEN}")

    monkeypatch.setattr(catalog_command, "run", crash)


def test_an_uncaught_exception_is_an_internal_error_with_exit_3(crashing_command, capsys, monkeypatch) -> None:
    monkeypatch.delenv("AKSGPU_DEBUG", raising=False)
    assert main(["catalog"]) == 3
    captured = capsys.readouterr()
    stderr = one_line(captured.err)
    assert "internal error: RuntimeError at" in stderr and "file an issue" in stderr and "AKSGPU_DEBUG=1" in stderr
    assert "test_cli_boundary.py" in stderr or "aks_gpu/" in stderr  # where it happened
    assert "Traceback" not in captured.err + captured.out
    assert TOKEN not in captured.err + captured.out  # the exception's text is not echoed


@pytest.mark.parametrize("how", ["env", "flag"])
def test_debug_shows_the_traceback(how: str, crashing_command, capsys, monkeypatch) -> None:
    monkeypatch.delenv("AKSGPU_DEBUG", raising=False)
    if how == "env":
        monkeypatch.setenv("AKSGPU_DEBUG", "1")
    assert main(["--debug", "catalog"] if how == "flag" else ["catalog"]) == 3
    stderr = capsys.readouterr().err
    assert "Traceback" in stderr and "RuntimeError" in stderr and "internal error" in stderr


def test_a_closed_output_pipe_is_not_an_internal_error(monkeypatch, capsys) -> None:
    def closed(args: argparse.Namespace) -> int:
        raise BrokenPipeError

    monkeypatch.setattr(catalog_command, "run", closed)
    monkeypatch.setattr(cli, "_silence_stdout", lambda: None)
    assert main(["catalog"]) == 141
    assert "internal error" not in capsys.readouterr().err


def test_the_help_documents_the_exit_codes(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = one_line(capsys.readouterr().out)
    assert "0 ok, 1 a check failed" in text and "2 usage, config or input error" in text and "3 internal error" in text


def test_under_pulumi_up_a_bug_in_config_loading_is_one_line_not_a_traceback(monkeypatch) -> None:
    from aks_gpu import program

    def crash(raw: Any, source: str) -> Any:
        raise KeyError(TOKEN)

    monkeypatch.delenv("AKSGPU_DEBUG", raising=False)
    monkeypatch.setattr(program, "validate_stack", crash)
    with pytest.raises(pulumi.RunError) as error:
        MockHarness().run_stack("dev")
    message = str(error.value)
    assert message.startswith("internal error: KeyError at") and "pulumi up" in message
    assert TOKEN not in message


# ---------------------------------------------------------------- markup in what we print


def test_config_error_report_shows_values_and_keys_as_written(tmp_path: Path, capsys) -> None:
    stack = tmp_path / "Pulumi.x[red].yaml"
    text = (PROJECT_DIR / "stacks" / "Pulumi.dev.yaml").read_text().replace("name: aks-gpu-dev", f"name: '{MARKUP}'")
    stack.write_text(text + f'  aks-gpu:{BROKEN_MARKUP}: 1\n  other{BROKEN_MARKUP}:key: "\\e[31m"\n')
    code = main(
        ["plan", "--stack", "x", "--config-file", str(stack), "--project-dir", str(PROJECT_DIR), "--out", str(tmp_path / "o")]
    )
    stderr = capsys.readouterr().err
    assert code == 2
    assert MARKUP in stderr and f"aks-gpu:{BROKEN_MARKUP}" in stderr and "Pulumi.x[red].yaml" in stderr


def test_warnings_show_text_as_written(capsys) -> None:
    raw = minimal_raw(**{f"other{BROKEN_MARKUP}:key": "v", f"{MARKUP}:k": "v"})
    validated = validate_stack(raw, f"stacks/{MARKUP}.yaml")
    loaded = common.LoadedStack(PROJECT_DIR, "x", Path("x"), raw, validated)
    common.report_warnings(loaded)
    stderr = capsys.readouterr().err
    assert f"other{BROKEN_MARKUP}:key" in stderr and f"{MARKUP}:k" in stderr  # not markup, not the emoji :key:


def test_the_pool_table_shows_a_vm_size_as_written() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"] = [dict(raw["aks-gpu:gpuPools"][0], vmSize=MARKUP, gpuCount=1, gpuModel="A100")]
    model = validate_stack(raw, "x").model
    assert MARKUP in rendered(plan_cli.pool_table(model))


def test_the_resource_tree_and_replacements_show_names_as_written(capsys) -> None:
    record = ResourceRecord(f"urn:{MARKUP}", "aks-gpu:index:Thing", MARKUP, None, False, {}, {})
    child = ResourceRecord("urn:c", f"kubernetes:{BROKEN_MARKUP}", "c", f"urn:{MARKUP}", True, {}, {})
    text = rendered(plan_cli.resource_tree(PlanResult("aks-gpu", MARKUP, [record, child], {})))
    assert text.count(MARKUP) == 2 and f"kubernetes:{BROKEN_MARKUP}" in text
    plan_cli.print_changes(
        ChangeSet(
            f"export{MARKUP}.json",
            (Change("azure-native:containerservice:AgentPool", BROKEN_MARKUP, "urn:p", "replace", (MARKUP,), "\x1b[2J", {}),),
        )
    )
    out = capsys.readouterr().out
    assert BROKEN_MARKUP in out and MARKUP in out and "\x1b" not in out


def test_validate_results_show_cluster_text_as_written(capsys) -> None:
    model = validate_stack(raw_stack("prod"), "x").model
    results = [
        CheckResult("smi-error", "train", f"node-{BROKEN_MARKUP}", "fail", f"nvidia-smi says {MARKUP}\x1b]0;owned\x07"),
        CheckResult("driver-version", "train", None, "warn", BROKEN_MARKUP),
    ]
    validate_cli.print_results(model, results, verbose=True, source=f"snap{MARKUP}")
    out = capsys.readouterr().out
    assert f"node-{BROKEN_MARKUP}" in out and f"nvidia-smi says {MARKUP}" in out and f"snap{MARKUP}" in out
    assert "\x1b" not in out and "\x07" not in out  # a terminal escape from the cluster is shown escaped


def test_validate_errors_show_paths_as_written(tmp_path: Path, capsys) -> None:
    missing = tmp_path / f"snap{MARKUP}"
    code = main(["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", str(missing)])
    assert code == 2 and MARKUP in one_line(capsys.readouterr().err)


def test_the_admission_table_shows_namespaces_and_kinds_as_written(capsys) -> None:
    decision = Decision(kind=MARKUP, namespace=BROKEN_MARKUP, name=MARKUP, allowed=False, messages=(MARKUP,))
    print_report("prod", ["Deny"], [SourcedObject(f"f{BROKEN_MARKUP}.yaml#1", {})], [decision])
    out = capsys.readouterr().out
    assert BROKEN_MARKUP in out and out.count(MARKUP) >= 3
