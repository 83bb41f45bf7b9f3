"""The kubernetes client's configuration, loaded from a kubeconfig as kubectl reads it and within bounds (its files,
its credential plugin, the client's own log lines), and the credentials it carries kept out of any text the probe
reports (``Redactor``). ``ProbeError``: the cluster cannot be read at all."""


import base64
import contextlib
import importlib.util
import logging
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml
from kubernetes import client as kube_client
from kubernetes.config import exec_provider, incluster_config, kube_config
from kubernetes.config.config_exception import ConfigException

from aks_gpu.cluster.kubeconfig import FILE_FIELDS, KubeconfigFieldError, read_as_kubectl
from aks_gpu.config import safe_yaml
from aks_gpu.config.problems import clipped
from aks_gpu.input_files import InputFileError, decode_utf8, read_bounded
from aks_gpu.redaction import MIN_SECRET_CHARS, redact_known, scrub_secret_shapes

# A kubeconfig file is a few KiB per cluster (certificates included): past this it is not one.
MAX_KUBECONFIG_BYTES = 4 << 20
# A kubeconfig's credential plugin gets this long when no terminal can answer it (_BoundedPluginPopen): `az` and
# kubelogin's non-interactive logins answer in seconds, the first call of a cold `az` in well under a minute.
EXEC_PLUGIN_TIMEOUT_S = 60.0
# What a credential plugin may write: an ExecCredential is a token or a certificate and key, a few KiB; its stderr is
# a login prompt or an error. Past these the plugin is stopped.
MAX_PLUGIN_OUTPUT_BYTES = 1 << 20
MAX_PLUGIN_STDERR_BYTES = 64 << 10
# A reason or message the probe passes on (an API server's Status, an exec's error channel) is cut here.
MAX_NOTE_CHARS = 500


class ProbeError(RuntimeError):
    """The cluster could not be read at all; the message says why and what to check."""


class _BoundedPluginPopen(subprocess.Popen):  # type: ignore[type-arg]
    """The kubeconfig's credential plugin (``users[].user.exec``: kubelogin, ``az``), as the kubernetes client starts
    it, but bounded: the client reads its whole output with ``communicate()`` and no timeout, so a plugin that prompts
    (kubelogin's default devicecode login waits for a person) or hangs would hold the run for ever, and one that writes
    without end would fill memory. Here stdout is read up to ``MAX_PLUGIN_OUTPUT_BYTES`` and stderr up to
    ``MAX_PLUGIN_STDERR_BYTES`` (past either the plugin is stopped), and the plugin gets ``EXEC_PLUGIN_TIMEOUT_S``
    when no person is there to answer it. On a terminal (the client's ``spec.interactive``: stdout is a TTY) a person
    can answer the prompt, and it is waited for as the client does; its output is still bounded."""

    def communicate(self, input: Any = None, timeout: float | None = None) -> Any:
        interactive = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
        if timeout is None and not interactive:
            timeout = EXEC_PLUGIN_TIMEOUT_S
        deadline = None if timeout is None else time.monotonic() + timeout
        outputs: dict[int, bytearray] = {}
        limits: dict[int, int] = {}
        with selectors.DefaultSelector() as selector:
            for stream_, limit in ((self.stdout, MAX_PLUGIN_OUTPUT_BYTES), (self.stderr, MAX_PLUGIN_STDERR_BYTES)):
                if stream_ is not None:
                    fd = stream_.fileno()
                    outputs[fd], limits[fd] = bytearray(), limit
                    selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    self._stop()
                    raise self._timed_out()
                for key, _ in selector.select(wait):
                    fd = int(key.fd)
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        selector.unregister(fd)
                        continue
                    outputs[fd] += chunk
                    if len(outputs[fd]) > limits[fd]:
                        which = "output" if limits[fd] == MAX_PLUGIN_OUTPUT_BYTES else "error output"
                        self._stop()
                        raise ConfigException(
                            f"exec: the credential plugin {self._name()!r} wrote more than {limits[fd] >> 10:,} KiB of"
                            f" {which} and was stopped (a credential is a few KiB)"
                        )
        try:
            self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._stop()
            raise self._timed_out() from None
        texts: list[str | None] = []
        for stream_ in (self.stdout, self.stderr):
            if stream_ is None:
                texts.append(None)
                continue
            texts.append(bytes(outputs[stream_.fileno()]).decode("utf-8", errors="replace"))
            stream_.close()
        return texts[0], texts[1]

    def _name(self) -> str:
        command = self.args[0] if isinstance(self.args, list) else self.args
        return os.path.basename(str(command))

    def _stop(self) -> None:
        with contextlib.suppress(OSError):
            self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.wait(5)
        for stream_ in (self.stdout, self.stderr):
            if stream_ is not None:
                with contextlib.suppress(OSError):
                    stream_.close()

    def _timed_out(self) -> ConfigException:
        return ConfigException(
            f"exec: the credential plugin {self._name()!r}"
            f" had not answered after {EXEC_PLUGIN_TIMEOUT_S:g} s and was stopped (no terminal to answer a login"
            " prompt: use a non-interactive login, e.g. kubelogin convert-kubeconfig -l azurecli)"
        )


