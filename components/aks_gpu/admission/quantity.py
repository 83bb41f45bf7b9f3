"""Kubernetes resource quantities, exact: what the CEL quantity library of either engine compares; and ``[]byte``
fields decoded as the API server decodes them. Pure.

The grammar of ``resource.Quantity``: a signed decimal number and an optional binary-SI, decimal-SI or exponent
suffix. https://github.com/kubernetes/apimachinery/blob/master/pkg/api/resource/quantity.go
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

# Matched whole (fullmatch): "$" would also match before a trailing newline, which ParseQuantity refuses. The
# exponent form comes before the bare suffixes so that "1E3" is 1e3 and "1E" (exa) is still read as a suffix.
QUANTITY_PATTERN = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?")
EXPONENT = re.compile(r"[eE][+-]?[0-9]+")
# The pattern the API server names when it refuses a quantity (apimachinery pkg/api/resource/quantity.go,
# splitREString; the message is ErrFormatWrong's).
SERVER_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
BINARY_SI = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
INT64 = 2**63
# Our limits, not Kubernetes': a quantity text longer than this, or a power of ten beyond this, is refused
# rather than computed (1e999999999 would otherwise take forever). Every real quantity fits many times over.
MAX_QUANTITY_CHARS = 64
MAX_EXPONENT = 64


@dataclass(frozen=True)
class Quantity:
    """A parsed Kubernetes quantity, exact (``1``, ``1000m`` and ``1e0`` are the same value)."""

    text: str
    value: Fraction

    @classmethod
    def parse(cls, text: str) -> Quantity:
        if len(text) > MAX_QUANTITY_CHARS:
            raise ValueError(f"quantity too long ({len(text)} characters; the limit is {MAX_QUANTITY_CHARS})")
        match = QUANTITY_PATTERN.fullmatch(text)
        if match is None:
            raise ValueError(f"quantities must match the regular expression '{SERVER_PATTERN}'")
        number, suffix = match.group(1), match.group(2) or ""
        exponent = EXPONENT.fullmatch(suffix) is not None  # "E" alone is the exa suffix (10^18), "Ei" 2^60
        if exponent and abs(int(suffix[1:])) > MAX_EXPONENT:
            raise ValueError(f"quantity exponent out of range (|{suffix[1:]}| > {MAX_EXPONENT}): {text!r}")
        value = Fraction(number)
        if suffix in BINARY_SI:
            value *= BINARY_SI[suffix]
        elif suffix in DECIMAL_SI:
            value *= Fraction(10) ** DECIMAL_SI[suffix]
        elif exponent:
            value *= Fraction(10) ** int(suffix[1:])
        return cls(text=text, value=value)


# ---------------------------------------------------------------- []byte fields (Secret data, ConfigMap binaryData)


def go_base64_decode(text: str) -> bytes:
    """A ``[]byte`` field as the API server decodes it from JSON: Go's ``encoding/base64`` StdEncoding, which skips
    ``\\r`` and ``\\n`` anywhere and wants the padding (``dm9p\\nZA==`` is ``void``). ValueError when it refuses."""
    import base64
    import binascii

    cleaned = text.replace("\r", "").replace("\n", "")
    try:
        return base64.b64decode(cleaned, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("illegal base64 data") from None


def go_base64_canonical(text: str) -> str:
    """What admission reads after the server decoded a ``[]byte`` field and serialised it again."""
    import base64

    return base64.b64encode(go_base64_decode(text)).decode()
