"""``aksgpu audit --html FILE``: the report as one self-contained page a team can attach to a ticket, or hand to
someone who has neither the cluster nor this repository. Pure: text out (the price tables aside, read once).

It opens with what such a reader needs first: when it was made and by which aksgpu, Microsoft's article as a link, the
verdict of each practice, what the idle GPUs cost a month, and the top actions, each one a thing to do. Nothing is
loaded from anywhere: no script at all, no font or image from the network (the system's sans-serif, CSS
bars for the chart), and a Content-Security-Policy that forbids both, so even a page altered later cannot fetch.
Every text that comes from the cluster (node, namespace and pod names, messages quoting labels) is HTML-escaped
where it is written (``_e``), attribute values included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from html import escape
from typing import Any

from aks_gpu.audit.prices import Prices, PriceTable, load_prices
from aks_gpu.audit.registry import (
    ARTICLE_URL,
    CHECK_BY_ID,
    CHECKS,
    KUEUE_URL,
    NPD_URL,
    PRACTICES,
    UPGRADE_URL,
    Practice,
    checks_of,
    sentence,
)
from aks_gpu.audit.report import (
    AuditFinding,
    AuditReport,
    Gap,
    IdleNode,
    PoolSummary,
    practice_verdicts,
    practices_of,
)
from aks_gpu.cluster.inventory import whole

_STYLE = """
:root { color-scheme: light; --fail: #b42318; --warn: #b54708; --ok: #067647; --muted: #667085; --line: #eaecf0;
        --alloc: #d0d5dd; --req: #2e90fa; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto; max-width: 72rem;
       padding: 0 1rem; color: #101828; line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid var(--line); padding-bottom: .3rem; }
h3 { font-size: 1rem; margin: 1rem 0 .3rem; }
.muted { color: var(--muted); }
.counts span { display: inline-block; margin-right: 1rem; font-weight: 600; }
.fail { color: var(--fail); } .warn { color: var(--warn); } .ok { color: var(--ok); }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; font-size: .9rem; }
th, td { text-align: left; vertical-align: top; padding: .35rem .5rem; border-bottom: 1px solid var(--line); }
th { background: #f9fafb; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.message { overflow-wrap: anywhere; }
td.badge, td code { white-space: nowrap; }
/* A command inside a sentence wraps with it; only ids and names stay on one line. */
td.message code, td.remedy code, .action code, .todo code, .gaps code { white-space: normal; overflow-wrap: anywhere; }
.badge { font-weight: 700; text-transform: uppercase; font-size: .75rem; }
.chart { margin: .5rem 0 1rem; }
.chart .row { display: grid; grid-template-columns: 10rem 1fr 9rem; gap: .75rem; align-items: center; margin: .35rem 0; }
.chart .name { overflow-wrap: anywhere; font-weight: 600; }
.chart .track { position: relative; height: 1.4rem; border: 1px solid var(--line); border-radius: 3px; }
.chart .alloc, .chart .req { position: absolute; left: 0; border-radius: 2px; }
.chart .alloc { top: 0; bottom: 0; background: var(--alloc); }
.chart .req { top: .3rem; bottom: .3rem; background: var(--req); }
.legend span { display: inline-block; width: .9rem; height: .9rem; vertical-align: middle; margin: 0 .3rem 0 1rem; }
#top-actions ol { padding-left: 1.4rem; } #top-actions li { margin: .35rem 0; }
.todo { background: #f9fafb; border-left: 3px solid var(--req); padding: .4rem .7rem; margin: .3rem 0 .6rem; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .85em; }
/* A name or address longer than the line breaks rather than run off the page. */
body { overflow-wrap: break-word; }
/* A phone, or a tablet upright: each table row is a card, each value on a line of its own after its column's name
   (data-label), nothing beside it to push it off screen; the chart's bar goes under its pool's name. */
@media (max-width: 60rem) {
  body { margin: 1rem auto; }
  table, tbody, tr, td { display: block; width: 100%; }
  thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  tr { border-bottom: 1px solid var(--line); padding: .4rem 0; }
  td { border: 0; padding: .1rem 0; overflow-wrap: anywhere; }
  td:empty { display: none; }
  td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); font-weight: 600; font-size: .85rem;
                           text-transform: none; }
  td.num { text-align: left; }
  td.badge, td code { white-space: normal; }
  .chart .row { grid-template-columns: 1fr auto; gap: .2rem .75rem; }
  .chart .track { grid-row: 2; grid-column: 1 / -1; }
}
"""


def _e(text: object) -> str:
    """Escape for HTML text and double-quoted attribute values alike (``&``, ``<``, ``>``, ``"``, ``'``)."""
    return escape(str(text), quote=True)


_CODE_SPAN = re.compile(r"`([^`]+)`")


def _prose(text: str) -> str:
    """Escaped text whose backquoted commands (`az aks nodepool ...`) read as code, as they are meant to be run."""
    return _CODE_SPAN.sub(r"<code>\1</code>", _e(text))


def _n(value: Fraction | int) -> str:
    return _e(whole(value) if isinstance(value, Fraction) else value)


def _link(url: str, text: str) -> str:
    return f'<a href="{_e(url)}">{_e(text)}</a>'


def _thead(columns: Sequence[str]) -> str:
    return "<thead><tr>" + "".join(f"<th>{_e(column)}</th>" for column in columns) + "</tr></thead>"


# A table cell: its HTML, or its class and its HTML.
_Cell = str | tuple[str, str]


def _cells(columns: Sequence[str], cells: Sequence[_Cell]) -> str:
    """A row's cells, in ``columns``' order, each labelled with its column (``data-label``): on a narrow screen a
    table's rows are laid out as cards, each value under its label (_STYLE)."""
    made = []
    for column, cell in zip(columns, cells, strict=True):
        classes, html = cell if isinstance(cell, tuple) else ("", cell)
        attribute = f' class="{classes}"' if classes else ""
        made.append(f'<td{attribute} data-label="{_e(column)}">{html}</td>')
    return "".join(made)


def render_html(
    report: AuditReport,
    *,
    made_at: datetime,
    version: str,
    source: str | None = None,
    advice: Mapping[str, Any] | None = None,
) -> str:
    """The whole page. It names the cluster by what the snapshot or the live read recorded (``report.cluster``: the
    kubeconfig context and API server), never by a local folder; ``source`` describes a live read where the report
    holds no cluster name. ``made_at`` and ``version``: when the page was made and by which aksgpu (the caller reads the
    clock: this stays pure). ``advice``: ``aksgpu advise``'s document (``advise.report.advice_document``), shown after
    the idle cost when the audit was given the exporters' history (``--metrics DIR``).

    Its only links are the public pages the practices come from and anchors within the page: a reader who gets the
    file alone has nothing else to follow."""
    fail, warn = report.count("fail"), report.count("warn")
    verdict = (
        f'<span class="fail">{fail} failing</span>' if fail else '<span class="ok">nothing fails</span>'
    ) + f'<span class="warn">{warn} warning(s)</span><span>{report.gpu_nodes} GPU node(s)</span>'
    context, server = report.cluster.get("context"), report.cluster.get("server")
    name = context or server or source or "an unnamed cluster"
    where = [
        f"context <strong>{_e(context)}</strong>" if context else "",
        f"API server <code>{_e(server)}</code>" if server else "",
    ]
    if not context and not server:
        where = [_e(source) if source else "the snapshot does not name its cluster (meta.json has no cluster)"]
    stack = f" &middot; stack <strong>{_e(report.stack)}</strong>" if report.stack else ""
    collected = f" &middot; collected {_e(report.collected_at)}" if report.collected_at else " &middot; collection time unknown"
    made = made_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    costs = _idle_costs(report.idle)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        # No script, no network: styles inline only, images only as data: URLs (there are none). Links are no fetch.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>aksgpu audit: {_e(name)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        "<header>",
        f'<h1>AKS GPU audit: <span id="cluster">{_e(name)}</span></h1>',
        f'<p class="muted">{" &middot; ".join(part for part in where if part)}{stack}{collected}</p>',
        f'<p id="made">Made <time datetime="{_e(made_at.astimezone(UTC).isoformat())}">{_e(made)}</time> by aksgpu '
        f'<span id="version">{_e(version)}</span>, against Microsoft\'s '
        f"{_link(ARTICLE_URL, 'GPU best practices for AKS')}.</p>",
        f'<p class="counts" id="verdict">{verdict}</p>',
        f'<p id="idle-total">{_idle_headline(costs)}</p>',
        "</header>",
        _verdicts(report),
        _top_actions(report, costs),
        _pools(report.pools),
    ]
    grouped = practices_of(report.findings)
    gaps: dict[str, list[Gap]] = {practice.id: [] for practice in PRACTICES}
    for gap in report.not_checked:
        gaps[gap.practice].append(gap)
    for practice in PRACTICES:
        parts.append(_practice(practice, grouped[practice.id], gaps[practice.id]))
        if practice.id == CHECK_BY_ID["gpu-idle"].practice and report.idle:
            parts.append(_idle_cost(costs))
        if practice.id == CHECK_BY_ID["gpu-idle"].practice and advice is not None:
            parts.append(advice_section(advice))
    parts.append(_namespaces(report))
    parts.append(
        '<footer><p class="muted">Written by <code>aksgpu audit --html</code>. Finding ids, what each checks '
        "and what to do: <code>aksgpu audit --help</code>.</p></footer>"
    )
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