class _PluginSubprocess:
    """``subprocess`` as the kubernetes client's exec_provider module sees it, with ``Popen`` bounded."""

    Popen = _BoundedPluginPopen

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)


exec_provider.subprocess = _PluginSubprocess()  # type: ignore[attr-defined,assignment]

_CLIENT_CONFIG_DIR = os.path.dirname(os.path.abspath(kube_config.__file__))


class _ClientLogFilter(logging.Filter):
    """Keeps what the kubernetes client's kubeconfig loader logs (``logging.error(str(e))`` on the root logger when a
    credential plugin fails: its stderr, which may echo the secrets of its ``env``) from any handler; the messages are
    kept here instead, for ``load_client_configuration`` to report contained (redacted, one clipped line)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if os.path.dirname(os.path.abspath(record.pathname)) != _CLIENT_CONFIG_DIR:
            return True
        with contextlib.suppress(Exception):
            self.messages.append(record.getMessage())
        return False


@contextlib.contextmanager
def contained_client_logging() -> Iterator[_ClientLogFilter]:
    """While inside, the kubernetes client's kubeconfig messages go to the yielded filter, not to any log output."""
    root = logging.getLogger()
    captured = _ClientLogFilter()
    root.addFilter(captured)
    try:
        yield captured
    finally:
        root.removeFilter(captured)


def load_client_configuration(
    kubeconfig: str | None = None,
    context: str | None = None,
    kubeconfig_text: str | None = None,
) -> kube_client.Configuration:
    """A client configuration from kubeconfig text (the Pulumi hook has the stack's kubeconfig as a
    string), else the file at ``kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config``; ``context``
    picks a context other than the current one. Raises ``ProbeError`` when none can be loaded; its message
    never quotes the kubeconfig (a YAML error's usual copy of the offending line would show a token).

    The kubeconfig is read as kubectl reads it (``aks_gpu.cluster.kubeconfig``: a field kubectl would refuse is a
    ``ProbeError`` naming it, before anything is sent), and the files it names (token file, certificate authority,
    client certificate and key) are read here within ``MAX_KUBECONFIG_BYTES``, regular files only, and handed to the
    client as data: the client would open a named pipe and wait for ever, or read /dev/zero to the end of memory."""
    configuration = kube_client.Configuration()
    source = "the kubeconfig text" if kubeconfig_text is not None else (kubeconfig or "$KUBECONFIG / ~/.kube/config")
    secrets: list[str] = []
    with contained_client_logging() as client_log:
        try:
            if kubeconfig_text is not None:
                document: Any = safe_yaml.load(kubeconfig_text)
                if not isinstance(document, dict):
                    raise ProbeError("the kubeconfig text is not a kubeconfig (expected a YAML mapping)")
            else:
                # Read $KUBECONFIG now, not when the kubernetes module was imported (its default does that).
                path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
                _check_kubeconfig_files(path, named=kubeconfig is None)
                document = kube_config.KubeConfigMerger(path).config  # type: ignore[no-untyped-call]
                if document is None:
                    raise ConfigException("no kubeconfig file found")
            plain = _unwrap(document)
            if not isinstance(plain, dict):
                raise ProbeError(f"cannot load a kubeconfig from {source}: not a kubeconfig (expected a YAML mapping)")
            secrets = _strings_under(_plain_tree(plain.get("users")))
            read_as_kubectl(plain, _unwrap)
            _inline_named_files(plain)
            loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]
                config_dict=document, config_base_path=None, active_context=context
            )
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        except ProbeError:
            raise
        except KubeconfigFieldError as error:
            raise ProbeError(f"cannot load a kubeconfig from {source}: {error}") from None
        except safe_yaml.YamlInputError as error:
            raise ProbeError(f"cannot load a kubeconfig from {source}: {error}") from None
        except yaml.YAMLError as error:
            raise ProbeError(f"cannot load a kubeconfig from {source}: {safe_yaml.describe_yaml_error(error)}") from None
        except (ConfigException, OSError) as error:
            message = Redactor(configuration, secrets).redact(clipped(str(error), MAX_NOTE_CHARS))
            raise ProbeError(f"cannot load a kubeconfig from {source}: {message}") from None
        except Exception as error:  # noqa: BLE001 - a kubeconfig of the wrong shape trips the library anywhere
            raise ProbeError(
                f"cannot load a kubeconfig from {source}: it is not a usable kubeconfig ({type(error).__name__} in the"
                " kubernetes client while reading it; `kubectl config view` shows what is wrong)"
            ) from None
    if client_log.messages:
        # The client logs and goes on without credentials when the plugin fails; the calls would then be refused
        # (401) for a reason nobody sees. Its message (the plugin's stderr) is shown redacted, on one clipped line.
        message = Redactor(configuration, secrets).redact(client_log.messages[0])
        raise ProbeError(
            f"cannot load a kubeconfig from {source}: its credential could not be obtained:"
            f" {clipped(scrub_secret_shapes(message), MAX_NOTE_CHARS)}"
        )
    proxy = str(configuration.proxy or "")
    if proxy.startswith("socks") and importlib.util.find_spec("socks") is None:
        # The client imports urllib3's SOCKS support, which needs PySocks, only when the first call is made.
        raise ProbeError(
            f"cannot load a kubeconfig from {source}: its proxy-url is a SOCKS proxy, which needs the PySocks package"
            " (pip install pysocks) in this Python; or use an HTTP proxy"
        )
    # One retry layer, ours: urllib3 would otherwise retry 3 times on its own and sleep any Retry-After.
    configuration.retries = False
    return configuration


