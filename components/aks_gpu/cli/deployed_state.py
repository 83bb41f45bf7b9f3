"""The deployed state ``aksgpu plan`` tells its changes against: the previous plan in its output folder, or
``--against FILE``, a ``pulumi stack export`` of the deployed stack (what a CI job can read without Azure).

An export is the engine's checkpoint as JSON (pulumi/pulumi sdk/go/common/apitype/core.go@1b5949891b: ``version``
3 or 4, ``deployment.resources``, each with ``urn``, ``type``, ``custom``, ``inputs``, ``outputs``, ``protect``, ``parent``,
``dependencies``, ``provider``). Secrets stay encrypted there: an object whose ``4dabf18193072939515e22adb298388d``
(sig.Key) is ``1b47061264138c4ac30d75fd1eb44270`` (sig.Secret), with a ``ciphertext`` (or, exported with
--show-secrets, a ``plaintext``): read as ``[secret]``, its value never kept (sdk/go/common/resource/sig/sig.go).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aks_gpu.config.problems import clipped
from aks_gpu.input_files import InputFileError, decode_utf8, read_bounded
from aks_gpu.mock_engine import SECRET
from aks_gpu.mock_engine.changes import Deployed, DeployedResource

# Version 3, or 4 when the deployment uses a feature older CLIs cannot read, listed in the export's ``features``
# (sdk/go/common/apitype/deployments.json). The program's post-deploy hook (resourceHooks) is one: the real CLI
# (v3.274.1) exports every deployed stack of this program as version 4 with features ["hooks"]
# (tests/e2e/test_change_safety.py exports one). The resources read here have the same shape in both.
EXPORT_VERSIONS = (3, 4)
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
# A stack's checkpoint is a few MiB for hundreds of resources; far above any real one.
MAX_EXPORT_BYTES = 256 << 20


class DeployedStateError(ValueError):
    """An --against file that cannot be read as a `pulumi stack export`."""


def without_secrets(value: Any) -> Any:
    """``value`` with every secret (encrypted or not) as ``[secret]``."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            return SECRET
        return {key: without_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_secrets(item) for item in value]
    return value


def read_export(path: Path, shown_as: str) -> Deployed:
    """The deployed resources of a `pulumi stack export` file; ``DeployedStateError`` saying what is wrong."""
    try:
        text = decode_utf8(read_bounded(path, MAX_EXPORT_BYTES))
    except InputFileError as error:  # its message: no such file, a folder, too big, not UTF-8
        raise DeployedStateError(f"--against {shown_as}: {error}") from None
    try:
        document = json.loads(text)
    except RecursionError:
        raise DeployedStateError(f"--against {shown_as}: nested too deeply to read") from None
    except ValueError as error:
        raise DeployedStateError(
            f"--against {shown_as}: not valid JSON ({clipped(str(error), 120)}), perhaps cut short"
        ) from None
    return Deployed(shown_as, export_resources(document, shown_as), exported=True)


def export_resources(document: Any, shown_as: str) -> dict[str, DeployedResource]:
    what = "a `pulumi stack export` (an object with `version` and `deployment`)"
    if not isinstance(document, dict) or "deployment" not in document or "version" not in document:
        raise DeployedStateError(f"--against {shown_as}: not {what}; write one with `pulumi stack export --file FILE`")
    version = document["version"]
    if version not in EXPORT_VERSIONS or isinstance(version, bool):
        raise DeployedStateError(
            f"--against {shown_as}: a deployment of version {clipped(repr(version), 40)}; only versions 3 and 4 (what"
            " `pulumi stack export` writes) are read"
        )
    deployment = document["deployment"]
    if not isinstance(deployment, dict):
        raise DeployedStateError(f"--against {shown_as}: `deployment` is not an object")
    listed = deployment.get("resources") or []
    if not isinstance(listed, list):
        raise DeployedStateError(f"--against {shown_as}: `deployment.resources` is not a list")
    resources: dict[str, DeployedResource] = {}
    for index, entry in enumerate(listed):
        if not (isinstance(entry, dict) and isinstance(entry.get("urn"), str) and isinstance(entry.get("type"), str)):
            raise DeployedStateError(
                f"--against {shown_as}: resources[{index}] is not a resource (an object with `urn` and `type`)"
            )
        if entry.get("delete") is True:
            continue  # a resource pending deletion from an interrupted replacement: not the deployed one
        inputs = entry.get("inputs")
        inputs = {} if inputs is None else inputs
        if not isinstance(inputs, dict):
            raise DeployedStateError(f"--against {shown_as}: resources[{index}].inputs is not an object")
        resources[entry["urn"]] = DeployedResource(
            entry["urn"], entry["type"], without_secrets(inputs), entry.get("protect") is True, entry.get("custom") is not False
        )
    return resources


def previous_plan_state(document: Mapping[str, Any], shown_as: str) -> Deployed:
    """A previous plan's ``resources.json`` (already checked for its shape) as the deployed state."""
    resources: dict[str, DeployedResource] = {}
    for record in document["resources"]:
        options = record.get("options") if isinstance(record.get("options"), dict) else {}
        resources[record["urn"]] = DeployedResource(
            record["urn"],
            str(record.get("type", "")),
            record["inputs"],
            options.get("protect") is True,
            record.get("custom") is not False,
        )
    return Deployed(shown_as, resources)
