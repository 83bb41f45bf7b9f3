"""Run the real Pulumi program offline under Pulumi's mock engine and record what it would create.

No Azure account, no Pulumi CLI: ``__main__.py`` runs as it would under ``pulumi up``, but every resource
registration and every invoke is answered here, with stable fake IDs, so two runs give identical records.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import errno
import gc
import json
import logging
import os
import re
import runpy
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pulumi
import yaml
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks
from pulumi.runtime.proto import callback_pb2, callback_pb2_grpc, resource_pb2
from pulumi.runtime.settings import get_project, get_stack
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from aks_gpu.aks_facts import immutable_fields
from aks_gpu.azure.cluster import CLIENT_CONFIG_CALL, CREDENTIALS_CALL, GET_CLUSTER_CALL
from aks_gpu.naming import PACKAGE_NAME

SECRET = "[secret]"
# A value `pulumi preview` cannot know yet (an id, a name Azure assigns): how preview-mode plans record it.
UNKNOWN = "[unknown]"
FAKE_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
FAKE_TENANT = "11111111-1111-1111-1111-111111111111"
FAKE_OBJECT_ID = "22222222-2222-2222-2222-222222222222"
KUBE_PREFIX = "kubernetes:"
# The first-party Entra ID applications of AKS, the same in every cloud: the server (the token's audience) and the
# public client kubelogin signs users in with. https://azure.github.io/kubelogin/concepts/aks.html
AKS_SERVER_APP_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
AKS_CLIENT_APP_ID = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"


# The type of the stack resource every program's resources hang under; it is no part of their URNs.
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class AliasSpec:
    """One alias a registration carried, as the SDK sends it to an engine that supports alias specs (the
    ``Alias`` message of pulumi's alias.proto): a whole URN, or the parts of the old URN that differ from the
    resource's own (an empty field means "the same as now"; ``no_parent``: it had no parent)."""

    urn: str = ""
    name: str = ""
    type: str = ""
    stack: str = ""
    project: str = ""
    parent_urn: str = ""
    no_parent: bool = False

    @classmethod
    def from_request(cls, alias: Any) -> AliasSpec:
        if not alias.HasField("spec"):
            return cls(urn=alias.urn)
        spec = alias.spec
        return cls(
            name=spec.name,
            type=spec.type,
            stack=spec.stack,
            project=spec.project,
            parent_urn=spec.parentUrn if spec.HasField("parentUrn") else "",
            no_parent=spec.HasField("noParent") and spec.noParent,
        )


@dataclass(frozen=True)
class ResourceRecord:
    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    options: dict[str, Any]
    # What the registration said its old URNs were. Not written to resources.json: the provider SDKs' typed
    # classes declare one alias per older API version (an azure-native AgentPool about 110), which would bury the
    # plan. ``previous_urns`` reads them as the engine does.
    aliases: tuple[AliasSpec, ...] = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "custom": self.custom,
            "inputs": self.inputs,
            "options": self.options,
        }


@dataclass
class PlanResult:
    project: str
    stack: str
    resources: list[ResourceRecord]
    outputs: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    # Resource hooks the engine would have run, in order (only with run_hooks; see HookRunningMonitor).
    hook_runs: list[HookRun] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "stack": self.stack,
            "resources": [r.to_json() for r in self.resources],
            "outputs": self.outputs,
        }

    def by_type(self, type_: str) -> list[ResourceRecord]:
        return [r for r in self.resources if r.type == type_]

    def manifests(self) -> dict[str, dict[str, Any]]:
        """Kubernetes objects exactly as they would be applied, keyed by their file name."""
        files: dict[str, dict[str, Any]] = {}
        for record in self.resources:
            manifest = kube_manifest(record)
            if manifest is None:
                continue
            # With secret config (PULUMI_CONFIG_SECRET_KEYS) any of these may be masked as "[secret]" (a whole
            # metadata block included): the file is then named after the resource, whose name is never secret.
            meta = manifest.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            kind = manifest.get("kind")
            kind = kind.lower() if isinstance(kind, str) and kind != SECRET else "object"
            namespace = meta.get("namespace")
            namespace = namespace if isinstance(namespace, str) and namespace and namespace != SECRET else "_"
            name = meta.get("name")
            name = name if isinstance(name, str) and name and name != SECRET else record.name
            files[f"{kind}-{namespace}-{name}.yaml"] = manifest
        return dict(sorted(files.items()))


