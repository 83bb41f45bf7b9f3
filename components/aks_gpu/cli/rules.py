"""``aksgpu rules``: the stack's GPU health and waste alert rules as a Prometheus rule file, for a Prometheus of your
own (or as the PrometheusRule object a Prometheus Operator reads). The same rules GpuMonitoring deploys."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from aks_gpu.cli import COMMANDS
from aks_gpu.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_stack_arguments,
    err,
    load_stack,
    report_warnings,
    safe,
    write_text_file,
)
from aks_gpu.gpu.xid import critical_xid_codes
from aks_gpu.manifests import labelled
from aks_gpu.monitoring.rules import (
    POOL_LABEL_METRIC,
    advice_recording_groups,
    prometheus_rule_manifest,
    rule_file,
    rule_groups,
)
from aks_gpu.naming import POOL_LABEL

_DESCRIPTION = """\
Print the stack's GPU health and waste alert rules as a Prometheus rule file, for a Prometheus of your own (or,
with --format prometheusrule, as the PrometheusRule object a Prometheus Operator reads): the same rules the
stack's monitoring deploys. Each alert carries summary, description and runbook_url annotations. A last group,
aks-gpu-advice, records each pod's daily GPU memory and activity peaks (gpu_pod:<metric>:max_over_time_1d,
:quantile95_over_time_1d), so `aksgpu advise` over a week of history reads one sample a day per series.

  aksgpu rules --stack prod --out gpu-rules.yaml && promtool check rules gpu-rules.yaml

exit status: 0 written, 2 usage, config or output error
"""
FORMATS = ("rule-file", "prometheusrule")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rules",
        help=COMMANDS["rules"],
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_stack_arguments(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="rule-file",
        help="rule-file (default): `promtool check rules` / rule_files: input; prometheusrule: a monitoring.coreos.com/v1 object",
    )
    parser.add_argument("--out", type=Path, metavar="FILE", help="write to this file instead of standard output")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args)
    report_warnings(loaded)
    model = loaded.validated.model
    groups = rule_groups(model, critical_xid_codes())
    recording = advice_recording_groups(model)
    document = (
        rule_file(groups, recording)
        if args.format == "rule-file"
        else labelled(prometheus_rule_manifest(groups, model, recording))
    )
    text = yaml.safe_dump(document, sort_keys=False, width=1000, allow_unicode=True)
    if args.out is not None:
        try:
            write_text_file(args.out, text)
        except OSError as exc:
            err.print(f"[bold red]cannot write[/] {safe(args.out)}: {safe(exc.strerror or exc)}")
            return EXIT_USAGE
        alerts, records = sum(len(g.rules) for g in groups), sum(len(g.rules) for g in recording)
        err.print(f"wrote {alerts} alert rules and {records} recording rules to {safe(args.out)}")
    else:
        print(text, end="")
    if not model.pools:
        err.print("[yellow]note[/] the stack has no GPU pools: no rules")
    elif not model.config.monitoring.enabled:
        err.print("[yellow]note[/] aks-gpu:monitoring.enabled is false: the stack deploys no exporters; scrape your own")
    # The scrape contract the expressions rely on, for whoever runs the Prometheus.
    err.print(
        f"the rules expect: the GPU exporters scraped with honor_labels false and a `node` label from the pod's node; "
        f"kube-state-metrics with --metric-labels-allowlist=nodes=[{POOL_LABEL}] ({POOL_LABEL_METRIC})",
        markup=False,
    )
    return EXIT_OK
