"""The resolved model: a validated stack config resolved against the GPU catalog, once, without Pulumi.

Every consumer reads it instead of re-deriving it: the Azure and Kubernetes builders and components, the admission
policy, the alert rules and the post-deploy checks. ``model`` answers "what does each pool expose?" (MIG math,
time-slicing, taints and tolerations, node labels); ``targets`` says where each pool's SMI command runs;
``stack`` loads a stack file into a validated, resolved ``ValidatedStack``, with the rules that need the model.
"""

from aks_gpu.resolved.model import (
    MIG_CONFIG_PREFIX,
    MigPartitioner,
    MigStrategy,
    PlatformModel,
    ResolvedPool,
    ResolvedWorkload,
    SchedulableResource,
    Taint,
    Toleration,
    distinct_tolerations,
    effective_time_slicing,
    gpu_facts,
    node_affinity_for,
    resolve,
    resolve_pool,
    schedulable_resource,
    tolerations_for,
    workload_pools,
)
from aks_gpu.resolved.targets import PluginTarget, plugin_targets, smi_command

__all__ = [
    "MIG_CONFIG_PREFIX",
    "MigPartitioner",
    "MigStrategy",
    "PlatformModel",
    "PluginTarget",
    "ResolvedPool",
    "ResolvedWorkload",
    "SchedulableResource",
    "Taint",
    "Toleration",
    "distinct_tolerations",
    "effective_time_slicing",
    "gpu_facts",
    "node_affinity_for",
    "plugin_targets",
    "resolve",
    "resolve_pool",
    "schedulable_resource",
    "smi_command",
    "tolerations_for",
    "workload_pools",
]
