"""A secret set by the real Pulumi CLI, as the shipped stacks say to add a paging webhook (`pulumi config set --secret
--path 'aks-gpu:monitoring.azureMonitor.receivers[1].webhook' ...`), stops no command that does not need its plaintext
(issue 40, A1): each command exits as on the same stack without it, and the plan shows `[secret]`, never the URL or the
ciphertext. The stack file is a copy of the shipped dev stack, its secret encrypted by a passphrase secrets provider
on a file backend (pulumi/pulumi sdk/go/common/resource/config/value.go writes the `secure:` form)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from aks_gpu.local.engine import environment
from tests.conftest import PROJECT_DIR, STACKS_DIR
from tests.e2e.conftest import ENV, TOOLS, Clusters, LocalCluster, run_aksgpu

TOKEN = "hush-T0K3N-4711"
WEBHOOK = f"https://hooks.example.com/services/{TOKEN}"
RECEIVER = "aks-gpu:monitoring.azureMonitor.receivers[1]"
POD = """apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: gpu-dev}
spec:
  containers:
    - {name: trainer, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}
"""


def pulumi_env(state: Path) -> dict[str, str]:
    """The real CLI on a file backend with a passphrase secrets provider, nothing of the machine's own Pulumi."""
    return {
        "PULUMI_HOME": str(state / "home"),
        "PULUMI_BACKEND_URL": state.resolve().as_uri(),
        "PULUMI_CONFIG_PASSPHRASE": "e2e-only-passphrase",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PATH": f"{TOOLS}:{ENV.get('PATH', '')}",
    }


def pulumi(project: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(TOOLS / "pulumi"), *args, "--cwd", str(project)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**ENV, **pulumi_env(state)},
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with the shipped dev stack and `hush`, the same file with a paging webhook set as a secret."""
    root = tmp_path_factory.mktemp("secrets")
    project = root / "project"
    (project / "stacks").mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(PROJECT_DIR / name, project / name)
    shutil.copy(STACKS_DIR / "Pulumi.dev.yaml", project / "stacks" / "Pulumi.dev.yaml")
    shutil.copy(STACKS_DIR / "Pulumi.dev.yaml", project / "stacks" / "Pulumi.hush.yaml")
    (project / ".tools").symlink_to(PROJECT_DIR / ".tools")
    state = root / "state"
    state.mkdir()
    pulumi(project, state, "stack", "init", "hush", "--secrets-provider", "passphrase")
    pulumi(project, state, "config", "set", "--stack", "hush", "--path", f"{RECEIVER}.name", "pager")
    pulumi(project, state, "config", "set", "--stack", "hush", "--secret", "--path", f"{RECEIVER}.webhook", WEBHOOK)
    written = (project / "stacks" / "Pulumi.hush.yaml").read_text(encoding="utf-8")
    assert TOKEN not in written
    receivers = yaml.safe_load(written)["config"]["aks-gpu:monitoring"]["azureMonitor"]["receivers"]
    assert receivers[1]["name"] == "pager" and set(receivers[1]["webhook"]) == {"secure"}
    # Pulumi itself reads the value back: what `pulumi up` hands the program.
    done = pulumi(project, state, "config", "get", "--stack", "hush", "--path", f"{RECEIVER}.webhook")
    assert done.stdout.strip() == WEBHOOK
    return project


def test_under_the_real_engine_the_program_reads_the_plaintext_and_keeps_it_secret(project: Path) -> None:
    # What `pulumi up` does with the stack file: the engine decrypts the value and hands the program the plaintext and
    # the secret key (aks_gpu/program.py reads both); the program validates the real URL and keeps it a secret output.
    # An inline program (the Automation API, as `aksgpu local` runs the platform) reading the config as run_platform does.
    from pulumi import automation as auto

    def program() -> None:
        import pulumi as sdk

        from aks_gpu.program import runtime_config_map, secret_config
        from aks_gpu.resolved.stack import validate_stack

        raw = runtime_config_map()
        validated = validate_stack(raw, "hush")
        webhook = validated.config.monitoring.azure_monitor.receivers[1].webhook
        sdk.export("webhook", secret_config(raw, validated.config).protect(webhook))

    state = project.parent / "state"
    env = pulumi_env(state)
    with environment(env):
        opts = auto.LocalWorkspaceOptions(work_dir=str(project), env_vars=env)
        stack = auto.select_stack("hush", "aks-gpu", program, opts=opts)
        stack.up(on_output=lambda _: None)
        output = stack.outputs()["webhook"]
    assert output.value == WEBHOOK and output.secret
    assert not any(TOKEN in file.read_text(errors="replace") for file in state.rglob("*.json"))  # stored encrypted


def aksgpu(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_aksgpu(project, *args, timeout=300)


@pytest.fixture(scope="module")
def dev(clusters: Clusters) -> LocalCluster:
    return clusters.get("dev")


def test_every_command_exits_as_without_the_secret_and_the_plan_shows_it_secret(
    project: Path, dev: LocalCluster, tmp_path: Path
) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD, encoding="utf-8")
    hush = yaml.safe_load((project / "stacks" / "Pulumi.hush.yaml").read_text(encoding="utf-8"))
    ciphertext = hush["config"]["aks-gpu:monitoring"]["azureMonitor"]["receivers"][1]["webhook"]["secure"]
    live = ["--kubeconfig", str(dev.kubeconfig)]
    commands = {
        "plan": ["plan", "--out", str(tmp_path / "{stack}")],
        "rules": ["rules"],
        "admission check": ["admission", "check", str(pod)],
        "validate": ["validate", *live],
        "audit": ["audit", *live],
    }
    for name, args in commands.items():
        exits = {}
        for stack in ("dev", "hush"):
            argv = [arg.replace("{stack}", stack) for arg in args]
            done = aksgpu(project, *argv, "--stack", stack, "--project-dir", str(project))
            exits[stack] = done.returncode
            assert TOKEN not in done.stdout + done.stderr and ciphertext not in done.stdout + done.stderr, name
        assert exits["hush"] == exits["dev"] != 2, (name, exits)

    written = "".join(file.read_text(encoding="utf-8") for file in (tmp_path / "hush").rglob("*") if file.is_file())
    assert TOKEN not in written and ciphertext not in written
    plan = json.loads((tmp_path / "hush" / "resources.json").read_text(encoding="utf-8"))
    [group] = [r for r in plan["resources"] if r["type"] == "azure-native:monitor:ActionGroup"]
    assert group["inputs"]["webhookReceivers"] == "[secret]"


def test_a_local_cluster_of_the_stack_with_the_secret_comes_up(project: Path) -> None:
    # The local stack has a passphrase of its own: the ciphertext reaches its program as the [secret] placeholder.
    port = str(random.randint(30000, 40000))
    try:
        done = aksgpu(project, "local", "up", "--stack", "hush", "--project-dir", str(project), "--port", port)
        assert done.returncode == 0, done.stderr[-3000:]
        assert TOKEN not in done.stdout + done.stderr
    finally:
        aksgpu(project, "local", "down", "--stack", "hush", "--purge", "--project-dir", str(project))
