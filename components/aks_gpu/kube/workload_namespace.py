"""``GpuWorkloadNamespace``: one namespace per workload type, fenced the way AKS's GPU best practices describe.

A public component: ``GpuPlatform`` builds one per entry of ``aks-gpu:workloads``, and an application team's
stack can add its own namespace next to the platform's, with the placement values it reads from the platform
stack's outputs through a ``StackReference``. So the GPU resource name, node selector and tolerations are
``pulumi.Input``s, and so are the workload's name, type and GPU quota (``DEFERRED_FIELDS``); the rest of the
``WorkloadSpec`` decides which objects exist and is plain. All of it is checked by the same pydantic rules as a
stack file.

The objects come from ``workload_manifests`` (pure); this module validates the args and registers them.

No ``from __future__ import annotations`` here: Pulumi's schema inference reads the args and output
annotations at runtime and cannot see through string annotations (nor ``NotRequired`` inside them).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, TypeVar, cast

import pulumi
import pulumi_kubernetes as k8s
from pydantic import ValidationError

from aks_gpu.admission.chain import namespace_metadata_with_tolerations
from aks_gpu.args import (
    ArgsError,
    args_error,
    is_output,
    log_warnings,
    outputs_in,
    plain_numbers,
    property_path,
    raised_later,
)
from aks_gpu.component import GpuComponent, combined, kube_resource
from aks_gpu.config.loader import key_path, problems_from
from aks_gpu.config.models import PlatformConfig, WorkloadConfig
from aks_gpu.config.problems import Problem
from aks_gpu.config.rules import cidr_problems
from aks_gpu.kube.workload_manifests import (
    Manifest,
    PodPlacement,
    TolerationSpec,
    config_manifests,
    gpu_quota_key,
    namespace_manifest,
    pod_placement,
    quota_hard,
    rdma_manifests,
    resource_quota_manifest,
)
from aks_gpu.naming import QUOTA_NAME
from aks_gpu.resolved.model import ResolvedWorkload
from aks_gpu.specs import WorkloadSpec

Value = TypeVar("Value")


class GpuWorkloadNamespaceArgs(TypedDict):
    """A workload namespace: its own settings, plus where its GPU pods go (from the platform that owns the pools)."""

    workload: pulumi.Input[WorkloadSpec]
    """The namespace's settings, as an entry of a stack file's aks-gpu:workloads: an object whose name, type and
    gpuQuota may be outputs (another stack's values); the rest decides which objects exist and must be plain."""
    resource_name: NotRequired[pulumi.Input[str]]
    """The GPU resource the workload's pools expose (nvidia.com/gpu, amd.com/gpu, nvidia.com/mig-1g.10gb): the
    quota's key and the pods' limit. Left out when no pool serves the workload: it gets no GPU at all."""
    node_selector: pulumi.Input[Mapping[str, pulumi.Input[str]]]
    """The node selector of the workload's pools."""
    tolerations: pulumi.Input[Sequence[pulumi.Input[TolerationSpec]]]
    """Every taint of the workload's pools, tolerated."""
    other_gpu_resources: NotRequired[pulumi.Input[Sequence[pulumi.Input[str]]]]
    """The other GPU resources of the cluster: each is capped at zero in this namespace's quota. May list
    resource_name too (it is skipped), so a platform can pass all of its resources."""


@dataclass(frozen=True)
class WorkloadNamespaceInputs:
    """A workload checked by the stack file's rules (``shape``; with stand-ins for deferred values, which ``pending``
    delivers once known), and where its GPU pods go."""

    shape: WorkloadConfig
    resource_name: pulumi.Input[str]
    node_selector: pulumi.Input[Mapping[str, pulumi.Input[str]]]
    tolerations: pulumi.Input[Sequence[pulumi.Input[TolerationSpec]]]
    other_gpu_resources: pulumi.Input[Sequence[pulumi.Input[str]]] = ()
    pending: pulumi.Output[WorkloadConfig] | None = None
    # The GPUs its ResourceQuota allows where the platform queues its Jobs (kube.kueue.gpu_ceilings); None: gpuQuota.
    gpu_ceiling: int | None = None


def platform_namespace(
    workload: ResolvedWorkload, other_gpu_resources: Sequence[str] = (), gpu_ceiling: int | None = None
) -> WorkloadNamespaceInputs:
    """The inputs of a platform's own workload namespace, all plain values from its resolved model."""
    return WorkloadNamespaceInputs(
        shape=workload.config,
        resource_name=workload.resource_name or "",
        node_selector=dict(workload.node_selector),
        tolerations=[cast(TolerationSpec, t) for t in workload.kube_tolerations],
        other_gpu_resources=list(other_gpu_resources),
        gpu_ceiling=gpu_ceiling,
    )


# Of a workload, what another stack may pass as outputs (a StackReference value, a config of its own): they
# change the objects' values, never which objects exist or their resource names. The rest is checked before
# anything is registered; these when they are known (during preview an unknown value is checked at deploy).
DEFERRED_FIELDS = ("name", "type", "gpu_quota")
# Valid stand-ins, so the rest of the spec can be checked before the deferred values are known.
_STAND_INS: dict[str, Any] = {"name": "pending", "type": "pending", "gpu_quota": 0}
# A workload is validated as the one entry of a platform's workloads, so the loader's messages (allowed keys,
# pattern hints) are read off the right model; its paths are then the component's `workload` input.
_RENAMES = {"workloads[0]": "workload"}


def _workload_problems(spec: Mapping[str, Any]) -> tuple[WorkloadConfig | None, list[Problem]]:
    try:
        config = PlatformConfig.model_validate({"workloads": [plain_numbers(spec)]}).workloads[0]
    except ValidationError as exc:
        return None, problems_from(exc)
    path = key_path(("workloads", 0))
    return config, [
        problem
        for index, rule in enumerate(config.network.allow_egress)
        for problem in cidr_problems(rule.cidr, f"{path}.network.allowEgress[{index}].cidr")
    ]


def validated_workload(spec: Mapping[str, Any], component: str, warn: bool = True) -> WorkloadConfig:
    """``spec`` checked by the stack file's rules for a workload entry: raises ``ArgsError`` listing every
    error (paths ``workload.<key>``), logs the warnings."""
    config, problems = _workload_problems(spec)
    if config is None or any(p.severity == "error" for p in problems):
        raise args_error(component, problems, PlatformConfig, _RENAMES)
    if warn:
        render = lambda p: f"{property_path(p.path, PlatformConfig, _RENAMES)}: {p.message}"  # noqa: E731
        log_warnings(problems, PlatformConfig(workloads=(config,)), render)
    return config


def workload_config(spec: Any, component: str) -> tuple[WorkloadConfig, pulumi.Output[WorkloadConfig] | None]:
    """The validated workload and None; or, when a deferred field is an output, the workload with stand-ins
    (it tells which objects exist) and the whole as an output, validated when the values are known."""
    if is_output(spec) or not isinstance(spec, Mapping):
        raise ArgsError(component, [("workload", "must be an object (its name, type and gpuQuota may be outputs)")])
    deferred = {key: spec[key] for key in DEFERRED_FIELDS if is_output(spec.get(key))}
    plain_only = [path for path in outputs_in(spec) if path not in deferred]
    if plain_only:
        reason = "must be a plain value, not an output: it decides which objects the namespace gets"
        raise ArgsError(component, [(property_path(f"workloads[0].{p}", PlatformConfig, _RENAMES), reason) for p in plain_only])
    if not deferred:
        return validated_workload(spec, component), None
    shape = validated_workload({**spec, **{key: _STAND_INS[key] for key in deferred}}, component, warn=False)

    def complete(values: dict[str, Any]) -> WorkloadConfig:
        try:
            return validated_workload({**spec, **values}, component)
        except ArgsError as error:
            raise raised_later(error) from None

    return shape, pulumi.Output.all(**deferred).apply(complete)


_TYPE_KEYS = ("apiVersion", "kind")


def _nth_config_manifest(index: int) -> Callable[[WorkloadConfig], Manifest]:
    return lambda config: config_manifests(config)[index]


def _child_name(component: str, kind: str, object_name: str) -> str:
    # Kept stable across refactors: a changed name is a replaced object (a namespace deleted with its pods).
    return f"{component}-{kind.lower()}-{object_name}"


class GpuWorkloadNamespace(GpuComponent[WorkloadNamespaceInputs]):
    """A workload type's namespace with its GPU quota, default requests, deny-all network policy and opt-in
    allows, Pod Security labels and Entra ID group bindings. Its outputs tell jobs how to land on its GPUs."""

    namespace: k8s.core.v1.Namespace
    """The Namespace object, for resources that must wait for it."""
    namespace_name: pulumi.Output[str]
    """The namespace."""
    resource_name: pulumi.Output[str]
    """The GPU resource its pods request; empty when no pool serves the workload."""
    quota_key: pulumi.Output[str]
    """The GPU key of its ResourceQuota (requests.<resource>); empty when no pool serves the workload."""
    gpu_quota: pulumi.Output[int]
    """How many units of the GPU resource the namespace's pods may request in all."""
    pod_placement: pulumi.Output[PodPlacement]
    """The pod spec fragment for a GPU pod here: nodeSelector, tolerations and the container's resources."""

    def __init__(self, name: str, args: GpuWorkloadNamespaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> WorkloadNamespaceInputs:
        shape, pending = workload_config(args["workload"], f"GpuWorkloadNamespace {name}")
        return WorkloadNamespaceInputs(
            shape=shape,
            resource_name=args.get("resource_name", ""),
            node_selector=args["node_selector"],
            tolerations=args["tolerations"],
            other_gpu_resources=args.get("other_gpu_resources", []),
            pending=pending,
        )

    def build(self, name: str, inputs: WorkloadNamespaceInputs) -> dict[str, Any]:
        shape, pending = inputs.shape, inputs.pending
        resource, others = inputs.resource_name, inputs.other_gpu_resources
        # The workload: plain, or (a deferred field being an output) once its outputs are known.
        workload = shape if pending is None else pending

        def manifest_of(build: Callable[[WorkloadConfig], Manifest]) -> Manifest:
            # A manifest of the workload: plain when the workload is; else each field an output of the known values
            # (which objects exist and their names never depend on the deferred fields, see DEFERRED_FIELDS).
            plain = build(shape)
            if pending is None:
                return plain

            def field(key: str) -> Callable[[WorkloadConfig], Any]:
                return lambda config: build(config)[key]

            return {key: value if key in _TYPE_KEYS else pending.apply(field(key)) for key, value in plain.items()}

        # An RDMA namespace's Pod Security comes from its own policy: bound before the namespace relaxes PSA.
        # Whether there is one is plain (rdma is never an output); its name follows the namespace's.
        rdma: list[pulumi.Resource] = []
        if rdma_manifests(shape):
            rdma_policy = kube_resource(
                f"{name}-rdma-policy", manifest_of(lambda config: rdma_manifests(config)[0]), self.child()
            )
            rdma.append(rdma_policy)
            rdma.append(
                kube_resource(
                    f"{name}-rdma-binding", manifest_of(lambda config: rdma_manifests(config)[1]), self.child(after=[rdma_policy])
                )
            )
        # Its default tolerations (PodTolerationRestriction) are the pools' tolerations when they are plain values, as a
        # platform passes its own. Passed as outputs (another stack's, perhaps secret), they are not written into an
        # annotation every user who can list namespaces reads, and the secret would spread to the namespace's outputs:
        # such a namespace's Pods take them from podPlacement.
        namespace = manifest_of(namespace_manifest)
        if next(outputs_in(inputs.tolerations), None) is None:
            namespace["metadata"] = combined(namespace_metadata_with_tolerations, namespace["metadata"], inputs.tolerations)
        self.namespace = cast(
            k8s.core.v1.Namespace,
            kube_resource(f"{name}-namespace", namespace, self.child(after=rdma)),
        )
        # The provider does not order objects by the namespace they name; the namespace must exist first.
        inside = self.child(after=[self.namespace])
        # Its keys are the GPU resource names, which another stack may only know as outputs: built once they are known.
        hard = combined(
            lambda r, o, config: quota_hard(config, r or None, o, inputs.gpu_ceiling),
            resource,
            others,
            shape if pending is None else pending,
        )
        quota = {**manifest_of(lambda config: resource_quota_manifest(config, None)), "spec": {"hard": hard}}
        kube_resource(_child_name(name, "ResourceQuota", QUOTA_NAME), quota, inside)
        for index, manifest in enumerate(config_manifests(shape)):
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            kube_resource(_child_name(name, kind, object_name), manifest_of(_nth_config_manifest(index)), inside)

        self.namespace_name = self.namespace.metadata.apply(lambda meta: str(meta.name))
        self.resource_name = combined(str, resource)
        self.quota_key = combined(lambda r: gpu_quota_key(r) if r else "", resource)
        self.gpu_quota = combined(lambda config: config.gpu_quota, workload)
        self.pod_placement = combined(
            lambda r, s, t: pod_placement(r or None, s, t), resource, inputs.node_selector, inputs.tolerations
        )
        outputs: dict[str, Any] = {
            "namespaceName": self.namespace_name,
            "resourceName": self.resource_name,
            "quotaKey": self.quota_key,
            "gpuQuota": self.gpu_quota,
            "podPlacement": self.pod_placement,
        }
        return outputs
