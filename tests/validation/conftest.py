"""Fixtures the validation tests share: the prod stack's model and its device plugin targets."""

from __future__ import annotations

import pytest

from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.targets import PluginTarget, plugin_targets
from tests.conftest import stack_model


@pytest.fixture(scope="module")
def model() -> PlatformModel:
    return stack_model("prod")


@pytest.fixture(scope="module")
def targets(model: PlatformModel) -> dict[str, PluginTarget]:
    return plugin_targets(model)
