"""AMD's runtime tools read and graded: the AMD counterpart of deviceQuery and the CUDA samples, what an engineer runs
first to prove a node's GPUs are usable. ``rocminfo`` (the HSA agents), HIP's device query ``hipInfo``,
``rocm-bandwidth-test`` and TransferBench (AMD's copy and bandwidth tools, which check the data they copy), and the
errors any HIP program prints. Graded by the rules of the CUDA reader (``cuda.py``): a GPU the runtime cannot use is
unhealthy, a program or image that could not run there is inconclusive, an output that proves nothing is never healthy.

What the tools print, from their sources:

- ``rocminfo`` (ROCm/rocminfo ``rocminfo.cc`` @c6f7a17): it first checks the kernel driver, ``ROCk module is NOT
  loaded, possibly no GPU devices`` (no ``/sys/module/amdgpu``) or ``ROCk module is NOT live``, then opens ``/dev/kfd``
  (``Unable to open /dev/kfd read-write: <strerror>``, then the user's membership of the group that owns it: ``<user>
  is not member of "<group>" group``); ``hsa api call failure at: <file>:<line>`` / ``Call returned <status>`` is a
  failed HSA call. A run lists ``HSA Agents`` (``Agent N`` blocks, ``Device Type: CPU|GPU``) and ends with
  ``*** Done ***``;
- ``hipInfo`` (ROCm/hip-tests ``samples/1_Utils/hipInfo/hipInfo.cpp`` @3543bc3): a ``device# N`` block per device that ends
  with ``memInfo.free:``; its ``checkHipErrors`` prints ``HIP API error = <number> "<message>"``;
- ``rocm-bandwidth-test`` (ROCm/rocm_bandwidth_test @6bd5c1a: ``rocm_bandwidth_test_print.cpp``,
  ``rocm_bandwidth_test_report.cpp``, ``common.cpp``): ``RocmBandwidthTest Version``, a ``Device: N,  <name>`` line per
  CPU and GPU, then ``D/D`` matrices (copy bandwidths, or in validation mode ``-v`` the ``Data Path Validation`` matrix
  of ``PASS`` / ``FAIL`` per copy); a failed HSA call prints ``HSA Error Found!`` and ``Error: <status>``;
- TransferBench (ROCm/TransferBench ``src/TransferBench.cpp`` @788840d): it checks every transfer's data and prints
  ``[ERROR] Unexpected mismatch at index ...`` when a destination does not hold what was copied (its FAQ: usually an
  IOMMU or runtime/driver problem of the system, https://rocm.docs.amd.com/projects/TransferBench/en/latest/ FAQ), and
  ``Encountered HIP error (<message>)`` when a HIP call fails; each test ends with its ``Aggregate`` line, and its
  ``p2p`` and ``a2a`` presets print ``SRC+EXE\\DST`` / ``SRC\\DST`` matrices ending with ``Averages (During ...)`` and
  ``Aggregate bandwidth (CPU Timed)``.

The rules:

- the amdgpu kernel driver not loaded (rocminfo's ``ROCk module is NOT loaded|live``, rocm-smi's ``amdgpu not found in
  modules``): unhealthy;
- ``/dev/kfd`` absent (``No such file or directory``) or refused by the driver (any reason but a permission): unhealthy;
  refused for a permission (``Permission denied``, ``Operation not permitted``, not a member of its group): the user or
  pod that ran the check was not given the device, not the GPU's fault: inconclusive;
- a GPU memory access fault (the HSA runtime's ``Memory access fault by GPU node-N ... Reason: ...``), a GPU hang (``HW
  Exception by GPU node-N ... reason :GPU Hang``), and HIP's ``hipErrorIllegalAddress`` (700): unhealthy;
- HIP errors (``hipError_t``, ROCm/HIP ``include/hip/hip_runtime_api.h`` @746dcac) by name or number: 100
  ``hipErrorNoDevice`` ("no ROCm-capable device is detected", ROCm/hip#3805), 214 ``hipErrorECCNotCorrectable``, 719
  ``hipErrorLaunchFailure``, 999 ``hipErrorUnknown``: unhealthy, as CUDA's 100 and 999; the program or its image, not
  the node: 209 ``hipErrorNoBinaryForGpu`` ("Unable to find code object for all current devices!": built for another
  gfx) and 98 ``hipErrorInvalidDeviceFunction``, 101 ``hipErrorInvalidDevice`` (a GPU the pod was not given), 2
  ``hipErrorOutOfMemory``, 35 ``hipErrorInsufficientDriver`` (an image newer than the driver), 304
  ``hipErrorOperatingSystem``, 801 ``hipErrorNotSupported``: inconclusive; another HIP error by name or number stops
  the check: unhealthy, naming it (not 600 ``hipErrorNotReady`` and 704 ``hipErrorPeerAccessAlreadyEnabled``, statuses
  HIP's log prints in normal work); a message alone that is not one of these (``HIP Error: invalid resource handle``)
  says only that the program stopped: inconclusive;
- rocBLAS without kernels for the GPU (``rocBLAS error: Cannot read .../TensileLibrary.dat: ... for GPU arch : <gfx>``,
  ROCm/ROCm#2788): a ROCm build that does not support this GPU, not the GPU: inconclusive;
- HSA status codes (``hsa_status_t``, ROCm/ROCR-Runtime ``hsa.h``: ``HSA_STATUS_ERROR_OUT_OF_RESOURCES = 0x1008``,
  which old rocminfo printed as ``4104``): ``OUT_OF_RESOURCES`` is what the runtime returns when it cannot open
  ``/dev/kfd``, for a missing permission as for a missing device (ROCm/rocminfo#34), so alone it is inconclusive (the
  ``/dev/kfd`` line beside it decides); an ISA or code object the runtime rejects (``INVALID_ISA``,
  ``INVALID_ISA_NAME``, ``INVALID_CODE_OBJECT``, ``INCOMPATIBLE_ARGUMENTS``) is the program's: inconclusive; any
  other ``HSA_STATUS_ERROR``: unhealthy;
- copied data that came back wrong (TransferBench's ``Unexpected mismatch``, a ``FAIL`` in rocm-bandwidth-test's
  ``Data Path Validation``): unhealthy;
- a failure outranks a check that could not run (as ``grade.combine`` does);
- without an error: rocminfo that reached ``*** Done ***`` with GPU agents, hipInfo whose every device block ended,
  rocm-bandwidth-test whose last matrix has every device's row, TransferBench whose tests reached their ``Aggregate``
  line: healthy; with the GPUs the node's size has (``expected_gpus``), fewer listed is unhealthy, as ``cuda.py``
  does. rocminfo that lists no GPU agent: unhealthy. An output cut before those ends, or none of these: inconclusive,
  never healthy.
Pure: text in, grade out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from aks_gpu.gpu.diag.grade import Grade, State

TOOL = "rocm-runtime"

_DRIVER_ABSENT = re.compile(
    r"ROCk module is NOT (?:loaded|live)[^\n]*|[^\n]*amdgpu not found in modules[^\n]*|amdgpu driver (?:is )?not loaded[^\n]*"
)
_KFD = re.compile(r"Unable to open /dev/kfd read-write: ?([^\n]*)")
_PERMISSION = ("permission denied", "operation not permitted")
_NOT_MEMBER = re.compile(r"[^\n]*is not member of \"?[\w-]+\"? group[^\n]*")
_MEMORY_FAULT = re.compile(r"Memory access fault by GPU node-(\d+)[^\n]*")
_HW_EXCEPTION = re.compile(r"HW Exception by GPU node-(\d+)[^\n]*?reason\s*:\s*([^\n]+)", re.IGNORECASE)
_NO_CODE_OBJECT = re.compile(r"Unable to find code object for all current devices|Coudn't find binary for current devices")
_NO_HIP_GPU = re.compile(r"No HIP GPUs are available|no ROCm-capable device is detected", re.IGNORECASE)
_COPY_WRONG = re.compile(r"Unexpected (?:output )?mismatch[^\n]*")
# rocBLAS without kernels for the GPU's architecture (its Tensile library has none for this gfx).
_ROCBLAS_NO_ARCH = re.compile(r"rocBLAS error: Cannot read [^\n]*?for GPU arch\s*:\s*(\S+)")

# hipError_t (ROCm/HIP include/hip/hip_runtime_api.h @746dcac): number, name, and its grade's reason.
_HIP_NOT_RUN = {
    209: ("hipErrorNoBinaryForGpu", "the program has no code object for this GPU's gfx (built for another GPU)"),
    98: ("hipErrorInvalidDeviceFunction", "the program has no kernel for this GPU's gfx (built for another GPU)"),
    101: ("hipErrorInvalidDevice", "the program asked for a GPU the pod was not given"),
    2: ("hipErrorOutOfMemory", "the GPU's memory is held by another process"),
    35: ("hipErrorInsufficientDriver", "the program's HIP runtime is newer than the node's driver"),
    304: ("hipErrorOperatingSystem", "the program's environment refused HIP a system call"),
    801: ("hipErrorNotSupported", "the program asked for something this GPU or driver does not support"),
}
_HIP_FAULT = {
    100: ("hipErrorNoDevice", "HIP sees no GPU"),
    214: ("hipErrorECCNotCorrectable", "an uncorrectable ECC error"),
    700: ("hipErrorIllegalAddress", "a GPU memory access fault"),
    719: ("hipErrorLaunchFailure", "a kernel launch failed on the GPU"),
    999: ("hipErrorUnknown", "HIP's unknown error (the driver is in a bad state)"),
}
# Statuses HIP returns in normal work, which its log (AMD_LOG_LEVEL) prints: a stream still busy, peer access
# enabled twice. No error.
_HIP_STATUS = {"hipErrorNotReady", "hipErrorPeerAccessAlreadyEnabled"}
_HIP_BY_NAME = {name: number for number, (name, _) in (_HIP_NOT_RUN | _HIP_FAULT).items()}
# hipGetErrorString's messages, for the programs that print no name or number (PyTorch's "HIP error: <message>").
_HIP_BY_MESSAGE = {
    "no rocm-capable device is detected": 100,
    "invalid device function": 98,
    "invalid device ordinal": 101,
    "an illegal memory access was encountered": 700,
    "unspecified launch failure": 719,
    "out of memory": 2,
    "unknown error": 999,
}
_HIP_NAME = re.compile(r"\b(hipError[A-Z]\w*)")
_HIP_NUMBER = re.compile(r"HIP API error = 0*(\d+)[^\n]*")
_HIP_MESSAGE = re.compile(r"(?:HIP error:?|Encountered HIP error \(|HIP API error = \d+)\s*\"?([^\n\")]+)", re.IGNORECASE)

_HSA = re.compile(r"\bHSA_STATUS_ERROR(?:_[A-Z_]+)?")
_HSA_OLD_NUMBER = re.compile(r"Call returned (\d+)\b")
_HSA_BY_NUMBER = {0x1008: "HSA_STATUS_ERROR_OUT_OF_RESOURCES"}
_HSA_NOT_RUN = {
    "HSA_STATUS_ERROR_OUT_OF_RESOURCES": "the ROCm runtime could not open the GPUs (HSA_STATUS_ERROR_OUT_OF_RESOURCES: "
    "/dev/kfd refused to this user, or no GPU; the output does not say which)",
    "HSA_STATUS_ERROR_INVALID_ISA": "the runtime rejected the program's ISA (HSA_STATUS_ERROR_INVALID_ISA)",
    "HSA_STATUS_ERROR_INVALID_ISA_NAME": "the runtime rejected the program's ISA (HSA_STATUS_ERROR_INVALID_ISA_NAME)",
    "HSA_STATUS_ERROR_INVALID_CODE_OBJECT": "the runtime rejected the program's code object"
    " (HSA_STATUS_ERROR_INVALID_CODE_OBJECT)",
    "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS": "the program's arguments do not fit this GPU"
    " (HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS)",
}

_AGENTS = re.compile(r"^\s*HSA Agents\s*$", re.M)
_GPU_AGENT = re.compile(r"^\s*Device Type:\s*GPU\b", re.M)
_DONE = re.compile(r"^\s*\*\*\* Done \*\*\*", re.M)
_HIPINFO_DEVICE = re.compile(r"device#\s*(\d+)\s+Name:")
_HIPINFO_END = re.compile(r"memInfo\.free:")
_RBT = "RocmBandwidthTest Version"
_RBT_DEVICE = re.compile(r"^\s*Device: (\d+),\s+([^\n]+)", re.M)
_RBT_MATRIX = re.compile(r"^\s*D/D\b", re.M)
_RBT_VALIDATION = "Data Path Validation"
# The matrices that hold a result (copy bandwidths, latencies, validation), not the topology before them.
_RBT_RESULT = re.compile(r"bandwidth GB/s|Latency|Data Path Validation", re.IGNORECASE)
_TB_TRANSFER = re.compile(r"^\s*Transfer \d+\s*\|\s*[\d.]+ GB/s", re.M)
_TB_AGGREGATE = re.compile(r"^\s*Aggregate\b", re.M)
# The p2p and a2a presets' matrices: a header of executors (``SRC+EXE\DST``, ``SRC\DST``), then rows; p2p ends each
# direction with ``Averages (During ...)``, a2a with ``Aggregate bandwidth (CPU Timed)``.
_TB_HEADER = re.compile(r"^\s*SRC(?:\+EXE)?\\(?:EXE\+)?DST\b[^\n]*", re.M)
_TB_END = re.compile(r"^\s*(?:Averages \(During|Aggregate bandwidth)", re.M)


@dataclass(frozen=True)
class _Finding:
    state: State
    part: str
    line: str


def read_rocm_runtime(text: str, expected_gpus: int | None = None) -> Grade:
    """The grade of a ROCm runtime check (rocminfo, hipInfo, rocm-bandwidth-test, TransferBench or a HIP program's
    output) on a node that should have ``expected_gpus`` GPUs (None: any number)."""
    findings = list(_findings(text))
    for state in ("unhealthy", "inconclusive"):
        found = [finding for finding in findings if finding.state == state]
        if found:
            parts = dict.fromkeys(finding.part for finding in found)
            evidence = tuple(dict.fromkeys(finding.line.strip()[:300] for finding in found))
            return Grade(TOOL, state, "; ".join(parts), evidence[:5])
    return _listing_grade(text, expected_gpus)


def _findings(text: str) -> Iterator[_Finding]:
    """Every error line the tools print, with its grade."""
    driver = _DRIVER_ABSENT.search(text)
    if driver:
        yield _Finding("unhealthy", "the amdgpu kernel driver (ROCk) is not loaded", driver.group(0))
    for kfd in _KFD.finditer(text):
        why = kfd.group(1).strip()
        if any(said in why.lower() for said in _PERMISSION):
            yield _Finding(
                "inconclusive", f"/dev/kfd was refused to the user that ran the check ({why}): not the GPU's fault", kfd.group(0)
            )
        elif "no such file" in why.lower():
            yield _Finding("unhealthy", "/dev/kfd is absent: the ROCm compute driver exposes no GPU", kfd.group(0))
        else:
            yield _Finding("unhealthy", f"the ROCm compute driver refused /dev/kfd ({why or 'no reason given'})", kfd.group(0))
    not_member = _NOT_MEMBER.search(text)
    if not_member:
        yield _Finding(
            "inconclusive", "the user that ran the check is not in /dev/kfd's group: not the GPU's fault", not_member.group(0)
        )
    for fault in _MEMORY_FAULT.finditer(text):
        yield _Finding("unhealthy", f"a GPU memory access fault on GPU node-{fault.group(1)}", fault.group(0))
    for hang in _HW_EXCEPTION.finditer(text):
        yield _Finding(
            "unhealthy", f"a GPU hardware exception on GPU node-{hang.group(1)}: {hang.group(2).strip()}", hang.group(0)
        )
    for wrong in _COPY_WRONG.finditer(text):
        yield _Finding("unhealthy", "copied data came back wrong (TransferBench's validation)", wrong.group(0))
    yield from _validation_failures(text)
    for library in _ROCBLAS_NO_ARCH.finditer(text):
        yield _Finding(
            "inconclusive",
            f"the program's rocBLAS has no kernels for this GPU's gfx ({library.group(1)}): its ROCm build does not"
            " support this GPU",
            library.group(0),
        )
    no_code = _NO_CODE_OBJECT.search(text)
    if no_code:
        yield _hip_finding(209, _line_at(text, no_code.start()))
    no_gpu = _NO_HIP_GPU.search(text)
    if no_gpu:
        yield _hip_finding(100, _line_at(text, no_gpu.start()))
    for name in _HIP_NAME.finditer(text):
        if name.group(1) in _HIP_STATUS:
            continue
        number = _HIP_BY_NAME.get(name.group(1))
        line = _line_at(text, name.start())
        if number is not None:
            yield _hip_finding(number, line)
        else:
            yield _Finding("unhealthy", f"the HIP program failed: {name.group(1)}", line)
    for numbered in _HIP_NUMBER.finditer(text):
        yield _hip_finding(int(numbered.group(1)), numbered.group(0))
    for said in _HIP_MESSAGE.finditer(text):
        number = next((n for message, n in _HIP_BY_MESSAGE.items() if message in said.group(1).lower()), None)
        line = _line_at(text, said.start())
        if number is not None:
            yield _hip_finding(number, line)
        elif not _HIP_NAME.search(line) and not _HIP_NUMBER.search(line):  # a name or number beside it was read
            yield _Finding(
                "inconclusive",
                f"the program stopped on a HIP error this reader does not grade ({said.group(1).strip()[:120]})",
                line,
            )
    yield from _hsa_findings(text)


def _hip_finding(number: int, line: str) -> _Finding:
    if number in _HIP_NOT_RUN:
        name, why = _HIP_NOT_RUN[number]
        return _Finding("inconclusive", f"{why} ({name}, {number})", line)
    name, why = _HIP_FAULT.get(number, (f"HIP error {number}", "the HIP program failed"))
    return _Finding("unhealthy", f"{why} ({name}, {number})", line)


def _hsa_findings(text: str) -> Iterator[_Finding]:
    codes = [(match.group(0), _line_at(text, match.start())) for match in _HSA.finditer(text)]
    codes += [
        (_HSA_BY_NUMBER[int(match.group(1))], match.group(0))
        for match in _HSA_OLD_NUMBER.finditer(text)
        if int(match.group(1)) in _HSA_BY_NUMBER
    ]
    for code, line in codes:
        if code in _HSA_NOT_RUN:
            yield _Finding("inconclusive", _HSA_NOT_RUN[code], line)
        else:
            yield _Finding("unhealthy", f"the ROCm runtime failed: {code}", line)


def _validation_failures(text: str) -> Iterator[_Finding]:
    """rocm-bandwidth-test's ``Data Path Validation`` matrix: a ``FAIL`` cell is a copy whose data did not validate."""
    failed = list(_cells(text, _RBT_VALIDATION, "FAIL"))
    if failed:
        copies = ", ".join(f"{source}->{target}" for source, _, targets in failed for target in targets)
        yield _Finding(
            "unhealthy",
            f"copied data came back wrong (rocm-bandwidth-test's data path validation FAIL, device to device: {copies})",
            "\n".join(line.strip() for _, line, _ in failed),
        )


