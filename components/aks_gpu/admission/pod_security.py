"""Pod Security baseline plus IPC_LOCK: the narrow way RDMA/InfiniBand jobs run in a workload namespace. Pure.

RDMA jobs on ND sizes (InfiniBand) register memory with the HCA, which needs ``CAP_IPC_LOCK``
(https://azure.github.io/aks-rdma-infiniband/, the NCCL/perftest pods add it). Pod Security ``baseline`` allows
no capability beyond its short list, and Pod Security Admission has no per-capability exception: a namespace
enforces a level or it does not. So a workload with ``rdma: true`` gets its namespace's Pod Security enforce level
set to ``privileged`` (warn and audit stay at ``restricted``), and in its place this ValidatingAdmissionPolicy,
bound to that namespace alone, enforces every baseline control with IPC_LOCK added to the allowed capabilities.
Nothing else is relaxed: no privileged containers, host namespaces, hostPath, host ports, unsafe sysctls...

The controls and their allowed values are Kubernetes' Pod Security Standards, baseline profile:
https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline (as of Kubernetes 1.33). The policy
and binding are created before the namespace's label is relaxed (``GpuWorkloadNamespace`` orders them), so there is
no moment in which the namespace enforces nothing.
"""

from __future__ import annotations

from typing import Any

from aks_gpu.admission.policy import API_VERSION, lit, lit_list, match_constraints, pod_spec_of
from aks_gpu.naming import NAMESPACE_NAME_LABEL, platform_object_name

Manifest = dict[str, Any]

POLICY_PREFIX = platform_object_name("rdma-baseline-")
# Baseline's allowed added capabilities, plus the one RDMA needs.
BASELINE_CAPABILITIES = (
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP",
    "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
)  # fmt: skip
RDMA_CAPABILITY = "IPC_LOCK"
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)  # fmt: skip
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def policy_name(namespace: str) -> str:
    return POLICY_PREFIX + namespace


def _annotations_of(obj: str) -> str:
    return f"(has({obj}.metadata) && has({obj}.metadata.annotations) ? {obj}.metadata.annotations : {{}})"


def _variables() -> list[dict[str, str]]:
    spec = "variables.podSpec"
    context = f"(has({spec}.securityContext) ? {spec}.securityContext : {{}})"
    return [
        {"name": "podSpec", "expression": pod_spec_of("object")},
        {
            "name": "containers",
            "expression": " + ".join(
                f"(has({spec}.{field}) ? {spec}.{field} : [])"
                for field in ("containers", "initContainers", "ephemeralContainers")
            ),
        },
        {"name": "podContext", "expression": context},
        # Every container's securityContext (or an empty one), with the container's name.
        {
            "name": "contexts",
            "expression": "variables.containers.map(c, {'name': c.name, 'sc': has(c.securityContext) ? c.securityContext : {}})",
        },
        {
            "name": "annotations",
            "expression": (
                f"request.kind.kind == 'Pod' ? {_annotations_of('object')} : (request.kind.kind == 'CronJob' ? "
                f"{_annotations_of('object.spec.jobTemplate.spec.template')} : {_annotations_of('object.spec.template')})"
            ),
        },
    ]


def _check(expression: str, message: str, offenders: str, title: str) -> dict[str, str]:
    """A baseline control: ``expression`` holds; otherwise the message names what broke it (``offenders``: a CEL
    list of strings)."""
    return {
        "expression": expression,
        "message": f"{title}: {message}",
        "messageExpression": f"{lit(f'{title}: {message}: ')} + ({offenders}).join(', ')",
        "reason": "Forbidden",
    }


