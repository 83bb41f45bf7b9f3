"""The probe's list calls, as plain JSON objects (what ``kubectl get -o json`` prints): paged, each page read within
its timeout and size, every object checked for the shape the checks read, all of them within the list phase's
deadline; and what ``aksgpu audit`` lists beyond the validation (``read_for_audit``)."""

import contextlib
import functools
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException

from aks_gpu.aks_facts import disruption_facts
from aks_gpu.cluster.inventory import asks_for_gpu, is_gpu_node
from aks_gpu.cluster.node_events import newest_per_reason
from aks_gpu.cluster.objects import node_name
from aks_gpu.cluster.retries import DeadlineError, RetryPolicy, call_within, describe, with_retries
from aks_gpu.cluster.snapshot import (
    CLUSTER_QUEUES_FILE,
    EVENTS_FILE,
    NAMESPACES_FILE,
    NETWORK_POLICIES_FILE,
    NODEPOOLS_FILE,
    RESOURCE_QUOTAS_FILE,
    WORKLOADS_FILE,
    rfc3339,
    shape_problem,
)
from aks_gpu.config.problems import clipped
from aks_gpu.kube.kueue import API_VERSION as KUEUE_API_VERSION
from aks_gpu.naming import POOL_LABEL

# A page of a list call: big enough for few round trips, small enough that a 5,000-node cluster's pod
# list does not come back as one response of hundreds of megabytes.
LIST_PAGE_SIZE = 500
# Past this many pages (500,000 objects) a list that keeps handing out `continue` tokens is not a cluster's.
MAX_LIST_PAGES = 1000
# One page of 500 objects is a few MB; a body past this is refused rather than held in memory.
MAX_LIST_PAGE_BYTES = 256 << 20


class ListPhaseDeadlineError(Exception):
    """The run's lists were not done by the list phase's deadline (``list_phase_budget_s``); not retried."""

    def __init__(self, what: str, items: int) -> None:
        super().__init__(f"{what}: the lists had not ended when the list phase's deadline passed ({items} items read)")


class _BadAnswerError(Exception):
    """An answer that is not what a Kubernetes API server sends (not JSON, the wrong shape); not retried."""


class ListReader:
    """List calls, as plain JSON objects (what ``kubectl get -o json`` prints), paged and retried, each page
    read within ``policy.timeout_s`` and ``MAX_LIST_PAGE_BYTES``, each object checked for the shape the checks
    read (``snapshot.shape_problem``)."""

    def __init__(self, api: kube_client.ApiClient, policy: RetryPolicy, deadline: float | None = None) -> None:
        self.core = kube_client.CoreV1Api(api)
        self.apps = kube_client.AppsV1Api(api)
        self.policy = policy
        # When every list of the run must be done (``time.monotonic()``; ``list_phase_budget_s``); None: no bound.
        self.deadline = deadline

    def _all(
        self,
        method: Callable[..., Any],
        kind: str,
        what: str,
        reduce: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """Every page of the list; ``reduce``, where given, is applied to what was read after each page (what is kept
        of a list too large to hold, such as the events)."""
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
            if reduce is not None:
                items = reduce(items)
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


# Reading these is optional: a caller without the right to list them (401/403), or a server without the API (404),
# leaves that file out of the snapshot, and the audit reports what depends on it as not checked.
_OPTIONAL_REFUSALS = (401, 403, 404)
# The kinds of add-ons a cluster may not run (their API answers 404 there): none of them is what an empty list says.
_ADD_ON_KINDS = frozenset({"NodePool", "ClusterQueue", "Workload"})
KUEUE_GROUP, KUEUE_VERSION = KUEUE_API_VERSION.split("/")
# The Events the audit reads are on Nodes (core/v1 Event's field selectors: k8s.io/kubernetes v1.36.3
# pkg/registry/core/event/strategy.go:113-133).
NODE_EVENTS_SELECTOR = "involvedObject.kind=Node"


def read_for_audit(
    reader: ListReader, pools: set[str], plugin_pods: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """What ``aksgpu audit`` reads beyond the validation: the GPU nodes (``aks_gpu.cluster.inventory`` decides, plus
    every node of the stack's pools), the pods on them or asking for GPUs (and the plugin pods already read), and
    the namespaces, resource quotas and network policies of the whole cluster, with the time of collection.
    RBAC: list nodes, pods, namespaces, resourcequotas, networkpolicies and events cluster-wide, and karpenter.sh
    nodepools, kueue.x-k8s.io clusterqueues and workloads.

    Of the events, only those on Nodes are asked for (the field selector ``involvedObject.kind=Node``), and of those
    only the ones the audit counts (``DisruptionFacts.counts_event``: AKS node auto-repair's, the scheduled events'
    announcements) on nodes the cluster has, the newest ``events.per_reason`` of each node and reason: a busy
    cluster's events run to tens of thousands, and anyone who may create events chooses their node, reason and source
    (``data/disruption.yaml`` says why this bound)."""
    collected_at = rfc3339(datetime.now(UTC))
    every_node = reader._all(reader.core.list_node, "Node", "the node list")
    nodes = [
        node
        for node in every_node
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
    custom = kube_client.CustomObjectsApi(reader.core.api_client)
    # Karpenter's NodePools (karpenter.sh/v1): only on clusters with node auto-provisioning; elsewhere 404.
    nodepools = functools.partial(custom.list_cluster_custom_object, "karpenter.sh", "v1", "nodepools")
    # Kueue's queues (kueue.x-k8s.io/v1beta2): only where Kueue runs; elsewhere 404.
    clusterqueues = functools.partial(custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "clusterqueues")
    workloads = functools.partial(custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "workloads")
    facts = disruption_facts()
    events = functools.partial(reader.core.list_event_for_all_namespaces, field_selector=NODE_EVENTS_SELECTOR)
    keep_events = functools.partial(
        newest_per_reason,
        keep=lambda event: facts.counts_event(event.reason, event.source, event.message),
        nodes={node_name(node) for node in every_node},
        per_reason=facts.events_per_reason,
    )
    for field_name, file_name, kind, method in (
        ("namespaces", NAMESPACES_FILE, "Namespace", reader.core.list_namespace),
        ("resourcequotas", RESOURCE_QUOTAS_FILE, "ResourceQuota", reader.core.list_resource_quota_for_all_namespaces),
        ("networkpolicies", NETWORK_POLICIES_FILE, "NetworkPolicy", networking.list_network_policy_for_all_namespaces),
        ("nodepools", NODEPOOLS_FILE, "NodePool", nodepools),
        ("clusterqueues", CLUSTER_QUEUES_FILE, "ClusterQueue", clusterqueues),
        ("workloads", WORKLOADS_FILE, "Workload", workloads),
        ("events", EVENTS_FILE, "Event", events),
    ):
        try:
            optional[field_name] = reader._all(method, kind, f"the {kind} list", keep_events if kind == "Event" else None)
        except ApiException as error:
            if int(error.status or 0) not in _OPTIONAL_REFUSALS:
                raise
            if kind in _ADD_ON_KINDS and int(error.status or 0) == 404:
                # No karpenter.sh API (no node auto-provisioning) or no kueue.x-k8s.io API (no Kueue): nothing to judge.
                optional[field_name] = []
                continue
            optional["not_collected"][file_name] = describe(error)
    return nodes, pods, optional
