"""The one mocks harness every test uses, plus shared fixtures (project paths, stack configs, fixtures)."""

from __future__ import annotations

import datetime
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from pulumi.runtime.mocks import Mocks

from aks_gpu.aks_facts import kubernetes_calendar
from aks_gpu.catalog import Catalog, load_catalog
from aks_gpu.config.loader import load_stack_file
from aks_gpu.config.models import PlatformConfig, StackConfig
from aks_gpu.mock_engine import PlanResult, run_mocked, run_program
from aks_gpu.resolved.model import PlatformModel, resolve
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.specs import PlatformSpec

PROJECT_DIR = Path(__file__).resolve().parents[1]
STACKS_DIR = PROJECT_DIR / "stacks"
# Real outputs published by others, copied into the repository with their sources (each folder's SOURCES.md):
# a clone must pass on its own, with nothing beside it.
FIXTURES_DIR = PROJECT_DIR / "tests" / "fixtures"
SMI_FIXTURES_DIR = FIXTURES_DIR / "smi"
HEALTH_FIXTURES_DIR = FIXTURES_DIR / "health"
# GpuCluster reads the Azure CLI's login (AZURE_CONFIG_DIR/azureProfile.json) to guess the deployer's principalType:
# every test reads a folder of the checkout that holds no login instead of the machine's ~/.azure.
AZURE_CLI_CONFIG_DIR = FIXTURES_DIR / "azure-cli-none"
os.environ["AZURE_CONFIG_DIR"] = str(AZURE_CLI_CONFIG_DIR)
# The Kubernetes minors AKS supports today (GA and not past end of life), from the AKS release calendar data
# (components/aks_gpu/data/aks_versions.yaml, with its source and reading date): every manifest test runs against this
# window, so the matrix moves with the calendar.
AKS_VERSIONS = kubernetes_calendar().supported(datetime.date.today())
STACK_NAMES = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACKS_DIR.glob("Pulumi.*.yaml"))


class MockHarness:
    """Runs code that registers resources under Pulumi's mock engine: a fresh event loop and fresh mocks
    per run, ``preview=False`` (so outputs resolve), every registration recorded with its inputs and
    options, and a duplicate URN raised as an error."""

    def run(
        self, program: Callable[[], object], stack: str = "test", config: dict[str, Any] | None = None, mocks: Mocks | None = None
    ) -> PlanResult:
        return run_mocked(program, stack, config, mocks=mocks)

    def run_stack(self, stack: str, config: dict[str, Any] | None = None, mocks: Mocks | None = None) -> PlanResult:
        """The real ``__main__.py`` for a stack file of ``stacks/`` (or a given raw config)."""
        raw = config if config is not None else load_stack_file(STACKS_DIR / f"Pulumi.{stack}.yaml")
        return run_program(PROJECT_DIR, stack, raw, mocks=mocks)


@functools.cache
def planned_result(stack: str) -> PlanResult:
    """The real program's plan of a shipped stack, run once per test session: many tests read the same plan, and
    none may change it."""
    return MockHarness().run_stack(stack)


@pytest.fixture
def harness() -> MockHarness:
    return MockHarness()


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


def raw_stack(stack: str) -> dict[str, Any]:
    return load_stack_file(STACKS_DIR / f"Pulumi.{stack}.yaml")


def stack_config(stack: str) -> StackConfig:
    return validate_stack(raw_stack(stack), f"stacks/Pulumi.{stack}.yaml").config


def stack_model(stack: str) -> PlatformModel:
    return resolve(stack_config(stack))


def platform_sections(config: PlatformConfig) -> PlatformSpec:
    """The in-cluster sections of a validated config in spec form (snake_case, defaults left out): the args another
    program gives a component that takes them."""
    return cast(PlatformSpec, config.model_dump(include=set(PlatformConfig.model_fields), exclude_defaults=True))


ONCALL_ACTION_GROUP = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-ops/providers/microsoft.insights/actionGroups/"
    "gpu-oncall"
)


def minimal_raw(**overrides: Any) -> dict[str, Any]:
    """A small valid raw config (stack-file shape) to break one key at a time in rule tests."""
    raw: dict[str, Any] = {
        "azure-native:location": "swedencentral",
        "aks-gpu:cluster": {"resourceGroup": "rg-test", "name": "aks-test"},
        "aks-gpu:gpuPools": [
            {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training", "maxCount": 2}
        ],
        "aks-gpu:workloads": [{"name": "team-a", "type": "training", "gpuQuota": 2}],
        # Someone hears the alerts: without a receiver or an action group the plan refuses (config/rules/monitoring.py).
        "aks-gpu:monitoring": {"azureMonitor": {"actionGroupIds": [ONCALL_ACTION_GROUP]}},
    }
    raw.update(overrides)
    return raw
