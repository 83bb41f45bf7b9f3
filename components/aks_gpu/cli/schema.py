"""``aksgpu schema``: the JSON Schema of a stack file, for editor completion and red squiggles."""

from __future__ import annotations

import argparse
import json
from typing import Any

from aks_gpu.config.schema import stack_file_schema


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema",
        help="print the JSON Schema of the stack config (or, with --components, the component package schema)",
        description="Print the JSON Schema of a stack file (Pulumi.<stack>.yaml) on stdout, for editor completion and "
        "checks (stacks/stack-config.schema.json is this output); with --components, the package schema Pulumi infers "
        "for the public components.",
    )
    parser.add_argument(
        "--components",
        action="store_true",
        help="print the package schema Pulumi infers for the public components (what `pulumi package add` builds SDKs from)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.components:
        # Imported here: building the component schema loads every component module.
        from aks_gpu.package import schema_text

        print(schema_text(), end="")
        return 0
    print(json.dumps(stack_file_schema(), indent=2, sort_keys=True))
    return 0
