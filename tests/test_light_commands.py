"""The light commands load neither Pulumi nor the Azure SDK (nor the kubernetes client), and those that read no stack
load no config models: each runs, in a fresh interpreter, and its modules are checked afterwards. Their wall time is a
benchmark (bench/light_commands.py: each at most 8x a bare interpreter, issues 17 and 46)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from typing import Any

from aks_gpu.cli import COMMANDS as CLI_COMMANDS
from tests.conftest import PROJECT_DIR, SMI_FIXTURES_DIR

HEAVY = ("pulumi", "pulumi_azure_native", "pulumi_kubernetes", "kubernetes", "grpc")
SMI_FILE = SMI_FIXTURES_DIR / "02_nvidia-smi_table_8xh100_565.57.01.txt"
# An object the prod stack admits (the real API server did, tests/fixtures/admission-corpus/expectations.yaml): exit 0.
PODS = PROJECT_DIR / "tests" / "fixtures" / "admission-corpus" / "manifests" / "pytorchjob-mnist-nccl.yaml"
COMMANDS = {
    "--help": ["--help"],
    "--version": ["--version"],
    "smi parse": ["smi", "parse", str(SMI_FILE)],
    "smi health": ["smi", "health", str(SMI_FILE)],
    "catalog": ["catalog", "--json"],
    "schema": ["schema"],
    "admission check --help": ["admission", "check", "--help"],
    "admission check": ["admission", "check", "--stack", "prod", "--project-dir", str(PROJECT_DIR), str(PODS)],
}
# Every light command but `admission check` itself, which validates the stack it is given.
READ_NO_STACK = [name for name in COMMANDS if name != "admission check"]

_PROBE = """
import contextlib, io, json, sys
from aks_gpu.cli import main
argv = json.loads(sys.argv[1])
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(argv)
    except SystemExit as stopped:  # --help and --version: argparse prints and exits
        code = stopped.code
print(json.dumps([code, sorted(sys.modules)]))
"""


@functools.cache
def modules_of(name: str) -> tuple[Any, set[str]]:
    """The exit status of ``aksgpu <name>``, run alone in a fresh interpreter (one command must not pass for the imports
    another made), and every module it had loaded by its end."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(COMMANDS[name])], cwd=PROJECT_DIR, capture_output=True, text=True, check=True
    )
    code, modules = json.loads(done.stdout)
    return code, set(modules)


def test_the_light_commands_import_no_pulumi_no_azure_sdk_no_kubernetes_client() -> None:
    for name in COMMANDS:
        code, modules = modules_of(name)
        assert code == 0, f"{name} exited {code}"
        heavy = sorted({module.split(".")[0] for module in modules} & set(HEAVY))
        assert heavy == [], f"`aksgpu {name}` imported {heavy}"


def test_the_light_commands_that_read_no_stack_import_no_config_models() -> None:
    # `aksgpu schema` prints the shipped schema rather than building it from the models; `admission check --help`
    # builds its parser without the policy its check renders from the stack.
    for name in READ_NO_STACK:
        _, modules = modules_of(name)
        loaded = sorted(module for module in modules if module == "pydantic" or module.startswith("aks_gpu.config.models"))
        assert loaded == [], f"`aksgpu {name}` imported {loaded}"


def test_the_command_list_and_the_version_import_no_command() -> None:
    # Each command's help line is in the command line's own table (aks_gpu.cli.COMMANDS), not in its module.
    for name in ("--help", "--version"):
        _, modules = modules_of(name)
        commands = sorted(modules & {f"aks_gpu.cli.{command}" for command in CLI_COMMANDS})
        assert commands == [], f"`aksgpu {name}` imported {commands}"


def test_the_command_line_itself_imports_no_command_it_does_not_run() -> None:
    code = (
        "import sys, aks_gpu.cli;"
        " sys.exit(any(m.startswith('aks_gpu.cli.') and m != 'aks_gpu.cli.common' for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, check=False).returncode == 0
