"""The light commands load neither Pulumi nor the Azure SDK (nor the kubernetes client): each runs, in a fresh
interpreter, and its modules are checked afterwards. Their wall time is a benchmark (bench/light_commands.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import PROJECT_DIR, SMI_FIXTURES_DIR

HEAVY = ("pulumi", "pulumi_azure_native", "pulumi_kubernetes", "kubernetes", "grpc")
SMI_FILE = SMI_FIXTURES_DIR / "02_nvidia-smi_table_8xh100_565.57.01.txt"
# An object the prod stack admits (the real API server did, tests/fixtures/admission-corpus/expectations.yaml): exit 0.
PODS = PROJECT_DIR / "tests" / "fixtures" / "admission-corpus" / "manifests" / "pytorchjob-mnist-nccl.yaml"
COMMANDS = {
    "smi parse": ["smi", "parse", str(SMI_FILE)],
    "smi health": ["smi", "health", str(SMI_FILE)],
    "catalog": ["catalog", "--json"],
    "schema": ["schema"],
    "admission check": ["admission", "check", "--stack", "prod", "--project-dir", str(PROJECT_DIR), str(PODS)],
}

_PROBE = """
import contextlib, io, json, sys
from aks_gpu.cli import main
loaded = {}
for name, argv in json.loads(sys.argv[1]).items():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    loaded[name] = [code, sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[2])))]
print(json.dumps(loaded))
"""


def test_the_light_commands_import_no_pulumi_no_azure_sdk_no_kubernetes_client() -> None:
    # Each command in its own interpreter: one must not pass for the imports another made.
    for name, argv in COMMANDS.items():
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, json.dumps({name: argv}), json.dumps(HEAVY)],
            cwd=PROJECT_DIR,
            capture_output=True,
            text=True,
            check=True,
        )
        [(code, heavy)] = json.loads(done.stdout).values()
        assert code == 0, f"{name} exited {code}"
        assert heavy == [], f"`aksgpu {name}` imported {heavy}"


def test_the_command_line_itself_imports_no_command_it_does_not_run() -> None:
    code = (
        "import sys, aks_gpu.cli;"
        " sys.exit(any(m.startswith('aks_gpu.cli.') and m != 'aks_gpu.cli.common' for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, check=False).returncode == 0