_VERDICT_CLASS = {"fail": "fail", "warn": "warn", "pass": "ok", "not checked": "muted"}
_VERDICT_COLUMNS = ("practice", "verdict", "findings", "of which", "source")


def _verdicts(report: AuditReport) -> str:
    """One row per practice: its verdict and its count of findings, linked to its section and to its public source."""
    rows = []
    for one in practice_verdicts(report):
        warnings = f"{one.findings - one.failing} warning(s)"
        counts = f"{one.failing} failing, {warnings}" if one.failing else (warnings if one.findings else "")
        note = " (in what was checked)" if one.gaps and one.verdict == "pass" else ""
        gaps = f'<span class="muted">{one.gaps} part(s) not checked</span>' if one.gaps else ""
        cells: list[_Cell] = [
            f'<a href="#practice-{_e(one.practice.id)}">{_e(one.practice.title)}</a>',
            (f"badge {_VERDICT_CLASS[one.verdict]}", f"{_e(one.verdict)}{note}"),
            ("num findings", str(one.findings)),
            f"{_e(counts)}{'; ' if counts and gaps else ''}{gaps}",
            _link(one.practice.source, _source_name(one.practice.source)),
        ]
        rows.append(
            f'<tr class="verdict" data-practice="{_e(one.practice.id)}" data-verdict="{_e(one.verdict)}">'
            f"{_cells(_VERDICT_COLUMNS, cells)}</tr>"
        )
    return (
        f'<section id="verdicts"><h2>Verdict per practice</h2><table>{_thead(_VERDICT_COLUMNS)}<tbody>'
        + "".join(rows)
        + "</tbody></table></section>"
    )


