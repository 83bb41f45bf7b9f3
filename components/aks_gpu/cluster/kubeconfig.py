"""A kubeconfig read with kubectl's types, before the kubernetes Python client sees it.

The Python client reads a kubeconfig loosely: ``insecure-skip-tls-verify: "false"`` (a quoted string, as some
generators write it), ``"no"``, ``""`` or ``null`` all turn TLS verification off (it takes ``not value``), and the
bearer token then goes to whatever server answers. kubectl decodes the same file into typed Go structs
(k8s.io/client-go ``tools/clientcmd/api/v1/types.go``, read 2026-12-01 at 32ce75a): a string where a ``bool`` is
declared fails the decode, a ``[]byte`` field (``*-data``) must be base64, and a JSON ``null`` leaves the zero
value (``false``, ``""``). This module makes the Python client see what kubectl would:

- every field of a cluster, user (auth info), exec plugin and context that the types declare is checked against its
  Go type; anything else is a ``KubeconfigFieldError`` naming the field (the CLI's exit 2);
- ``null`` and empty values of those fields are dropped, as Go's zero value means "not set";
- the checks kubectl makes on top of the types where trust is at stake: ``proxy-url`` must parse with scheme http,
  https or socks5 (client-go ``tools/clientcmd/helpers.go`` ``parseProxyURL``), ``insecure-skip-tls-verify`` with a
  certificate authority is refused (client-go ``transport/transport.go``: "specifying a root certificates file with
  the insecure flag is not allowed");
- what the Python client would silently drop, changing whom the calls act as, is refused: impersonation (``as``,
  ``as-groups``, ...; the Python client ignores them, so the calls would carry the caller's own, wider, rights), and
  an ``oidc`` auth provider without the IdP's certificate authority (the Python client then refreshes the token
  with TLS verification off, ``kube_config.py`` ``_refresh_oidc``; client-go verifies against the system roots).

The module is pure: it reads and edits the parsed document it is given and touches no file.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from aks_gpu.config.problems import clipped

# client-go tools/clientcmd/api/v1/types.go, the JSON names and Go types of each struct the probe reads.
STRING, BOOL, BYTES, STRINGS, STRING_MAP, STRINGS_MAP = "string", "bool", "bytes", "[]string", "map", "map[]"
CLUSTER_FIELDS: Mapping[str, str] = {
    "server": STRING,
    "tls-server-name": STRING,
    "insecure-skip-tls-verify": BOOL,
    "certificate-authority": STRING,
    "certificate-authority-data": BYTES,
    "proxy-url": STRING,
    "disable-compression": BOOL,
}
AUTH_INFO_FIELDS: Mapping[str, str] = {
    "client-certificate": STRING,
    "client-certificate-data": BYTES,
    "client-key": STRING,
    "client-key-data": BYTES,
    "token": STRING,
    "tokenFile": STRING,
    "as": STRING,
    "as-uid": STRING,
    "as-groups": STRINGS,
    "as-user-extra": STRINGS_MAP,
    "username": STRING,
    "password": STRING,
}
EXEC_FIELDS: Mapping[str, str] = {
    "command": STRING,
    "args": STRINGS,
    "apiVersion": STRING,
    "installHint": STRING,
    "provideClusterInfo": BOOL,
    "interactiveMode": STRING,
}
CONTEXT_FIELDS: Mapping[str, str] = {"cluster": STRING, "user": STRING, "namespace": STRING}
AUTH_PROVIDER_FIELDS: Mapping[str, str] = {"name": STRING, "config": STRING_MAP}
# client-go tools/clientcmd/helpers.go parseProxyURL.
PROXY_SCHEMES = ("http", "https", "socks5")
IMPERSONATION_FIELDS = ("as", "as-uid", "as-groups", "as-user-extra")
# The fields whose values are files the client opens (resolved against the kubeconfig's folder), and the
# ``-data`` field each one gives way to.
FILE_FIELDS: Mapping[str, str] = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
    "tokenFile": "token",
}


class KubeconfigFieldError(ValueError):
    """A kubeconfig field kubectl would not read as written; the message names it and never quotes a secret."""


def _go_type_name(kind: str) -> str:
    return {
        STRING: "a string",
        BOOL: "a boolean (true or false, unquoted)",
        BYTES: "base64 text",
        STRINGS: "a list of strings",
        STRING_MAP: "a mapping of strings",
        STRINGS_MAP: "a mapping of string lists",
    }[kind]


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _fits(value: Any, kind: str) -> bool:
    if kind == STRING:
        return isinstance(value, str)
    if kind == BOOL:
        return isinstance(value, bool)
    if kind == BYTES:
        if not isinstance(value, str):
            return False
        # encoding/json decodes []byte with base64.StdEncoding, which skips CR and LF and nothing else.
        try:
            base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
        except (binascii.Error, ValueError):
            return False
        return True
    if kind == STRINGS:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if kind == STRING_MAP:
        return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    if isinstance(value, dict):  # STRINGS_MAP
        return all(isinstance(k, str) and _fits(v, STRINGS) for k, v in value.items())
    return False


def _check_fields(entry: dict[str, Any], fields: Mapping[str, str], where: str, *, secret: bool) -> None:
    """Each typed field of ``entry`` as Go decodes it; ``null`` and empty values dropped (Go's zero: not set)."""
    for key, kind in fields.items():
        if key not in entry:
            continue
        value = entry[key]
        if value is None or (value == "" and kind in (STRING, BYTES)) or (value == [] and kind == STRINGS):
            del entry[key]
            continue
        if _fits(value, kind):
            continue
        shown = ""
        # A short value of a switch is no secret, and seeing it explains the error; a credential field's value
        # is never quoted.
        if kind == BOOL and isinstance(value, str | int | float) and not secret:
            shown = f" ({clipped(repr(value), 40)})"
        detail = "" if kind != BYTES or not isinstance(value, str) else " that is not valid base64"
        article = _json_type(value)
        raise KubeconfigFieldError(
            f"{where}.{key} is {article}{detail}{shown}; kubectl reads {_go_type_name(kind)} there and would refuse"
            " this kubeconfig: fix the field (nothing was sent to the cluster)"
        )


def _entries(
    document: Mapping[str, Any], section: str, body: str, unwrap: Callable[[Any], Any]
) -> list[tuple[str, dict[str, Any]]]:
    """(``section[name=...].body``, the body mapping) for every named entry of a section."""
    items = unwrap(document.get(section))
    if items is None:
        return []
    if not isinstance(items, list):
        raise KubeconfigFieldError(f"{section} is {_json_type(items)}; kubectl reads a list of named entries there")
    found: list[tuple[str, dict[str, Any]]] = []
    for index, raw in enumerate(items):
        item = unwrap(raw)
        if not isinstance(item, dict):
            raise KubeconfigFieldError(f"{section}[{index}] is {_json_type(item)}; kubectl reads a mapping with name and {body}")
        name = item.get("name")
        label = f"{section}[name={clipped(name, 80)}]" if isinstance(name, str) else f"{section}[{index}]"
        if name is not None and not isinstance(name, str):
            raise KubeconfigFieldError(f"{label}.name is {_json_type(name)}; kubectl reads a string there")
        content = unwrap(item.get(body))
        if content is None:
            continue
        if not isinstance(content, dict):
            raise KubeconfigFieldError(f"{label}.{body} is {_json_type(content)}; kubectl reads a mapping there")
        found.append((f"{label}.{body}", content))
    return found


def read_as_kubectl(document: Mapping[str, Any], unwrap: Callable[[Any], Any] = lambda value: value) -> None:
    """Check ``document`` (a parsed kubeconfig, as the kubernetes client holds it; ``unwrap`` turns the client's
    wrappers into plain values) against kubectl's types, in place: zero values are dropped. Raises
    ``KubeconfigFieldError`` naming the first field kubectl would not read, or that would change trust here."""
    current = unwrap(document.get("current-context"))
    if current is not None and not isinstance(current, str):
        raise KubeconfigFieldError(f"current-context is {_json_type(current)}; kubectl reads a string there")
    for where, cluster in _entries(document, "clusters", "cluster", unwrap):
        _check_fields(cluster, CLUSTER_FIELDS, where, secret=False)
        _check_cluster(cluster, where)
    for where, user in _entries(document, "users", "user", unwrap):
        _check_fields(user, AUTH_INFO_FIELDS, where, secret=True)
        _check_user(user, where, unwrap)
    for where, context in _entries(document, "contexts", "context", unwrap):
        _check_fields(context, CONTEXT_FIELDS, where, secret=False)


def _check_cluster(cluster: dict[str, Any], where: str) -> None:
    proxy = cluster.get("proxy-url")
    if proxy is not None:
        problem = proxy_url_problem(proxy)
        if problem:
            raise KubeconfigFieldError(f"{where}.proxy-url {problem}")
    authority = "certificate-authority" in cluster or "certificate-authority-data" in cluster
    if cluster.get("insecure-skip-tls-verify") is True and authority:
        raise KubeconfigFieldError(
            f"{where}: insecure-skip-tls-verify is true and a certificate-authority is given; kubectl refuses this"
            " (\"specifying a root certificates file with the insecure flag is not allowed\"): drop one of them"
        )


def proxy_url_problem(proxy: str) -> str | None:
    """Why kubectl would refuse ``proxy`` as a cluster's ``proxy-url`` (None: it would not)."""
    try:
        parts = urlsplit(proxy)
        parts.port  # noqa: B018 - a port that is not a number raises here, as url.Parse refuses it
    except ValueError:
        return "is not a URL kubectl can parse"
    if parts.scheme not in PROXY_SCHEMES:
        return f"has the scheme {clipped(repr(parts.scheme), 40)}; kubectl takes http, https or socks5 only"
    if not parts.hostname:
        return "names no proxy host"
    return None


def _check_user(user: dict[str, Any], where: str, unwrap: Callable[[Any], Any]) -> None:
    for field_name in IMPERSONATION_FIELDS:
        if field_name in user:
            raise KubeconfigFieldError(
                f"{where}.{field_name}: impersonation is set, and the kubernetes Python client this tool uses ignores"
                " it (its calls would carry the user's own rights instead): run with a kubeconfig user that holds the"
                " rights itself"
            )
    plugin = unwrap(user.get("exec"))
    if plugin is not None:
        if not isinstance(plugin, dict):
            raise KubeconfigFieldError(f"{where}.exec is {_json_type(plugin)}; kubectl reads a mapping there")
        _check_fields(plugin, EXEC_FIELDS, f"{where}.exec", secret=False)
        env = unwrap(plugin.get("env"))
        if env is None:
            plugin.pop("env", None)
        elif not isinstance(env, list):
            raise KubeconfigFieldError(f"{where}.exec.env is {_json_type(env)}; kubectl reads a list of name and value")
        else:
            for index, raw in enumerate(env):
                item = unwrap(raw)
                if not (isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("name", "value"))):
                    raise KubeconfigFieldError(
                        f"{where}.exec.env[{index}]: kubectl reads a mapping with a string name and a string value there"
                    )
    provider = unwrap(user.get("auth-provider"))
    if provider is not None:
        if not isinstance(provider, dict):
            raise KubeconfigFieldError(f"{where}.auth-provider is {_json_type(provider)}; kubectl reads a mapping there")
        _check_fields(provider, AUTH_PROVIDER_FIELDS, f"{where}.auth-provider", secret=True)
        config = provider.get("config") or {}
        authority = config.get("idp-certificate-authority") or config.get("idp-certificate-authority-data")
        if provider.get("name") == "oidc" and not authority:
            raise KubeconfigFieldError(
                f"{where}.auth-provider: an oidc provider without idp-certificate-authority(-data); the kubernetes"
                " Python client would refresh its token with TLS verification off: add the IdP's certificate"
                " authority, or use an exec plugin (kubelogin)"
            )
