"""``aksgpu smi parse``: read one nvidia-smi, amd-smi or rocm-smi output and print what it says as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from components.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from components.input_files import InputFileError, read_stream_bounded
from components.validation.smi import NVIDIA_CSV_QUERY_FIELDS, parse_smi

# A saved SMI output or kernel log is KB to MB; past this it is not one (an endless stream such as /dev/zero).
MAX_INPUT_BYTES = 256 << 20

_DESCRIPTION = f"""\
Read one output of nvidia-smi (default table, -L, -q -x, mig -lgip, --query-gpu CSV), amd-smi (default
table, version, static, list; text or --json) or rocm-smi --showdriverversion, and print one JSON object:
vendor, driver/CUDA/ROCm versions, GPUs, MIG devices, and the error the output reports, if any. Values
the output does not show are null.

A CSV without a header is read only in this column order:
  nvidia-smi --query-gpu={",".join(NVIDIA_CSV_QUERY_FIELDS)} --format=csv,noheader

exit status: 0 parsed, 1 the output reports an error or is no known format, 2 usage error
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``smi parse`` to the ``aksgpu`` command line."""
    smi = subparsers.add_parser("smi", help="read GPU management tool (SMI) output")
    smi_commands = smi.add_subparsers(dest="smi_command", metavar="COMMAND", required=True)
    parse = smi_commands.add_parser(
        "parse",
        help="parse one nvidia-smi / amd-smi / rocm-smi output into JSON",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument(
        "--vendor",
        choices=("nvidia", "amd", "auto"),
        default="auto",
        help="only try this vendor's formats (default: auto, tell by content)",
    )
    parse.add_argument("source", metavar="FILE|-", help="the saved output, or - to read standard input")
    parse.set_defaults(handler=run_parse)


def run_parse(args: argparse.Namespace) -> int:
    """Print the report for ``args.source`` and return the exit status."""
    try:
        text = _read_source(args.source)
    except OSError as error:
        print(f"aksgpu smi parse: cannot read {args.source}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    except InputFileError as error:
        print(f"aksgpu smi parse: {args.source} {error}", file=sys.stderr)
        return EXIT_USAGE
    report = parse_smi(text, args.vendor)
    print(json.dumps(report.to_dict(), indent=2))
    return EXIT_OK if report.error is None else EXIT_FAILED


def _read_source(source: str) -> str:
    # Bytes, decoded leniently: the tools print "°C" and other non-ASCII text, and a saved log may not be
    # UTF-8; a stray byte must not hide the driver version from the parser.
    # Bounded: a pipe from `<(kubectl exec ...)` is fine, an endless one (/dev/zero) is refused.
    if source == "-":
        stream = getattr(sys.stdin, "buffer", None)
        raw = read_stream_bounded(stream, MAX_INPUT_BYTES) if stream is not None else sys.stdin.read().encode()
    else:
        with Path(source).open("rb") as handle:
            raw = read_stream_bounded(handle, MAX_INPUT_BYTES)
    return bytes(raw).decode("utf-8", errors="replace")
