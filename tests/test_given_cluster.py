"""The given-cluster mode (cluster.kubeconfig): a team deploying the platform onto a cluster it already has, and
`aksgpu local`. Only the in-cluster layer, no Azure resource, and the same URNs for it as in the Azure mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.cli import main
from tests.conftest import PROJECT_DIR, STACK_NAMES


def planned(stack: str, out: Path, config_file: Path | None = None) -> list[dict[str, Any]]:
    extra = ["--config-file", str(config_file)] if config_file else []
    assert main(["plan", "--stack", stack, "--out", str(out), "--project-dir", str(PROJECT_DIR), *extra]) == 0
    resources: list[dict[str, Any]] = json.loads((out / "resources.json").read_text())["resources"]
    return resources


def given_stack_file(stack: str, tmp_path: Path) -> Path:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}]}))
    document = yaml.safe_load((PROJECT_DIR / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    document["config"]["aks-gpu:cluster"]["kubeconfig"] = str(kubeconfig)
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_a_given_cluster_gets_the_in_cluster_layer_and_no_azure_resource(stack: str, tmp_path: Path) -> None:
    azure = planned(stack, tmp_path / "azure")
    given = planned(stack, tmp_path / "given", given_stack_file(stack, tmp_path))
    assert not [r["type"] for r in given if r["type"].startswith(("azure-native:", "pulumi:providers:azure-native"))]
    providers = [r for r in given if r["type"] == "pulumi:providers:kubernetes"]
    assert len(providers) == 1 and providers[0]["name"].endswith("-kubernetes")
    # Every Kubernetes object of the Azure mode but Azure Container Storage's is there, under the same URN.
    in_cluster = {r["urn"] for r in azure if r["type"].startswith("kubernetes:") and "-nvme" not in r["name"]}
    assert in_cluster <= {r["urn"] for r in given}
    assert in_cluster


def test_the_kubeconfig_is_read_as_a_secret_and_a_missing_one_is_one_message(tmp_path: Path, capsys) -> None:
    path = given_stack_file("dev", tmp_path)
    (tmp_path / "kubeconfig").unlink()
    assert (
        main(
            [
                "plan",
                "--stack",
                "dev",
                "--out",
                str(tmp_path / "o"),
                "--project-dir",
                str(PROJECT_DIR),
                "--config-file",
                str(path),
            ]
        )
        != 0
    )
    captured = capsys.readouterr()
    assert "aks-gpu:cluster.kubeconfig: cannot read" in captured.err + captured.out
    assert "internal error" not in captured.err + captured.out
