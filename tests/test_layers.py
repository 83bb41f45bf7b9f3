"""Dependencies point one way: facts and names -> config -> resolved model -> pure builders and readers -> components
and I/O edges -> program and command line. Read off the source (every import statement, at any depth), so a new
module that imports the wrong way fails here, not in a reviewer's head."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR

COMPONENTS = PROJECT_DIR / "components" / "aks_gpu"
LAYERS = ("facts", "config", "model", "builders", "components", "program")
FACTS = {
    "naming",
    "catalog",
    "aks_facts",
    "data_files",
    "input_files",
    "internal_error",
    "redaction",
    "output_files",
    "addresses",
}
# Modules of the feature packages that register resources or do I/O; the rest of each package is pure.
COMPONENT_MODULES = {
    "component",
    "args",
    "specs",
    "azure.cluster",
    "azure.node_pool",
    "azure.arm",
    "kube.workload_namespace",
    "admission.component",
    "storage.nvme_cache",
    "monitoring.component",
    "validation.smoke",
    "validation.hooks",
    "cluster.probe",
    "cluster.client_config",
    "cluster.list_calls",
    "cluster.pod_exec",
    "cluster.retries",
    "cluster.diag_run",
    "validation.deep",
    "advise.sources",
    "local.engine",
}
# "" is the package itself (components/aks_gpu/__init__.py): its public names are the components.
PROGRAM = {
    "",
    "program",
    "mock_engine",
    "mock_engine.changes",
    "mock_engine.mocks",
    "mock_engine.monitors",
    "mock_engine.plan_files",
    "mock_engine.records",
    "mock_engine.references",
    "mock_engine.runner",
    "mock_engine.urns",
    "package",
    "testing",
}
PULUMI = ("pulumi", "pulumi_azure_native", "pulumi_kubernetes")
FEATURES = ("azure", "kube", "admission", "storage", "monitoring", "gpu", "cluster", "validation", "audit", "advise")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(COMPONENTS).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> str:
    top = module.split(".")[0]
    if module in FACTS:
        return "facts"
    if top == "config":
        return "config"
    if top == "resolved":
        return "model"
    if module in PROGRAM or top == "cli":
        return "program"
    if module in COMPONENT_MODULES or top == "platform":
        return "components"
    return "builders"


def imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports (``aks_gpu.`` stripped; other packages as their top name)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "aks_gpu":
                names = [f"aks_gpu.{alias.name}" for alias in node.names]
        for name in names:
            yield name.removeprefix("aks_gpu.") if name.startswith("aks_gpu.") else name.split(".")[0]


SOURCES = sorted(COMPONENTS.rglob("*.py"))


def _ours(name: str) -> bool:
    return (COMPONENTS / name.replace(".", "/")).with_suffix(".py").exists() or (COMPONENTS / name.replace(".", "/")).is_dir()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(COMPONENTS)))
def test_imports_point_down_the_layers(path: Path) -> None:
    module = module_name(path)
    own = LAYERS.index(layer(module))
    upward = [name for name in imports(path) if _ours(name) and LAYERS.index(layer(name)) > own]
    assert not upward, f"{module} ({layer(module)}) imports {upward} from above it"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(COMPONENTS)))
def test_pure_layers_import_no_pulumi(path: Path) -> None:
    module = module_name(path)
    if LAYERS.index(layer(module)) >= LAYERS.index("components"):
        return
    assert not [name for name in imports(path) if name in PULUMI], f"{module} is pure, yet imports Pulumi"


def test_kube_and_validation_import_each_other_nowhere() -> None:
    for path in SOURCES:
        module = module_name(path)
        for name in imports(path):
            for one, other in (("kube", "validation"), ("validation", "kube")):
                assert not (module.startswith(one) and name.startswith(other + ".")), f"{module} imports {name}"


# The readers and what stands on them: reading GPU outputs (gpu), reading a cluster (cluster), then what judges a
# stack (validation) and what judges a cluster (audit). Nothing reads upward.
READER_ROOMS = ("gpu", "cluster", "validation", "audit")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(COMPONENTS)))
def test_the_reader_rooms_point_one_way(path: Path) -> None:
    own = module_name(path).split(".")[0]
    if own not in READER_ROOMS[:2]:
        return
    above = READER_ROOMS[READER_ROOMS.index(own) + 1 :]
    upward = [name for name in imports(path) if name.split(".")[0] in above]
    assert not upward, f"{module_name(path)} ({own}) imports {upward}, which stand on it"


def test_the_feature_packages_depend_on_each_other_without_cycles() -> None:
    edges: dict[str, set[str]] = {feature: set() for feature in FEATURES}
    for path in SOURCES:
        own = module_name(path).split(".")[0]
        if own in edges:
            edges[own] |= {name.split(".")[0] for name in imports(path) if name.split(".")[0] in edges} - {own}

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(step == goal or (step not in seen and reaches(step, goal, seen | {step})) for step in edges[start])

    cycles = sorted(feature for feature in FEATURES if reaches(feature, feature))
    assert not cycles, f"feature packages in an import cycle: {cycles} ({ {f: sorted(edges[f]) for f in cycles} })"


def test_the_layer_map_knows_every_module_it_names() -> None:
    known = {module_name(path) for path in SOURCES}
    assert known >= COMPONENT_MODULES | PROGRAM | FACTS