_SOURCE_NAMES = {
    ARTICLE_URL: "Microsoft's article",
    NPD_URL: "AKS Node Problem Detector",
    UPGRADE_URL: "AKS upgrade options",
    KUEUE_URL: "AKS Kueue",
}


def _source_name(url: str) -> str:
    return _SOURCE_NAMES.get(url, url)


# The top actions listed first: the checks with findings, failing ones first, then by how many findings each has.
MAX_TOP_ACTIONS = 5


def _top_actions(report: AuditReport, costs: _IdleCosts) -> str:
    by_check: dict[str, list[AuditFinding]] = {}
    for finding in report.findings:
        by_check.setdefault(CHECK_BY_ID[finding.id].id, []).append(finding)
    if not by_check:
        return '<section id="top-actions"><h2>Top actions</h2><p class="ok">Nothing to do in what was checked.</p></section>'
    order = {check.id: number for number, check in enumerate(CHECKS)}
    ranked = sorted(
        by_check.items(),
        # Failing first; then what costs money (idle nodes); then the most findings.
        key=lambda item: (
            not any(f.severity == "fail" for f in item[1]),
            item[0] != "gpu-idle",
            -len(item[1]),
            order[item[0]],
        ),
    )
    items = []
    for check_id, findings in ranked[:MAX_TOP_ACTIONS]:
        check = CHECK_BY_ID[check_id]
        severity = "fail" if any(f.severity == "fail" for f in findings) else "warn"
        label = check.id if not check.ids else "GPU health (" + ", ".join(sorted({f.id for f in findings})) + ")"
        nodes = sorted({f.node for f in findings if f.node})
        namespaces = sorted({f.namespace for f in findings if f.namespace and not f.node})
        if check.id == "gpu-pod-unfenced":
            # Its findings name a node each, but what is to be fixed is their namespaces.
            nodes, namespaces = [], sorted({f.namespace for f in findings if f.namespace})
        on = _listed(nodes, "node") if nodes else _listed(namespaces, "namespace")
        cost = f", {_idle_money(costs)}" if check.id == "gpu-idle" and costs.priced else ""
        # One remedy for all its findings is what to do; several (one per node, say) are summed up by the check's.
        remedies = sorted({f.remedy for f in findings})
        action = remedies[0] if len(remedies) == 1 else sentence(check.fix)
        items.append(
            f'<li data-id="{_e(check.id)}"><span class="badge {severity}">{severity}</span> '
            f'<span class="action">{_prose(action)}</span> <span class="muted">(<code>{_e(label)}</code>: '
            f'{len(findings)} finding(s){on}{cost})</span> <a href="#check-{_e(check.id)}">details</a></li>'
        )
    more = f'<p class="muted">+{len(ranked) - MAX_TOP_ACTIONS} more below.</p>' if len(ranked) > MAX_TOP_ACTIONS else ""
    return f'<section id="top-actions"><h2>Top actions</h2><ol>{"".join(items)}</ol>{more}</section>'


