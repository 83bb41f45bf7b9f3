"""Realistic cluster snapshots for the validation tests and the benchmark.

``healthy_snapshot(model, targets, nodes)`` builds what a correct deployment of ``model`` looks like, in the
shapes ``kubectl get ... -o json`` prints: AKS GPU nodes (labels, taints, Ready condition, allocatable),
the device plugin DaemonSets and one ready plugin pod per node, and an SMI output per node. Tests then
break one thing at a time with the small editors below.

SMI text: a real published output where one fits the VM size (``REAL_SMI``), else one generated in the
layout of nvidia-smi R530 and later (``nvidia_smi_table``), which ``parse_smi`` reads like the real one.
"""

from __future__ import annotations

import copy
import json
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from components.kube.plugin_targets import PluginTarget
from components.model import PlatformModel, ResolvedPool
from components.validation.snapshot import ClusterSnapshot
from tests.conftest import SMI_FIXTURES_DIR

# VM size -> a real output of that size's SMI command (tests/fixtures/smi/SOURCES.md says where from).
REAL_SMI = {
    "Standard_ND96isr_H100_v5": "02_nvidia-smi_table_8xh100_565.57.01.txt",  # 8x H100 80GB, 565.57.01, MIG off
    "Standard_ND96isr_MI300X_v5": "50_amd-smi_default_8xmi300x_rocm7.0.0.txt",  # 8x MI300X, amdgpu 6.12.12
}
# The GPU names and memory nvidia-smi prints, for the sizes the generated tables stand in for.
NVIDIA_GPUS = {
    "A100-80GB": ("NVIDIA A100 80GB PCIe", 81920),
    "A100-40GB": ("NVIDIA A100-SXM4-40GB", 40960),
    "H100-80GB": ("NVIDIA H100 80GB HBM3", 81559),
    "H100-NVL-94GB": ("NVIDIA H100 NVL", 95830),
    "H200-141GB": ("NVIDIA H200", 143771),
    "T4": ("Tesla T4", 15360),
    "A10": ("NVIDIA A10", 23028),
}
DEFAULT_DRIVER = ("565.57.01", "12.7")


