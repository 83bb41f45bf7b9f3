"""The GPU placement policy: a ValidatingAdmissionPolicy and its binding, built from the platform model. Pure.

What it enforces on Pods (and their ``ephemeralcontainers`` subresource) and on the Pod templates of Deployments,
ReplicaSets, StatefulSets, DaemonSets, ReplicationControllers, Jobs and CronJobs:

1. A GPU request is a quantity above zero of a GPU resource: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared``,
   ``nvidia.com/mig-*``, ``amd.com/gpu``, AMD partitions (``amd.com/cpx_nps4``...) and every resource a pool of the
   stack exposes; not the rest of the vendors' domains (NICs live there too). ``nvidia.com/gpu: 0`` (or ``"0"``,
   ``0m``) is no GPU request.
2. A container with a GPU request asks for exactly its limit (a limit alone is fine: Kubernetes copies it into the
   request), and the pod tolerates the node taint of the pools that offer it: ``<vendor>.com/gpu=present:NoSchedule``,
   or under the mixed MIG strategy the slice's own (``nvidia.com/mig-1g.10gb=present:NoSchedule``).
3. A pod without a GPU request does not tolerate a GPU taint, explicitly or by tolerating everything (it would
   squat on a GPU node, and under the device plugin's default ``envvar`` strategy a container that sets
   ``NVIDIA_VISIBLE_DEVICES=all``, or whose image does, sees every GPU of the node while the scheduler counts none:
   https://github.com/NVIDIA/k8s-device-plugin/issues/61).
4. ``spec.nodeName`` set by the client is refused: it skips the scheduler and with it every NoSchedule taint (the
   kubelet re-checks only NoExecute). Mirror pods, which the kubelet creates for its static pods with the node
   name set, pass: NodeRestriction lets a node create nothing else
   (https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#noderestriction).
5. No container (ephemeral containers included) sets the GPU device-selection variables of the NVIDIA container
   runtime (``NVIDIA_VISIBLE_DEVICES``, ``NVIDIA_MIG_CONFIG_DEVICES``, ``NVIDIA_MIG_MONITOR_DEVICES``) to anything
   but empty, ``void`` or ``none``: on AKS-managed GPU nodes the toolkit honours them from unprivileged containers
   (see README, "Defence in depth"), and a container value overrides what the device plugin sets for its GPUs.
   Nor does a container take variables with an ``envFrom`` prefix that begins such a name (``NVIDIA_``, ``N``...):
   with the key ``VISIBLE_DEVICES`` in the ConfigMap or Secret it would set ``NVIDIA_VISIBLE_DEVICES``. An
   ``envFrom`` without a prefix takes the keys as they are: the second policy, ``aks-gpu-device-env``, keeps
   those variables out of every ConfigMap and Secret outside the exempt namespaces (``envFrom`` reads only its own
   namespace's), so no prefix and no key can spell them.
6. GPU requests only in workload namespaces (label ``aks-gpu/workload``), plus ``admission.gpuNamespaces``;
   ``admission.restrictToWorkloadNamespaces: false`` admits them anywhere.
7. In a workload namespace, a GPU pod that selects pools (node selector or required node affinity on any label
   that tells the stack's pools apart) can land only on pools serving the namespace's workload type. The pools
   it can reach are computed from the labels the model knows each pool's nodes carry, with every operator
   (In, NotIn, Exists, DoesNotExist) and every term (terms are ORed). A pod that selects none stays admitted:
   the namespace's GPU quota still holds it. A template is judged with the node selector PodNodeSelector will give
   its Pods (the namespace's) beside its own.
8. On pools that share GPUs by time-slicing, a container asks for at most one shared GPU (more buys no more
   GPU). The device plugin's ``failRequestsGreaterThanOne`` backs this up on the node.
9. A request above zero of a GPU-like resource (a GPU resource, or a name in a GPU vendor's domain with ``gpu`` in
   it: ``nvidia.com/gpus``) that no pool of the stack offers is refused, naming what the pools do offer: the
   scheduler would keep such a pod Pending forever.
10. No pod tolerates the quarantine taint (``aks-gpu/gpu-quarantine``; by key, or an empty key with operator Exists):
    it would land on a GPU node quarantined for a fatal fault, cordon or not.

The policy judges what the API server hands it after AKS's mutating admission plugins (AKS enables
ExtendedResourceToleration and PodNodeSelector, and the list cannot be changed: ``components/aks_gpu/data/
aks_admission.yaml``). A Pod arrives with ExtendedResourceToleration's ``{key: <resource>, operator: Exists,
effect: NoSchedule}`` for every extended resource it requests; a template (Deployment, Job...) does not, since
the plugin only mutates Pods, so for a template the policy counts the toleration its Pods will get.

Beside it: ``aks-gpu-service-external-ips`` (Services with ``externalIPs``), ``aks-gpu-disruption-budgets``
(PodDisruptionBudgets that allow no disruption) and the MutatingAdmissionPolicy ``aks-gpu-device-void``
(``NVIDIA_VISIBLE_DEVICES=void`` for the GPU-less containers of a GPU pod).

The namespaces of :mod:`aks_gpu.resolved.exemptions` (what AKS and this stack run) and the user's
``admission.exemptNamespaces`` are outside the policy altogether: its ``namespaceSelector`` leaves them out on
``kubernetes.io/metadata.name``, which the API server sets on every namespace and nobody can change.

Every expression stays within what the API server offers (standard CEL and macros, the extended string
library's ``join``, the Kubernetes quantity library), so the same manifests work on a real cluster and in
``aksgpu admission check``. Names and lists from the model are written into the expressions as literals.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from aks_gpu.admission.chain import (
    NODE_SELECTOR_ANNOTATION,
    namespace_metadata_with_tolerations,
    placement_selector,
    selector_of,
)
from aks_gpu.admission.dra import CLAIM_SPEC_PATHS, GROUP, TEMPLATE, gpu_class_resources, gpu_devices
from aks_gpu.aks_facts import MUTATING_ADMISSION_POLICY_SINCE, minor_key, minor_of
from aks_gpu.config.models import PlatformConfig, StackConfig
from aks_gpu.naming import (
    GPU_NAMESPACE,
    GPU_TAINT_VALUE,
    MIG_RESOURCE_PREFIX,
    NAMESPACE_NAME_LABEL,
    POOL_LABEL,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    QUARANTINE_TAINT_VALUE,
    WORKLOAD_LABEL,
    Vendor,
    platform_object_name,
    vendor_resource,
)
from aks_gpu.resolved.exemptions import USER_REASON, exempt_namespaces, exemptions
from aks_gpu.resolved.model import PlatformModel, ResolvedPool, Taint

Manifest = dict[str, Any]

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_NAME = platform_object_name("gpu-placement")
BINDING_NAME = POLICY_NAME
# Set by the API server on every namespace (GA since 1.22).
# https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name
VENDORS: tuple[Vendor, ...] = ("nvidia", "amd")
# The GPU resources, named: whole GPUs and the device plugin's renamed shared resource (renameByDefault:
# nvidia.com/gpu.shared, https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus), the same set the audit
# counts (components/aks_gpu/cluster/inventory.py), plus whatever a pool of the stack exposes. Matched by pattern: MIG
# slices (nvidia.com/mig-<profile>, shared ones with .shared after it) and AMD partitions under the ROCm device
# plugin's mixed naming, <compute mode>_<memory mode> such as amd.com/cpx_nps4
# (https://github.com/ROCm/k8s-device-plugin, "resource_naming_strategy").
# Not the vendors' whole domains: NVIDIA's Network Operator advertises NICs there too (its SR-IOV and host-device
# plugins' resourcePrefix defaults to nvidia.com: nvidia.com/hostdev), and a pod asking for one of those and
# tolerating the GPU taint holds a GPU node without a GPU. A GPU resource missing here fails closed: no pod
# reaches a GPU node without tolerating its taint, and a pod that tolerates it without a GPU request is denied.
AMD_PARTITION_PATTERN = r"^amd\.com/[a-z]px_nps[0-9]+$"
# Written here, not imported: admission must not import validation (the audit reads admission's quantities);
# tests/admission/test_policy.py holds it equal to the audit's WHOLE_GPU_RESOURCES.
WHOLE_GPU_RESOURCES = ("amd.com/gpu", "nvidia.com/gpu", "nvidia.com/gpu.shared")
# The GPU pools' taint effect (aks_gpu.resolved.model.resolve_pool).
GPU_TAINT_EFFECT = "NoSchedule"
# What the quarantine engine puts on a faulty GPU node besides the cordon (aks_gpu.monitoring.remediation). A tenant
# pod that tolerates it (by key, or by an empty key with operator Exists) lands on the quarantined node: the
# DaemonSet controller tolerates the cordon (node.kubernetes.io/unschedulable) for every DaemonSet pod by itself
# (https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/#taints-and-tolerations), and a pod may
# tolerate it too, so the quarantine taint is what keeps tenants off the node.
QUARANTINE_TAINT = Taint(key=QUARANTINE_TAINT_KEY, value=QUARANTINE_TAINT_VALUE, effect=QUARANTINE_TAINT_EFFECT)
OPERATIONS = ["CREATE", "UPDATE"]
# The kinds whose pod spec the policy reads, and where it sits in each. pods/ephemeralcontainers is the
# subresource `kubectl debug` updates: an ephemeral container is judged like the pod's own (rule 5).
# https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/#matching-requests-matchconstraints
RESOURCE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("", ("pods", "pods/ephemeralcontainers", "replicationcontrollers")),
    ("apps", ("deployments", "replicasets", "statefulsets", "daemonsets")),
    ("batch", ("jobs", "cronjobs")),
)
# The NVIDIA container runtime's device selection variables, and the values that select nothing
# (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
DEVICE_ENV_VARS = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES")
HARMLESS_DEVICE_VALUES = ("", "void", "none")
# envFrom turns every key of a ConfigMap or Secret into a variable, the entry's prefix in front; a ConfigMap's
# binaryData and a Secret's data carry base64, a Secret's stringData is merged into data on write.
# https://kubernetes.io/docs/tasks/configure-pod-container/configure-pod-configmap/#configure-all-key-value-pairs-in-a-configmap-as-container-environment-variables
# https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/secret-v1/ (data, stringData)
# https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/config-map-v1/ (data, binaryData)
DEVICE_ENV_POLICY_NAME = platform_object_name("device-env")
DEVICE_ENV_RESOURCES = ("configmaps", "secrets")
HARMLESS_DEVICE_VALUES_BASE64 = tuple(base64.b64encode(value.encode()).decode() for value in HARMLESS_DEVICE_VALUES)
# Claims for devices through Dynamic Resource Allocation (resource.k8s.io/v1): the third policy refuses those that
# ask for GPUs, which this stack serves through the device plugin only (aks_gpu.admission.dra).
DRA_POLICY_NAME = platform_object_name("dra-claims")
DRA_RESOURCES = ("resourceclaims", "resourceclaimtemplates")
# Services with spec.externalIPs: any user who may create a Service may claim any address as its external IP and
# intercept the cluster's traffic to it (CVE-2020-8554, https://github.com/kubernetes/kubernetes/issues/97076; the
# DenyServiceExternalIPs plugin that closes it is not among AKS's admission plugins). The fourth policy refuses them.
SERVICE_POLICY_NAME = platform_object_name("service-external-ips")
# PodDisruptionBudgets that allow no disruption: an eviction of their pods never succeeds, so a drain stalls, the
# node-image upgrade of the pool waits on it and a quarantined node keeps its pods. The fifth policy refuses those
# whose spec alone says so (maxUnavailable 0 or 0%, minAvailable 100%).
# https://kubernetes.io/docs/tasks/run-application/configure-pdb/#think-about-how-your-application-reacts-to-disruptions
# https://learn.microsoft.com/troubleshoot/azure/azure-kubernetes/error-code-poddrainfailure
PDB_POLICY_NAME = platform_object_name("disruption-budgets")
# A container that asks for no GPU in a pod that asks for some lands on a GPU node with the pod, and under the device
# plugin's default envvar strategy the NVIDIA container runtime hands it the GPUs its image's NVIDIA_VISIBLE_DEVICES
# names (CUDA images set "all": https://gitlab.com/nvidia/container-images/cuda, dist/*/base/Dockerfile), past the
# scheduler and the quota (https://github.com/NVIDIA/k8s-device-plugin/issues/61). A MutatingAdmissionPolicy (GA and
# on by default in Kubernetes 1.36: k8s.io/kubernetes v1.36.3 pkg/features/kube_features.go, MutatingAdmissionPolicy;
# pkg/kubeapiserver/options/plugins.go, DefaultOffAdmissionPlugins) sets NVIDIA_VISIBLE_DEVICES=void in such a
# container's env, which overrides the image's; the placement policy admits void.
VOID_POLICY_NAME = platform_object_name("device-void")
MUTATING_POLICY_KIND = "MutatingAdmissionPolicy"
# From aks_facts.MUTATING_ADMISSION_POLICY_SINCE only (a cluster never runs below its stack's minor); an older stack's
# plan says what that leaves open (config/rules/cluster.py).
# The kubelet's mirror pods: annotated so, created by a member of system:nodes.
# https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-config-mirror
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NODES_GROUP = "system:nodes"
# Labels AKS sets on every node of an agent pool, and the well-known instance type label the cloud provider
# sets: selecting on them selects a pool as surely as aks-gpu/pool does.
# https://learn.microsoft.com/azure/aks/use-labels#reserved-system-labels,
# https://kubernetes.io/docs/reference/labels-annotations-taints/#nodekubernetesioinstance-type
AKS_POOL_LABELS = ("kubernetes.azure.com/agentpool", "agentpool")
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
SPOT_LABEL = "kubernetes.azure.com/scalesetpriority"
# Node names: AKS names a VMSS node aks-<pool>-<8 digits>-vmss<6 base-36 digits> (every `kubectl get nodes` in the
# AKS docs, e.g. https://learn.microsoft.com/azure/aks/create-node-pools). A selection by node name or hostname
# reaches the pool in that prefix.
HOSTNAME_LABEL = "kubernetes.io/hostname"
NODE_NAME_FIELD = "metadata.name"
# ExtendedResourceToleration (k8s.io/kubernetes plugin/pkg/admission/extendedresourcetoleration/admission.go) adds
# {key: <resource>, operator: Exists, effect: NoSchedule} to a Pod for every extended resource in its containers' and
# init containers' requests, whatever the quantity (0 included). Of these, only the vendor's whole-GPU resource is the
# key of a GPU taint: a MIG slice or an AMD partition gets a toleration no GPU node's taint matches.
# A resource that looks like a GPU although no rule knows it: in a GPU vendor's domain with "gpu" in its name.
GPU_LIKE_WORD = "gpu"


# ---------------------------------------------------------------- what the model says


def vendor_taint(vendor: Vendor) -> Taint:
    """The taint every GPU pool of a vendor carries (the same one ``resolve_pool`` puts on the pools), but a pool
    sliced under the mixed MIG strategy (``sliced_taints``)."""
    return Taint(key=vendor_resource(vendor), value=GPU_TAINT_VALUE, effect=GPU_TAINT_EFFECT)


def sliced_taints(model: PlatformModel) -> tuple[Taint, ...]:
    """The GPU taints keyed by a MIG slice's resource (``nvidia.com/mig-3g.40gb=present:NoSchedule``): those of the
    pools sliced under the mixed strategy (``naming.gpu_taint_key``), by key."""
    taints = {pool.gpu_taint for pool in model.pools} - {vendor_taint(vendor) for vendor in VENDORS}
    return tuple(sorted(taints, key=lambda taint: taint.key))


def gpu_resource_names(model: PlatformModel) -> tuple[str, ...]:
    """The GPU resources matched by name: the vendors' whole-GPU and shared resources, what every pool exposes, and
    the GPU device classes asked for as DRA extended resources, which no pool of the stack offers (MIG slices and AMD
    partitions are matched by pattern besides)."""
    names = {vendor_resource(vendor) for vendor in VENDORS} | set(WHOLE_GPU_RESOURCES) | set(gpu_class_resources())
    names |= {pool.resource.name for pool in model.pools}
    return tuple(sorted(names))


def pools_by_type(model: PlatformModel) -> dict[str, tuple[str, ...]]:
    """Per workload type, the pools that serve it: pools with that ``workload``, and pools a workload of that
    type is pinned to with ``pool``."""
    types: dict[str, set[str]] = {}
    for pool in model.pools:
        types.setdefault(pool.workload, set()).add(pool.name)
    for workload in model.workloads:
        types.setdefault(workload.type, set()).update(pool.name for pool in workload.pools)
    return {kind: tuple(sorted(names)) for kind, names in sorted(types.items())}


def pool_node_labels(pool: ResolvedPool) -> dict[str, str]:
    """The labels every node of the pool carries that the policy can tell pools apart by."""
    labels = dict(pool.node_labels)
    labels.update({key: pool.name for key in AKS_POOL_LABELS})
    labels.update({key: pool.config.vm_size for key in INSTANCE_TYPE_LABELS})
    if pool.config.spot:
        labels[SPOT_LABEL] = "spot"
    return dict(sorted(labels.items()))


def pool_selector_keys(model: PlatformModel) -> tuple[str, ...]:
    """Every label key some pool's nodes carry (a key a pool lacks is known to be absent on its nodes)."""
    keys = {key for pool in model.pools for key in pool_node_labels(pool)}
    if model.pools:
        keys.add(SPOT_LABEL)  # AKS sets it on spot nodes only: absent elsewhere
    return tuple(sorted(keys))


