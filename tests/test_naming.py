"""The label keys the config rules reserve are exactly the ones the platform puts on GPU nodes, in every mode."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import Any

import pytest

from aks_gpu import naming
from aks_gpu.config.models import PlatformConfig
from aks_gpu.resolved.model import resolve
from tests.conftest import PROJECT_DIR

POOLS: list[dict[str, Any]] = [
    {"name": "plain", "vendor": "nvidia", "vmSize": "Standard_NC4as_T4_v3", "workload": "dev"},
    {"name": "mig", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "infer", "migProfile": "MIG1g"},
    {"name": "nvme", "vendor": "nvidia", "vmSize": "Standard_ND96isr_H100_v5", "workload": "train", "nvmeCache": True},
    {"name": "aksdriver", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "infer", "gpuDriver": "Install"},
    {"name": "amd", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "train", "nvmeCache": True},
]
MODES = [
    {"devicePlugin": {"mode": mode, "amdMode": amd_mode}, "storage": {"flavour": flavour}}
    for mode, amd_mode, flavour in itertools.product(("daemonset", "gpu-operator"), ("daemonset", "gpu-operator"), ("v2", "v1"))
] + [
    # The quarantine engine labels the AKS-driver pools it guards (NVSentinel's labeler reads nvidia.com/gpu.present).
    {"remediation": {"mode": "on", "datastore": "external-mongodb", "datastoreSecret": "nvsentinel-datastore"}}
]


@pytest.mark.parametrize("sections", MODES, ids=lambda s: "-".join(str(v) for part in s.values() for v in part.values()))
def test_every_node_label_the_platform_sets_is_a_reserved_platform_label(sections: dict[str, Any]) -> None:
    model = resolve(PlatformConfig.model_validate({"gpuPools": POOLS, **sections}))
    for pool in model.pools:
        assert all(naming.is_platform_node_label(key) for key in pool.node_labels), pool.name
        # The one serves label of a GPU pool is its own workload type's.
        serves = {key for key in pool.node_labels if key.startswith(f"{naming.SERVES_LABEL_DOMAIN}/")}
        assert serves == {naming.serves_label(pool.workload)}, pool.name


def test_every_reserved_platform_label_is_set_somewhere() -> None:
    """No stale entries: each reserved key is put on some pool in some mode."""
    seen: set[str] = set()
    for sections in MODES:
        for pool in resolve(PlatformConfig.model_validate({"gpuPools": POOLS, **sections})).pools:
            seen |= {key for key in pool.node_labels if not key.startswith(f"{naming.SERVES_LABEL_DOMAIN}/")}
    assert seen == naming.PLATFORM_NODE_LABELS


def test_the_platform_value_wins_over_a_pool_label() -> None:
    """Defence in depth: the rules refuse such a label, and a model built without them still keeps the platform's."""
    mig = {**POOLS[3], "labels": {naming.DEPLOY_DRIVER_LABEL: "true", "team": "a"}}
    [pool] = resolve(PlatformConfig.model_validate({"gpuPools": [mig], "devicePlugin": {"mode": "gpu-operator"}})).pools
    assert pool.node_labels[naming.DEPLOY_DRIVER_LABEL] == "false" and pool.node_labels["team"] == "a"


@pytest.mark.parametrize(
    ("key", "domain"),
    [
        ("kubernetes.io/arch", "kubernetes.io"),
        ("topology.kubernetes.io/zone", "kubernetes.io"),
        ("kubernetes.azure.com/agentpool", "kubernetes.azure.com"),
        ("k8s.io/x", "k8s.io"),
        ("sub.k8s.io/x", "k8s.io"),
        ("kubernetes.io", None),  # no prefix: a plain name
        ("mykubernetes.io/x", None),
        ("example.com/kubernetes.io", None),
    ],
)
def test_reserved_domains(key: str, domain: str | None) -> None:
    assert naming.reserved_domain(key) == domain


def _name_literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that spell a platform name or key by hand (``aks-gpu-...``, ``aks-gpu/...``)
    or the namespace-name label, f-string pieces included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith((f"{naming.PACKAGE_NAME}-", f"{naming.PACKAGE_NAME}/")) or text == naming.NAMESPACE_NAME_LABEL:
                found.append((node.lineno, text))
    return sorted(found)


def test_platform_names_are_spelled_only_in_the_naming_module() -> None:
    # A hand-typed copy drifts (the label was written four times before); every module derives its names from naming.
    components = PROJECT_DIR / "components" / "aks_gpu"
    spelled = {
        f"{path.relative_to(PROJECT_DIR)}:{line}": text
        for path in sorted(components.rglob("*.py"))
        if path.name != "naming.py"
        for line, text in _name_literals(path)
    }
    assert spelled == {}


def test_the_name_scan_sees_a_hand_typed_name(tmp_path: Path) -> None:
    module = tmp_path / "copy.py"
    module.write_text('ROLE = "aks-gpu-role"\nLABEL = f"aks-gpu/{1}"\nNS = "kubernetes.io/metadata.name"\n', encoding="utf-8")
    assert [text for _, text in _name_literals(module)] == ["aks-gpu-role", "aks-gpu/", "kubernetes.io/metadata.name"]
