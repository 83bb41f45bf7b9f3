"""Entry point of the component package (``PulumiPlugin.yaml`` beside it): hosts the public components, so
``pulumi package add <path to this folder>`` gives TypeScript, Go, C#, Java and YAML stacks typed SDKs."""

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Pulumi runs this file as a script from the plugin folder. That folder must leave the import path (its
    # platform.py would shadow the standard library's) and the repository root must join it.
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]
    sys.path.insert(0, str(_HERE.parent))

from pulumi.provider.experimental import component_provider_host

from components.package import PACKAGE_NAME, PUBLIC_COMPONENTS, package_version

if __name__ == "__main__":
    component_provider_host(PUBLIC_COMPONENTS, name=PACKAGE_NAME, version=package_version())