def workload_namespaces(model: PlatformModel) -> dict[str, Manifest]:
    """The workload namespaces as the policy sees them (``namespaceObject``): name and the labels it reads."""
    return {
        workload.name: {
            "apiVersion": "v1",
            "kind": "Namespace",
            # The annotations are read by PodNodeSelector and PodTolerationRestriction before the policies
            # (aks_gpu.admission.chain).
            "metadata": namespace_metadata_with_tolerations(
                {
                    "name": workload.name,
                    "labels": {NAMESPACE_NAME_LABEL: workload.name, WORKLOAD_LABEL: workload.type},
                    "annotations": {NODE_SELECTOR_ANNOTATION: placement_selector(workload.type)},
                },
                workload.kube_tolerations,
            ),
        }
        for workload in model.workloads
    }


def policy_exempt_namespaces(model: PlatformModel, network_policy: str | None = None) -> tuple[str, ...]:
    """The namespaces outside the policy: derived from the stack, plus the user's list. The cluster's network
    policy comes from the model when it holds the whole stack, else from ``network_policy``."""
    cluster = model.cluster
    return exempt_namespaces(model.config, cluster.network_policy if cluster is not None else network_policy)


def system_namespaces(model: PlatformModel, network_policy: str | None = None) -> dict[str, str]:
    """The namespaces the policies leave out, each with what it is in words (``kube-system, a system namespace (AKS's
    agents run there)``), for a reader of ``aksgpu admission check``."""
    cluster = model.cluster
    described = {}
    for item in exemptions(model.config, cluster.network_policy if cluster is not None else network_policy):
        if item.reason == USER_REASON:
            what = f"{item.namespace}, {USER_REASON}"
        elif item.namespace == GPU_NAMESPACE and not model.pools:
            what = f"{item.namespace}, the system namespace of the stack's GPU agents, created only with GPU pools (none here)"
        else:
            what = f"{item.namespace}, a system namespace ({item.installed_by} runs its agents there)"
        described[item.namespace] = what
    return described


