"""Conformance: what `aksgpu plan` writes for every stack of ``stacks/``, checked against outside authorities
(the Kubernetes API schemas, the azure-native provider's schema, checkov) and against our security defaults.

Every test here reads the files the real command line wrote, never a hand-picked list: a component wired into
``GpuPlatform`` tomorrow is covered by these tests the day it lands. Each stack is planned once per test session
(``planned``) into a private temporary folder, because parametrising over manifests needs them at collection time.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aks_gpu.cli import main
from aks_gpu.config.loader import load_stack_file
from aks_gpu.config.models import StackConfig
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, STACK_NAMES, STACKS_DIR

__all__ = ["PROJECT_DIR", "STACK_NAMES", "PlannedStack", "plan_with_cli", "planned"]

Manifest = dict[str, Any]


@dataclass(frozen=True)
class PlannedStack:
    """One stack as `aksgpu plan` left it on disk: ``resources.json`` and ``manifests/``, parsed back."""

    name: str
    out_dir: Path
    config: StackConfig
    document: dict[str, Any]
    manifests: dict[str, Manifest]

    @property
    def resources(self) -> list[dict[str, Any]]:
        resources: list[dict[str, Any]] = self.document["resources"]
        return resources

    @property
    def outputs(self) -> dict[str, Any]:
        outputs: dict[str, Any] = self.document["outputs"]
        return outputs

    def files(self) -> list[Path]:
        """Every file the plan wrote, in a stable order."""
        return sorted(path for path in self.out_dir.rglob("*") if path.is_file())

    def of_kind(self, kind: str) -> list[Manifest]:
        return [m for m in self.manifests.values() if m.get("kind") == kind]

    def azure_resources(self) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["custom"] and r["type"].startswith("azure-native:")]


def plan_with_cli(stack: str, out_dir: Path, config_file: Path | None = None) -> str:
    """Run ``aksgpu plan`` in this process and return what it printed; raises when it does not exit 0."""
    argv = ["plan", "--stack", stack, "--out", str(out_dir), "--project-dir", str(PROJECT_DIR)]
    if config_file is not None:
        argv += ["--config-file", str(config_file)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = main(argv)
    if code != 0:
        raise RuntimeError(f"aksgpu {' '.join(argv)} exited {code}:\n{printed.getvalue()}")
    return printed.getvalue()


def read_manifests(manifest_dir: Path) -> dict[str, Manifest]:
    """The YAML files of a plan, each required to hold exactly one object (one file per object is the contract)."""
    manifests: dict[str, Manifest] = {}
    for path in sorted(manifest_dir.glob("*.yaml")):
        documents = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]
        if len(documents) != 1 or not isinstance(documents[0], dict):
            raise AssertionError(f"{path.name}: expected one Kubernetes object, found {len(documents)} documents")
        manifests[path.name] = documents[0]
    return manifests


@functools.cache
def _session_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="aksgpu-conformance-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


@functools.cache
def planned(stack: str) -> PlannedStack:
    """``stacks/Pulumi.<stack>.yaml`` planned by the real command line, once per session."""
    out_dir = _session_dir() / stack
    plan_with_cli(stack, out_dir)
    raw = load_stack_file(STACKS_DIR / f"Pulumi.{stack}.yaml")
    config = validate_stack(raw, f"stacks/Pulumi.{stack}.yaml").config
    document = json.loads((out_dir / "resources.json").read_text(encoding="utf-8"))
    return PlannedStack(stack, out_dir, config, document, read_manifests(out_dir / "manifests"))
