"""The live probe: read a running cluster into a ``ClusterSnapshot`` with the official ``kubernetes`` client.

What it does is what the AKS GPU best-practices article asks for by hand, for every GPU node at once:
list the GPU nodes (``aks-gpu/pool in (<pools>)``), the DaemonSets and the device plugin pods, then run the
vendor's SMI tool inside each node's plugin pod (``kubectl exec <plugin-pod> -n <ns> -- nvidia-smi``, over
the same WebSocket exec API kubectl uses).
https://learn.microsoft.com/azure/aks/best-practices-gpu

Nothing here decides whether the cluster is healthy: the checks do that, over the snapshot, exactly as
they do over one read from disk. A node that is NotReady, has no plugin pod, or whose exec fails or hangs
is written into ``exec_errors`` with the reason; only a cluster that cannot be read at all (no kubeconfig,
API server unreachable, listing forbidden) raises ``ProbeError``.

Cost and limits:

- Execs run on a thread pool of ``concurrency`` workers (default 16). Each worker has its own
  ``ApiClient``: ``kubernetes.stream.stream`` swaps ``api_client.call_api`` on the client it is given for
  the length of the call, so two threads sharing one client would race and send a plain GET instead
  of a WebSocket upgrade.
- Every network wait is bounded (see ``RetryPolicy``): a list page gets ``timeout_s`` for the whole answer, headers
  and body, however slowly a server drips it; an exec's WebSocket handshake gets ``timeout_s`` per read (the
  client library sets none: ``_TimedWebSocket``), then the command ``timeout_s``, enforced by a watchdog that
  closes the socket should a frame arrive a byte at a time. The run's exec phase as a whole ends by
  ``exec_phase_budget_s`` (nodes over concurrency times one node's worst case, plus a margin): nodes not
  finished by then are reported as such, and the run returns. The lists before it, every page of every list, end by
  ``list_phase_budget_s`` (``LIST_PHASE_CALLS`` list calls' worst case, plus the margin), else the cluster cannot be
  read (``ProbeError``): the whole run is bounded by the two.
- Transient failures (connection errors, HTTP 429/5xx, timeouts) are retried ``retries`` times with
  exponential backoff and jitter, honouring a ``Retry-After`` up to ``MAX_RETRY_AFTER_S``; a refusal
  (401/403/404) and a command's own non-zero exit are not. This is the only retry layer: urllib3's own
  retries (3 by default, which sleep a ``Retry-After`` of an hour) are switched off.
- Nothing the probe reports carries the credentials it was given (``_Redactor``).
- RBAC the caller needs: list nodes; list daemonsets (all namespaces); list pods and create pods/exec in
  the device plugin namespaces. ``full`` (``validate collect``, ``aksgpu audit``) also lists pods in every
  namespace, and namespaces, resourcequotas and networkpolicies, each of the last three optional.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import logging
import math
import os
import queue
import random
import re
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import urllib3
import yaml
from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import exec_provider, kube_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.stream import stream, ws_client
from kubernetes.stream.ws_client import ERROR_CHANNEL
from websocket import WebSocket, WebSocketException
from websocket._handshake import SUPPORTED_REDIRECT_STATUSES

from aks_gpu.cluster.inventory import asks_for_gpu, is_gpu_node
from aks_gpu.cluster.kubeconfig import FILE_FIELDS, KubeconfigFieldError, read_as_kubectl
from aks_gpu.cluster.objects import NodeStatus, PluginPods, exec_problem, node_name, pod_name
from aks_gpu.cluster.smi_pods import plan_known_execs
from aks_gpu.cluster.snapshot import (
    MAX_SMI_FILE_BYTES,
    NAMESPACES_FILE,
    NETWORK_POLICIES_FILE,
    RESOURCE_QUOTAS_FILE,
    ClusterSnapshot,
    rfc3339,
    shape_problem,
)
from aks_gpu.config import safe_yaml
from aks_gpu.config.problems import clipped
from aks_gpu.input_files import InputFileError, decode_utf8, read_bounded
from aks_gpu.naming import POOL_LABEL
from aks_gpu.redaction import MIN_SECRET_CHARS, redact_known, scrub_secret_shapes
from aks_gpu.resolved.model import PlatformModel

Progress = Callable[[int, int], None]
T = TypeVar("T")

# A kubeconfig file is a few KiB per cluster (certificates included): past this it is not one.
MAX_KUBECONFIG_BYTES = 4 << 20
# A page of a list call: big enough for few round trips, small enough that a 5,000-node cluster's pod
# list does not come back as one response of hundreds of megabytes.
LIST_PAGE_SIZE = 500
# Past this many pages (500,000 objects) a list that keeps handing out `continue` tokens is not a cluster's.
MAX_LIST_PAGES = 1000
# One page of 500 objects is a few MB; a body past this is refused rather than held in memory.
MAX_LIST_PAGE_BYTES = 256 << 20
MAX_BACKOFF_S = 10.0
# A server's Retry-After is honoured up to this: an hour (seen on throttling proxies) would outlast any run.
MAX_RETRY_AFTER_S = 10.0
# After its command's timeout, an exec's socket is closed this much later if a read still holds it.
WATCHDOG_GRACE_S = 0.5
# The exec phase's own margin over its computed worst case (thread start-up, scheduling).
RUN_MARGIN_S = 10.0
# A kubeconfig's credential plugin gets this long when no terminal can answer it (_BoundedPluginPopen): `az` and
# kubelogin's non-interactive logins answer in seconds, the first call of a cold `az` in well under a minute.
EXEC_PLUGIN_TIMEOUT_S = 60.0
# What a credential plugin may write: an ExecCredential is a token or a certificate and key, a few KiB; its stderr is
# a login prompt or an error. Past these the plugin is stopped.
MAX_PLUGIN_OUTPUT_BYTES = 1 << 20
MAX_PLUGIN_STDERR_BYTES = 64 << 10
# The list phase, all pages of all lists, may take this many times one list call's worst case (list_phase_budget_s):
# at the defaults (30 s, 2 retries) 1,110 s, room for a 150,000-pod cluster's 300 pages at several seconds each.
# Without it, MAX_LIST_PAGES pages each just within their timeout could hold a run for hours.
LIST_PHASE_CALLS = 10
# What one exec may print: the snapshot reader's limit for an SMI output (snapshot.MAX_SMI_FILE_BYTES), which is a
# hundred times `nvidia-smi -q -x` on 8 GPUs. Past it the exec is stopped (_read_until_closed).
MAX_EXEC_OUTPUT_BYTES = MAX_SMI_FILE_BYTES
# A reason or message the probe passes on (an API server's Status, an exec's error channel) is cut here.
MAX_NOTE_CHARS = 500
# websocket-client reports a refused upgrade as "Handshake status <code> <reason>"; the kubernetes
# client wraps it into ApiException(status=0), so the code is only in the text.
_HANDSHAKE_STATUS = re.compile(r"Handshake status (\d{3})")


class ExecTarget(Protocol):
    """Where a pool's SMI command runs: ``aks_gpu.resolved.targets.PluginTarget`` satisfies this."""

    @property
    def namespace(self) -> str: ...
    @property
    def pod_labels(self) -> dict[str, str]: ...
    @property
    def container(self) -> str | None: ...
    @property
    def smi_command(self) -> list[str]: ...