def _listed(names: Sequence[str], what: str) -> str:
    if not names:
        return ""
    shown = ", ".join(_e(name) for name in names[:3])
    extra = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f" on {what}{'s' if len(names) > 1 else ''} {shown}{extra}"


def _money(amount: float, currency: str) -> str:
    return f"{currency} {amount:,.0f}"


def _saving(amount: float, currency: str) -> str:
    """What a pool change does to the bill: a saving, or (a new pool needing more nodes than it frees) a cost."""
    return f"costs {_money(-amount, currency)} more a month" if amount < 0 else f"saves {_money(amount, currency)} a month"


@dataclass(frozen=True)
class _IdleCosts:
    """What the idle GPU nodes cost a month at the dated list prices: each node's price (None: not priced), the
    tables the prices come from, and the currency. The headline, the top action and the table all read this one."""

    nodes: tuple[tuple[IdleNode, float | None], ...]
    tables: tuple[PriceTable, ...]
    prices: Prices

    @property
    def priced(self) -> list[float]:
        return [amount for _, amount in self.nodes if amount is not None]

    @property
    def unpriced(self) -> int:
        return len(self.nodes) - len(self.priced)


def _idle_costs(idle: Sequence[IdleNode]) -> _IdleCosts:
    prices = load_prices()
    nodes, used = [], {}
    for node in idle:
        found = prices.monthly(node.region, node.vm_size)
        if found is not None:
            used[found[1].region] = found[1]
        nodes.append((node, found[0] if found is not None else None))
    return _IdleCosts(tuple(nodes), tuple(used.values()), prices)


def _idle_money(costs: _IdleCosts) -> str:
    unpriced = f", {costs.unpriced} more not priced" if costs.unpriced else ""
    return f"about {_money(sum(costs.priced), costs.prices.currency)} a month at list price{unpriced}"


def _idle_headline(costs: _IdleCosts) -> str:
    if not costs.nodes:
        zero = _money(0, costs.prices.currency)
        total = f'<span id="idle-cost-total">{_e(zero)} a month</span>'
        return f'<strong class="ok">Idle GPUs cost {total}</strong>: no GPU node is idle.'
    count = f"{len(costs.nodes)} idle GPU node(s)"
    if not costs.priced:
        return f'<strong class="warn">{count}</strong>, not priced (no price table has their region and VM size).'
    return (
        f'<strong class="warn">Idle GPUs cost <span id="idle-cost-total">{_e(_idle_money(costs))}</span></strong> '
        f'({count}; <a href="#idle-cost">per node</a>).'
    )


