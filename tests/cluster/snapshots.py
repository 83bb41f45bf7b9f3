"""Realistic cluster snapshots for the validation tests and the benchmark.

``healthy_snapshot(model, targets, nodes)`` builds what a correct deployment of ``model`` looks like, in the
shapes ``kubectl get ... -o json`` prints: AKS GPU nodes (labels, taints, Ready condition, allocatable),
the device plugin DaemonSets and one ready plugin pod per node, and an SMI output per node. Tests then
break one thing at a time with the small editors below.

SMI text: what the validation runs on each node (``smi_command``): ``nvidia-smi -q -x``, generated from the
layout of a real A100 output (``nvidia_smi_xml``, fixture 25, one <gpu> element copied per GPU with the pool's
values), and for AMD ``amd-smi static --json`` then ``amd-smi metric --ecc --json`` with the values of the real
8x MI300X output (fixture 50) in the keys amd-smi writes (``amd_smi_json``). ``nvidia_smi_table`` generates the
default table in the layout of R530 and later, for tests of that format.
"""

from __future__ import annotations

import copy
import json
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from aks_gpu.cluster.snapshot import ClusterSnapshot
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.resolved.targets import PluginTarget
from tests.conftest import SMI_FIXTURES_DIR

# The real -q -x output whose layout the generated ones copy: telegraf's A100 SXM4 (tests/fixtures/smi/SOURCES.md).
XML_TEMPLATE = "25_nvidia-smi-q-x_a100-sxm4_mig_535.54.03.xml.txt"
# A GPU that is on an NVSwitch fabric reports it Completed / Success (gpud's 8x H100, fixture 31); others N/A.
NVSWITCH_GPUS = {"H100-80GB", "H200-141GB"}
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


def _xml_parts() -> tuple[str, str, str, str]:
    """(prolog up to the first <gpu>, the <gpu> element, its first <mig_device>, the end) of the template."""
    text = fixture_text(XML_TEMPLATE)
    start, end = text.index("<gpu "), text.index("</gpu>") + len("</gpu>")
    gpu = text[start:end]
    device = gpu[gpu.index("<mig_device>") : gpu.index("</mig_device>") + len("</mig_device>")]
    return text[:start], gpu, device, text[end:]


_XML = _xml_parts()


def _element(text: str, name: str, content: str) -> str:
    """``text`` with the content of its first <name> element replaced."""
    start = text.index(f"<{name}>") + len(name) + 2
    return text[:start] + content + text[text.index(f"</{name}>", start) :]


def nvidia_smi_xml(
    *,
    gpus: int,
    gpu_name: str,
    memory_mib: int,
    driver: str = DEFAULT_DRIVER[0],
    cuda: str = DEFAULT_DRIVER[1],
    mig: bool = False,
    mig_capable: bool = True,
    mig_devices_per_gpu: int = 0,
    fabric: bool = False,
    seed: int = 0,
) -> str:
    """``nvidia-smi -q -x`` of one healthy node: the real A100 output's layout (fixture 25), one <gpu> per GPU.

    ``seed`` varies the memory in use and the power draw, so generated nodes do not share one text. Without MIG
    the GPU prints its row remapper (as the real A10G of fixture 27 does: a GPU with MIG instances cannot), with
    ``fabric`` its NVSwitch fabric state Completed / Success (as the real H100 of fixture 31 does).
    """
    prolog, template, device, end = _XML
    prolog = _element(_element(_element(prolog, "driver_version", driver), "cuda_version", cuda), "attached_gpus", str(gpus))
    bus_ids = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
    blocks = []
    for index in range(gpus):
        bus = f"00000000:{bus_ids[index % len(bus_ids)]}:00.0"
        gpu = template.replace('<gpu id="00000000:01:00.0">', f'<gpu id="{bus}">', 1)
        gpu = _element(gpu, "product_name", gpu_name)
        mode = "Enabled" if mig else ("Disabled" if mig_capable else "N/A")
        modes = f"\n            <current_mig>{mode}</current_mig>\n            <pending_mig>{mode}</pending_mig>\n        "
        gpu = _element(gpu, "mig_mode", modes)
        devices = "".join(f"\n            {device}" for _ in range(mig_devices_per_gpu if mig else 0))
        gpu = _element(gpu, "mig_devices", devices + "\n        " if devices else "\n            None\n        ")
        gpu = _element(gpu, "uuid", f"GPU-{zlib.crc32(f'{seed}-{index}'.encode()):08x}-7d19-9063-b049-{seed:06d}{index:06d}")
        gpu = _element(gpu, "pci_bus_id", bus)
        fb = gpu.index("<fb_memory_usage>", gpu.index("</mig_devices>"))
        used = 1 + (seed + index) % 700
        gpu = gpu[:fb] + _element(
            _element(_element(gpu[fb:], "total", f"{memory_mib} MiB"), "used", f"{used} MiB"), "free", f"{memory_mib - used} MiB"
        )
        gpu = _element(gpu, "power_draw", f"{60 + (seed * 13 + index * 5) % 60}.03 W")
        if not mig:
            gpu = _element(
                gpu,
                "remapped_rows",
                "\n            <remapped_row_corr>0</remapped_row_corr>\n            <remapped_row_unc>0</remapped_row_unc>\n"
                "            <remapped_row_pending>No</remapped_row_pending>\n"
                "            <remapped_row_failure>No</remapped_row_failure>\n        ",
            )
        if fabric:
            ready = "\n            <state>Completed</state>\n            <status>Success</status>\n        "
            gpu = _element(gpu, "fabric", ready)
        blocks.append(gpu)
    return prolog + "\n    ".join(blocks) + end