class ProbeError(RuntimeError):
    """The cluster could not be read at all; the message says why and what to check."""


@dataclass(frozen=True)
class ExecJob:
    """One SMI command to run: in ``namespace/pod`` (``container``) on ``node``."""

    node: str
    namespace: str
    pod: str
    container: str | None
    command: tuple[str, ...]


@dataclass(frozen=True)
class ExecResult:
    """``output`` is stdout and stderr as they arrived (None when nothing ran); ``note`` says what went
    wrong (a non-zero exit, a timeout, a refusal), None when the command ran and exited 0."""

    output: str | None
    note: str | None


@dataclass(frozen=True)
class RetryPolicy:
    timeout_s: float = 30.0
    retries: int = 2
    backoff_s: float = 0.5

    def delay(self, attempt: int) -> float:
        """Exponential backoff (capped) with jitter, so retries from many workers do not arrive together."""
        ceiling = min(MAX_BACKOFF_S, self.backoff_s * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)  # jitter, not cryptography

    def attempt_budget_s(self) -> float:
        """The longest one exec attempt takes: the handshake, then the command, then the watchdog's grace."""
        return 2 * self.timeout_s + WATCHDOG_GRACE_S

    def waits_s(self) -> float:
        """The longest the waits between one call's attempts take together (backoff or Retry-After, whichever is
        longer, at their caps)."""
        return self.retries * max(MAX_BACKOFF_S, MAX_RETRY_AFTER_S)

    def job_budget_s(self) -> float:
        """The longest one node's exec takes, every retry and the waits between them included."""
        return (self.retries + 1) * self.attempt_budget_s() + self.waits_s()


def list_phase_budget_s(policy: RetryPolicy, margin_s: float = RUN_MARGIN_S) -> float:
    """How long all list calls of a run may take together: ``LIST_PHASE_CALLS`` times one call's worst case (every
    attempt at ``timeout_s``, the waits between them included), plus a margin. Each page is bounded on its own; this
    bounds their number too (a server may hand out ``continue`` tokens without end, each page on time)."""
    call = (policy.retries + 1) * policy.timeout_s + policy.waits_s()
    return LIST_PHASE_CALLS * call + margin_s


