"""Encrypted values of a stack file, offline.

``pulumi config set --secret`` writes a value as ``{secure: <ciphertext>}``, with ``--path`` at that place inside the
key (pulumi/pulumi ``sdk/go/common/resource/config/value.go``, the "secure" object form, v3.259.0). Only Pulumi, with
the stack's secrets provider, can decrypt it: under ``pulumi up`` and ``pulumi preview`` the program is handed the
plaintext and never sees this form. Offline (``plan``, ``validate --stack``, ``rules``, ``audit --stack``,
``admission check --stack``) it stands as an ``Encrypted`` placeholder: a text that reads ``[secret]``, accepted by
every text field without its pattern (nothing can be checked of a value nobody can read), refused by a field whose
value a rule needs (a number, a choice, a switch), which the loader reports as a warning naming the key.
"""

from __future__ import annotations

from typing import Any

# How a secret is shown wherever a value would be: in messages, plans and manifests.
SECRET = "[secret]"


class Encrypted(str):
    """A value of the stack file that only Pulumi can decrypt; it reads ``[secret]``."""

    __slots__ = ()

    def __new__(cls) -> Encrypted:
        return super().__new__(cls, SECRET)

    def __repr__(self) -> str:
        return repr(SECRET)

    def __reduce__(self) -> tuple[type[Encrypted], tuple[()]]:
        return Encrypted, ()


def is_secure_form(value: Any) -> bool:
    """Whether ``value`` is Pulumi's encrypted form, ``{secure: "<ciphertext>"}``."""
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def holds_secure_form(value: Any) -> bool:
    """Whether ``value`` is, or holds somewhere inside it, Pulumi's encrypted form."""
    if is_secure_form(value):
        return True
    if isinstance(value, dict):
        return any(holds_secure_form(child) for child in value.values())
    if isinstance(value, list | tuple):
        return any(holds_secure_form(child) for child in value)
    return False


def with_placeholders(value: Any) -> Any:
    """``value`` with each encrypted form in it replaced by an ``Encrypted`` placeholder (the ciphertext dropped)."""
    if is_secure_form(value):
        return Encrypted()
    if isinstance(value, dict):
        return {key: with_placeholders(child) for key, child in value.items()}
    if isinstance(value, list):
        return [with_placeholders(child) for child in value]
    return value
