"""What the benchmarks share: the prod stack's model and a timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from components.config import load_stack_file, validate_config
from components.model import PlatformModel, resolve

T = TypeVar("T")
PROJECT_DIR = Path(__file__).resolve().parents[1]


def prod_model() -> PlatformModel:
    raw = load_stack_file(PROJECT_DIR / "stacks" / "Pulumi.prod.yaml")
    return resolve(validate_config(raw, "stacks/Pulumi.prod.yaml").config)


def timed(call: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start
