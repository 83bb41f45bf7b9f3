"""`aksgpu local` without its tools or with bad input: exit 2 and one line that says what to do; `local status` at
80 columns and wider: every value whole."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.cli import main
from tests.conftest import PROJECT_DIR


def project_without_tools(tmp_path: Path) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((PROJECT_DIR / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").symlink_to(PROJECT_DIR / "stacks")
    return tmp_path


@pytest.mark.parametrize("command", [["up"], ["status"], ["status", "--json"], ["down"], ["down", "--purge"]])
def test_no_tools_is_exit_2_naming_make_tools(command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = project_without_tools(tmp_path)
    assert main(["local", *command, "--stack", "dev", "--project-dir", str(project)]) == 2
    captured = capsys.readouterr()
    assert "make tools" in captured.err and captured.out == ""
    assert not (project / ".local").exists()


def test_a_local_kubeconfig_that_points_elsewhere_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aks_gpu.local.engine import LocalError, check_kubeconfig

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({"clusters": [{"name": "x", "cluster": {"server": "https://x.azmk8s.io:443"}}]}))
    with pytest.raises(LocalError, match=r"x\.azmk8s\.io") as refused:
        check_kubeconfig(kubeconfig)
    assert refused.value.exit_code == 2


def test_a_port_in_use_is_named(tmp_path: Path) -> None:
    import socket

    from aks_gpu.local.engine import port_in_use

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert port_in_use(port)
    assert not port_in_use(port)


@pytest.mark.parametrize("bad", [["--nodes-per-pool", "0"], ["--nodes-per-pool", "x"], ["--port", "70000"]])
def test_bad_numbers_are_usage_errors(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["local", "up", "--stack", "dev", *bad])
    assert exit_info.value.code == 2


def test_local_needs_a_subcommand_and_a_stack(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["local"], ["local", "up"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
    assert os.environ.get("KWOK_WORKDIR") is None


STATUS: dict[str, Any] = {
    "running": True,
    "server": "https://127.0.0.1:46123",
    "kubernetesVersion": "v1.33.1",
    "nodes": 4,
    "gpuNodes": 3,
    "pulumi": {
        "cli": "v3.190.0",
        "stack": "a-stack-name-as-long-as-people-give-them-for-their-clusters",
        "resources": 61,
        "pendingChanges": 0,
    },
    "kueue": None,
    "karpenter": 48213,
}


@pytest.mark.parametrize("width", (80, 100, 120))
def test_status_shows_every_value_whole_at_80_columns_and_wider(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from aks_gpu.cli import common, local, tables

    monkeypatch.setattr(local, "status_document", lambda args: STATUS)
    tables._REPLACED_WIDTH.clear()
    monkeypatch.setattr(common.out, "width", width)
    stack = STATUS["pulumi"]["stack"]
    assert main(["local", "status", "--stack", stack]) == 0
    output = capsys.readouterr().out
    assert "…" not in output and max(len(line) for line in output.splitlines()) <= width
    words = {word.strip("│ ,():") for line in output.splitlines() for word in line.split()}
    assert {"https://127.0.0.1:46123", "v1.33.1", "v3.190.0", stack} <= words
    # The controllers `local up` runs as processes: Karpenter's pid, and Kueue (a stack without queueing) not running.
    assert "process 48213" in " ".join(output.split()) and "not running" in " ".join(output.split())
    assert main(["local", "status", "--stack", stack, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == STATUS


def test_status_lays_out_a_list_in_a_narrow_terminal_and_says_how_to_get_the_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from aks_gpu.cli import common, local, tables

    monkeypatch.setattr(local, "status_document", lambda args: {**STATUS, "server": "https://127.0.0.1:46123/" + "x" * 40})
    tables._REPLACED_WIDTH.clear()
    monkeypatch.setattr(common.out, "width", 80)
    assert main(["local", "status", "--stack", "dev"]) == 0
    output = " ".join(capsys.readouterr().out.split())
    assert "dev running: True server: https://127.0.0.1:46123/" + "x" * 40 in output
    assert "--wide for one line a row" in output and "--json for every field" in output
    assert main(["local", "status", "--stack", "dev", "--wide"]) == 0
    assert any("https://127.0.0.1:46123/" in line and "│" in line for line in capsys.readouterr().out.splitlines())
    tables._REPLACED_WIDTH.clear()


def test_up_reports_each_post_deploy_verdict_once_as_the_hook_wrote_it() -> None:
    from aks_gpu.cli.local import deploy_hook_lines

    # The Pulumi CLI's update output: the hook's warning as it happens and again under Diagnostics.
    engine_output = "\n".join(
        [
            "Updating (prod):",
            "    warning: [platform-gpu-validate-infer-train] aks-gpu post-deploy validation FAILED: 2 failed, 10 warnings",
            "      pool train: 1 failed",
            "Diagnostics:",
            "  kubernetes:apps/v1:DaemonSet (platform-gpu-daemonset-nvidia-device-plugin-daemonset):",
            "    warning: [platform-gpu-validate-infer-train] aks-gpu post-deploy validation FAILED: 2 failed, 10 warnings",
        ]
    )
    assert deploy_hook_lines(engine_output) == ["aks-gpu post-deploy validation FAILED: 2 failed, 10 warnings"]
    assert deploy_hook_lines("Updating (prod):\n    no changes\n") == []
