"""A CUDA context on every GPU, read and graded: the output of CUDA samples' ``deviceQuery`` (NVIDIA's
``nvcr.io/nvidia/k8s/cuda-sample:devicequery`` image prints it), or any CUDA program's error.

``deviceQuery`` creates a context on each device and prints ``Detected N CUDA Capable device(s)``, a summary line
with ``NumDevs = N`` and ``Result = PASS``, or ``cudaGetDeviceCount returned <code>`` / ``-> <message>`` and
``Result = FAIL`` (https://github.com/NVIDIA/cuda-samples, Samples/1_Utilities/deviceQuery). The CUDA runtime's
error codes (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html, cudaError):

- 802 ``cudaErrorSystemNotReady`` "system not yet initialized": on NVSwitch systems (ND A100 v4, ND H100 v5) the
  fabric manager is not running, so no CUDA work can start although ``nvidia-smi`` lists every GPU: unhealthy;
- 100 ``cudaErrorNoDevice``, 3 ``cudaErrorInitializationError``, 999 ``cudaErrorUnknown``: unhealthy;
- 35 ``cudaErrorInsufficientDriver``: the diagnostic image's CUDA is newer than the node's driver: the check
  could not run (inconclusive), the node is not shown faulty by it;
- 46 ``cudaErrorDevicesUnavailable``: a GPU is held exclusively by another process: inconclusive.

PyTorch's "No CUDA GPUs are available" and "Found no NVIDIA driver" say the same as 100: unhealthy.
"""

from __future__ import annotations

import re

from aks_gpu.gpu.diag.grade import Grade

TOOL = "cuda-context"
_DETECTED = re.compile(r"Detected\s+(\d+)\s+CUDA Capable device|NumDevs\s*=\s*(\d+)", re.IGNORECASE)
_RETURNED = re.compile(r"returned\s+(\d+)[ \t]*(?:\r?\n\s*->\s*(.+))?")
_CODE = re.compile(r"code=(\d+)\((\w+)\)|Error\s+(\d+):\s*([^\n(]+)")
_NOT_RUN = {
    35: "the diagnostic image's CUDA is newer than the node's driver (CUDA error 35)",
    46: "a GPU is held by another process (CUDA error 46, devices unavailable)",
}
_MEANING = {
    802: "CUDA error 802 system not yet initialized: the NVSwitch fabric manager is not running",
    100: "CUDA error 100: no CUDA-capable device is detected",
    3: "CUDA error 3: initialization error",
}
_NO_GPU = ("No CUDA GPUs are available", "Found no NVIDIA driver", "no CUDA-capable device is detected")


def read_cuda_context(text: str, expected_gpus: int | None = None) -> Grade:
    """The grade of a CUDA context check on a node that should have ``expected_gpus`` GPUs (None: any number)."""
    code = _error_code(text)
    if code is not None:
        number, message = code
        line = f"CUDA error {number}: {message}".strip()
        if number in _NOT_RUN:
            return Grade(TOOL, "inconclusive", _NOT_RUN[number], (line,))
        return Grade(TOOL, "unhealthy", _MEANING.get(number, line), (line,))
    for marker in _NO_GPU:
        if marker.lower() in text.lower():
            return Grade(TOOL, "unhealthy", f"no CUDA GPU is usable: {marker}", (marker,))
    detected = _DETECTED.search(text)
    if detected is None:
        return Grade(TOOL, "inconclusive", "no deviceQuery result in the output")
    count = int(detected.group(1) or detected.group(2))
    if expected_gpus is not None and count < expected_gpus:
        return Grade(TOOL, "unhealthy", f"CUDA sees {count} of {expected_gpus} GPUs", (detected.group(0),))
    if "Result = FAIL" in text:
        return Grade(TOOL, "unhealthy", "deviceQuery reported Result = FAIL", (detected.group(0),))
    if "Result = PASS" not in text:
        return Grade(TOOL, "inconclusive", "deviceQuery ended before its result (cut off or killed)")
    return Grade(TOOL, "healthy")


def _error_code(text: str) -> tuple[int, str] | None:
    returned = _RETURNED.search(text)
    if returned and "cuda" in text[: returned.start()].lower():
        return int(returned.group(1)), (returned.group(2) or "").strip()
    found = _CODE.search(text)
    if found:
        number = found.group(1) or found.group(3)
        return int(number), (found.group(2) or found.group(4) or "").strip()
    return None