# ---------------------------------------------------------------- CEL building blocks


def lit(text: str) -> str:
    """A CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def lit_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(lit(item) for item in items) + "]"


def lit_map(items: dict[str, str]) -> str:
    return "{" + ", ".join(f"{lit(key)}: {lit(value)}" for key, value in items.items()) + "}"


def pod_spec_of(obj: str) -> str:
    """Where the pod spec sits in a Pod, a CronJob and every other matched kind. The kind is read from the
    request, which the API server always fills in (the object's own TypeMeta may be empty)."""
    return (
        f"request.kind.kind == 'Pod' ? {obj}.spec : "
        f"(request.kind.kind == 'CronJob' ? {obj}.spec.jobTemplate.spec.template.spec : {obj}.spec.template.spec)"
    )


def is_gpu(resource: str, names: str = "variables.gpuResourceNames") -> str:
    """``resource`` is a GPU resource: among ``names`` (a CEL list), a MIG slice or an AMD partition."""
    return (
        f"({resource} in {names} || "
        f"({resource}.startsWith({lit(MIG_RESOURCE_PREFIX)}) && size({resource}) > {len(MIG_RESOURCE_PREFIX)}) || "
        f"{resource}.matches({lit(AMD_PARTITION_PATTERN)}))"
    )


def above(quantity: str, count: str) -> str:
    """``quantity`` (a resource value: the API server serialises quantities as strings) is above ``count``."""
    return f"quantity(string({quantity})).isGreaterThan(quantity({lit(count)}))"


def asks_for(container: str, test: str) -> str:
    """The container asks, in its limits or requests, for a resource ``r`` with value ``v`` passing ``test``."""
    resources = f"{container}.resources"
    limits, requests = f"{resources}.limits", f"{resources}.requests"
    return (
        f"has({resources}) && ((has({limits}) && {limits}.exists(r, {test.format(v=f'{limits}[r]')})) || "
        f"(has({requests}) && {requests}.exists(r, {test.format(v=f'{requests}[r]')})))"
    )


def uses_gpu(container: str, extra: str = "", names: str = "variables.gpuResourceNames") -> str:
    """The container asks for more than zero of a GPU resource; ``extra`` narrows the resource name."""
    return asks_for(container, is_gpu("r", names) + (f" && {extra}" if extra else "") + " && " + above("{v}", "0"))


def limit_differs(container: str, resource: str) -> str:
    """The container's request for ``resource`` has no limit, or a different one. Compared as quantities (``1``
    and ``1000m`` are equal) with the Kubernetes quantity library, in every API server that serves VAP v1.
    https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-quantity-library"""
    limits = f"{container}.resources.limits"
    request = f"{container}.resources.requests[{resource}]"
    return (
        f"!(has({limits}) && {resource} in {limits} && "
        f"quantity(string({request})).compareTo(quantity(string({limits}[{resource}]))) == 0)"
    )


def tolerates(toleration: str, taint: Taint) -> str:
    """Kubernetes' ToleratesTaint: the effect matches or is empty; the key matches (operator Exists, or Equal
    and the same value), or is empty with operator Exists (which tolerates every taint).
    https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/"""
    t = toleration
    effect = f"(!has({t}.effect) || {t}.effect == '' || {t}.effect == {lit(taint.effect)})"
    exists = f"(has({t}.operator) && {t}.operator == 'Exists')"
    equal_operator = f"(!has({t}.operator) || {t}.operator == '' || {t}.operator == 'Equal')"
    equal = f"({equal_operator} && has({t}.value) && {t}.value == {lit(taint.value)})"
    matches = f"((has({t}.key) && {t}.key != '') ? ({t}.key == {lit(taint.key)} && ({exists} || {equal})) : {exists})"
    return f"({effect} && {matches})"


def _node_name_in_pool(name: str, pool: str) -> str:
    return f"{name}.startsWith('aks-' + {pool} + '-')"


def _labels(pool: str) -> str:
    """The node labels of the pool named ``pool``."""
    return f"variables.poolLabels[{pool}]"


def _expression_allows(e: str, p: str) -> str:
    """A nodeSelectorRequirement ``e`` allows the nodes of pool ``p``: exact on the labels the model knows,
    permissive on any other key (it can only narrow within what the known keys allow); Gt/Lt are permissive."""
    has_value = f"({e}.key in {_labels(p)} && has({e}.values) && {_labels(p)}[{e}.key] in {e}.values)"
    return (
        f"({e}.key == {lit(HOSTNAME_LABEL)} ? "
        f"({e}.operator != 'In' || (has({e}.values) && {e}.values.exists(v, {_node_name_in_pool('v', p)}))) : "
        f"(!({e}.key in variables.poolKeys) ? true : "
        f"({e}.operator == 'In' ? {has_value} : "
        f"({e}.operator == 'NotIn' ? !{has_value} : "
        f"({e}.operator == 'Exists' ? {e}.key in {_labels(p)} : "
        f"({e}.operator == 'DoesNotExist' ? !({e}.key in {_labels(p)}) : true))))))"
    )


def _field_allows(f: str, p: str) -> str:
    return (
        f"({f}.key != {lit(NODE_NAME_FIELD)} || {f}.operator != 'In' || "
        f"(has({f}.values) && {f}.values.exists(v, {_node_name_in_pool('v', p)})))"
    )


def _term_allows(t: str, p: str) -> str:
    """A nodeSelectorTerm allows pool ``p``; an empty term matches no node (NodeSelectorTerm's API doc)."""
    expressions = f"(has({t}.matchExpressions) ? {t}.matchExpressions : [])"
    fields = f"(has({t}.matchFields) ? {t}.matchFields : [])"
    return (
        f"(size({expressions}) + size({fields}) > 0 && {expressions}.all(e, {_expression_allows('e', p)}) && "
        f"{fields}.all(f, {_field_allows('f', p)}))"
    )


def _selector_allows(p: str, selector: str = "variables.nodeSelector") -> str:
    """Every key of the node selector ``selector`` (a map) allows the nodes of pool ``p``."""
    return (
        f"{selector}.all(k, k == {lit(HOSTNAME_LABEL)} ? {_node_name_in_pool(f'{selector}[k]', p)} : "
        f"(!(k in variables.poolKeys) || (k in {_labels(p)} && {_labels(p)}[k] == {selector}[k])))"
    )


def _selects_pool(selector: str) -> str:
    """The node selector ``selector`` (a map) names a key that tells pools apart."""
    return f"{selector}.exists(k, k in variables.poolKeys || k == {lit(HOSTNAME_LABEL)})"


def namespace_selectors(model: PlatformModel) -> dict[str, dict[str, str]]:
    """The node selector PodNodeSelector merges into every Pod of each workload namespace (its annotation,
    ``workload_namespaces``), by namespace name."""
    return {workload.name: selector_of(placement_selector(workload.type)) for workload in model.workloads}


def _gpu_like(resource: str) -> str:
    """A resource in a GPU vendor's domain with ``gpu`` in its name (``nvidia.com/gpus``, ``amd.com/GPU``)."""
    vendors = "|".join(VENDORS)
    return f"{resource}.matches({lit(f'^({vendors})[.]com/.*({GPU_LIKE_WORD}|{GPU_LIKE_WORD.upper()})')})"


def _variable(name: str, expression: str) -> dict[str, str]:
    return {"name": name, "expression": expression}


def _policy_manifest(name: str, spec: dict[str, Any]) -> Manifest:
    return {"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec}


def _validation(expression: str, message: str, message_expression: str, reason: str = "Invalid") -> dict[str, str]:
    return {"expression": expression, "message": message, "messageExpression": message_expression, "reason": reason}


def _containers_word(containers: str) -> str:
    return f"(size({containers}) == 1 ? 'container ' : 'containers ') + {containers}.map(c, c.name).join(', ')"


# ---------------------------------------------------------------- the rules


def _spells_device_variable(source: str) -> str:
    """An envFrom entry's prefix begins a device variable's name (and is not all of it): some key completes it."""
    prefix = f"{source}.prefix"
    return f"has({prefix}) && {prefix} != '' && {lit_list(DEVICE_ENV_VARS)}.exists(v, v.startsWith({prefix}) && v != {prefix})"


def _variables(model: PlatformModel) -> list[dict[str, str]]:
    spec = "variables.podSpec"
    sliced = sliced_taints(model)
    sliced_keys = [taint.key for taint in sliced]
    old_spec = pod_spec_of("oldObject")
    by_type = "{" + ", ".join(f"{lit(kind)}: {lit_list(pools)}" for kind, pools in pools_by_type(model).items()) + "}"
    affinity = f"{spec}.affinity.nodeAffinity"
    required = f"{affinity}.requiredDuringSchedulingIgnoredDuringExecution"
    labels = "namespaceObject.metadata.labels"
    harmless = lit_list(HARMLESS_DEVICE_VALUES)
    sets_device = (
        f"has(c.env) && c.env.exists(e, e.name in {lit_list(DEVICE_ENV_VARS)} && "
        f"(has(e.valueFrom) || (has(e.value) && !(e.value in {harmless}))))"
    )
    takes_device_prefix = f"has(c.envFrom) && c.envFrom.exists(s, {_spells_device_variable('s')})"
    variables = [
        _variable("podSpec", pod_spec_of("object")),
        _variable(
            "containers",
            f"(has({spec}.containers) ? {spec}.containers : []) + (has({spec}.initContainers) ? {spec}.initContainers : [])",
        ),
        _variable(
            "allContainers",
            f"variables.containers + (has({spec}.ephemeralContainers) ? {spec}.ephemeralContainers : [])",
        ),
        _variable("gpuResourceNames", lit_list(gpu_resource_names(model))),
        _variable("gpuContainers", f"variables.containers.filter(c, {uses_gpu('c')})"),
        _variable("tolerations", f"has({spec}.tolerations) ? {spec}.tolerations : []"),
        # The GPU taint keys the pod's containers name as a resource (any quantity): ExtendedResourceToleration
        # tolerates exactly these taints on the Pods.
        _variable(
            "requestedTaintKeys",
            f"{lit_list(sorted([*(vendor_taint(v).key for v in VENDORS), *sliced_keys]))}.filter(k, "
            "variables.containers.exists(c, "
            "has(c.resources) && ((has(c.resources.limits) && k in c.resources.limits) || "
            "(has(c.resources.requests) && k in c.resources.requests))))",
        ),
        # What the plugin will add to the Pods of a template; a Pod has it already.
        _variable("ertKeys", "request.kind.kind == 'Pod' ? [] : variables.requestedTaintKeys"),
        _variable("offeredResources", lit_list(sorted({pool.resource.name for pool in model.pools}))),
        _variable(
            "unofferedRequests",
            "variables.containers.filter(c, "
            + asks_for("c", f"({is_gpu('r')} || {_gpu_like('r')}) && !(r in variables.offeredResources) && " + above("{v}", "0"))
            + ")",
        ),
    ]
    for vendor in VENDORS:
        of_vendor = f"r.startsWith({lit(vendor + '.com/')})"
        if vendor == "nvidia" and sliced_keys:
            # A slice of a mixed-strategy pool sits behind a taint of its own name, not the vendor's; a Pod that
            # asks for it always tolerates that taint (ExtendedResourceToleration), and so do a template's Pods.
            of_vendor += f" && !(r in {lit_list(sliced_keys)})"
        variables += [
            _variable(f"{vendor}Containers", f"variables.gpuContainers.filter(c, {uses_gpu('c', of_vendor)})"),
            _variable(f"{vendor}Tolerations", f"variables.tolerations.filter(t, {tolerates('t', vendor_taint(vendor))})"),
        ]
    of_any_vendor = " || ".join(
        [f"t in variables.{vendor}Tolerations" for vendor in VENDORS] + [tolerates("t", taint) for taint in sliced]
    )
    variables += [
        _variable(
            "limitMismatches",
            "variables.gpuContainers.filter(c, has(c.resources.requests) && "
            f"c.resources.requests.exists(r, {is_gpu('r')} && {limit_differs('c', 'r')}))",
        ),
        _variable("gpuTolerations", f"variables.tolerations.filter(t, {of_any_vendor})"),
        _variable("quarantineTolerations", f"variables.tolerations.filter(t, {tolerates('t', QUARANTINE_TAINT)})"),
        _variable("nodeName", f"has({spec}.nodeName) ? {spec}.nodeName : ''"),
        _variable(
            "oldNodeName",
            f"request.operation == 'UPDATE' && oldObject != null && has(({old_spec}).nodeName) ? ({old_spec}).nodeName : ''",
        ),
        _variable(
            "mirrorPod",
            f"request.kind.kind == 'Pod' && has(request.userInfo.groups) && {lit(NODES_GROUP)} in request.userInfo.groups && "
            f"has(object.metadata.annotations) && {lit(MIRROR_ANNOTATION)} in object.metadata.annotations",
        ),
        _variable("deviceEnvContainers", f"variables.allContainers.filter(c, {sets_device})"),
        _variable("devicePrefixContainers", f"variables.allContainers.filter(c, {takes_device_prefix})"),
        _variable(
            "workloadType",
            # Every matched resource is namespaced, so namespaceObject is never null here.
            f"has(namespaceObject.metadata) && has({labels}) && {lit(WORKLOAD_LABEL)} in {labels} "
            f"? {labels}[{lit(WORKLOAD_LABEL)}] : ''",
        ),
        _variable("poolsByType", by_type),
        _variable(
            "allowedPools",
            "variables.workloadType in variables.poolsByType ? variables.poolsByType[variables.workloadType] : []",
        ),
        # The pools as literals of one type each: the API server refuses an aggregate literal whose elements
        # differ in type (cel.HomogeneousAggregateLiterals, k8s.io/apiserver pkg/cel/environment/base.go), so a
        # pool is its name, and its labels and sharing are looked up by name. A list, not a map's keys: CEL
        # iterates a map literal in no fixed order on cel-go, and the names end up in messages.
        _variable("pools", lit_list(pool.name for pool in model.pools)),
        _variable(
            "poolLabels", "{" + ", ".join(f"{lit(pool.name)}: {lit_map(pool_node_labels(pool))}" for pool in model.pools) + "}"
        ),
        _variable("poolKeys", lit_list(pool_selector_keys(model))),
        _variable("nodeSelector", f"has({spec}.nodeSelector) ? {spec}.nodeSelector : {{}}"),
        # A template's Pods get their namespace's node selector from PodNodeSelector when a controller creates them;
        # a Pod has it already (the plugin ran before the policy). Judged beside the template's own, as the Pod's
        # merged selector will be (a key both set to different values: no pool allows both, as the plugin refuses it).
        _variable(
            "namespaceSelectors",
            "{" + ", ".join(f"{lit(name)}: {lit_map(selector)}" for name, selector in namespace_selectors(model).items()) + "}",
        ),
        _variable(
            "namespaceSelector",
            "request.kind.kind != 'Pod' && namespaceObject.metadata.name in variables.namespaceSelectors ? "
            "variables.namespaceSelectors[namespaceObject.metadata.name] : {}",
        ),
        _variable(
            "requiredTerms",
            f"has({spec}.affinity) && has({spec}.affinity.nodeAffinity) && has({required}) && has({required}.nodeSelectorTerms) "
            f"? {required}.nodeSelectorTerms : []",
        ),
        _variable(
            "selectsPool",
            f"{_selects_pool('variables.nodeSelector')} || {_selects_pool('variables.namespaceSelector')} || "
            "variables.requiredTerms.exists(t, (has(t.matchExpressions) && "
            f"t.matchExpressions.exists(e, e.key in variables.poolKeys || e.key == {lit(HOSTNAME_LABEL)})) || "
            f"(has(t.matchFields) && t.matchFields.exists(f, f.key == {lit(NODE_NAME_FIELD)})))",
        ),
        _variable(
            "reachablePools",
            f"variables.pools.filter(p, {_selector_allows('p')} && {_selector_allows('p', 'variables.namespaceSelector')} && "
            "(size(variables.requiredTerms) == 0 || "
            f"variables.requiredTerms.exists(t, {_term_allows('t', 'p')})))",
        ),
        _variable("wrongPools", "variables.reachablePools.filter(n, !(n in variables.allowedPools))"),
        _variable(
            "targetPools",
            "variables.selectsPool ? variables.reachablePools : "
            "(variables.workloadType != '' ? variables.allowedPools : variables.pools)",
        ),
        _variable("sharedPools", lit_list(pool.name for pool in model.pools if pool.time_slicing_replicas)),
        _variable(
            "overSharedContainers",
            "size(variables.targetPools) > 0 && variables.targetPools.all(n, n in variables.sharedPools) ? "
            f"variables.gpuContainers.filter(c, {asks_for('c', is_gpu('r') + ' && ' + above('{v}', '1'))}) : []",
        ),
    ]
    return variables


def _validations(model: PlatformModel, exempt: tuple[str, ...]) -> list[dict[str, str]]:
    admission = model.config.admission
    exempt_text = ", ".join(exempt) or "none"
    limit_text = (
        "(has(c.resources.limits) && r in c.resources.limits ? "
        "' with limit ' + string(c.resources.limits[r]) : ' without a limit')"
    )
    mismatch_detail = (
        f"c.name + ' asks for ' + c.resources.requests.filter(r, {is_gpu('r')} && {limit_differs('c', 'r')})"
        f".map(r, r + ': ' + string(c.resources.requests[r]) + {limit_text}).join(', ')"
    )
    validations = [
        _validation(
            "size(variables.limitMismatches) == 0",
            "a GPU request must equal its limit: set resources.limits to the requested GPU count (a limit alone is enough)",
            "'GPU requests must equal their limits (GPUs cannot be overcommitted): ' + "
            "(size(variables.limitMismatches) == 1 ? 'container ' : 'containers ') + "
            f"variables.limitMismatches.map(c, {mismatch_detail}).join('; ') + "
            "'. Set resources.limits to the same count, or give only the limit.'",
        ),
        # Before the tolerations: a resource no pool offers is the fault, and no toleration would make the pod run
        # (a MIG profile's name gets ExtendedResourceToleration's toleration of that name, not of the GPU taint).
        _validation(
            "size(variables.unofferedRequests) == 0",
            "a pod requests a GPU resource that no GPU pool of this stack offers: it would stay Pending",
            f"{_containers_word('variables.unofferedRequests')} + ' request' + "
            "(size(variables.unofferedRequests) == 1 ? 's ' : ' ') + variables.unofferedRequests.map(c, "
            "(has(c.resources.limits) ? c.resources.limits.filter(r, "
            f"({is_gpu('r')} || {_gpu_like('r')}) && !(r in variables.offeredResources)) : []) + "
            "(has(c.resources.requests) ? c.resources.requests.filter(r, "
            f"({is_gpu('r')} || {_gpu_like('r')}) && !(r in variables.offeredResources) && "
            "!(has(c.resources.limits) && r in c.resources.limits)) : [])).map(l, l.join(', ')).join(', ') + "
            "', which no GPU pool of this stack offers, so no node could ever run the pod (it would stay Pending). ' + "
            "(size(variables.offeredResources) == 0 ? 'This stack has no GPU pool.' : "
            "'The pools offer: ' + variables.offeredResources.join(', ') + '.')",
            reason="Forbidden",
        ),
    ]
    for vendor in VENDORS:
        taint = vendor_taint(vendor)
        containers = f"variables.{vendor}Containers"
        add = f"tolerations: [{{key: {taint.key}, operator: Exists, effect: {taint.effect}}}]"
        problem = f"{vendor} GPUs, but the pod does not tolerate the GPU node taint {taint.aks()}: add {add} to the pod spec"
        validations.append(
            _validation(
                f"size({containers}) == 0 || size(variables.{vendor}Tolerations) > 0 || {lit(taint.key)} in variables.ertKeys",
                f"a pod that requests {vendor} GPUs must tolerate the GPU node taint {taint.aks()}: add {add} to the pod spec",
                f"{_containers_word(containers)} + (size({containers}) == 1 ? ' requests ' : ' request ') + {lit(problem)}",
            )
        )
    keys = (
        "(variables.gpuTolerations.map(t, has(t.key) && t.key != '' ? t.key : 'an empty key with operator Exists') + "
        "variables.ertKeys.filter(k, !variables.gpuTolerations.exists(t, has(t.key) && t.key == k))).join(', ')"
    )
    # A zero request of a GPU resource is no GPU request, but ExtendedResourceToleration tolerates the GPU taint for
    # it all the same: the fix is the request, not a toleration the user never wrote.
    zero = (
        "(size(variables.requestedTaintKeys) > 0 ? ' The API server adds a toleration of ' + "
        "variables.requestedTaintKeys.join(', ') + ' to every pod that names that resource, even with 0 "
        "(ExtendedResourceToleration): remove the zero request.' : '')"
    )
    # A pod that claims its GPUs through DRA (spec.resourceClaims) is not told it "requests no GPU": it asks for them
    # a way this stack does not serve, and is told so, and what to ask for instead.
    claims = "variables.podSpec.resourceClaims"
    offered = "(size(variables.offeredResources) == 0 ? 'a GPU resource' : variables.offeredResources.join(' or '))"
    squatting = (
        f"'the pod requests no GPU but tolerates the GPU node taint (' + {keys} + '), so it could hold a GPU node "
        f"that GPU work is waiting for: remove that toleration or request a GPU (a quantity above 0; only these "
        f"namespaces may run such pods: {exempt_text}).' + {zero}"
    )
    claiming = (
        "'the pod claims devices through Dynamic Resource Allocation (resourceClaims) and tolerates the GPU node taint "
        f"(' + {keys} + '), but this stack runs no DRA driver for GPUs (its GPU pools run the device plugin): no claim "
        "brings it a GPU here, and the toleration would let it hold a GPU node that GPU work is waiting for. Ask for ' + "
        f"{offered} + ' in resources.limits instead, or remove that toleration (only these namespaces may run such "
        f"pods: {exempt_text}).' + {zero}"
    )
    validations += [
        _validation(
            "size(variables.gpuContainers) > 0 || (size(variables.gpuTolerations) == 0 && size(variables.ertKeys) == 0)",
            f"a pod that requests no GPU must not tolerate a GPU node taint; only these namespaces may: {exempt_text}",
            f"(has({claims}) && size({claims}) > 0 ? {claiming} : {squatting})",
        ),
        _validation(
            "size(variables.quarantineTolerations) == 0",
            f"a pod must not tolerate the quarantine taint {QUARANTINE_TAINT.aks()}; only these namespaces may: {exempt_text}",
            "'the pod tolerates the quarantine taint " + QUARANTINE_TAINT.aks() + " (' + "
            "variables.quarantineTolerations.map(t, has(t.key) && t.key != '' ? t.key : 'an empty key with operator "
            "Exists').join(', ') + '), so it could land on a GPU node quarantined for a fatal fault. Remove that "
            "toleration: a GPU pod needs none for its GPUs (AKS adds the toleration of every GPU resource it "
            f"requests), and none with an empty key (only these namespaces may run such pods: {exempt_text}).'",
            reason="Forbidden",
        ),
        _validation(
            "variables.nodeName == '' || variables.nodeName == variables.oldNodeName || variables.mirrorPod",
            "spec.nodeName must not be set: it skips the scheduler and every NoSchedule taint; use a nodeSelector or "
            "required node affinity instead",
            "'spec.nodeName is set (' + variables.nodeName + '): a pod placed by node name skips the scheduler and with "
            "it every NoSchedule taint, so it could run on a GPU node without asking for a GPU. Remove nodeName and use "
            f"a nodeSelector or required node affinity instead (a GPU pool: nodeSelector {{{POOL_LABEL}: <pool>}}; one "
            f"node: nodeSelector {{{HOSTNAME_LABEL}: <node>}})'",
            reason="Forbidden",
        ),
        _validation(
            "size(variables.deviceEnvContainers) == 0",
            f"containers must not set {', '.join(DEVICE_ENV_VARS)}: ask for GPUs in resources.limits",
            f"{_containers_word('variables.deviceEnvContainers')} + ' set' + "
            f"(size(variables.deviceEnvContainers) == 1 ? 's ' : ' ') + "
            "variables.deviceEnvContainers.map(c, c.env.filter(e, "
            f"e.name in {lit_list(DEVICE_ENV_VARS)}).map(e, e.name).join(', ')).join(', ') + "
            "': the NVIDIA container runtime hands a container the GPUs this variable names, past the scheduler and the "
            "GPU quota. Remove it and ask for GPUs in resources.limits (the device plugin sets it for the GPUs a "
            "container is given)'",
            reason="Forbidden",
        ),
        _validation(
            "size(variables.devicePrefixContainers) == 0",
            f"containers must not take variables with an envFrom prefix that begins {', '.join(DEVICE_ENV_VARS)}",
            f"{_containers_word('variables.devicePrefixContainers')} + "
            "(size(variables.devicePrefixContainers) == 1 ? ' takes' : ' take') + ' variables with envFrom prefix ' + "
            "variables.devicePrefixContainers.map(c, c.envFrom.filter(s, "
            f"{_spells_device_variable('s')}).map(s, s.prefix).join(', ')).join(', ') + "
            f"': a ConfigMap or Secret key that completes it (VISIBLE_DEVICES after NVIDIA_) sets "
            f"{' or '.join(DEVICE_ENV_VARS)}, and the NVIDIA container runtime hands a container the GPUs it names, "
            "past the scheduler and the GPU quota. Use a prefix that does not begin these names (APP_, say), or none'",
            reason="Forbidden",
        ),
    ]
    namespaces = ", ".join(f"{w.name} ({w.type})" for w in model.workloads) or "none is configured"
    extra = admission.gpu_namespaces
    also = f"; also allowed: {', '.join(extra)}" if extra else ""
    gpu = "size(variables.gpuContainers) == 0"
    if admission.restrict_to_workload_namespaces:
        validations.append(
            _validation(
                f"{gpu} || variables.workloadType != '' || namespaceObject.metadata.name in {lit_list(extra)}",
                f"GPU pods run only in GPU workload namespaces (label {WORKLOAD_LABEL}); use one of: {namespaces}{also}",
                f"'GPU pods run only in GPU workload namespaces (label {WORKLOAD_LABEL}): namespace ' + "
                f"namespaceObject.metadata.name + ' is not one. Use one of: {namespaces}{also}'",
                reason="Forbidden",
            )
        )
    validations += [
        _validation(
            f"{gpu} || variables.workloadType == '' || !variables.selectsPool || "
            "(size(variables.reachablePools) > 0 && size(variables.wrongPools) == 0)",
            f"a GPU pod must select only pools of its namespace's workload type ({WORKLOAD_LABEL} or {POOL_LABEL})",
            "'namespace ' + namespaceObject.metadata.name + ' runs ' + variables.workloadType + "
            "' work: its GPU pods may select only ' + variables.workloadType + ' pools, with nodeSelector "
            f"{WORKLOAD_LABEL}: ' + variables.workloadType + "
            f"(size(variables.allowedPools) > 0 ? ' or {POOL_LABEL}: one of ' + variables.allowedPools.join(', ') : '') + "
            "' (or the same in required node affinity); this pod ' + (size(variables.reachablePools) == 0 ? "
            "'selects no GPU pool of this stack' : 'can land on pool ' + variables.wrongPools.join(', '))",
            reason="Forbidden",
        ),
        _validation(
            "size(variables.overSharedContainers) == 0",
            "on time-sliced GPU pools a container asks for at most 1 shared GPU",
            f"{_containers_word('variables.overSharedContainers')} + ' asks for more than 1 GPU on time-sliced pool' + "
            "(size(variables.targetPools) == 1 ? ' ' : 's ') + variables.targetPools.join(', ') + "
            "': there a GPU is shared by time-slicing and more than 1 buys no more of it (the device plugin refuses it "
            "with UnexpectedAdmissionError). Ask for 1.'",
        ),
    ]
    return validations


def _outside(exempt: tuple[str, ...]) -> Manifest:
    """The namespaceSelector that leaves the exempt namespaces out."""
    if not exempt:
        return {}
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": list(exempt)}]}


def match_constraints(
    namespace_selector: Manifest,
    rules: Iterable[tuple[str, Iterable[str]]] = RESOURCE_RULES,
    operations: Iterable[str] = OPERATIONS,
) -> Manifest:
    """A policy's matchConstraints: ``rules`` ((API group, resources) pairs, v1, every operation the policies judge) in
    the namespaces ``namespace_selector`` selects; Equivalent, so a request through another API version of the same
    object is judged too."""
    return {
        "matchPolicy": "Equivalent",
        "namespaceSelector": namespace_selector,
        "objectSelector": {},
        "resourceRules": [
            {
                "apiGroups": [group],
                "apiVersions": ["v1"],
                "operations": list(operations),
                "resources": list(resources),
                "scope": "Namespaced",
            }
            for group, resources in rules
        ],
    }


def policy_manifest(model: PlatformModel, network_policy: str | None = None) -> Manifest:
    exempt = policy_exempt_namespaces(model, network_policy)
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": match_constraints(_outside(exempt)),
        "matchConditions": [
            {
                # Pod specs are almost immutable, and controllers update their objects all the time (status
                # aside: finalizers, labels, scale): re-judging an unchanged pod spec on UPDATE would block
                # them on objects created before the policy existed.
                "name": "created-or-pod-spec-changed",
                "expression": f"request.operation != 'UPDATE' || ({pod_spec_of('object')}) != ({pod_spec_of('oldObject')})",
            }
        ],
        "variables": _variables(model),
        "validations": _validations(model, exempt),
    }
    return _policy_manifest(POLICY_NAME, spec)


def binding_manifest(model: PlatformModel, policy_name: str = POLICY_NAME, binding_name: str = BINDING_NAME) -> Manifest:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": binding_name},
        "spec": {"policyName": policy_name, "validationActions": list(model.config.admission.validation_actions)},
    }