def exec_phase_budget_s(jobs: int, concurrency: int, policy: RetryPolicy, margin_s: float = RUN_MARGIN_S) -> float:
    """How long the execs of ``jobs`` nodes may take at ``concurrency`` at once, at worst, plus a margin."""
    return math.ceil(jobs / max(1, concurrency)) * policy.job_budget_s() + margin_s


class ListPhaseDeadlineError(Exception):
    """The run's lists were not done by the list phase's deadline (``list_phase_budget_s``); not retried."""

    def __init__(self, what: str, items: int) -> None:
        super().__init__(f"{what}: the lists had not ended when the list phase's deadline passed ({items} items read)")


class DeadlineError(Exception):
    """An answer did not come (whole) within its time; a transient failure, worth another try."""


class ExecTimeoutError(Exception):
    """The command was still running after the timeout; ``partial`` is what it printed until then."""

    def __init__(self, timeout_s: float, partial: str) -> None:
        super().__init__(f"timed out after {timeout_s:g} s")
        self.partial = partial


# ---------------------------------------------------------------- kubeconfig


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
            message = _Redactor(configuration, secrets).redact(clipped(str(error), MAX_NOTE_CHARS))
            raise ProbeError(f"cannot load a kubeconfig from {source}: {message}") from None
        except Exception as error:  # noqa: BLE001 - a kubeconfig of the wrong shape trips the library anywhere
            raise ProbeError(
                f"cannot load a kubeconfig from {source}: it is not a usable kubeconfig ({type(error).__name__} in the"
                " kubernetes client while reading it; `kubectl config view` shows what is wrong)"
            ) from None
    if client_log.messages:
        # The client logs and goes on without credentials when the plugin fails; the calls would then be refused
        # (401) for a reason nobody sees. Its message (the plugin's stderr) is shown redacted, on one clipped line.
        message = _Redactor(configuration, secrets).redact(client_log.messages[0])
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


class _Redactor:
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


# ---------------------------------------------------------------- pure helpers


def pool_selector(pools: Iterable[str]) -> str:
    """The label selector for every node of the given GPU pools."""
    return f"{POOL_LABEL} in ({','.join(sorted(set(pools)))})"


def labels_selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def plan_execs(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    targets: Mapping[str, ExecTarget],
) -> tuple[list[ExecJob], dict[str, str]]:
    """Which node gets which exec, and why the others get none (NotReady, no target, no usable plugin pod). The pod is
    the one the checks judge (``PluginPods``: a Running and ready one first), unless no exec could work there."""
    plugin_pods = PluginPods(pods, targets.values())
    jobs: list[ExecJob] = []
    skipped: dict[str, str] = {}
    for node in nodes:
        status = NodeStatus.read(node)
        name = status.name
        pool = ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)
        target = targets.get(str(pool))
        if not status.ready:
            skipped[name] = f"node NotReady: {status.not_ready}"
            continue
        if target is None:
            skipped[name] = f"no device plugin is known for pool {pool!r}: nothing to run the SMI command in"
            continue
        candidates = plugin_pods.on(target, name)
        if not candidates:
            skipped[name] = (
                f"no device plugin pod on this node (namespace {target.namespace}, labels {labels_selector(target.pod_labels)})"
            )
            continue
        usable = [pod for pod in candidates if exec_problem(pod) is None]
        if not usable:
            skipped[name] = str(exec_problem(candidates[0]))
            continue
        jobs.append(ExecJob(name, target.namespace, pod_name(usable[0]), target.container, tuple(target.smi_command)))
    return jobs, skipped


def exit_note(status_text: str) -> str | None:
    """What the exec's final Status (the v4 error channel) says: None for success, else the exit code or
    the API server's message (an executable that is missing, a container that is gone)."""
    if not status_text.strip():
        return "the exec ended without an exit status"
    try:
        status = json.loads(status_text)
    except (ValueError, RecursionError):
        return clipped(status_text.strip(), MAX_NOTE_CHARS)
    if not isinstance(status, dict) or status.get("status") == "Success":
        return None
    if status.get("reason") == "NonZeroExitCode":
        details = status.get("details")
        causes = details.get("causes") if isinstance(details, dict) else None
        for cause in causes if isinstance(causes, list) else []:
            if isinstance(cause, dict) and cause.get("reason") == "ExitCode" and cause.get("message") is not None:
                return clipped(f"command exited with code {cause['message']}", MAX_NOTE_CHARS)
    return clipped(str(status.get("message") or status.get("reason") or "the exec failed"), MAX_NOTE_CHARS)


