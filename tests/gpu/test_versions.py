"""``aks_gpu.gpu.versions``: driver versions compared as versions, not as text."""

from __future__ import annotations

import pytest

from aks_gpu.gpu.versions import parse_version, version_at_least


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("565.57.01", (565, 57, 1)),
        ("470.82.01", (470, 82, 1)),
        ("12.7", (12, 7)),
        ("6.12.12", (6, 12, 12)),
        ("6.14.0-28-generic", (6, 14, 0)),  # rocm-smi's driver version with the in-tree amdgpu module
        ("6.17.1-300.fc43.x86_64", (6, 17, 1)),
        ("525.85.12-1", (525, 85, 12)),  # a Debian package version
        ("26.0.0+eaa54ecc", (26, 0, 0)),
        (" 535.161.08\n", (535, 161, 8)),
        ("v1.2", (1, 2)),
    ],
)
def test_parse_version(text: str, parts: tuple[int, ...]) -> None:
    assert parse_version(text) == parts


@pytest.mark.parametrize("text", ["", "N/A", "570.xx.xx", "12.x", "6.14.0-", "latest", "1..2"])
def test_parse_version_refuses_what_is_not_a_version(text: str) -> None:
    assert parse_version(text) is None


@pytest.mark.parametrize(
    ("actual", "minimum", "at_least"),
    [
        ("535.10", "535.9", True),  # as text, "535.10" < "535.9"
        ("535.9", "535.10", False),
        ("565.57.01", "565.57.01", True),
        ("565.57.01", "570", False),
        ("570.124.06", "570", True),
        ("535", "535.0.0", True),
        ("535.0.0", "535", True),
        ("6.14.0-28-generic", "6.14", True),
        ("6.8.5", "6.10.5", False),
        ("470.82.01", "470.82.1", True),  # "01" and "1" are the same component
    ],
)
def test_version_at_least(actual: str, minimum: str, at_least: bool) -> None:
    assert version_at_least(actual, minimum) is at_least


@pytest.mark.parametrize(("actual", "minimum"), [("N/A", "535"), ("535.54.03", "570.xx.xx"), ("", "")])
def test_version_at_least_is_none_when_either_side_is_unreadable(actual: str, minimum: str) -> None:
    assert version_at_least(actual, minimum) is None
