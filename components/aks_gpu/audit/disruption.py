"""The planned-disruption practice: a GPU node with an Azure scheduled event pending (``node-vm-event-scheduled``), one
whose scheduled event has passed (``node-vm-event-recent``), one an upgrade left cordoned because it could not drain it
(``node-upgrade-blocked``), and one AKS node auto-repair took back (``node-auto-repaired``; a failure when more than
once in the window) or failed to repair (``node-auto-repair-failed``). The events are ``events.json``'s, on GPU nodes;
the facts, with their sources, are in components/aks_gpu/data/disruption.yaml. Pure."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from aks_gpu.aks_facts import DisruptionFacts, disruption_facts
from aks_gpu.audit.judging import Run, absent_file
from aks_gpu.audit.registry import CHECK_BY_ID, sentence
from aks_gpu.audit.report import AutoRepairs
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.cluster.inventory import GpuNode
from aks_gpu.cluster.node_events import NodeEvent, read_node_event
from aks_gpu.cluster.snapshot import EVENTS_FILE, ClusterSnapshot, rfc3339
from aks_gpu.config.problems import clipped

PRACTICE = "disruption"
EVENT_IDS = ("node-vm-event-recent", "node-auto-repaired", "node-auto-repair-failed")
MESSAGE_SHOWN = 200  # characters of an event's message quoted in a finding


def judge_disruption(
    run: Run, nodes: Sequence[GpuNode], snapshot: ClusterSnapshot, collected: datetime | None, stack: StackExpectations | None
) -> AutoRepairs | None:
    """Judges the practice; returns the auto-repair counts (None where ``events.json`` was not read)."""
    facts = disruption_facts()
    label, _, quarantined = facts.upgrade_quarantine_label.partition("=")
    events = _events_by_node(snapshot.events, collected, facts) if snapshot.events is not None else None
    repairs = _count_repairs(events, {node.name for node in nodes}, facts) if events is not None else None
    if not nodes:
        return repairs
    run.checked.update(("node-vm-event-scheduled", "node-upgrade-blocked"))
    if events is None:
        consequence = "AKS node auto-repair and past scheduled events are not checked"
        run.gap(PRACTICE, EVENT_IDS, absent_file(snapshot, EVENTS_FILE, consequence))
    else:
        run.checked.update(EVENT_IDS)
    stack_name = stack.name if stack else "<stack>"
    for node in nodes:
        announced = _announced(events.get(node.name, ()), facts) if events is not None else []
        if node.scheduled_event is not None:
            state = "cordoned" if node.unschedulable else "still schedulable"
            run.add(
                "node-vm-event-scheduled",
                "warn",
                f"{facts.scheduled_event_condition}=True on {node.name} ({node.scheduled_event}), {state}; a GPU VM is "
                f"not live-migrated, so the jobs on it stop when the event runs{_evidence(announced)}",
                _remedy("node-vm-event-scheduled", node.name, stack_name),
                node=node.name,
            )
        elif announced:
            run.add(
                "node-vm-event-recent",
                "warn",
                f"Azure announced maintenance on {node.name}{_evidence(announced)}; {facts.scheduled_event_condition} "
                "is not True now, so the event has run (or was cancelled): a GPU VM is not live-migrated, so the "
                "jobs on it stopped if it ran",
                _remedy("node-vm-event-recent", node.name, stack_name),
                node=node.name,
            )
        if node.labels.get(label) == quarantined:
            run.add(
                "node-upgrade-blocked",
                "warn",
                f"{node.name} (pool {node.pool}) carries {facts.upgrade_quarantine_label}: an upgrade could not drain it "
                "and left it cordoned on its old node image",
                _remedy("node-upgrade-blocked", node.name, stack_name),
                node=node.name,
            )
        if events is not None:
            _judge_repairs(run, node, events.get(node.name, ()), facts, stack_name)
    return repairs


def _remedy(finding: str, node: str, stack: str) -> str:
    return sentence(CHECK_BY_ID[finding].fix.replace("<node>", node).replace("<stack>", stack))


def _judge_repairs(run: Run, node: GpuNode, events: Sequence[NodeEvent], facts: DisruptionFacts, stack: str) -> None:
    repairs = [event for event in events if event.reason in facts.auto_repair_reasons]
    if not repairs:
        return
    errors = {actions[2]: name for name, actions in facts.auto_repair_actions.items()}
    actions = _actions(repairs, facts)
    sequences = _sequences(actions, facts)
    if actions:
        done = ", ".join(f"{name} x{count}" if count > 1 else name for name, count in actions.items())
        last = max((event for event in repairs if event.reason not in errors), key=lambda event: event.timestamp)
        flapping = sequences > facts.auto_repair_max_repairs
        what = (
            f"AKS node auto-repair took {node.name} back {sequences} times in the window ({done}): more than "
            f"{facts.auto_repair_max_repairs}, so a repair did not hold (a GPU that hangs the node comes back after "
            "every reboot and reimage)"
            if flapping
            else f"AKS node auto-repair took {node.name} back ({done}) after it was NotReady for five minutes"
        )
        run.add(
            "node-auto-repaired",
            "fail" if flapping else "warn",
            f"{what}; last: {_quoted(last)}",
            _remedy("node-auto-repaired", node.name, stack),
            node=node.name,
        )
    failed = [event for event in repairs if event.reason in errors]
    if failed:
        last = max(failed, key=lambda event: event.timestamp)
        shown = ", ".join(sorted({errors[event.reason] for event in failed}))
        run.add(
            "node-auto-repair-failed",
            "fail",
            f"AKS node auto-repair could not {shown} {node.name}: {_quoted(last)}",
            _remedy("node-auto-repair-failed", node.name, stack),
            node=node.name,
        )


def _events_by_node(
    items: Sequence[Mapping[str, Any]], collected: datetime | None, facts: DisruptionFacts
) -> dict[str, list[NodeEvent]]:
    """The events the practice counts (``facts.counts_event``), on any node, within the window before ``collected``
    (all of them without a collection time; an event without a time counts, as the API server still holds it)."""
    since = collected - timedelta(hours=facts.events_window_hours) if collected is not None else None
    found: dict[str, list[NodeEvent]] = defaultdict(list)
    for item in items:
        event = read_node_event(item)
        if event is None or not facts.counts_event(event.reason, event.source, event.message):
            continue
        if since is not None and event.last is not None and event.last < since:
            continue
        found[event.node].append(event)
    return found


def _announced(events: Sequence[NodeEvent], facts: DisruptionFacts) -> list[NodeEvent]:
    """The node's scheduled-event announcements (of the events counted): a Node Problem Detector event naming an event
    type, or the condition turning True."""
    return [event for event in events if event.reason in facts.announcement_reasons]


def _evidence(announced: Sequence[NodeEvent]) -> str:
    if not announced:
        return ""
    reasons = Counter[str]()
    for event in announced:
        reasons[event.reason] += event.count
    listed = ", ".join(f"{reason} x{count}" if count > 1 else reason for reason, count in sorted(reasons.items()))
    return f" (events: {listed}; last: {_quoted(max(announced, key=lambda event: event.timestamp))})"


def _quoted(event: NodeEvent) -> str:
    when = rfc3339(event.last) if event.last is not None else "no time"
    return f'{event.reason} at {when} from {event.source or "no source"}: "{clipped(event.message, MESSAGE_SHOWN)}"'


def _actions(events: Sequence[NodeEvent], facts: DisruptionFacts) -> dict[str, int]:
    """Each auto-repair action ``events`` (one node's, those ``facts.counts_event`` counts) show, with how many times it
    ran: its start's or its end's occurrences, whichever is more (the window may hold one of the pair only), each event
    with its count (the API server aggregates repeats of one message). In AKS's order: reboot, reimage, redeploy."""
    found: dict[str, int] = {}
    for name, (start, end, _) in facts.auto_repair_actions.items():
        times = [sum(event.count for event in events if event.reason == reason) for reason in (start, end)]
        if max(times):
            found[name] = max(times)
    return found


def _sequences(actions: Mapping[str, int], facts: DisruptionFacts) -> int:
    """How many auto-repair sequences one node's ``actions`` (``_actions``) make: each begins with a reboot
    (node-auto-repair.md:88); a window that opens after a sequence's reboot still holds that one sequence."""
    first = next(iter(facts.auto_repair_actions))
    return max(actions.get(first, 0), 1 if actions else 0)


def _count_repairs(events: Mapping[str, Sequence[NodeEvent]], gpu_nodes: set[str], facts: DisruptionFacts) -> AutoRepairs:
    """Repair sequences in the window on GPU nodes and on the others (those are not judged, only counted)."""
    sequences = {name: _sequences(_actions(found, facts), facts) for name, found in events.items()}
    on_gpu = sum(count for name, count in sequences.items() if name in gpu_nodes)
    return AutoRepairs(gpu_nodes=on_gpu, other_nodes=sum(sequences.values()) - on_gpu)
