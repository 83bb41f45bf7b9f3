"""Every name the platform gives or reserves, said once: the package and its type tokens, the namespaces it uses,
the GPU vendors, the labels it puts on Kubernetes objects and GPU nodes, the taints, and the keys nobody else may
set. Pure, no imports from the rest of the package: the config rules, the resolved model, the builders, the
components and the command line all read their names here.

``PLATFORM_NODE_LABELS`` lists every node label the platform sets: the config rules refuse a pool label on any of
these keys (a pool's ``labels`` would otherwise silently replace the platform's value, e.g.
``nvidia.com/gpu.deploy.driver: "true"`` over the operator's ``"false"``). ``tests/test_naming.py`` resolves pools in
every mode and fails if a node label appears that is not listed here.
"""

from __future__ import annotations

from typing import Literal

# ---------------------------------------------------------------- the package

# One name for all of it: the Pulumi project (Pulumi.yaml), its config namespace (`aks-gpu:gpuPools`), the component
# package (`aks-gpu:index:GpuPlatform`), the Python distribution (pyproject.toml) and the value of the part-of label.
PACKAGE_NAME = "aks-gpu"
CONFIG_NAMESPACE = PACKAGE_NAME
# The Azure location is the azure-native provider's key, read beside ours.
LOCATION_KEY = "azure-native:location"
# The program's root component. Fixed, not the stack's name: `pulumi stack rename` then changes no URN (the program
# aliases the name it had before, the stack's, so stacks deployed before keep every resource).
PLATFORM_COMPONENT_NAME = "platform"


def type_token(component: str) -> str:
    """``aks-gpu:index:<Component>``: a public component's type token (its URNs and every SDK's name for it)."""
    return f"{PACKAGE_NAME}:index:{component}"


# ---------------------------------------------------------------- vendors

Vendor = Literal["nvidia", "amd"]
VENDORS: tuple[Vendor, ...] = ("nvidia", "amd")


def vendor_resource(vendor: Vendor) -> str:
    """The extended resource a vendor's device plugin advertises for whole GPUs (and its taint key)."""
    return f"{vendor}.com/gpu"


# The NVIDIA device plugin's mixed MIG strategy advertises one resource per profile: nvidia.com/mig-1g.10gb ...
# https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def gpu_taint_key(vendor: Vendor, resource: str) -> str:
    """The key of the GPU taint on a pool whose nodes advertise ``resource``: the resource itself for a MIG slice
    (``nvidia.com/mig-3g.40gb``, the mixed strategy), else the vendor's whole-GPU resource. ExtendedResourceToleration
    tolerates exactly the resources a Pod requests (k8s.io/kubernetes plugin/pkg/admission/extendedresourcetoleration/
    admission.go), so a Pod that asks for a slice by name tolerates its pool's taint without writing a toleration."""
    return resource if is_mig_resource(resource) else vendor_resource(vendor)


def is_mig_resource(resource: str) -> bool:
    return resource.startswith(MIG_RESOURCE_PREFIX) and len(resource) > len(MIG_RESOURCE_PREFIX)


# ---------------------------------------------------------------- namespaces

# The ResourceQuota each workload namespace gets (kube.workload_manifests builds it; admission names it in refusals).
QUOTA_NAME = "gpu-quota"

# Everything the device plugins, exporters, probes and smoke Jobs run in (the admission policy exempts it).
GPU_NAMESPACE = "gpu-resources"
# NVIDIA NVSentinel, the quarantine engine (components/aks_gpu/monitoring/remediation.py): the namespace its docs install it in
# (helm install nvsentinel ... --namespace nvsentinel, NVIDIA/NVSentinel docs/configuration/node-drainer.md).
REMEDIATION_NAMESPACE = "nvsentinel"
# Kueue (aks-gpu:queueing, components/aks_gpu/kube/kueue.py): the namespace its chart's README installs it in
# (charts/kueue/README.md in sigs.k8s.io/kueue@v0.17.0, `helm install kueue ... --namespace kueue-system`).
KUEUE_NAMESPACE = "kueue-system"
# The LocalQueue a Job with no kueue.x-k8s.io/queue-name label is put in: Kueue's LocalQueueDefaulting names the one
# called "default" (pkg/controller/constants/constants.go DefaultLocalQueueName, sigs.k8s.io/kueue@v0.17.0).
KUEUE_DEFAULT_LOCAL_QUEUE = "default"
# The label a Job names its LocalQueue with (pkg/controller/constants/constants.go QueueLabel).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def cluster_queue_name(namespace: str) -> str:
    """A workload namespace's ClusterQueue (cluster-scoped): the namespace's own name."""
    return namespace


