"""Pure builders for the NVMe cache: the StorageClass (v2), the StoragePool (v1), the node labels v1 needs,
and the pod-side snippets (a generic ephemeral volume and a persistent claim) that workloads paste in.

No Pulumi and no platform model here: plain values in, Kubernetes-shaped dicts (camelCase) out, so the
manifests test in milliseconds. (The node label v1 needs on NVMe pools is the model's: ``resolved/node_labels.py``.)

Facts (names, annotations, schema) come from Microsoft Learn and the open-source driver:
- v2, local NVMe: https://learn.microsoft.com/azure/storage/container-storage/use-container-storage-with-local-disk
- v2, driver placement: https://learn.microsoft.com/azure/storage/container-storage/manage-local-container-storage-interface-driver-placement
- v2, install: https://learn.microsoft.com/azure/storage/container-storage/install-container-storage-aks
- v1, local NVMe: https://learn.microsoft.com/azure/storage/container-storage/use-container-storage-with-local-disk-version-1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import yaml

Flavour = Literal["v2", "v1"]

# The extension is named "acstor" so `az aks update --enable-azure-container-storage` and the portal treat it
# as the one they manage (install doc, Terraform tab: "the `name` parameter must be "acstor"").
EXTENSION_NAME = "acstor"
EXTENSION_TYPES: dict[Flavour, str] = {
    "v2": "microsoft.azurecontainerstoragev2",
    "v1": "microsoft.azurecontainerstorage",
}
# v2: the installer deploys the local CSI driver once a StorageClass with this provisioner exists.
V2_PROVISIONER = "localdisk.csi.acstor.io"
# v2: a StorageClass annotation carrying a nodeAffinity (YAML text) that the installer applies to the CSI
# driver DaemonSet; without it the driver runs on every node. preferredDuringScheduling... is not supported.
NODE_AFFINITY_ANNOTATION = "storageoperator.acstor.io/nodeAffinity"
# The guard both flavours put on a PersistentVolumeClaim: "yes, I know this data dies with the node".
ACCEPT_EPHEMERAL_ANNOTATIONS: dict[Flavour, str] = {
    "v2": "localdisk.csi.acstor.io/accept-ephemeral-storage",
    "v1": "acstor.azure.com/accept-ephemeral-storage",
}
# v1 only: StoragePools live in the extension's namespace, and ACStor creates the StorageClass
# `acstor-<storage pool name>` for each pool (provisioner containerstorage.csi.azure.com).
V1_NAMESPACE = "acstor"
V1_STORAGE_CLASS_PREFIX = "acstor-"
V1_STORAGE_POOL_API_VERSION = "containerstorage.azure.com/v1"

VOLUME_NAME = "nvme-cache"
DEFAULT_MOUNT_PATH = "/mnt/nvme"
# A starting size for the pasted snippets, not a limit: a volume lives on one node, so it must stay below a
# single node's striped NVMe capacity (ND H100 v5: about 28 TiB); users edit it to their data set.
DEFAULT_VOLUME_SIZE = "256Gi"


def storage_class_name(flavour: Flavour, configured: str) -> str:
    """The StorageClass pods use: ours (v2) or the one ACStor derives from the StoragePool's name (v1)."""
    if flavour == "v1":
        return f"{V1_STORAGE_CLASS_PREFIX}{configured}"
    return configured


def node_affinity(label_key: str, values: Sequence[str]) -> dict[str, Any]:
    """A required nodeAffinity: nodes whose ``label_key`` is one of ``values`` (the NVMe pools)."""
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": label_key, "operator": "In", "values": sorted(set(values))}]}]
        }
    }


def storage_class(name: str, label_key: str, pool_names: Sequence[str]) -> dict[str, Any]:
    """The v2 StorageClass (storage.k8s.io/v1) for local NVMe, keeping the CSI driver on the NVMe pools.

    The driver DaemonSet tolerates every NoSchedule/NoExecute taint, so without the affinity it would also
    land on the system pool and on GPU pools that have no NVMe to offer.
    """
    affinity_text = yaml.safe_dump(node_affinity(label_key, pool_names), sort_keys=False, default_flow_style=False)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "annotations": {NODE_AFFINITY_ANNOTATION: affinity_text}},
        "provisioner": V2_PROVISIONER,
        # Ephemeral by nature: nothing to keep once the claim goes.
        "reclaimPolicy": "Delete",
        # Bind where the pod lands; a local volume provisioned first would pin the pod to a random node.
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }


def storage_pool(name: str) -> dict[str, Any]:
    """The v1 StoragePool (a CRD of the v1 extension) over the nodes' local NVMe disks."""
    return {
        "apiVersion": V1_STORAGE_POOL_API_VERSION,
        "kind": "StoragePool",
        "metadata": {"name": name, "namespace": V1_NAMESPACE},
        "spec": {"poolType": {"ephemeralDisk": {"diskType": "nvme"}}},
    }


def _claim_spec(storage_class_name: str, size: str) -> dict[str, Any]:
    return {
        "accessModes": ["ReadWriteOnce"],
        "volumeMode": "Filesystem",
        "storageClassName": storage_class_name,
        "resources": {"requests": {"storage": size}},
    }


def ephemeral_volume(storage_class_name: str, size: str = DEFAULT_VOLUME_SIZE, name: str = VOLUME_NAME) -> dict[str, Any]:
    """A pod ``spec.volumes`` entry: a generic ephemeral volume, created and deleted with the pod."""
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": _claim_spec(storage_class_name, size)}}}


def persistent_claim(
    name: str, namespace: str, storage_class_name: str, flavour: Flavour, size: str = DEFAULT_VOLUME_SIZE
) -> dict[str, Any]:
    """A PersistentVolumeClaim on the NVMe cache. The driver refuses one without the accept-ephemeral
    annotation: the volume still dies with its node (deallocate, redeploy, scale-in, node image upgrade)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {ACCEPT_EPHEMERAL_ANNOTATIONS[flavour]: "true"},
        },
        "spec": _claim_spec(storage_class_name, size),
    }


def volume_snippet(
    namespace: str,
    storage_class_name: str,
    flavour: Flavour,
    label_key: str,
    pool_names: Sequence[str],
    size: str = DEFAULT_VOLUME_SIZE,
    mount_path: str = DEFAULT_MOUNT_PATH,
) -> dict[str, Any]:
    """What a workload namespace pastes into a pod to get the NVMe cache.

    - ``volume`` goes under ``spec.volumes``, ``volumeMount`` under a container's ``volumeMounts``;
    - ``affinity`` keeps the pod on the NVMe pools: a pod on another pool would wait for a volume forever;
    - ``persistentVolumeClaim`` is the alternative when a claim must outlive the pod (not the node).
    """
    return {
        "storageClassName": storage_class_name,
        "volume": ephemeral_volume(storage_class_name, size),
        "volumeMount": {"name": VOLUME_NAME, "mountPath": mount_path},
        "affinity": {"nodeAffinity": node_affinity(label_key, pool_names)},
        "persistentVolumeClaim": persistent_claim(VOLUME_NAME, namespace, storage_class_name, flavour, size),
    }


def volume_snippets(
    wants: Mapping[str, Sequence[str]], storage_class_name: str, flavour: Flavour, label_key: str
) -> dict[str, dict[str, Any]]:
    """One snippet per namespace that asked for a volume, from ``namespace -> its NVMe pool names``."""
    return {
        namespace: volume_snippet(namespace, storage_class_name, flavour, label_key, pools)
        for namespace, pools in sorted(wants.items())
        if pools
    }
