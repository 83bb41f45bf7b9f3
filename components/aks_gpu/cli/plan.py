"""``aksgpu plan``: run the real program offline under the mock engine, write the plan, summarise it."""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.tree import Tree

from aks_gpu.azure.prerequisites import subscription_prerequisites
from aks_gpu.azure.quota import QUOTA_CLI_DOC, QUOTA_REQUEST_DOC, QuotaPlan, quota_plan
from aks_gpu.cli import COMMANDS, tables
from aks_gpu.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    add_stack_arguments,
    display_path,
    err,
    interrupts_end_at_once,
    load_stack,
    out,
    report_warnings,
    safe,
)
from aks_gpu.cli.deployed_state import DeployedStateError, previous_plan_state, read_export
from aks_gpu.config.models import StackConfig
from aks_gpu.config.problems import clipped, shown
from aks_gpu.input_files import InputFileError, decode_utf8, read_bounded
from aks_gpu.mock_engine import (
    ACCEPTED_FILE,
    PLAN_FILE,
    PlanResult,
    PlanWriteError,
    ResourceRecord,
    run_program,
    write_plan,
)
from aks_gpu.mock_engine.changes import ChangeSet, Deployed, Refusal, needs_attention, plan_changes
from aks_gpu.monitoring.remediation import npd_coverage, remediation_summary
from aks_gpu.monitoring.summary import monitoring_lines
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.validation.smoke import smoke_plan


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help=COMMANDS["plan"],
        description="Run the Pulumi program under Pulumi's mock engine, offline, and write build/<stack>/resources.json "
        "and manifests/: what `pulumi up` would create, with no Azure account and no Pulumi CLI.",
    )
    add_stack_arguments(parser)
    tables.add_wide_argument(parser)
    parser.add_argument("--out", type=Path, metavar="DIR", help="output folder (default: build/<stack>)")
    parser.add_argument(
        "--preview",
        action="store_true",
        help="run as `pulumi preview` does: nothing exists yet, so ids and provider-computed outputs are unknown",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="FILE",
        help="tell each change against this `pulumi stack export` of the deployed stack (default: the previous plan in --out)",
    )
    parser.add_argument(
        "--accept-replace",
        action="store_true",
        help="exit 0 when the plan replaces unprotected resources (a GPU pool, the cluster); they are still printed,"
        " and a blocked change (a protected resource) still exits 1",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    tables.apply_wide(args)
    loaded = load_stack(args)
    report_warnings(loaded)
    stand_ins = [problem.path for problem in loaded.validated.warnings if problem.stand_in]
    if stand_ins:
        # The resources would carry the default in the place of the encrypted value, as if it were the stack's.
        err.print(
            f"[bold red]aksgpu plan[/]: the plan is built from {safe(', '.join(stand_ins))}, encrypted (`secure:`): no "
            "offline plan can show what the stack makes of it; `pulumi preview` plans with it; nothing was planned"
        )
        return EXIT_USAGE
    if not (loaded.project_dir / "__main__.py").is_file():
        # The plan runs the project's program; a stack file given outside a project has none to run.
        err.print(
            f"[bold red]aksgpu plan[/]: {safe(loaded.project_dir)} holds no Pulumi program (__main__.py) to plan: give "
            "--project-dir DIR, the folder with Pulumi.yaml and __main__.py; nothing was planned"
        )
        return EXIT_USAGE
    out_dir: Path = args.out or loaded.project_dir / "build" / loaded.stack
    if out_dir.exists() and not out_dir.is_dir():
        err.print(f"[bold red]aksgpu plan[/]: --out {safe(out_dir)} is a file, not a folder: nothing was planned")
        return EXIT_USAGE
    deployed, baseline = deployed_state(args.against, out_dir)
    if isinstance(deployed, str):
        err.print(f"[bold red]aksgpu plan[/]: {safe(deployed)}; nothing was planned")
        return EXIT_USAGE
    problem = pulumi_environment_problem()
    if problem is not None:
        err.print(f"[bold red]aksgpu plan[/]: {safe(problem)}: nothing was planned")
        return EXIT_USAGE

    mode = " (preview: provider outputs unknown)" if args.preview else ""
    stray = os.environ.pop("PULUMI_CONFIG", None)
    if stray is not None:
        err.print(
            "[yellow]warning[/] PULUMI_CONFIG is set (the language host's config of another run): ignored, the plan"
            " reads the stack file"
        )
    with interrupts_end_at_once(), out.status(f"planning stack [bold]{safe(loaded.stack)}[/] under the mock engine{mode}"):
        result = run_program(loaded.project_dir, loaded.stack, loaded.raw, preview=args.preview)
    changes = plan_changes(deployed or Deployed(None, {}), result)
    if changes.refusals:
        print_refusals(changes.refusals)
        return EXIT_USAGE
    code = changes_exit_code(changes, accept_replace=args.accept_replace)
    # A plan that does not pass is not taken for what is deployed: the one it was told against stays the folder's
    # baseline, so running it again tells the same changes until they are accepted (or undone).
    accepted = baseline if code != EXIT_OK else None
    try:
        written = write_plan(result, out_dir, changes.to_json(), accepted)
    except PlanWriteError as error:
        err.print(f"[bold red]aksgpu plan[/]: {safe(error)}")
        return EXIT_USAGE

    model = loaded.validated.model
    out.print(resource_tree(result))
    if print_pools(model):
        out.print(f"[dim]{tables.list_note(json=False)}[/]")
    out.print(resource_group_line(model), markup=False)
    for line in prerequisite_lines(model):
        print_line(line)
    if isinstance(model.config, StackConfig):
        quota = quota_plan(model.config)
        if print_quota(quota):
            out.print(f"[dim]{tables.list_note(json=False)}[/]")
        for line in quota_lines(quota):
            print_line(line)
    if deployed is not None:
        print_changes(changes)
    for decision in smoke_plan(model):
        out.print(f"smoke Job [bold]{safe(decision.pool)}[/]: {safe(decision.reason)}")
    for line in monitoring_lines(model):
        out.print(line, markup=False)
    out.print(remediation_summary(model), markup=False)
    if (coverage := npd_coverage(model)) is not None:
        out.print(coverage, markup=False)
    out.print(f"[bold]{len(result.resources)}[/] resources, [bold]{len(result.manifests())}[/] Kubernetes manifests")
    plan_files = [path for path in written if path.parent == written[0].parent]
    manifests = written[len(plan_files) :]
    for path in plan_files:
        out.print(f"wrote {safe(_relative(path))}")
    if manifests:
        out.print(f"wrote {len(manifests)} manifests under {safe(_relative(manifests[0].parent))}/")
    if accepted is not None:
        out.print(
            f"kept {safe(_relative(out_dir / ACCEPTED_FILE))}, the last plan that passed: the next plan in this folder is"
            " told against it until one passes"
        )
    print_changes_verdict(changes, accept_replace=args.accept_replace)
    return code


def deployed_state(against: Path | None, out_dir: Path) -> tuple[Deployed | str | None, str | None]:
    """What the plan is compared with: the --against export (a problem with it as a message), else the last plan that
    passed in the output folder (``resources.accepted.json`` when a later one did not, else ``resources.json``), else
    None (nothing deployed that the plan knows of); with the text of that plan when it came from the folder."""
    if against is not None:
        try:
            return read_export(against, _relative(against)), None
        except DeployedStateError as error:
            return str(error), None
    path = out_dir / ACCEPTED_FILE if (out_dir / ACCEPTED_FILE).is_file() else out_dir / PLAN_FILE
    read = read_previous_plan(path)
    if read is None:
        return None, None
    previous, text = read
    return previous_plan_state(previous, _relative(path)), text


def changes_exit_code(changes: ChangeSet, *, accept_replace: bool) -> int:
    """1 when a change is blocked (always) or replaces a GPU pool or the cluster (unless accepted), else 0."""
    blocked = any(change.action == "blocked" for change in changes.changes)
    replacing = any(needs_attention(change) for change in changes.changes)
    return EXIT_FAILED if blocked or (replacing and not accept_replace) else EXIT_OK


def print_changes_verdict(changes: ChangeSet, *, accept_replace: bool) -> None:
    """Why the plan exits 1, when it does."""
    if any(change.action == "blocked" for change in changes.changes):
        err.print("[bold red]aksgpu plan[/]: a protected resource would be replaced or deleted (blocked): unprotect it first")
    elif not accept_replace and any(needs_attention(change) for change in changes.changes):
        err.print(
            "[bold red]aksgpu plan[/]: the plan replaces a GPU pool or the cluster (see the changes above);"
            " --accept-replace accepts it"
        )


def pulumi_environment_problem() -> str | None:
    """What is wrong with ``PULUMI_CONFIG_SECRET_KEYS``, the secret keys the Pulumi SDK reads from the environment
    (a JSON list of ``namespace:key`` strings, pulumi/pulumi sdk/python/lib/pulumi/runtime/config.py
    ``get_config_secret_keys_env``); None when it is absent or well formed. The SDK would raise on it mid-run."""
    text = os.environ.get("PULUMI_CONFIG_SECRET_KEYS")
    if text is None:
        return None
    try:
        keys = json.loads(text)
    except (ValueError, RecursionError):
        return "PULUMI_CONFIG_SECRET_KEYS is not JSON (a list such as [\"aks-gpu:cluster\"])"
    if not (isinstance(keys, list) and all(isinstance(key, str) for key in keys)):
        return "PULUMI_CONFIG_SECRET_KEYS is not a JSON list of config keys (such as [\"aks-gpu:cluster\"])"
    return None


# A previous plan is read only to tell the changes against it: past this size it is not one of ours.
MAX_PREVIOUS_PLAN_BYTES = 256 << 20


def read_previous_plan(path: Path) -> tuple[dict[str, Any], str] | None:
    """The previous plan's ``resources.json`` (and its text) when there is a readable one; else None, with a warning
    when a file is there but broken (a truncated write, a hand edit): the replacement warnings then cannot be given,
    and the plan goes on."""
    if not path.exists():
        return None
    problem: str | None
    try:
        text = decode_utf8(read_bounded(path, MAX_PREVIOUS_PLAN_BYTES))
        document = json.loads(text)
    except InputFileError as error:
        problem = str(error)
    except RecursionError:
        problem = "nested too deeply to read"
    except ValueError as error:  # JSONDecodeError: cut short or not JSON
        problem = f"not valid JSON ({clipped(str(error), 120)}), perhaps cut short"
    else:
        problem = _plan_shape_problem(document)
        if problem is None:
            return dict(document), text
    err.print(
        f"[yellow]warning[/] ignoring the previous plan {safe(_relative(path))}: {safe(problem)};"
        " the changes against it cannot be told this time (the new plan replaces it)"
    )
    return None


def _plan_shape_problem(document: Any) -> str | None:
    if not isinstance(document, dict) or not isinstance(document.get("resources"), list):
        return "not a plan (an object with a `resources` list)"
    for index, record in enumerate(document["resources"]):
        if not (isinstance(record, dict) and isinstance(record.get("urn"), str) and isinstance(record.get("inputs"), dict)):
            return f"resources[{index}] is not a resource (an object with `urn` and `inputs`)"
    return None


def resource_tree(result: PlanResult) -> Tree:
    """Components as branches, each with the count of every resource type directly under it."""
    children: dict[str | None, list[ResourceRecord]] = {}
    for record in result.resources:
        children.setdefault(record.parent, []).append(record)
    known = {r.urn for r in result.resources}
    tree = Tree(f"[bold]{safe(result.project)}[/] / stack [bold]{safe(result.stack)}[/]")

    def grow(branch: Tree, parent_urn: str) -> None:
        records = children.get(parent_urn, [])
        for component in (r for r in records if not r.custom):
            grow(branch.add(f"[cyan]{safe(component.type)}[/] {safe(component.name)}"), component.urn)
        counts = Counter(r.type for r in records if r.custom)
        for type_, count in sorted(counts.items()):
            branch.add(f"{count} x {safe(type_)}")

    for root in (r for r in result.resources if r.parent not in known):
        if root.custom:
            tree.add(f"{safe(root.type)} {safe(root.name)}")
        else:
            grow(tree.add(f"[cyan]{safe(root.type)}[/] {safe(root.name)}"), root.urn)
    return tree


def resource_group_line(model: PlatformModel) -> str:
    """Whether the stack creates the cluster's resource group or adopts one that must already exist."""
    config = model.config
    if not isinstance(config, StackConfig):
        return ""
    cluster = config.cluster
    if cluster.existing:
        how = "adopted with the cluster (cluster.existing: true): it must exist"
    elif cluster.existing_resource_group:
        how = "adopted (cluster.existingResourceGroup: true): looked up, it must exist, pulumi destroy leaves it"
    else:
        how = "created by this stack (pulumi destroy deletes it and all it holds)"
    return f"resource group {cluster.resource_group}: {how}"


def print_line(line: str) -> None:
    """A line of plain text; a command (``az ...``) on one line, never broken: the terminal wraps it, and it copies
    whole."""
    out.print(line, markup=False, soft_wrap=line.lstrip().startswith("az "))


def prerequisite_lines(model: PlatformModel) -> list[str]:
    """What a fresh subscription must have before the first pulumi up (docs/deploying.md), one command each, on a
    line of its own."""
    if not isinstance(model.config, StackConfig):
        return []
    needed = subscription_prerequisites(model.config)
    lines = ["before the first pulumi up on a fresh subscription (the provider registers nothing itself):"]
    for item in needed:
        lines += [f"  {item.what} ({item.why}):", f"    {item.command}"]
    return lines


QUOTA_COLUMNS = ("quota (az vm list-usage name)", "portal label", "pools", "vCPUs needed")


def quota_title(plan: QuotaPlan) -> str:
    return f"compute quota needed in {plan.location} (vCPUs; every pool at maxCount plus its upgrade surge)"


def quota_rows(plan: QuotaPlan) -> list[tuple[str, ...]]:
    by_pool = {need.pool: need for need in plan.pools}
    rows: list[tuple[str, ...]] = []
    for line in plan.lines:
        pools = []
        for name in line.pools:
            need = by_pool[name]
            per_node = need.quota.vcpus
            sizing = f"{need.nodes}+{need.surge} x {per_node}" if per_node is not None else f"{need.nodes}+{need.surge} x ?"
            pools.append(f"{name} ({need.vm_size}: {sizing})")
        needed = f"{line.vcpus}" + (" + unknown" if line.unknown else "")
        rows.append((safe(line.family), safe(line.local_name or "-"), "\n".join(safe(pool) for pool in pools), safe(needed)))
    return rows


def print_quota(plan: QuotaPlan) -> bool:
    """The quota table where the quota names fit whole beside the wrapped others, else one entry a quota."""
    flexible = {"quota (az vm list-usage name)": 0, "portal label": 14, "pools": 20, "vCPUs needed": 6}
    rows = quota_rows(plan)
    longest = max((len(row[0]) for row in rows), default=0)
    flexible["quota (az vm list-usage name)"] = longest
    # a pool's VM size is one word: the column is never narrower than the longest (so it wraps between words)
    flexible["pools"] = max([20, *(len(word) for row in rows for word in row[2].split())])
    return tables.print_table(
        out, quota_title(plan), QUOTA_COLUMNS, rows, right=("vCPUs needed",), keep=(QUOTA_COLUMNS[0],), flexible=flexible
    )


def quota_lines(plan: QuotaPlan) -> list[str]:
    """How to get the quota: what is unknown, the portal page and one command per family (docs/deploying.md)."""
    lines: list[str] = []
    for need in plan.unknown:
        lines += [
            f"  {need.pool}: no quota facts for {need.vm_size} (components/aks_gpu/data/vm_quota_families.yaml); read its"
            " vCPUs and family with:",
            f"    az vm list-skus --location {plan.location} --size {need.vm_size} --query"
            " \"[].{family:family, vCPUs:capabilities[?name=='vCPUs'].value}\"",
        ]
    lines.append(
        f"quota: check what the subscription has with `aksgpu preflight` or `az vm list-usage --location {plan.location}`;"
        f" request more on the portal's Quotas page ({QUOTA_REQUEST_DOC}) or with az quota ({QUOTA_CLI_DOC}):"
    )
    lines += [f"  {command}" for command in plan.request_commands()]
    return lines


POOL_TITLE = "GPU pools: what each node exposes to the scheduler"
POOL_COLUMNS = ("pool", "vm size", "gpus", "resource", "per node", "mig", "sharing", "nodes", "taints")
POOL_KEEP = ("pool", "vm size", "resource", "taints")


def pool_rows(model: PlatformModel) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for pool in model.pools:
        spec = pool.config
        nodes = f"{spec.min_count}-{spec.max_count}" if spec.autoscaling else str(spec.count)
        cells = (
            pool.name,
            spec.vm_size,
            f"{pool.gpus_per_node or '?'} x {pool.gpu_model.key if pool.gpu_model else '?'}",
            pool.resource.name,
            str(pool.resource.count_per_node if pool.resource.count_per_node is not None else "unknown"),
            f"{spec.mig_profile} ({pool.mig_profile}, {model.mig_strategy})" if pool.mig_profile else "-",
            f"time-slicing x{pool.time_slicing_replicas}" if pool.time_slicing_replicas else "-",
            nodes + (" spot" if spec.spot else ""),
        )
        rows.append((*(safe(cell) for cell in cells), "\n".join(safe(t.aks()) for t in pool.taints)))
    return rows


def pool_table(model: PlatformModel) -> Table:
    table = tables.table(POOL_TITLE, POOL_COLUMNS, keep=POOL_KEEP)
    for row in pool_rows(model):
        table.add_row(*row)
    return table


def print_pools(model: PlatformModel) -> bool:
    """The pool table where every column fits the terminal whole (the GPU columns included), else one entry a pool."""
    return tables.print_table(out, POOL_TITLE, POOL_COLUMNS, pool_rows(model), keep=POOL_KEEP, flexible={"mig": 12})


CHANGE_COLUMNS = ("action", "type", "name", "fields", "why", "impact")
ACTION_STYLE = {"replace": "bold red", "blocked": "bold red", "delete": "red", "create": "green", "update": "yellow"}


def change_rows(changes: ChangeSet) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for change in changes.changes:
        impact = ", ".join(f"{key} {'?' if value is None else value}" for key, value in change.impact.items())
        rows.append(
            (
                f"[{ACTION_STYLE[change.action]}]{change.action}[/]",
                safe(change.type),
                safe(change.name),
                "\n".join(safe(field) for field in change.fields),
                safe(change.why),
                safe(impact),
            )
        )
    return rows


def print_changes(changes: ChangeSet) -> None:
    """One row per change, in changes.json's words: a table where it fits whole, else one entry a change."""
    if not changes.changes:
        out.print(f"no changes against {safe(changes.against or '')}")
        return
    title = f"changes against {changes.against}, as the engine will make them"
    flexible = {"why": 24, "type": 16, "fields": 12}
    tables.print_table(out, safe(title), CHANGE_COLUMNS, change_rows(changes), keep=("action",), flexible=flexible)


def print_refusals(refusals: tuple[Refusal, ...]) -> None:
    for refusal in refusals:
        err.print(
            f"[bold red]aksgpu plan[/]: {safe(refusal.setting)} {safe(shown(refusal.before))} ->"
            f" {safe(shown(refusal.after))} on the running cluster {safe(refusal.name)}: {safe(refusal.what_to_do)};"
            " nothing was planned"
        )


def _relative(path: Path) -> str:
    return display_path(path)
