"""``GpuWorkloadNamespace``: one namespace per workload type, fenced the way AKS's GPU best practices describe.

A public component: ``GpuPlatform`` builds one per entry of ``aks-gpu:workloads``, and an application team's
stack can add its own namespace next to the platform's, with the placement values it reads from the platform
stack's outputs through a ``StackReference``. So the GPU resource name, node selector and tolerations are
``pulumi.Input``s; the namespace's own settings are plain, a ``WorkloadSpec`` checked by the same pydantic
rules as a stack file.

The objects come from ``workload_manifests`` (pure); this module validates the args and registers them.

No ``from __future__ import annotations`` here: Pulumi's schema inference reads the args and output
annotations at runtime and cannot see through string annotations (nor ``NotRequired`` inside them).
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s
from pydantic import ValidationError

from components.config.loader import key_path, problems_from
from components.config.models import PlatformConfig, WorkloadConfig
from components.config.problems import Problem
from components.config.rules import cidr_problems
from components.kube.workload_manifests import (
    QUOTA_NAME,
    Manifest,
    PodPlacement,
    TolerationSpec,
    config_manifests,
    gpu_quota_key,
    namespace_manifest,
    object_metadata,
    pod_placement,
    quota_hard,
    rdma_manifests,
)
from components.model import ResolvedWorkload
from components.specs import WorkloadSpec

COMPONENT_TYPE = "aks-gpu:index:GpuWorkloadNamespace"


class GpuWorkloadNamespaceArgs(TypedDict):
    """A workload namespace: its own settings, plus where its GPU pods go (from the platform that owns the pools)."""

    workload: WorkloadSpec
    """The namespace's settings, as an entry of a stack file's aks-gpu:workloads."""
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


def namespace_args(workload: ResolvedWorkload, other_gpu_resources: Sequence[str] = ()) -> GpuWorkloadNamespaceArgs:
    """The args of a platform's own workload namespace, all plain values from its resolved model."""
    args = GpuWorkloadNamespaceArgs(
        # JSON mode: lists, not tuples, as the spec types say; no None, as a spec leaves a key out instead.
        workload=cast(WorkloadSpec, workload.config.model_dump(mode="json", exclude_none=True)),
        node_selector=dict(workload.node_selector),
        tolerations=[cast(TolerationSpec, t.to_kube()) for t in workload.tolerations],
        other_gpu_resources=list(other_gpu_resources),
    )
    if workload.resource_name:
        args["resource_name"] = workload.resource_name
    return args


# A workload validated as the one entry of a platform's workloads, so the loader's messages (allowed keys,
# pattern hints) are read off the right model; its paths then start here.
_WORKLOAD_PATH = key_path(("workloads", 0))


def _arg_path(path: str) -> str:
    return "workload" + path.removeprefix(_WORKLOAD_PATH) if path.startswith(_WORKLOAD_PATH) else path


def validated_workload(spec: object, component: str) -> tuple[WorkloadConfig, list[str]]:
    """``spec`` checked by the stack file's rules for a workload entry, and its warnings (as ``path: message``
    lines). Raises ``RunError`` listing every error."""
    try:
        config = PlatformConfig.model_validate({"workloads": [spec]}).workloads[0]
    except ValidationError as exc:
        problems = problems_from(exc)
    else:
        problems = [
            problem
            for index, rule in enumerate(config.network.allow_egress)
            for problem in cidr_problems(rule.cidr, f"{_WORKLOAD_PATH}.network.allowEgress[{index}].cidr")
        ]
    errors: list[Problem] = [p for p in problems if p.severity == "error"]
    if errors:
        lines = "\n".join(f"  {_arg_path(p.path)}: {p.message}" for p in errors)
        raise pulumi.RunError(f"invalid args for {component}:\n{lines}")
    return config, [f"{_arg_path(p.path)}: {p.message}" for p in problems]


Register = Callable[[str, Manifest, pulumi.ResourceOptions], pulumi.CustomResource]