def fixture_text(name: str) -> str:
    return (SMI_FIXTURES_DIR / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------- nvidia-smi, generated


def nvidia_smi_table(
    *,
    gpus: int,
    gpu_name: str,
    memory_mib: int,
    driver: str = DEFAULT_DRIVER[0],
    cuda: str = DEFAULT_DRIVER[1],
    mig: bool = False,
    mig_capable: bool = True,
    mig_devices_per_gpu: int = 0,
    mig_memory_mib: int = 9728,
    seed: int = 0,
) -> str:
    """The default ``nvidia-smi`` output of one node, in the 91-column layout of R550 and later (fixture 02).

    ``seed`` varies temperatures, power and memory in use, so generated nodes do not share one text. A GPU
    without MIG (``mig_capable=False``, a T4) shows "N/A" as its MIG mode, as nvidia-smi prints it.
    """
    gpu_cells = (41, 24, 22)  # the widths between the "|" of the GPU table
    mig_cells = (18, 34, 11, 23)
    width = sum(gpu_cells) + len(gpu_cells) + 1

    def rule(cells: tuple[int, ...]) -> str:
        return "+" + "+".join("-" * cell for cell in cells) + "+"

    def row(cells: tuple[int, ...], *texts: str) -> str:
        return "|" + "|".join(text.ljust(cell)[:cell] for text, cell in zip(texts, cells, strict=True)) + "|"

    full = (width - 2,)
    lines = [
        "Tue Nov 12 10:21:32 2024       ",
        rule(full),
        row(full, f" NVIDIA-SMI {driver:<22} Driver Version: {driver:<14} CUDA Version: {cuda:<8}"),
        "|" + "+".join("-" * cell for cell in gpu_cells) + "+",
        row(gpu_cells, " GPU  Name                 Persistence-M ", " Bus-Id          Disp.A ", " Volatile Uncorr. ECC "),
        row(gpu_cells, " Fan  Temp   Perf          Pwr:Usage/Cap ", "           Memory-Usage ", " GPU-Util  Compute M. "),
        row(gpu_cells, "", "", "               MIG M. "),
        "|" + "+".join("=" * cell for cell in gpu_cells) + "|",
    ]
    bus_ids = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
    for index in range(gpus):
        temperature = 28 + (seed * 7 + index * 3) % 15
        power = 60 + (seed * 13 + index * 5) % 60
        used = 13 * mig_devices_per_gpu if mig else 1 + (seed + index) % 7
        bus = f"00000000:{bus_ids[index % len(bus_ids)]}:00.0"
        lines += [
            row(gpu_cells, f"{index:>4}  {gpu_name:<31}On  ", f"{bus:>19} Off ", f"{'On' if mig else '0':>21} "),
            row(
                gpu_cells,
                f" N/A   {temperature}C    P0 {power:>14}W /  700W ",
                f"{used:>8}MiB / {memory_mib:>6}MiB ",
                f"{'N/A' if mig else '0%':>8}      Default ",
            ),
            row(gpu_cells, "", "", f"{'Enabled' if mig else 'Disabled' if mig_capable else 'N/A':>21} "),
            rule(gpu_cells),
        ]
    if mig:
        mig_rule = rule(mig_cells)
        lines += [
            rule(full),
            row(full, " MIG devices:"),
            mig_rule,
            row(mig_cells, " GPU  GI  CI  MIG ", " " * 21 + "Memory-Usage ", "        Vol", "        Shared         "),
            row(mig_cells, "      ID  ID  Dev ", " " * 23 + "BAR1-Usage ", " SM     Unc", " CE ENC  DEC  OFA  JPG "),
            row(mig_cells, "", "", "        ECC", ""),
            "|" + "+".join("=" * cell for cell in mig_cells) + "|",
        ]
        if mig_devices_per_gpu == 0:
            lines += [row(full, "  No MIG devices found"), rule(full)]
        for index in range(gpus):
            for device in range(mig_devices_per_gpu):
                lines += [
                    row(
                        mig_cells,
                        f" {index:>2} {7 + device:>4} {0:>3} {device:>3}  ",
                        f"{13:>19}MiB / {mig_memory_mib:>5}MiB ",
                        " 16      0 ",
                        "  1   0    1    0    1 ",
                    ),
                    row(mig_cells, "", f"{0:>19}MiB / 16383MiB ", "", ""),
                    mig_rule,
                ]
    lines += [
        " " * (width - 2),
        rule(full),
        row(full, " Processes:"),
        row(full, "  GPU   GI   CI        PID   Type   Process name                              GPU Memory"),
        row(full, "        ID   ID                                                               Usage     "),
        "|" + "=" * (width - 2) + "|",
        row(full, "  No running processes found"),
        rule(full),
    ]
    return "\n".join(lines) + "\n"


def smi_for(pool: ResolvedPool, *, seed: int = 0, driver: str | None = None, mig_devices_per_gpu: int | None = None) -> str:
    """A healthy SMI output for one node of ``pool``: the real fixture for its size when there is one and
    nothing asks for a variation, else a generated nvidia-smi table with the pool's GPUs and MIG layout."""
    size = pool.vm_size.name if pool.vm_size else pool.config.vm_size
    if size in REAL_SMI and driver is None and mig_devices_per_gpu is None and pool.mig_profile is None:
        return fixture_text(REAL_SMI[size])
    assert pool.vendor == "nvidia", f"no generated SMI output for {pool.vendor} pools; add a real fixture for {size}"
    assert pool.gpu_model is not None and pool.gpus_per_node is not None
    name, memory = NVIDIA_GPUS[pool.gpu_model.key]
    devices = mig_devices_per_gpu if mig_devices_per_gpu is not None else (pool.mig_instances_per_gpu or 0)
    return nvidia_smi_table(
        gpus=pool.gpus_per_node,
        gpu_name=name,
        memory_mib=memory,
        driver=driver or DEFAULT_DRIVER[0],
        mig=pool.mig_profile is not None,
        mig_capable=pool.gpu_model.supports_mig,
        mig_devices_per_gpu=devices,
        seed=seed,
    )


# ---------------------------------------------------------------- Kubernetes objects


def node_name(pool: str, index: int) -> str:
    """AKS's naming: aks-<pool>-<8 digits>-vmss<6 base-36 digits>."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    suffix = ""
    value = index
    for _ in range(6):
        value, digit = divmod(value, 36)
        suffix = digits[digit] + suffix
    return f"aks-{pool}-31415926-vmss{suffix}"


def gpu_node(pool: ResolvedPool, target: PluginTarget, name: str) -> dict[str, Any]:
    size = pool.vm_size.name if pool.vm_size else pool.config.vm_size
    allocatable = {"cpu": "95860m", "ephemeral-storage": "119703055367", "memory": "1849787772Ki", "pods": "30"}
    if target.count_per_node is not None:
        allocatable[target.resource_name] = str(target.count_per_node)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "agentpool": pool.name,
                "kubernetes.azure.com/agentpool": pool.name,
                "kubernetes.azure.com/mode": "user",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": size,
                **pool.node_labels,
            },
        },
        "spec": {
            "providerID": f"azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/"
            f"virtualMachineScaleSets/aks-{pool.name}-31415926-vmss/virtualMachines/0",
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints],
        },
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.2", "osImage": "Ubuntu 22.04.5 LTS", "kernelVersion": "5.15.0-1079-azure"},
        },
    }


def daemonset(target: PluginTarget, name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": target.namespace, "generation": 1},
        "spec": {
            "selector": {"matchLabels": dict(target.pod_labels)},
            "template": {"metadata": {"labels": dict(target.pod_labels)}},
        },
        "status": {
            "currentNumberScheduled": count,
            "desiredNumberScheduled": count,
            "numberAvailable": count,
            "numberMisscheduled": 0,
            "numberReady": count,
            "observedGeneration": 1,
            "updatedNumberScheduled": count,
        },
    }


def plugin_pod(target: PluginTarget, daemonset_name: str, node: str) -> dict[str, Any]:
    container = target.container or "device-plugin"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{daemonset_name}-{pod_suffix(node)}",
            "namespace": target.namespace,
            "labels": {**target.pod_labels, "controller-revision-hash": "5d7f8c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset_name, "controller": True}],
        },
        "spec": {"nodeName": node, "containers": [{"name": container}]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
            ],
            "containerStatuses": [
                {"name": container, "ready": True, "restartCount": 0, "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}
            ],
        },
    }


def pod_suffix(node: str) -> str:
    """The 5 characters a DaemonSet appends to its pods' names: random there, derived from the node here."""
    value = zlib.crc32(node.encode())
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the characters Kubernetes uses for generated names
    return "".join(alphabet[(value >> (5 * i)) % len(alphabet)] for i in range(5))


def daemonset_name(target: PluginTarget) -> str:
    """<app>-daemonset, as the static manifests name the plugins' DaemonSets (the GPU Operator's app label
    already ends so); one per app, shared by every pool whose target selects the same pods."""
    labels = target.pod_labels
    app = labels.get("app.kubernetes.io/name") or labels.get("app") or "device-plugin"
    return app if app.endswith("-daemonset") else f"{app}-daemonset"


def healthy_snapshot(
    model: PlatformModel,
    targets: Mapping[str, PluginTarget],
    nodes: Mapping[str, int],
    smi: Callable[[ResolvedPool, int], str] | None = None,
) -> ClusterSnapshot:
    """A deployment of ``model`` where every check passes: ``nodes[pool]`` nodes per pool (0 when absent).

    ``smi(pool, index)`` gives each node's SMI output (default: ``smi_for``). A system node and a pod in
    another namespace are there too, as in a real cluster, and the checks must ignore them.
    """
    make_smi = smi or (lambda pool, index: smi_for(pool, seed=index))
    node_items: list[dict[str, Any]] = [_system_node()]
    pods: list[dict[str, Any]] = [_other_pod()]
    outputs: dict[str, str] = {}
    per_daemonset: dict[tuple[str, str], tuple[PluginTarget, int]] = {}
    for pool in model.pools:
        target = targets[pool.name]
        name = daemonset_name(target)
        count = nodes.get(pool.name, 0)
        key = (target.namespace, name)
        per_daemonset[key] = (target, per_daemonset.get(key, (target, 0))[1] + count)
        for index in range(count):
            node = node_name(pool.name, index)
            node_items.append(gpu_node(pool, target, node))
            pods.append(plugin_pod(target, name, node))
            outputs[node] = make_smi(pool, index)
    daemonsets = [daemonset(target, name, count) for (_, name), (target, count) in per_daemonset.items()]
    return ClusterSnapshot(nodes=node_items, daemonsets=daemonsets, pods=pods, smi=outputs, exec_errors={})


def _system_node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "aks-system-27182818-vmss000000",
            "labels": {"agentpool": "system", "kubernetes.azure.com/mode": "system"},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "3860m", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _other_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "coredns-6f8f4d5c9-abcde", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
        "spec": {"nodeName": "aks-system-27182818-vmss000000"},
        "status": {"phase": "Running"},
    }


