"""The shape every GPU node agent shares: a DaemonSet pinned to GPU pools, tolerating their taints. Pure.

Device plugins are node-critical (without them a GPU node advertises no GPU), so they run at
``system-node-critical`` priority, roll one node at a time, and keep the pod hardened where the agent allows:
RuntimeDefault seccomp, no service account token unless the agent calls the API server, requests and limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from aks_gpu.naming import GPU_NAMESPACE
from aks_gpu.resolved.model import ResolvedPool, node_affinity_for, tolerations_for

# Where the kubelet serves its device plugin registration socket (and where plugins put theirs):
# https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/#device-plugin-registration
KUBELET_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
# Where client-go's in-cluster config reads the service account token, CA and namespace:
# https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/#directly-accessing-the-rest-api
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def runtime_default_seccomp() -> dict[str, str]:
    # A fresh dict per use: a shared one would come out of yaml.safe_dump as an anchor and alias.
    return {"type": "RuntimeDefault"}


def host_path_volume(name: str, path: str, type_: str = "Directory") -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": type_}}


def empty_dir_volume(name: str, size_limit: str = "16Mi") -> dict[str, Any]:
    return {"name": name, "emptyDir": {"sizeLimit": size_limit}}


def api_token_volume(name: str) -> dict[str, Any]:
    """The service account token, cluster CA and namespace, as the kubelet projects them when it automounts a
    token (https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-token-volume).

    Declared by hand so that a pod with ``automountServiceAccountToken: false`` can give the token to the one
    container that calls the API server (mounted at ``SERVICE_ACCOUNT_DIR``) and to no other.
    """
    return {
        "name": name,
        "projected": {
            "sources": [
                # Bound and short-lived; the kubelet rotates it and client-go re-reads the file.
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]
                    }
                },
            ]
        },
    }


def resources(cpu_request: str, memory_request: str, cpu_limit: str, memory_limit: str) -> dict[str, Any]:
    return {
        "requests": {"cpu": cpu_request, "memory": memory_request},
        "limits": {"cpu": cpu_limit, "memory": memory_limit},
    }


def root_security_context(*, add_capabilities: Iterable[str] = (), read_only_root: bool = True) -> dict[str, Any]:
    """A container that must run as root (kubelet socket directory, GPU device nodes) but needs nothing else:
    no privilege escalation, every capability dropped except the ones named."""
    added = list(add_capabilities)
    capabilities: dict[str, list[str]] = {"drop": ["ALL"]}
    if added:
        capabilities["add"] = added
    return {
        "runAsUser": 0,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": read_only_root,
        "capabilities": capabilities,
        "seccompProfile": runtime_default_seccomp(),
    }


def privileged_security_context() -> dict[str, Any]:
    """For agents that read GPU device nodes they were not allocated (labeller, amd-smi probe).

    Kubernetes refuses ``allowPrivilegeEscalation: false`` together with ``privileged: true``, so it is not set.
    """
    return {"privileged": True, "readOnlyRootFilesystem": True, "seccompProfile": runtime_default_seccomp()}


def node_daemonset(
    *,
    name: str,
    selector: Mapping[str, str],
    pools: Iterable[ResolvedPool],
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    init_containers: list[dict[str, Any]] | None = None,
    service_account: str | None = None,
    automount_token: bool | None = None,
    share_process_namespace: bool = False,
    pod_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A DaemonSet on exactly ``pools``: required affinity on their pool label, tolerations for their taints.

    With ``service_account`` the pod runs as that account and gets its token mounted into every container,
    unless ``automount_token`` is False (the caller then mounts ``api_token_volume`` where it is needed).
    """
    pools = tuple(pools)
    pod_metadata: dict[str, Any] = {"labels": {**selector}}
    if pod_annotations:
        pod_metadata["annotations"] = dict(pod_annotations)
    pod_spec: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "affinity": node_affinity_for(pools),
        "tolerations": tolerations_for(pools),
        "securityContext": {"seccompProfile": runtime_default_seccomp()},
        "automountServiceAccountToken": service_account is not None if automount_token is None else automount_token,
        "containers": containers,
        "volumes": volumes,
    }
    if init_containers:
        pod_spec["initContainers"] = init_containers
    if share_process_namespace:
        pod_spec["shareProcessNamespace"] = True
    if service_account is not None:
        pod_spec["serviceAccountName"] = service_account
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": GPU_NAMESPACE, "labels": {**selector}},
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            # One node at a time: a node whose plugin restarts advertises no GPUs until it registers again.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": pod_metadata, "spec": pod_spec},
        },
    }


def node_access_rbac(account: str, role: str, labels: Mapping[str, str], verbs: Iterable[str]) -> list[dict[str, Any]]:
    """A ServiceAccount in the plugin namespace bound to a ClusterRole with ``verbs`` on nodes: what a node
    agent needs to read (or label) the node it runs on. The token is mounted only where a container asks."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": GPU_NAMESPACE, "labels": dict(labels)},
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": dict(labels)},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": list(verbs)}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": dict(labels)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": GPU_NAMESPACE}],
        },
    ]
