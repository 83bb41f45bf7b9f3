"""The edge between Pulumi's runtime config and our validation: used by ``__main__.py`` under
``pulumi up`` and under the offline plan alike, so both see the same rules and messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from components.config.loader import ValidatedConfig, stack_file_path, validate_config
from components.config.problems import ConfigError
from components.internal_error import debug_requested, internal_error_message


def runtime_config_map() -> dict[str, Any]:
    """Every config key Pulumi handed to this program (``namespace:key`` -> value)."""
    merged: dict[str, Any] = dict(runtime_config.get_config_env())
    merged.update(runtime_config.CONFIG.get())
    return merged


def load_from_pulumi() -> ValidatedConfig:
    """Validate the running stack's config; on failure raise ``pulumi.RunError`` (no traceback), so
    nothing is registered and the message names the stack file and every bad key."""
    source = str(stack_file_path(Path("."), pulumi.get_stack()))
    try:
        validated = validate_config(runtime_config_map(), source)
    except ConfigError as exc:
        raise pulumi.RunError("invalid stack config:\n" + "\n".join(p.render(exc.source) for p in exc.problems)) from None
    except Exception as exc:
        # Any other exception is a bug: say so in one line, as the command line does (exit 3 there).
        if debug_requested():
            raise
        raise pulumi.RunError(internal_error_message(exc, "pulumi up")) from None
    for warning in validated.warnings:
        pulumi.log.warn(warning.render(source))
    return validated