# ---------------------------------------------------------------- editors: break one thing


def edited(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """A deep copy to edit, so one test's change never leaks into another's snapshot."""
    return replace(
        snapshot,
        nodes=copy.deepcopy(snapshot.nodes),
        daemonsets=copy.deepcopy(snapshot.daemonsets),
        pods=copy.deepcopy(snapshot.pods),
        smi=dict(snapshot.smi),
        exec_errors=dict(snapshot.exec_errors),
    )


def find_node(snapshot: ClusterSnapshot, name: str) -> dict[str, Any]:
    return next(node for node in snapshot.nodes if node["metadata"]["name"] == name)


def pods_on(snapshot: ClusterSnapshot, node: str) -> list[dict[str, Any]]:
    return [pod for pod in snapshot.pods if pod["spec"].get("nodeName") == node]


def set_not_ready(snapshot: ClusterSnapshot, node: str, reason: str, message: str) -> None:
    conditions = find_node(snapshot, node)["status"]["conditions"]
    ready = next(c for c in conditions if c["type"] == "Ready")
    ready.update(status="Unknown", reason=reason, message=message)


def without(items: Iterable[dict[str, Any]], drop: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    return [item for item in items if not drop(item)]


def as_list_json(items: list[dict[str, Any]]) -> str:
    """What ``kubectl get ... -o json`` prints for a list."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}, indent=4)
