"""Which host names stand for this machine. Pure: standard library only."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1): a server on this machine, and no other."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
