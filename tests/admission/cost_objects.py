"""Objects sized around the API server's CEL cost limits (issue #23), for the prod stack's policies.

One definition, used three ways: ``tools/admission-server-decisions`` records what the real environment decides for
``cases()`` (tests/fixtures/kubernetes_cel/costs/policy-objects.json), the suite checks both engines against that record
(the small objects), and ``bench/admission_cost.py`` the large ones.
"""

from __future__ import annotations

from typing import Any

NVIDIA_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _pod(name: str, spec: dict[str, Any], gpu: bool = True) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3"}
    if gpu:
        container["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "gpu-training"},
        "spec": {"containers": [container], **spec},
    }


def cpu_pod_with_gpu_tolerations(count: int) -> dict[str, Any]:
    """A pod without GPUs tolerating the GPU taint ``count`` times: its ``gpuTolerations`` variable tests each
    toleration for membership in the list of them, cost O(count²), so the per-call limit falls near 1,000."""
    return _pod(f"cpu-tolerations-{count}", {"tolerations": [dict(NVIDIA_TOLERATION) for _ in range(count)]}, gpu=False)


def gpu_pod_with_node_selector_keys(count: int) -> dict[str, Any]:
    """A GPU pod whose nodeSelector holds ``count`` keys that name no pool: ``selectsPool`` walks them all."""
    selector = {f"example.com/key-{index}": "x" for index in range(count)}
    return _pod(f"node-selector-{count}", {"tolerations": [NVIDIA_TOLERATION], "nodeSelector": selector})


def gpu_pod_pinned_to_hostnames(count: int) -> dict[str, Any]:
    """A GPU pod pinned by a required node affinity to ``count`` hostnames of its own pool (admitted below the limit)."""
    values = [f"aks-train-12345678-vmss{index:06x}" for index in range(count)]
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": values}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return _pod(f"hostnames-{count}", {"tolerations": [NVIDIA_TOLERATION], "affinity": affinity})


def deployment_pinned_to_hostnames(count: int, name: str) -> dict[str, Any]:
    """A GPU Deployment in gpu-training whose required node affinity lists ``count`` hostnames (``name``: a format
    of the index). Its template has no PodNodeSelector selector yet, so the policy walks every pool's names: over
    the per-call limit from about 40,000 names (issue 40: 55,000 took the offline check 100 s of CPU)."""
    values = [name.format(index) for index in range(count)]
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": values}]}
    container = {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    template = {
        "metadata": {"labels": {"app": "pinned"}},
        "spec": {
            "containers": [container],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"pinned-{count}", "namespace": "gpu-training"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "pinned"}}, "template": template},
    }


def pod_with_env(containers: int, variables: int) -> dict[str, Any]:
    """``containers`` containers of ``variables`` env vars each (no GPU): every one is scanned for device variables."""
    env = [{"name": f"VAR_{index}", "value": "x"} for index in range(variables)]
    pod = _pod(f"env-{containers}x{variables}", {}, gpu=False)
    pod["spec"]["containers"] = [{"name": f"c{index}", "image": "busybox", "env": env} for index in range(containers)]
    return pod


# Small enough for the suite (cel-python decides each in well under a second).
# 992 tolerations: gpuTolerations costs just under the per-call limit (the rule's own message); 993: just over.
SMALL = {f"cpu-tolerations-{n}": cpu_pod_with_gpu_tolerations(n) for n in (10, 100, 300, 992, 993)}
# The large ones: bench/admission_cost.py.
LARGE = {
    **{f"node-selector-{n}": gpu_pod_with_node_selector_keys(n) for n in (50_000, 55_000, 75_000)},
    **{f"hostnames-{n}": gpu_pod_pinned_to_hostnames(n) for n in (12_000, 55_000)},
    "env-11x1000": pod_with_env(11, 1000),
}


def cases() -> dict[str, dict[str, Any]]:
    return {**SMALL, **LARGE}
