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
- ``timeout_s`` bounds each list request and each exec once its WebSocket is open; a command still
  running then is abandoned and retried. The WebSocket handshake itself has no timeout in the client
  library (``create_websocket`` passes none); it follows a successful list from the same API server,
  so it is answered or refused by the server.
- Transient failures (connection errors, HTTP 429/5xx, timeouts) are retried ``retries`` times with
  exponential backoff and jitter; a refusal (401/403/404) and a command's own non-zero exit are not.
- RBAC the caller needs: list nodes; list daemonsets (all namespaces); list pods and create pods/exec in
  the device plugin namespaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import urllib3
import yaml
from kubernetes import client as kube_client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.stream import stream
from kubernetes.stream.ws_client import ERROR_CHANNEL
from websocket import WebSocketException

from components.model import POOL_LABEL, PlatformModel
from components.validation.snapshot import ClusterSnapshot

Progress = Callable[[int, int], None]
T = TypeVar("T")

# A page of a list call: big enough for few round trips, small enough that a 5,000-node cluster's pod
# list does not come back as one response of hundreds of megabytes.
LIST_PAGE_SIZE = 500
MAX_BACKOFF_S = 10.0
# websocket-client reports a refused upgrade as "Handshake status <code> <reason>"; the kubernetes
# client wraps it into ApiException(status=0), so the code is only in the text.
_HANDSHAKE_STATUS = re.compile(r"Handshake status (\d{3})")


class ExecTarget(Protocol):
    """Where a pool's SMI command runs: ``components.kube.plugin_targets.PluginTarget`` satisfies this."""

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


class ExecTimeoutError(Exception):
    """The command was still running after the timeout; ``partial`` is what it printed until then."""

    def __init__(self, timeout_s: float, partial: str) -> None:
        super().__init__(f"timed out after {timeout_s:g} s")
        self.partial = partial


# ---------------------------------------------------------------- kubeconfig


def load_client_configuration(
    kubeconfig: str | None = None,
    context: str | None = None,
    kubeconfig_text: str | None = None,
) -> kube_client.Configuration:
    """A client configuration from kubeconfig text (the Pulumi hook has the stack's kubeconfig as a
    string), else the file at ``kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config``; ``context``
    picks a context other than the current one. Raises ``ProbeError`` when none can be loaded."""
    configuration = kube_client.Configuration()
    try:
        if kubeconfig_text is not None:
            document = yaml.safe_load(kubeconfig_text)
            if not isinstance(document, dict):
                raise ProbeError("the kubeconfig text is not a kubeconfig (expected a YAML mapping)")
            kube_config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                document, context=context, client_configuration=configuration, persist_config=False
            )
        else:
            # Read $KUBECONFIG now, not when the kubernetes module was imported (its default does that).
            path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=context, client_configuration=configuration, persist_config=False
            )
    except (ConfigException, OSError, yaml.YAMLError) as error:
        source = "the kubeconfig text" if kubeconfig_text is not None else (kubeconfig or "$KUBECONFIG / ~/.kube/config")
        raise ProbeError(f"cannot load a kubeconfig from {source}: {error}") from None
    return configuration


# ---------------------------------------------------------------- pure helpers


def pool_selector(pools: Iterable[str]) -> str:
    """The label selector for every node of the given GPU pools."""
    return f"{POOL_LABEL} in ({','.join(sorted(set(pools)))})"