# The namespaced kinds ``config_manifests`` builds, each registered as its typed resource.
_REGISTER: dict[str, Register] = {
    "LimitRange": lambda name, m, opts: k8s.core.v1.LimitRange(name, metadata=m["metadata"], spec=m["spec"], opts=opts),
    "NetworkPolicy": lambda name, m, opts: k8s.networking.v1.NetworkPolicy(
        name, metadata=m["metadata"], spec=m["spec"], opts=opts
    ),
    "RoleBinding": lambda name, m, opts: k8s.rbac.v1.RoleBinding(
        name, metadata=m["metadata"], role_ref=m["roleRef"], subjects=m["subjects"], opts=opts
    ),
}


def _child_name(component: str, kind: str, object_name: str) -> str:
    # Kept stable across refactors: a changed name is a replaced object (a namespace deleted with its pods).
    return f"{component}-{kind.lower()}-{object_name}"


class GpuWorkloadNamespace(pulumi.ComponentResource):
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
        component = f"GpuWorkloadNamespace {name}"
        # Before registering anything: a bad spec leaves nothing half-made behind.
        config, warnings = validated_workload(args["workload"], component)
        super().__init__(COMPONENT_TYPE, name, None, opts)
        for warning in warnings:
            pulumi.log.warn(warning, resource=self)
        provider = opts.provider if opts else None
        resource = pulumi.Output.from_input(args.get("resource_name", ""))
        others = pulumi.Output.from_input(args.get("other_gpu_resources", []))

        namespace = namespace_manifest(config)
        # An RDMA namespace's Pod Security comes from its own policy: bound before the namespace relaxes PSA.
        rdma: list[pulumi.Resource] = []
        rdma_objects = rdma_manifests(config)
        if rdma_objects:
            policy, binding = rdma_objects
            cluster = pulumi.ResourceOptions(parent=self, provider=provider)
            rdma_policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{name}-rdma-policy", metadata=policy["metadata"], spec=policy["spec"], opts=cluster
            )
            rdma.append(rdma_policy)
            rdma.append(
                k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                    f"{name}-rdma-binding",
                    metadata=binding["metadata"],
                    spec=binding["spec"],
                    opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[rdma_policy]),
                )
            )
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=namespace["metadata"],
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=rdma or None),
        )
        # The provider does not order objects by the namespace they name; the namespace must exist first.
        inside = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.namespace])
        # Its keys are the GPU resource names, which another stack may only know as outputs: built in an apply.
        hard = pulumi.Output.all(resource, others).apply(lambda v: quota_hard(config, v[0] or None, v[1]))
        quota: Manifest = {"metadata": object_metadata(config, QUOTA_NAME), "spec": {"hard": hard}}
        k8s.core.v1.ResourceQuota(
            _child_name(name, "ResourceQuota", QUOTA_NAME), metadata=quota["metadata"], spec=quota["spec"], opts=inside
        )
        for manifest in config_manifests(config):
            kind = manifest["kind"]
            _REGISTER[kind](_child_name(name, kind, manifest["metadata"]["name"]), manifest, inside)

        self.namespace_name = self.namespace.metadata.apply(lambda meta: str(meta.name))
        self.resource_name = resource
        self.quota_key = resource.apply(lambda r: gpu_quota_key(r) if r else "")
        self.gpu_quota = pulumi.Output.from_input(config.gpu_quota)
        self.pod_placement = pulumi.Output.all(
            resource, pulumi.Output.from_input(args["node_selector"]), pulumi.Output.from_input(args["tolerations"])
        ).apply(lambda v: pod_placement(v[0] or None, v[1], v[2]))
        outputs: dict[str, Any] = {
            "namespaceName": self.namespace_name,
            "resourceName": self.resource_name,
            "quotaKey": self.quota_key,
            "gpuQuota": self.gpu_quota,
            "podPlacement": self.pod_placement,
        }
        # Seam for per-workload extras (the NVMe volume snippet when `nvmeVolume: true`): set an attribute
        # and add its output here; the manifests above do not change.
        self.register_outputs(outputs)
