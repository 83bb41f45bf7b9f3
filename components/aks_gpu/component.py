"""What every public component shares: ``GpuComponent``, the one base, and ``kube_resource``, the one function that
turns a Kubernetes manifest into a Pulumi resource.

A component is built in two steps, so nothing is registered before its args are known to be good:

1. ``resolve_args(name, args)``: the component's ``args`` (TypedDicts of ``components/aks_gpu/specs.py``, as any Pulumi language
   passes them) validated by the config models and rules and resolved into the component's inputs (a resolved pool, a
   platform model...). A bad arg raises ``aks_gpu.args.ArgsError``, a ``pulumi.InputPropertiesError`` with each
   property path; warnings are logged once per run.
2. ``build(name, inputs)``: the children, registered from those inputs; it returns the outputs ``register_outputs``
   records.

``GpuComponent.of(name, inputs, opts)`` skips the first step: a parent that has resolved the whole stack once
(``GpuPlatform``, from the program's validated stack) hands each child its part of the model, so nothing is validated
twice. The type token is ``aks-gpu:index:<class name>`` (``aks_gpu.naming.type_token``).

Children: ``child(...)`` gives every child the same options: this component as parent (so it inherits the providers the
component was given: ``provider=`` or ``providers=`` for the cluster's Kubernetes provider), and what the component
waits for (``depends_on``), which Pulumi does not pass on to a component's children by itself.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any, Generic, Self, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from aks_gpu.args import outputs_in
from aks_gpu.manifests import Manifest, labelled
from aks_gpu.naming import type_token

Inputs = TypeVar("Inputs")
Value = TypeVar("Value")


def plain_output(value: Value) -> pulumi.Output[Value]:
    """``value``, a plain value (no output inside), as one known output. ``Output.from_input`` would make an output of
    every dict, list and item inside it first (thousands for a 40-pool ``targets``), most of what a component's outputs
    cost a plan."""

    def known(item: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_event_loop().create_future()
        future.set_result(item)
        return future

    return pulumi.Output(set(), known(value), known(True), known(False))


def combined(function: Callable[..., Value], *values: Any) -> pulumi.Output[Value]:
    """``function(*values)`` as an output: computed now, one known output, when every value is plain (what a parent that
    resolved the stack passes); else once the outputs among them are known (what another stack may pass)."""
    if any(next(outputs_in(value), None) is not None for value in values):
        return pulumi.Output.all(*values).apply(lambda known: function(*known))
    return plain_output(function(*values))


def resources_in(depends_on: object) -> list[pulumi.Resource]:
    """The resources of a ``depends_on`` option (one resource, or a list of them)."""
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    if isinstance(depends_on, list | tuple):
        return [resource for resource in depends_on if isinstance(resource, pulumi.Resource)]
    return []


class GpuComponent(pulumi.ComponentResource, Generic[Inputs]):
    """The base of every public component (see the module's docstring). A subclass defines ``__init__(self, name, args:
    <its Args TypedDict>, opts=None)`` calling ``super().__init__`` (Pulumi's schema inference reads that signature),
    ``resolve_args`` and ``build``; its output attributes are annotated ``pulumi.Output[...]`` on the class."""

    def __init__(self, name: str, args: Any, opts: pulumi.ResourceOptions | None = None) -> None:
        # Before anything is registered: bad args leave nothing half-made behind.
        inputs = self.resolve_args(name, args)
        self._register(name, inputs, opts)

    @classmethod
    def of(cls, name: str, inputs: Inputs, opts: pulumi.ResourceOptions | None = None) -> Self:
        """The component built from inputs already resolved (by a parent that validated the whole stack)."""
        component = cls.__new__(cls)
        component._register(name, inputs, opts)
        return component

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> Inputs:
        """``args`` checked and resolved; raises ``ArgsError`` (property paths in camelCase) on a bad one."""
        raise NotImplementedError

    def build(self, name: str, inputs: Inputs) -> Mapping[str, Any]:
        """Register the children and set the output attributes; returns the outputs (camelCase keys) to record."""
        raise NotImplementedError

    def _register(self, name: str, inputs: Inputs, opts: pulumi.ResourceOptions | None) -> None:
        pulumi.ComponentResource.__init__(self, type_token(type(self).__name__), name, None, opts)
        self._waits_for = resources_in(opts.depends_on if opts is not None else None)
        self.register_outputs(dict(self.build(name, inputs)))

    def child(self, *, after: Iterable[pulumi.Resource] = (), waits: bool = True, **options: Any) -> pulumi.ResourceOptions:
        """Options for a child: parented here, after ``after`` and (unless ``waits`` is off, for a child that waits
        through another one already) after what this component waits for."""
        depends = [*(self._waits_for if waits else ()), *after]
        return pulumi.ResourceOptions(parent=self, depends_on=depends or None, **options)


# ---------------------------------------------------------------- Kubernetes objects

# Fields of a manifest that name its type: the typed class says them itself.
_TYPE_FIELDS = ("apiVersion", "kind")
_CAMEL_HUMP = re.compile(r"(?<!^)(?=[A-Z])")


@cache
def _typed_classes() -> dict[tuple[str, str], Callable[..., pulumi.CustomResource]]:
    """(apiVersion, kind) -> the pulumi-kubernetes class. Built on first use: the SDK loads its modules lazily."""
    admission = k8s.admissionregistration.v1
    return {
        ("v1", "Namespace"): k8s.core.v1.Namespace,
        ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
        ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
        ("v1", "LimitRange"): k8s.core.v1.LimitRange,
        ("v1", "ResourceQuota"): k8s.core.v1.ResourceQuota,
        ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
        ("batch/v1", "Job"): k8s.batch.v1.Job,
        ("batch/v1", "CronJob"): k8s.batch.v1.CronJob,
        ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
        ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
        ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
        ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
        ("storage.k8s.io/v1", "StorageClass"): k8s.storage.v1.StorageClass,
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): admission.ValidatingAdmissionPolicy,
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): admission.ValidatingAdmissionPolicyBinding,
        ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"): admission.MutatingAdmissionPolicy,
        ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding"): admission.MutatingAdmissionPolicyBinding,
    }


def _argument(field: str) -> str:
    """A manifest field as the typed class's argument: ``roleRef`` -> ``role_ref``."""
    return _CAMEL_HUMP.sub("_", field).lower()


def _lift(value: Any, change: Callable[[Any], Any]) -> Any:
    return pulumi.Output.from_input(value).apply(change)


def kube_resource(name: str, manifest: Manifest, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Register ``manifest`` (plain values, or outputs per top-level field) as the Pulumi resource ``name``: the kinds the
    platform creates get their typed pulumi-kubernetes class (type tokens such as ``kubernetes:apps/v1:DaemonSet``, the
    provider's await logic for rollouts and Jobs), anything else a ``CustomResource``; the inputs are the manifest's own
    fields as written, and the object carries the platform's common labels."""
    manifest = labelled(manifest, _lift)
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    fields = {key: value for key, value in manifest.items() if key not in _TYPE_FIELDS}
    typed = _typed_classes().get((api_version, kind))
    if typed is None:
        return k8s.apiextensions.CustomResource(name, api_version=api_version, kind=kind, opts=opts, **fields)
    return typed(name, opts=opts, **{_argument(key): value for key, value in fields.items()})