def _held_device_keys(field: str, harmless: tuple[str, ...]) -> str:
    """The device variables among the keys of ``object.<field>`` whose value would select a GPU."""
    values = f"object.{field}"
    selects = f"k in {lit_list(DEVICE_ENV_VARS)} && !({values}[k] in {lit_list(harmless)})"
    return f"(has({values}) ? {values}.filter(k, {selects}) : [])"


def device_env_policy_manifest(model: PlatformModel, network_policy: str | None = None) -> Manifest:
    """ConfigMaps and Secrets outside the exempt namespaces hold no device variable, so that ``envFrom`` without a
    prefix cannot set one (with a prefix: the placement policy's envFrom rule)."""
    exempt = policy_exempt_namespaces(model, network_policy)
    plain, base64_values = HARMLESS_DEVICE_VALUES, HARMLESS_DEVICE_VALUES_BASE64
    secret = f"{_held_device_keys('data', base64_values)} + {_held_device_keys('stringData', plain)}"
    config_map = f"{_held_device_keys('data', plain)} + {_held_device_keys('binaryData', base64_values)}"
    held = f"request.kind.kind == 'Secret' ? {secret} : {config_map}"
    metadata = "object.metadata"
    name = f"(has({metadata}.name) ? {metadata}.name : (has({metadata}.generateName) ? {metadata}.generateName : ''))"
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": match_constraints(_outside(exempt), [("", DEVICE_ENV_RESOURCES)]),
        "variables": [_variable("deviceKeys", held)],
        "validations": [
            _validation(
                "size(variables.deviceKeys) == 0",
                f"ConfigMaps and Secrets must not hold {', '.join(DEVICE_ENV_VARS)} (envFrom would set it); only these "
                f"namespaces may: {', '.join(exempt) or 'none'}",
                f"request.kind.kind + ' ' + {name} + ' holds ' + variables.deviceKeys.join(', ') + "
                "': a container that takes it in with envFrom sets that variable, and the NVIDIA container runtime "
                "hands a container the GPUs it names, past the scheduler and the GPU quota. Remove the key (ask for "
                "GPUs in resources.limits; void or none as the value select no GPU)'",
                reason="Forbidden",
            )
        ],
    }
    return _policy_manifest(DEVICE_ENV_POLICY_NAME, spec)


