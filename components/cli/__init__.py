"""``aksgpu``: plan a stack offline, print the config schema and GPU catalog, parse SMI output,
validate a cluster and check pods against the admission policy."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from components.cli import admission, catalog, plan, rules, schema, smi, validate
from components.cli.common import EXIT_USAGE, err
from components.config import ConfigError

Handler = Callable[[argparse.Namespace], int]
COMMANDS = (plan, schema, catalog, smi, admission, validate, rules)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aksgpu", description=__doc__)
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
        return 130


def entrypoint() -> None:
    sys.exit(main())
