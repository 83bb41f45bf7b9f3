"""``aksgpu``: plan a stack offline, print the config schema and GPU catalog, parse SMI output,
validate a cluster, audit any AKS GPU cluster against the best practices and check pods against the admission
policy."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from components.cli import admission, audit, catalog, plan, rules, schema, smi, validate
from components.cli.common import EXIT_INTERNAL, EXIT_USAGE, err, safe
from components.config.problems import ConfigError
from components.internal_error import DEBUG_ENV, debug_requested, internal_error_message

Handler = Callable[[argparse.Namespace], int]
COMMANDS = (plan, schema, catalog, smi, admission, validate, rules, audit)
EXIT_INTERRUPTED = 130
# What a shell reports for a program killed by SIGPIPE (128 + 13): `aksgpu ... | head` closed the pipe.
EXIT_BROKEN_PIPE = 141

_EPILOG = f"""\
exit status: 0 ok, 1 a check failed or an object was denied, 2 usage, config or input error,
3 internal error (a bug: please report it; {DEBUG_ENV}=1 or --debug prints the traceback)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aksgpu", description=__doc__, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--debug", action="store_true", help=f"on an internal error, print the traceback (or set {DEBUG_ENV}=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return handler(args)
    except ConfigError as exc:
        from components.cli.common import report_config_error

        return report_config_error(exc)
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Whoever read our output stopped reading; nothing more can be said on stdout.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - the boundary: a traceback is a bug, reported as one
        if args.debug or debug_requested():
            traceback.print_exc()
        err.print(f"[bold red]aksgpu[/]: {safe(internal_error_message(exc))}")
        return EXIT_INTERNAL


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        return


def entrypoint() -> None:
    sys.exit(main())
