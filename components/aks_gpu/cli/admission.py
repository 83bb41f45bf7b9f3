"""``aksgpu admission check``: judge Pod and workload YAML against the stack's GPU placement policy, offline."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

# common.out and common.err, not imported by name: the consoles (rich) are made on first use, never for --help.
from aks_gpu.cli import COMMANDS, common, tables
from aks_gpu.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    add_stack_arguments,
    escape,
    load_stack,
    report_warnings,
)

if TYPE_CHECKING:
    from aks_gpu.admission.evaluate import Decision
    from aks_gpu.admission.reader import SourcedObject

_DESCRIPTION = """\
Evaluate the stack's ValidatingAdmissionPolicy (aks-gpu-gpu-placement) against Kubernetes objects in YAML
files: Pods and the Pod templates of Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs.
Files may hold several documents and `kind: List`. Each object is judged as the API server would judge its
CREATE, with the same CEL. Namespace objects in the files are read for their labels (rule 3); the stack's
workload namespaces are known already; a namespaced object without a namespace is in "default", a
cluster-scoped one (DeviceClass, ClusterRole...) has none.

A violation is reported as "denied" whatever the stack's validationActions: with [Warn] or [Audit] a cluster
would still admit the object, with a warning or an audit annotation. The output names the actions.

Objects the API server would refuse before admission (a field of the wrong type, a quantity it cannot parse, a
duplicate key) are reported "refused", naming the file, the object and the field (exit 2); a file with no object is
an input error. An object not rendered yet (a Helm template, ${VAR}, <your-namespace>, FILLED_BY_VALIDATOR in its
name, namespace or resources), and a file that is a template, are "not evaluated": render them first.