def is_transient(error: BaseException) -> bool:
    """Worth another try: timeouts, dropped connections, throttling and server errors; not refusals."""
    if isinstance(error, ApiException):
        status = int(error.status or 0)
        if status == 0:
            if ExecRedirectError.MARK in str(error.reason or ""):
                return False  # the kubernetes client wraps ExecRedirectError into an ApiException(status=0)
            match = _HANDSHAKE_STATUS.search(str(error.reason or ""))
            code = int(match.group(1)) if match else 0
            return code == 0 or code == 429 or code >= 500
        return status == 429 or status >= 500
    if isinstance(error, ExecRedirectError | ExecOutputLimitError):
        return False
    return isinstance(error, ExecTimeoutError | DeadlineError | WebSocketException | urllib3.exceptions.HTTPError | OSError)


def describe(error: BaseException) -> str:
    if isinstance(error, ApiException):
        if int(error.status or 0) == 0:
            return clipped(str(error.reason or "connection failed").strip(), MAX_NOTE_CHARS)
        message = str(error.reason or "")
        with contextlib.suppress(ValueError, RecursionError, AttributeError, TypeError):
            message = str(json.loads(error.body or "").get("message") or message)
        return clipped(f"HTTP {error.status}: {message}".strip(), MAX_NOTE_CHARS)
    return clipped(str(error) or type(error).__name__, MAX_NOTE_CHARS)


def retry_after_s(error: BaseException) -> float | None:
    """The ``Retry-After`` a 429 or 503 answer carried, in seconds (the delta form; an HTTP date is ignored)."""
    if not isinstance(error, ApiException) or int(error.status or 0) not in (429, 503):
        return None
    headers = getattr(error, "headers", None) or {}
    try:
        value = float(str(headers.get("Retry-After", "")).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    sleep: Callable[[float], None] | None = None,
    deadline: float | None = None,
) -> T:
    """``call()``, retried on transient errors after a backoff (or the server's ``Retry-After``, capped at
    ``MAX_RETRY_AFTER_S``); no retry starts that would end past ``deadline`` (``time.monotonic()``). The last
    error is raised with the attempt count noted."""
    attempt = 0
    while True:
        try:
            return call()
        except Exception as error:
            delay = policy.delay(attempt)
            asked = retry_after_s(error)
            if asked is not None:
                delay = max(delay, min(asked, MAX_RETRY_AFTER_S))
            late = deadline is not None and time.monotonic() + delay >= deadline
            if not is_transient(error) or attempt >= policy.retries or late:
                error.add_note(f"after {attempt + 1} attempt{'s' if attempt else ''}")
                raise
            (sleep or _sleep)(delay)
            attempt += 1