_IDLE_COLUMNS = ("node", "pool", "VM size", "region", "GPU resources", "a month")


def _idle_cost(costs: _IdleCosts) -> str:
    """What the idle GPU nodes cost a month at the dated list prices of the package's price tables, each price with
    its region, the date it was read and its source."""
    rows = []
    for node, amount in costs.nodes:
        if amount is None:
            why = "no VM size label" if not node.vm_size else ("no region label" if not node.region else "no price for it")
            cost = f'<span class="muted">not priced ({_e(why)})</span>'
        else:
            cost = _e(_money(amount, costs.prices.currency))
        cells: list[_Cell] = [
            _e(node.node),
            _e(node.pool),
            f"<code>{_e(node.vm_size or '?')}</code>",
            _e(node.region or "?"),
            ("num", _n(node.gpus)),
            ("num cost", cost),
        ]
        rows.append(f'<tr class="idle" data-node="{_e(node.node)}">{_cells(_IDLE_COLUMNS, cells)}</tr>')
    notes = "".join(
        f'<p class="muted price-source">Prices: {_e(table.region)} pay-as-you-go Linux list prices '
        f"({_e(costs.prices.currency)}, {costs.prices.hours_per_month} hours a month), read {_e(table.read.isoformat())}; "
        f"source: {_e(table.source)}. Reservations and savings plans cost less.</p>"
        for table in costs.tables
    )
    return (
        f'<section id="idle-cost"><h3>What the idle GPU nodes cost</h3><table>{_thead(_IDLE_COLUMNS)}<tbody>'
        + "".join(rows)
        + "</tbody></table>"
        + notes
        + "</section>"
    )


_POOL_COLUMNS = (
    "pool",
    "vendor",
    "GPU nodes",
    "GPUs allocatable",
    "GPUs requested",
    "idle nodes",
    "node images",
    "GPU drivers",
)


def _pools(pools: Sequence[PoolSummary]) -> str:
    if not pools:
        return '<section id="pools"><h2>GPUs per pool</h2><p>No GPU node found.</p></section>'
    scale = max((max(pool.gpus_allocatable, pool.gpus_requested) for pool in pools), default=Fraction(0)) or Fraction(1)
    rows = []
    for pool in pools:
        allocatable = float(pool.gpus_allocatable / scale * 100)
        requested = float(pool.gpus_requested / scale * 100)
        rows.append(
            f'<div class="row" data-pool="{_e(pool.pool)}"><div class="name">{_e(pool.pool)}</div>'
            f'<div class="track"><div class="alloc" style="width:{allocatable:.1f}%"></div>'
            f'<div class="req" style="width:{requested:.1f}%"></div></div>'
            f"<div>{_n(pool.gpus_requested)} of {_n(pool.gpus_allocatable)} requested</div></div>"
        )
    table = [f"<table>{_thead(_POOL_COLUMNS)}<tbody>"]
    for pool in pools:
        images = (
            "<br>".join(f"{_e(image)} ({count})" for image, count in pool.node_images.items()) or '<span class="muted">-</span>'
        )
        drivers = (
            "<br>".join(f"{_e(version)} ({count})" for version, count in pool.driver_versions.items())
            or '<span class="muted">not read</span>'
        )
        expected = (
            f'<br><span class="muted">stack: {_e(pool.expected_resource)} x {_e(pool.expected_per_node)} per node</span>'
            if pool.expected_resource
            else ""
        )
        cells: list[_Cell] = [
            _e(pool.pool),
            _e(pool.vendor or "?"),
            ("num", str(pool.gpu_nodes)),
            ("num", f"{_n(pool.gpus_allocatable)}{expected}"),
            ("num", _n(pool.gpus_requested)),
            ("num", str(pool.idle_nodes)),
            images,
            ("drivers", drivers),
        ]
        table.append(f"<tr>{_cells(_POOL_COLUMNS, cells)}</tr>")
    table.append("</tbody></table>")
    legend = (
        '<p class="legend muted"><span style="background:var(--alloc)"></span>GPUs allocatable'
        '<span style="background:var(--req)"></span>GPUs requested by pods that have not finished</p>'
    )
    return (
        '<section id="pools"><h2>GPUs per pool</h2>'
        + legend
        + f'<div class="chart">{"".join(rows)}</div>'
        + "".join(table)
        + "</section>"
    )


