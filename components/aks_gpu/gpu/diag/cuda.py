"""A CUDA context on every GPU, read and graded: the output of CUDA samples' ``deviceQuery`` (NVIDIA's
``nvcr.io/nvidia/k8s/cuda-sample:devicequery-cuda12.5.0`` image prints it), the other samples an engineer runs to prove
a GPU (``bandwidthTest``, ``vectorAdd``, ``simpleP2P``), NVIDIA's ``nvbandwidth``, or any CUDA program's error.

``deviceQuery`` creates a context on each device and prints ``Detected N CUDA Capable device(s)``, a summary line
with ``NumDevs = N`` and ``Result = PASS``, or ``cudaGetDeviceCount returned <code>`` / ``-> <message>`` and
``Result = FAIL`` (https://github.com/NVIDIA/cuda-samples, Samples/1_Utilities/deviceQuery). The CUDA runtime's
error codes (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html, cudaError):

- 802 ``cudaErrorSystemNotReady`` "system not yet initialized": on NVSwitch systems (ND A100 v4, ND H100 v5) the
  fabric manager is not running, so no CUDA work can start although ``nvidia-smi`` lists every GPU: unhealthy;
- 100 ``cudaErrorNoDevice``, 999 ``cudaErrorUnknown``: unhealthy;
- 35 ``cudaErrorInsufficientDriver``: the diagnostic image's CUDA is newer than the node's driver: the check
  could not run (inconclusive), the node is not shown faulty by it;
- 3 ``cudaErrorInitializationError``: NVIDIA's own example of it is ``deviceQuery`` built with CUDA 11.1 on a driver
  below that release's minimum (CUDA C++ Best Practices Guide, "CUDA Compatibility Developer's Guide"): like 35, the
  image and the driver do not fit, nothing about the GPU was learned (inconclusive);
- 304 ``cudaErrorOperatingSystem`` "OS call failed or operation not supported on this OS": the program's
  environment refused CUDA a system call (a sandbox or an unsupported kernel), not a GPU fault: inconclusive;
- 46 ``cudaErrorDevicesUnavailable``: a GPU is held exclusively by another process: inconclusive;
- errors of the program or its image, not of the node, are inconclusive too: 2 ``cudaErrorMemoryAllocation`` (another
  process holds the memory), 101 ``cudaErrorInvalidDevice`` (a device ordinal the pod was not given), 209
  ``cudaErrorNoKernelImageForDevice`` (the binary was not built for this GPU's architecture), 222
  ``cudaErrorUnsupportedPtxVersion`` (its PTX is newer than the driver), 804 ``cudaErrorCompatNotSupportedOnDevice``
  (the image's forward-compatibility package on a GPU that does not support it);
- 803 ``cudaErrorSystemDriverMismatch`` (the node's user-space driver and kernel module differ): unhealthy.
A sample that prints only the message (``vectorAdd``: ``(error code <message>)``, nccl-tests' ``Test CUDA failure
<file>:<line> '<message>'``) is read by the message (``cuda_error_grade``); numbers before CUDA 10.1 differ (38 was
no device, 30 unknown), and they are printed with the same messages.

PyTorch's "No CUDA GPUs are available" and "Found no NVIDIA driver" say the same as 100: unhealthy.

The other tools, as their sources print them:
- ``simpleP2P`` (cuda-samples Samples/0_Introduction/simpleP2P): ``Verification error @ element N`` when data copied
  between two GPUs arrives wrong (unhealthy), ``Test passed`` else; it waives itself without two P2P-capable GPUs;
- ``nvbandwidth`` (https://github.com/NVIDIA/nvbandwidth): ``Invalid value when checking the pattern`` / ``ASSERT``
  when a copy came back wrong (unhealthy, NVIDIA/nvbandwidth#34), ``Waiving <test>`` when the test does not apply
  to the system (no peer mapping: inconclusive, NVIDIA/nvbandwidth#13), ``SUM <test> <GB/s>`` per finished test;
- ``bandwidthTest`` ends in ``Result = PASS`` like deviceQuery; ``vectorAdd`` prints ``Test PASSED`` or
  ``Failed to <step> (error code <message>)!``;
- ``p2pBandwidthLatencyTest`` (cuda-samples Samples/5_Domain_Specific/p2pBandwidthLatencyTest @ca37378) measures
  every GPU pair with and without peer access and checks no data: a run that reaches its last matrix (or its closing
  note) is healthy, a pair without peer access (``Device=0 CANNOT Access Peer Device=1``: its copies go through the
  host) a warning; its ``Cuda failure <file>:<line>: '<message>'`` is graded by the message;
- the GPU Operator's ``nvidia-cuda-validator`` pod runs ``vectorAdd`` in its ``cuda-validation`` init container, and
  its main container only echoes ``cuda workload validation is successful`` (NVIDIA/gpu-operator
  ``validator/manifests/cuda-workload-validation.yaml`` @a22dbf67): the init container ran before it, so that line
  is vectorAdd's pass on the pod's GPU.
An output that shows none of these is not graded (inconclusive), never healthy.
"""