def _cells(text: str, title: str, value: str) -> Iterator[tuple[str, str, list[str]]]:
    """The rows of the ``D/D`` matrix under ``title`` (rocm_bandwidth_test_print.cpp, _report.cpp: a header of device
    indexes, then a row per device) holding ``value``: the row's device, its line and the columns' devices."""
    start = text.find(title)
    if start < 0:
        return
    header: list[str] = []
    for line in text[start:].splitlines()[1:]:
        cells = line.split()
        if cells[:1] == ["D/D"]:
            if header:
                return  # the next matrix
            header = cells[1:]
        elif cells and not cells[0].isdigit() and header:
            return
        elif cells and header and value in cells[1:]:
            yield cells[0], line, [header[i] if i < len(header) else "?" for i, cell in enumerate(cells[1:]) if cell == value]


def _listing_grade(text: str, expected_gpus: int | None) -> Grade:
    """The grade of an output without an error: what the tool listed or measured, and whether it ran to its end."""
    listed = _listed(text)
    if listed is None:
        return Grade(
            TOOL,
            "inconclusive",
            "no rocminfo, hipInfo, rocm-bandwidth-test or TransferBench result and no ROCm or HIP error in the output",
        )
    tool, gpus, complete = listed
    if not complete:
        return Grade(TOOL, "inconclusive", f"{tool} ended before its last line (cut off)")
    if gpus == 0:
        return Grade(TOOL, "unhealthy", f"{tool} lists no GPU: the ROCm runtime sees none")
    if gpus is not None and expected_gpus is not None and gpus < expected_gpus:
        return Grade(TOOL, "unhealthy", f"ROCm sees {gpus} of {expected_gpus} GPUs ({tool})")
    warnings: list[str] = []
    if tool == "rocm-bandwidth-test":
        warnings += _rbt_warnings(text)
    if expected_gpus is not None and gpus is None:
        warnings.append(f"GPU count not checked: {tool}'s output does not say how many GPUs the runtime sees")
    return Grade(TOOL, "healthy", warnings=tuple(warnings))


