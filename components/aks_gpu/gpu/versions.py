"""Driver version strings compared as versions, not as text ("535.9" is older than "535.10").

Pure: standard library only.
"""

from __future__ import annotations

import re

# A dotted run of numbers, optionally followed by a build label that starts with "-", "+" or "~" and goes
# on in letters, digits and ". + ~ _ -": "6.14.0-28-generic", "6.17.1-300.fc43.x86_64",
# "24.7.1+b446d6c-dirty". A "." right after the numbers must be followed by another number, so a
# placeholder such as "570.xx.xx" is rejected instead of being read as "570".
_VERSION = re.compile(r"^v?(?P<numbers>\d+(?:\.\d+)*)(?:[-+~][0-9A-Za-z][0-9A-Za-z.+~_-]*)?$", re.ASCII)


def parse_version(text: str) -> tuple[int, ...] | None:
    """The dotted numbers of a version string, or None when the string is not a version.

    Build and release labels after "-", "+" or "~" are dropped: "6.14.0-28-generic" is (6, 14, 0). They
    name a build of that version (a distribution's kernel ABI or package revision), not a newer upstream
    version, and they do not order across distributions.
    """
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        return None
    return tuple(int(part) for part in match.group("numbers").split("."))


def version_at_least(actual: str, minimum: str) -> bool | None:
    """Whether ``actual`` is ``minimum`` or newer; None when either string is not a version.

    Missing trailing components count as zero, so "535" is at least "535.0.0" and the other way round.
    """
    actual_parts = parse_version(actual)
    minimum_parts = parse_version(minimum)
    if actual_parts is None or minimum_parts is None:
        return None
    width = max(len(actual_parts), len(minimum_parts))
    padded_actual = actual_parts + (0,) * (width - len(actual_parts))
    padded_minimum = minimum_parts + (0,) * (width - len(minimum_parts))
    return padded_actual >= padded_minimum