def labels_selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def node_name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def node_not_ready_reason(node: Mapping[str, Any]) -> str | None:
    """None when the node's Ready condition is True; else what the kubelet says (or that it says nothing)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None:
        return "node NotReady: it reports no Ready condition"
    if ready.get("status") == "True":
        return None
    detail = ": ".join(str(part) for part in (ready.get("reason"), ready.get("message")) if part)
    return f"node NotReady ({detail})" if detail else "node NotReady"


def _labels_match(pod: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in wanted.items())


def _exec_problem(pod: Mapping[str, Any]) -> str | None:
    """Why an exec into this pod cannot work; None when its containers run (ready or not)."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    name = f"{metadata.get('namespace')}/{metadata.get('name')}"
    if metadata.get("deletionTimestamp"):
        return f"device plugin pod {name} is terminating"
    phase = status.get("phase") or "Unknown"
    if phase == "Running":
        return None
    waiting = [
        str(s["state"]["waiting"].get("reason"))
        for s in status.get("containerStatuses") or []
        if (s.get("state") or {}).get("waiting")
    ]
    return f"device plugin pod {name} is {phase}" + (f" ({', '.join(waiting)})" if waiting else "")


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def plan_execs(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    targets: Mapping[str, ExecTarget],
) -> tuple[list[ExecJob], dict[str, str]]:
    """Which node gets which exec, and why the others get none (NotReady, no target, no usable plugin pod)."""
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        by_node.setdefault(str((pod.get("spec") or {}).get("nodeName", "")), []).append(pod)
    jobs: list[ExecJob] = []
    skipped: dict[str, str] = {}
    for node in nodes:
        name = node_name(node)
        pool = ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)
        not_ready = node_not_ready_reason(node)
        target = targets.get(str(pool))
        if not_ready:
            skipped[name] = not_ready
            continue
        if target is None:
            skipped[name] = f"no device plugin is known for pool {pool!r}: nothing to run the SMI command in"
            continue
        candidates = [
            p
            for p in by_node.get(name, [])
            if (p.get("metadata") or {}).get("namespace") == target.namespace and _labels_match(p, target.pod_labels)
        ]
        if not candidates:
            skipped[name] = (
                f"no device plugin pod on this node (namespace {target.namespace}, labels {labels_selector(target.pod_labels)})"
            )
            continue
        # The pod the checks judge (a ready one, by name) first; during a rollout an old one may sit beside it.
        candidates.sort(key=lambda p: (not _is_ready(p), str(p["metadata"].get("name"))))
        usable = [p for p in candidates if _exec_problem(p) is None]
        if not usable:
            skipped[name] = str(_exec_problem(candidates[0]))
            continue
        pod_name = str(usable[0]["metadata"]["name"])
        jobs.append(ExecJob(name, target.namespace, pod_name, target.container, tuple(target.smi_command)))
    return jobs, skipped


def exit_note(status_text: str) -> str | None:
    """What the exec's final Status (the v4 error channel) says: None for success, else the exit code or
    the API server's message (an executable that is missing, a container that is gone)."""
    if not status_text.strip():
        return "the exec ended without an exit status"
    try:
        status = json.loads(status_text)
    except json.JSONDecodeError:
        return status_text.strip()
    if not isinstance(status, dict) or status.get("status") == "Success":
        return None
    if status.get("reason") == "NonZeroExitCode":
        causes = (status.get("details") or {}).get("causes") or []
        code = next((c.get("message") for c in causes if c.get("reason") == "ExitCode"), None)
        if code is not None:
            return f"command exited with code {code}"
    return str(status.get("message") or status.get("reason") or "the exec failed")


def is_transient(error: BaseException) -> bool:
    """Worth another try: timeouts, dropped connections, throttling and server errors; not refusals."""
    if isinstance(error, ApiException):
        status = int(error.status or 0)
        if status == 0:
            match = _HANDSHAKE_STATUS.search(str(error.reason or ""))
            code = int(match.group(1)) if match else 0
            return code == 0 or code == 429 or code >= 500
        return status == 429 or status >= 500
    return isinstance(error, ExecTimeoutError | WebSocketException | urllib3.exceptions.HTTPError | OSError)


def describe(error: BaseException) -> str:
    if isinstance(error, ApiException):
        if int(error.status or 0) == 0:
            return str(error.reason or "connection failed").strip()
        message = error.reason or ""
        with contextlib.suppress(json.JSONDecodeError, AttributeError):
            message = json.loads(error.body or "").get("message") or message
        return f"HTTP {error.status}: {message}".strip()
    return str(error) or type(error).__name__


