"""What the benchmarks share: the prod stack's model and a timer."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from aks_gpu.config.loader import load_stack_file
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack

T = TypeVar("T")
PROJECT_DIR = Path(__file__).resolve().parents[1]
# Plans read the Azure CLI's login for the deployer's principalType (components/aks_gpu/azure/cluster.py): a benchmark reads a
# folder of the checkout with no login, never the machine's ~/.azure.
os.environ["AZURE_CONFIG_DIR"] = str(PROJECT_DIR / "tests" / "fixtures" / "azure-cli-none")


def prod_model() -> PlatformModel:
    raw = load_stack_file(PROJECT_DIR / "stacks" / "Pulumi.prod.yaml")
    return validate_stack(raw, "stacks/Pulumi.prod.yaml").model


def timed(call: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start
