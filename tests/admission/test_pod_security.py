"""RDMA workloads: Pod Security baseline plus IPC_LOCK, enforced by the namespace's own policy, on both CEL engines.

Each case is a pod in an ``rdma: true`` namespace and the control it tests; baseline's controls as the Pod Security
Standards list them (https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline)."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.admission.engine import ENGINE_NAMES, engine_named
from aks_gpu.admission.evaluate import evaluate
from aks_gpu.admission.pod_security import policy_name, rdma_policy_manifests
from aks_gpu.config.problems import ConfigError
from aks_gpu.kube.workload_manifests import namespace_manifest, workload_manifests
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import raw_stack

NS = "gpu-training"
PREFIX = "Pod Security baseline (with IPC_LOCK for RDMA): "


def pod(container: dict[str, Any] | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    main = {"name": "nccl", "image": "nccl-tests", **(container or {})}
    metadata: dict[str, Any] = {"name": "p", "namespace": NS}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [main], **spec}}


def caps(*add: str) -> dict[str, Any]:
    return {"securityContext": {"capabilities": {"add": list(add)}}}


CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("IPC_LOCK for RDMA memory registration", pod(caps("IPC_LOCK")), None),
    ("IPC_LOCK with baseline's own capabilities", pod(caps("IPC_LOCK", "NET_BIND_SERVICE", "CHOWN")), None),
    ("a plain pod", pod(), None),
    (
        "SYS_ADMIN is more than RDMA needs",
        pod(caps("IPC_LOCK", "SYS_ADMIN")),
        "only baseline's capabilities and IPC_LOCK may be added: nccl adds SYS_ADMIN",
    ),
    ("NET_RAW", pod(caps("NET_RAW")), "nccl adds NET_RAW"),
    ("privileged", pod({"securityContext": {"privileged": True}}), "privileged containers are not allowed: nccl"),
    ("hostNetwork", pod(hostNetwork=True), "host namespaces are not allowed: hostNetwork"),
    ("hostPID and hostIPC", pod(hostPID=True, hostIPC=True), "host namespaces are not allowed: hostPID, hostIPC"),
    ("hostPath", pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "hostPath volumes are not allowed: root"),
    ("host port", pod({"ports": [{"containerPort": 80, "hostPort": 8080}]}), "host ports are not allowed: nccl (8080)"),
    ("container port only", pod({"ports": [{"containerPort": 80}]}), None),
    (
        "seccomp Unconfined",
        pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
        "seccomp may not be Unconfined: the pod",
    ),
    ("seccomp RuntimeDefault", pod(securityContext={"seccompProfile": {"type": "RuntimeDefault"}}), None),
    (
        "unsafe sysctl",
        pod(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}),
        "only safe sysctls are allowed: kernel.msgmax",
    ),
    ("safe sysctl", pod(securityContext={"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]}), None),
    ("procMount Unmasked", pod({"securityContext": {"procMount": "Unmasked"}}), "procMount must be Default: nccl"),
    (
        "AppArmor unconfined",
        pod({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
        "AppArmor may not be set to unconfined: nccl",
    ),
    (
        "AppArmor annotation unconfined",
        pod(annotations={"container.apparmor.security.beta.kubernetes.io/nccl": "unconfined"}),
        "AppArmor may not be set to unconfined",
    ),
    (
        "SELinux type spc_t",
        pod({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}),
        "custom SELinux user, role or type are not allowed: nccl",
    ),
    (
        "Windows HostProcess",
        pod(securityContext={"windowsOptions": {"hostProcess": True}}),
        "Windows HostProcess pods are not allowed: the pod",
    ),
    (
        "ephemeral container adds SYS_PTRACE",
        pod(ephemeralContainers=[{"name": "debug", "image": "busybox", **caps("SYS_PTRACE")}]),
        "debug adds SYS_PTRACE",
    ),
]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize(("control", "obj", "denial"), CASES, ids=[case[0] for case in CASES])
def test_baseline_with_ipc_lock(engine: str, control: str, obj: dict[str, Any], denial: str | None) -> None:
    [decision] = evaluate([obj], rdma_policy_manifests(NS), engine=engine_named(engine))
    if denial is None:
        assert decision.allowed, decision.messages
    else:
        assert not decision.allowed
        [message] = decision.messages
        assert message.startswith(PREFIX) and denial in message, message


def test_templates_are_judged_and_other_namespaces_are_not() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": NS},
        "spec": {"template": {"spec": pod(caps("SYS_ADMIN"))["spec"]}},
    }
    elsewhere = pod(caps("SYS_ADMIN"))
    elsewhere["metadata"]["namespace"] = "gpu-inference"
    denied, outside = evaluate([deployment, elsewhere], rdma_policy_manifests(NS))
    assert not denied.allowed and outside.allowed


def rdma_workload() -> Any:
    raw = raw_stack("prod")
    raw["aks-gpu:workloads"][0]["rdma"] = True
    return validate_stack(raw, "test").config.workloads[0]


def test_an_rdma_namespace_trades_psa_enforcement_for_its_own_policy_created_first() -> None:
    workload = rdma_workload()
    labels = namespace_manifest(workload)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    policy, binding, namespace, *_ = workload_manifests(workload, "nvidia.com/gpu")
    assert (policy["kind"], binding["kind"], namespace["kind"]) == (
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "Namespace",
    )
    assert policy["metadata"]["name"] == binding["spec"]["policyName"] == policy_name("gpu-training")
    assert binding["spec"]["validationActions"] == ["Deny"]
    plain = validate_stack(raw_stack("prod"), "test").config.workloads[0]
    assert namespace_manifest(plain)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert workload_manifests(plain, "nvidia.com/gpu")[0]["kind"] == "Namespace"


def test_rdma_with_restricted_is_refused() -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:workloads"][0] |= {"rdma": True, "podSecurity": "restricted"}
    with pytest.raises(ConfigError) as error:
        validate_stack(raw, "test")
    assert any(p.path == "aks-gpu:workloads[0].rdma" and "IPC_LOCK" in p.message for p in error.value.problems)