_FINDING_COLUMNS = ("severity", "id", "node", "namespace", "pod", "found", "what to do")


def _practice(practice: Practice, findings: Sequence[AuditFinding], gaps: Sequence[Gap]) -> str:
    fail = sum(1 for f in findings if f.severity == "fail")
    state = (
        f'<span class="fail">{fail} failing</span>, {len(findings) - fail} warning(s)'
        if fail
        else (f'<span class="warn">{len(findings)} warning(s)</span>' if findings else '<span class="ok">no finding</span>')
    )
    if gaps and not findings:
        state += " in what was checked"
    parts = [
        f'<section class="practice" id="practice-{_e(practice.id)}">',
        f"<h2>{_e(practice.title)}</h2>",
        f'<p class="muted">{_e(practice.article)} ({_link(practice.source, _source_name(practice.source))})</p>',
        f'<p class="state">{state}{" (parts not checked: see below)" if gaps else ""}</p>',
    ]
    for check in checks_of(practice.id):
        mine = [finding for finding in findings if finding.id in check.finding_ids]
        if not mine:
            continue
        label = check.id if not check.ids else "aksgpu smi health findings"
        parts.append(f'<h3 id="check-{_e(check.id)}"><code>{_e(label)}</code> ({len(mine)})</h3>')
        parts.append(f'<div class="todo"><strong>What to do:</strong> {_prose(sentence(check.fix))}</div>')
        parts.append(f"<table>{_thead(_FINDING_COLUMNS)}<tbody>")
        for finding in mine:
            cells: list[_Cell] = [
                (f"badge {_e(finding.severity)}", _e(finding.severity)),
                f"<code>{_e(finding.id)}</code>",
                _e(finding.node or ""),
                _e(finding.namespace or ""),
                _e(finding.pod or ""),
                ("message", _prose(finding.found)),
                ("remedy", _prose(finding.remedy)),
            ]
            parts.append(f'<tr class="finding" data-id="{_e(finding.id)}">{_cells(_FINDING_COLUMNS, cells)}</tr>')
        parts.append("</tbody></table>")
    if gaps:
        parts.append('<h3>Not checked</h3><ul class="gaps">')
        for gap in gaps:
            what = ", ".join(gap.ids) if gap.ids else "summary"
            count = f" ({gap.count} object(s))" if gap.count is not None else ""
            parts.append(f"<li><code>{_e(what)}</code>{count}: {_prose(gap.reason)}</li>")
        parts.append("</ul>")
    parts.append("</section>")
    return "\n".join(parts)


_NAMESPACE_COLUMNS = ("namespace", "GPU pods", "GPUs requested", "GPU quota", "deny-all policy", "labels")


def _namespaces(report: AuditReport) -> str:
    if not report.namespaces:
        return '<section id="namespaces"><h2>Namespaces with GPU pods</h2><p>No pod requests a GPU.</p></section>'
    rows = [f'<section id="namespaces"><h2>Namespaces with GPU pods</h2><table>{_thead(_NAMESPACE_COLUMNS)}<tbody>']
    for namespace in report.namespaces:
        quota = (
            '<span class="muted">not read</span>'
            if namespace.quota is None
            else (", ".join(f"{_e(k)}: {_e(v)}" for k, v in namespace.quota.items()) or '<span class="warn">none</span>')
        )
        deny = (
            '<span class="muted">not read</span>'
            if namespace.deny_all is None
            else ('<span class="ok">yes</span>' if namespace.deny_all else '<span class="warn">no</span>')
        )
        labels = (
            '<span class="muted">not read</span>'
            if namespace.labels is None
            else ("<br>".join(f"{_e(k)}={_e(v)}" for k, v in namespace.labels.items()) or '<span class="muted">-</span>')
        )
        cells: list[_Cell] = [
            _e(namespace.namespace),
            ("num", str(namespace.gpu_pods)),
            ("num", _n(namespace.gpus_requested)),
            ("quota", quota),
            ("deny-all", deny),
            labels,
        ]
        rows.append(f'<tr data-namespace="{_e(namespace.namespace)}">{_cells(_NAMESPACE_COLUMNS, cells)}</tr>')
    rows.append("</tbody></table></section>")
    return "".join(rows)


