"""``aksgpu``: the command line of aks-gpu (``build_parser`` lists the commands, ``main`` runs one)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from aks_gpu import __version__
from aks_gpu.cli import common
from aks_gpu.cli.common import EXIT_INTERNAL, EXIT_USAGE, safe
from aks_gpu.config.problems import ConfigError
from aks_gpu.internal_error import DEBUG_ENV, debug_requested, internal_error_message

Handler = Callable[[argparse.Namespace], int]
# Each command's module, imported only when that command runs (or for `aksgpu --help`): a command pays for its own
# imports only, so `smi parse`, `catalog` or `admission check` never load Pulumi or the Azure SDK.
# In the order people reach for them: build and check a platform, audit any cluster, gate and watch the workloads, then
# the tools (`aksgpu --help` lists them so).
COMMANDS = ("plan", "validate", "audit", "admission", "rules", "smi", "catalog", "schema")
EXIT_INTERRUPTED = 130
# What a shell reports for a program killed by SIGPIPE (128 + 13): `aksgpu ... | head` closed the pipe.
EXIT_BROKEN_PIPE = 141

_DESCRIPTION = """\
Build GPU platforms on AKS, check any AKS GPU cluster against Microsoft's GPU best practices, and gate GPU
workloads. Every command but a live validate, audit or collect works offline. `aksgpu COMMAND --help` says
more about each.

  aksgpu audit --snapshot examples/snapshots/faulty    try the audit with no cluster
  aksgpu plan --stack prod                             plan stacks/Pulumi.prod.yaml offline
"""

_EPILOG = f"""\
exit status: 0 ok, 1 a check failed or an object was denied, 2 usage, config or input error,
3 internal error (a bug: please report it; {DEBUG_ENV}=1 or --debug prints the traceback)
"""


def build_parser(commands: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aksgpu", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"aksgpu {__version__}")
    parser.add_argument("--debug", action="store_true", help=f"on an internal error, print the traceback (or set {DEBUG_ENV}=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in commands:
        importlib.import_module(f"aks_gpu.cli.{command}").register(subparsers)
    return parser


def _command_of(argv: Sequence[str]) -> tuple[str, ...]:
    """The one command ``argv`` runs, when it names one; else all (``aksgpu --help``, a typo: every command listed)."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return (first,) if first in COMMANDS else COMMANDS


def main(argv: Sequence[str] | None = None) -> int:
    _tolerant_output()
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_of(arguments))
    args = parser.parse_args(arguments)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return handler(args)
    except ConfigError as exc:
        from aks_gpu.cli.common import report_config_error

        return report_config_error(exc)
    except KeyboardInterrupt:
        common.err.print("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Whoever read our output stopped reading; nothing more can be said on stdout.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - the boundary: a traceback is a bug, reported as one
        if args.debug or debug_requested():
            traceback.print_exc()
        common.err.print(f"[bold red]aksgpu[/]: {safe(internal_error_message(exc))}")
        return EXIT_INTERNAL


def _tolerant_output() -> None:
    """A character the output's encoding cannot carry (``PYTHONIOENCODING=ascii``, a Windows code page) is written
    as a backslash escape instead of raising UnicodeEncodeError halfway through a report."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError, TypeError):  # a stream that cannot change now: left as it is
                continue


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        return


def entrypoint() -> None:
    sys.exit(main())
