"""An exception nobody expected: one line that says so, where in our code, and how to report it.

A traceback is a bug (the contract: every input ends in a documented exit code with a message), so the
command line and the Pulumi program report it as an internal error instead of printing the traceback. The
exception's own text is left out by default: it can quote anything it was handed, a token included. Set
``AKSGPU_DEBUG=1`` (or pass ``aksgpu --debug``) to get the full traceback.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path

DEBUG_ENV = "AKSGPU_DEBUG"
# The package folder, aks_gpu/ in the checkout (under components/) and where the wheel is installed alike.
_PACKAGE_DIR = Path(__file__).resolve().parent


def debug_requested() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def where(error: BaseException) -> str:
    """``aks_gpu/config/loader.py:120 in validate_config``: the innermost frame in this project's code."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [frame for frame in frames if _is_ours(frame.filename)] or frames
    if not ours:
        return "an unknown place"
    frame = ours[-1]
    try:
        name = str(Path(frame.filename).resolve().relative_to(_PACKAGE_DIR.parent))
    except ValueError:
        name = Path(frame.filename).name
    return f"{name}:{frame.lineno} in {frame.name}"


def internal_error_message(error: BaseException, command: str = "aksgpu") -> str:
    return (
        f"internal error: {type(error).__name__} at {where(error)}. This is a bug in aks-gpu, not a problem with your"
        f" input: please file an issue with the command you ran and what it prints with {DEBUG_ENV}=1 set"
        f" (`{DEBUG_ENV}=1 {command} ...` shows the traceback; check it for secrets before you share it)."
    )


def _is_ours(filename: str) -> bool:
    try:
        Path(filename).resolve().relative_to(_PACKAGE_DIR)
    except ValueError:
        return False
    return True
