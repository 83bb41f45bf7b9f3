"""``GpuDevicePlugin``: what makes ``<vendor>.com/gpu`` schedulable on every GPU pool of the stack, with its deploy-time
check. It composes two features, which is why it lives here and not in either: the device plugin's manifests and Helm
releases (``components/aks_gpu/kube/``, pure) and the post-deploy validation that runs as a resource hook on them once they have
rolled out (``components/aks_gpu/validation/hooks.py``).

One DaemonSet per agent serves every pool of its vendor (``nvidia-device-plugin-daemonset``,
``amdgpu-device-plugin-daemonset``, ...). Per pool it exposes where the plugin pods run and what the pool then
advertises (``targets``, the same data ``plugin_targets`` returns without Pulumi).
"""

from dataclasses import dataclass
from typing import Any, NotRequired

import pulumi
import pulumi_kubernetes as k8s

from aks_gpu.args import platform_model
from aks_gpu.component import GpuComponent, kube_resource, plain_output
from aks_gpu.kube.device_plugin import PluginTargetOutput, plugin_manifests, target_output
from aks_gpu.kube.gpu_operator import NVIDIA_RELEASE, ReleaseSpec, operator_releases
from aks_gpu.kube.plugin_pins import resolve_pins
from aks_gpu.monitoring.exporters import dcgm_operator_values
from aks_gpu.naming import GPU_NAMESPACE
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import plugin_targets
from aks_gpu.specs import PlatformSpec
from aks_gpu.validation.hooks import HookFactory, pools_validated_by, pools_validated_by_release, validation_hooks


class GpuDevicePluginArgs(PlatformSpec):
    """The stack's GPU pools and device plugin settings (as a stack file's keys, snake_case here)."""

    kubeconfig: NotRequired[pulumi.Input[str]]
    """The cluster's kubeconfig. With validation.onDeploy fail or warn, a hook checks every GPU node with it once the plugin rolled out."""  # noqa: E501 (one line: the schema copies docstrings as written)


@dataclass(frozen=True)
class DevicePluginInputs:
    model: PlatformModel
    # The deploy-time check reads the cluster with it; None: no check.
    kubeconfig: pulumi.Input[str] | None = None


class GpuDevicePlugin(GpuComponent[DevicePluginInputs]):
    """The NVIDIA device plugin / GPU Operator and the ROCm plugin / AMD GPU Operator for the stack's pools.

    ``opts`` should carry the cluster's Kubernetes provider (``provider=``) and ``depends_on`` the node pools.
    """

    namespace: pulumi.Output[str]
    """Where the plugins run (gpu-resources)."""
    targets: pulumi.Output[dict[str, PluginTargetOutput]]
    """Per GPU pool: the plugin pods to run the SMI command in, the resource and count per node."""

    def __init__(self, name: str, args: GpuDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> DevicePluginInputs:
        model = platform_model(args, f"GpuDevicePlugin {name}", frozenset({"kubeconfig"}))
        return DevicePluginInputs(model, args.get("kubeconfig"))

    def build(self, name: str, inputs: DevicePluginInputs) -> dict[str, Any]:
        model = inputs.model
        targets = plugin_targets(model)
        hooks: HookFactory | None = None
        if inputs.kubeconfig is not None:
            kubeconfig = pulumi.Output.from_input(inputs.kubeconfig)
            hooks = validation_hooks(name, model, targets, kubeconfig, model.config.validation.on_deploy)
        self.namespace = plain_output(GPU_NAMESPACE)
        # What rolls the plugins out: smoke Jobs and the like wait for these. (Not outputs of the package.)
        self.daemonsets: list[pulumi.Resource] = []
        self.releases: list[pulumi.Resource] = []

        # The plugins (and the validation hooks attached to them) come after the GPU nodes they serve: the node pools
        # this component waits for.
        manifests = plugin_manifests(model)
        daemonset_manifests = [m for m in manifests if m["kind"] == "DaemonSet"]
        namespace: pulumi.Resource | None = None
        config_maps: list[pulumi.Resource] = []
        accounts: list[pulumi.Resource] = []
        for manifest in manifests:
            kind = manifest["kind"]
            depends = [namespace] if namespace is not None and kind != "Namespace" else []
            binding = None
            if kind == "DaemonSet":
                depends += config_maps + accounts
                binding = hooks(pools_validated_by(manifest, targets)) if hooks else None
            resource = kube_resource(
                f"{name}-{kind.lower()}-{manifest['metadata']['name']}", manifest, self.child(after=depends, hooks=binding)
            )
            if kind == "Namespace":
                namespace = resource
            elif kind == "ConfigMap":
                config_maps.append(resource)
            elif kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
                accounts.append(resource)
            elif kind == "DaemonSet":
                self.daemonsets.append(resource)

        previous: list[pulumi.Resource] = [namespace] if namespace is not None else []
        releases = operator_releases(model, resolve_pins(model.config.device_plugin), dcgm_operator_values(model))
        for spec in releases:
            vendor = "nvidia" if spec.name == NVIDIA_RELEASE else "amd"
            binding = hooks(pools_validated_by_release(targets, vendor, daemonset_manifests)) if hooks else None
            release = self._release(name, spec, previous, binding)
            self.releases.append(release)
            # The AMD release reuses the NVIDIA release's NFD, so it waits for it.
            previous = [*previous, release]

        self.targets = plain_output({pool: target_output(t) for pool, t in targets.items()})
        return {"namespace": self.namespace, "targets": self.targets}

    def _release(
        self,
        name: str,
        spec: ReleaseSpec,
        depends_on: list[pulumi.Resource],
        hooks: pulumi.ResourceHookBinding | None,
    ) -> k8s.helm.v3.Release:
        return k8s.helm.v3.Release(
            f"{name}-release-{spec.name}",
            name=spec.name,
            chart=spec.chart.chart,
            version=spec.chart.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=spec.chart.repo),
            namespace=spec.namespace,
            # The namespace is ours (Pod Security labels), not Helm's.
            create_namespace=False,
            values=spec.values,
            opts=self.child(after=depends_on, hooks=hooks),
        )
