"""``aksgpu plan``: run the real program offline under the mock engine, write the plan, summarise it."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.tree import Tree

from components.cli.common import EXIT_OK, add_stack_arguments, load_stack, out, report_warnings
from components.kube.smoke_job import smoke_plan
from components.model import PlatformModel, resolve
from components.monitoring.summary import monitoring_lines
from components.plan import PlanResult, Replacement, ResourceRecord, replacements, run_program, write_plan


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan a stack offline (no Azure account, no Pulumi CLI)",
        description="Run __main__.py under Pulumi's mock engine and write build/<stack>/resources.json and manifests/.",
    )
    add_stack_arguments(parser)
    parser.add_argument("--out", type=Path, help="output folder (default: build/<stack>)")
    parser.add_argument(
        "--preview",
        action="store_true",
        help="run as `pulumi preview` does: nothing exists yet, so ids and provider-computed outputs are unknown",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args)
    report_warnings(loaded)
    out_dir: Path = args.out or loaded.project_dir / "build" / loaded.stack
    previous_file = out_dir / "resources.json"
    previous = json.loads(previous_file.read_text(encoding="utf-8")) if previous_file.is_file() else None

    mode = " (preview: provider outputs unknown)" if args.preview else ""
    with out.status(f"planning stack [bold]{loaded.stack}[/] under the mock engine{mode}"):
        result = run_program(loaded.project_dir, loaded.stack, loaded.raw, preview=args.preview)
    changes = replacements(previous, result) if previous else []
    written = write_plan(result, out_dir)

    model = resolve(loaded.validated.config)
    out.print(resource_tree(result))
    out.print(pool_table(model))
    print_replacements(changes)
    for decision in smoke_plan(model):
        out.print(f"smoke Job [bold]{decision.pool}[/]: {decision.reason}")
    for line in monitoring_lines(model):
        out.print(line, markup=False)
    out.print(f"[bold]{len(result.resources)}[/] resources, [bold]{len(result.manifests())}[/] Kubernetes manifests")
    for path in written[:1]:
        out.print(f"wrote {_relative(path)}")
    if len(written) > 1:
        out.print(f"wrote {len(written) - 1} manifests under {_relative(written[1].parent)}/")
    return EXIT_OK


def resource_tree(result: PlanResult) -> Tree:
    """Components as branches, each with the count of every resource type directly under it."""
    children: dict[str | None, list[ResourceRecord]] = {}
    for record in result.resources:
        children.setdefault(record.parent, []).append(record)
    known = {r.urn for r in result.resources}
    tree = Tree(f"[bold]{result.project}[/] / stack [bold]{result.stack}[/]")

    def grow(branch: Tree, parent_urn: str) -> None:
        records = children.get(parent_urn, [])
        for component in (r for r in records if not r.custom):
            grow(branch.add(f"[cyan]{component.type}[/] {component.name}"), component.urn)
        counts = Counter(r.type for r in records if r.custom)
        for type_, count in sorted(counts.items()):
            branch.add(f"{count} x {type_}")

    for root in (r for r in result.resources if r.parent not in known):
        if root.custom:
            tree.add(f"{root.type} {root.name}")
        else:
            grow(tree.add(f"[cyan]{root.type}[/] {root.name}"), root.urn)
    return tree


def pool_table(model: PlatformModel) -> Table:
    table = Table(title="GPU pools: what each node exposes to the scheduler")
    for column in ("pool", "vm size", "gpus", "resource", "per node", "mig", "sharing", "nodes", "taints"):
        table.add_column(column)
    for pool in model.pools:
        spec = pool.config
        nodes = f"{spec.min_count}-{spec.max_count}" if spec.autoscaling else str(spec.count)
        table.add_row(
            pool.name,
            spec.vm_size,
            f"{pool.gpus_per_node or '?'} x {pool.gpu_model.key if pool.gpu_model else '?'}",
            pool.resource.name,
            str(pool.resource.count_per_node if pool.resource.count_per_node is not None else "unknown"),
            f"{spec.mig_profile} ({pool.mig_profile}, {model.mig_strategy})" if pool.mig_profile else "-",
            f"time-slicing x{pool.time_slicing_replicas}" if pool.time_slicing_replicas else "-",
            nodes + (" spot" if spec.spot else ""),
            "\n".join(t.aks() for t in pool.taints),
        )
    return table


def print_replacements(changes: list[Replacement]) -> None:
    for change in changes:
        consequence = (
            "drains and recreates every node of this pool"
            if change.urn.split("::")[-2].endswith("AgentPool")
            else "recreates the resource"
        )
        out.print(
            f"[bold red]replace[/] [red]{change.name}: {change.field} {change.before!r} -> {change.after!r} cannot "
            f"change in place: Pulumi replaces it ({consequence}) or Azure refuses the update[/]"
        )


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
