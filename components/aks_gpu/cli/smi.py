"""``aksgpu smi parse`` and ``aksgpu smi health``: read one nvidia-smi, amd-smi or rocm-smi output (or a kernel log)
and print what it says as JSON. ``aksgpu smi diag``: grade one saved output of a vendor's active diagnostic (dcgmi
diag, deviceQuery and the CUDA samples, nccl-tests, rvs, amd-smi's RAS counters, AMD's runtime tools) as the diagnostic
pod's verdict does."""

from __future__ import annotations

import argparse
import json
import os
import select
import stat
import sys
import time
from pathlib import Path

from aks_gpu.cli import COMMANDS
from aks_gpu.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from aks_gpu.gpu.diag.detect import TOOLS
from aks_gpu.gpu.diag.grade import Grade
from aks_gpu.gpu.health import nvlink_expected_for, read_health
from aks_gpu.gpu.smi import NVIDIA_CSV_QUERY_FIELDS, parse_smi
from aks_gpu.gpu.smi.text import MAX_INPUT_CHARS

# What is read of a file or a pipe: the parsers read MAX_INPUT_CHARS characters at most; one byte more tells them
# the input was longer.
_MAX_BYTES = MAX_INPUT_CHARS * 4 + 1
# How long a pipe's writer may take to finish: an SMI command that outlives this is stuck, not slow.
_PIPE_TIMEOUT_S = 120

_PARSE_DESCRIPTION = f"""\
Read one output of nvidia-smi (default table, -q, -q -x, -L, mig -lgip, nvlink -s, topo -m, --query-gpu and
--query-compute-apps CSV), amd-smi (default table, version, static, list, metric; text or --json) or rocm-smi,
and print one JSON object: vendor, format, driver/CUDA/ROCm versions, the kernel release where an AMD tool
prints it for the in-tree driver (kernel_driver), GPUs, MIG devices, processes, NVLinks, topology, whether the
output was cut short (truncated), and the error the output reports, if any. Values the output does not show
are null.

A CSV without a header is read only in this column order:
  nvidia-smi --query-gpu={",".join(NVIDIA_CSV_QUERY_FIELDS)} --format=csv,noheader

exit status: 0 parsed, 1 the output reports an error or is no known format, 2 usage error
"""

_HEALTH_DESCRIPTION = """\
Read one output and print the GPU health findings in it as JSON:
  {"findings": [{"id", "severity", "gpu", "message"}], "checked": [ids]}
Inputs: nvidia-smi -q (text or -x), the default nvidia-smi table, --query-gpu / --query-remapped-rows CSV with
its header, nvidia-smi nvlink -s, topo -m (with --vm-size), dcgmi nvlink --link-status, kernel log lines (dmesg,
journalctl -k), amd-smi metric --ecc / --ecc-blocks (text or --json), rocm-smi --showrasinfo. "checked" names
what the input allowed to judge: an id that is not there was not checked, whatever the findings say.

"not_checked" names what a GPU the input shows did not allow to judge ({"id", "gpu", "reason"}); "incomplete"
says why the input was not read whole (cut short, or rows that could not be read): such an input is never called
healthy.

--vm-size names the node's size (its node.kubernetes.io/instance-type): on a size whose GPUs are NVLink-connected
(components/aks_gpu/data/gpu_catalog.yaml) a GPU with every NVLink inactive is critical, as Azure's health checks fail it.

Finding ids: ecc-uncorrectable, row-remap-failure, row-remap-pending, retired-pages-pending, xid, gpu-lost,
gpu-reset-required, hw-slowdown, pcie-degraded, nvlink-inactive, fabric-not-ready, ras-uncorrectable. Xid
severities come from NVIDIA's Xid catalog (components/aks_gpu/data/xid.yaml).

exit status: 0 no finding is critical and the input was read whole, 1 a finding is critical, 2 usage error, an
input it cannot read, or one it could not read whole (and nothing critical in what it read)
"""