_ADVICE_COLUMNS = ("namespace", "owner", "pod", "GPU", "GPUs", "peak MiB", "p95 MiB", "p95 active", "advice", "a month", "why")


def advice_section(document: Mapping[str, Any]) -> str:
    """``aksgpu advise``'s recommendations as a section: one row per workload pod, the pool changes, the idle capacity,
    what was not evaluated and why a saving is not priced. Every value is escaped (pod and namespace names come from
    the cluster)."""
    currency = str(document.get("currency", ""))
    rows = []
    for row in document["recommendations"]:
        advice = row["recommend"] + (f" {row['profile']}" if row["profile"] else "")
        saving = (
            ""
            if row["recommend"] == "keep"
            else (_money(row["monthlySaving"], currency) if row["monthlySaving"] is not None else "not priced")
        )
        peak, p95, active = f"{row['peakMemoryMiB']:,}", f"{row['p95MemoryMiB']:,}", f"{row['p95Activity'] * 100:.1f}%"
        cells: list[_Cell] = [
            _e(row["namespace"]),
            _e(row["owner"]),
            _e(row["pod"]),
            _e(row["gpuModel"]),
            ("num", _e(row["gpus"])),
            ("num", _e(peak)),
            ("num", _e(p95)),
            ("num", _e(active)),
            ("badge", _e(advice)),
            ("num", _e(saving)),
            ("message", _e(row["why"])),
        ]
        rows.append(f'<tr class="advice" data-recommend="{_e(row["recommend"])}">{_cells(_ADVICE_COLUMNS, cells)}</tr>')
    changes = "".join(
        f"<li>{_e(change['change'])}"
        + (f" ({_e(_saving(change['monthlySaving'], currency))})" if change["monthlySaving"] is not None else "")
        + "</li>"
        for change in document.get("poolChanges", [])
    )
    idle = "".join(
        f"<li>{_e(one['change'])}"
        + (f" (saves {_e(_money(one['monthlySaving'], currency))} a month)" if one["monthlySaving"] is not None else "")
        + "</li>"
        for one in document.get("idleCapacity", [])
    )
    skipped = "".join(f"<li>{_e(one['what'])}: {_e(one['why'])}</li>" for one in document.get("notEvaluated", []))
    unpriced = "".join(f"<li>{_e(why)}</li>" for why in document.get("unpriced", []))
    window = document["window"]
    return (
        '<section id="advice"><h3>What each workload should run on</h3>'
        f'<p class="muted">From the GPU exporters\' history, {_e(window["start"])} to {_e(window["end"])} '
        f"({_e(window['days'])} days, {_e(window['series'])} series): <code>aksgpu advise</code>.</p>"
        f"<table>{_thead(_ADVICE_COLUMNS)}<tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + (f'<h3>Pool changes</h3><ul id="pool-changes">{changes}</ul>' if changes else "")
        + (f'<h3>Idle capacity</h3><ul id="idle-capacity">{idle}</ul>' if idle else "")
        + (f'<h3>Not evaluated</h3><ul id="not-evaluated">{skipped}</ul>' if skipped else "")
        + (f'<h3>Savings not priced</h3><ul id="unpriced">{unpriced}</ul>' if unpriced else "")
        + "</section>"
    )


def render_advice_html(document: Mapping[str, Any]) -> str:
    """``aksgpu advise --html FILE``: the advice alone, one self-contained page (no script, no network)."""
    # The same Content-Security-Policy as the audit's page: no script, no network.
    policy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en">',
                "<head>",
                '<meta charset="utf-8">',
                f'<meta http-equiv="Content-Security-Policy" content="{policy}">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                "<title>aksgpu advise</title>",
                f"<style>{_STYLE}</style>",
                "</head>",
                "<body>",
                "<h1>AKS GPU right-sizing</h1>",
                advice_section(document),
                '<footer><p class="muted">Written by <code>aksgpu advise --html</code>.</p></footer>',
                "</body>",
                "</html>",
            ]
        )
        + "\n"
    )
