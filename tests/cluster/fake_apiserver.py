"""A fake Kubernetes API server on 127.0.0.1 for the live-probe tests and benchmark.

It implements just what ``aks_gpu.cluster.probe`` calls, as the official ``kubernetes`` client sends it:

- ``GET /api/v1/nodes``, ``GET /api/v1/pods``, ``GET /api/v1/namespaces/<ns>/pods`` and
  ``GET /apis/apps/v1/daemonsets`` (``labelSelector`` with ``k=v``, ``k!=v`` and ``k in (a,b)`` terms;
  ``limit`` and ``continue`` paging);
- ``GET /api/v1/namespaces/<ns>/pods/<name>/exec``: a WebSocket upgrade speaking ``v4.channel.k8s.io``
  (one channel byte before each message: 1 stdout, 2 stderr, 3 the final ``Status`` as JSON), as
  ``kubernetes.stream.ws_client`` expects it. The handshake and framing are done here with the standard
  library (RFC 6455: server frames unmasked, client frames masked).

Each node's exec behaviour is configurable (output, exit code, a hang, handshake failures before success, output
dripped a byte at a time) and every exec can be delayed, so tests can see timeouts, retries and the concurrency
the client keeps. ``Faults`` make the whole server misbehave as real ones (and proxies in front of them) do:
throttling with ``Retry-After``, an exec upgrade never answered, a list dripped a byte at a time, a connection
reset, an answer that is not JSON. The server counts every request, exec attempts per node and the most execs it
served at once. Every loop it runs is bounded: by its input, or by the server stopping.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import select
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aks_gpu.cluster.snapshot import ClusterSnapshot

WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
CHANNEL_PROTOCOL = "v4.channel.k8s.io"
STDOUT, STDERR, ERROR = 1, 2, 3
OPCODE_BINARY, OPCODE_CLOSE = 0x2, 0x8


@dataclass(frozen=True)
class ExecBehaviour:
    """What an exec into the plugin pod on one node does."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    hang: bool = False  # never answer: the command runs until the client goes away
    fail_first: int = 0  # refuse this many attempts at the handshake with HTTP 500, then behave
    missing_command: bool = False  # the container has no such executable: a Failure status, no output
    drip_s: float = 0.0  # send stdout as one frame whose bytes arrive this many seconds apart
    flood_bytes: int = 0  # print this many bytes of stdout (64 KiB frames), as a command writing without end would


@dataclass(frozen=True)
class Faults:
    """How the whole server misbehaves (the default: not at all)."""

    # Lists: answer the first ``list_status_times`` (None: every) list request with HTTP ``list_status`` (429, 503),
    # carrying ``retry_after`` as its Retry-After header when set.
    list_status: int | None = None
    list_status_times: int | None = None
    retry_after: str | None = None
    list_drip_s: float = 0.0  # send list bodies a byte at a time, this many seconds apart
    list_body: bytes | None = None  # answer lists with this body (200, application/json): garbage, or the wrong shape
    list_reset: bool = False  # reset the connection (TCP RST) instead of answering a list
    # Execs: accept the connection, read the upgrade request, never answer it.
    exec_silent_handshake: bool = False
    exec_status: int | None = None  # refuse every exec upgrade with this HTTP status (and ``retry_after``)
    exec_reset: bool = False  # reset the connection instead of answering the upgrade
    # Answer lists / exec upgrades with 307 Temporary Redirect to this base URL plus the request's path, as an
    # aggregated API server may (CVE-2022-3172: it can redirect clients, credentials and all, to any URL).
    list_redirect_to: str | None = None
    exec_redirect_to: str | None = None
    # Answer every list page, this many seconds late, with no items and another `continue` token: a list without end,
    # each page well within any page timeout.
    list_endless_s: float | None = None


