"""GPUs claimed through Dynamic Resource Allocation (resource.k8s.io), which this stack does not serve. Pure, once the
data file is read.

A Pod claims devices with ``spec.resourceClaims`` (each entry names a ResourceClaim, ``resourceClaimName``, or a
ResourceClaimTemplate the control plane makes a claim from, ``resourceClaimTemplateName``, in the Pod's namespace),
and a claim asks for devices in ``spec.devices.requests``: per request ``exactly`` one device class (v1, v1beta2)
or the class at the request itself (v1beta1), or ``firstAvailable`` alternatives, each with a ``deviceClassName`` and
CEL ``selectors`` (https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/). The GPU
classes and drivers are in ``components/aks_gpu/data/dra_gpu_devices.yaml``.

The stack's policy ``aks-gpu-dra-claims`` refuses a claim or template asking for one
(:func:`aks_gpu.admission.policy.dra_policy_manifest`); a Pod only names its claims, so the server admits it and it
stays Pending. ``aksgpu admission check`` follows the Pod's claims to the objects given with it and says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.data_files import load_yaml

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "dra_gpu_devices.yaml"
GROUP = "resource.k8s.io"
CLAIM = "ResourceClaim"
TEMPLATE = "ResourceClaimTemplate"
# Where the claim spec sits in each kind.
CLAIM_SPEC_PATHS: dict[str, tuple[str, ...]] = {CLAIM: ("spec",), TEMPLATE: ("spec", "spec")}
# A Pod's claim entry: which field names what.
CLAIM_REFERENCES = (("resourceClaimName", CLAIM), ("resourceClaimTemplateName", TEMPLATE))


@dataclass(frozen=True)
class GpuDevices:
    classes: tuple[str, ...]
    drivers: tuple[str, ...]


@cache
def gpu_devices() -> GpuDevices:
    """The GPU device classes and drivers of the data file."""
    drivers = load_yaml(DATA_FILE)["drivers"]
    return GpuDevices(
        classes=tuple(str(name) for entry in drivers for name in entry["classes"]),
        drivers=tuple(str(entry["name"]) for entry in drivers),
    )


# DRA extended resources (DRAExtendedResource, on in 1.36): a container may ask for devices of a class as the
# extended resource "<this prefix><class>" in its resources, which the scheduler turns into a claim
# (k8s.io/api resource/v1 types.go ResourceDeviceClassPrefix). A GPU class asked that way is a GPU request.
DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"


def gpu_class_resources() -> tuple[str, ...]:
    """The extended resource names of the GPU device classes (``deviceclass.resource.kubernetes.io/gpu.nvidia.com``)."""
    return tuple(DEVICE_CLASS_RESOURCE_PREFIX + name for name in gpu_devices().classes)


def is_claim(obj: Mapping[str, Any]) -> bool:
    api_version = obj.get("apiVersion")
    group = str(api_version).rpartition("/")[0] if isinstance(api_version, str) else ""
    return group == GROUP and str(obj.get("kind", "")) in CLAIM_SPEC_PATHS


def claim_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Any = obj
    for step in CLAIM_SPEC_PATHS.get(str(obj.get("kind", "")), ()):
        spec = spec.get(step) if isinstance(spec, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def spec_path(obj: Mapping[str, Any]) -> str:
    return ".".join(CLAIM_SPEC_PATHS.get(str(obj.get("kind", "")), ("spec",)))


def _alternatives(request: Mapping[str, Any], where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The device choices of one request: ``exactly``, each of ``firstAvailable``, or (v1beta1) the request itself."""
    exactly = request.get("exactly")
    if isinstance(exactly, Mapping):
        yield f"{where}.exactly", exactly
    for index, choice in enumerate(request.get("firstAvailable") or ()):
        if isinstance(choice, Mapping):
            yield f"{where}.firstAvailable[{index}]", choice
    if "deviceClassName" in request:
        yield where, request


