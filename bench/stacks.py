"""Generated stack configs of any size, for the plan-cost benchmark and the determinism tests.

``generated_stack(n)`` is a valid raw config (the ``config:`` map of a stack file) with ``n`` GPU pools and, by
default, as many workload namespaces, one per pool. The pools cycle through the shapes the toolkit treats
differently, so a large stack exercises every component the way real stacks do: a MIG-partitioned A100 pool,
an H100 training pool with NVMe cache, a time-sliced T4 spot pool, and an AMD MI300X pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# One entry per pool shape: the pool's keys (beyond name/workload/counts) and the GPUs a node exposes to
# the scheduler, from components/aks_gpu/data/gpu_catalog.yaml (MIG1g on A100 80GB: 7 slices; T4 x4 time-slicing).
_SHAPES: tuple[tuple[dict[str, Any], int], ...] = (
    ({"vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "migProfile": "MIG1g"}, 7),
    ({"vendor": "nvidia", "vmSize": "Standard_ND96isr_H100_v5", "nvmeCache": True}, 8),
    ({"vendor": "nvidia", "vmSize": "Standard_NC4as_T4_v3", "spot": True, "timeSlicingReplicas": 4}, 4),
    ({"vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5"}, 8),
)
MAX_COUNT = 2


def pool_name(index: int) -> str:
    return f"p{index:04d}"


def workload_name(index: int) -> str:
    return f"team-{index:04d}"


def generated_stack(pools: int, namespaces: int | None = None, name: str = "bench") -> dict[str, Any]:
    """A valid raw stack config with ``pools`` GPU pools and ``namespaces`` workload namespaces (default: as
    many as pools). Namespace ``i`` serves pool ``i mod pools``'s workload type."""
    namespaces = pools if namespaces is None else namespaces
    if pools < 1 or namespaces < 0:
        raise ValueError("a generated stack needs at least one pool and no negative namespace count")
    gpu_pools = []
    per_node: dict[str, int] = {}
    for index in range(pools):
        keys, gpus = _SHAPES[index % len(_SHAPES)]
        workload = f"w{index:04d}"
        per_node[workload] = gpus
        gpu_pools.append({"name": pool_name(index), **keys, "workload": workload, "minCount": 0, "maxCount": MAX_COUNT})
    workloads = []
    for index in range(namespaces):
        workload = f"w{index % pools:04d}"
        workloads.append(
            {
                "name": workload_name(index),
                "type": workload,
                "gpuQuota": per_node[workload] * MAX_COUNT,
                "quota": {"cpu": "64", "memory": "512Gi", "pods": 50},
            }
        )
    return {
        "azure-native:location": "swedencentral",
        # No kubernetesVersion: the default follows the AKS release calendar (components/aks_gpu/data/aks_versions.yaml).
        # A /14 pod range: Azure CNI overlay gives each node a /24, and 99 pools at maxCount outgrow a /16.
        "aks-gpu:cluster": {"resourceGroup": f"rg-{name}", "name": f"aks-{name}", "podCidr": "10.240.0.0/14"},
        "aks-gpu:gpuPools": gpu_pools,
        "aks-gpu:workloads": workloads,
        # Someone hears the alerts, as a real stack would have it (without one the config rules warn).
        "aks-gpu:monitoring": {"azureMonitor": {"actionGroupIds": [ONCALL_ACTION_GROUP]}},
        # AMD pools with the AMD GPU Operator, as the AKS guide has it: AKS loads no amdgpu driver, and the ROCm device
        # plugin alone is warned about (config/rules/pools.py), while these stacks must pass every rule without a warning
        # (tests/conformance).
        **(
            {
                "aks-gpu:devicePlugin": {
                    "amdMode": "gpu-operator",
                    "certManagerInstalled": True,
                    "amdDriverImage": f"{name}.azurecr.io/amdgpu-driver",
                }
            }
            if pools >= len(_SHAPES)
            else {}
        ),
    }


ONCALL_ACTION_GROUP = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-ops/providers/microsoft.insights/actionGroups/"
    "gpu-oncall"
)


def write_stack_file(path: Path, raw: dict[str, Any]) -> Path:
    """``raw`` as a Pulumi stack file (``config:`` map), for ``aksgpu plan --config-file``."""
    path.write_text(yaml.safe_dump({"config": raw}, sort_keys=False), encoding="utf-8")
    return path