def with_retries(call: Callable[[], T], policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, retried on transient errors; the last error is raised with the attempt count noted."""
    attempt = 0
    while True:
        try:
            return call()
        except Exception as error:
            if not is_transient(error) or attempt >= policy.retries:
                error.add_note(f"after {attempt + 1} attempt{'s' if attempt else ''}")
                raise
            sleep(policy.delay(attempt))
            attempt += 1


# ---------------------------------------------------------------- the Kubernetes side


class _Reader:
    """List calls, as plain JSON objects (what ``kubectl get -o json`` prints), paged and retried."""

    def __init__(self, api: kube_client.ApiClient, policy: RetryPolicy) -> None:
        self.core = kube_client.CoreV1Api(api)
        self.apps = kube_client.AppsV1Api(api)
        self.policy = policy

    def _all(self, method: Callable[..., Any], **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page_kwargs = dict(kwargs, limit=LIST_PAGE_SIZE, _preload_content=False, _request_timeout=self.policy.timeout_s)
            if token:
                page_kwargs["_continue"] = token

            def fetch(arguments: dict[str, Any] = page_kwargs) -> dict[str, Any]:
                response = method(**arguments)
                document: dict[str, Any] = json.loads(response.data)
                return document

            document = with_retries(fetch, self.policy)
            items.extend(document.get("items") or [])
            token = (document.get("metadata") or {}).get("continue")
            if not token:
                return items

    def nodes(self, selector: str) -> list[dict[str, Any]]:
        return self._all(self.core.list_node, label_selector=selector)

    def daemonsets(self) -> list[dict[str, Any]]:
        return self._all(self.apps.list_daemon_set_for_all_namespaces)

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self._all(self.core.list_namespaced_pod, namespace=namespace, label_selector=selector)


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
    ws = stream(core.connect_get_namespaced_pod_exec, job.pod, job.namespace, **kwargs)
    try:
        # A frame cut off mid-way would otherwise block a read forever (the socket has no timeout).
        ws.sock.settimeout(timeout_s)
        ws.run_forever(timeout=timeout_s)
        if ws.is_open():
            raise ExecTimeoutError(timeout_s, ws.read_all())
        # read_all() forgets every channel, the status channel too: read the status first.
        status_text = ws.read_channel(ERROR_CHANNEL)
        output = ws.read_all()
    finally:
        ws.close()
    note = exit_note(status_text)
    # Nothing printed and a failure: the command did not run (no such executable, container gone).
    return ExecResult(output=None if note and not output else output, note=note)


def exec_with_retries(
    exec_once: Callable[[ExecJob], ExecResult], job: ExecJob, policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep
) -> ExecResult:
    """Retry transient failures; never raise: what finally went wrong becomes the result's note."""
    try:
        return with_retries(lambda: exec_once(job), policy, sleep)
    except Exception as error:  # noqa: BLE001 - one node's failure is data for the checks, not a crash
        attempts = " ".join(getattr(error, "__notes__", []))
        note = f"exec into {job.namespace}/{job.pod} failed: {describe(error)}" + (f" ({attempts})" if attempts else "")
        partial = error.partial if isinstance(error, ExecTimeoutError) and error.partial else None
        return ExecResult(output=partial, note=note)


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
) -> None:
    """Every job on at most ``concurrency`` threads; ``on_done`` is called on this thread as each ends."""
    if not jobs:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(jobs))), thread_name_prefix="aksgpu-exec") as pool:
        futures: dict[Future[ExecResult], ExecJob] = {pool.submit(exec_with_retries, exec_once, job, policy): job for job in jobs}
        try:
            for future in as_completed(futures):
                on_done(futures[future], future.result())
        except BaseException:
            # Ctrl-C (or a failing callback): drop the queued execs; leaving the block waits only for the
            # running ones, each bounded by its timeout.
            pool.shutdown(wait=False, cancel_futures=True)
            raise


# ---------------------------------------------------------------- the entry point


def collect_snapshot(
    model: PlatformModel,
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
) -> ClusterSnapshot:
    """Read the GPU nodes, DaemonSets and device plugin pods, and run the SMI command on every ready GPU
    node, at most ``concurrency`` at a time. ``progress(done, total)`` counts nodes (those that need no
    exec are done at once). Raises ``ProbeError`` only when the cluster cannot be read at all."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    policy = RetryPolicy(timeout_s=timeout_s, retries=retries, backoff_s=backoff_s)
    configuration = load_client_configuration(kubeconfig, context, kubeconfig_text)
    pools = [pool.name for pool in model.pools]

    with kube_client.ApiClient(configuration) as api:
        reader = _Reader(api, policy)
        try:
            nodes = reader.nodes(pool_selector(pools)) if pools else []
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
        except Exception as error:  # whatever the layer, one readable line
            raise ProbeError(f"cannot read the cluster at {configuration.host}: {describe(error)}") from error

    jobs, skipped = plan_execs(nodes, pods, targets)
    smi: dict[str, str] = {}
    exec_errors: dict[str, str] = dict(skipped)
    total = len(nodes)
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

    clients = _ThreadClients(configuration)
    try:
        run_execs(jobs, lambda job: run_exec(clients.core(), job, policy.timeout_s), policy, concurrency, record)
    finally:
        clients.close()
    return ClusterSnapshot(nodes=nodes, daemonsets=daemonsets, pods=pods, smi=smi, exec_errors=exec_errors)
