"""A kubeconfig is read with kubectl's types: what would turn TLS verification off, send the token elsewhere, or
hold the run, is refused naming the field before anything is sent. Written as an attacker would: a server on
127.0.0.1 whose certificate names another host, and a kubeconfig that a generator or a colleague got subtly wrong."""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.cluster import client_config
from aks_gpu.cluster.kubeconfig import KubeconfigFieldError, read_as_kubectl
from aks_gpu.cluster.probe import ProbeError, collect_snapshot
from tests.conftest import PROJECT_DIR

TLS = PROJECT_DIR / "tests" / "fixtures" / "tls"
# The fixture certificate names other.example (and is its own CA): a server on 127.0.0.1 presenting it is not the
# server the kubeconfig names, and a client that verifies refuses it.
CERTIFICATE, KEY = TLS / "other-host.crt", TLS / "other-host.key"
TOKEN = "Zq8mN3vR6tY1wX4pL7kJ0hG5fD2s"  # 28 characters


@contextmanager
def tls_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """An HTTPS server on 127.0.0.1 presenting the other host's certificate; records the headers of every request
    that got through the TLS handshake (the token is in them)."""
    seen: list[dict[str, str]] = []

    class Recorder(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append({key.lower(): value for key, value in self.headers.items()})
            body = b'{"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            return  # a client that refuses our certificate is what these tests want

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERTIFICATE, KEY)
    server = Server(("127.0.0.1", 0), Recorder)
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


