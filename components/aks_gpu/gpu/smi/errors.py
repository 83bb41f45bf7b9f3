"""The error messages nvidia-smi, amd-smi and rocm-smi print when the driver is missing, mismatched or finds no GPU."""

from __future__ import annotations

import re
from collections.abc import Sequence

from aks_gpu.gpu.smi.model import ErrorKind, SmiError
from aks_gpu.gpu.smi.text import NVIDIA_DRIVER, version
from aks_gpu.naming import Vendor

# Plain substrings where a plain substring does it; each pattern is searched once per line.
_SIGNATURES: tuple[tuple[Vendor, ErrorKind, re.Pattern[str]], ...] = (
    ("nvidia", "driver_not_loaded", re.compile(r"NVIDIA-SMI has failed because it couldn't communicate")),
    # The driver's user-space library is not there at all (not installed, or not mounted into the pod).
    ("nvidia", "driver_not_loaded", re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml")),
    ("nvidia", "driver_library_mismatch", re.compile(r"Driver/library version mismatch")),
    # NVML did not start, for a reason other than the mismatch above (matched first). "Unknown Error" is what a
    # container prints once it lost access to the /dev/nvidia* device nodes: after `systemctl daemon-reload` on the
    # host (https://github.com/NVIDIA/nvidia-docker/issues/1671, fixture smi/65; also
    # https://github.com/NVIDIA/nvidia-container-toolkit/issues/115).
    ("nvidia", "nvml_init_failed", re.compile(r"^Failed to initialize NVML: ")),
    ("nvidia", "no_devices", re.compile(r"^No devices were found")),
    # amd-smi and rocm-smi, with or without Python logging's "ERROR:root:" prefix.
    (
        "amd",
        "driver_not_loaded",
        re.compile(
            r"amdgpu not found in modules|driver not initialized|check amdgpu version and module status",
            re.IGNORECASE,
        ),
    ),
)
_NVML_LIBRARY_VERSION = re.compile(r"^NVML library version: ?([0-9.]{1,20})$", re.ASCII)
# /proc/driver/nvidia/version, often pasted beside a mismatch error: the kernel module actually loaded.
_NVRM_VERSION = re.compile(
    r"^NVRM version: [^\n]{0,200}?Kernel Module(?: for [^ ]{1,40})? +([0-9]{2,4}(?:\.[0-9]{1,4}){1,3})(?: |$)", re.ASCII
)


def reported_error(
    lines: Sequence[str], vendors: Sequence[Vendor], complete: Sequence[str] | None = None
) -> tuple[Vendor, SmiError] | None:
    """The first error message of the vendors' tools among ``lines``; versions quoted in it come from the
    ``complete`` lines only (not from a line the output was cut in)."""
    for vendor, kind, pattern in _SIGNATURES:
        if vendor not in vendors:
            continue
        for line in lines:
            stripped = line.strip()
            if pattern.search(stripped):
                message = stripped[:300]
                whole = lines if complete is None else complete
                library = _first_group(_NVML_LIBRARY_VERSION, whole) if kind == "driver_library_mismatch" else None
                if library is not None:
                    message += f" (NVML library version: {library})"
                return vendor, SmiError(kind, message)
    return None


def loaded_kernel_module(lines: Sequence[str]) -> str | None:
    """The NVIDIA kernel module version /proc/driver/nvidia/version names, when it is among the lines."""
    return version(_first_group(_NVRM_VERSION, lines), NVIDIA_DRIVER)


def _first_group(pattern: re.Pattern[str], lines: Sequence[str]) -> str | None:
    for line in lines:
        match = pattern.search(line.strip())
        if match is not None:
            return match.group(1)
    return None
