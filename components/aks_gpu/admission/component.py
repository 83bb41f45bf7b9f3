"""``GpuAdmissionPolicy``: the GPU placement ValidatingAdmissionPolicy and its binding, registered in the cluster.

The manifests come from :func:`aks_gpu.admission.policy.render_policy` (pure, tested without Pulumi); this
component only registers them (the placement policy, the device-env policy and the DRA claim policy), each binding
after the policy it names. With ``admission.enabled: false`` it
registers nothing.
"""

from dataclasses import dataclass
from typing import Any, NotRequired

import pulumi

from aks_gpu.admission.policy import render_policy
from aks_gpu.args import platform_model
from aks_gpu.component import GpuComponent, kube_resource, plain_output
from aks_gpu.naming import PLATFORM_OBJECT_PREFIX
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.specs import PlatformSpec


class GpuAdmissionPolicyArgs(PlatformSpec):
    """The stack's GPU pools, workloads and admission settings (as a stack file's keys, snake_case here)."""

    network_policy: NotRequired[str]
    """The cluster's network policy engine (azure, calico, cilium): with calico, Calico's namespaces are exempt."""


@dataclass(frozen=True)
class AdmissionInputs:
    model: PlatformModel
    # The cluster's network policy engine; None when unknown (the component alone).
    network_policy: str | None = None


class GpuAdmissionPolicy(GpuComponent[AdmissionInputs]):
    """Denies (or warns about, per ``admission.validationActions``) what components/aks_gpu/admission/policy.py lists: GPU
    pods without the GPU toleration, outside workload namespaces or on another type's pools, GPU requests that differ
    from their limits, pods that tolerate the GPU taint without a GPU request, client-set ``spec.nodeName``, and the
    NVIDIA device-selection environment variables (set directly, through an envFrom prefix, or held in a ConfigMap
    or Secret for envFrom: the second policy, ``aks-gpu-device-env``), and GPUs claimed through Dynamic Resource
    Allocation, which the stack does not serve (the third, ``aks-gpu-dra-claims``); Services with ``externalIPs``
    (``aks-gpu-service-external-ips``) and PodDisruptionBudgets that allow no disruption (``aks-gpu-disruption-budgets``).
    Beside them the MutatingAdmissionPolicy ``aks-gpu-device-void`` sets ``NVIDIA_VISIBLE_DEVICES=void`` in the
    GPU-less containers of a GPU pod.

    Outputs: ``policy_name`` and ``validation_actions`` ("" and ``[]`` when admission is disabled).
    """

    policy_name: pulumi.Output[str]
    """The ValidatingAdmissionPolicy's name; empty when admission is disabled."""
    validation_actions: pulumi.Output[list[str]]

    def __init__(self, name: str, args: GpuAdmissionPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> AdmissionInputs:
        model = platform_model(args, f"GpuAdmissionPolicy {name}", own_keys=frozenset({"network_policy"}))
        return AdmissionInputs(model, args.get("network_policy"))

    def build(self, name: str, inputs: AdmissionInputs) -> dict[str, Any]:
        self.policy: pulumi.CustomResource | None = None
        self.binding: pulumi.CustomResource | None = None
        manifests = render_policy(inputs.model, inputs.network_policy)
        if manifests:
            policy, binding, *others = manifests
            self.policy = kube_resource(f"{name}-policy", policy, self.child())
            # A binding whose policy is missing binds nothing; create it only once the policy exists.
            self.binding = kube_resource(f"{name}-binding", binding, self.child(after=[self.policy]))
            # The other policies, each named after its own (aks-gpu-device-env: <name>-device-env-policy): device
            # variables in ConfigMaps and Secrets, GPU claims through DRA, Services with externalIPs, and
            # PodDisruptionBudgets that allow no disruption; and the mutating device-void policy.
            for other, other_binding in zip(others[::2], others[1::2], strict=True):
                suffix = other["metadata"]["name"].removeprefix(PLATFORM_OBJECT_PREFIX)
                created = kube_resource(f"{name}-{suffix}-policy", other, self.child())
                kube_resource(f"{name}-{suffix}-binding", other_binding, self.child(after=[created]))
        self.policy_name = plain_output(manifests[0]["metadata"]["name"] if manifests else "")
        self.validation_actions = plain_output(list(manifests[1]["spec"]["validationActions"]) if manifests else [])
        return {"policyName": self.policy_name, "validationActions": self.validation_actions}