def kube_manifest(record: ResourceRecord) -> dict[str, Any] | None:
    """A registered Kubernetes object as YAML would carry it; None for providers, Helm releases, components."""
    if not record.custom or not record.type.startswith(KUBE_PREFIX):
        return None
    inputs = record.inputs
    if "apiVersion" not in inputs or "kind" not in inputs:
        return None
    return {key: value for key, value in inputs.items() if not key.startswith("__")}


def mask_secrets(value: Any) -> Any:
    """Replace every secret with ``[secret]`` so plan files can be shared and committed, and give back
    integers that travelled as protobuf doubles (``replicas: 1``, not ``1.0``)."""
    if rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {key: mask_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_secrets(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def fake_kubeconfig(cluster: str, resource_group: str = "resource-group", tenant: str = FAKE_TENANT) -> str:
    """The kubeconfig ``listClusterUserCredentials(format=exec)`` returns for an Entra ID cluster, in AKS's own shape
    and argument order (``--login devicecode`` last), with a placeholder CA and a server that cannot resolve.
    tests/fixtures/aks/ holds a real one (with its source) and a test keeps the two in the same shape."""
    return (
        "apiVersion: v1\n"
        "clusters:\n"
        "- cluster:\n"
        "    certificate-authority-data: UExBQ0VIT0xERVItQ0E=\n"
        f"    server: https://{cluster}-dns-00000000.hcp.example.invalid:443\n"
        f"  name: {cluster}\n"
        "contexts:\n"
        "- context:\n"
        f"    cluster: {cluster}\n"
        f"    user: clusterUser_{resource_group}_{cluster}\n"
        f"  name: {cluster}\n"
        f"current-context: {cluster}\n"
        "kind: Config\n"
        "preferences: {}\n"
        "users:\n"
        f"- name: clusterUser_{resource_group}_{cluster}\n"
        "  user:\n"
        "    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
        "      args:\n"
        "      - get-token\n"
        "      - --environment\n"
        "      - AzurePublicCloud\n"
        "      - --server-id\n"
        f"      - {AKS_SERVER_APP_ID}\n"
        "      - --client-id\n"
        f"      - {AKS_CLIENT_APP_ID}\n"
        "      - --tenant-id\n"
        f"      - {tenant}\n"
        "      - --login\n"
        "      - devicecode\n"
        "      command: kubelogin\n"
        "      env: null\n"
        "      installHint: |2\n"
        "\n"
        "        kubelogin is not installed which is required to connect to AAD enabled cluster.\n"
        "\n"
        "        To learn more, please go to https://aka.ms/aks/kubelogin\n"
        "      provideClusterInfo: false\n"
    )


def revealed(value: Any) -> Any:
    """``value`` with secrets unwrapped, as a provider sees its inputs."""
    if rpc.is_rpc_secret(value):
        return revealed(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {key: revealed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [revealed(item) for item in value]
    return value


def arm_id(resource_group: str, provider_type: str, name: str) -> str:
    return f"/subscriptions/{FAKE_SUBSCRIPTION}/resourceGroups/{resource_group}/providers/{provider_type}/{name}"


class PlanMocks(Mocks):
    """Answers registrations and invokes with stable values: the same program gives the same plan. Every call the
    components make (``aks_gpu.azure.cluster.CALLS``) is answered as Azure answers it; other calls get ``{}``.
    Consumers' unit tests use it as ``aks_gpu.testing.AksGpuMocks``.

    With ``preview=True`` it answers as ``pulumi preview`` does for resources that do not exist yet: outputs are the
    inputs, nothing the provider computes (ids, names, FQDNs) is known, so code that needs those values at program
    time fails here, offline."""

    def __init__(self, preview: bool = False) -> None:
        super().__init__()
        self.preview = preview

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        if self.preview:
            # An empty id is an unknown id in a dry run; properties not returned are unknown too.
            return ("", state) if args.custom else (None, {})
        if args.typ == "azure-native:containerservice:ManagedCluster":
            # A provider reads secret inputs in plain text; outputs of the same name stay secret (state above).
            inputs = revealed(args.inputs)
            group = str(inputs.get("resourceGroupName"))
            cluster = str(inputs.get("resourceName", args.name))
            state |= {"name": cluster, "fqdn": f"{cluster}.hcp.example.invalid"}
            state["oidcIssuerProfile"] = {"issuerURL": f"https://oidc.example.invalid/{cluster}/"}
            return arm_id(group, "Microsoft.ContainerService/managedClusters", cluster), state
        if not args.custom:
            return None, {}
        return f"{args.name}-id", state

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token = args.token
        arguments = revealed(args.args)  # a provider reads secret arguments in plain text
        if token == CREDENTIALS_CALL:
            group, cluster = str(arguments.get("resourceGroupName")), str(arguments.get("resourceName"))
            encoded = base64.b64encode(fake_kubeconfig(cluster, group).encode()).decode()
            return {"kubeconfigs": [{"name": "clusterUser", "value": encoded}]}, []
        if token == GET_CLUSTER_CALL:
            group, cluster = str(arguments.get("resourceGroupName")), str(arguments.get("resourceName"))
            return {
                "id": arm_id(group, "Microsoft.ContainerService/managedClusters", cluster),
                "name": cluster,
                "location": "swedencentral",
                "oidcIssuerProfile": {"enabled": True, "issuerURL": f"https://oidc.example.invalid/{cluster}/"},
            }, []
        if token == "azure-native:resources:getResourceGroup":
            group = str(arguments.get("resourceGroupName"))
            return {
                "id": f"/subscriptions/{FAKE_SUBSCRIPTION}/resourceGroups/{group}",
                "name": group,
                "location": "swedencentral",
            }, []
        if token == CLIENT_CONFIG_CALL:
            return {
                "clientId": "plan-client",
                "objectId": FAKE_OBJECT_ID,
                "subscriptionId": FAKE_SUBSCRIPTION,
                "tenantId": FAKE_TENANT,
            }, []
        return {}, []


# ---------------------------------------------------------------- URNs and aliases, as the engine resolves them


def qualified_type(urn: str) -> str:
    """``aks-gpu:index:GpuPlatform$aks-gpu:index:GpuCluster`` of a URN: its type with every ancestor's."""
    return urn.split("::")[2]


def engine_urn(name: str, type_: str, parent: str | None, *, project: str, stack: str) -> str:
    """The URN the engine gives ``name`` of ``type_`` under ``parent`` (pulumi/pulumi sdk/go/common/resource/urn/urn.go
    ``New`` and resource ``CreateURN``, v3.259.0)."""
    qualified = type_
    if parent and qualified_type(parent) != ROOT_STACK_TYPE:
        qualified = f"{qualified_type(parent)}${type_}"
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def _stack_and_project(urn: str) -> tuple[str, str]:
    stack, project = urn.removeprefix("urn:pulumi:").split("::")[:2]
    return stack, project


def _collapsed(record: ResourceRecord, alias: AliasSpec, taken_over: Mapping[str, str]) -> str:
    """An alias spec as the URN it names (the engine's ``collapseAliasToUrn``, pkg/resource/deploy/step_generator.go,
    v3.259.0): each empty part is the resource's own; a named parent that itself took over an old URN stands for that."""
    if alias.urn:
        return alias.urn
    parent = taken_over.get(alias.parent_urn, alias.parent_urn) if alias.parent_urn else record.parent
    if alias.no_parent or (parent and qualified_type(parent) == ROOT_STACK_TYPE):
        parent = None
    stack, project = _stack_and_project(record.urn)
    return engine_urn(
        alias.name or record.name,
        alias.type or record.type,
        parent,
        project=alias.project or project,
        stack=alias.stack or stack,
    )


def _inherited(child_type: str, child_name: str, parent_name: str, parent_alias: str, record: ResourceRecord) -> str:
    """The alias a child gets from its parent's (the engine's ``inheritedChildAlias``): under the parent's old URN,
    and a name that started with the parent's name starts with the parent's old name."""
    name = child_name
    if child_name.startswith(parent_name):
        name = parent_alias.rsplit("::", 1)[1] + child_name[len(parent_name) :]
    stack, project = _stack_and_project(record.urn)
    return f"urn:pulumi:{stack}::{project}::{qualified_type(parent_alias)}${child_type}::{name}"


def engine_aliases(record: ResourceRecord, taken_over: Mapping[str, str]) -> Iterator[str]:
    """Every old URN the engine looks ``record`` up by after its own (``generateAliases``): its aliases, and, when its
    parent took over an old URN (``taken_over``: new URN -> old), each of those again under the parent's old URN."""
    own = [_collapsed(record, alias, taken_over) for alias in record.aliases]
    yield from own
    parent_alias = taken_over.get(record.parent or "")
    if record.parent and parent_alias:
        parent_name = record.parent.rsplit("::", 1)[1]
        yield _inherited(record.type, record.name, parent_name, parent_alias, record)
        for alias in own:
            base_type = qualified_type(alias).split("$")[-1]
            yield _inherited(base_type, alias.rsplit("::", 1)[1], parent_name, parent_alias, record)


def previous_urns(records: Sequence[ResourceRecord], state: Collection[str]) -> dict[str, str]:
    """For each resource, the URN in ``state`` (a previous deployment's URNs) it updates, as the engine finds it
    (pkg/resource/deploy/step_generator.go ``generateSteps``, v3.259.0): its own URN first, then its aliases, parents
    before children. A resource missing here is created, and every URN of ``state`` no resource took is deleted."""
    by_urn = {record.urn: record for record in records}

    def depth(record: ResourceRecord) -> int:
        levels, parent = 0, record.parent
        while parent in by_urn:
            levels, parent = levels + 1, by_urn[parent].parent
        return levels

    found: dict[str, str] = {}
    taken_over: dict[str, str] = {}  # new URN -> the different old URN it took (the engine's sg.aliases)
    for record in sorted(records, key=depth):
        for candidate in (record.urn, *engine_aliases(record, taken_over)):
            if candidate in state:
                found[record.urn] = candidate
                if candidate != record.urn:
                    taken_over[record.urn] = candidate
                break
    return found



class _CollectingHandler(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


class RecordingMonitor(MockMonitor):
    """The mock monitor, also keeping each registration's URN, parent, inputs and resource options."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.records: list[ResourceRecord] = []
        # Every invoke the program made (token, plain arguments): a get-invoke is how it declares that something
        # exists in Azure without creating it (check_azure_references).
        self.invokes: list[tuple[str, dict[str, Any]]] = []
        # The Azure resources' inputs in plain text (URN -> inputs): the records mask secrets, and a secret resource
        # group name must be checked too.
        self.azure_inputs: dict[str, dict[str, Any]] = {}
        self.duplicates: set[str] = set()
        self._urns: set[str] = set()
        self._lock = threading.Lock()

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """A URN as the engine makes it: the parent's whole qualified type, ``$``, this type (the stack resource adds
        nothing). pulumi/pulumi sdk/go/common/resource/urn/urn.go ``New``, v3.259.0: ``typ = parentType + "$" + typ``
        unless the parent is the root stack. The SDK's MockMonitor (pulumi 3.272.0 runtime/mocks.py) keeps only the
        parent's last type instead, so below the first level its URNs are not the ones a real deployment records."""
        return engine_urn(name, type_, parent or None, project=get_project(), stack=get_stack())

    def Invoke(self, request: Any) -> Any:  # noqa: N802 - the gRPC method name
        arguments = revealed(rpc.deserialize_properties(request.args, keep_unknowns=False))
        with self._lock:
            self.invokes.append((request.tok, arguments if isinstance(arguments, dict) else {}))
        return super().Invoke(request)  # type: ignore[no-untyped-call]

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - the gRPC method name
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type == ROOT_STACK_TYPE:
            return response
        options = {
            "protect": bool(request.protect),
            "deleteBeforeReplace": bool(request.deleteBeforeReplace),
            "ignoreChanges": sorted(request.ignoreChanges),
            "provider": request.provider.split("::")[-1] if request.provider else None,
            "dependsOn": sorted(request.dependencies),
        }
        record = ResourceRecord(
            urn=response.urn,
            type=request.type,
            name=request.name,
            parent=request.parent or None,
            custom=bool(request.custom),
            inputs=mask_secrets(rpc.deserialize_properties(request.object, keep_unknowns=False)),
            options=options,
            aliases=tuple(AliasSpec.from_request(alias) for alias in request.aliases),
        )
        plain = None
        if request.type.startswith("azure-native:"):
            plain = revealed(rpc.deserialize_properties(request.object, keep_unknowns=False))
        with self._lock:
            if isinstance(plain, dict):
                self.azure_inputs[record.urn] = plain
            if record.urn in self._urns:
                self.duplicates.add(record.urn)
            self._urns.add(record.urn)
            self.records.append(record)
        return response


def _config_values(raw: Mapping[str, Any]) -> dict[str, str]:
    """Pulumi hands config to programs as strings; structured values travel as JSON text."""
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in raw.items()}


async def _resolve_export(value: Any) -> Any:
    output = pulumi.Output.from_input(value)
    if await output.is_secret():
        return SECRET
    if not await output.is_known():
        return UNKNOWN
    resolved = await output.future()
    return mask_secrets(resolved)


class DuplicateUrnError(RuntimeError):
    """Two resources registered under one URN: Pulumi would refuse the program at deploy time."""


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


def run_program(
    project_dir: Path,
    stack: str,
    raw_config: Mapping[str, Any],
    project: str = PACKAGE_NAME,
    mocks: Mocks | None = None,
    *,
    preview: bool = False,
    run_hooks: bool = False,
) -> PlanResult:
    """Run ``project_dir/__main__.py`` for ``stack`` under the mock engine and return what it registered.
    ``preview=True`` runs it as ``pulumi preview`` would (see ``run_mocked``); with ``run_hooks`` the resource
    hooks run as the engine runs them (``HookRunningMonitor``)."""
    main = project_dir / "__main__.py"
    added_path = str(project_dir.resolve())

    def program() -> None:
        sys.path.insert(0, added_path)
        try:
            runpy.run_path(str(main), run_name="__main__")
        finally:
            sys.path.remove(added_path)

    # A whole stack program: everything Azure-side it names must be created or looked up in it (a component run on
    # its own gets its cluster from its caller, so run_mocked checks only when asked).
    return run_mocked(
        program, stack, raw_config, project, mocks, preview=preview, run_hooks=run_hooks, check_references=True
    )


def run_mocked(
    program: Callable[[], object],
    stack: str,
    raw_config: Mapping[str, Any] | None = None,
    project: str = PACKAGE_NAME,
    mocks: Mocks | None = None,
    *,
    preview: bool = False,
    run_hooks: bool = False,
    check_references: bool = False,
) -> PlanResult:
    """Run ``program`` (which registers resources) under fresh mocks (``PlanMocks`` unless given) and a fresh
    event loop. ``preview=True`` is a dry run, as ``pulumi preview``: outputs the providers compute are unknown
    (recorded as ``[unknown]``) and invokes that depend on them are not made. With ``run_hooks``, resource hooks
    run too (not in a preview, unless registered with on_dry_run) and a failed one raises ``HookFailedError``. With
    ``check_references`` an Azure scope the program neither creates nor looks up raises
    ``UndeclaredAzureReferenceError`` (``undeclared_azure_references``)."""
    answers = mocks or PlanMocks(preview=preview)
    monitor = HookRunningMonitor(answers) if run_hooks else RecordingMonitor(answers)
    warnings: list[str] = []
    logger = logging.getLogger(f"{PACKAGE_NAME}.plan.{stack}")
    logger.propagate = False
    logger.handlers = [_CollectingHandler(warnings)]
    thresholds = gc.get_threshold()
    # A plan's Output graph is hundreds of thousands of small objects; at the default generation-0 threshold
    # the cyclic GC walks it again and again: half the CPU time of a large plan, and growing faster than linear.
    gc.set_threshold(100_000, 20, 100)
    try:
        # A fresh, empty context: the runtime keeps its settings, root stack and config in context variables,
        # so each run starts clean and leaves nothing behind for the next.
        return contextvars.Context().run(
            _run_in_context, program, stack, raw_config or {}, project, monitor, logger, warnings, preview, check_references
        )
    finally:
        gc.set_threshold(*thresholds)


def _run_in_context(
    program: Callable[[], object],
    stack: str,
    raw_config: Mapping[str, Any],
    project: str,
    monitor: RecordingMonitor,
    logger: logging.Logger,
    warnings: list[str],
    preview: bool,
    check_references: bool = False,
) -> PlanResult:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        # The runtime's set of pending outputs outlives a run; a run that failed midway would leave outputs of
        # its closed event loop there for the next run to await.
        pulumi.runtime.settings.SETTINGS.outputs = set()
        pulumi.runtime.set_all_config(_config_values(raw_config))
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=preview, monitor=monitor, logger=logger)
        _sync_await(run_pulumi_func(lambda: _discard(program())))
        root = pulumi.runtime.settings.get_root_resource()
        exported: dict[str, Any] = dict(getattr(root, "outputs", {}) or {})
        outputs = {name: _sync_await(_resolve_export(value)) for name, value in sorted(exported.items())}
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    if monitor.duplicates:
        raise DuplicateUrnError("registered twice: " + ", ".join(sorted(monitor.duplicates)))
    records = sorted(monitor.records, key=lambda r: r.urn)
    undeclared = undeclared_azure_references(records, monitor.invokes, monitor.azure_inputs) if check_references else []
    if undeclared:
        raise UndeclaredAzureReferenceError(
            "the program refers to Azure resources it neither creates nor looks up (a first deploy would fail "
            "with NotFound): " + "; ".join(undeclared)
        )
    result = PlanResult(project=project, stack=stack, resources=records, outputs=outputs, warnings=warnings)
    if isinstance(monitor, HookRunningMonitor):
        monitor.finish(result)
    return result


def _discard(_: object) -> None:
    return None


PLAN_FILE = "resources.json"
MANIFEST_DIR = "manifests"
_SWAP_ATTEMPTS = 20


class PlanWriteError(Exception):
    """The output folder cannot take a plan (a file stands there, it holds other files, it is not writable)."""


def write_plan(result: PlanResult, out_dir: Path) -> list[Path]:
    """Write ``resources.json`` and ``manifests/`` as ``out_dir``; returns the files written.

    Atomic: the plan is written into a fresh folder beside ``out_dir``, which then takes ``out_dir``'s place by
    renames, so whoever reads the folder (a second plan, a diff, checkov), even while another plan is being
    written into it, finds one whole plan, never a half-written file or two plans' manifests mixed. The whole
    folder is replaced, so one that holds anything else is refused rather than emptied."""
    out_dir = Path(out_dir)
    _check_out_dir(out_dir)
    manifests = result.manifests()
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        _drop_strays(out_dir)
        staging = Path(tempfile.mkdtemp(prefix=_stray_prefix(out_dir), suffix=".new", dir=out_dir.parent))
    except OSError as error:
        raise PlanWriteError(f"cannot write the plan to {out_dir}: {error.strerror or error}") from None
    try:
        (staging / PLAN_FILE).write_text(json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (staging / MANIFEST_DIR).mkdir()
        for file_name, manifest in manifests.items():
            text = yaml.safe_dump(manifest, sort_keys=True, default_flow_style=False)
            (staging / MANIFEST_DIR / file_name).write_text(text, encoding="utf-8")
        # mkdtemp makes the folder private (0700); a plan folder is as readable as any other output.
        staging.chmod(0o755)
        # Through a symlinked --out, the folder it points at is replaced, and the link stays.
        _swap_in(staging, out_dir.resolve())
    except OSError as error:
        raise PlanWriteError(f"cannot write the plan to {out_dir}: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out_dir / PLAN_FILE, *(out_dir / MANIFEST_DIR / name for name in manifests)]


def _check_out_dir(out_dir: Path) -> None:
    # One stat, then one listing, each allowed to find the folder gone: another plan being swapped into the same
    # folder moves it aside for an instant, which is not a file standing in the way.
    try:
        is_folder = stat.S_ISDIR(out_dir.stat().st_mode)
    except FileNotFoundError:
        return
    except OSError as error:  # a symlink loop, a path through a file (ENOTDIR), no permission
        raise PlanWriteError(f"cannot write the plan to {out_dir}: {error.strerror or error}") from None
    if not is_folder:
        raise PlanWriteError(f"{out_dir} is a file, not a folder: give --out a folder (it is created if missing)")
    try:
        entries = [entry.name for entry in out_dir.iterdir()]
    except FileNotFoundError:
        return
    except OSError as error:
        raise PlanWriteError(f"cannot write the plan to {out_dir}: {error.strerror or error}") from None
    foreign = sorted(name for name in entries if name not in (PLAN_FILE, MANIFEST_DIR))
    if foreign:
        listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise PlanWriteError(
            f"{out_dir} holds files that are not part of a plan ({listed}); a plan replaces the whole folder,"
            " so give --out an empty folder, a new one, or a previous plan's"
        )


def _stray_prefix(out_dir: Path, pid: int | None = None) -> str:
    """The name start of the folders a plan writes beside ``out_dir`` (``.NAME.<pid>.<random>.new`` and ``.old``): the
    writer's process id in it tells a later plan whether the folder is a leftover of one that was killed."""
    return f".{out_dir.name}.{os.getpid() if pid is None else pid}."


def _drop_strays(out_dir: Path) -> None:
    """Remove the ``.new``/``.old`` folders beside ``out_dir`` that a plan killed mid-write left (its process is gone);
    a running plan's own are left alone."""
    pattern = re.compile(rf"^\.{re.escape(out_dir.name)}\.(\d+)\.[^.]+\.(?:new|old)$")
    try:
        siblings = list(out_dir.parent.iterdir())
    except OSError:
        return
    for sibling in siblings:
        match = pattern.fullmatch(sibling.name)
        if match is None or _process_alive(int(match.group(1))):
            continue
        shutil.rmtree(sibling, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's: not ours to judge
    return True


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Put ``staging`` where ``out_dir`` is: move the old folder aside, rename the new one in, drop the old.
    Another writer may do the same at the same moment; whoever loses a rename tries again. Between the two renames
    the folder is absent for an instant (docs/cli.md says so); interrupted there (Ctrl-C), the old plan is put back."""
    for _ in range(_SWAP_ATTEMPTS):
        old: Path | None = None
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=_stray_prefix(out_dir), suffix=".old", dir=out_dir.parent))
            try:
                os.replace(out_dir, old)  # over the empty folder just made: atomic
            except FileNotFoundError:
                old.rmdir()  # another writer moved it first
                old = None
                continue
        swapped = False
        try:
            os.rename(staging, out_dir)
            swapped = True
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            continue  # another writer's plan went in between: move that one aside next time round
        finally:
            if old is not None and not swapped and not out_dir.exists():
                with contextlib.suppress(OSError):
                    os.rename(old, out_dir)  # not replaced (an error, Ctrl-C): the previous plan stays
            if old is not None and old.exists():
                shutil.rmtree(old, ignore_errors=True)
        return
    raise PlanWriteError(f"cannot write the plan to {out_dir}: other processes kept replacing it")


@dataclass(frozen=True)
class Replacement:
    urn: str
    name: str
    field: str
    before: Any
    after: Any


def replacements(previous: Mapping[str, Any], current: PlanResult) -> list[Replacement]:
    """Resources whose immutable inputs differ from a previous plan's ``resources.json``."""
    before = {r["urn"]: r for r in previous.get("resources", [])}
    # A resource renamed with an alias updates the old one: compare it with that.
    updates = previous_urns(current.resources, before)
    found = []
    fixed = immutable_fields()
    for record in current.resources:
        old = before.get(updates.get(record.urn, ""))
        if old is None:
            continue
        # Inputs Azure fixes at creation (data/immutable_fields.yaml, each with its source): for a GPU pool a change
        # drains and deletes every GPU node, so the plan shows it loudly.
        for fixed_field in fixed.get(record.type, ()):
            old_value, new_value = fixed_field.value_in(old["inputs"]), fixed_field.value_in(record.inputs)
            if old_value != new_value:
                found.append(Replacement(record.urn, record.name, fixed_field.field, old_value, new_value))
    return found


# ---------------------------------------------------------------- resource hooks, as the engine runs them
#
# The SDK's mock monitor accepts hook registrations and drops them (pulumi 3.272.0 runtime/mocks.py), so an
# offline plan never ran the post-deploy validation. HookRunningMonitor does what the engine does
# (pulumi/pulumi pkg/resource/deploy/deployment.go runHooks and step.go, v3.259.0): it keeps each registered
# hook, and for every resource registered with a hook binding calls the program's callback server over gRPC,
# exactly as the engine does, before_create hooks before the resource is created and after_create hooks after.
# The plan is a first deployment, so create is the only step; during a preview (dry run) a hook runs only if it
# was registered with on_dry_run. A hook's error, unless it was registered with ignore_errors, fails the
# deployment: a before hook fails that resource's step, an after hook fails the update once the resource exists
# (the engine does so from CLI 3.238.0, "Fail the deployment when an after hook fails", #22935: the step's state is
# kept, RecordPostStepError, and the update fails at its end). The engine runs a custom resource's after hooks when
# its step completes, but a component's only at its RegisterResourceOutputs (step.go, "For component resources, we
# instead run the after hooks when `RegisterResourceOutputs` is called", pulumi/pulumi 1b5949891b); this monitor
# runs the first kind and refuses the second rather than run it at the wrong time.


@dataclass(frozen=True)
class HookRun:
    """One hook the engine ran: which, on which resource, when, and the error it returned ("" for none)."""

    hook: str
    kind: str
    urn: str
    error: str = ""
    ignored: bool = False


class HookFailedError(RuntimeError):
    """A resource hook failed: the engine fails the deployment with these messages (its own wording)."""

    def __init__(self, runs: list[HookRun]) -> None:
        self.runs = runs
        timing = {"before_create": "before", "after_create": "after"}
        super().__init__("\n".join(f"{timing[run.kind]} hook {run.hook!r} failed: {run.error}" for run in runs))


@dataclass(frozen=True)
class _RegisteredHook:
    name: str
    token: str
    target: str
    on_dry_run: bool
    ignore_errors: bool


class HookRunningMonitor(RecordingMonitor):
    """The recording monitor, also running resource hooks as the engine does (see above)."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.hooks: dict[str, _RegisteredHook] = {}
        self.runs: list[HookRun] = []
        self._channels: dict[str, grpc.Channel] = {}

    def RegisterResourceHook(self, request: Any) -> Any:  # noqa: N802 - the gRPC method name
        hook = _RegisteredHook(
            request.name, request.callback.token, request.callback.target, request.on_dry_run, request.ignore_errors
        )
        with self._lock:
            self.hooks[hook.name] = hook
        return super().RegisterResourceHook(request)  # type: ignore[no-untyped-call]

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - the gRPC method name
        bound = request.hooks if request.HasField("hooks") else None
        urn = self.make_urn(request.parent, request.type, request.name)  # type: ignore[no-untyped-call]
        if bound is not None and not self._run("before_create", bound.before_create, request, urn, None):
            raise HookFailedError([self.runs[-1]])
        if bound is not None and bound.after_create and not request.custom:
            refused = "the offline plan runs after hooks of custom resources only"
            raise HookFailedError([HookRun(bound.after_create[0], "after_create", urn, refused)])
        response = super().RegisterResource(request)
        if bound is not None:
            self._run("after_create", bound.after_create, request, response.urn, response)
        return response

    def _run(self, kind: str, names: Sequence[str], request: Any, urn: str, response: Any) -> bool:
        """Run the hooks ``names``; False when one failed (and its error is not ignored)."""
        for name in names:
            hook = self.hooks.get(name)
            if hook is None:
                raise HookFailedError([HookRun(name, kind, urn, f"hook {name!r} was not registered")])
            if pulumi.runtime.is_dry_run() and not hook.on_dry_run:
                continue
            hook_request = resource_pb2.ResourceHookRequest(
                urn=urn,
                id=response.id if response is not None else "",
                name=request.name,
                type=request.type,
                new_inputs=request.object,
                new_outputs=response.object if response is not None else None,
            )
            reply = callback_pb2_grpc.CallbacksStub(self._channel(hook.target)).Invoke(
                callback_pb2.CallbackInvokeRequest(token=hook.token, request=hook_request.SerializeToString())
            )
            error = resource_pb2.ResourceHookResponse.FromString(reply.response).error
            run = HookRun(name, kind, urn, error, ignored=bool(error) and hook.ignore_errors)
            with self._lock:
                self.runs.append(run)
            if error and not hook.ignore_errors:
                return False
        return True

    def _channel(self, target: str) -> grpc.Channel:
        with self._lock:
            if target not in self._channels:
                self._channels[target] = grpc.insecure_channel(target)
            return self._channels[target]

    def finish(self, result: PlanResult) -> None:
        """Hand the runs to the result; raise ``HookFailedError`` when one failed."""
        for channel in self._channels.values():
            channel.close()
        result.hook_runs = list(self.runs)
        failed = [run for run in self.runs if run.error and not run.ignored]
        if failed:
            raise HookFailedError(failed)