def _dra_gpu_choice(choice: str) -> str:
    """A device choice (``exactly``, a ``firstAvailable`` alternative, a v1beta1 request) asks for GPUs: a GPU device
    class, or a CEL selector that names a GPU driver (``device.driver == 'gpu.nvidia.com'``,
    ``device.attributes['gpu.nvidia.com']...``) whatever its class."""
    return (
        f"((has({choice}.deviceClassName) && {choice}.deviceClassName in variables.gpuClasses) || "
        f"(has({choice}.selectors) && {choice}.selectors.exists(s, has(s.cel) && has(s.cel.expression) && "
        "variables.gpuDrivers.exists(d, s.cel.expression.contains(d)))))"
    )


def dra_policy_manifest(model: PlatformModel, network_policy: str | None = None) -> Manifest:
    """ResourceClaims and ResourceClaimTemplates (resource.k8s.io) outside the exempt namespaces ask for no GPU: the
    stack deploys no DRA driver for GPUs, so such a claim would never be allocated and its Pods would stay Pending,
    and with a driver added outside the stack they would take GPUs past the quota and the placement rules. The
    request is read as v1 and v1beta2 write it (``exactly``, ``firstAvailable``) and as v1beta1 does (the class at the
    request); a request for another version of the same resource is judged too (matchPolicy Equivalent)."""
    exempt = policy_exempt_namespaces(model, network_policy)
    devices = gpu_devices()
    template_spec = "object." + ".".join(CLAIM_SPEC_PATHS[TEMPLATE])
    claim_spec = (
        f"request.kind.kind == {lit(TEMPLATE)} ? (has(object.spec) && has({template_spec}) ? {template_spec} : {{}}) : "
        "(has(object.spec) ? object.spec : {})"
    )
    spec_ = "variables.claimSpec"
    asks = (
        f"(has(r.exactly) && {_dra_gpu_choice('r.exactly')}) || "
        f"(has(r.firstAvailable) && r.firstAvailable.exists(c, {_dra_gpu_choice('c')})) || {_dra_gpu_choice('r')}"
    )
    name = "(has(object.metadata.name) ? object.metadata.name : '')"
    offered = "variables.offeredResources"
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": match_constraints(_outside(exempt), [(GROUP, DRA_RESOURCES)]),
        "matchConditions": [
            {
                # A claim's spec is immutable; the resource claim controller updates claims' metadata (finalizers).
                "name": "created-or-spec-changed",
                "expression": "request.operation != 'UPDATE' || object.spec != oldObject.spec",
            }
        ],
        "variables": [
            _variable("claimSpec", claim_spec),
            _variable(
                "deviceRequests",
                f"has({spec_}.devices) && has({spec_}.devices.requests) ? {spec_}.devices.requests : []",
            ),
            _variable("gpuClasses", lit_list(devices.classes)),
            _variable("gpuDrivers", lit_list(devices.drivers)),
            _variable("gpuRequests", f"variables.deviceRequests.filter(r, {asks})"),
            _variable("offeredResources", lit_list(sorted({pool.resource.name for pool in model.pools}))),
        ],
        "validations": [
            _validation(
                "size(variables.gpuRequests) == 0",
                "this stack deploys no DRA driver for GPUs (its GPU pools run the device plugin): request GPUs in a "
                f"container's resources.limits, not through a claim for {', '.join(devices.classes)}",
                f"request.kind.kind + ' ' + {name} + ' asks for GPUs through Dynamic Resource Allocation (' + "
                "variables.gpuRequests.map(r, 'request ' + (has(r.name) ? r.name : '')).join(', ') + '), but this "
                "stack deploys no DRA driver for GPUs: its GPU pools run the device plugin, so the claim would never "
                "be allocated and the Pods using it would stay Pending. Ask for ' + "
                f"(size({offered}) == 0 ? 'a GPU resource' : {offered}.join(' or ')) + "
                "' in the resources.limits of the container instead, and drop the claim'",
                reason="Forbidden",
            )
        ],
    }
    return _policy_manifest(DRA_POLICY_NAME, spec)


