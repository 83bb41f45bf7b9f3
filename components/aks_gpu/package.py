"""The component package: which components other stacks (any Pulumi language) can use, and the schema
Pulumi infers for them from their type annotations (``args`` TypedDicts in, ``pulumi.Output`` attributes out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pulumi.provider
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.schema import generate_schema
from pulumi.provider.provider import ConstructResult
from pulumi.provider.server import ComponentInitError

from aks_gpu import __version__
from aks_gpu.admission.component import GpuAdmissionPolicy
from aks_gpu.args import for_the_engine, serve_as_provider
from aks_gpu.azure.cluster import GpuCluster
from aks_gpu.azure.node_pool import GpuNodePool
from aks_gpu.kube.workload_namespace import GpuWorkloadNamespace
from aks_gpu.monitoring.component import GpuMonitoring
from aks_gpu.naming import PACKAGE_NAME
from aks_gpu.platform import GpuDevicePlugin, GpuPlatform
from aks_gpu.storage.nvme_cache import NvmeCache
from aks_gpu.validation.smoke import GpuValidation

SCHEMA_FILE = Path(__file__).parent / "schema.json"

PUBLIC_COMPONENTS: list[type[pulumi.ComponentResource]] = [
    GpuCluster,
    GpuNodePool,
    GpuDevicePlugin,
    GpuWorkloadNamespace,
    GpuAdmissionPolicy,
    NvmeCache,
    GpuValidation,
    GpuMonitoring,
    GpuPlatform,
]


def package_version() -> str:
    return __version__


def component_schema(version: str | None = None) -> dict[str, Any]:
    """The Pulumi package schema of the public components, as ``pulumi package add`` would generate SDKs from."""
    result = Analyzer(PACKAGE_NAME).analyze(PUBLIC_COMPONENTS)
    schema = generate_schema(
        PACKAGE_NAME,
        version or package_version(),
        None,
        result["component_definitions"],
        result["type_definitions"],
        sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}"),
    )
    document: dict[str, Any] = schema.to_json()
    return document


def schema_text(version: str | None = None) -> str:
    return json.dumps(component_schema(version), indent=2, sort_keys=True) + "\n"


class PackageProvider(ComponentProvider):
    """The package's provider: Pulumi's component provider, with bad args answered as the engine expects them.

    Pulumi 3.272.0's ``ComponentProvider.construct`` wraps whatever a component's ``__init__`` raises in a
    ``ComponentInitError``, and the server's ``Construct`` only recognises an ``InputPropertiesError`` that is
    not wrapped: wrapped, it becomes the message plus a Python traceback (``pulumi/provider/server.py`` and
    ``pulumi/provider/experimental/component.py``, the same at pulumi/pulumi 1b5949891b). Unwrapped here, the
    engine gets the property errors and prints each with its value.
    """

    def construct(
        self, name: str, resource_type: str, inputs: pulumi.Inputs, options: pulumi.ResourceOptions | None = None
    ) -> ConstructResult:
        try:
            return super().construct(name, resource_type, inputs, options)
        except ComponentInitError as error:
            if isinstance(error.inner, pulumi.InputPropertiesError):
                raise for_the_engine(error.inner) from None
            raise


def serve(args: list[str]) -> None:
    """Run the package as Pulumi runs a provider plugin: ``args`` are the engine's address and flags; the port
    it listens on is printed to stdout (``pulumi.provider.main``)."""
    serve_as_provider()
    pulumi.provider.main(PackageProvider(PUBLIC_COMPONENTS, PACKAGE_NAME, version=package_version()), args)
