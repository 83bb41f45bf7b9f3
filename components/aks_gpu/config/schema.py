"""The JSON Schema of a whole stack file, built from the pydantic models so it never drifts from them."""

from __future__ import annotations

from typing import Any

from aks_gpu.config.loader import PROJECT
from aks_gpu.config.models import StackConfig
from aks_gpu.naming import LOCATION_KEY

SCHEMA_FILE_NAME = "stack-config.schema.json"


def stack_file_schema() -> dict[str, Any]:
    models = StackConfig.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
    definitions = models.pop("$defs", {})
    properties: dict[str, Any] = {LOCATION_KEY: {"type": "string", "description": "Azure region of the cluster"}}
    for name, schema in models["properties"].items():
        if name != "location":
            properties[f"{PROJECT}:{name}"] = schema
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "aks-gpu stack file",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "description": "The stack's settings: aks-gpu keys, the Azure location and other providers' keys.",
                "properties": properties,
                "required": [f"{PROJECT}:cluster", LOCATION_KEY],
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