def cohort_name(workload_type: str) -> str:
    """The cohort of a workload type's ClusterQueues: the type itself, so types never share quota."""
    return workload_type


def flavor_name(pool: str) -> str:
    """A GPU pool's ResourceFlavor: the pool's own name."""
    return pool


# AKS's own agents, CoreDNS among them.
KUBE_SYSTEM_NAMESPACE = "kube-system"

# ---------------------------------------------------------------- labels on every Kubernetes object

# https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/
NAME_LABEL = "app.kubernetes.io/name"
PART_OF_LABEL = "app.kubernetes.io/part-of"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
# Every Kubernetes object the toolkit creates (and every pod it runs) carries these, stamped by the one function that
# turns a manifest into a resource (kube_resource in components/aks_gpu/component.py), so
# `kubectl get -l app.kubernetes.io/part-of=aks-gpu` lists them all.
COMMON_LABELS: dict[str, str] = {PART_OF_LABEL: PACKAGE_NAME, MANAGED_BY_LABEL: "pulumi"}
# Set by the API server on every namespace (GA since 1.22), so a policy can select a namespace by name and nobody can
# change it. https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# The node's VM size, set by the kubelet from the cloud provider (AKS: "Standard_ND96isr_H100_v5").
# https://kubernetes.io/docs/reference/labels-annotations-taints/#nodekubernetesioinstance-type
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# Marks a namespace whose Pod Security baseline (plus IPC_LOCK) comes from the platform's own admission policy, not
# from Pod Security Admission (components/aks_gpu/admission/pod_security.py).
RDMA_LABEL = f"{PACKAGE_NAME}/rdma"


PLATFORM_OBJECT_PREFIX = f"{PACKAGE_NAME}-"


def platform_object_name(what: str) -> str:
    """``aks-gpu-<what>``: the name of a cluster-wide object the platform owns (a ClusterRole, a policy, a rule
    group), so ``kubectl get clusterroles | grep aks-gpu-`` finds them all."""
    return f"{PLATFORM_OBJECT_PREFIX}{what}"


# The ClusterRole a workload's `roleBindings` entry with role `edit` binds its Entra group to inside the namespace: what
# Kubernetes' `edit` grants, less NetworkPolicy writes (components/aks_gpu/kube/team_role.py).
TEAM_ROLE_NAME = platform_object_name("team-edit")

# The Azure Monitor action group a stack creates from monitoring.azureMonitor.receivers (components/aks_gpu/monitoring/
# azure.py). Its short name is what SMS and e-mail notifications show; ARM takes at most 12 characters there.
ACTION_GROUP_SHORT_NAME = PACKAGE_NAME


def action_group_name(cluster_name: str) -> str:
    """``<cluster>-gpu-alerts``: the action group beside the cluster's rule groups, in its resource group."""
    return f"{cluster_name}-gpu-alerts"


# ---------------------------------------------------------------- priority classes

# The PriorityClasses every Kubernetes API server creates at start, at the top of the scale: their pods preempt every
# other pod of a node. A workload namespace's ResourceQuota of this name allows none of them (pods: 0 scoped to these
# classes), the per-namespace way of "Limit Priority Class consumption by default", since AKS takes no
# AdmissionConfiguration: https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default
# The names: https://kubernetes.io/docs/tasks/administer-cluster/guaranteed-scheduling-critical-addon-pods/ and
# kubernetes/kubernetes v1.36.3 pkg/apis/scheduling/types.go (SystemClusterCritical, SystemNodeCritical).
SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")
PRIORITY_QUOTA_NAME = "system-priority"

# ---------------------------------------------------------------- node labels the platform sets

