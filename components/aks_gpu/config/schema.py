"""The JSON Schema of a whole stack file, built from the pydantic models so it never drifts from them, and the copy of it
the package ships: ``python -m aks_gpu.config.generate`` (``make schema``) writes it, with the repository's
stacks/stack-config.schema.json, and ``tests/config/test_generated.py`` fails when either is stale. ``aksgpu schema``
prints the shipped copy, so it loads neither pydantic nor the models (issue 46: importing them took most of its time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aks_gpu.naming import CONFIG_NAMESPACE, LOCATION_KEY

SCHEMA_FILE_NAME = "stack-config.schema.json"
# Package data (pyproject.toml), beside the component package's schema.json.
SHIPPED_SCHEMA_FILE = Path(__file__).resolve().parents[1] / SCHEMA_FILE_NAME


def stack_file_schema() -> dict[str, Any]:
    # Imported here: only writing the schema needs the models; reading the shipped copy does not.
    from aks_gpu.config.models import StackConfig

    models = StackConfig.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    definitions = models.pop("$defs", {})
    properties: dict[str, Any] = {LOCATION_KEY: {"type": "string", "description": "Azure region of the cluster"}}
    for name, schema in models["properties"].items():
        if name != "location":
            properties[f"{CONFIG_NAMESPACE}:{name}"] = schema
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "aks-gpu stack file",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "description": "The stack's settings: aks-gpu keys, the Azure location and other providers' keys.",
                "properties": properties,
                "required": [f"{CONFIG_NAMESPACE}:cluster", LOCATION_KEY],
                # Other providers' keys (azure-native:*, kubernetes:*) are theirs to check.
                "patternProperties": {"^(azure-native|kubernetes|pulumi):": {}},
                "additionalProperties": False,
            },
            "secretsprovider": {"type": "string", "description": "Pulumi's secrets provider for this stack (set by pulumi)."},
            "encryptedkey": {"type": "string", "description": "The stack's encrypted data key (set by pulumi)."},
            "encryptionsalt": {"type": "string", "description": "The passphrase provider's salt (set by pulumi)."},
        },
        "$defs": definitions,
    }


def stack_file_schema_text() -> str:
    """The schema as ``aksgpu schema`` prints it and both files hold it."""
    return json.dumps(stack_file_schema(), indent=2, sort_keys=True) + "\n"
