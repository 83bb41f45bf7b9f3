"""Readers of the vendors' active GPU diagnostics: NVIDIA ``dcgmi diag`` (table and ``-j`` JSON), a CUDA context on
every GPU (CUDA samples' ``deviceQuery``), NCCL ``all_reduce_perf``, AMD's ROCm Validation Suite (``rvs``), amd-smi's
RAS counters and AMD's runtime tools (``rocminfo``, ``hipInfo``, ``rocm-bandwidth-test``, TransferBench). Each turns
one tool's output into a ``Grade``: ``healthy``, ``unhealthy: <part>`` or ``inconclusive: <why>`` (the diagnostic
could not run, or ran only in part).
Pure: text in, grade out."""

from aks_gpu.gpu.diag.cuda import read_cuda_context
from aks_gpu.gpu.diag.dcgm import read_dcgm_diag
from aks_gpu.gpu.diag.grade import Grade, State, combine
from aks_gpu.gpu.diag.nccl import BusBandwidth, read_all_reduce
from aks_gpu.gpu.diag.rvs import read_rvs

__all__ = ["BusBandwidth", "Grade", "State", "combine", "read_all_reduce", "read_cuda_context", "read_dcgm_diag", "read_rvs"]