@dataclass
class FakeCluster:
    """The objects the fake API server serves, and how each node's exec behaves."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    behaviours: dict[str, ExecBehaviour] = field(default_factory=dict)
    faults: Faults = field(default_factory=Faults)
    # What `aksgpu audit` lists too; None: the server answers 404, as one without the API would.
    namespaces: list[dict[str, Any]] | None = None
    resourcequotas: list[dict[str, Any]] | None = None
    networkpolicies: list[dict[str, Any]] | None = None
    clusterqueues: list[dict[str, Any]] | None = None  # Kueue's (kueue.x-k8s.io/v1beta2); None: no Kueue
    workloads: list[dict[str, Any]] | None = None
    events: list[dict[str, Any]] | None = None  # core/v1 Events of every namespace; the field selector is honoured
    forbidden: set[str] = field(default_factory=set)  # paths answered 403 Forbidden, as RBAC refuses them

    @classmethod
    def from_snapshot(cls, snapshot: ClusterSnapshot) -> FakeCluster:
        """A cluster that holds a snapshot's objects and prints each node's SMI output when exec'd into
        (the tests build snapshots with ``tests.cluster.snapshots``, then break one thing at a time)."""
        return cls(
            nodes=copy.deepcopy(snapshot.nodes),
            pods=copy.deepcopy(snapshot.pods),
            daemonsets=copy.deepcopy(snapshot.daemonsets),
            behaviours={node: ExecBehaviour(stdout=text) for node, text in snapshot.smi.items()},
            namespaces=copy.deepcopy(snapshot.namespaces),
            resourcequotas=copy.deepcopy(snapshot.resourcequotas),
            networkpolicies=copy.deepcopy(snapshot.networkpolicies),
            clusterqueues=copy.deepcopy(snapshot.clusterqueues),
            workloads=copy.deepcopy(snapshot.workloads),
            events=copy.deepcopy(snapshot.events),
        )

    def behaviour(self, node: str) -> ExecBehaviour:
        return self.behaviours.get(node, ExecBehaviour())


# ---------------------------------------------------------------- field selectors


def _field_selected(items: list[dict[str, Any]] | None, selector: str) -> list[dict[str, Any]] | None:
    """``items`` an equality field selector (``involvedObject.kind=Node,reason=X``) matches, as the API server filters
    Events (k8s.io/kubernetes v1.36.3 pkg/registry/core/event/strategy.go, ToSelectableFields); None stays None."""
    if items is None or not selector:
        return items
    terms = [term.split("=", 1) for term in selector.split(",")]

    def value(item: Mapping[str, Any], path: str) -> str:
        found: Any = item
        for part in path.split("."):
            found = found.get(part) if isinstance(found, Mapping) else None
        return "" if found is None else str(found)

    return [item for item in items if all(value(item, path) == wanted for path, wanted in terms)]


# ---------------------------------------------------------------- label selectors


def _split_terms(selector: str) -> list[str]:
    """Split on the commas that separate terms, not those inside ``in (a,b)``."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        terms.append(current.strip())
    return terms


def selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    for term in _split_terms(selector):
        set_term = re.fullmatch(r"([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)", term)
        if set_term:
            key, op, values = set_term.groups()
            allowed = {v.strip() for v in values.split(",")}
            if (labels.get(key) in allowed) != (op == "in"):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


# ---------------------------------------------------------------- WebSocket framing


def ws_frame(opcode: int, payload: bytes) -> bytes:
    """One final, unmasked frame, as a server sends it."""
    size = len(payload)
    if size < 126:
        header = bytes([0x80 | opcode, size])
    elif size < 1 << 16:
        header = bytes([0x80 | opcode, 126]) + size.to_bytes(2, "big")
    else:
        header = bytes([0x80 | opcode, 127]) + size.to_bytes(8, "big")
    return header + payload


def exec_status(behaviour: ExecBehaviour) -> dict[str, Any]:
    """The Status the API server sends on the error channel when the command ends."""
    if behaviour.missing_command:
        return {
            "metadata": {},
            "status": "Failure",
            "reason": "InternalError",
            "message": 'Internal error occurred: error executing command in container: exec: "nvidia-smi": '
            "executable file not found in $PATH",
        }
    if behaviour.exit_code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "reason": "NonZeroExitCode",
        "message": f"command terminated with non-zero exit code: exit status {behaviour.exit_code}",
        "details": {"causes": [{"reason": "ExitCode", "message": str(behaviour.exit_code)}]},
    }


