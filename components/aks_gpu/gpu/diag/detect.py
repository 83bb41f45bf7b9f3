"""Which vendor tool printed a saved output, and its grade by that tool's reader: what ``aksgpu smi diag`` runs.

Told by the lines only each tool prints (most distinctive first, so a DCGM message that mentions CUDA samples stays
DCGM's): RVS's ``RVS-ERROR`` / summary / ``[RESULT]`` log, or AMD's test runner's result summary (``suitesResult``,
which ``amd_test_runner`` reads); rocminfo's own lines (its driver and ``/dev/kfd`` checks, its ``HSA Agents``
listing: ``rocm`` reads them, a rocm-smi error pasted beside them included); amd-smi and rocm-smi (their banner,
``GPU: N`` blocks, ECC counter names, ``RAS INFO`` table, their driver errors: ``amd_smi`` grades their RAS counters,
and any other of their outputs is not a RAS read); DCGM's table header, ``-j`` document keys (those of a piece of a
DCGM 4 document too: its ``entity_group`` results), its own error sentences and nvvs; nccl-tests' header, result
columns and ``Test NCCL failure``; then deviceQuery, the CUDA samples, nvbandwidth, the GPU Operator's CUDA validator
and CUDA's error codes; last AMD's other runtime tools (hipInfo, rocm-bandwidth-test, TransferBench) and the HIP and
HSA runtimes' errors. An output none of them printed is graded inconclusive, never healthy. Pure.
"""

from __future__ import annotations

import re
from typing import Literal

from aks_gpu.gpu.diag.amd_smi import read_amd_smi_ras
from aks_gpu.gpu.diag.amd_test_runner import read_amd_rvs
from aks_gpu.gpu.diag.cuda import read_cuda_context
from aks_gpu.gpu.diag.dcgm import read_dcgm_diag
from aks_gpu.gpu.diag.grade import Grade
from aks_gpu.gpu.diag.nccl import BusBandwidth, read_all_reduce
from aks_gpu.gpu.diag.rocm import read_rocm_runtime

Tool = Literal["dcgm", "cuda", "nccl", "rvs", "amd-smi", "rocm"]
TOOLS: tuple[Tool, ...] = ("dcgm", "cuda", "nccl", "rvs", "amd-smi", "rocm")