def load_in_cluster_configuration() -> kube_client.Configuration:
    """A client configuration for a pod calling its own cluster's API server as its ServiceAccount: the address from
    ``KUBERNETES_SERVICE_HOST``/``_PORT``, the token and CA the kubelet mounts under
    ``/var/run/secrets/kubernetes.io/serviceaccount/`` (the kubernetes client's in-cluster loader, which reads the token
    file again every minute: the kubelet rotates the bound token, and a level 3 run lasts hours). Raises
    ``ProbeError`` outside a pod."""
    configuration = kube_client.Configuration()
    try:
        incluster_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except ConfigException as error:
        raise ProbeError(
            f"--in-cluster: not in a pod with a ServiceAccount token ({clipped(str(error), MAX_NOTE_CHARS)}); "
            "outside the cluster give --kubeconfig FILE instead"
        ) from None
    configuration.retries = False
    return configuration


def _unwrap(value: Any) -> Any:
    """The plain value inside the kubernetes client's ``ConfigNode`` (what ``KubeConfigMerger`` holds)."""
    return value.value if isinstance(value, kube_config.ConfigNode) else value


def _plain_tree(value: Any) -> Any:
    value = _unwrap(value)
    if isinstance(value, dict):
        return {key: _plain_tree(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_plain_tree(child) for child in value]
    return value


def _inline_named_files(document: dict[str, Any]) -> None:
    """Each file a cluster or user names (``FILE_FIELDS``) read within ``MAX_KUBECONFIG_BYTES`` and put in its data
    field, unless that is set (kubectl: the data wins). Relative paths are resolved as the client resolves them:
    against the folder of the kubeconfig file the entry came from, else the current folder."""
    for section, body in (("clusters", "cluster"), ("users", "user")):
        for raw in _unwrap(document.get(section)) or []:
            entry = _unwrap(raw)
            content = _unwrap(entry.get(body)) if isinstance(entry, dict) else None
            if not isinstance(content, dict):
                continue
            origin = getattr(raw, "path", None)
            base = os.path.abspath(os.path.dirname(origin)) if isinstance(origin, str) else ""
            for file_field, data_field in FILE_FIELDS.items():
                named = content.get(file_field)
                if not isinstance(named, str) or file_field not in content:
                    continue
                if not content.get(data_field):
                    path = os.path.normpath(os.path.join(base, os.path.expanduser(named)))
                    try:
                        data = read_bounded(path, MAX_KUBECONFIG_BYTES)
                    except InputFileError as error:
                        raise ConfigException(f"{body}.{file_field}: {path} {error}") from None
                    if file_field == "tokenFile":
                        # client-go reads a token file with strings.TrimSpace (transport/token_source.go).
                        content["token"] = data.decode("utf-8", errors="replace").strip()
                    else:
                        content[data_field] = base64.standard_b64encode(data).decode("ascii")
                del content[file_field]


def _check_kubeconfig_files(paths: str, *, named: bool) -> None:
    """Each file of a kubeconfig path list (``$KUBECONFIG`` may name several, ``os.pathsep`` apart) is a regular
    UTF-8 file within ``MAX_KUBECONFIG_BYTES``: the kubernetes client opens and reads whatever it is given, so a
    named pipe would hold it for ever and a file of hundreds of MiB for minutes. A path that is absent is left to
    the client, which reports it."""
    for part in paths.split(os.pathsep):
        if not part:
            continue
        path = os.path.expanduser(part)
        if not os.path.lexists(path):
            continue
        try:
            decode_utf8(read_bounded(path, MAX_KUBECONFIG_BYTES))
        except InputFileError as error:
            origin = " (in $KUBECONFIG)" if named else ""
            raise ProbeError(f"cannot load a kubeconfig from {part}{origin}: {error}") from None


_SECRET_KEYS = ("token", "password", "secret", "key-data")


def _strings_under(value: Any) -> list[str]:
    """The credentials in a kubeconfig's ``users``: every string under a key that names one (``token``,
    ``password``, ``client-key-data``, an auth provider's ``refresh-token``, ...), and exec plugin env values."""
    found: list[str] = []
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, secret = stack.pop()
        if isinstance(item, str):
            if secret:
                found.append(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                name = str(key).lower()
                stack.append((child, secret or name == "env" or any(part in name for part in _SECRET_KEYS)))
        elif isinstance(item, list):
            stack.extend((child, secret) for child in item)
    return found


class Redactor:
    """Keeps the credentials a configuration carries out of text: its bearer tokens and password (read when
    asked: an exec plugin may have refreshed the token since), and any extra strings given; whole, and any piece
    of ``MIN_PARTIAL_CHARS`` characters or more (``aks_gpu.redaction.redact_known``)."""

    MIN_SECRET_CHARS = MIN_SECRET_CHARS

    def __init__(self, configuration: kube_client.Configuration, extra: Iterable[str] = ()) -> None:
        self.configuration = configuration
        self.extra = [item for item in extra if len(item) >= self.MIN_SECRET_CHARS]

    def secrets(self) -> list[str]:
        found = list(self.extra)
        for value in (getattr(self.configuration, "api_key", None) or {}).values():
            if isinstance(value, str):
                found.extend((value, value.removeprefix("Bearer ")))
        password = getattr(self.configuration, "password", None)
        if isinstance(password, str):
            found.append(password)
        # As written, as a repr() or an HTTP library quotes it (newlines escaped), and each line or word of it.
        variants: set[str] = set()
        for secret in found:
            variants.update((secret, secret.strip(), secret.encode("unicode_escape").decode("ascii", "replace")))
            variants.update(secret.split())
        # Longest first, so a token is replaced whole before a part of it could be.
        return sorted((item for item in variants if len(item) >= self.MIN_SECRET_CHARS), key=len, reverse=True)

    def redact(self, text: str) -> str:
        return redact_known(text, self.secrets())


def display_host(host: str | None) -> str:
    """The API server's URL without any user:password part."""
    if not host:
        return "(no server)"
    parts = urlsplit(host)
    if parts.username or parts.password:
        parts = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "")
    return urlunsplit(parts)


def context_name(kubeconfig: str | None, context: str | None, kubeconfig_text: str | None = None) -> str | None:
    """The kubeconfig context a run reads: ``context``, else the kubeconfig's current one (None when it cannot be
    told; the kubeconfig itself was loaded already, so a failure here only leaves the name out)."""
    if context:
        return context
    try:
        if kubeconfig_text is not None:
            document = safe_yaml.load(kubeconfig_text)
            current = document.get("current-context") if isinstance(document, dict) else None
            return str(current) if current else None
        path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        _, active = kube_config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        return str(active["name"]) if isinstance(active, dict) and active.get("name") else None
    except Exception:  # noqa: BLE001 - the name is a label on the report, never a reason to fail
        return None
