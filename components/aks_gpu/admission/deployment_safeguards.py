"""AKS Deployment Safeguards as AKS Automatic enforces them: what it denies in an object, and the platform namespaces
the stack excludes from it. Pure.

On AKS Automatic "Deployment Safeguards and baseline Pod Security Standards are enabled by default in `Enforce` mode.
You can exclude namespaces, but you can't switch the cluster-wide safeguard level to `Warn`"
(https://learn.microsoft.com/azure/aks/deployment-safeguards, read 2026-12-07 from MicrosoftDocs/azure-aks-docs@fb060abe
articles/aks/deployment-safeguards.md). At `Enforce` the resource-requests and anti-affinity safeguards mutate a
workload rather than deny it; what is left to deny, as the page's error tables list it:

- Enforce Probes: "Container <container_name> in your Pod <pod_name> has no livenessProbe. Required probes:
  readinessProbe, livenessProbe";
- No "Latest" Image: "Use an explicit image tag other than `latest` or blank";
- Restricted Labels: "Label kubernetes.azure.com is reserved for AKS use only";
- Enforce CSI Driver: a StorageClass with the in-tree provisioner kubernetes.io/azure-disk or kubernetes.io/azure-file;
- the baseline Pod Security Standard: host namespaces, privileged containers, capabilities beyond baseline's, hostPath
  volumes, host ports, AppArmor, SELinux, /proc mount, seccomp Unconfined and unsafe sysctls
  (https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline).

The platform's GPU agents (device plugins, exporters, the quarantine engine) need the host (the kubelet's device-plugin
socket folder, the driver's devices), so their namespaces, which the platform labels Pod Security ``privileged``
anyway, are excluded: ``excluded_namespaces``. tests/admission/test_deployment_safeguards.py runs ``denials`` over
every workload an Automatic stack renders and finds each denied one in an excluded namespace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from aks_gpu.admission.pod_security import BASELINE_CAPABILITIES
from aks_gpu.naming import GPU_NAMESPACE, REMEDIATION_NAMESPACE
from aks_gpu.resolved.model import PlatformModel

AKS_LABEL_DOMAIN = "kubernetes.azure.com"
IN_TREE_PROVISIONERS = frozenset({"kubernetes.io/azure-disk", "kubernetes.io/azure-file"})
# Baseline's "Sysctls" control: the safe set (pod-security-standards, baseline, as of Kubernetes 1.36).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})


def excluded_namespaces(model: PlatformModel) -> list[str]:
    """The platform namespaces Deployment Safeguards leave alone on an Automatic cluster: the device plugins' and
    exporters' (whenever there is a GPU pool), and NVSentinel's (remediation on)."""
    namespaces = [GPU_NAMESPACE] if model.pools else []
    if model.pools_of("nvidia") and model.config.remediation.mode != "off":
        namespaces.append(REMEDIATION_NAMESPACE)
    return namespaces


def pod_template(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """(metadata, spec) of the pod an object runs: a Pod itself, a workload's template, a CronJob's job template."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return obj.get("metadata") or {}, spec
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = spec.get("template") if isinstance(spec, Mapping) else None
    if not isinstance(template, Mapping):
        return None
    return template.get("metadata") or {}, template.get("spec") or {}


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(field) or ():
            yield field, container


def _aks_labels(metadata: Mapping[str, Any]) -> list[str]:
    labels = metadata.get("labels") or {}
    return [key for key in labels if key.split("/")[0] == AKS_LABEL_DOMAIN or key.split("/")[0].endswith("." + AKS_LABEL_DOMAIN)]


def _image_has_version(image: str) -> bool:
    if "@" in image:
        return True
    name = image.rsplit("/", 1)[-1]
    tag = name.partition(":")[2]
    return bool(tag) and tag != "latest"


def _baseline(spec: Mapping[str, Any]) -> list[str]:
    denied = [f"{field} is true" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    denied += [f"hostPath volume {v.get('name')}" for v in spec.get("volumes") or () if "hostPath" in v]
    pod_context = spec.get("securityContext") or {}
    denied += [f"sysctl {s.get('name')}" for s in pod_context.get("sysctls") or () if s.get("name") not in SAFE_SYSCTLS]
    for context in (pod_context, *((c.get("securityContext") or {}) for _, c in _containers(spec))):
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            denied.append("seccomp Unconfined")
        if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
            denied.append("AppArmor Unconfined")
        if str((context.get("seLinuxOptions") or {}).get("type") or "") not in SELINUX_TYPES:
            denied.append("SELinux type")
    for _, container in _containers(spec):
        name = container.get("name")
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            denied.append(f"container {name} is privileged")
        added = set((context.get("capabilities") or {}).get("add") or ()) - set(BASELINE_CAPABILITIES)
        if added:
            denied.append(f"container {name} adds {', '.join(sorted(added))}")
        if context.get("procMount") not in (None, "Default"):
            denied.append(f"container {name} procMount")
        if any(port.get("hostPort") for port in container.get("ports") or ()):
            denied.append(f"container {name} uses a host port")
    return denied


def denials(obj: Mapping[str, Any]) -> list[str]:
    """Why AKS Automatic's Deployment Safeguards (at Enforce, with baseline Pod Security) deny ``obj`` in a namespace
    they cover; empty when they admit it."""
    if obj.get("kind") == "StorageClass":
        provisioner = str(obj.get("provisioner") or "")
        return [f"in-tree provisioner {provisioner}"] if provisioner in IN_TREE_PROVISIONERS else []
    denied = [f"label {key} is reserved for AKS" for key in _aks_labels(obj.get("metadata") or {})]
    pod = pod_template(obj)
    if pod is None:
        return denied
    metadata, spec = pod
    denied += [f"pod label {key} is reserved for AKS" for key in _aks_labels(metadata)]
    for field, container in _containers(spec):
        name = container.get("name")
        if not _image_has_version(str(container.get("image") or "")):
            denied.append(f"container {name}: image without a version tag")
        if field == "containers":
            missing = [probe for probe in ("livenessProbe", "readinessProbe") if probe not in container]
            if missing:
                denied.append(f"container {name} has no {' or '.join(missing)}")
    return denied + _baseline(spec)
