"""``GpuAdmissionPolicy``: the GPU placement ValidatingAdmissionPolicy and its binding, registered in the cluster.

The manifests come from :func:`components.admission.policy.render_policy` (pure, tested without Pulumi); this
component only registers them, the binding after the policy it names. With ``admission.enabled: false`` it
registers nothing.
"""

from typing import Any, NotRequired

import pulumi

from components.admission.policy import render_policy
from components.args import platform_model
from components.kube.resources import kube_resource
from components.specs import PlatformSpec


class GpuAdmissionPolicyArgs(PlatformSpec):
    """The stack's GPU pools, workloads and admission settings (as a stack file's keys, snake_case here)."""

    network_policy: NotRequired[str]
    """The cluster's network policy engine (azure, calico, cilium): with calico, Calico's namespaces are exempt."""


class GpuAdmissionPolicy(pulumi.ComponentResource):
    """Denies (or warns about, per ``admission.validationActions``) what components/admission/policy.py lists: GPU
    pods without the GPU toleration, outside workload namespaces or on another type's pools, GPU requests that differ
    from their limits, pods that tolerate the GPU taint without a GPU request, client-set ``spec.nodeName``, and the
    NVIDIA device-selection environment variables.

    Outputs: ``policy_name`` and ``validation_actions`` ("" and ``[]`` when admission is disabled).
    """

    policy_name: pulumi.Output[str]
    """The ValidatingAdmissionPolicy's name; empty when admission is disabled."""
    validation_actions: pulumi.Output[list[str]]

    def __init__(self, name: str, args: GpuAdmissionPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        model = platform_model(args, f"GpuAdmissionPolicy {name}", own_keys=frozenset({"network_policy"}))
        network_policy = args.get("network_policy")
        super().__init__("aks-gpu:index:GpuAdmissionPolicy", name, None, opts)
        provider = opts.provider if opts else None
        self.policy: pulumi.CustomResource | None = None
        self.binding: pulumi.CustomResource | None = None
        manifests = render_policy(model, network_policy)
        if manifests:
            policy, binding = manifests
            self.policy = kube_resource(f"{name}-policy", policy, pulumi.ResourceOptions(parent=self, provider=provider))
            self.binding = kube_resource(
                f"{name}-binding",
                binding,
                # A binding whose policy is missing binds nothing; create it only once the policy exists.
                pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.policy]),
            )
        self.policy_name = pulumi.Output.from_input(manifests[0]["metadata"]["name"] if manifests else "")
        self.validation_actions = pulumi.Output.from_input(list(manifests[1]["spec"]["validationActions"]) if manifests else [])
        outputs: dict[str, Any] = {"policyName": self.policy_name, "validationActions": self.validation_actions}
        self.register_outputs(outputs)
