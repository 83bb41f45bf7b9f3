"""Keeping credentials out of what the tool prints: the ones it knows (a kubeconfig's token, a plugin's env), whole
or in part, and text that has the shape of one (in an excerpt of input that could not be read, which might be a
file it should never have been shown).

Two functions, both pure:

- ``redact_known(text, secrets)``: every known secret is replaced, and so is every run of ``MIN_PARTIAL_CHARS`` or
  more characters that also occurs inside one (a server that echoes 23 of a token's 28 characters, a message cut
  in the middle of one);
- ``scrub_secret_shapes(text)``: what looks like a credential whoever it belongs to: a JWT, an ``Authorization``
  value, the value after a key that names a token, password or key, a PEM block, the user:password part of a URL,
  a crypt(3) password hash (``/etc/shadow``), a long base64 run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[redacted]"
# A run this long that also occurs in a secret is taken for a piece of it. Shorter runs occur in ordinary words
# (a token "kubelet-...-secret" shares "kubelet" with every message about kubelets).
MIN_PARTIAL_CHARS = 8
# A secret shorter than this is replaced whole only (a password "admin" is a word too).
MIN_SECRET_CHARS = 6


def redact_known(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each secret, and each run of ``MIN_PARTIAL_CHARS`` or more characters shared with one,
    replaced by ``[redacted]``."""
    known = sorted({secret for secret in secrets if len(secret) >= MIN_SECRET_CHARS}, key=len, reverse=True)
    if not known or not text:
        return text
    for secret in known:
        text = text.replace(secret, REDACTED)
    grams: set[str] = set()
    for secret in known:
        if len(secret) >= MIN_PARTIAL_CHARS:
            grams.update(secret[start : start + MIN_PARTIAL_CHARS] for start in range(len(secret) - MIN_PARTIAL_CHARS + 1))
    if not grams:
        return text
    covered = bytearray(len(text))
    for start in range(len(text) - MIN_PARTIAL_CHARS + 1):
        if text[start : start + MIN_PARTIAL_CHARS] in grams:
            covered[start : start + MIN_PARTIAL_CHARS] = b"\x01" * MIN_PARTIAL_CHARS
    if not any(covered):
        return text
    pieces: list[str] = []
    index = 0
    while index < len(text):
        if covered[index]:
            while index < len(text) and covered[index]:
                index += 1
            pieces.append(REDACTED)
        else:
            end = covered.find(b"\x01", index)
            end = len(text) if end < 0 else end
            pieces.append(text[index:end])
            index = end
    return "".join(pieces)


# (pattern, replacement): a group 1, where there is one, is the context kept before the secret.
_SHAPES = (
    # PEM blocks (a private key, a certificate): the whole block, or its start when the excerpt is cut.
    (re.compile(r"-----BEGIN [A-Z0-9 ]+-----(?:.*?-----END [A-Z0-9 ]+-----|.*)", re.DOTALL), REDACTED),
    # JSON Web Tokens (Entra ID and service account tokens): header.payload[.signature].
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]*)?"), REDACTED),
    # An Authorization header's value.
    (re.compile(r"(?i)(\b(?:bearer|basic)\s+)[^\s\"',;]{4,}"), r"\1" + REDACTED),
    # The value after a key that names a credential (YAML, JSON, INI, env, query string).
    (
        re.compile(
            r"(?i)((?:token|passw(?:or)?d|secret|key-data|keydata|apikey|api-key|api_key|accountkey|\bsig|credential)"
            r"[\"']?[ \t]*[:=][ \t]*[\"']?)[^\s\"',;&]{4,}"
        ),
        r"\1" + REDACTED,
    ),
    # user:password@ in a URL (a git credential line, a proxy URL).
    (re.compile(r"(://)[^/\s:@]+:[^/\s@]+@"), r"\1" + REDACTED + "@"),
    # crypt(3) hashes as /etc/shadow holds them ($1$, $5$, $6$, $y$, $2b$ ...).
    (re.compile(r"\$(?:1|2[abxy]?|5|6|7|y|gy|sha1|md5)\$[^\s:]{8,}"), REDACTED),
    # A long base64 or hex run: key material more often than not.
    (re.compile(r"[A-Za-z0-9+/_-]{40,}={0,2}"), REDACTED),
)


def scrub_secret_shapes(text: str) -> str:
    """``text`` with whatever has the shape of a credential replaced by ``[redacted]``."""
    for shape, replacement in _SHAPES:
        text = shape.sub(replacement, text)
    return text
