"""Fixtures the validation tests share: the prod stack's model and its device plugin targets."""

from __future__ import annotations

import pytest

from components.resolved.model import PlatformModel
from components.resolved.targets import PluginTarget, plugin_targets
from tests.conftest import stack_model


@pytest.fixture(scope="module")
def model() -> PlatformModel:
    return stack_model("prod")


@pytest.fixture(scope="module")
def targets(model: PlatformModel) -> dict[str, PluginTarget]:
    return plugin_targets(model)
