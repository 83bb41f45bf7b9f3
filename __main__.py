"""The aks-gpu Pulumi program: validate and resolve the stack config once, build the platform from it, export
(``aks_gpu.program.run_platform``, which ``aksgpu local`` runs as an inline program too)."""

from aks_gpu.program import run_platform

run_platform()