def kubeconfig(server: str, **cluster: Any) -> dict[str, Any]:
    ca = base64.b64encode(CERTIFICATE.read_bytes()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": server, "certificate-authority-data": ca, **cluster}}],
        "users": [{"name": "x", "user": {"token": TOKEN}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
    }


def read_cluster(document: dict[str, Any]) -> None:
    collect_snapshot(None, {}, kubeconfig_text=json.dumps(document), full=True, retries=0, timeout_s=3)


def tokens_sent(seen: list[dict[str, str]]) -> list[str]:
    return [headers["authorization"] for headers in seen if TOKEN in headers.get("authorization", "")]


def test_the_fake_tls_server_does_receive_the_token_when_the_name_is_right() -> None:
    # The control: with the certificate's name given, verification passes and the token arrives. Without this, the
    # refusals below could pass because nothing ever reached the server.
    with tls_server() as (url, seen):
        read_cluster(kubeconfig(url, **{"tls-server-name": "other.example"}))
    assert tokens_sent(seen)


@pytest.mark.parametrize("value", ["false", "no", "False", "0", "", "off"])
def test_a_quoted_false_for_insecure_skip_tls_verify_is_refused_and_no_token_leaves(value: str) -> None:
    # The kubernetes client takes `not value`: any non-empty string turned verification off and sent the token to a
    # server whose certificate names another host; "" turned it off too.
    with tls_server() as (url, seen), pytest.raises(ProbeError) as error:
        read_cluster(kubeconfig(url, **{"insecure-skip-tls-verify": value}))
    message = str(error.value)
    assert "clusters[name=x].cluster.insecure-skip-tls-verify is a string" in message
    assert "kubectl reads a boolean" in message
    assert seen == [] and TOKEN not in message


@pytest.mark.parametrize("value", [False, None])
def test_false_or_null_keeps_verification_on_and_the_other_host_gets_no_token(value: bool | None) -> None:
    # null is Go's zero value for a bool (false) for kubectl; the Python client read it as "skip" (not None).
    with tls_server() as (url, seen), pytest.raises(ProbeError, match=r"CERTIFICATE_VERIFY_FAILED|certificate") as error:
        read_cluster(kubeconfig(url, **{"insecure-skip-tls-verify": value}))
    assert tokens_sent(seen) == [] and TOKEN not in str(error.value)


def test_insecure_with_a_certificate_authority_is_refused_as_kubectl_does() -> None:
    refused = "insecure-skip-tls-verify is true and a certificate-authority"
    with tls_server() as (url, seen), pytest.raises(ProbeError, match=refused):
        read_cluster(kubeconfig(url, **{"insecure-skip-tls-verify": True}))
    assert seen == []


def test_the_cli_exits_2_naming_the_field(tmp_path: Path) -> None:
    with tls_server() as (url, seen):
        path = tmp_path / "config"
        path.write_text(json.dumps(kubeconfig(url, **{"insecure-skip-tls-verify": "false"})))
        result = subprocess.run(
            [sys.executable, "-m", "aks_gpu.cli", "audit", "--kubeconfig", str(path)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join((str(PROJECT_DIR / "components"), str(PROJECT_DIR)))},
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert "insecure-skip-tls-verify" in result.stderr and TOKEN not in result.stderr + result.stdout
    assert seen == []


# ---------------------------------------------------------------- every trust field, typed as kubectl types it

GOOD_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("cluster", "insecure-skip-tls-verify", "true"),
        ("cluster", "insecure-skip-tls-verify", 1),
        ("cluster", "certificate-authority-data", "not base64!"),
        ("cluster", "certificate-authority-data", 12),
        ("cluster", "certificate-authority", ["/etc/ca.pem"]),
        ("cluster", "proxy-url", 8080),
        ("cluster", "server", {"url": "https://x"}),
        ("cluster", "tls-server-name", True),
        ("cluster", "disable-compression", "yes"),
        ("user", "token", 12345678),
        ("user", "tokenFile", ["/run/token"]),
        ("user", "client-certificate-data", "%%%"),
        ("user", "client-key-data", {"pem": "x"}),
        ("user", "client-certificate", 3),
        ("user", "client-key", True),
        ("user", "password", 1234),
        ("user", "as-groups", "system:masters"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_naming_it(section: str, field: str, value: Any) -> None:
    document = kubeconfig("https://127.0.0.1:1")
    (document["clusters"] if section == "cluster" else document["users"])[0][section][field] = value
    with pytest.raises(KubeconfigFieldError, match=f"{section}s\\[name=x\\]\\.{section}\\.{field} is ") as error:
        read_as_kubectl(document)
    if section == "user":
        assert repr(value) not in str(error.value)  # a credential field's value is never quoted


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        ({"command": ["kubelogin"], "apiVersion": "v1"}, r"exec\.command is a list"),
        ({"command": "kubelogin", "args": "get-token"}, r"exec\.args is a string"),
        ({"command": "kubelogin", "args": ["get-token", 3]}, r"exec\.args is a list"),
        ({"command": "kubelogin", "provideClusterInfo": "false"}, r"exec\.provideClusterInfo is a string"),
        ({"command": "kubelogin", "env": [{"name": "AZURE_CLIENT_SECRET", "value": 42}]}, r"exec\.env\[0\]"),
        ({"command": "kubelogin", "env": {"AZURE_CLIENT_SECRET": "x"}}, r"exec\.env is a mapping"),
    ],
)
def test_an_exec_plugin_of_the_wrong_shape_is_refused_naming_the_field(plugin: dict[str, Any], expected: str) -> None:
    document = kubeconfig("https://127.0.0.1:1")
    document["users"][0]["user"] = {"exec": plugin}
    with pytest.raises(KubeconfigFieldError, match=expected):
        read_as_kubectl(document)


@pytest.mark.parametrize(
    ("proxy", "accepted"),
    [
        ("http://proxy.corp:3128", True),
        ("https://proxy.corp", True),
        ("socks5://127.0.0.1:1080", True),
        ("socks4://127.0.0.1:1080", False),
        ("ftp://proxy.corp", False),
        ("proxy.corp:3128", False),
        ("http://[::1", False),
        ("http://proxy.corp:port", False),
        ("http://", False),
    ],
)
def test_proxy_urls_are_read_as_kubectl_reads_them(proxy: str, accepted: bool) -> None:
    document = kubeconfig("https://127.0.0.1:1", **{"proxy-url": proxy})
    if accepted:
        read_as_kubectl(document)
    else:
        with pytest.raises(KubeconfigFieldError, match="proxy-url"):
            read_as_kubectl(document)


def test_a_malformed_or_socks_proxy_is_exit_2_not_a_crash(tmp_path: Path) -> None:
    for proxy in ("socks5://127.0.0.1:9", "http://[::1", "gopher://x"):
        path = tmp_path / "config"
        path.write_text(json.dumps(kubeconfig("https://127.0.0.1:9", **{"proxy-url": proxy})))
        result = subprocess.run(
            [sys.executable, "-m", "aks_gpu.cli", "audit", "--kubeconfig", str(path)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join((str(PROJECT_DIR / "components"), str(PROJECT_DIR)))},
            timeout=60,
        )
        assert result.returncode == 2, (proxy, result.stderr)
        assert "proxy" in result.stderr and "internal error" not in result.stderr


def test_null_and_empty_values_mean_not_set_as_for_kubectl() -> None:
    document = kubeconfig("https://127.0.0.1:1", **{"insecure-skip-tls-verify": None, "proxy-url": "", "tls-server-name": None})
    document["clusters"][0]["cluster"]["certificate-authority-data"] = ""
    read_as_kubectl(document)
    assert document["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:1"}


@pytest.mark.parametrize("field", ["as", "as-groups", "as-uid"])
def test_impersonation_the_client_would_drop_is_refused(field: str) -> None:
    document = kubeconfig("https://127.0.0.1:1")
    document["users"][0]["user"][field] = ["viewers"] if field == "as-groups" else "viewer"
    with pytest.raises(KubeconfigFieldError, match="impersonation"):
        read_as_kubectl(document)


def test_an_oidc_provider_without_its_idp_authority_is_refused() -> None:
    document = kubeconfig("https://127.0.0.1:1")
    document["users"][0]["user"] = {"auth-provider": {"name": "oidc", "config": {"id-token": "x", "refresh-token": "y"}}}
    with pytest.raises(KubeconfigFieldError, match="TLS verification off"):
        read_as_kubectl(document)


# ---------------------------------------------------------------- files the kubeconfig names, and its plugin


@pytest.mark.parametrize("field", ["tokenFile", "certificate-authority", "client-key"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_file_the_kubeconfig_names_that_never_ends_is_refused_at_once(field: str, kind: str, tmp_path: Path) -> None:
    target = tmp_path / "named"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    document = kubeconfig("https://127.0.0.1:9")
    cluster, user = document["clusters"][0]["cluster"], document["users"][0]["user"]
    if field == "certificate-authority":
        del cluster["certificate-authority-data"]
        cluster[field] = str(target)
    elif field == "client-key":
        user.update({"client-certificate-data": GOOD_CA, field: str(target)})
        del user["token"]
    else:
        del user["token"]
        user[field] = "named"  # relative: to the kubeconfig's folder, as the client resolves it
    path = tmp_path / "config"
    path.write_text(json.dumps(document))
    started = time.monotonic()
    with pytest.raises(ProbeError, match=r"named pipe|character device"):
        collect_snapshot(None, {}, kubeconfig=str(path), full=True, retries=0, timeout_s=1)
    assert time.monotonic() - started < 5


def test_a_token_file_is_read_trimmed_as_client_go_reads_it(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    document = kubeconfig("https://127.0.0.1:9")
    document["users"][0]["user"] = {"tokenFile": "token"}
    (tmp_path / "config").write_text(json.dumps(document))
    configuration = client_config.load_client_configuration(kubeconfig=str(tmp_path / "config"))
    assert configuration.api_key["BearerToken"] == f"Bearer {TOKEN}"


def plugin_kubeconfig(script: str, env: list[dict[str, str]] | None = None) -> str:
    document = kubeconfig("https://127.0.0.1:9")
    document["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": ["-c", script],
            "interactiveMode": "Never",
            **({"env": env} if env else {}),
        }
    }
    return json.dumps(document)


def test_a_plugin_that_writes_without_end_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    script = "import sys\nwhile True: sys.stdout.write('x' * 65536)"
    started = time.monotonic()
    with pytest.raises(ProbeError, match="wrote more than 1,024 KiB of output and was stopped"):
        client_config.load_client_configuration(kubeconfig_text=plugin_kubeconfig(script))
    assert time.monotonic() - started < 10


def test_a_plugin_that_closes_its_output_but_never_exits_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_config, "EXEC_PLUGIN_TIMEOUT_S", 0.5)
    script = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)"
    started = time.monotonic()
    with pytest.raises(ProbeError, match=r"had not answered after 0\.5 s"):
        client_config.load_client_configuration(kubeconfig_text=plugin_kubeconfig(script))
    assert time.monotonic() - started < 10


def test_a_plugins_stderr_is_contained_not_logged_raw(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # A failing plugin that echoes its environment, a client secret included, to stderr (az and kubelogin print
    # their arguments and settings in debug modes). The kubernetes client logs that with logging.error.
    secret = "AzureClientSecret~9f8e7d6c5b4a"
    script = "import os, sys\nsys.stderr.write('login failed; env: ' + repr(dict(os.environ)))\nsys.exit(1)"
    with caplog.at_level(logging.DEBUG), pytest.raises(ProbeError, match="credential could not be obtained") as error:
        text = plugin_kubeconfig(script, [{"name": "AZURE_CLIENT_SECRET", "value": secret}])
        client_config.load_client_configuration(kubeconfig_text=text)
    out, err = capfd.readouterr()
    assert secret not in str(error.value) and secret[:10] not in str(error.value)
    assert secret not in caplog.text and secret not in out + err
    assert len(str(error.value)) < 800  # one clipped line, not the plugin's whole environment


# ---------------------------------------------------------------- partial echoes of the token


def test_a_server_echoing_most_of_the_token_gets_it_redacted() -> None:
    echo = TOKEN[3:26]  # 23 of 28 characters

    class Echo(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"kind": "Status", "message": f"token {echo} is not valid for this cluster"}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        document = kubeconfig(f"http://127.0.0.1:{server.server_port}")
        del document["clusters"][0]["cluster"]["certificate-authority-data"]
        with pytest.raises(ProbeError, match="HTTP 401") as error:
            read_cluster(document)
    finally:
        server.shutdown()
        server.server_close()
    message = str(error.value)
    assert "[redacted]" in message
    assert not any(TOKEN[start : start + 8] in message for start in range(len(TOKEN) - 7)), message