from __future__ import annotations

import re

from aks_gpu.gpu.diag.grade import Grade

TOOL = "cuda-context"
_DETECTED = re.compile(r"Detected\s+(\d+)\s+CUDA Capable device|NumDevs\s*=\s*(\d+)", re.IGNORECASE)
# nvbandwidth (``Device 0: NVIDIA ...``) and p2pBandwidthLatencyTest (``Device: 0, NVIDIA ..., pciBusID``) list each device.
_DEVICE_LINE = re.compile(r"^Device:? (\d+)[:,] ", re.M)
# helper_cuda.h's and p2pBandwidthLatencyTest's cudaCheckError, nccl-tests' ``Test CUDA failure <file>:<line> '<message>'``.
CUDA_FAILURE = re.compile(r"CUDA failure[^'\n]*'([^'\n]+)'", re.IGNORECASE)
_P2P_TEST = "GPU Bandwidth Latency Test"
_NO_PEER = re.compile(r"^Device=(\d+) CANNOT Access Peer Device=(\d+)", re.M)
_SAMPLES_NOTE = "NOTE: The CUDA Samples are not meant for performance measurements"
_MATRIX_ROW = re.compile(r"^[ \t]*\d+(?:[ \t]+[\d.]+)+[ \t]*$", re.M)
_RETURNED = re.compile(r"returned\s+(\d+)[ \t]*(?:\r?\n\s*->\s*(.+))?")
_CODE = re.compile(r"code=(\d+)\((\w+)\)|Error\s+(\d+):\s*([^\n(]+)|cuda runtime error \((\d+)\)\s*:\s*([^\n]+)", re.IGNORECASE)
_NOT_RUN = {
    35: "the diagnostic image's CUDA is newer than the node's driver (CUDA error 35)",
    3: "CUDA could not initialise against the node's driver (CUDA error 3): the image's CUDA needs a newer driver",
    304: "the program's environment refused CUDA a system call (CUDA error 304, OS call failed)",
    46: "a GPU is held by another process (CUDA error 46, devices unavailable)",
    2: "the GPU's memory is held by another process (CUDA error 2, out of memory)",
    101: "the program asked for a GPU the pod was not given (CUDA error 101, invalid device ordinal)",
    209: "the program was not built for this GPU's architecture (CUDA error 209, no kernel image)",
    222: "the program's PTX is newer than the node's driver (CUDA error 222)",
    804: "the image's CUDA forward-compatibility package does not support this GPU (CUDA error 804)",
}
_MEANING = {
    802: "CUDA error 802 system not yet initialized: the NVSwitch fabric manager is not running",
    803: "CUDA error 803: the node's user-space driver and kernel module differ (a driver mismatch)",
    100: "CUDA error 100: no CUDA-capable device is detected",
    999: "CUDA error 999: unknown error (the driver is in a bad state: a GPU reset or a reboot clears it)",
}
# cudaGetErrorString's messages, for samples that print no number.
_BY_MESSAGE = {
    "system not yet initialized": 802,
    "driver version is insufficient for cuda runtime version": 35,
    "busy or unavailable": 46,
    "no kernel image is available for execution on the device": 209,
    "unsupported display driver / cuda driver combination": 803,
    "forward compatibility was attempted on non supported hw": 804,
    "no cuda-capable device is detected": 100,
    "initialization error": 3,
    "os call failed or operation not supported on this os": 304,
    "invalid device ordinal": 101,
    "out of memory": 2,
    "unknown error": 999,
}
_NO_GPU = ("No CUDA GPUs are available", "Found no NVIDIA driver", "no CUDA-capable device is detected")
_WRONG_DATA = re.compile(r"Verification error @ element \d+.*|Invalid value when checking the pattern.*|ASSERT in expression.*")
_WAIVED = re.compile(r"^\s*Waiving\s+(\S+?)\.?\s*$|Two or more GPUs with Peer-to-Peer access capability are required.*", re.M)
_FAILED_STEP = re.compile(r"Failed to [^\n]*\(error code [^\n]*")  # vectorAdd: "Failed to <step> (error code <message>)!"
_PASSED = re.compile(
    r"^\s*(?:Result = PASS|Test passed|Test PASSED|SUM \S+ [\d.]+|cuda workload validation is successful)\s*$", re.M
)