# ---------------------------------------------------------------- the server


@dataclass
class ServerStats:
    list_requests: int = 0
    exec_attempts: Counter[str] = field(default_factory=Counter)
    exec_commands: list[list[str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    errors: list[str] = field(default_factory=list)  # what went wrong in the server itself (a bug in this fake)


class FakeApiServer:
    """The fake API server: ``with FakeApiServer(cluster) as server: ... server.url``."""

    def __init__(self, cluster: FakeCluster, exec_delay_s: float = 0.0) -> None:
        self.cluster = cluster
        self.exec_delay_s = exec_delay_s
        self.stats = ServerStats()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        # A short poll interval: stop() waits for the serving loop to notice, 0.5 s by default, in every test.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-apiserver", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def kubeconfig_text(self, context: str = "fake") -> str:
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": context, "cluster": {"server": self.url}}],
                "users": [{"name": f"{context}-user", "user": {"token": "fake-token"}}],
                "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-user"}}],
                "current-context": context,
            }
        )

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # ---- bookkeeping the handler calls

    def _record(self, line: str) -> None:
        with self._lock:
            self.stats.requests.append(line)

    def _list_request(self) -> int:
        with self._lock:
            self.stats.list_requests += 1
            return self.stats.list_requests

    def _attempt(self, node: str, command: list[str]) -> int:
        with self._lock:
            self.stats.exec_attempts[node] += 1
            self.stats.exec_commands.append(command)
            return self.stats.exec_attempts[node]

    @contextmanager
    def _executing(self) -> Iterator[None]:
        with self._lock:
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            yield
        finally:
            with self._lock:
                self.stats.in_flight -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of concurrent connects must not overflow the listen backlog
    fake: FakeApiServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that resets or drops its connection is what the fault tests do: not an error. Anything else is
        kept in ``stats.errors``, not printed: a traceback formatted on this thread while the test's thread parses
        Python (an import) trips CPython 3.11's shared AST recursion counter (python/cpython#106905)."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            return
        with self.fake._lock:
            self.fake.stats.errors.append(repr(error))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as urllib3's connection pool expects
    server: _Server

    def setup(self) -> None:
        super().setup()
        # As Go's net package does for the real API server: without it Nagle's algorithm holds each small
        # frame back until the client's delayed ACK, ~40 ms per exec that no real cluster would show.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return None

    @property
    def fake(self) -> FakeApiServer:
        return self.server.fake

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        self.fake._record(f"GET {parts.path}")
        path = parts.path.rstrip("/")
        cluster = self.fake.cluster
        exec_match = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec", path)
        optional = {
            "/api/v1/namespaces": ("NamespaceList", "v1", cluster.namespaces),
            "/api/v1/resourcequotas": ("ResourceQuotaList", "v1", cluster.resourcequotas),
            "/apis/networking.k8s.io/v1/networkpolicies": ("NetworkPolicyList", "networking.k8s.io/v1", cluster.networkpolicies),
            "/apis/kueue.x-k8s.io/v1beta2/clusterqueues": ("ClusterQueueList", "kueue.x-k8s.io/v1beta2", cluster.clusterqueues),
            "/apis/kueue.x-k8s.io/v1beta2/workloads": ("WorkloadList", "kueue.x-k8s.io/v1beta2", cluster.workloads),
            "/api/v1/events": ("EventList", "v1", _field_selected(cluster.events, query.get("fieldSelector", [""])[0])),
        }
        if path in cluster.forbidden:
            self._json(
                403,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "Forbidden",
                    "message": f'{path.rsplit("/", 1)[-1]} is forbidden: User "auditor" cannot list it at the cluster scope',
                    "code": 403,
                },
            )
        elif path in optional and optional[path][2] is not None:
            kind, api_version, items = optional[path]
            self._list(kind, api_version, items or [], query)
        elif exec_match:
            self._exec(exec_match.group(1), exec_match.group(2), query)
        elif path == "/api/v1/nodes":
            self._list("NodeList", "v1", cluster.nodes, query)
        elif path == "/api/v1/pods":
            self._list("PodList", "v1", cluster.pods, query)
        elif match := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods", path):
            pods = [p for p in cluster.pods if p["metadata"]["namespace"] == match.group(1)]
            self._list("PodList", "v1", pods, query)
        elif path == "/apis/apps/v1/daemonsets":
            self._list("DaemonSetList", "apps/v1", cluster.daemonsets, query)
        elif match := re.fullmatch(r"/apis/apps/v1/namespaces/([^/]+)/daemonsets", path):
            sets = [d for d in cluster.daemonsets if d["metadata"]["namespace"] == match.group(1)]
            self._list("DaemonSetList", "apps/v1", sets, query)
        else:
            self._json(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "message": f"the server could not find the requested resource ({parts.path})",
                    "code": 404,
                },
            )

    def _json(self, code: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _list(self, kind: str, api_version: str, items: list[dict[str, Any]], query: Mapping[str, list[str]]) -> None:
        faults = self.fake.cluster.faults
        number = self.fake._list_request()
        if faults.list_redirect_to is not None:
            self._redirect(faults.list_redirect_to)
            return
        if faults.list_reset:
            self._reset()
            return
        if faults.list_status is not None and (faults.list_status_times is None or number <= faults.list_status_times):
            self._status(faults.list_status)
            return
        if faults.list_body is not None:
            self._send_body(200, faults.list_body, faults.list_drip_s)
            return
        if faults.list_endless_s is not None:
            time.sleep(faults.list_endless_s)
            endless = {"kind": kind, "apiVersion": api_version, "metadata": {"continue": f"page-{number}"}, "items": []}
            self._send_body(200, json.dumps(endless).encode())
            return
        selector = query.get("labelSelector", [""])[0]
        if selector:
            items = [i for i in items if selector_matches(selector, i["metadata"].get("labels", {}))]
        start = int(query.get("continue", ["0"])[0] or 0)
        limit = int(query.get("limit", ["0"])[0] or 0)
        end = start + limit if limit else len(items)
        metadata: dict[str, Any] = {"resourceVersion": "1"}
        if end < len(items):
            metadata["continue"] = str(end)
        body = {"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": items[start:end]}
        self._send_body(200, json.dumps(body).encode(), faults.list_drip_s)

    def _send_body(self, code: int, data: bytes, drip_s: float = 0.0, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not drip_s:
            self.wfile.write(data)
            return
        self.wfile.flush()
        for offset in range(len(data)):  # bounded by the body, and ends when the server stops or the client goes
            if self.fake._stopping.wait(drip_s):
                return
            try:
                self.connection.sendall(data[offset : offset + 1])
            except OSError:
                return

    def _status(self, code: int) -> None:
        reason = {429: "TooManyRequests", 503: "ServiceUnavailable"}.get(code, "InternalError")
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": reason, "code": code}
        retry_after = self.fake.cluster.faults.retry_after
        self._send_body(code, json.dumps(body).encode(), headers={"Retry-After": retry_after} if retry_after else None)

    def _redirect(self, base: str) -> None:
        self.close_connection = True
        self.send_response(307)
        self.send_header("Location", base.rstrip("/") + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _reset(self) -> None:
        """Close the connection with a TCP RST (SO_LINGER 0), as a crashed proxy or a dropped route does."""
        self.close_connection = True
        with suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

    def _exec(self, namespace: str, name: str, query: Mapping[str, list[str]]) -> None:
        pod = next(
            (p for p in self.fake.cluster.pods if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == name), None
        )
        if pod is None:
            self._json(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "message": f'pods "{name}" not found',
                    "code": 404,
                },
            )
            return
        node = pod["spec"]["nodeName"]
        behaviour = self.fake.cluster.behaviour(node)
        attempt = self.fake._attempt(node, query.get("command", []))
        faults = self.fake.cluster.faults
        if faults.exec_redirect_to is not None:
            self._redirect(faults.exec_redirect_to)
            return
        if faults.exec_reset:
            self._reset()
            return
        if faults.exec_silent_handshake:
            self.close_connection = True
            self._wait_for_client(self.connection, forever=True)
            return
        if faults.exec_status is not None:
            self._status(faults.exec_status)
            return
        if attempt <= behaviour.fail_first:
            self._json(
                500,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "InternalError",
                    "message": "error dialing backend: EOF",
                    "code": 500,
                },
            )
            return
        protocols = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        key = self.headers.get("Sec-WebSocket-Key")
        if self.headers.get("Upgrade", "").lower() != "websocket" or not key or CHANNEL_PROTOCOL not in protocols:
            self._json(
                400,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "BadRequest",
                    "message": "Upgrade request required",
                    "code": 400,
                },
            )
            return
        accept = base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()
        self.close_connection = True
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", CHANNEL_PROTOCOL)
        self.end_headers()
        sock = self.connection
        # Counted while the command "runs", inside the client's connection: the count never exceeds what the
        # client has open at once.
        with self.fake._executing():
            if behaviour.hang:
                self._wait_for_client(sock, forever=True)
                return
            if self.fake.exec_delay_s and self._wait_for_client(sock, timeout=self.fake.exec_delay_s):
                return
            if behaviour.drip_s:
                self._drip_frame(sock, bytes([STDOUT]) + behaviour.stdout.encode(), behaviour.drip_s)
                return
            if behaviour.flood_bytes:
                frame = ws_frame(OPCODE_BINARY, bytes([STDOUT]) + b"x" * (64 << 10))
                for _ in range(behaviour.flood_bytes // (64 << 10)):
                    if self.fake._stopping.is_set() or not self._send(sock, frame):
                        return
            for channel, text in ((STDOUT, behaviour.stdout), (STDERR, behaviour.stderr)):
                data = text.encode()
                for offset in range(0, len(data), 4096):  # several frames, as a real stream sends them
                    self._send(sock, ws_frame(OPCODE_BINARY, bytes([channel]) + data[offset : offset + 4096]))
            self._send(sock, ws_frame(OPCODE_BINARY, bytes([ERROR]) + json.dumps(exec_status(behaviour)).encode()))
        self._send(sock, ws_frame(OPCODE_CLOSE, (1000).to_bytes(2, "big")))
        self._wait_for_client(sock, timeout=2.0)  # the client answers the close; then the socket goes

    def _drip_frame(self, sock: socket.socket, payload: bytes, drip_s: float) -> None:
        """One frame whose header says its whole length, then its bytes one at a time: bounded by the payload."""
        frame = ws_frame(OPCODE_BINARY, payload)
        for offset in range(len(frame)):
            if self.fake._stopping.wait(drip_s):
                return
            try:
                sock.sendall(frame[offset : offset + 1])
            except OSError:
                return

    def _send(self, sock: socket.socket, data: bytes) -> bool:
        """Whether it went: False once the client has gone."""
        try:
            sock.sendall(data)
        except OSError:
            return False
        return True

    def _wait_for_client(self, sock: socket.socket, *, timeout: float = 0.0, forever: bool = False) -> bool:
        """Wait ``timeout`` seconds (or until the server stops, when ``forever``); True when the client
        closed or wrote (it sends nothing but its close frame) before that."""
        deadline = time.monotonic() + timeout
        while forever or time.monotonic() < deadline:
            if self.fake._stopping.is_set():
                return True
            step = 0.05 if forever else max(0.0, min(0.05, deadline - time.monotonic()))
            readable, _, _ = select.select([sock], [], [], step)
            if readable:
                with suppress(OSError):
                    sock.recv(4096)
                return True
        return False


@contextmanager
def silent_api_server(folder: Path, token: str = "silent-server-token") -> Iterator[Path]:
    """An API server on 127.0.0.1 that accepts every connection, reads nothing back and never answers; yields the
    kubeconfig (written into ``folder``, with ``token``) that points at it. Used by the exit tests and the bench."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "x", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
            }
        )
    )
    try:
        yield kubeconfig
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        listener.close()