def call_within(seconds: float, call: Callable[[], T], what: str) -> T:
    """``call()`` on a daemon thread, waited for at most ``seconds``: an answer dripped a byte at a time (its
    headers too, which no socket timeout bounds) cannot hold the caller. ``DeadlineError`` past that; the
    thread is left to end on its own, its reads each bounded by the socket timeout."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the caller below
            box["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name="aksgpu-list", daemon=True).start()
    if not done.wait(seconds):
        raise DeadlineError(f"{what}: no complete answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value


# ---------------------------------------------------------------- the Kubernetes side


class _BadAnswerError(Exception):
    """An answer that is not what a Kubernetes API server sends (not JSON, the wrong shape); not retried."""


class _Reader:
    """List calls, as plain JSON objects (what ``kubectl get -o json`` prints), paged and retried, each page
    read within ``policy.timeout_s`` and ``MAX_LIST_PAGE_BYTES``, each object checked for the shape the checks
    read (``snapshot.shape_problem``)."""

    def __init__(self, api: kube_client.ApiClient, policy: RetryPolicy, deadline: float | None = None) -> None:
        self.core = kube_client.CoreV1Api(api)
        self.apps = kube_client.AppsV1Api(api)
        self.policy = policy
        # When every list of the run must be done (``time.monotonic()``; ``list_phase_budget_s``); None: no bound.
        self.deadline = deadline

    def _all(self, method: Callable[..., Any], kind: str, what: str, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token: str | None = None
        timeout = self.policy.timeout_s
        for _ in range(MAX_LIST_PAGES):
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise ListPhaseDeadlineError(what, len(items))
            page_kwargs = dict(kwargs, limit=LIST_PAGE_SIZE, _preload_content=False, _request_timeout=(timeout, timeout))
            if token:
                page_kwargs["_continue"] = token

            def fetch(arguments: dict[str, Any] = page_kwargs) -> dict[str, Any]:
                return call_within(timeout, lambda: _read_json(method(**arguments), time.monotonic() + timeout, what), what)

            document = with_retries(fetch, self.policy, deadline=self.deadline)
            page = document.get("items")
            if page is None:
                page = []
            if not isinstance(page, list):
                raise _BadAnswerError(f"{what}: 'items' is not a list")
            problem = shape_problem(page, kind)
            if problem is not None:
                raise _BadAnswerError(f"{what}: not what Kubernetes returns: {problem}")
            items.extend(page)
            metadata = document.get("metadata")
            token = metadata.get("continue") if isinstance(metadata, dict) else None
            if not token:
                return items
            if not isinstance(token, str):
                raise _BadAnswerError(f"{what}: the continue token is not a string")
        raise _BadAnswerError(f"{what}: still more after {MAX_LIST_PAGES} pages of {LIST_PAGE_SIZE}")

    def nodes(self, selector: str) -> list[dict[str, Any]]:
        return self._all(self.core.list_node, "Node", "the node list", label_selector=selector)

    def daemonsets(self) -> list[dict[str, Any]]:
        return self._all(self.apps.list_daemon_set_for_all_namespaces, "DaemonSet", "the DaemonSet list")

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self._all(
            self.core.list_namespaced_pod, "Pod", f"the pod list of {namespace}", namespace=namespace, label_selector=selector
        )


def _read_json(response: Any, deadline: float, what: str) -> dict[str, Any]:
    """A list answer's body (``_preload_content=False``: urllib3's response), read a chunk at a time until
    ``deadline`` and ``MAX_LIST_PAGE_BYTES``, then parsed."""
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            if time.monotonic() > deadline:
                raise DeadlineError(f"{what}: the answer was still arriving at its deadline")
            chunk = response.read1(1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_LIST_PAGE_BYTES:
                raise _BadAnswerError(f"{what}: a page is over {MAX_LIST_PAGE_BYTES >> 20} MiB")
            chunks.append(chunk)
    finally:
        with contextlib.suppress(Exception):
            response.release_conn()
    try:
        document = json.loads(b"".join(chunks))
    except RecursionError:
        raise _BadAnswerError(f"{what}: the answer is JSON nested too deeply to read") from None
    except ValueError as error:
        raise _BadAnswerError(f"{what}: the answer is not JSON ({clipped(str(error), 100)})") from None
    if not isinstance(document, dict):
        raise _BadAnswerError(f"{what}: the answer is not a JSON object")
    return document


class _TimedWebSocket(WebSocket):  # type: ignore[misc]
    """The kubernetes client opens the exec WebSocket with no timeout at all (``ws_client.create_websocket``
    passes none, and websocket-client then blocks on the handshake for ever). This one takes the calling
    thread's ``_HANDSHAKE.timeout_s`` for the connect and handshake reads; it replaces the class that module
    builds, and changes nothing else."""

    def connect(self, url: str, **options: Any) -> None:
        timeout = getattr(_HANDSHAKE, "timeout_s", None)
        if timeout is not None:
            options.setdefault("timeout", timeout)
        # websocket-client follows up to 3 redirects by default, sending the same headers (the bearer token) to
        # whatever host the Location names; an API server never redirects an exec, but an aggregated API server
        # can redirect clients, credentials and all (CVE-2022-3172, https://github.com/kubernetes/kubernetes/issues/112513).
        # The urllib3 side follows none either (retries=False).
        options["redirect_limit"] = 0
        try:
            super().connect(url, **options)  # type: ignore[no-untyped-call]
        except WebSocketException:
            response = getattr(self, "handshake_response", None)
            status = getattr(response, "status", None)
            if status in SUPPORTED_REDIRECT_STATUSES:
                raise ExecRedirectError(int(status)) from None
            raise


class ExecRedirectError(Exception):
    """The exec's upgrade was answered with a redirect: not followed, and not retried."""

    MARK = "answered the exec with a redirect"

    def __init__(self, status: int) -> None:
        super().__init__(
            f"the API server {self.MARK} (HTTP {status}) to another address: not followed, as it would carry the"
            " credentials there"
        )


_HANDSHAKE = threading.local()
ws_client.WebSocket = _TimedWebSocket  # type: ignore[attr-defined]


class _Watchdog:
    """Closes an exec's socket ``seconds`` from now, unless stopped first: a frame that drips in a byte at a
    time passes every per-read timeout, but not this."""

    def __init__(self, ws: Any, seconds: float) -> None:
        self.ws = ws
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        with contextlib.suppress(Exception):
            self.ws.sock.sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._timer.cancel()


