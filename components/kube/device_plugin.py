"""``GpuDevicePlugin``: what makes ``<vendor>.com/gpu`` schedulable on every GPU pool of the stack.

The manifests and Helm values are built by pure functions (``plugin_manifests``, ``operator_releases``);
this component only registers them. One DaemonSet per agent serves every pool of its vendor
(``nvidia-device-plugin-daemonset``, ``amdgpu-device-plugin-daemonset``, ...). Per pool it exposes where the
plugin pods run and what the pool then advertises (``targets``, the same data ``plugin_targets`` returns
without Pulumi).
"""

from collections.abc import Callable, Iterable
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from components.args import platform_model
from components.kube.amd_plugin import amd_manifests
from components.kube.gpu_operator import NVIDIA_RELEASE, ReleaseSpec, operator_releases
from components.kube.nvidia_plugin import nvidia_manifests
from components.kube.plugin_pins import resolve_pins
from components.kube.resources import kube_resource
from components.naming import GPU_NAMESPACE
from components.resolved.model import PlatformModel
from components.resolved.targets import PluginTarget, plugin_targets
from components.specs import PlatformSpec
from components.validation.hooks import pools_validated_by, pools_validated_by_release, validation_hooks

HookFactory = Callable[[Iterable[str]], pulumi.ResourceHookBinding | None]


def namespace_manifest() -> dict[str, Any]:
    """The plugins' namespace. Pod Security ``privileged``: a device plugin mounts hostPath (the kubelet's
    device-plugins directory, /sys), which ``baseline`` refuses; nothing but GPU node agents runs here."""
    labels = {"pod-security.kubernetes.io/enforce": "privileged"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GPU_NAMESPACE, "labels": labels}}


def plugin_manifests(model: PlatformModel) -> list[dict[str, Any]]:
    """Every Kubernetes object the stack's device plugin setup needs, namespace first. Empty without GPU pools."""
    if not model.pools:
        return []
    pins = resolve_pins(model.config.device_plugin)
    return [
        namespace_manifest(),
        *nvidia_manifests(model, pins.nvidia_device_plugin_image),
        *amd_manifests(model, pins.amd_device_plugin_image, pins.amd_node_labeller_image),
    ]


class GpuDevicePluginArgs(PlatformSpec):
    """The stack's GPU pools and device plugin settings (as a stack file's keys, snake_case here)."""

    kubeconfig: NotRequired[pulumi.Input[str]]
    """The cluster's kubeconfig. With validation.on_deploy fail or warn, a resource hook checks every GPU node
    with it once the plugin has rolled out (nvidia-smi / amd-smi in the plugin pods, schedulable GPUs)."""


class PluginTargetOutput(TypedDict):
    """Where a pool's plugin pods run and what the pool then advertises."""

    namespace: str
    pod_labels: dict[str, str]
    container: str
    smi_command: list[str]
    resource_name: str
    count_per_node: int
    node_selector: dict[str, str]
    vendor: str
    mode: str
    mig_strategy: NotRequired[str]


def target_output(target: PluginTarget) -> PluginTargetOutput:
    output: PluginTargetOutput = {
        "namespace": target.namespace,
        "pod_labels": dict(target.pod_labels),
        "container": target.container,
        "smi_command": list(target.smi_command),
        "resource_name": target.resource_name,
        "count_per_node": target.count_per_node or 0,
        "node_selector": dict(target.node_selector),
        "vendor": target.vendor,
        "mode": target.mode,
    }
    if target.mig_strategy is not None:
        output["mig_strategy"] = target.mig_strategy
    return output


def _resources(depends_on: object) -> list[pulumi.Resource]:
    """The resources of a ``depends_on`` option (a resource or a list of them)."""
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    if isinstance(depends_on, list | tuple):
        return [r for r in depends_on if isinstance(r, pulumi.Resource)]
    return []


class GpuDevicePlugin(pulumi.ComponentResource):
    """The NVIDIA device plugin / GPU Operator and the ROCm plugin / AMD GPU Operator for the stack's pools.

    ``opts`` should carry the cluster's Kubernetes provider (``provider=``) and ``depends_on`` the node pools.
    """

    namespace: pulumi.Output[str]
    """Where the plugins run (gpu-resources)."""
    targets: pulumi.Output[dict[str, PluginTargetOutput]]
    """Per GPU pool: the plugin pods to run the SMI command in, the resource and count per node."""

    def __init__(self, name: str, args: GpuDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        model = platform_model(args, f"GpuDevicePlugin {name}", frozenset({"kubeconfig"}))
        super().__init__("aks-gpu:index:GpuDevicePlugin", name, None, opts)
        targets = plugin_targets(model)
        hooks: HookFactory | None = None
        if "kubeconfig" in args:
            kubeconfig = pulumi.Output.from_input(args["kubeconfig"])
            hooks = validation_hooks(name, model, targets, kubeconfig, model.config.validation.on_deploy)
        provider = opts.provider if opts is not None else None
        # A component's depends_on does not hold back its children: pass the node pools on explicitly, so the
        # plugins (and the validation hooks attached to them) come after the GPU nodes they serve.
        after = _resources(opts.depends_on if opts is not None else None)
        self.namespace = pulumi.Output.from_input(GPU_NAMESPACE)
        # What rolls the plugins out: smoke Jobs and the like wait for these. (Not outputs of the package.)
        self.daemonsets: list[pulumi.Resource] = []
        self.releases: list[pulumi.Resource] = []

        manifests = plugin_manifests(model)
        daemonset_manifests = [m for m in manifests if m["kind"] == "DaemonSet"]
        namespace: pulumi.Resource | None = None
        config_maps: list[pulumi.Resource] = []
        accounts: list[pulumi.Resource] = []
        for manifest in manifests:
            kind = manifest["kind"]
            depends = [*after, *([namespace] if namespace is not None and kind != "Namespace" else [])]
            binding = None
            if kind == "DaemonSet":
                depends += config_maps + accounts
                binding = hooks(pools_validated_by(manifest, targets)) if hooks else None
            resource = kube_resource(
                f"{name}-{kind.lower()}-{manifest['metadata']['name']}",
                manifest,
                pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends, hooks=binding),
            )
            if kind == "Namespace":
                namespace = resource
            elif kind == "ConfigMap":
                config_maps.append(resource)
            elif kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
                accounts.append(resource)
            elif kind == "DaemonSet":
                self.daemonsets.append(resource)

        previous: list[pulumi.Resource] = [*after, *([namespace] if namespace is not None else [])]
        for spec in operator_releases(model, resolve_pins(model.config.device_plugin)):
            vendor = "nvidia" if spec.name == NVIDIA_RELEASE else "amd"
            binding = hooks(pools_validated_by_release(targets, vendor, daemonset_manifests)) if hooks else None
            release = self._release(name, spec, provider, previous, binding)
            self.releases.append(release)
            # The AMD release reuses the NVIDIA release's NFD, so it waits for it.
            previous = [*previous, release]

        self.targets = pulumi.Output.from_input({pool: target_output(t) for pool, t in targets.items()})
        self.register_outputs({"namespace": self.namespace, "targets": self.targets})

    def _release(
        self,
        name: str,
        spec: ReleaseSpec,
        provider: pulumi.ProviderResource | None,
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
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on, hooks=hooks),
        )
