"""Entry point of the component package (``PulumiPlugin.yaml`` beside it): hosts the public components, so
``pulumi package add <path to this folder>`` gives TypeScript, Go, C#, Java and YAML stacks typed SDKs."""

import importlib.util
import sys
from pathlib import Path

if __package__ in (None, ""):
    # Pulumi runs this file as a script from the plugin folder. That folder must leave the import path (its
    # platform.py would shadow the standard library's), and it is the package aks_gpu (the wheel installs it under
    # that name): it is loaded as such from here, so neither an install nor the checkout's aks_gpu symlink (a plain
    # file where git does not make links) is needed.
    _HERE = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]
    if "aks_gpu" not in sys.modules:
        _spec = importlib.util.spec_from_file_location("aks_gpu", _HERE / "__init__.py", submodule_search_locations=[str(_HERE)])
        assert _spec is not None and _spec.loader is not None
        sys.modules["aks_gpu"] = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(sys.modules["aks_gpu"])

from aks_gpu.package import serve

if __name__ == "__main__":
    # The language host runs `python <plugin folder> <engine address> [flags]`
    # (pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go, RunPlugin).
    serve(sys.argv[1:])
