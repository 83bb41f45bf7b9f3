"""``aksgpu schema``: the JSON Schema of a stack file, for editor completion and red squiggles."""

from __future__ import annotations

import argparse
import json
from typing import Any

from components.config.schema import stack_file_schema


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("schema", help="print the JSON Schema of the stack config")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    print(json.dumps(stack_file_schema(), indent=2, sort_keys=True))
    return 0
