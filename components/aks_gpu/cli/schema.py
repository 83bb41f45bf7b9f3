"""``aksgpu schema``: the JSON Schema of a stack file, for editor completion and red squiggles."""

from __future__ import annotations

import argparse
from typing import Any

from aks_gpu.cli import COMMANDS
from aks_gpu.config.schema import SHIPPED_SCHEMA_FILE


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema",
        help=COMMANDS["schema"],
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
    # The copy `make schema` writes from the config models (tests/config/test_generated.py holds it to them), as shipped:
    # printing it needs neither pydantic nor the models.
    print(SHIPPED_SCHEMA_FILE.read_text(encoding="utf-8"), end="")
    return 0
