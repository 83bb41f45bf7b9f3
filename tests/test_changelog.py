"""The changelog's headings are the package's versions: `Unreleased` on top, then one heading per released version,
newest first, and `aksgpu --version` (``aks_gpu.__version__``) is the newest of them."""

from __future__ import annotations

import re

from packaging.version import Version

from aks_gpu import __version__
from tests.conftest import PROJECT_DIR

CHANGELOG = PROJECT_DIR / "CHANGELOG.md"
# "## 0.4.0 - 2026-12-03": a version and the date it was cut.
_RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) - (\d{4}-\d{2}-\d{2})$")


def version_headings() -> list[str]:
    return [line for line in CHANGELOG.read_text(encoding="utf-8").splitlines() if line.startswith("## ")]


def releases() -> list[tuple[Version, str]]:
    found = []
    for heading in version_headings()[1:]:
        match = _RELEASE.match(heading)
        assert match, f"{heading!r} is no '## X.Y.Z - YYYY-MM-DD' heading"
        found.append((Version(match[1]), match[2]))
    return found


def test_unreleased_is_on_top_and_the_versions_follow_newest_first() -> None:
    assert version_headings()[0] == "## Unreleased"
    found = releases()
    assert found, "no released version under Unreleased"
    assert found == sorted(found, reverse=True), [str(version) for version, _ in found]
    assert len({version for version, _ in found}) == len(found), "a version heading twice"


def test_the_package_version_is_the_newest_released_heading() -> None:
    [(newest, _), *_] = releases()
    assert Version(__version__) == newest


# A pinned tag in the install lines the docs and examples give: `aks-gpu@v0.4.0`, `components@v0.4.0`.
_PINNED_TAG = re.compile(r"(?:aks-gpu|\.git/components)@v(\d+\.\d+\.\d+)")


def test_the_install_lines_pin_the_current_version() -> None:
    files = [*(PROJECT_DIR / "docs").glob("*.md"), *(PROJECT_DIR / "examples").glob("*/requirements.txt")]
    pinned = {
        f"{path.relative_to(PROJECT_DIR)}: v{tag}"
        for path in files
        for tag in _PINNED_TAG.findall(path.read_text(encoding="utf-8"))
    }
    assert pinned, "no install line pins a tag"
    assert {line for line in pinned if not line.endswith(f": v{__version__}")} == set()