def run_exec(core: kube_client.CoreV1Api, job: ExecJob, timeout_s: float) -> ExecResult:
    """One attempt: open the exec WebSocket, wait for the command to end, read its output and exit status."""
    kwargs: dict[str, Any] = {
        "command": list(job.command),
        "stderr": True,
        "stdin": False,
        "stdout": True,
        "tty": False,
        "_preload_content": False,
    }
    if job.container:
        kwargs["container"] = job.container
    _HANDSHAKE.timeout_s = timeout_s
    try:
        ws = stream(core.connect_get_namespaced_pod_exec, job.pod, job.namespace, **kwargs)
    finally:
        _HANDSHAKE.timeout_s = None
    watchdog = _Watchdog(ws, timeout_s + WATCHDOG_GRACE_S)
    try:
        # A frame cut off mid-way would otherwise block a read forever (the socket has no timeout).
        ws.sock.settimeout(timeout_s)
        try:
            _read_until_closed(ws, timeout_s)
        except ExecOutputLimitError:
            watchdog.stop()
            raise
        except Exception:
            if watchdog.fired:
                raise ExecTimeoutError(timeout_s, _partial(ws)) from None
            raise
        if ws.is_open() or watchdog.fired:
            raise ExecTimeoutError(timeout_s, _partial(ws))
        # read_all() forgets every channel, the status channel too: read the status first.
        status_text = ws.read_channel(ERROR_CHANNEL)
        output = ws.read_all()
    finally:
        watchdog.stop()
        ws.close()
    note = exit_note(status_text)
    # Nothing printed and a failure: the command did not run (no such executable, container gone).
    return ExecResult(output=None if note and not output else output, note=note)


class ExecOutputLimitError(Exception):
    """The command printed more than ``MAX_EXEC_OUTPUT_BYTES``: stopped there, not retried."""

    def __init__(self) -> None:
        super().__init__(
            f"the command printed more than {MAX_EXEC_OUTPUT_BYTES >> 20} MiB (an SMI output is a few hundred KiB at"
            " most): stopped there"
        )


def _read_until_closed(ws: Any, timeout_s: float) -> None:
    """``ws.run_forever(timeout)`` (the client's loop: read frames into its channel buffers until the command ends or
    the time is up), with the buffers bounded: the client keeps whatever arrives, so a command that prints without end
    would take gigabytes within its timeout."""

    def buffered() -> int:
        return sum(len(data) for data in (getattr(ws, "_channels", None) or {}).values())

    # update() itself reads every frame already available before it returns: a flood never leaves it. It asks
    # _frames_immediately_available() after each frame; past the limit the answer is no.
    more = getattr(ws, "_frames_immediately_available", None)
    if more is not None:
        ws._frames_immediately_available = lambda: buffered() <= MAX_EXEC_OUTPUT_BYTES and more()
    started = time.monotonic()
    while ws.is_open() and time.monotonic() - started < timeout_s:
        ws.update(timeout=timeout_s - (time.monotonic() - started))
        if buffered() > MAX_EXEC_OUTPUT_BYTES:
            raise ExecOutputLimitError


def _partial(ws: Any) -> str:
    with contextlib.suppress(Exception):
        return str(ws.read_all())
    return ""


def exec_with_retries(
    exec_once: Callable[[ExecJob], ExecResult],
    job: ExecJob,
    policy: RetryPolicy,
    sleep: Callable[[float], None] | None = None,
    deadline: float | None = None,
    redact: Callable[[str], str] = str,
) -> ExecResult:
    """Retry transient failures; never raise: what finally went wrong becomes the result's note."""
    try:
        return with_retries(lambda: exec_once(job), policy, sleep, deadline)
    except Exception as error:  # noqa: BLE001 - one node's failure is data for the checks, not a crash
        attempts = " ".join(getattr(error, "__notes__", []))
        note = f"exec into {job.namespace}/{job.pod} failed: {describe(error)}" + (f" ({attempts})" if attempts else "")
        partial = error.partial if isinstance(error, ExecTimeoutError) and error.partial else None
        return ExecResult(output=partial, note=redact(note))


class _ThreadClients:
    """One ``CoreV1Api`` (and ``ApiClient``) per worker thread; all closed at the end."""

    def __init__(self, configuration: kube_client.Configuration) -> None:
        self.configuration = configuration
        self._local = threading.local()
        self._made: list[kube_client.ApiClient] = []
        self._lock = threading.Lock()

    def core(self) -> kube_client.CoreV1Api:
        core: kube_client.CoreV1Api | None = getattr(self._local, "core", None)
        if core is None:
            api = kube_client.ApiClient(self.configuration)
            with self._lock:
                self._made.append(api)
            core = kube_client.CoreV1Api(api)
            self._local.core = core
        return core

    def close(self) -> None:
        for api in self._made:
            api.close()  # type: ignore[no-untyped-call]


