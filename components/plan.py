"""Run the real Pulumi program offline under Pulumi's mock engine and record what it would create.

No Azure account, no Pulumi CLI: ``__main__.py`` runs as it would under ``pulumi up``, but every resource
registration and every invoke is answered here, with stable fake IDs, so two runs give identical records.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import errno
import gc
import json
import logging
import os
import runpy
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

SECRET = "[secret]"
FAKE_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
FAKE_TENANT = "11111111-1111-1111-1111-111111111111"
KUBE_PREFIX = "kubernetes:"


@dataclass(frozen=True)
class ResourceRecord:
    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    options: dict[str, Any]

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
            meta = manifest.get("metadata") or {}
            namespace = meta.get("namespace") or "_"
            files[f"{manifest['kind'].lower()}-{namespace}-{meta.get('name', record.name)}.yaml"] = manifest
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
    if isinstance(value, dict):
        return {key: mask_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_secrets(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def fake_kubeconfig(cluster: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: {cluster}\n  cluster:\n    server: https://{cluster}.hcp.example.invalid:443\n"
        f"contexts:\n- name: {cluster}\n  context:\n    cluster: {cluster}\n    user: clusterUser_{cluster}\n"
        f"current-context: {cluster}\n"
        f"users:\n- name: clusterUser_{cluster}\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
        "      command: kubelogin\n"
        "      args: [get-token, --login, azurecli, --server-id, 6dae42f8-4368-4678-94ff-3960e28e3630]\n"
    )


def arm_id(resource_group: str, provider_type: str, name: str) -> str:
    return f"/subscriptions/{FAKE_SUBSCRIPTION}/resourceGroups/{resource_group}/providers/{provider_type}/{name}"


class PlanMocks(Mocks):
    """Answers registrations and invokes with stable values: the same program gives the same plan."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        if args.typ == "azure-native:containerservice:ManagedCluster":
            group = str(args.inputs.get("resourceGroupName"))
            cluster = str(args.inputs.get("resourceName", args.name))
            state |= {"name": cluster, "fqdn": f"{cluster}.hcp.example.invalid"}
            state["oidcIssuerProfile"] = {"issuerURL": f"https://oidc.example.invalid/{cluster}/"}
            return arm_id(group, "Microsoft.ContainerService/managedClusters", cluster), state
        if not args.custom:
            return None, {}
        return f"{args.name}-id", state

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token = args.token
        if token == "azure-native:containerservice:listManagedClusterUserCredentials":
            cluster = str(args.args.get("resourceName"))
            encoded = base64.b64encode(fake_kubeconfig(cluster).encode()).decode()
            return {"kubeconfigs": [{"name": "clusterUser", "value": encoded}]}, []
        if token == "azure-native:containerservice:getManagedCluster":
            group, cluster = str(args.args.get("resourceGroupName")), str(args.args.get("resourceName"))
            return {
                "id": arm_id(group, "Microsoft.ContainerService/managedClusters", cluster),
                "name": cluster,
                "location": "swedencentral",
                "oidcIssuerProfile": {"enabled": True, "issuerURL": f"https://oidc.example.invalid/{cluster}/"},
            }, []
        if token == "azure-native:authorization:getClientConfig":
            return {
                "clientId": "plan-client",
                "objectId": "22222222-2222-2222-2222-222222222222",
                "subscriptionId": FAKE_SUBSCRIPTION,
                "tenantId": FAKE_TENANT,
            }, []
        return {}, []


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
        self.duplicates: set[str] = set()
        self._urns: set[str] = set()
        self._lock = threading.Lock()

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - the gRPC method name
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type == "pulumi:pulumi:Stack":
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
        )
        with self._lock:
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
    resolved = await output.future()
    return mask_secrets(resolved)


class DuplicateUrnError(RuntimeError):
    """Two resources registered under one URN: Pulumi would refuse the program at deploy time."""


