"""``aksgpu admission check``: judge Pod and workload YAML against the stack's GPU placement policy, offline."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.markup import escape
from rich.table import Table

from components.admission.policy import POLICY_NAME, render_policy, workload_namespaces
from components.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_stack_arguments, err, load_stack, out, report_warnings
from components.model import resolve

if TYPE_CHECKING:
    from components.admission.evaluate import Decision

_DESCRIPTION = """\
Evaluate the stack's ValidatingAdmissionPolicy (aks-gpu-gpu-placement) against Kubernetes objects in YAML
files: Pods and the Pod templates of Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs.
Files may hold several documents and `kind: List`. Each object is judged as the API server would judge its
CREATE, with the same CEL. Namespace objects in the files are read for their labels (rule 3); the stack's
workload namespaces are known already; an object without a namespace is in "default".

A violation is reported as "denied" whatever the stack's validationActions: with [Warn] or [Audit] a cluster
would still admit the object, with a warning or an audit annotation. The output names the actions.

exit status: 0 every object admitted, 1 any denied, 2 usage, file, YAML or stack config error
"""


def register(subparsers: Any) -> None:
    """Add ``admission check`` to the ``aksgpu`` command line."""
    admission = subparsers.add_parser("admission", help="check objects against the GPU admission policy")
    commands = admission.add_subparsers(dest="admission_command", metavar="COMMAND", required=True)
    check = commands.add_parser(
        "check",
        help="judge Pod / workload YAML against the stack's admission policy, offline",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_stack_arguments(check)
    check.add_argument("--json", action="store_true", help="print a JSON list of decisions on stdout, nothing else")
    check.add_argument("files", metavar="FILE", nargs="+", type=Path, help="YAML file(s) with Kubernetes objects")
    check.set_defaults(handler=run_check)


class InputError(Exception):
    """A file that cannot be read, or a document that is not a Kubernetes object."""


@dataclass(frozen=True)
class SourcedObject:
    source: str  # file and document number, for people reading the table
    obj: dict[str, Any]


def run_check(args: argparse.Namespace) -> int:
    """Print a decision per object and return the exit status."""
    # The CEL engine loads only for this command, not for every `aksgpu` invocation.
    from components.admission.engine import CelError
    from components.admission.evaluate import PolicyError, evaluate

    loaded = load_stack(args)  # ConfigError: the command line turns it into exit status 2
    report_warnings(loaded)  # on stderr: stdout stays pure JSON with --json
    try:
        objects = [item for path in args.files for item in read_objects(path)]
    except InputError as error:
        err.print(f"[bold red]error[/] {escape(str(error))}")
        return EXIT_USAGE
    model = resolve(loaded.validated.config)
    manifests = render_policy(model)
    namespaces = {**workload_namespaces(model), **namespaces_in(objects)}
    try:
        decisions = evaluate((item.obj for item in objects), manifests, namespaces)
    except (CelError, PolicyError) as error:
        err.print(f"[bold red]error[/] the stack's admission policy cannot be evaluated: {escape(str(error))}")
        return EXIT_USAGE
    if args.json:
        print(json.dumps([decision.to_json() for decision in decisions], indent=2))
    else:
        actions = manifests[1]["spec"]["validationActions"] if manifests else []
        print_report(loaded.stack, actions, objects, decisions)
    return EXIT_OK if all(decision.allowed for decision in decisions) else EXIT_FAILED


def read_objects(path: Path) -> Iterator[SourcedObject]:
    """Every Kubernetes object in a YAML file: each document, and each item of a ``kind: List``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise InputError(f"{path}: not valid YAML: {error}") from None
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue  # an empty document, e.g. after a trailing ---
        yield from _objects_of(document, f"{path}#{number}")


def _objects_of(document: Any, source: str) -> Iterator[SourcedObject]:
    if not isinstance(document, dict):
        raise InputError(f"{source}: not a Kubernetes object (a mapping with apiVersion and kind)")
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{source}: object without kind")
    if kind == "List" or (kind.endswith("List") and isinstance(document.get("items"), list)):
        items = document.get("items")
        if not isinstance(items, list):
            raise InputError(f"{source}: a List without items")
        for index, item in enumerate(items):
            yield from _objects_of(item, f"{source}.items[{index}]")
        return
    yield SourcedObject(source=source, obj=document)


def namespaces_in(objects: list[SourcedObject]) -> dict[str, dict[str, Any]]:
    """Namespace objects given alongside the workloads, by name: their labels decide rule 3."""
    found: dict[str, dict[str, Any]] = {}
    for item in objects:
        name = (item.obj.get("metadata") or {}).get("name")
        if item.obj.get("kind") == "Namespace" and isinstance(name, str):
            found[name] = item.obj
    return found


def print_report(stack: str, actions: list[str], objects: list[SourcedObject], decisions: list[Decision]) -> None:
    denied = sum(not d.allowed for d in decisions)
    if actions:
        header = f"stack [bold]{escape(stack)}[/]: policy {POLICY_NAME}, validationActions {escape(str(actions))}"
    else:
        header = f"stack [bold]{escape(stack)}[/]: admission is disabled (admission.enabled: false); nothing is checked"
    out.print(header)
    table = Table(title="admission check (as the API server would decide a CREATE)")
    for column in ("object", "namespace", "decision", "messages", "source"):
        table.add_column(column, overflow="fold")
    for item, decision in zip(objects, decisions, strict=True):
        verdict = "[green]admitted[/]" if decision.allowed else "[bold red]denied[/]"
        details = "\n".join(f"- {escape(m)}" for m in decision.messages) or f"[dim]{escape(decision.note)}[/]"
        name = f"{decision.kind}/{escape(decision.name)}"
        table.add_row(name, decision.namespace or "-", verdict, details, escape(item.source))
    out.print(table)
    summary = f"{len(decisions) - denied} admitted, {denied} denied"
    if denied and actions and "Deny" not in actions:
        summary += (
            f" - with validationActions {actions} the cluster would admit the denied ones"
            " and only warn or audit; they are reported as denied so they get fixed"
        )
    out.print(escape(summary))
