"""``aksgpu``: the command line of aks-gpu (``build_parser`` lists the commands, ``main`` runs one)."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_now(signum: int, frame: object) -> None:
    """Ctrl-C where no Python code can take it cleanly (the imports below, asyncio's loop in ``plan``): one line, 130.
    os.write, not print: a signal handler must not take the stream's lock the interrupted code may hold."""
    try:
        os.write(2, b"interrupted\n")
    finally:
        os._exit(130)


# From the first line of the command line's own code: Ctrl-C during the imports is 130, never a traceback. main()
# hands Ctrl-C back to Python (KeyboardInterrupt) once its handlers are in place. A Ctrl-C the caller ignores (a
# background job of a script, nohup) stays ignored.
SIGINT_IGNORED = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
if not SIGINT_IGNORED:
    signal.signal(signal.SIGINT, _interrupted_now)

import argparse  # noqa: E402 - after the Ctrl-C handler, on purpose
import contextlib  # noqa: E402
import importlib  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable, Collection, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from aks_gpu.cli import common  # noqa: E402
from aks_gpu.cli.common import EXIT_INTERNAL, EXIT_USAGE, aksgpu_version, safe  # noqa: E402
from aks_gpu.config.problems import ConfigError  # noqa: E402
from aks_gpu.internal_error import DEBUG_ENV, debug_requested, internal_error_message  # noqa: E402

Handler = Callable[[argparse.Namespace], int]
# Each command, and the line `aksgpu --help` lists it with (its module's parser takes its help from here). A command's
# module is imported only when that command runs or shows its own help: `aksgpu --help` and `--version` import none, and
# a command pays for its own imports only, so `smi parse`, `catalog` or `admission check` never load Pulumi or the
# Azure SDK. In the order people reach for them: build and check a platform, audit any cluster, gate and watch the
# workloads, then the tools (`aksgpu --help` lists them so).
COMMANDS: dict[str, str] = {
    "plan": "plan a stack offline (no Azure account, no Pulumi CLI)",
    "preflight": "check the subscription's GPU quota and provider registrations for a stack (live, read-only)",
    "local": "run a stack's in-cluster layer on a local control plane (kwok nodes, the real Pulumi CLI)",
    "validate": "check a deployed stack's GPU pools (live, or from a snapshot saved with `validate collect`)",
    "audit": "hold any AKS GPU cluster (live or a snapshot) against the GPU best practices; no stack needed",
    "advise": "right-size GPU workloads from the exporters' history: MIG profile, time-slicing, release or keep",
    "admission": "check objects against the GPU admission policy",
    "rules": "print the stack's GPU alert rules as a Prometheus rule file (or a PrometheusRule object)",
    "smi": "read GPU management tool (SMI) output",
    "catalog": "print the GPU VM catalog (sizes, GPUs, MIG, NVMe)",
    "schema": "print the JSON Schema of the stack config (or, with --components, the component package schema)",
}
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


class _VersionAction(argparse._VersionAction):
    """``--version``: the version is looked up when asked for, not each time the parser is built: reading the package
    metadata is slow to import (``aksgpu_version``), and no other command needs it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        self.version = f"aksgpu {aksgpu_version()}"
        super().__call__(parser, namespace, values, option_string)


def build_parser(commands: Collection[str] = tuple(COMMANDS)) -> argparse.ArgumentParser:
    """The command line with the whole parser of each command in ``commands``; every other command is its name and help
    line only, which is all `aksgpu --help`, `--version` and a mistyped command show of it, and its module stays
    unimported."""
    parser = argparse.ArgumentParser(
        prog="aksgpu", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument("--debug", action="store_true", help=f"on an internal error, print the traceback (or set {DEBUG_ENV}=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command, summary in COMMANDS.items():
        if command in commands:
            importlib.import_module(f"aks_gpu.cli.{command}").register(subparsers)
        else:
            subparsers.add_parser(command, help=summary)
    return parser


def _command_of(argv: Sequence[str]) -> tuple[str, ...]:
    """The one command ``argv`` runs, when it names one; else none (``aksgpu --help``, a typo: every command listed by
    its help line)."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return (first,) if first in COMMANDS else ()


def main(argv: Sequence[str] | None = None) -> int:
    _tolerant_output()
    _tolerate_no_temp_folder()
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(_command_of(arguments))
        args = parser.parse_args(arguments)
    except KeyboardInterrupt:
        _say_interrupted()
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if threading.current_thread() is threading.main_thread() and not SIGINT_IGNORED:
        # From here Ctrl-C is a KeyboardInterrupt, which each command (and the lines below) turns into 130 after its
        # own cleanup (a half-written file removed, queued execs not started).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return handler(args)
    except ConfigError as exc:
        from aks_gpu.cli.common import report_config_error

        return report_config_error(exc)
    except KeyboardInterrupt:
        _say_interrupted()
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


def _tolerate_no_temp_folder() -> None:
    """In a read-only container no temp folder is usable, and Python's ``tempfile.gettempdir()`` raises; Pulumi's
    import (through dill, which computes a path there) would then fail ``aksgpu --help`` and ``plan`` with a
    traceback. Nothing here writes to the temp folder (the plan and the snapshot are written beside their
    destination), so a folder that exists is named instead, and a later write there fails with its own message."""
    import tempfile

    try:
        tempfile.gettempdir()
    except OSError:
        tempfile.tempdir = next((path for path in ("/tmp", os.getcwd()) if os.path.isdir(path)), os.curdir)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        return


def _say_interrupted() -> None:
    try:
        os.write(2, b"interrupted\n")
    except OSError:
        return


def entrypoint() -> None:
    try:
        code = main()
    except KeyboardInterrupt:  # between main's handlers: still 130, without a traceback
        _say_interrupted()
        code = EXIT_INTERRUPTED
    finish(code)


def finish(code: int) -> None:
    """Flush the output and exit with ``code``: 141 when stdout's reader has gone (``| head``) and nothing said
    otherwise. With a thread still running (a probe read its own timeout will end: a server that accepted and never
    answered), the process ends at once, without the interpreter's shutdown, which aborts (SIGABRT, exit 134) when a
    daemon thread is still in a read at that moment."""
    if not SIGINT_IGNORED:
        signal.signal(signal.SIGINT, _interrupted_now)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE if code in (0, 1) else code
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    if threading.active_count() > 1:
        os._exit(code)
    sys.exit(code)
