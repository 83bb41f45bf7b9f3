"""The placement and validation practices: every GPU node fenced by a GPU taint, no pod on it that asks for no GPU
(``gpu-node-untainted``, ``gpu-squatter``), and every GPU node exposing a GPU resource (``device-plugin-missing``).
Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from aks_gpu.audit.judging import Commands, Run, count_shown
from aks_gpu.audit.stack import StackExpectations
from aks_gpu.cluster.inventory import FENCING_EFFECTS, GpuNode, PodInfo
from aks_gpu.naming import vendor_resource

# Namespaces whose pods may run on GPU nodes without asking for a GPU: AKS's own, and where the GPU stacks AKS and
# the vendors document install their agents. A stack's own (--stack) come on top.
GPU_STACK_NAMESPACES: dict[str, str] = {
    # AKS's node agents (https://learn.microsoft.com/azure/aks/core-aks-concepts); see admission_exemptions.yaml.
    "kube-system": "AKS's node agents and add-ons",
    # AKS's NVIDIA device plugin walkthrough (https://learn.microsoft.com/azure/aks/use-nvidia-gpu) and this toolkit.
    "gpu-resources": "the NVIDIA device plugin of AKS's walkthrough, and this toolkit's GPU agents",
    # helm install ... -n gpu-operator (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html)
    "gpu-operator": "the NVIDIA GPU Operator",
    # helm upgrade -i nvdp nvdp/nvidia-device-plugin --namespace nvidia-device-plugin
    # (https://github.com/NVIDIA/k8s-device-plugin#deployment-via-helm)
    "nvidia-device-plugin": "the NVIDIA device plugin's Helm chart",
    # helm install amd-gpu-operator ... --namespace kube-amd-gpu
    # (https://instinct.docs.amd.com/projects/gpu-operator/en/latest/installation/kubernetes-helm.html)
    "kube-amd-gpu": "the AMD GPU Operator",
}


def _fences(node: GpuNode, stack: StackExpectations | None) -> tuple[tuple[str, str | None, str], ...] | None:
    """The taints that count as the node's GPU fence: the stack pool's (all of them needed), or None for "any one
    of the generic ones" (the vendor's key, or sku=gpu)."""
    if stack is not None and node.stack_pool is not None:
        return stack.pools[node.stack_pool].taints
    return None


def judge_placement(
    run: Run,
    nodes: Sequence[GpuNode],
    on_node: Mapping[str, Sequence[PodInfo]],
    stack: StackExpectations | None,
    commands: Commands,
) -> None:
    run.checked.update(("gpu-node-untainted", "gpu-squatter"))
    untainted: set[str] = set()
    for node in nodes:
        problem = _untainted(node, stack, commands)
        if problem is not None:
            untainted.add(node.name)
            run.add("gpu-node-untainted", "fail", *problem, node=node.name)

    exempt = set(GPU_STACK_NAMESPACES) | (set(stack.gpu_namespaces) if stack else set())
    for node in nodes:
        for pod in on_node.get(node.name, ()):
            if pod.phase != "Running" or pod.gpus > 0 or pod.daemonset or pod.static or pod.namespace in exempt:
                continue
            how = (
                "the node has no GPU taint (see gpu-node-untainted)"
                if node.name in untainted
                else "it tolerates the node's GPU taint (or ran there before the taint)"
            )
            run.add(
                "gpu-squatter",
                "fail",
                f"pod runs on GPU node {node.name} (pool {node.pool}) and requests no GPU: {how}. It takes the node's CPU "
                "and memory from GPU work and keeps the autoscaler from removing the node",
                "Move the pod to a CPU pool: give its workload a node selector for a CPU pool and no toleration of the GPU taint",
                node=node.name,
                namespace=pod.namespace,
                pod=pod.name,
            )


def _untainted(node: GpuNode, stack: StackExpectations | None, commands: Commands) -> tuple[str, str] | None:
    """Why the node lacks its fence and what to do, None when it has it."""
    taints = ", ".join(str(taint) for taint in node.taints) or "none"
    required = _fences(node, stack)
    if required is not None:
        missing = [
            f"{key}={value}:{effect}" if value else f"{key}:{effect}"
            for key, value, effect in required
            if not any(t.key == key and (not value or t.value == value) and t.effect == effect for t in node.taints)
        ]
        if not missing:
            return None
        assert stack is not None and node.stack_pool is not None
        return (
            f"node lacks the taint(s) {', '.join(missing)} that pool {node.stack_pool} of stack {stack.name} sets (its "
            f"taints: {taints}): pods that do not ask for a GPU can land here",
            f"Run `pulumi up --stack {stack.name}` to put the pool's taints back (new nodes get them from the pool; a node "
            "tainted by hand loses the taint on reimage)",
        )
    keys = [vendor_resource(node.vendor)] if node.vendor else [vendor_resource("nvidia"), vendor_resource("amd")]
    for taint in node.taints:
        if taint.effect in FENCING_EFFECTS and (taint.key in keys or (taint.key == "sku" and taint.value == "gpu")):
            return None
    soft = [str(t) for t in node.taints if t.key in keys or t.key == "sku"]
    why = f"its {', '.join(soft)} only asks the scheduler (PreferNoSchedule)" if soft else f"its taints: {taints}"
    fence = f"{keys[0]}=present:NoSchedule"
    return (
        f"GPU node ({node.evidence}) has no NoSchedule taint that keeps general pods off ({why})",
        f"Taint pool {node.pool} with {fence} (or sku=gpu:NoSchedule, as AKS's walkthrough does), e.g. "
        f"{commands.nodepool('update', node.pool, f' --node-taints {fence}')}, and give GPU pods the toleration",
    )


# ---------------------------------------------------------------- validation


def judge_validation(run: Run, nodes: Sequence[GpuNode], stack: StackExpectations | None) -> None:
    run.checked.add("device-plugin-missing")
    for node in nodes:
        exposed = {name: value for name, value in node.capacity.items() if value > 0}
        shown = ", ".join(f"{name} x {count_shown(value)}" for name, value in sorted(exposed.items()))
        expected = stack.pools[node.stack_pool] if stack is not None and node.stack_pool is not None else None
        if expected is not None and stack is not None:
            if node.capacity.get(expected.resource, Fraction(0)) > 0:
                continue
            instead = (
                f"it shows {shown} instead: the plugin runs with another MIG strategy or sharing"
                if shown
                else ("it shows no GPU resource: the device plugin does not run on it or has not registered the GPUs")
            )
            run.add(
                "device-plugin-missing",
                "fail",
                f"capacity has no {expected.resource}, the resource pool {expected.name} of stack {stack.name} exposes; "
                f"{instead}",
                f"Check the device plugin pod on the node with `aksgpu validate --stack {stack.name}`",
                node=node.name,
            )
            continue
        if exposed:
            continue
        zero = ", ".join(f"{name} is 0" for name in sorted(node.capacity))
        run.add(
            "device-plugin-missing",
            "fail",
            f"GPU node ({node.evidence}) exposes no GPU resource ({'capacity ' + zero if zero else 'nothing in its capacity'}): "
            "GPU pods cannot be scheduled here",
            "Deploy the vendor's device plugin DaemonSet (or GPU Operator) so a pod of it runs on this node (it must "
            "tolerate the node's taints), then read that pod's log",
            node=node.name,
        )