def device_choices(obj: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(request name, path, choice) of every device choice of a claim or template."""
    devices = claim_spec(obj).get("devices")
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    found = []
    base = f"{spec_path(obj)}.devices.requests"
    for index, request in enumerate(requests if isinstance(requests, list) else ()):
        if isinstance(request, Mapping):
            name = str(request.get("name") or index)
            found += [(name, where, choice) for where, choice in _alternatives(request, f"{base}[{index}]")]
    return found


def _selectors(choice: Mapping[str, Any]) -> Iterable[str]:
    for selector in choice.get("selectors") or ():
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        if isinstance(expression, str):
            yield expression


def gpu_asks(obj: Mapping[str, Any]) -> list[str]:
    """What in a claim or template asks for GPUs, in words (``request gpu: device class gpu.nvidia.com``); empty
    when nothing does. The same test as the policy's: a GPU device class, or a selector that names a GPU driver."""
    devices = gpu_devices()
    found = []
    for name, _, choice in device_choices(obj):
        class_name = choice.get("deviceClassName")
        if isinstance(class_name, str) and class_name in devices.classes:
            found.append(f"request {name}: device class {class_name}")
            continue
        named = [driver for expression in _selectors(choice) for driver in devices.drivers if driver in expression]
        if named:
            found.append(f"request {name}: a selector on driver {named[0]}")
    return list(dict.fromkeys(found))


ClaimKey = tuple[str, str, str]  # (kind, namespace, name)


def claims_given(objects: Iterable[tuple[Mapping[str, Any], str]]) -> dict[ClaimKey, list[str]]:
    """The claims and templates among (object, its namespace) pairs, each with what in it asks for GPUs."""
    found = {}
    for obj, namespace in objects:
        if is_claim(obj):
            metadata = obj.get("metadata") or {}
            name = str(metadata.get("name") or "")
            found[(str(obj["kind"]), namespace, name)] = gpu_asks(obj)
    return found


@dataclass(frozen=True)
class PodClaims:
    gpus: tuple[str, ...]  # each claim entry that asks for GPUs, in words
    unknown: tuple[str, ...]  # the claims and templates named that are not among the objects


def pod_claims(spec: Mapping[str, Any], namespace: str, given: Mapping[ClaimKey, Sequence[str]]) -> PodClaims:
    """What a pod spec's ``resourceClaims`` claim, followed to the claims and templates ``given`` (by kind, namespace
    and name: a Pod's claims live in its own namespace)."""
    gpus, unknown = [], []
    for index, entry in enumerate(spec.get("resourceClaims") or ()):
        if not isinstance(entry, Mapping):
            continue
        for field_name, kind in CLAIM_REFERENCES:
            referenced = entry.get(field_name)
            if not isinstance(referenced, str) or not referenced:
                continue
            asks = given.get((kind, namespace, referenced))
            if asks is None:
                unknown.append(f"{kind} {referenced}")
            elif asks:
                gpus.append(f"resourceClaims[{index}] {entry.get('name')}: {kind} {referenced} ({'; '.join(asks)})")
    return PodClaims(tuple(gpus), tuple(unknown))


# DRAAdminAccess (on in 1.36): a claim or template asking for admin access to its devices is refused before admission
# unless its namespace carries this label, set to "true" (k8s.io/kubernetes pkg/registry/resource/utils.go
# AuthorizedForAdmin, called by the ResourceClaim and ResourceClaimTemplate strategies' Validate; the label is
# resource.DRAAdminNamespaceLabelKey). The path is the internal version's, which the server names whatever the
# object's own version.
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


def admin_access_refusal(obj: Mapping[str, Any], namespace_labels: Mapping[str, Any]) -> str | None:
    """The server's 422 for a claim or template that asks for admin access in a namespace without the label; None
    when it does not ask, or may."""
    if not is_claim(obj) or namespace_labels.get(ADMIN_ACCESS_LABEL) == "true":
        return None
    devices = claim_spec(obj).get("devices")
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    for index, request in enumerate(requests if isinstance(requests, list) else ()):
        if not isinstance(request, Mapping):
            continue
        exactly = request.get("exactly")
        # v1 and v1beta2 put it under exactly, v1beta1 at the request itself; both are Exactly.AdminAccess inside.
        asked = (exactly if isinstance(exactly, Mapping) else request).get("adminAccess")
        if asked is True:
            metadata = obj.get("metadata") or {}
            name = str(metadata.get("name") or "")
            detail = f"admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` label on the containing namespace"
            at = f"spec.devices.requests[{index}].adminAccess"
            return f'{obj.get("kind")}.{GROUP} "{name}" is invalid: {at}: Forbidden: {detail}'
    return None