def run_program(
    project_dir: Path, stack: str, raw_config: Mapping[str, Any], project: str = "aks-gpu", mocks: Mocks | None = None
) -> PlanResult:
    """Run ``project_dir/__main__.py`` for ``stack`` under the mock engine and return what it registered."""
    main = project_dir / "__main__.py"
    added_path = str(project_dir.resolve())

    def program() -> None:
        sys.path.insert(0, added_path)
        try:
            runpy.run_path(str(main), run_name="__main__")
        finally:
            sys.path.remove(added_path)

    return run_mocked(program, stack, raw_config, project, mocks)


def run_mocked(
    program: Callable[[], object],
    stack: str,
    raw_config: Mapping[str, Any] | None = None,
    project: str = "aks-gpu",
    mocks: Mocks | None = None,
) -> PlanResult:
    """Run ``program`` (which registers resources) under fresh mocks (``PlanMocks`` unless given) and a fresh
    event loop."""
    monitor = RecordingMonitor(mocks or PlanMocks())
    warnings: list[str] = []
    logger = logging.getLogger(f"aks-gpu.plan.{stack}")
    logger.propagate = False
    logger.handlers = [_CollectingHandler(warnings)]
    thresholds = gc.get_threshold()
    # A plan's Output graph is hundreds of thousands of small objects; at the default generation-0 threshold
    # the cyclic GC walks it again and again: half the CPU time of a large plan, and growing faster than linear.
    gc.set_threshold(100_000, 20, 100)
    try:
        # A fresh, empty context: the runtime keeps its settings, root stack and config in context variables,
        # so each run starts clean and leaves nothing behind for the next.
        return contextvars.Context().run(_run_in_context, program, stack, raw_config or {}, project, monitor, logger, warnings)
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
) -> PlanResult:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        # The runtime's set of pending outputs outlives a run; a run that failed midway would leave outputs of
        # its closed event loop there for the next run to await.
        pulumi.runtime.settings.SETTINGS.outputs = set()
        pulumi.runtime.set_all_config(_config_values(raw_config))
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=logger)
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
    return PlanResult(project=project, stack=stack, resources=records, outputs=outputs, warnings=warnings)


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
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".new", dir=out_dir.parent))
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
    if out_dir.exists() and not out_dir.is_dir():
        raise PlanWriteError(f"{out_dir} is a file, not a folder: give --out a folder (it is created if missing)")
    if out_dir.is_dir():
        foreign = sorted(entry.name for entry in out_dir.iterdir() if entry.name not in (PLAN_FILE, MANIFEST_DIR))
        if foreign:
            listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise PlanWriteError(
                f"{out_dir} holds files that are not part of a plan ({listed}); a plan replaces the whole folder,"
                " so give --out an empty folder, a new one, or a previous plan's"
            )


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Put ``staging`` where ``out_dir`` is: move the old folder aside, rename the new one in, drop the old.
    Another writer may do the same at the same moment; whoever loses a rename tries again."""
    for _ in range(_SWAP_ATTEMPTS):
        old: Path | None = None
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
            try:
                os.replace(out_dir, old)  # over the empty folder just made: atomic
            except FileNotFoundError:
                old.rmdir()  # another writer moved it first
                old = None
                continue
        try:
            os.rename(staging, out_dir)
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            continue  # another writer's plan went in between: move that one aside next time round
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        return
    raise PlanWriteError(f"cannot write the plan to {out_dir}: other processes kept replacing it")


# Inputs Azure cannot change in place: a change replaces the resource. For a GPU pool that drains and
# deletes every GPU node, so the plan shows it loudly.
REPLACING_INPUTS: dict[str, tuple[str, ...]] = {
    "azure-native:containerservice:AgentPool": (
        "vmSize",
        "gpuInstanceProfile",
        "osDiskType",
        "osSKU",
        "availabilityZones",
        "maxPods",
    ),
    "azure-native:containerservice:ManagedCluster": ("location", "dnsPrefix", "resourceName"),
}


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
    found = []
    for record in current.resources:
        old = before.get(record.urn)
        if old is None:
            continue
        for field_name in REPLACING_INPUTS.get(record.type, ()):
            old_value, new_value = old["inputs"].get(field_name), record.inputs.get(field_name)
            if old_value != new_value:
                found.append(Replacement(record.urn, record.name, field_name, old_value, new_value))
    return found