def _validations(extra_capabilities: tuple[str, ...] = (RDMA_CAPABILITY,)) -> list[dict[str, str]]:
    spec = "variables.podSpec"
    allowed_caps = lit_list((*BASELINE_CAPABILITIES, *extra_capabilities))
    also = "".join(f" and {capability}" for capability in extra_capabilities)
    host_ns = [field for field in ("hostNetwork", "hostPID", "hostIPC")]
    host_ns_list = " + ".join(f"(has({spec}.{f}) && {spec}.{f} ? [{lit(f)}] : [])" for f in host_ns)
    extra_caps = (
        "variables.contexts.filter(x, has(x.sc.capabilities) && has(x.sc.capabilities.add) && "
        f"x.sc.capabilities.add.exists(a, !(a in {allowed_caps})))"
        f".map(x, x.name + ' adds ' + x.sc.capabilities.add.filter(a, !(a in {allowed_caps})).join(', '))"
    )
    privileged = "variables.contexts.filter(x, has(x.sc.privileged) && x.sc.privileged).map(x, x.name)"
    host_process = (
        "(has(variables.podContext.windowsOptions) && has(variables.podContext.windowsOptions.hostProcess) && "
        "variables.podContext.windowsOptions.hostProcess ? ['the pod'] : []) + variables.contexts.filter(x, "
        "has(x.sc.windowsOptions) && has(x.sc.windowsOptions.hostProcess) && x.sc.windowsOptions.hostProcess).map(x, x.name)"
    )
    host_paths = f"(has({spec}.volumes) ? {spec}.volumes : []).filter(v, has(v.hostPath)).map(v, v.name)"
    bound = "has(p.hostPort) && p.hostPort != 0"
    host_ports = (
        f"variables.containers.filter(c, has(c.ports) && c.ports.exists(p, {bound}))"
        f".map(c, c.name + ' (' + c.ports.filter(p, {bound}).map(p, string(p.hostPort)).join(', ') + ')')"
    )
    apparmor_ok = (
        "(!has({sc}.appArmorProfile) || !has({sc}.appArmorProfile.type) || "
        "{sc}.appArmorProfile.type in ['RuntimeDefault', 'Localhost'])"
    )
    apparmor = (
        f"({apparmor_ok.format(sc='variables.podContext')} ? [] : ['the pod']) + "
        f"variables.contexts.filter(x, !{apparmor_ok.format(sc='x.sc')}).map(x, x.name) + "
        f"variables.annotations.filter(k, k.startsWith({lit(APPARMOR_ANNOTATION_PREFIX)}) && "
        "!(variables.annotations[k] == 'runtime/default' || variables.annotations[k].startsWith('localhost/')))"
    )
    selinux_ok = (
        "(!has({sc}.seLinuxOptions) || ((!has({sc}.seLinuxOptions.type) || {sc}.seLinuxOptions.type in "
        + lit_list(SELINUX_TYPES)
        + ") && (!has({sc}.seLinuxOptions.user) || {sc}.seLinuxOptions.user == '') && "
        "(!has({sc}.seLinuxOptions.role) || {sc}.seLinuxOptions.role == '')))"
    )
    selinux = (
        f"({selinux_ok.format(sc='variables.podContext')} ? [] : ['the pod']) + "
        f"variables.contexts.filter(x, !{selinux_ok.format(sc='x.sc')}).map(x, x.name)"
    )
    proc_mount = "variables.contexts.filter(x, has(x.sc.procMount) && x.sc.procMount != 'Default').map(x, x.name)"
    seccomp_bad = "(has({sc}.seccompProfile) && has({sc}.seccompProfile.type) && {sc}.seccompProfile.type == 'Unconfined')"
    seccomp = (
        f"({seccomp_bad.format(sc='variables.podContext')} ? ['the pod'] : []) + "
        f"variables.contexts.filter(x, {seccomp_bad.format(sc='x.sc')}).map(x, x.name)"
    )
    sysctls = (
        "(has(variables.podContext.sysctls) ? variables.podContext.sysctls : [])"
        f".filter(s, !(s.name in {lit_list(SAFE_SYSCTLS)})).map(s, s.name)"
    )
    checks = [
        (host_process, "Windows HostProcess pods are not allowed"),
        (host_ns_list, "host namespaces are not allowed"),
        (privileged, "privileged containers are not allowed"),
        (extra_caps, f"only baseline's capabilities{also} may be added"),
        (host_paths, "hostPath volumes are not allowed"),
        (host_ports, "host ports are not allowed"),
        (apparmor, "AppArmor may not be set to unconfined"),
        (selinux, "custom SELinux user, role or type are not allowed"),
        (proc_mount, "procMount must be Default"),
        (seccomp, "seccomp may not be Unconfined"),
        (sysctls, "only safe sysctls are allowed"),
    ]
    title = "Pod Security baseline" + (f" (with {', '.join(extra_capabilities)} for RDMA)" if extra_capabilities else "")
    return [_check(f"size({offenders}) == 0", message, offenders, title) for offenders, message in checks]


def rdma_policy_manifests(namespace: str) -> list[Manifest]:
    """The policy and its binding for one RDMA workload namespace (selected by its immutable name label)."""
    return _policy_manifests(namespace, policy_name(namespace), (RDMA_CAPABILITY,))


def baseline_policy_manifests(namespace: str) -> list[Manifest]:
    """Pod Security baseline itself as a policy, for ``aksgpu admission check`` to evaluate offline what a
    namespace enforcing baseline refuses (never deployed: Pod Security admission does that on the cluster)."""
    return _policy_manifests(namespace, f"pod-security-baseline-{namespace}", ())


def _policy_manifests(namespace: str, name: str, extra_capabilities: tuple[str, ...]) -> list[Manifest]:
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": match_constraints(
            {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": [namespace]}]}
        ),
        "variables": _variables(),
        "validations": _validations(extra_capabilities),
    }
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": spec,
        },
        {
            "apiVersion": API_VERSION,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        },
    ]
