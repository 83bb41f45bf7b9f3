"""The kubeconfig AKS returns asks a person for a device code; the one the platform uses does not.

Tested on a published AKS kubeconfig (tests/fixtures/aks/, with its source), and the offline plan's mock is held
to the same shape, so the rewrite that runs under `pulumi up` is the one tested here.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from aks_gpu.azure.kubeconfig import LOGIN_MODES, KubeconfigError, LoginMode, use_login_mode
from aks_gpu.mock_engine import AKS_CLIENT_APP_ID, AKS_SERVER_APP_ID, fake_kubeconfig
from tests.conftest import FIXTURES_DIR

AKS_KUBECONFIG = (FIXTURES_DIR / "aks" / "kubeconfig_exec_devicecode.yaml").read_text(encoding="utf-8")
SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"


def exec_of(text: str) -> dict[str, Any]:
    [user] = yaml.safe_load(text)["users"]
    exec_config: dict[str, Any] = user["user"]["exec"]
    return exec_config


def flags(args: list[str]) -> list[str]:
    return [a for a in args if a.startswith("--")]


def test_the_published_aks_kubeconfig_waits_for_a_device_code() -> None:
    args = exec_of(AKS_KUBECONFIG)["args"]
    assert args[-2:] == ["--login", "devicecode"]


def test_the_plan_mock_returns_what_aks_returns() -> None:
    """Same keys at every level, same kubelogin flags in the same order, the same public application ids."""
    real, mock = yaml.safe_load(AKS_KUBECONFIG), yaml.safe_load(fake_kubeconfig("aks-x", "rg-x"))
    assert list(real) == list(mock)
    for section in ("clusters", "contexts", "users"):
        assert [sorted(item) for item in real[section]] == [sorted(item) for item in mock[section]]
    real_exec, mock_exec = exec_of(AKS_KUBECONFIG), exec_of(fake_kubeconfig("aks-x", "rg-x"))
    assert sorted(real_exec) == sorted(mock_exec)
    assert flags(real_exec["args"]) == flags(mock_exec["args"])
    assert {k: v for k, v in real_exec.items() if k != "args"} == {k: v for k, v in mock_exec.items() if k != "args"}
    assert AKS_SERVER_APP_ID in real_exec["args"] and AKS_CLIENT_APP_ID in real_exec["args"]
    assert mock["users"][0]["name"] == "clusterUser_rg-x_aks-x"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # The az login session decides the tenant: AKS's --tenant-id is dropped, as convert-kubeconfig does.
        ("azurecli", ["get-token", "--login", "azurecli", "--server-id", SERVER_ID]),
        ("workloadidentity", ["get-token", "--login", "workloadidentity", "--server-id", SERVER_ID]),
        ("msi", ["get-token", "--login", "msi", "--server-id", SERVER_ID]),
        # The service principal comes from AZURE_CLIENT_ID/_SECRET; AKS's public client id is not one.
        (
            "spn",
            [
                "get-token", "--login", "spn", "--server-id", SERVER_ID,
                "--tenant-id", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "--environment", "AzurePublicCloud",
            ],
        ),
    ],
)  # fmt: skip
def test_each_login_mode_rewrites_the_arguments(mode: LoginMode, expected: list[str]) -> None:
    rewritten = use_login_mode(AKS_KUBECONFIG, mode)
    exec_config = exec_of(rewritten)
    assert exec_config["args"] == expected
    assert "devicecode" not in rewritten and AKS_CLIENT_APP_ID not in rewritten
    # Everything else is kept as AKS wrote it.
    original, converted = yaml.safe_load(AKS_KUBECONFIG), yaml.safe_load(rewritten)
    assert converted["clusters"] == original["clusters"] and converted["contexts"] == original["contexts"]
    assert {k: v for k, v in exec_config.items() if k != "args"} == {
        k: v for k, v in exec_of(AKS_KUBECONFIG).items() if k != "args"
    }


def test_every_mode_is_one_kubelogin_knows() -> None:
    # kubelogin's login methods (pkg/internal/token/options.go): the non-interactive ones offered here.
    assert set(LOGIN_MODES) <= {"devicecode", "interactive", "spn", "ropc", "msi", "azurecli", "azd", "workloadidentity"}
    assert "devicecode" not in LOGIN_MODES and "interactive" not in LOGIN_MODES


def test_rewriting_twice_changes_nothing_more() -> None:
    once = use_login_mode(AKS_KUBECONFIG, "azurecli")
    assert use_login_mode(once, "azurecli") == once


def test_users_that_do_not_run_kubelogin_are_left_alone() -> None:
    document = yaml.safe_load(AKS_KUBECONFIG)
    document["users"].append({"name": "other", "user": {"exec": {"command": "aws", "args": ["eks", "get-token"]}}})
    converted = yaml.safe_load(use_login_mode(yaml.safe_dump(document), "msi"))
    assert converted["users"][1] == document["users"][1]


@pytest.mark.parametrize(
    "text",
    [
        "users: [{name: x, user: {token: abc}}]",  # a static-token (local account) kubeconfig
        "- not a mapping",
        "users: [{name: x, user: {exec: {command: kubelogin, args: [get-token, --login, devicecode]}}}]",  # no server id
        "key: [unclosed",
    ],
)
def test_a_kubeconfig_it_cannot_rewrite_is_an_error(text: str) -> None:
    with pytest.raises(KubeconfigError):
        use_login_mode(text, "azurecli")