# Placement: every GPU pool's nodes carry these (components/aks_gpu/resolved/model.py).
ACCELERATOR_LABEL = "accelerator"
POOL_LABEL = f"{PACKAGE_NAME}/pool"
WORKLOAD_LABEL = f"{PACKAGE_NAME}/workload"
# Which workload types a pool's nodes serve: serves.aks-gpu/<type>=true on every GPU pool of that type and on every CPU
# pool (cpuPools). A workload namespace's PodNodeSelector annotation asks for its type's label, so its Pods land on its
# own GPU pools or a CPU pool and nowhere else (aks_gpu.admission.chain). The type is the name part of the key: a DNS
# label, always a valid label name (a prefix of aks-gpu/ would leave it 63 - 7 characters).
SERVES_LABEL_DOMAIN = f"serves.{PACKAGE_NAME}"


def serves_label(workload_type: str) -> str:
    return f"{SERVES_LABEL_DOMAIN}/{workload_type}"


def is_platform_node_label(key: str) -> bool:
    """A node label key the platform sets: one of ``PLATFORM_NODE_LABELS``, or a ``serves.aks-gpu/<type>`` key (a
    user's ``serves.aks-gpu/training`` on an inference pool would open it to the training namespace's Pods)."""
    return key in PLATFORM_NODE_LABELS or key.startswith(f"{SERVES_LABEL_DOMAIN}/")


PLATFORM_LABEL_PREFIX = f"{PACKAGE_NAME}/"
# The NVIDIA device plugin's config-manager picks the pool's config file by this label (resolved/node_labels.py).
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
# GPU Operator operand switches on pools where AKS installs the driver (resolved/node_labels.py).
DEPLOY_DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"
DEPLOY_TOOLKIT_LABEL = "nvidia.com/gpu.deploy.container-toolkit"
# The GPU Operator's MIG manager applies the mig-parted config named by this label (components/aks_gpu/resolved/model.py).
# https://github.com/NVIDIA/gpu-operator/blob/main/controllers/state_manager.go (migConfigLabelKey)
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
# Azure Container Storage v1 runs its I/O engine only on nodes with this label (resolved/node_labels.py).
V1_IO_ENGINE_LABEL = "acstor.azure.com/io-engine"
# GPU Feature Discovery's label, which NVSentinel's labeler reads as "driver installed" (assumeDriverInstalled) on a
# pool whose driver AKS installs: no driver pod shows it there (resolved/node_labels.py).
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"

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
        GPU_PRESENT_LABEL,
    }
)

# ---------------------------------------------------------------- node auto-provisioning (Karpenter)

# Karpenter labels every node it makes with its NodePool's name (sigs.k8s.io/karpenter pkg/apis/v1/labels.go,
# NodePoolLabelKey), and counts NodeClaims under it: the audit finds a NAP pool's nodes by this label.
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"


# The Azure tag a NAP pool's VMs carry with the pool's name (its AKSNodeClass's tags), for cost reports by pool.
POOL_TAG = f"{PACKAGE_NAME}-pool"


def nap_object_name(pool: str) -> str:
    """``aks-gpu-<pool>``: the NodePool and the AKSNodeClass of a NAP GPU pool (cluster-scoped objects, beside the
    NodePools AKS creates itself, ``default`` and ``system-surge``)."""
    return platform_object_name(pool)


# ---------------------------------------------------------------- taints

GPU_TAINT_VALUE = "present"
# AKS puts this taint on every spot node itself (https://learn.microsoft.com/azure/aks/spot-node-pool#limitations).
SPOT_TAINT_KEY = "kubernetes.azure.com/scalesetpriority"
SPOT_TAINT_VALUE = "spot"

