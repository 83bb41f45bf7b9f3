"""What exists in Azure, and who said so: the Azure scopes (resource groups, clusters, ARM ids) a plan's resources
refer to that the program neither creates nor looks up, which the mock engine would answer and Azure would not."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from aks_gpu.mock_engine.records import SECRET, UNKNOWN, ResourceRecord


class UndeclaredAzureReferenceError(RuntimeError):
    """A resource names an Azure scope (a resource group, a cluster, an ARM id) that the program neither creates nor
    declares as existing by looking it up: the mock engine answers any name, Azure answers NotFound."""


# ---------------------------------------------------------------- what exists in Azure, and who said so

# Inputs that name the resource group a resource is created in (azure-native spells it so for every RG-scoped type).
_GROUP_INPUT = "resourceGroupName"
# Child resources of a managed cluster and the input that names their cluster.
_CLUSTER_CHILDREN = {
    "azure-native:containerservice:AgentPool": "resourceName",
    "azure-native:containerservice:MaintenanceConfiguration": "resourceName",
    "azure-native:kubernetesconfiguration:Extension": "clusterName",
}
_CLUSTER_TYPE = "azure-native:containerservice:ManagedCluster"
_GROUP_TYPE = "azure-native:resources:ResourceGroup"
# The get-invokes by which a program declares an existing resource group or cluster (the real provider fails the
# preview when the thing is missing, before anything is created).
_GROUP_LOOKUP = "azure-native:resources:getResourceGroup"
_CLUSTER_LOOKUP = "azure-native:containerservice:getManagedCluster"
# An ARM id inside a resource group: /subscriptions/<s>/resourceGroups/<group>[/providers/<ns>/<type>/<name>...].
_ARM_ID = re.compile(r"(?i)/subscriptions/[^/]+/resourceGroups/([^/]+)(/providers/.+)?")


def _lower(value: Any) -> str:
    # ARM compares resource group and resource names without regard to case.
    return str(value).lower()


def undeclared_azure_references(
    records: Sequence[ResourceRecord],
    invokes: Sequence[tuple[str, Mapping[str, Any]]],
    plain_inputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """What the registered Azure resources refer to that the program neither creates nor declares as existing: a
    resource group no ``ResourceGroup`` creates and no ``getResourceGroup`` looks up, a cluster (of an agent pool,
    maintenance configuration or extension) no ``ManagedCluster`` creates and no ``getManagedCluster`` looks up, and
    an ARM id in any input (a role assignment's scope, a workspace id) whose resource group is neither. A looked-up
    cluster vouches for its resource group. ``plain_inputs`` (URN -> inputs with secrets revealed) replaces a record's
    masked inputs, so a secret name is checked too. Pure: the plan's records and invokes in, one line per reference
    out."""

    def inputs_of(record: ResourceRecord) -> Mapping[str, Any]:
        return (plain_inputs or {}).get(record.urn, record.inputs)

    groups: set[str] = set()
    clusters: set[tuple[str, str]] = set()
    # (group, name) of every resource some other get-invoke looked up (an existing workspace, an action group).
    looked_up: set[tuple[str, str]] = set()
    for record in records:
        if record.type == _GROUP_TYPE:
            groups.add(_lower(inputs_of(record).get(_GROUP_INPUT, record.name)))
        elif record.type == _CLUSTER_TYPE:
            inputs = inputs_of(record)
            clusters.add((_lower(inputs.get(_GROUP_INPUT)), _lower(inputs.get("resourceName", record.name))))
    for token, arguments in invokes:
        if token == _GROUP_LOOKUP:
            groups.add(_lower(arguments.get(_GROUP_INPUT)))
        elif token == _CLUSTER_LOOKUP:
            group = _lower(arguments.get(_GROUP_INPUT))
            groups.add(group)
            clusters.add((group, _lower(arguments.get("resourceName"))))
        elif ":get" in token and isinstance(arguments.get(_GROUP_INPUT), str):
            group = _lower(arguments[_GROUP_INPUT])
            looked_up.update((group, _lower(v)) for k, v in arguments.items() if k != _GROUP_INPUT and isinstance(v, str))
    found: list[str] = []
    for record in records:
        if not record.custom or not record.type.startswith("azure-native:"):
            continue
        resource_group = inputs_of(record).get(_GROUP_INPUT)
        if isinstance(resource_group, str) and resource_group not in (SECRET, UNKNOWN) and _lower(resource_group) not in groups:
            # Named as recorded: a secret name stays [secret] in the message.
            found.append(f"{record.name} ({record.type}) is created in resource group {record.inputs.get(_GROUP_INPUT)!r}")
        cluster_key = _CLUSTER_CHILDREN.get(record.type)
        cluster = inputs_of(record).get(cluster_key) if cluster_key else None
        if (
            isinstance(resource_group, str)
            and isinstance(cluster, str)
            and cluster not in (SECRET, UNKNOWN)
            and (_lower(resource_group), _lower(cluster)) not in clusters
        ):
            shown_cluster, shown_group = record.inputs.get(cluster_key or ""), record.inputs.get(_GROUP_INPUT)
            found.append(f"{record.name} ({record.type}) joins cluster {shown_cluster!r} in {shown_group!r}")
        for key, value in sorted(inputs_of(record).items()):
            for text in _strings_in(value):
                match = _ARM_ID.fullmatch(text)
                group_of_id = _lower(match.group(1)) if match else ""
                if match and group_of_id not in groups and (group_of_id, _lower(text.rsplit("/", 1)[1])) not in looked_up:
                    shown = text if record.inputs.get(key) == value else SECRET
                    found.append(f"{record.name} ({record.type}) input {key} refers to {shown!r}")
    return found


def _strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings_in(item)
