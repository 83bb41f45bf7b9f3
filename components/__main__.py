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

from components.package import serve

if __name__ == "__main__":
    # The language host runs `python <plugin folder> <engine address> [flags]`
    # (pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go, RunPlugin).
    serve(sys.argv[1:])