def run_execs(
    jobs: Sequence[ExecJob],
    exec_once: Callable[[ExecJob], ExecResult],
    policy: RetryPolicy,
    concurrency: int,
    on_done: Callable[[ExecJob, ExecResult], None],
    deadline: float | None = None,
    redact: Callable[[str], str] = str,
) -> list[ExecJob]:
    """Every job on at most ``concurrency`` threads; ``on_done`` is called on this thread as each ends.
    Returns the jobs not done by ``deadline`` (``time.monotonic()``): the wait ends then, whatever still runs.

    The workers are daemon threads, so one held by a server that never lets go (each read is bounded, but a
    handshake may drip) can hold neither this call past the deadline nor the process at exit. On Ctrl-C (or a
    failing callback) no queued job is started; the running ones end on their own, each bounded."""
    if not jobs:
        return []
    pending: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(jobs)):
        pending.put(index)
    finished: queue.SimpleQueue[tuple[int, ExecResult]] = queue.SimpleQueue()
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                index = pending.get_nowait()
            except queue.Empty:
                return
            finished.put((index, exec_with_retries(exec_once, jobs[index], policy, deadline=deadline, redact=redact)))

    for number in range(max(1, min(concurrency, len(jobs)))):
        threading.Thread(target=work, name=f"aksgpu-exec-{number}", daemon=True).start()
    remaining = set(range(len(jobs)))
    try:
        while remaining:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                break
            try:
                index, result = finished.get(timeout=wait)
            except queue.Empty:
                break
            remaining.discard(index)
            on_done(jobs[index], result)
    finally:
        stop.set()
    return [jobs[index] for index in sorted(remaining)]


# ---------------------------------------------------------------- the entry point