def _listed(text: str) -> tuple[str, int | None, bool] | None:
    """The tool whose listing or result the output holds, the GPUs it lists (None: it does not say), and whether
    the output reaches the tool's last line."""
    if _AGENTS.search(text):
        return "rocminfo", len(_GPU_AGENT.findall(text)), bool(_DONE.search(text))
    blocks = _HIPINFO_DEVICE.findall(text)
    if blocks:
        return "hipInfo", len(set(blocks)), len(_HIPINFO_END.findall(text)) >= len(blocks)
    if _RBT in text:
        devices = _rbt_devices(text)
        results = list(_RBT_RESULT.finditer(text))
        header = _RBT_MATRIX.search(text, results[-1].end()) if results else None
        after_header = text.find("\n", header.end()) if header else -1
        lines = text[after_header:].splitlines() if after_header >= 0 else []
        rows = {cells[0] for cells in map(str.split, lines) if cells and cells[0].isdigit()}
        return "rocm-bandwidth-test", len(_rbt_gpus(devices)), bool(devices) and set(devices) <= rows
    headers = list(_TB_HEADER.finditer(text))
    if headers:
        gpus = max(len(set(re.findall(r"GPU \d+", header.group(0)))) for header in headers)
        return "TransferBench", gpus, bool(_TB_END.search(text, headers[-1].end()))
    if _TB_TRANSFER.search(text):
        last = [match.end() for match in _TB_TRANSFER.finditer(text)][-1]
        return "TransferBench", None, bool(_TB_AGGREGATE.search(text, last))
    return None


def _rbt_devices(text: str) -> dict[str, str]:
    """rocm-bandwidth-test's devices, index to name (a ``Device: N,  <name>`` line each, CPUs first)."""
    return dict(_RBT_DEVICE.findall(text))


def _rbt_gpus(devices: dict[str, str]) -> list[str]:
    return [index for index, name in devices.items() if not re.search(r"\bCPU\b|Processor", name)]


def _rbt_warnings(text: str) -> list[str]:
    """What an expert notes on a passing rocm-bandwidth-test: GPU pairs without peer access (its ``Device Access``
    matrix: 0), whose copies go through the host, and copies whose data were not checked (only ``-v`` checks them)."""
    gpus = set(_rbt_gpus(_rbt_devices(text)))
    warnings = [
        f"GPUs {source} and {target} have no peer access: their copies go through the host"
        for source, _, targets in _cells(text, "Device Access", "0")
        for target in targets
        if {source, target} <= gpus and int(source) < int(target)
    ]
    if _RBT_VALIDATION not in text:
        warnings.append("the copies' data were not checked (rocm-bandwidth-test checks them only with -v)")
    return warnings


def _line_at(text: str, index: int) -> str:
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start : end if end >= 0 else len(text)]