def service_policy_manifest(model: PlatformModel, network_policy: str | None = None) -> Manifest:
    """Services outside the exempt namespaces set no ``spec.externalIPs`` (CVE-2020-8554)."""
    exempt = policy_exempt_namespaces(model, network_policy)
    external = "object.spec.externalIPs"
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": match_constraints(_outside(exempt), [("", ("services",))]),
        "validations": [
            _validation(
                f"!has(object.spec) || !has({external}) || size({external}) == 0",
                "Services must not set spec.externalIPs (CVE-2020-8554); only these namespaces may: "
                f"{', '.join(exempt) or 'none'}",
                f"'Service ' + object.metadata.name + ' sets spec.externalIPs (' + {external}.join(', ') + '): whoever "
                "may create a Service can claim any address this way and receive the traffic sent to it "
                "(CVE-2020-8554). Remove externalIPs; expose the Service with type LoadBalancer or an Ingress.'",
                reason="Forbidden",
            )
        ],
    }
    return _policy_manifest(SERVICE_POLICY_NAME, spec)


def _zero_disruption(budget: str) -> str:
    """A PodDisruptionBudget's spec allows no disruption whatever the pods: maxUnavailable 0 (or a percentage of 0),
    or minAvailable 100%. An int-or-string arrives as an int or a percentage string: the API server refuses any other
    string, and a percentage above 100%, before admission."""
    max_unavailable = f"{budget}.maxUnavailable"
    min_available = f"{budget}.minAvailable"
    return (
        f"(has({max_unavailable}) && string({max_unavailable}).matches('^0+%?$')) || "
        f"(has({min_available}) && string({min_available}).matches('^0*100%$'))"
    )


