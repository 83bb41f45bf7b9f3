"""How the probe waits and retries: ``RetryPolicy`` (per-call timeout, retries, backoff), the budgets of its list and
exec phases, which failures are transient (``is_transient``), and ``with_retries`` / ``call_within``, which bound a
call's attempts and its wait."""


import contextlib
import json
import math
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException
from websocket import WebSocketException

from aks_gpu.cluster.client_config import MAX_NOTE_CHARS
from aks_gpu.cluster.pod_exec import WATCHDOG_GRACE_S, ExecOutputLimitError, ExecRedirectError, ExecTimeoutError
from aks_gpu.config.problems import clipped

T = TypeVar("T")

MAX_BACKOFF_S = 10.0
# A server's Retry-After is honoured up to this: an hour (seen on throttling proxies) would outlast any run.
MAX_RETRY_AFTER_S = 10.0
# The exec phase's own margin over its computed worst case (thread start-up, scheduling).
RUN_MARGIN_S = 10.0
# The list phase, all pages of all lists, may take this many times one list call's worst case (list_phase_budget_s):
# at the defaults (30 s, 2 retries) 1,110 s, room for a 150,000-pod cluster's 300 pages at several seconds each.
# Without it, MAX_LIST_PAGES pages each just within their timeout could hold a run for hours.
LIST_PHASE_CALLS = 10
# websocket-client reports a refused upgrade as "Handshake status <code> <reason>"; the kubernetes
# client wraps it into ApiException(status=0), so the code is only in the text.
_HANDSHAKE_STATUS = re.compile(r"Handshake status (\d{3})")


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


class DeadlineError(Exception):
    """An answer did not come (whole) within its time; a transient failure, worth another try."""


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
        error = box["error"]
        # The socket's read timeout is the same length: on a loaded machine it can fire before this wait ends. The
        # server did not answer in time either way, and is told so in the same words.
        if isinstance(error, urllib3.exceptions.ReadTimeoutError | TimeoutError):
            raise DeadlineError(f"{what}: no complete answer within {seconds:g} s") from error
        raise error
    value: T = box["value"]
    return value