exit status: 0 every evaluated object admitted, 1 any denied, 2 usage, file, YAML, refused object or stack config
error, or nothing evaluated at all (an object not evaluated changes nothing when others were)
"""


def register(subparsers: Any) -> None:
    """Add ``admission check`` to the ``aksgpu`` command line."""
    admission = subparsers.add_parser(
        "admission",
        help=COMMANDS["admission"],
        description="Judge Kubernetes objects against the stack's GPU admission policy, offline.",
    )
    commands = admission.add_subparsers(dest="admission_command", metavar="COMMAND", required=True)
    check = commands.add_parser(
        "check",
        help="judge Pod / workload YAML against the stack's admission policy, offline",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_stack_arguments(check)
    check.add_argument("--json", action="store_true", help="print a JSON list of decisions on stdout, nothing else")
    check.add_argument(
        "--engine",
        choices=("auto", "cel-cpp", "cel-python"),
        default="auto",
        help="the CEL engine: cel-cpp (fast, where its wheel exists) or cel-python; auto picks cel-cpp when installed",
    )
    check.add_argument(
        "files", metavar="FILE", nargs="+", type=Path, help="YAML file(s) with Kubernetes objects, or folders of them"
    )
    tables.add_wide_argument(check)
    check.set_defaults(handler=run_check)


MAX_FILE_BYTES = 64 * 2**20  # per file; a manifest of 5,000 pods is about 3 MiB
LIST_ALL_UP_TO = 500


def run_check(args: argparse.Namespace) -> int:
    """Print a decision per object and return the exit status."""
    tables.apply_wide(args)
    # Imported here: the policy, the CEL engines and the config models load only when objects are checked, never for
    # `aksgpu admission check --help`.
    from aks_gpu.admission.check import check, not_evaluated, refused
    from aks_gpu.admission.engine import CelError, engine_named
    from aks_gpu.admission.evaluate import PolicyError
    from aks_gpu.admission.pod_security import baseline_policy_manifests
    from aks_gpu.admission.policy import render_policy, system_namespaces, workload_namespaces
    from aks_gpu.admission.reader import InputError, UnrenderedFileError
    from aks_gpu.kube.platform_objects import platform
    from aks_gpu.kube.workload_manifests import namespace_facts

    loaded = load_stack(args)  # ConfigError: the command line turns it into exit status 2
    # On stderr (stdout stays pure JSON with --json), and only the admission section's: the rest does not change a
    # decision.
    report_warnings(loaded, "admission")
    # One file that cannot be read stops nothing else: its error is printed, every other file is decided, and the
    # exit status is 2. An object the API server refuses before admission is reported refused (exit 2), one not
    # rendered yet not evaluated; the others are decided.
    objects: list[SourcedObject] = []
    input_errors: list[str] = []
    unrendered_files: list[str] = []
    for path in args.files:
        if path.is_dir() and not expand_paths([path]):
            input_errors.append(f"{path}: a folder without any {', '.join(YAML_SUFFIXES)} file")
    for path in expand_paths(args.files):
        try:
            objects += read_objects(path)
        except UnrenderedFileError as error:
            unrendered_files.append(str(error))
        except InputError as error:
            input_errors.append(str(error))
    for message in input_errors:
        common.err.print(f"[bold red]error[/] {escape(message)}")
    for message in unrendered_files:
        common.err.print(f"[yellow]not evaluated[/] {escape(message)}")
    if not objects:
        return EXIT_USAGE
    model = loaded.validated.model
    manifests = render_policy(model)
    namespaces = {**workload_namespaces(model), **namespaces_in([item for item in objects if not item.refused])}
    objects = [refused_by_namespace(item, namespaces) for item in objects]
    decidable = [item for item in objects if not item.refused and not item.unrendered]
    facts = namespace_facts(model) if manifests else {}
    baseline = [m for ns in facts.values() if ns.pod_security == "baseline" for m in baseline_policy_manifests(ns.name)]
    try:
        engine = engine_named(args.engine)
        objs = [item.obj for item in decidable]
        decided = iter(check(objs, manifests, namespaces, facts, baseline, engine, system_namespaces(model), platform(model)))
    except (CelError, PolicyError, ImportError) as error:
        common.err.print(f"[bold red]error[/] the stack's admission policy cannot be evaluated: {escape(str(error))}")
        return EXIT_USAGE
    for item in objects:
        if item.refused:
            common.err.print(f"[bold red]error[/] {escape(item.label)}: {escape(item.refused)}")
    decisions = [
        refused(item.obj, item.refusal_line)
        if item.refused
        else not_evaluated(item.obj, item.unrendered)
        if item.unrendered
        else next(decided)
        for item in objects
    ]
    if args.json:
        print(json.dumps([decision.to_json() for decision in decisions], indent=2))
    else:
        actions = manifests[1]["spec"]["validationActions"] if manifests else []
        print_report(loaded.stack, actions, objects, decisions)
    return exit_status(decisions, bool(input_errors))


def exit_status(decisions: list[Decision], input_errors: bool) -> int:
    """2 for a file that cannot be read, an object the API server refuses before admission, or nothing evaluated at
    all (every object a template still to render); else 1 when any evaluated object is denied, 0 when none is. An
    object not evaluated changes nothing when others were."""
    from aks_gpu.admission.evaluate import REFUSED

    evaluated = [decision for decision in decisions if decision.evaluated]
    if input_errors or not evaluated or any(decision.decision == REFUSED for decision in decisions):
        return EXIT_USAGE
    return EXIT_OK if all(decision.allowed for decision in evaluated) else EXIT_FAILED


YAML_SUFFIXES = (".yaml", ".yml", ".json")


def expand_paths(paths: list[Path]) -> list[Path]:
    """Files as given; a folder: its YAML and JSON files, recursively, in name order."""
    expanded: list[Path] = []
    for path in paths:
        if path.is_dir():
            expanded += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in YAML_SUFFIXES)
        else:
            expanded.append(path)
    return expanded


def read_objects(path: Path) -> list[SourcedObject]:
    """Every Kubernetes object in a YAML file: each document, and each item of a ``kind: List``; InputError names
    the file (and the object) when the file cannot be read or holds something the API server would refuse."""
    from aks_gpu.admission.reader import InputError, read_documents

    try:
        if not path.is_file():
            raise InputError(f"cannot read {path}: not a regular file" if path.exists() else f"cannot read {path}: no such file")
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB; split it")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); is it binary?"
        ) from None
    return read_documents(text, str(path))


def refused_by_namespace(item: SourcedObject, namespaces: Mapping[str, Mapping[str, Any]]) -> SourcedObject:
    """The object refused before admission for what its namespace lacks (a DRA claim asking for admin access where
    the namespace does not allow it); as it is otherwise."""
    from dataclasses import replace

    from aks_gpu.admission.dra import admin_access_refusal
    from aks_gpu.admission.evaluate import DEFAULT_NAMESPACE
    from aks_gpu.admission.reader import REFUSED_BEFORE_ADMISSION

    if item.refused or item.unrendered:
        return item
    written = (item.obj.get("metadata") or {}).get("namespace")
    namespace = namespaces.get(written if isinstance(written, str) and written else DEFAULT_NAMESPACE) or {}
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    line = admin_access_refusal(item.obj, labels if isinstance(labels, Mapping) else {})
    return replace(item, refused=REFUSED_BEFORE_ADMISSION + line) if line is not None else item


def namespaces_in(objects: list[SourcedObject]) -> dict[str, dict[str, Any]]:
    """Namespace objects given alongside the workloads, by name: their labels decide the namespace rule."""
    found: dict[str, dict[str, Any]] = {}
    for item in objects:
        name = (item.obj.get("metadata") or {}).get("name")
        if item.obj.get("kind") == "Namespace" and isinstance(name, str):
            found[name] = item.obj
    return found


def print_report(stack: str, actions: list[str], objects: list[SourcedObject], decisions: list[Decision]) -> None:
    from rich.text import Text

    from aks_gpu.admission.policy import (
        DEVICE_ENV_POLICY_NAME,
        DRA_POLICY_NAME,
        PDB_POLICY_NAME,
        POLICY_NAME,
        SERVICE_POLICY_NAME,
    )

    # Denied: the object, or what it runs (admitted by the server, its Pods refused or never scheduled: its label).
    denied = sum(d.evaluated and not d.allowed for d in decisions)
    stored = sum(d.decision == "admitted" and not d.allowed for d in decisions)
    refused = sum(d.decision == "refused" for d in decisions)
    skipped = sum(d.decision == "not evaluated" for d in decisions)
    admitted = len(decisions) - denied - refused - skipped
    if actions:
        policies = ", ".join((POLICY_NAME, DEVICE_ENV_POLICY_NAME, DRA_POLICY_NAME, SERVICE_POLICY_NAME, PDB_POLICY_NAME))
        header = f"stack [bold]{escape(stack)}[/]: validationActions {escape(str(actions))}, policies {policies}"
    else:
        header = f"stack [bold]{escape(stack)}[/]: admission is disabled (admission.enabled: false); nothing is checked"
    common.out.print(header)
    # A table of thousands of rows helps nobody and takes seconds to lay out: past LIST_ALL_UP_TO objects the
    # denied ones (and the admitted ones with a warning) are listed a few lines each, the others counted (--json has
    # every decision).
    list_admitted = len(decisions) <= LIST_ALL_UP_TO
    if not list_admitted:
        print_denied_list(objects, decisions)
    if list_admitted and print_decisions(objects, decisions):
        common.out.print(f"[dim]{tables.list_note(json=True)}[/]")
    summary = f"{admitted} admitted, {denied} denied"
    if stored:
        summary += f" ({stored} of them admitted by the server, but their Pods would not run)"
    if refused:
        summary += f", {refused} refused before admission"
    if skipped:
        summary += f", {skipped} not evaluated"
    if not list_admitted:
        summary += f" (more than {LIST_ALL_UP_TO} objects: only the denied ones are listed; --json gives every decision)"
    if denied and actions and "Deny" not in actions:
        summary += (
            f" - with validationActions {actions} the cluster would admit the denied ones"
            " and only warn or audit; they are reported as denied so they get fixed"
        )
    common.out.print(Text(summary))


# The messages column wraps between words, never narrower than this (nor than its longest word): a denial is a
# sentence or two of the API server's, and a narrower column reads a word a line.
MESSAGES_MIN_WIDTH = 40
_STYLES = {"admitted": "green", "denied": "bold red", "refused": "bold red", "not evaluated": "yellow"}


def print_decisions(objects: list[SourcedObject], decisions: list[Decision]) -> bool:
    """A row per object (object, namespace, decision, messages, source) where the table fits the terminal with every
    name, decision and source whole beside a messages column MESSAGES_MIN_WIDTH wide; else a list, one entry an
    object: its decision and name, then its namespace and source, then each message and warning on lines of its own.
    Returns whether it printed the list. Names and messages are shown as written: escaped, never read as markup."""
    columns = ("object", "namespace", "decision", "messages", "source")
    rows: list[tuple[str, ...]] = []
    listed_rows: list[tuple[str, ...]] = []
    for item, decision in zip(objects, decisions, strict=True):
        style = _STYLES[decision.decision] if decision.allowed else "bold red"
        verdict = f"[{style}]{escape(decision.label or decision.decision)}[/]"
        if decision.messages:
            lines = [escape(line) for line in denial_text(decision).splitlines()]
        elif decision.note:
            lines = [escape(decision.note) if decision.decision == "not evaluated" else f"[dim]{escape(decision.note)}[/]"]
        else:
            lines = []
        lines += [f"[yellow]warning: {escape(warning)}[/]" for warning in decision.warnings]
        name = escape(f"{decision.kind}/{decision.name}")
        namespace = escape(decision.namespace or "-")
        source = escape(item.source)
        rows.append((name, namespace, verdict, "\n".join(lines), source))
        listed_rows.append((verdict, name, namespace, source, *lines))
    # In the list each message is a line of its own (a field without a label), as many as the most an object has.
    most = max((len(row) for row in listed_rows), default=4) - 4
    messages = tuple(f"message {number}" for number in range(1, most + 1))
    listed = (("decision", "object", "namespace", "source", *messages), listed_rows)
    return tables.print_table(
        common.out,
        "admission check (as the API server would decide a CREATE)",
        columns,
        rows,
        keep=("object", "namespace", "decision", "source"),
        flexible={"messages": MESSAGES_MIN_WIDTH},
        lead=2,
        bare=messages,
        listed=listed,
    )


def denial_text(decision: Decision) -> str:
    """The API server's answer verbatim (its first failing rule), then the other failing rules."""
    others = [f"- also: {message}" for message in decision.messages[1:]]
    return "\n".join([decision.message or decision.messages[0], *others])


def print_denied_list(objects: list[SourcedObject], decisions: list[Decision]) -> None:
    """The denied objects, and the admitted ones with a warning, one line each and a line per message and warning
    (plain text: nothing in them is markup)."""
    from rich.text import Text

    lines = []
    for item, decision in zip(objects, decisions, strict=True):
        if decision.allowed and not decision.warnings:
            continue
        verdict = decision.label or decision.decision
        lines.append(f"{verdict} {decision.kind}/{decision.name} in {decision.namespace or '-'} ({item.source})")
        if decision.messages:
            lines += [f"  {line}" for line in denial_text(decision).splitlines()]
        elif not decision.allowed:
            lines.append(f"  {decision.note}")
        lines += [f"  warning: {warning}" for warning in decision.warnings]
    common.out.print(Text("\n".join(lines)), soft_wrap=True)