def collect_snapshot(
    model: PlatformModel | None,
    targets: Mapping[str, ExecTarget],
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    kubeconfig_text: str | None = None,
    concurrency: int = 16,
    timeout_s: float = 30,
    retries: int = 2,
    backoff_s: float = 0.5,
    progress: Progress | None = None,
    margin_s: float = RUN_MARGIN_S,
    full: bool = False,
    known_smi_pods: bool = False,
) -> ClusterSnapshot:
    """Read the GPU nodes, DaemonSets and device plugin pods, and run the SMI command on every ready GPU
    node, at most ``concurrency`` at a time. ``progress(done, total)`` counts nodes (those that need no
    exec are done at once). Raises ``ProbeError`` only when the cluster cannot be read at all. The execs end
    by ``exec_phase_budget_s`` (``margin_s`` over their worst case); a node not done by then is reported so.

    ``full`` reads what ``aksgpu audit`` needs too (``_read_for_audit``): every GPU node, the pods on them or
    asking for GPUs, namespaces, quotas, network policies and the time; ``model`` may then be None (no stack:
    nothing is exec'd). ``known_smi_pods`` (``aksgpu audit collect``) runs the SMI command on every GPU node outside
    the stack's pools too, in the plugin or driver pod the vendors' manifests label (``aks_gpu.cluster.smi_pods``).
    The snapshot names the cluster it was read from (``cluster``: the kubeconfig context and the API server)."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError("timeout_s must be a positive number of seconds")
    policy = RetryPolicy(timeout_s=timeout_s, retries=retries, backoff_s=backoff_s)
    configuration = load_client_configuration(kubeconfig, context, kubeconfig_text)
    redactor = _Redactor(configuration)
    pools = [pool.name for pool in model.pools] if model is not None else []
    optional: dict[str, Any] = {}

    list_budget = list_phase_budget_s(policy, margin_s)
    with kube_client.ApiClient(configuration) as api:
        reader = _Reader(api, policy, time.monotonic() + list_budget)
        try:
            nodes = reader.nodes(pool_selector(pools)) if pools and not full else []
            daemonsets = reader.daemonsets()
            groups = sorted({(t.namespace, labels_selector(t.pod_labels)) for t in targets.values()})
            seen: set[str | tuple[str, str]] = set()
            pods: list[dict[str, Any]] = []
            for namespace, selector in groups:
                for pod in reader.pods(namespace, selector):
                    # Two targets' selectors may both match a pod: keep it once.
                    metadata = pod.get("metadata") or {}
                    key = metadata.get("uid") or (str(metadata.get("namespace")), str(metadata.get("name")))
                    if key not in seen:
                        seen.add(key)
                        pods.append(pod)
            if full:
                nodes, pods, optional = _read_for_audit(reader, set(pools), pods)
        except Exception as error:  # noqa: BLE001 - whatever the layer, one readable line
            notes = " ".join(getattr(error, "__notes__", []))
            reason = redactor.redact(describe(error) + (f" ({notes})" if notes else ""))
            raise ProbeError(f"cannot read the cluster at {display_host(configuration.host)}: {reason}") from None

    exec_nodes = [node for node in nodes if ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL) in pools]
    jobs, skipped = plan_execs(exec_nodes, pods, targets)
    if known_smi_pods:
        planned = {id(node) for node in exec_nodes}
        others = [node for node in nodes if id(node) not in planned]
        known_jobs, known_skipped = plan_known_execs(others, pods)
        jobs += [ExecJob(job.node, job.namespace, job.pod, job.container, job.command) for job in known_jobs]
        skipped.update(known_skipped)
        exec_nodes += others
    smi: dict[str, str] = {}
    exec_errors: dict[str, str] = dict(skipped)
    total = len(exec_nodes)
    done = len(skipped)
    if progress:
        progress(done, total)

    def record(job: ExecJob, result: ExecResult) -> None:
        nonlocal done
        if result.output is not None:
            smi[job.node] = result.output
        if result.note is not None:
            exec_errors[job.node] = result.note
        done += 1
        if progress:
            progress(done, total)

    budget = exec_phase_budget_s(len(jobs), concurrency, policy, margin_s)
    clients = _ThreadClients(configuration)
    try:
        late = run_execs(
            jobs,
            lambda job: run_exec(clients.core(), job, policy.timeout_s),
            policy,
            concurrency,
            record,
            deadline=time.monotonic() + budget,
            redact=redactor.redact,
        )
    finally:
        clients.close()
    for job in late:
        exec_errors[job.node] = (
            f"exec into {job.namespace}/{job.pod} had not finished when the probe's deadline passed ({budget:g} s for"
            f" {len(jobs)} node(s) at {concurrency} at once, {timeout_s:g} s per exec, {retries} retries)"
        )
    cluster = {"server": display_host(configuration.host)}
    name = context_name(kubeconfig, context, kubeconfig_text)
    if name:
        cluster["context"] = name
    return ClusterSnapshot(
        nodes=nodes, daemonsets=daemonsets, pods=pods, smi=smi, exec_errors=exec_errors, cluster=cluster, **optional
    )


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


# Reading these is optional: a caller without the right to list them (401/403), or a server without the API (404),
# leaves that file out of the snapshot, and the audit reports what depends on it as not checked.
_OPTIONAL_REFUSALS = (401, 403, 404)


def _read_for_audit(
    reader: _Reader, pools: set[str], plugin_pods: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """What ``aksgpu audit`` reads beyond the validation: the GPU nodes (``aks_gpu.cluster.inventory`` decides, plus
    every node of the stack's pools), the pods on them or asking for GPUs (and the plugin pods already read), and
    the namespaces, resource quotas and network policies of the whole cluster, with the time of collection.
    RBAC: list nodes, pods, namespaces, resourcequotas and networkpolicies cluster-wide."""
    collected_at = rfc3339(datetime.now(UTC))
    nodes = [
        node
        for node in reader._all(reader.core.list_node, "Node", "the node list")
        if ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL) in pools or is_gpu_node(node)
    ]
    names = {node_name(node) for node in nodes}

    def key(pod: Mapping[str, Any]) -> str | tuple[str, str]:
        metadata = pod.get("metadata") or {}
        return str(metadata.get("uid") or "") or (str(metadata.get("namespace")), str(metadata.get("name")))

    pods = list(plugin_pods)
    seen = {key(pod) for pod in pods}
    for pod in reader._all(reader.core.list_pod_for_all_namespaces, "Pod", "the pod list"):
        if key(pod) not in seen and ((pod.get("spec") or {}).get("nodeName") in names or asks_for_gpu(pod)):
            seen.add(key(pod))
            pods.append(pod)

    optional: dict[str, Any] = {"collected_at": collected_at, "not_collected": {}}
    networking = kube_client.NetworkingV1Api(reader.core.api_client)
    for field_name, file_name, kind, method in (
        ("namespaces", NAMESPACES_FILE, "Namespace", reader.core.list_namespace),
        ("resourcequotas", RESOURCE_QUOTAS_FILE, "ResourceQuota", reader.core.list_resource_quota_for_all_namespaces),
        ("networkpolicies", NETWORK_POLICIES_FILE, "NetworkPolicy", networking.list_network_policy_for_all_namespaces),
    ):
        try:
            optional[field_name] = reader._all(method, kind, f"the {kind} list")
        except ApiException as error:
            if int(error.status or 0) not in _OPTIONAL_REFUSALS:
                raise
            optional["not_collected"][file_name] = describe(error)
    return nodes, pods, optional