# What amd-smi writes for the real 8x MI300X of fixture 50 (amdgpu 6.12.12, 196592 MB each), in the keys its
# --json output uses (the static keys parse_smi reads; the metric --ecc keys amd-smi's CLI writes:
# amdsmi_cli/amdsmi_commands.py, total_correctable_count ...).
MI300X_BDFS = (
    "0000:0c:00.0",
    "0000:22:00.0",
    "0000:38:00.0",
    "0000:5c:00.0",
    "0000:9f:00.0",
    "0000:af:00.0",
    "0000:bf:00.0",
    "0000:df:00.0",
)


def amd_smi_json(*, gpus: int = 8, driver: str = "6.12.12", uncorrectable: Mapping[int, int] | None = None) -> str:
    """``amd-smi static --json; amd-smi metric --ecc --json`` of one MI300X node, both documents one after the other."""
    static = [
        {
            "gpu": index,
            "asic": {"market_name": "AMD Instinct MI300X", "vendor_id": "0x1002", "device_id": "0x74a1"},
            "bus": {"bdf": MI300X_BDFS[index % len(MI300X_BDFS)], "max_pcie_width": 16},
            "driver": {"name": "amdgpu", "version": driver},
            "vram": {"type": "HBM", "size": {"value": 196592, "unit": "MB"}},
        }
        for index in range(gpus)
    ]
    errors = uncorrectable or {}
    metric = [
        {
            "gpu": index,
            "ecc": {
                "total_correctable_count": 0,
                "total_uncorrectable_count": errors.get(index, 0),
                "total_deferred_count": 0,
                "cache_correctable_count": 0,
                "cache_uncorrectable_count": 0,
            },
        }
        for index in range(gpus)
    ]
    return json.dumps(static, indent=4) + "\n" + json.dumps(metric, indent=4) + "\n"


def smi_for(pool: ResolvedPool, *, seed: int = 0, driver: str | None = None, mig_devices_per_gpu: int | None = None) -> str:
    """A healthy output of the validation's SMI command for one node of ``pool``: generated ``nvidia-smi -q -x``
    with the pool's GPUs and MIG layout, or for AMD the two amd-smi JSON documents."""
    assert pool.gpu_model is not None and pool.gpus_per_node is not None
    if pool.vendor == "amd":
        return amd_smi_json(gpus=pool.gpus_per_node, driver=driver or "6.12.12")
    name, memory = NVIDIA_GPUS[pool.gpu_model.key]
    devices = mig_devices_per_gpu if mig_devices_per_gpu is not None else (pool.mig_instances_per_gpu or 0)
    return nvidia_smi_xml(
        gpus=pool.gpus_per_node,
        gpu_name=name,
        memory_mib=memory,
        driver=driver or DEFAULT_DRIVER[0],
        mig=pool.mig_profile is not None,
        mig_capable=pool.gpu_model.supports_mig,
        mig_devices_per_gpu=devices,
        fabric=pool.gpu_model.key in NVSWITCH_GPUS,
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


def nodes_in_every_pool(model: PlatformModel, count: int = 1, **counts: int) -> dict[str, int]:
    """``count`` nodes in each of ``model``'s GPU pools, ``counts[pool]`` where given: a snapshot where no pool is
    left "not checked: no nodes yet" (a pool at minCount 0, such as prod's inferfull, has none until it scales)."""
    nodes = {pool.name: counts.get(pool.name, count) for pool in model.pools}
    assert set(counts) <= set(nodes), f"no such pool: {sorted(set(counts) - set(nodes))}"
    return nodes


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
