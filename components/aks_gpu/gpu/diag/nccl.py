"""NCCL ``all_reduce_perf`` (NVIDIA/nccl-tests) read and graded: correctness, then the bus bandwidth against the
figure expected for the VM size at a message size (``components/aks_gpu/data/gpu_diagnostics.yaml``).

Its table has one row per message size: ``size count type redop [root] time algbw busbw #wrong`` out-of-place, then
``time algbw busbw #wrong`` in-place (``#wrong`` is ``N/A`` with ``-c 0``), then ``# Out of bounds values : N
OK|FAILED`` and ``# Avg bus bandwidth : X`` (nccl-tests src/util.cu). busbw is the figure to compare across GPU counts
(nccl-tests doc/PERFORMANCE.md).

- any ``#wrong`` above 0, or out-of-bounds values FAILED: the GPUs corrupted data between them: unhealthy;
- the best busbw at the largest size that reaches the expectation's size below the expected figure: unhealthy
  (an NVLink or NVSwitch path is degraded); a run whose largest size is smaller is not graded on bandwidth (the
  average over small sizes says nothing of the links: a warning says so);
- a run that aborted (``Test NCCL failure``, ``Test CUDA failure``, NCCL 1's ``NCCL failure``), with or without rows
  before: inconclusive (NCCL_DEBUG says why: NVIDIA/nccl-tests#322, #280), unless CUDA's own error says the node is
  at fault: a ``Test CUDA failure <file>:<line> '<message>'`` is graded by the CUDA reader's table of errors
  (``cuda.cuda_error_grade``: "system not yet initialized", error 802, the fabric manager, NVIDIA/nccl-tests#264;
  "no CUDA-capable device is detected", NVIDIA/nccl-tests#30; "unknown error", NVIDIA/nccl-tests#66, are the node's;
  "out of memory" is not); wrong values before the abort still make it unhealthy;
- rows without the closing ``Out of bounds values`` line (``#``-prefixed; early releases printed it bare,
  NVIDIA/nccl-tests#37): the run was cut off or hangs (inconclusive);
- one rank: nothing moved between GPUs (busbw 0 by definition, nccl-tests doc/PERFORMANCE.md): inconclusive. The
  ranks are counted from the highest ``Rank N`` line, not from the lines shown: an excerpt that keeps only its last
  rank line (``Rank 71``) ran 72 ranks;
- fewer ranks on a host than the VM size has GPUs: the others were not tested (inconclusive);
- ranks on more than one host: the network is measured, not the VM's own links, so a one-VM figure is not applied
  (a warning says so).
The other ``*_perf`` tests of nccl-tests print the same table and are read the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aks_gpu.gpu.diag.cuda import CUDA_FAILURE, cuda_error_grade, cuda_error_of_message
from aks_gpu.gpu.diag.grade import Grade

TOOL = "nccl-all-reduce"
_PREFIX = re.compile(r"^\[\d+,\d+\]<stdout>:")
_OOB = re.compile(r"^\s*#?\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)", re.M)
_AVG_FAILED = re.compile(r"#?\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)\s+FAILED")
_ABORT = re.compile(r"(Test (?:NCCL|CUDA) failure.*|Test failure.*|Test timeout.*|NCCL failure.*|Failed, NCCL error.*)")
_RANK_LINE = re.compile(r"^\s*#?\s*Rank\s+(\d+)\s.*?\bon\s+(\S+)\s+device", re.M)
_WHY_NOT_RUN = re.compile(r".*(?:NCCL WARN|not enough slots|error while loading|No such file|ORTE|MPI_ABORT).*", re.IGNORECASE)
GIB = 1 << 30


@dataclass(frozen=True)
class BusBandwidth:
    """The all-reduce bus bandwidth a healthy node of a VM size reaches at ``message_bytes`` (GB/s), and its source."""

    vm_size: str
    message_bytes: int
    busbw_gbps: float
    source: str


@dataclass(frozen=True)
class _Row:
    size: int
    busbw: float  # the better of out-of-place and in-place
    wrong: int


def _int(token: str) -> int | None:
    try:
        return int(token)
    except ValueError:
        return None


def _wrong(token: str) -> int:
    """A ``#wrong`` cell: ``%6g`` of the count (``0``, ``1e+06``), ``N/A`` with ``-c 0``; the ``error`` column of old
    releases held the largest difference, below 1 when the results were right."""
    try:
        value = float(token)
    except ValueError:
        return 0
    return int(value) if value >= 1 else 0


def _rows(text: str) -> list[_Row]:
    """The result rows (nccl-tests src/util.cu @a0b82b2, 2.19.6: ``%12li %12li %8s %6s %6i`` then per placement
    ``time algbw busbw #wrong``, four more per-iteration columns with ``-I``, a timestamp at the end with ``-t``).
    Releases before 2.10 printed no root column, and early ones no redop column either (``size count type time
    algbw busbw error``, the error being the largest difference: NVIDIA/nccl#340, #318)."""
    rows: list[_Row] = []
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        if not line or line.startswith("#"):
            continue
        tokens = line.split()
        if len(tokens) < 7 or _int(tokens[0]) is None or _int(tokens[1]) is None or _number(tokens[2]) is not None:
            continue
        lead = 3
        if _number(tokens[3]) is None:  # the redop column
            lead = 5 if _int(tokens[4]) is not None else 4
        rest = tokens[lead:]
        if len(rest) < 4:
            continue
        group = 8 if len(rest) >= 16 else 4
        out_of_place, in_place = rest[:4], rest[group : group + 4]
        try:
            busbw = max(float(out_of_place[2]), float(in_place[2]) if len(in_place) == 4 else 0.0)
        except (ValueError, IndexError):
            continue
        wrong = _wrong(out_of_place[3]) + (_wrong(in_place[3]) if len(in_place) == 4 else 0)
        rows.append(_Row(int(tokens[0]), busbw, wrong))
    return rows


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _cuda_fault(text: str) -> Grade | None:
    """The grade of the first CUDA error the run names (``Test CUDA failure common.cu:941 'system not yet
    initialized'``, NCCL's ``Cuda failure '...'``) by the CUDA reader's table; None where it names none it knows."""
    for message in CUDA_FAILURE.findall(text):
        number = cuda_error_of_message(message)
        if number is not None:
            return cuda_error_grade(number, message, TOOL)
    return None


def read_all_reduce(text: str, expected: BusBandwidth | None = None, expected_gpus: int | None = None) -> Grade:
    """The grade of one ``all_reduce_perf`` run (or another nccl-tests ``*_perf``); ``expected`` None grades
    correctness only. ``expected_gpus``: the GPUs a host of the run should have (the VM size's): a run over fewer
    of them (``-g 4`` on an 8-GPU VM) tested only those, so a pass proves nothing of the others."""
    rows = _rows(text)
    oob = _OOB.search(text)
    abort = _ABORT.search(text)
    ranks = {int(rank): host for rank, host in _RANK_LINE.findall(text)}
    wrong = [row for row in rows if row.wrong]
    # Releases before 2.10 printed the largest difference in an "error" column, not a count of wrong elements.
    counted = "#wrong" in text
    sizes = ", ".join(f"{row.size} B" + (f" ({row.wrong} wrong)" if counted else "") for row in wrong[:3])
    if oob and oob.group(2) == "FAILED":
        located = f" at {sizes}" if wrong else ""
        return Grade(
            TOOL,
            "unhealthy",
            f"wrong results between the GPUs: {oob.group(1)} out-of-bounds values{located}",
            (oob.group(0).strip(),),
        )
    if wrong:
        return Grade(TOOL, "unhealthy", f"wrong results between the GPUs at {sizes}")
    if abort or not rows:
        fault = _cuda_fault(text)
        if fault and (fault.state == "unhealthy" or not rows):
            return fault
        if abort:
            done = f" after {len(rows)} sizes" if rows else ""
            line = abort.group(1).strip()
            return Grade(TOOL, "inconclusive", f"the run aborted{done}: {line[:300]}", (line,))
        said = _WHY_NOT_RUN.search(text)
        why = said.group(0).strip() if said else "no result rows in the output"
        return Grade(TOOL, "inconclusive", f"the test did not run to a result: {why[:300]}")
    if oob is None:
        return Grade(TOOL, "inconclusive", f"the output ends after {len(rows)} sizes without its summary (cut off or hung)")
    if ranks and max(ranks) == 0:
        return Grade(TOOL, "inconclusive", "one rank: nothing moved between GPUs (busbw is 0 by definition)")
    failed_check = _AVG_FAILED.search(text)
    if failed_check:
        # The run's own check (-a/--check_avg_bw: FAILED under 90 % of the figure it was given).
        return Grade(
            TOOL,
            "unhealthy",
            f"average bus bandwidth {failed_check.group(1)} GB/s failed the run's own check",
            (failed_check.group(0),),
        )
    # Every rank line from 0 up is shown, or the output keeps only some (an excerpt): then the hosts are not known, but
    # the highest rank still says how many ranks ran.
    nranks = max(ranks) + 1 if ranks else 0
    complete = bool(ranks) and len(ranks) == nranks
    hosts = set(ranks.values()) if complete else set()
    per_host = {host: list(ranks.values()).count(host) for host in hosts}
    if expected_gpus is not None and per_host and min(per_host.values()) < expected_gpus:
        host, count = min(per_host.items(), key=lambda item: item[1])
        return Grade(
            TOOL, "inconclusive", f"the run used {count} of the {expected_gpus} GPUs on {host}: the others were not tested"
        )
    if expected_gpus is not None and ranks and not complete and nranks < expected_gpus:
        return Grade(
            TOOL, "inconclusive", f"the run had {nranks} ranks for the {expected_gpus} GPUs of a host: the others were not tested"
        )
    if expected is None:
        return Grade(TOOL, "healthy", warnings=("bus bandwidth not graded: no figure for this VM size",))
    spans = len(hosts) if complete else (2 if expected_gpus is not None and nranks > expected_gpus else 1)
    if spans > 1:
        where = f"ranks on {spans} hosts" if complete else f"{nranks} ranks, more than one host's {expected_gpus} GPUs,"
        return Grade(
            TOOL,
            "healthy",
            warnings=(
                f"bus bandwidth not graded: {where} measure the network, and the "
                f"{expected.busbw_gbps:g} GB/s figure is for one {expected.vm_size}'s own GPUs",
            ),
        )
    reaching = [row for row in rows if row.size >= expected.message_bytes]
    if not reaching:
        largest = max(row.size for row in rows)
        return Grade(
            TOOL,
            "healthy",
            warnings=(
                f"bus bandwidth not graded: the largest message ({largest} B) is below the {expected.message_bytes} B "
                f"the {expected.busbw_gbps:g} GB/s figure for {expected.vm_size} is for",
            ),
        )
    at = max(reaching, key=lambda row: row.size)
    if at.busbw < expected.busbw_gbps:
        return Grade(
            TOOL,
            "unhealthy",
            f"bus bandwidth {at.busbw:g} GB/s at {at.size} B, below the {expected.busbw_gbps:g} GB/s "
            f"expected of {expected.vm_size}",
            (f"{at.size} B: busbw {at.busbw:g}",),
        )
    return Grade(TOOL, "healthy")
