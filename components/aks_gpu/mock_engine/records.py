"""What a mock-engine run records: each registered resource (its URN, inputs, options, aliases), the plan result
(resources, outputs, warnings, hook runs) and the Kubernetes objects in it, with secrets masked as ``[secret]``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pulumi.output import Unknown
from pulumi.runtime import rpc

from aks_gpu.config.encrypted import SECRET as SECRET  # how the plan records a secret, for its readers

# A value `pulumi preview` cannot know yet (an id, a name Azure assigns): how preview-mode plans record it.
UNKNOWN = "[unknown]"
KUBE_PREFIX = "kubernetes:"


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
    # The Azure REST API version an azure-native resource is sent with (the installed SDK's; None for others).
    api_version: str | None = field(default=None, compare=False)
    # Which resources each input comes from (input name -> their URNs), and the URN of the provider resource that
    # serves this one: the graph `aksgpu plan` follows for what a replacement takes with it (mock_engine.changes).
    # Not written to resources.json.
    property_dependencies: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)
    provider_urn: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        body = {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "custom": self.custom,
            "inputs": self.inputs,
            "options": self.options,
        }
        if self.api_version is not None:
            body["apiVersion"] = self.api_version
        return body


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


@dataclass(frozen=True)
class HookRun:
    """One hook the engine ran: which, on which resource, when, and the error it returned ("" for none)."""

    hook: str
    kind: str
    urn: str
    error: str = ""
    ignored: bool = False
