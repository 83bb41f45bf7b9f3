"""``aksgpu advise``: from the GPU exporters' history, what each workload should run on: a MIG instance, a time-sliced
share, its GPU released, or what it has; the pool change that carries it and what it saves a month."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from aks_gpu.cli import COMMANDS, tables
from aks_gpu.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, err, load_stack, out, safe, write_text_file

_DESCRIPTION = """\
From the GPU exporters' history (DCGM exporter, ROCm device metrics exporter), what each workload (pod, grouped by its
owner) should run on: `mig` (the smallest MIG instance of its GPU model that holds its peak memory and p95 activity,
a service's bursts, with 20% headroom; a workload on a MIG instance resized both ways), `time-slicing` (several such
workloads on one GPU; never a service), `release` (idle through the window) or `keep` (a distributed job stays whole);
the pool change that carries it, and what it saves a month: the nodes it frees at the VM's list price (or your own
rates, --prices FILE in the format of components/aks_gpu/data/gpu_prices.yaml); the VM size and region from the stack
(--stack) or from kube_node_labels.

  aksgpu advise --metrics metrics/ --stack prod          a folder of query_range responses, <metric>.json each
  aksgpu advise --prometheus https://prom.example --json the same queries, live (read-only)

--metrics DIR reads DCGM_FI_DEV_FB_USED.json and DCGM_FI_PROF_GR_ENGINE_ACTIVE.json (or DCGM_FI_PROF_SM_ACTIVE,
DCGM_FI_DEV_GPU_UTIL), gpu_used_vram.json and gpu_gfx_activity.json for AMD, and kube_pod_owner.json and
kube_node_labels.json where present:
  curl -G https://prom.example/api/v1/query_range --data-urlencode 'query=max_over_time(DCGM_FI_DEV_FB_USED[5m])' \\
    --data-urlencode start=$(date -d -7days +%s) --data-urlencode end=$(date +%s) -d step=300 > metrics/DCGM_FI_DEV_FB_USED.json
