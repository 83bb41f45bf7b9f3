"""Entry point of the component package (``PulumiPlugin.yaml`` beside it): hosts the public components, so
``pulumi package add <path to this folder>`` gives TypeScript, Go, C#, Java and YAML stacks typed SDKs."""

import sys

# Pulumi runs this file as a script (`python <plugin folder> <engine address> [flags]`), which puts this folder first
# on the import path: the package aks_gpu/ beside this file is imported from here, so no install is needed first.
from aks_gpu.package import serve

if __name__ == "__main__":
    # The language host runs `python <plugin folder> <engine address> [flags]`
    # (pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go, RunPlugin).
    serve(sys.argv[1:])