_DIAG_DESCRIPTION = """\
Grade one saved output of a vendor's active GPU diagnostic as an engineer would, and as the diagnostic pod's
verdict (`aksgpu validate --deep`, the schedule) does: healthy, unhealthy (what failed: the test and GPU), or
inconclusive (why nothing can be said: the tool could not run, skipped, was cut off, or is no tool a reader knows).
Tools: dcgmi diag (table or -j JSON, DCGM 2 to 4), deviceQuery and the CUDA samples (bandwidthTest, vectorAdd,
simpleP2P, p2pBandwidthLatencyTest, the GPU Operator's CUDA validator) and nvbandwidth, nccl-tests (all_reduce_perf
and the other *_perf), rvs (ROCm Validation Suite, or AMD's test runner's result summary of an RVS or AGFHC run),
amd-smi (the RAS counters of amd-smi metric --ecc / --ecc-blocks, text or --json, and rocm-smi --showrasinfo; any
other amd-smi or rocm-smi output is inconclusive: it is not a RAS read), rocm (AMD's runtime tools: rocminfo, hipInfo,
rocm-bandwidth-test, TransferBench, and the HIP and HSA runtimes' errors of any HIP program: the driver not loaded,
/dev/kfd absent, a GPU memory access fault or hang, copied data that came back wrong are unhealthy; /dev/kfd refused
to the user, a program built for another gfx, an image newer than the driver are inconclusive).
The tool is told from the text unless --tool names it.

--vm-size names the node's size: a CUDA or ROCm check that sees fewer GPUs than the size has fails, and
all_reduce_perf's bus bandwidth is held to the size's figure (components/aks_gpu/data/gpu_diagnostics.yaml) at the
figure's message size. --level is the dcgmi diag -r the output came from: a level 2 or higher run that tested
nothing past Deployment proves nothing.

--json prints {"file", "tool", "tool_detected", "state", "part", "evidence", "warnings", "vm_size", "level"}.

exit status: 0 healthy, 1 unhealthy or inconclusive, 2 unreadable file or usage error
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``smi parse``, ``smi health`` and ``smi diag`` to the ``aksgpu`` command line."""
    smi = subparsers.add_parser(
        "smi",
        help=COMMANDS["smi"],
        description="Read saved nvidia-smi, amd-smi or rocm-smi output (or a kernel log): parse it into JSON, or list "
        "the GPU health findings in it.",
    )
    smi_commands = smi.add_subparsers(dest="smi_command", metavar="COMMAND", required=True)
    for name, help_text, description, handler in (
        ("parse", "parse one nvidia-smi / amd-smi / rocm-smi output into JSON", _PARSE_DESCRIPTION, run_parse),
        ("health", "GPU health findings (ECC, Xid, row remapping, NVLink...) in one output", _HEALTH_DESCRIPTION, run_health),
    ):
        command = smi_commands.add_parser(
            name, help=help_text, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        command.add_argument(
            "--vendor",
            choices=("nvidia", "amd", "auto"),
            default="auto",
            help="only try this vendor's formats (default: auto, tell by content)",
        )
        if name == "health":
            command.add_argument(
                "--vm-size",
                metavar="SIZE",
                help="the node's VM size (node.kubernetes.io/instance-type, e.g. Standard_ND96isr_H100_v5): every NVLink "
                "of a GPU inactive is critical on a size whose GPUs are NVLink-connected",
            )
        command.add_argument("source", metavar="FILE|-", help="the saved output, or - to read standard input")
        command.set_defaults(handler=handler)
    diag = smi_commands.add_parser(
        "diag",
        help="grade a saved vendor diagnostic (dcgmi diag, deviceQuery, nccl-tests, rvs, amd-smi RAS counters, rocminfo)",
        description=_DIAG_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diag.add_argument("--tool", choices=TOOLS, help="the tool that printed the output (default: told from the text)")
    diag.add_argument(
        "--vm-size",
        metavar="SIZE",
        help="the node's VM size (e.g. Standard_ND96isr_H100_v5): the GPUs a CUDA check must see, the NCCL bus bandwidth",
    )
    diag.add_argument("--level", type=int, choices=(1, 2, 3, 4), help="the dcgmi diag -r level the output came from")
    diag.add_argument("--json", action="store_true", help="print the grade as JSON")
    diag.add_argument("source", metavar="FILE|-", help="the saved output, or - to read standard input")
    diag.set_defaults(handler=run_diag)


def run_parse(args: argparse.Namespace) -> int:
    """Print the report for ``args.source`` and return the exit status."""
    text = _read_or_report(args.source, "parse")
    if text is None:
        return EXIT_USAGE
    report = parse_smi(text, args.vendor)
    print(json.dumps(report.to_dict(), indent=2))
    return EXIT_OK if report.error is None else EXIT_FAILED


def run_health(args: argparse.Namespace) -> int:
    """Print the health findings for ``args.source`` and return the exit status."""
    text = _read_or_report(args.source, "health")
    if text is None:
        return EXIT_USAGE
    if args.vm_size and nvlink_expected_for(args.vm_size) is None:
        print(
            f"aksgpu smi health: {args.vm_size}: the catalog does not say whether this size's GPUs are NVLink-connected "
            "(components/aks_gpu/data/gpu_catalog.yaml): every NVLink of a GPU inactive stays a warning",
            file=sys.stderr,
        )
    health = read_health(text, args.vendor, vm_size=args.vm_size)
    if health.unreadable is not None:
        print(f"aksgpu smi health: {args.source}: {health.unreadable}", file=sys.stderr)
        print(json.dumps(health.to_dict(), indent=2))
        return EXIT_USAGE
    print(json.dumps(health.to_dict(), indent=2))
    if health.critical:
        return EXIT_FAILED
    if health.incomplete is not None:
        print(f"aksgpu smi health: {args.source}: not read whole: {health.incomplete}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def run_diag(args: argparse.Namespace) -> int:
    """Print the grade of ``args.source`` and return the exit status: 0 healthy, 1 unhealthy or inconclusive."""
    from aks_gpu.catalog import load_catalog
    from aks_gpu.gpu.diag.detect import grade_output
    from aks_gpu.gpu.diag.expectations import bus_bandwidth_for

    text = _read_or_report(args.source, "diag")
    if text is None:
        return EXIT_USAGE
    expected_gpus = None
    bandwidth = None
    if args.vm_size:
        size = load_catalog().vm_size(args.vm_size.strip())
        if size is None:
            print(
                f"aksgpu smi diag: {args.vm_size}: not a GPU VM size of the catalog (components/aks_gpu/data/"
                "gpu_catalog.yaml; `aksgpu catalog` lists them)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        expected_gpus = size.gpu_count
        bandwidth = bus_bandwidth_for(size.name)
    tool, grade = grade_output(text, args.tool, level=args.level, expected_gpus=expected_gpus, bandwidth=bandwidth)
    report = {
        "file": args.source,
        "tool": tool,
        "tool_detected": args.tool is None and tool is not None,
        "state": grade.state,
        "part": grade.part,
        "evidence": list(grade.evidence),
        "warnings": list(grade.warnings),
        "vm_size": args.vm_size,
        "level": args.level,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_diag(args.source, tool, grade)
    return EXIT_OK if grade.passed else EXIT_FAILED


def _print_diag(source: str, tool: str | None, grade: Grade) -> None:
    from aks_gpu.cli import common, tables

    rows = [["tool", tool or "unknown"], ["grade", grade.state]]
    rows += [["part" if grade.state == "unhealthy" else "why", grade.part]] if grade.part else []
    rows += [["evidence", line] for line in grade.evidence] + [["warning", line] for line in grade.warnings]
    tables.print_table(
        common.out,
        common.safe(source),
        ["", "what the output says"],
        [[common.safe(cell) for cell in row] for row in rows],
        keep=[""],
        flexible={"what the output says": 30},
        group=True,
    )


def _read_or_report(source: str, command: str) -> str | None:
    try:
        return _read_source(source)
    except OSError as error:
        print(f"aksgpu smi {command}: cannot read {source}: {error.strerror or error}", file=sys.stderr)
        return None


def _read_source(source: str) -> str:
    # Bytes, decoded leniently: the tools print "°C" and other non-ASCII text, and a saved log may not be
    # UTF-8; a stray byte must not hide the driver version from the parser.
    if source == "-":
        raw = _read_stdin()
    else:
        path = Path(source)
        mode = path.stat().st_mode
        if stat.S_ISFIFO(mode):
            raw = _read_pipe(path)
        elif stat.S_ISREG(mode):
            with path.open("rb") as handle:
                raw = handle.read(_MAX_BYTES)
        else:
            # A directory, or a device (/dev/zero never ends).
            raise OSError(0, "not a regular file or a pipe")
    return bytes(raw).decode("utf-8", errors="replace")


def _read_stdin() -> bytes:
    """Standard input: a pipe or socket is read within ``_PIPE_TIMEOUT_S`` like a named pipe (``kubectl exec ... |
    aksgpu smi parse -`` whose command never ends must not hold us for ever); a file or a terminal is read as is."""
    try:
        fd = sys.stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, ValueError, OSError):  # not a real file (a test's StringIO, a closed stdin)
        stream = getattr(sys.stdin, "buffer", None)
        return bytes(stream.read(_MAX_BYTES) if stream is not None else sys.stdin.read(_MAX_BYTES).encode())
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return os.read(fd, _MAX_BYTES) if stat.S_ISREG(mode) else sys.stdin.buffer.read(_MAX_BYTES)
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + _PIPE_TIMEOUT_S
    while size < _MAX_BYTES:
        left = deadline - time.monotonic()
        # Readable means data or the end: the read below does not block.
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise OSError(0, f"standard input did not end within {_PIPE_TIMEOUT_S:g} s")
        chunk = os.read(fd, min(1 << 20, _MAX_BYTES - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _read_pipe(path: Path) -> bytes:
    """A pipe read like stdin, as ``aksgpu smi parse <(kubectl exec ... -- nvidia-smi)`` hands us one (/dev/fd/63).

    Opened without blocking, so a named pipe nobody writes to is not waited on for ever: with no writer, Linux
    reports end of file at once (pipe(7): a read from a pipe whose write ends are all closed sees end-of-file)
    and the input is empty. A writer that never finishes is bounded by ``_PIPE_TIMEOUT_S``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + _PIPE_TIMEOUT_S
    try:
        while size < _MAX_BYTES:
            try:
                chunk = os.read(fd, min(1 << 20, _MAX_BYTES - size))
            except BlockingIOError:
                # The writer is there but has nothing for us yet. (select alone cannot tell: Linux never reports
                # a FIFO readable that no writer has opened, while read returns end of file for it at once.)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise OSError(0, f"the pipe did not end within {_PIPE_TIMEOUT_S:g} s") from None
                select.select([fd], [], [], min(left, 1.0))
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)