_MARKERS: tuple[tuple[Tool, re.Pattern[str]], ...] = (
    (
        "rvs",
        re.compile(r"RVS-ERROR|ROCm Validation Suite|\[RESULT\].*(?:Action name|Module name|pass:|met:)|\\?\"suitesResult\\?\""),
    ),
    (  # rocminfo's own lines, before amd-smi: a rocminfo pasted with rocm-smi's driver error is rocminfo's
        "rocm",
        re.compile(
            r"ROCk module(?: version \S+)? is (?:NOT )?(?:loaded|live)|^\s*HSA (?:Agents|System Attributes)\s*$|"
            r"hsa api call failure at|Unable to open /dev/kfd read-write",
            re.M,
        ),
    ),
    (
        "amd-smi",
        re.compile(
            r"\b(?:amd|rocm)-smi\b|(?:ROCm|AMD) System Management Interface|^\s*GPU: \d+\s*$|^GPU\[\d+\]\s*:|"
            r"UNCORRECTABLE_COUNT|\"(?:total_)?uncorrectable_count\"|\bRAS INFO\b|Correctable\s+Uncorrectable|"
            r"amdgpu not found in modules|AMDSMI_STATUS",
            re.M | re.IGNORECASE,
        ),
    ),
    (
        "dcgm",
        re.compile(
            r"^\|\s*Diagnostic\s+\|\s*Result|\"DCGM (?:GPU )?Diagnostic\"|DCGM GPU Diagnostic|"
            r"\"entity_group\"\s*:\s*\"(?:GPU|CPU)\"|"
            r"MIG configuration is incompatible with the diagnostic|Unable to complete diagnostic|"
            r"among possible test choices|nvidia-validation-suite|nv-hostengine|host engine|"
            r"unable to establish a connection to the specified host|"
            r"^\|\s*[\w /()-]+\|\s*(?:Pass|Fail|Warn|Skip)\s*-\s*(?:All|GPUs?\b)|^\|-{3,}\s+(?:Deployment|Metadata)\s",
            re.M | re.IGNORECASE,
        ),
    ),
    (
        "nccl",
        re.compile(
            r"nThread\s+\d+\s+nGpus|#\s*Avg bus bandwidth|#\s*Out of bounds values|busbw\s+#?wrong|"
            r"Test (?:NCCL|CUDA) failure|_perf\b|NCCL (?:WARN|INFO|version)",
        ),
    ),
    (
        "cuda",
        re.compile(
            r"deviceQuery|CUDA Device Query|cudaGetDeviceCount|code=\d+\(cuda\w+\)|Result = (?:PASS|FAIL)|"
            r"simpleP2P|Verification error @ element|Peer access from|nvbandwidth|CUDA Bandwidth Test|vectorAdd|"
            r"No CUDA GPUs are available|Found no NVIDIA driver|no CUDA-capable device|cuda runtime error|"
            r"CUDA error \d+|Test (?:PASSED|passed)|cuda workload validation is successful|GPU Bandwidth Latency Test",
        ),
    ),
    (  # the other ROCm runtime tools and HIP's errors, after every NVIDIA tool
        "rocm",
        re.compile(
            r"RocmBandwidthTest Version|Data Path Validation|TransferBench v\d|Unexpected (?:output )?mismatch at index|"
            r"Encountered HIP error|\bhipError[A-Z]\w*|HIP API error|\bHIP [Ee]rror\b|No HIP GPUs are available|"
            r"no ROCm-capable device|Unable to find code object|HSA_STATUS_ERROR|HSA Error Found|rocBLAS error:|"
            r"Memory access fault by GPU|HW Exception by GPU|device#\s*\d+\s+Name:|^\s*Transfer \d+\s*\|\s*[\d.]+ GB/s|"
            r"^\s*SRC(?:\+EXE)?\\(?:EXE\+)?DST\b|Averages \(During|Aggregate bandwidth \((?:GPU|CPU) Timed\)",
            re.M,
        ),
    ),
)


def detect_tool(text: str) -> Tool | None:
    """The tool that printed ``text``, or None where no reader knows the output."""
    return next((tool for tool, marker in _MARKERS if marker.search(text)), None)


def grade_output(
    text: str,
    tool: Tool | None = None,
    *,
    level: int | None = None,
    expected_gpus: int | None = None,
    bandwidth: BusBandwidth | None = None,
) -> tuple[Tool | None, Grade]:
    """The tool (``tool``, else told from the text) and its grade of ``text``. ``level``: the ``dcgmi diag -r`` asked
    for; ``expected_gpus``: the GPUs the node should have (a CUDA or ROCm check that sees fewer fails, an NCCL run over
    fewer proves nothing of the others); ``bandwidth``: the all-reduce figure of the node's size."""
    chosen = tool or detect_tool(text)
    if chosen == "dcgm":
        return chosen, read_dcgm_diag(text, level)
    if chosen == "cuda":
        return chosen, read_cuda_context(text, expected_gpus)
    if chosen == "nccl":
        return chosen, read_all_reduce(text, bandwidth, expected_gpus)
    if chosen == "rvs":
        return chosen, read_amd_rvs(text)
    if chosen == "amd-smi":
        return chosen, read_amd_smi_ras(text)
    if chosen == "rocm":
        return chosen, read_rocm_runtime(text, expected_gpus)
    return None, Grade(
        "unknown",
        "inconclusive",
        "no reader recognises this output (dcgmi diag, deviceQuery and the CUDA samples, nvbandwidth, nccl-tests, rvs, amd-smi,"
        " rocminfo, hipInfo, rocm-bandwidth-test, TransferBench)",
    )
