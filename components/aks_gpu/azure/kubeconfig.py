"""The kubeconfig AKS hands out, made usable without a person at a browser. Pure: text in, text out.

``listClusterUserCredentials(format=exec)`` on an Entra ID cluster returns an exec kubeconfig whose user runs
``kubelogin get-token --environment AzurePublicCloud --server-id 6dae42f8-... --client-id 80faf920-...
--tenant-id <tenant> --login devicecode`` (a real one: tests/fixtures/aks/, with its source). Device code prints a
prompt and waits for someone to sign in: every Kubernetes operation of ``pulumi up`` and the deploy hook's probe
would hang in CI. ``use_login_mode`` rewrites the user's arguments to a non-interactive kubelogin login mode, the
way ``kubelogin convert-kubeconfig -l <mode>`` does (https://azure.github.io/kubelogin/cli/convert-kubeconfig.html,
https://github.com/Azure/kubelogin/blob/main/pkg/internal/converter/convert.go):

- every mode keeps ``--server-id`` (the AKS server application, the token's audience);
- ``azurecli`` uses the ``az login`` session; kubelogin takes the tenant from it, so ``--tenant-id`` is dropped
  ("tenantID from the input kubeconfig will be disregarded", convert.go);
- ``workloadidentity`` reads AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE and AZURE_AUTHORITY_HOST;
- ``msi`` uses the machine's managed identity (AZURE_CLIENT_ID picks a user-assigned one);
- ``spn`` keeps ``--tenant-id`` and ``--environment``; the service principal's id and secret come from
  AZURE_CLIENT_ID/AZURE_CLIENT_SECRET (or AAD_SERVICE_PRINCIPAL_CLIENT_ID/_SECRET). The ``--client-id`` AKS wrote is
  the AKS public client application (80faf920-...), not a service principal, so it is dropped rather than carried
  over as convert-kubeconfig would (kubelogin lets the environment override it anyway).
  https://azure.github.io/kubelogin/concepts/login-modes.html

Only users whose exec command is kubelogin are touched; anything else in the file is kept as it is.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml

LoginMode = Literal["azurecli", "workloadidentity", "spn", "msi"]
LOGIN_MODES: tuple[LoginMode, ...] = ("azurecli", "workloadidentity", "spn", "msi")

# The value flags kubelogin get-token takes in the kubeconfig AKS returns (and that a mode may keep).
_VALUE_FLAGS = ("--environment", "--server-id", "--client-id", "--tenant-id", "--login")
_KEPT: dict[LoginMode, tuple[str, ...]] = {
    "azurecli": (),
    "workloadidentity": (),
    "msi": (),
    "spn": ("--tenant-id", "--environment"),
}


class KubeconfigError(ValueError):
    """The kubeconfig is not one this module can rewrite (not YAML, no kubelogin user, no server id)."""


def _flag_values(args: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for index, arg in enumerate(args[:-1]):
        if arg in _VALUE_FLAGS:
            values[arg] = args[index + 1]
    return values


def login_args(args: list[str], mode: LoginMode) -> list[str]:
    """The ``kubelogin get-token`` arguments for ``mode``, from the arguments AKS wrote."""
    values = _flag_values(args)
    if "--server-id" not in values:
        raise KubeconfigError("the kubelogin user has no --server-id")
    rewritten = ["get-token", "--login", mode, "--server-id", values["--server-id"]]
    for flag in _KEPT[mode]:
        if flag in values:
            rewritten += [flag, values[flag]]
    return rewritten


def use_login_mode(kubeconfig: str, mode: LoginMode) -> str:
    """``kubeconfig`` with every kubelogin user switched to ``mode``; raises ``KubeconfigError`` when it has none."""
    try:
        document: Any = yaml.safe_load(kubeconfig)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"not YAML: {type(exc).__name__}") from None
    if not isinstance(document, dict):
        raise KubeconfigError("not a kubeconfig mapping")
    rewritten = 0
    for user in document.get("users") or []:
        exec_config = ((user or {}).get("user") or {}).get("exec") if isinstance(user, dict) else None
        if not isinstance(exec_config, dict) or "kubelogin" not in str(exec_config.get("command", "")).lower():
            continue
        exec_config["args"] = login_args([str(a) for a in exec_config.get("args") or []], mode)
        rewritten += 1
    if not rewritten:
        raise KubeconfigError("no user runs kubelogin: not the exec kubeconfig of an Entra ID cluster")
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
