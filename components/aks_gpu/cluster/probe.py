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

This module runs the phases; the pieces are beside it: the client's configuration from a kubeconfig and the
credentials kept out of text (``client_config``), the list calls (``list_calls``), one exec into a pod
(``pod_exec``), and the timeouts, budgets and retries (``retries``).

Cost and limits:

- Execs run on a thread pool of ``concurrency`` workers (default 16). Each worker has its own
  ``ApiClient``: ``kubernetes.stream.stream`` swaps ``api_client.call_api`` on the client it is given for
  the length of the call, so two threads sharing one client would race and send a plain GET instead
  of a WebSocket upgrade.
- Every network wait is bounded (see ``retries.RetryPolicy``): a list page gets ``timeout_s`` for the whole answer, headers
  and body, however slowly a server drips it; an exec's WebSocket handshake gets ``timeout_s`` per read (the
  client library sets none: ``pod_exec._TimedWebSocket``), then the command ``timeout_s``, enforced by a watchdog that
  closes the socket should a frame arrive a byte at a time. The run's exec phase as a whole ends by
  ``exec_phase_budget_s`` (nodes over concurrency times one node's worst case, plus a margin): nodes not
  finished by then are reported as such, and the run returns. The lists before it, every page of every list, end by
  ``list_phase_budget_s`` (``LIST_PHASE_CALLS`` list calls' worst case, plus the margin), else the cluster cannot be
  read (``ProbeError``): the whole run is bounded by the two.
- Transient failures (connection errors, HTTP 429/5xx, timeouts) are retried ``retries`` times with
  exponential backoff and jitter, honouring a ``Retry-After`` up to ``MAX_RETRY_AFTER_S``; a refusal
  (401/403/404) and a command's own non-zero exit are not. This is the only retry layer: urllib3's own
  retries (3 by default, which sleep a ``Retry-After`` of an hour) are switched off.
- Nothing the probe reports carries the credentials it was given (``client_config.Redactor``).
- RBAC the caller needs: list nodes; list daemonsets (all namespaces); list pods and create pods/exec in
  the device plugin namespaces. ``full`` (``validate collect``, ``aksgpu audit``) also lists pods in every
  namespace, and namespaces, resourcequotas, networkpolicies and events (``list_calls.read_for_audit``), each of the
  last four optional.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kubernetes import client as kube_client

from aks_gpu.cluster.client_config import ProbeError, Redactor, context_name, display_host, load_client_configuration
from aks_gpu.cluster.list_calls import ListReader, read_for_audit
from aks_gpu.cluster.objects import NodeStatus, PluginPods, exec_problem, pod_name
from aks_gpu.cluster.pod_exec import ExecJob, ExecResult, ExecTimeoutError, run_exec
from aks_gpu.cluster.retries import (
    RUN_MARGIN_S,
    RetryPolicy,
    describe,
    exec_phase_budget_s,
    list_phase_budget_s,
    with_retries,
)
from aks_gpu.cluster.smi_pods import plan_known_execs
from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel

Progress = Callable[[int, int], None]

# ProbeError is the probe's too (collect_snapshot raises it), though the kubeconfig's loading defines it.
__all__ = [
    "ExecTarget",
    "ProbeError",
    "Progress",
    "collect_snapshot",
    "exec_with_retries",
    "labels_selector",
    "plan_execs",
    "pool_selector",
    "run_execs",
]


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

    ``full`` reads what ``aksgpu audit`` needs too (``read_for_audit``): every GPU node, the pods on them or
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
    redactor = Redactor(configuration)
    pools = [pool.name for pool in model.pools] if model is not None else []
    optional: dict[str, Any] = {}

    list_budget = list_phase_budget_s(policy, margin_s)
    with kube_client.ApiClient(configuration) as api:
        reader = ListReader(api, policy, time.monotonic() + list_budget)
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
                nodes, pods, optional = read_for_audit(reader, set(pools), pods)
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
