"""Azure resources: the AKS cluster (created or adopted), its maintenance windows and the GPU node pools."""

from components.azure.cluster import GpuCluster, GpuClusterArgs
from components.azure.node_pool import GpuNodePool, GpuNodePoolArgs

__all__ = ["GpuCluster", "GpuClusterArgs", "GpuNodePool", "GpuNodePoolArgs"]