def pdb_policy_manifest(model: PlatformModel, network_policy: str | None = None) -> Manifest:
    """PodDisruptionBudgets outside the exempt namespaces allow some disruption, as far as their spec alone tells."""
    exempt = policy_exempt_namespaces(model, network_policy)
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": match_constraints(_outside(exempt), [("policy", ("poddisruptionbudgets",))]),
        "validations": [
            _validation(
                f"!has(object.spec) || !({_zero_disruption('object.spec')})",
                "a PodDisruptionBudget must allow some disruption (not maxUnavailable 0 or minAvailable 100%): it "
                f"would stall node drains, upgrades and quarantines; only these namespaces may: {', '.join(exempt) or 'none'}",
                "'PodDisruptionBudget ' + object.metadata.name + ' allows no disruption (' + "
                "(has(object.spec.maxUnavailable) ? 'maxUnavailable ' + string(object.spec.maxUnavailable) : "
                "'minAvailable ' + string(object.spec.minAvailable)) + '): no pod it selects can ever be evicted, so "
                "draining its node stalls, the node-image upgrade of its pool waits on it and a GPU node quarantined for "
                "a fatal fault keeps its pods. Allow at least one: maxUnavailable 1, or a minAvailable below the number of "
                "its pods.'",
                reason="Forbidden",
            )
        ],
    }
    return _policy_manifest(PDB_POLICY_NAME, spec)