def read_cuda_context(text: str, expected_gpus: int | None = None) -> Grade:
    """The grade of a CUDA context check on a node that should have ``expected_gpus`` GPUs (None: any number)."""
    code = _error_code(text)
    if code is not None:
        return cuda_error_grade(*code)
    for marker in _NO_GPU:
        if marker.lower() in text.lower():
            return Grade(TOOL, "unhealthy", f"no CUDA GPU is usable: {marker}", (marker,))
    wrong = _WRONG_DATA.search(text)
    if wrong:
        return Grade(
            TOOL,
            "unhealthy",
            f"data copied between GPUs came back wrong: {wrong.group(0).strip()[:200]}",
            (wrong.group(0).strip(),),
        )
    failed = _FAILED_STEP.search(text)
    if failed:
        return Grade(TOOL, "unhealthy", f"the CUDA sample failed: {failed.group(0).strip()[:200]}", (failed.group(0).strip(),))
    check = CUDA_FAILURE.search(text)  # a CUDA error the table above does not know still ended the sample
    if check:
        return Grade(TOOL, "unhealthy", f"the CUDA sample failed: {check.group(0).strip()[:200]}", (check.group(0).strip(),))
    if "Result = FAIL" in text or re.search(r"^\s*Test failed", text, re.M):
        return Grade(TOOL, "unhealthy", "the CUDA sample reported its result as failed")
    detected = _DETECTED.search(text)
    count = int(detected.group(1) or detected.group(2)) if detected else len(set(_DEVICE_LINE.findall(text))) or None
    if count is not None and expected_gpus is not None and count < expected_gpus:
        seen = next((line.strip() for line in text.splitlines() if detected and detected.group(0) in line), "")
        return Grade(TOOL, "unhealthy", f"CUDA sees {count} of {expected_gpus} GPUs", (seen,) if seen else ())
    waived = _WAIVED.search(text)
    p2p = _P2P_TEST in text
    passed = bool(_PASSED.search(text)) or (p2p and _p2p_complete(text, count or 0))
    if waived and not passed:
        return Grade(
            TOOL, "inconclusive", f"the test was waived (it does not apply to this system): {waived.group(0).strip()[:200]}"
        )
    if not passed:
        if p2p:
            return Grade(TOOL, "inconclusive", "p2pBandwidthLatencyTest ended before its last matrix (cut off or killed)")
        if detected is not None or "deviceQuery" in text:
            return Grade(TOOL, "inconclusive", "deviceQuery ended before its result (cut off or killed)")
        return Grade(TOOL, "inconclusive", "no CUDA sample, deviceQuery or nvbandwidth result in the output")
    warnings = [
        f"GPUs {i} and {j} have no peer access: their copies go through the host"
        for i, j in _NO_PEER.findall(text)
        if int(i) < int(j)
    ]
    if expected_gpus is not None and count is None:
        warnings.append("GPU count not checked: the output does not say how many GPUs CUDA sees")
    return Grade(TOOL, "healthy", warnings=tuple(warnings))


def _p2p_complete(text: str, gpus: int) -> bool:
    """p2pBandwidthLatencyTest ran to its end: its closing note, or (where the note was not kept) its last matrix, the
    P2P latency's GPU and CPU rows for every device (cuda-samples Samples/5_Domain_Specific/p2pBandwidthLatencyTest
    @ca37378: it checks no data, and any CUDA error ends it early with ``Cuda failure``)."""
    if _SAMPLES_NOTE in text:
        return True
    last = text.rfind("P2P=Enabled Latency")
    return gpus > 0 and last >= 0 and len(_MATRIX_ROW.findall(text[last:])) >= 2 * gpus


def cuda_error_grade(number: int, message: str, tool: str = TOOL) -> Grade:
    """The grade of CUDA error ``number`` (printed with ``message``) on a node: inconclusive where the program or its
    image could not run there, unhealthy where the node's CUDA is at fault."""
    line = f"CUDA error {number}: {message}".strip()
    if number in _NOT_RUN:
        return Grade(tool, "inconclusive", _NOT_RUN[number], (line,))
    return Grade(tool, "unhealthy", _MEANING.get(number, line), (line,))


def cuda_error_of_message(message: str) -> int | None:
    """The CUDA error a ``cudaGetErrorString`` message names (``'unknown error'``: 999), None where none does."""
    lower = message.lower()
    return next((number for said, number in _BY_MESSAGE.items() if said in lower), None)


def _error_code(text: str) -> tuple[int, str] | None:
    returned = _RETURNED.search(text)
    if returned and "cuda" in text[: returned.start()].lower():
        return int(returned.group(1)), (returned.group(2) or "").strip()
    found = _CODE.search(text)
    if found:
        number = found.group(1) or found.group(3) or found.group(5)
        return int(number), (found.group(2) or found.group(4) or found.group(6) or "").strip()
    failed = _FAILED_STEP.search(text)
    if failed:
        number = cuda_error_of_message(failed.group(0))
        return (number, failed.group(0).strip()) if number is not None else None
    check = CUDA_FAILURE.search(text)
    if check:
        number = cuda_error_of_message(check.group(1))
        return (number, check.group(1)) if number is not None else None
    return None
