"""``NvmeCache``: the GPU VMs' local NVMe data disks as a fast, ephemeral cache through Azure Container Storage.

A thin Pulumi layer over ``manifests``: the Azure Container Storage extension (an Azure resource), then the
StorageClass (v2) or StoragePool (v1) that makes the striped NVMe disks of the ``nvmeCache`` pools usable
from pods, plus ready-to-paste volume snippets for the workload namespaces that asked for one.
"""

from dataclasses import dataclass
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s
from pulumi_azure_native import kubernetesconfiguration

from aks_gpu.args import platform_model
from aks_gpu.component import GpuComponent, kube_resource, plain_output
from aks_gpu.config.models import StorageConfig
from aks_gpu.naming import POOL_LABEL
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.specs import PlatformSpec
from aks_gpu.storage.manifests import (
    EXTENSION_NAME,
    EXTENSION_TYPES,
    V1_NAMESPACE,
    storage_class,
    storage_class_name,
    storage_pool,
    volume_snippets,
)


class NvmeCacheArgs(PlatformSpec):
    """The stack's GPU pools, workloads and storage settings, and the cluster the extension goes on."""

    resource_group_name: pulumi.Input[str]
    """The cluster's resource group."""
    cluster_name: pulumi.Input[str]
    """The AKS cluster that gets the Azure Container Storage extension."""


def extension_inputs(
    storage: StorageConfig, resource_group_name: pulumi.Input[str], cluster_name: pulumi.Input[str]
) -> dict[str, Any]:
    """The ``kubernetesconfiguration.Extension`` inputs (snake_case, as ``ExtensionArgs`` takes them). Pure."""
    inputs: dict[str, Any] = {
        "resource_group_name": resource_group_name,
        "cluster_name": cluster_name,
        "cluster_rp": "Microsoft.ContainerService",
        "cluster_resource_name": "managedClusters",
        "extension_name": EXTENSION_NAME,
        "extension_type": EXTENSION_TYPES[storage.flavour],
        "auto_upgrade_minor_version": storage.extension_auto_upgrade,
        # No extension identity: the install guide's extension resource sends none, and `identity: SystemAssigned`
        # on an AKS extension has failed with "Failed to perform resource identity operation. Status: 'BadRequest'"
        # (Azure/azure-powershell#24321, #22455). Azure Container Storage works through the cluster's own identity.
    }
    if storage.flavour == "v2":
        # Install doc, Terraform tab: the extension resource carries this setting.
        # https://learn.microsoft.com/azure/storage/container-storage/install-container-storage-aks
        inputs["configuration_settings"] = {"enable-azure-container-storage": "true"}
    else:
        # v1 install: `--scope cluster --release-namespace acstor` (where its StoragePools live).
        # https://learn.microsoft.com/azure/storage/container-storage/install-container-storage-aks-version-1
        inputs["scope"] = {"cluster": {"release_namespace": V1_NAMESPACE}}
    if storage.extension_version is not None:
        # v1 only: ARM takes a pinned version only with autoUpgradeMinorVersion false, and v2 cannot be pinned at
        # all; the config rules refuse both (data/arm_refusals.yaml).
        inputs["version"] = storage.extension_version
    return inputs


def namespaces_wanting_volumes(model: PlatformModel) -> dict[str, list[str]]:
    """``namespace -> names of its NVMe pools`` for every workload with ``nvmeVolume: true``."""
    return {
        workload.name: [pool.name for pool in workload.pools if pool.config.nvme_cache]
        for workload in model.workloads
        if workload.config.nvme_volume
    }


@dataclass(frozen=True)
class NvmeCacheInputs:
    model: PlatformModel
    resource_group_name: pulumi.Input[str]
    cluster_name: pulumi.Input[str]


class NvmeCache(GpuComponent[NvmeCacheInputs]):
    """Azure Container Storage on the pools with ``nvmeCache: true``; registers nothing when there are none.

    ``opts.provider`` is the Kubernetes provider for the StorageClass/StoragePool; the extension is an Azure
    resource and uses the default azure-native provider. ``opts.depends_on`` holds back the extension.
    """

    storage_class_name: pulumi.Output[str]
    """The StorageClass (or, for v1, the class Azure Container Storage creates); empty without NVMe pools."""

    def __init__(self, name: str, args: NvmeCacheArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> NvmeCacheInputs:
        model = platform_model(args, f"NvmeCache {name}", frozenset({"resource_group_name", "cluster_name"}))
        return NvmeCacheInputs(model, args["resource_group_name"], args["cluster_name"])

    def build(self, name: str, inputs: NvmeCacheInputs) -> dict[str, Any]:
        model = inputs.model
        # Per workload namespace with nvmeVolume: a ready volume snippet (Kubernetes field names, not typed
        # for other languages: use it from Python or as the stack's nvmeVolumes output).
        self.volume_snippets: pulumi.Output[dict[str, dict[str, Any]]]
        storage = model.config.storage
        pool_names = [pool.name for pool in model.nvme_pools]
        if not pool_names:
            self.storage_class_name = plain_output("")
            self.volume_snippets = plain_output({})
            return {"storageClassName": self.storage_class_name, "volumeSnippets": self.volume_snippets}

        # After the GPU pools this component waits for, so v1's io-engine label is on them before the extension
        # installs, as the v1 install guide orders.
        extension = kubernetesconfiguration.Extension(
            f"{name}-acstor", **extension_inputs(storage, inputs.resource_group_name, inputs.cluster_name), opts=self.child()
        )
        # The CRDs and the installer come with the extension: Kubernetes objects wait for it (and, through it, for
        # the pools).
        kube = self.child(after=[extension], waits=False)
        class_name = storage_class_name(storage.flavour, storage.storage_class_name)
        if storage.flavour == "v2":
            created = kube_resource(f"{name}-storage-class", storage_class(class_name, POOL_LABEL, pool_names), kube)
            # Resolves once the class exists, so whoever consumes the name waits for it.
            self.storage_class_name = cast(k8s.storage.v1.StorageClass, created).metadata.apply(lambda _: class_name)
        else:
            created_pool = kube_resource(f"{name}-storage-pool", storage_pool(storage.storage_class_name), kube)
            # ACStor creates `acstor-<pool>` itself once the pool is ready.
            self.storage_class_name = created_pool.id.apply(lambda _: class_name)
        self.volume_snippets = plain_output(
            volume_snippets(namespaces_wanting_volumes(model), class_name, storage.flavour, POOL_LABEL)
        )
        return {"storageClassName": self.storage_class_name, "volumeSnippets": self.volume_snippets}