# What the quarantine engine puts on a GPU node with a fatal fault (remediation.mode on; it also cordons the node), so
# nothing new that asks for a GPU lands there. The platform's own agents (device plugin, exporters, operator operands,
# the engine's monitors) tolerate it, so diagnostics keep running on a quarantined node; workload pods never do.
QUARANTINE_TAINT_KEY = f"{PACKAGE_NAME}/gpu-quarantine"
QUARANTINE_TAINT_VALUE = "fault"
QUARANTINE_TAINT_EFFECT = "NoSchedule"
# The seam between repair and the diagnostics (docs/remediation.md, "Repair, then prove, then return"): the node
# diagnostic Job writes the node's status.nodeInfo.bootID here when every diagnostic passed on it (and removes it when
# one fails). A quarantined node is held quarantined until this matches its current boot: a repair reboots the node, so
# only a pass after the repair lets it return.
DIAGNOSTICS_PASSED_ANNOTATION = f"{PACKAGE_NAME}/diagnostics-passed-boot-id"
# The NVSentinel kubernetes-object-monitor policy that holds a quarantined node until that annotation matches its boot.
DIAGNOSTICS_GATE_POLICY = f"{PACKAGE_NAME}-diagnostics-pending"
# The value the diagnostic schedule puts under that key when a node fails its vendor diagnostic (the engine's is
# "fault"): a passing diagnostic takes away only its own, so it never returns a node the engine quarantined.
DIAGNOSTIC_TAINT_VALUE = "diagnostic"
# The diagnostic schedule in the cluster (validation.diagnosticsSchedule, components/aks_gpu/validation/schedule.py): its
# CronJob, ServiceAccount, ConfigMap, Role and ClusterRole (and their bindings) share this name; the admission policy
# that fences what its ServiceAccount may do to nodes and pods is the second.
DIAGNOSTICS_SCHEDULE_NAME = platform_object_name("diagnostics")
DIAGNOSTICS_FENCE_POLICY = platform_object_name("diagnostics-fence")
# On the diagnostic pods (validation/diagnostics.py): the dcgmi diag level it runs (1 after deploy, 2 or 3 on the schedule).
DIAGNOSTIC_LEVEL_LABEL = f"{PACKAGE_NAME}/diag-level"
# The taint a cordon is (kubectl cordon sets spec.unschedulable; the node lifecycle controller adds it).
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


PLATFORM_TAINT_KEYS: frozenset[str] = frozenset({*(vendor_resource(v) for v in VENDORS), SPOT_TAINT_KEY, QUARANTINE_TAINT_KEY})

# ---------------------------------------------------------------- what AKS itself puts on its nodes

# The labels AKS's node bootstrap sets on every node ("Reserved system labels",
# https://learn.microsoft.com/azure/aks/use-labels#reserved-system-labels): `aksgpu local` puts them on its simulated
# nodes, so the platform's selectors and the audit read them as they read an AKS node's.
AKS_AGENTPOOL_LABEL = "kubernetes.azure.com/agentpool"
AKS_LEGACY_AGENTPOOL_LABEL = "agentpool"
AKS_MODE_LABEL = "kubernetes.azure.com/mode"
AKS_NODE_IMAGE_LABEL = "kubernetes.azure.com/node-image-version"
AKS_OS_SKU_LABEL = "kubernetes.azure.com/os-sku"
AKS_CLUSTER_LABEL = "kubernetes.azure.com/cluster"
AKS_ACCELERATOR_LABEL = "kubernetes.azure.com/accelerator"
# Well-known Kubernetes node labels (https://kubernetes.io/docs/reference/labels-annotations-taints/); AKS's zone value
# is "<region>-<zone>", "0" in a region or pool without zones (https://learn.microsoft.com/azure/aks/availability-zones).
REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
OS_LABEL = "kubernetes.io/os"
ARCH_LABEL = "kubernetes.io/arch"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# A system pool's nodes keep everything but critical add-ons off with this taint ("CriticalAddonsOnly=true:NoSchedule",
# https://learn.microsoft.com/azure/aks/use-system-pools#before-you-begin).
CRITICAL_ADDONS_TAINT_KEY = "CriticalAddonsOnly"
CRITICAL_ADDONS_TAINT_VALUE = "true"
# kwok's controller takes the nodes that carry this annotation (kwok v0.8.0,
# pkg/kwokctl/runtime/kind/cluster_kwok_controller.go: ManageNodesWithAnnotationSelector "kwok.x-k8s.io/node=fake"; the
# binary runtime manages every node, so the annotation only says which nodes are simulated).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"
# Marks the open-schema CRDs and the namespace `aksgpu local` defines in place of an operator's (local/crds.py).
LOCAL_STAND_IN_ANNOTATION = f"{PACKAGE_NAME}/stand-in"
# The kwokctl cluster of a stack's local control plane (`aksgpu local`).
LOCAL_CLUSTER_PREFIX = f"{PACKAGE_NAME}-"


def local_cluster_name(stack: str) -> str:
    return f"{LOCAL_CLUSTER_PREFIX}{stack}"


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