(memory as each step's 5-minute peak, not the one sample on the step; the activity metrics as they are)
--prometheus URL: https only (or http to 127.0.0.1); the token from $AKSGPU_PROMETHEUS_TOKEN, else for an Azure
Monitor workspace (*.prometheus.monitor.azure.com) from `az account get-access-token`.

exit status: 0 nothing would change, 1 the advice frees GPUs (a pool change carries its workloads on fewer GPUs, or
idle nodes can go), 2 usage or unreadable input (a series without the
labels it needs, an empty window, a GPU model the tables do not know)
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "advise",
        help=COMMANDS["advise"],
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--metrics", type=Path, metavar="DIR", help="a folder of query_range responses, one <metric>.json each")
    source.add_argument(
        "--prometheus", metavar="URL", help="query this Prometheus (or Azure Monitor workspace query endpoint) live"
    )
    parser.add_argument("--stack", metavar="NAME", help="price by this stack's pools (VM size, region) and name them")
    parser.add_argument(
        "--prices",
        type=Path,
        metavar="FILE",
        help="your own hourly rates (reservations, discounts), in the format of the shipped price table",
    )
    parser.add_argument("--config-file", type=Path, metavar="FILE", help="with --stack: read this stack file instead")
    parser.add_argument("--project-dir", type=Path, metavar="DIR", help="with --stack: the folder with Pulumi.yaml")
    parser.add_argument("--since", default="7d", metavar="DURATION", help="with --prometheus: the window, up to now (default 7d)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="with --prometheus: per request (default 60)"
    )
    parser.add_argument("--json", action="store_true", help='print {"recommendations": [...], "window", "notEvaluated"} only')
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write the advice as one self-contained HTML page")
    tables.add_wide_argument(parser)
    parser.set_defaults(handler=run)


# A team's price file is a few hundred lines; a bound far above that.
_MAX_PRICES_BYTES = 4 << 20


class AdviceUsageError(Exception):
    """Input or usage the advice cannot go on with; the message is safe to print."""


def advice_from(args: argparse.Namespace) -> tuple[Any, str]:
    """The advice (``Advice``) and its currency, from --metrics or --prometheus; ``AdviceUsageError`` saying why not."""
    from dataclasses import replace

    from aks_gpu.advise.metrics import NODE_LABELS_METRIC
    from aks_gpu.advise.queues import Team, queue_advice
    from aks_gpu.advise.recommend import SERVING_TYPE, NodeFacts, Pricing, advise, node_labels
    from aks_gpu.advise.series import AdviceInputError
    from aks_gpu.advise.usage import SUMMARY_HISTORY, read_usage
    from aks_gpu.catalog import load_catalog

    catalog = load_catalog()
    prices = _prices(getattr(args, "prices", None))
    model = load_stack(args).validated.model if getattr(args, "stack", None) else None
    # A stack with queueing: Kueue's ClusterQueue gauges are read too (advise/queues.py).
    queued = model is not None and model.config.queueing is not None
    queue_series: dict[str, Any] = {}
    try:
        if getattr(args, "prometheus", None):
            series, daily, queue_series = _live(args, queued)
        else:
            from aks_gpu.advise.sources import read_metrics_dir, read_queue_metrics_dir

            series, daily = read_metrics_dir(args.metrics), False
            queue_series = read_queue_metrics_dir(args.metrics) if queued else {}
        if daily:
            from aks_gpu.advise.sources import summarised

            usage = read_usage(series, catalog, summarised(), SUMMARY_HISTORY)
        else:
            usage = read_usage(series, catalog)
    except AdviceInputError as error:
        raise AdviceUsageError(str(error)) from None
    pools: dict[str, NodeFacts] = {}
    serving: frozenset[str] = frozenset()
    teams: list[Team] = []
    if model is not None:
        from aks_gpu.config.models import StackConfig

        config = model.config
        region = (config.cluster.location or config.location) if isinstance(config, StackConfig) else None
        pools = {
            pool.config.name: NodeFacts(
                pool.config.name, pool.config.vm_size, region, pool.config.min_count if pool.config.autoscaling else None
            )
            for pool in model.pools
        }
        serving = frozenset(workload.name for workload in config.workloads if workload.type == SERVING_TYPE)
        teams = [Team(w.name, w.type, w.gpu_quota, w.lending_limit) for w in config.workloads]
    nodes = node_labels(series.get(NODE_LABELS_METRIC) or [])
    pricing = Pricing(prices=prices, catalog=catalog, nodes=nodes, pools=pools, stack=getattr(args, "stack", None))
    advice = advise(usage, pricing, serving)
    return replace(advice, queues=queue_advice(queue_series, teams)), prices.currency


def _prices(path: Path | None) -> Any:
    """The shipped price table, or the team's own (``--prices FILE``, the same format); ``AdviceUsageError`` where the
    file cannot be read or is not in that format."""
    from aks_gpu.audit.prices import PriceFileError, load_prices, parse_prices

    if path is None:
        return load_prices()
    import yaml

    from aks_gpu.config import safe_yaml
    from aks_gpu.input_files import InputFileError, read_bounded

    try:
        text = read_bounded(path, _MAX_PRICES_BYTES).decode("utf-8")
        return parse_prices(safe_yaml.load(text), f"--prices {path}")
    except InputFileError as error:
        raise AdviceUsageError(f"--prices {path}: {error}") from None
    except UnicodeDecodeError:
        raise AdviceUsageError(f"--prices {path}: not UTF-8 text") from None
    except yaml.YAMLError as error:
        raise AdviceUsageError(f"--prices {path}: {safe_yaml.describe_yaml_error(error)}") from None
    except PriceFileError as error:
        raise AdviceUsageError(str(error)) from None
    except ValueError as error:  # what the safe YAML reader refuses (an alias loop, a tag, nesting too deep)
        raise AdviceUsageError(f"--prices {path}: {error}") from None


def _live(args: argparse.Namespace, queued: bool) -> tuple[Any, bool, Any]:
    """The series over --since, whether they are the recording rules' daily summaries (read first: a week is then
    7 samples a series) rather than the raw series (read where the Prometheus does not record the summaries), and
    (``queued``) Kueue's ClusterQueue gauges."""
    from aks_gpu.advise.metrics import KUEUE_METRICS
    from aks_gpu.advise.series import AdviceInputError
    from aks_gpu.advise.sources import (
        PrometheusClient,
        PrometheusError,
        parse_endpoint,
        read_live,
        read_live_summaries,
        since_seconds,
        token_for,
    )

    try:
        since = since_seconds(args.since)
    except ValueError as error:
        raise AdviceUsageError(str(error)) from None
    client: PrometheusClient | None = None
    try:
        endpoint = parse_endpoint(args.prometheus)
        client = PrometheusClient(endpoint, token_for(endpoint), timeout=args.timeout)
        queues = read_live(client, since, metrics=KUEUE_METRICS) if queued else {}
        if since >= 86_400:
            summaries = read_live_summaries(client, since)
            if any(one.values for found in summaries.values() for one in found):
                err.print("read the daily summaries the aks-gpu-advice recording rules keep (`aksgpu rules`)")
                return summaries, True, queues
        return read_live(client, since), False, queues
    except PrometheusError as error:
        raise AdviceUsageError(str(error)) from None
    except AdviceInputError as error:
        # A server's own error text can quote what it was sent.
        raise AdviceInputError(client.redact(str(error)) if client else str(error)) from None


def run(args: argparse.Namespace) -> int:
    from aks_gpu.advise.report import advice_document

    tables.apply_wide(args)
    try:
        if args.html is not None and args.html.is_dir():
            raise AdviceUsageError(f"--html {args.html}: is a folder; give the file to write")
        advice, currency = advice_from(args)
        document = advice_document(advice, currency)
        if args.html is not None:
            from aks_gpu.audit.html import render_advice_html

            try:
                write_text_file(args.html, render_advice_html(document))
            except OSError as error:
                raise AdviceUsageError(f"cannot write {args.html}: {error.strerror or error}") from None
    except AdviceUsageError as error:
        err.print(f"[bold red]aksgpu advise[/]: {safe(str(error))}")
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        print_advice(document)
    if args.html is not None:
        (err if args.json else out).print(f"wrote {safe(str(args.html))}")
    return EXIT_FAILED if advice.frees_capacity else EXIT_OK


def _money(amount: float | None, currency: str) -> str:
    return "?" if amount is None else f"{currency} {amount:,.0f}"


ADVICE_COLUMNS = ("namespace", "owner", "pod", "GPU", "GPUs", "peak MiB", "p95 MiB", "p95 active", "advice", "a month", "why")
_NUMBERS = ("GPUs", "peak MiB", "p95 MiB", "p95 active", "a month")
# The narrowest the why column may be before the workloads are laid out as a list instead.
WHY_MIN_WIDTH = 30


def print_advice(document: dict[str, Any]) -> None:
    window = document["window"]
    currency = document["currency"]
    out.print(
        f"[bold]aksgpu advise[/]: {len(document['recommendations'])} workload pod(s) over {window['days']} day(s) "
        f"({safe(window['start'])} to {safe(window['end'])}, {window['series']} series)"
    )
    styles = {"mig": "green", "time-slicing": "green", "release": "yellow", "keep": "dim"}
    rows: list[tuple[str, ...]] = []
    entries: list[tuple[str, ...]] = []
    for row in document["recommendations"]:
        recommend = row["recommend"] + (f" {row['profile']}" if row["profile"] else "")
        advice = f"[{styles[row['recommend']]}]{safe(recommend)}[/]"
        peak, p95, active = f"{row['peakMemoryMiB']:,}", f"{row['p95MemoryMiB']:,}", f"{row['p95Activity'] * 100:.1f}%"
        saving = "" if row["recommend"] == "keep" else _money(row["monthlySaving"], currency)
        names = (safe(row["namespace"]), safe(row["owner"]), safe(row["pod"]), safe(row["gpuModel"]))
        rows.append((*names, str(row["gpus"]), peak, p95, active, advice, saving, safe(row["why"])))
        # the list: the advice and the pod first, as the audit's severity and id
        usage = f"{row['gpus']} x {names[3]}, peak {peak} MiB, p95 {p95} MiB, p95 active {active}"
        entries.append((advice, names[2], names[0], names[1], usage, saving, safe(row["why"])))
    listed = (("advice", "pod", "namespace", "owner", "GPUs", "saves a month", "why"), entries)
    keep = [column for column in ADVICE_COLUMNS if column != "why"]
    flexible = {"why": WHY_MIN_WIDTH}
    if tables.print_table(
        out, None, ADVICE_COLUMNS, rows, right=_NUMBERS, keep=keep, flexible=flexible, lead=2, bare=("why",), listed=listed
    ):
        out.print(f"[dim]{tables.list_note(json=True)}[/]")
    if document["poolChanges"]:
        out.print("[bold]pool changes[/]")
        for change in document["poolChanges"]:
            saving = change["monthlySaving"]
            bill = (
                f"costs {_money(-saving, currency)} more"
                if saving is not None and saving < 0
                else f"saves {_money(saving, currency)}"
            )
            out.print(f"  {safe(change['change'])} ({bill} a month)")
    if document["idleCapacity"]:
        out.print("[bold]idle capacity[/]")
        for idle in document["idleCapacity"]:
            saving = f" (saves {_money(idle['monthlySaving'], currency)} a month)" if idle["nodes"] else ""
            out.print(f"  {safe(idle['change'])}{saving}")
    if document["queueAdvice"]:
        out.print("[bold]queues[/]")
        for queue in document["queueAdvice"]:
            out.print(f"  {safe(queue['why'])}")
    for skipped in document["notEvaluated"]:
        out.print(f"[dim]not evaluated[/] {safe(skipped['what'])}: {safe(skipped['why'])}")
    for why in document["unpriced"]:
        out.print(f"[yellow]note[/] a saving is not known: {safe(why)}")
