"""What the audit reads of a core/v1 Event on a Node (``events.json``): which node, its reason, message, source, how
many times it happened and when last. Pure: the objects as ``kubectl get events -o json`` prints them, already held to
their shapes by ``snapshot.shape_problem``.

An Event's fields (k8s.io/api v0.36.3 core/v1/types.go, Event): a legacy recorder (client-go ``record``, the Node
Problem Detector's) fills ``source.component``, ``count``, ``firstTimestamp`` and ``lastTimestamp``; an events.k8s.io/v1
recorder fills ``reportingComponent``, ``eventTime`` and, for a repeat, ``series`` (``count``, ``lastObservedTime``).
Both are read, as the API server's own field selector does for the source (k8s.io/kubernetes v1.36.3
pkg/registry/core/event/strategy.go:113-133: ``source`` is source.component, or reportingComponent when that is empty).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aks_gpu.cluster.snapshot import parse_rfc3339


@dataclass(frozen=True)
class NodeEvent:
    node: str
    reason: str
    message: str
    source: str
    type: str
    count: int  # how many times it happened (an aggregated event's count, or its series' count); at least 1
    last: datetime | None  # when it last happened; None: the event carries no readable time

    @property
    def timestamp(self) -> float:
        """When it last happened, for ordering: an event without a time is the oldest."""
        return self.last.timestamp() if self.last is not None else float("-inf")


def read_node_event(item: Mapping[str, Any]) -> NodeEvent | None:
    """``item`` as a NodeEvent; None when it is not about a Node (a hand-made ``events.json`` may hold every event)."""
    involved = item.get("involvedObject") or {}
    if involved.get("kind") != "Node" or not involved.get("name"):
        return None
    series = item.get("series") or {}
    count = series.get("count") or item.get("count") or 1
    return NodeEvent(
        node=str(involved["name"]),
        reason=str(item.get("reason") or ""),
        message=str(item.get("message") or ""),
        source=str((item.get("source") or {}).get("component") or item.get("reportingComponent") or ""),
        type=str(item.get("type") or ""),
        count=max(int(count), 1),
        last=event_time(item),
    )


def event_time(item: Mapping[str, Any]) -> datetime | None:
    """When ``item`` last happened: its series' last observation, else its lastTimestamp, eventTime, firstTimestamp
    or creation time, the first that reads as RFC 3339."""
    series = item.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        item.get("lastTimestamp"),
        item.get("eventTime"),
        item.get("firstTimestamp"),
        (item.get("metadata") or {}).get("creationTimestamp"),
    ):
        if isinstance(value, str) and value:
            try:
                return parse_rfc3339(value)
            except ValueError:
                continue
    return None


def newest_per_reason(
    items: Iterable[Mapping[str, Any]], keep: Callable[[NodeEvent], bool], nodes: Collection[str], per_reason: int
) -> list[dict[str, Any]]:
    """The Events of ``items`` about one of ``nodes`` that ``keep`` accepts, at most the ``per_reason`` newest of each
    node and reason (an event without a time counts as oldest), in the order they came. Holds no more than that in
    memory: a writer of events chooses their node, reason and source, so an event on a node that does not exist, or
    one ``keep`` refuses, takes no room, and a flood of one reason displaces no other."""
    kept: dict[tuple[str, str], list[tuple[float, int, dict[str, Any]]]] = defaultdict(list)
    for position, item in enumerate(items):
        event = read_node_event(item)
        if event is None or event.node not in nodes or not keep(event):
            continue
        entry = (event.timestamp, position, dict(item))
        heap = kept[event.node, event.reason]
        if len(heap) < per_reason:
            heapq.heappush(heap, entry)
        elif entry[:2] > heap[0][:2]:
            heapq.heapreplace(heap, entry)
    return [item for _, _, item in sorted((entry for heap in kept.values() for entry in heap), key=lambda e: e[1])]
