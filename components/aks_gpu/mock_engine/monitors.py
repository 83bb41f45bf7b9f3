"""The mock monitors: the SDK's, also recording each registration and invoke, and one that also runs resource hooks
as the Pulumi engine does."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc  # type: ignore[import-untyped]
import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor, Mocks
from pulumi.runtime.proto import callback_pb2, callback_pb2_grpc, resource_pb2
from pulumi.runtime.settings import get_project, get_stack

from aks_gpu.mock_engine.mocks import revealed
from aks_gpu.mock_engine.records import AliasSpec, HookRun, PlanResult, ResourceRecord, mask_secrets
from aks_gpu.mock_engine.urns import ROOT_STACK_TYPE, engine_urn


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
            "replaceOnChanges": sorted(request.replaceOnChanges),
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
            property_dependencies={
                key: tuple(sorted(deps.urns)) for key, deps in request.propertyDependencies.items() if deps.urns
            },
            # A provider reference is "<URN>::<id>"; the id may be unknown (empty) in a preview.
            provider_urn=request.provider.rsplit("::", 1)[0] if request.provider else None,
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
