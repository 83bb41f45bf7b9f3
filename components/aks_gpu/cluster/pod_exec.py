"""One exec into a pod, as ``kubectl exec`` runs it (the WebSocket exec API): the handshake bounded (the client
library sets no timeout: ``_TimedWebSocket``), redirects refused, the command's time enforced by a watchdog, its
output bounded, its exit status read from the error channel (``exit_note``)."""


import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from kubernetes import client as kube_client
from kubernetes.stream import stream, ws_client
from kubernetes.stream.ws_client import ERROR_CHANNEL
from websocket import WebSocket, WebSocketException
from websocket._handshake import SUPPORTED_REDIRECT_STATUSES

from aks_gpu.cluster.client_config import MAX_NOTE_CHARS
from aks_gpu.cluster.snapshot import MAX_SMI_FILE_BYTES
from aks_gpu.config.problems import clipped

# After its command's timeout, an exec's socket is closed this much later if a read still holds it.
WATCHDOG_GRACE_S = 0.5
# What one exec may print: the snapshot reader's limit for an SMI output (snapshot.MAX_SMI_FILE_BYTES), which is a
# hundred times `nvidia-smi -q -x` on 8 GPUs. Past it the exec is stopped (_read_until_closed).
MAX_EXEC_OUTPUT_BYTES = MAX_SMI_FILE_BYTES


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


class ExecTimeoutError(Exception):
    """The command was still running after the timeout; ``partial`` is what it printed until then."""

    def __init__(self, timeout_s: float, partial: str) -> None:
        super().__init__(f"timed out after {timeout_s:g} s")
        self.partial = partial


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