def void_policy_manifest(model: PlatformModel, network_policy: str | None = None) -> Manifest:
    """The MutatingAdmissionPolicy that gives every container (and init container) without a GPU request, in a Pod
    with one, ``NVIDIA_VISIBLE_DEVICES=void``, unless the container names that variable itself (the placement policy
    then judges its value). An apply configuration: ``containers``, ``initContainers`` and ``env`` are lists keyed
    by name, so the entry is merged into the container of that name."""
    exempt = policy_exempt_namespaces(model, network_policy)
    names = lit_list(gpu_resource_names(model))
    variable = DEVICE_ENV_VARS[0]
    spec = "object.spec"

    def fields(field: str) -> str:
        return f"(has({spec}.{field}) ? {spec}.{field} : [])"

    def void(field: str) -> str:
        kind = f"Object.spec.{field}"
        return (
            f"variables.{field}.map(c, {kind}{{name: c.name, env: [{kind}.env{{name: {lit(variable)}, value: {lit('void')}}}]}})"
        )

    unset = f"!({uses_gpu('c', names=names)}) && !(has(c.env) && c.env.exists(e, e.name == {lit(variable)}))"
    return {
        "apiVersion": API_VERSION,
        "kind": MUTATING_POLICY_KIND,
        "metadata": {"name": VOID_POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": match_constraints(_outside(exempt), [("", ("pods",))], operations=["CREATE"]),
            "matchConditions": [
                {
                    "name": "requests-a-gpu",
                    "expression": f"({fields('containers')} + {fields('initContainers')})"
                    f".exists(c, {uses_gpu('c', names=names)})",
                }
            ],
            "variables": [
                _variable("containers", f"{fields('containers')}.filter(c, {unset})"),
                _variable("initContainers", f"{fields('initContainers')}.filter(c, {unset})"),
            ],
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": f"Object{{spec: Object.spec{{containers: {void('containers')}, "
                        f"initContainers: {void('initContainers')}}}}}"
                    },
                }
            ],
        },
    }


def mutating_binding_manifest(policy_name: str) -> Manifest:
    return {
        "apiVersion": API_VERSION,
        "kind": f"{MUTATING_POLICY_KIND}Binding",
        "metadata": {"name": policy_name},
        "spec": {"policyName": policy_name},
    }


def render_policy(model: PlatformModel, network_policy: str | None = None) -> list[Manifest]:
    """The placement policy and its binding, then the device-env policy, the DRA claim policy, the Service policy and
    the PodDisruptionBudget policy, each with its binding, and from Kubernetes ``MUTATING_ADMISSION_POLICY_SINCE`` the mutating
    device-void policy and its binding; nothing when ``admission.enabled`` is false."""
    if not model.config.admission.enabled:
        return []
    return [
        policy_manifest(model, network_policy),
        binding_manifest(model),
        device_env_policy_manifest(model, network_policy),
        binding_manifest(model, DEVICE_ENV_POLICY_NAME, DEVICE_ENV_POLICY_NAME),
        dra_policy_manifest(model, network_policy),
        binding_manifest(model, DRA_POLICY_NAME, DRA_POLICY_NAME),
        service_policy_manifest(model, network_policy),
        binding_manifest(model, SERVICE_POLICY_NAME, SERVICE_POLICY_NAME),
        pdb_policy_manifest(model, network_policy),
        binding_manifest(model, PDB_POLICY_NAME, PDB_POLICY_NAME),
        *(
            (void_policy_manifest(model, network_policy), mutating_binding_manifest(VOID_POLICY_NAME))
            if void_policy_served(model.config)
            else ()
        ),
    ]


def void_policy_served(config: PlatformConfig) -> bool:
    """Whether the stack's cluster serves the void policy's API (``MUTATING_ADMISSION_POLICY_SINCE``). A cluster the
    stack does not create (adopted, or a component given the in-cluster sections only) has a version the stack does
    not set: it is taken to be current, as the calendar's rule does not judge it either."""
    if not isinstance(config, StackConfig) or config.cluster.existing:
        return True
    return minor_key(minor_of(config.cluster.kubernetes_version)) >= minor_key(MUTATING_ADMISSION_POLICY_SINCE)
