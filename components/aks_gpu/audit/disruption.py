"""The planned-disruption practice: a GPU node with an Azure scheduled event pending (``node-vm-event-scheduled``) and
one an upgrade left cordoned because it could not drain it (``node-upgrade-blocked``). The facts, with their sources,
are in components/aks_gpu/data/disruption.yaml. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from aks_gpu.aks_facts import disruption_facts
from aks_gpu.audit.judging import Run
from aks_gpu.audit.registry import CHECK_BY_ID, sentence
from aks_gpu.cluster.inventory import GpuNode


def judge_disruption(run: Run, nodes: Sequence[GpuNode]) -> None:
    facts = disruption_facts()
    label, _, quarantined = facts.upgrade_quarantine_label.partition("=")
    if not nodes:
        return
    run.checked.update(("node-vm-event-scheduled", "node-upgrade-blocked"))
    for node in nodes:
        if node.scheduled_event is not None:
            state = "cordoned" if node.unschedulable else "still schedulable"
            run.add(
                "node-vm-event-scheduled",
                "warn",
                f"{facts.scheduled_event_condition}=True on {node.name} ({node.scheduled_event}), {state}; a GPU VM is "
                "not live-migrated, so the jobs on it stop when the event runs",
                sentence(CHECK_BY_ID["node-vm-event-scheduled"].fix.replace("<node>", node.name)),
                node=node.name,
            )
        if node.labels.get(label) == quarantined:
            run.add(
                "node-upgrade-blocked",
                "warn",
                f"{node.name} (pool {node.pool}) carries {facts.upgrade_quarantine_label}: an upgrade could not drain it "
                "and left it cordoned on its old node image",
                sentence(CHECK_BY_ID["node-upgrade-blocked"].fix.replace("<node>", node.name)),
                node=node.name,
            )
