"""The node label and taint keys the platform sets on GPU nodes, and the keys nobody else may set. Pure, no imports
from the rest of the package, so the model, the builders and the config rules all read the same names.

Everything that puts a label on a pool's nodes (``components.model``, ``kube/plugin_node_labels.py``,
``storage/manifests.py``) takes its key from here, and ``PLATFORM_NODE_LABELS`` lists every one of them: the
config rules refuse a pool label on any of these keys (a pool's ``labels`` would otherwise silently replace the
platform's value, e.g. ``nvidia.com/gpu.deploy.driver: "true"`` over the operator's ``"false"``).
``tests/test_naming.py`` resolves pools in every mode and fails if a node label appears that is not listed here.
"""

from __future__ import annotations

from typing import Literal

Vendor = Literal["nvidia", "amd"]

# ---------------------------------------------------------------- node labels the platform sets

# Placement: every GPU pool's nodes carry these (components/model.py).
ACCELERATOR_LABEL = "accelerator"
POOL_LABEL = "aks-gpu/pool"
WORKLOAD_LABEL = "aks-gpu/workload"
PLATFORM_LABEL_PREFIX = "aks-gpu/"
# The NVIDIA device plugin's config-manager picks the pool's config file by this label (kube/plugin_node_labels.py).
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
# GPU Operator operand switches on pools where AKS installs the driver (kube/plugin_node_labels.py).
DEPLOY_DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"
DEPLOY_TOOLKIT_LABEL = "nvidia.com/gpu.deploy.container-toolkit"
# The GPU Operator's MIG manager applies the mig-parted config named by this label (components/model.py).
# https://github.com/NVIDIA/gpu-operator/blob/main/controllers/state_manager.go (migConfigLabelKey)
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
# Azure Container Storage v1 runs its I/O engine only on nodes with this label (storage/manifests.py).
V1_IO_ENGINE_LABEL = "acstor.azure.com/io-engine"

PLATFORM_NODE_LABELS: frozenset[str] = frozenset(
    {
        ACCELERATOR_LABEL,
        POOL_LABEL,
        WORKLOAD_LABEL,
        DEVICE_PLUGIN_CONFIG_LABEL,
        DEPLOY_DRIVER_LABEL,
        DEPLOY_TOOLKIT_LABEL,
        MIG_CONFIG_LABEL,
        V1_IO_ENGINE_LABEL,
    }
)

# ---------------------------------------------------------------- taints

GPU_TAINT_VALUE = "present"
# AKS puts this taint on every spot node itself (https://learn.microsoft.com/azure/aks/spot-node-pool#limitations).
SPOT_TAINT_KEY = "kubernetes.azure.com/scalesetpriority"
VENDORS: tuple[Vendor, ...] = ("nvidia", "amd")


def vendor_resource(vendor: Vendor) -> str:
    """The extended resource a vendor's device plugin advertises for whole GPUs (and its taint key)."""
    return f"{vendor}.com/gpu"


PLATFORM_TAINT_KEYS: frozenset[str] = frozenset({*(vendor_resource(v) for v in VENDORS), SPOT_TAINT_KEY})

# ---------------------------------------------------------------- keys reserved by AKS and Kubernetes

# AKS: "The following prefixes are AKS reserved prefixes and can't be used for any node: kubernetes.azure.com/,
# kubernetes.io/" (https://learn.microsoft.com/azure/aks/use-labels#reserved-prefixes). Kubernetes reserves the
# kubernetes.io and k8s.io namespaces for its core components
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set), and the
# kubelet refuses self-set labels there outside kubelet.kubernetes.io/ and node.kubernetes.io/
# (https://github.com/kubernetes/kubernetes/blob/master/staging/src/k8s.io/api/core/v1/well_known_labels.go).
# The AKS page names only the two prefixes; the sub-domains (node.kubernetes.io/, topology.kubernetes.io/...)
# and k8s.io are refused here on Kubernetes' word, since AKS sets the well-known labels there itself.
RESERVED_DOMAINS = ("kubernetes.azure.com", "kubernetes.io", "k8s.io")


def reserved_domain(key: str) -> str | None:
    """The reserved domain a label or taint key's prefix falls in (``kubernetes.io`` for
    ``topology.kubernetes.io/zone``), or None for a key anyone may use."""
    prefix, slash, _ = key.partition("/")
    if not slash:
        return None
    for domain in RESERVED_DOMAINS:
        if prefix == domain or prefix.endswith("." + domain):
            return domain
    return None
