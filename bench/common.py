"""What the benchmarks share: the prod stack's model and a timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from components.config.loader import load_stack_file
from components.resolved.model import PlatformModel
from components.resolved.stack import validate_stack

T = TypeVar("T")
PROJECT_DIR = Path(__file__).resolve().parents[1]


def prod_model() -> PlatformModel:
    raw = load_stack_file(PROJECT_DIR / "stacks" / "Pulumi.prod.yaml")
    return validate_stack(raw, "stacks/Pulumi.prod.yaml").model


def timed(call: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start
