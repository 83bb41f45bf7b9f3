"""The aks-gpu Pulumi program: load and validate the stack config, build the platform, export outputs."""

import pulumi

from components.config.pulumi_source import load_from_pulumi
from components.model import resolve
from components.platform import GpuPlatform, GpuPlatformArgs

validated = load_from_pulumi()
model = resolve(validated.config)
platform = GpuPlatform(pulumi.get_stack(), GpuPlatformArgs(model=model))

pulumi.export("clusterName", platform.cluster.cluster_name)
pulumi.export("resourceGroupName", platform.cluster.resource_group_name)
pulumi.export("kubeconfig", platform.kubeconfig)
pulumi.export("pools", platform.pool_outputs)
pulumi.export("devicePlugin", platform.device_plugin.targets)
pulumi.export("namespaces", {name: ns.pod_placement for name, ns in platform.workloads.items()})
pulumi.export("nvmeStorageClass", platform.nvme_cache.storage_class_name)
pulumi.export("nvmeVolumes", platform.nvme_cache.volume_snippets)
