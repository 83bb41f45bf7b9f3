"""The shape every GPU node agent shares: a DaemonSet pinned to GPU pools, tolerating their taints. Pure.

Device plugins are node-critical (without them a GPU node advertises no GPU), so they run at
``system-node-critical`` priority, roll one node at a time, and keep the pod hardened where the agent allows:
RuntimeDefault seccomp, no service account token unless the agent calls the API server, requests and limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from components.kube.plugin_targets import COMMON_LABELS, NAMESPACE, node_affinity_for, tolerations_for
from components.model import ResolvedPool

# Where the kubelet serves its device plugin registration socket (and where plugins put theirs):
# https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/#device-plugin-registration
KUBELET_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"


def runtime_default_seccomp() -> dict[str, str]:
    # A fresh dict per use: a shared one would come out of yaml.safe_dump as an anchor and alias.
    return {"type": "RuntimeDefault"}


def host_path_volume(name: str, path: str, type_: str = "Directory") -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": type_}}


def empty_dir_volume(name: str, size_limit: str = "16Mi") -> dict[str, Any]:
    return {"name": name, "emptyDir": {"sizeLimit": size_limit}}


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
    service_account: str | None = None,
    pod_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A DaemonSet on exactly ``pools``: required affinity on their pool label, tolerations for their taints."""
    pools = tuple(pools)
    pod_metadata: dict[str, Any] = {"labels": {**COMMON_LABELS, **selector}}
    if pod_annotations:
        pod_metadata["annotations"] = dict(pod_annotations)
    pod_spec: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "affinity": node_affinity_for(pools),
        "tolerations": tolerations_for(pools),
        "securityContext": {"seccompProfile": runtime_default_seccomp()},
        "automountServiceAccountToken": service_account is not None,
        "containers": containers,
        "volumes": volumes,
    }
    if service_account is not None:
        pod_spec["serviceAccountName"] = service_account
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {**COMMON_LABELS, **selector}},
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            # One node at a time: a node whose plugin restarts advertises no GPUs until it registers again.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": pod_metadata, "spec": pod_spec},
        },
    }
