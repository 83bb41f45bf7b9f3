"""``aksgpu admission check`` on objects large enough to meet the API server's CEL cost limits (issue #23).

The prod placement policy on the objects of ``tests/admission/cost_objects.py``'s ``LARGE`` set: 11 containers x
1,000 env vars, a GPU pod pinned to 12,000 and 55,000 hostnames of its pool, and GPU pods with 50,000, 55,000 and
75,000 nodeSelector keys (denied: a variable over the per-call limit; the decisions and costs the server gave are
the recording's, docs/benchmarks.md quotes the last run). Each is decided with cel-cpp and cel-python and held to
what the real environment decided and counted (tests/fixtures/kubernetes_cel/costs/policy-objects.json): the
decision, the server's message line and the cost. Target: every decision the server's; the time each takes is
reported (cel-python, which costs them, is slow on objects this size: seconds to a minute).
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from aks_gpu.admission.engine import ENGINE_NAMES, engine_named
from aks_gpu.admission.evaluate import build_request, compile_bindings, evaluate_request
from aks_gpu.admission.policy import render_policy, workload_namespaces
from bench.common import PROJECT_DIR, prod_model, timed
from tests.admission.cost_objects import LARGE

RECORDED = PROJECT_DIR / "tests" / "fixtures" / "kubernetes_cel" / "costs" / "policy-objects.json"


def run(console: Console) -> bool:
    server = json.loads(RECORDED.read_text())["decisions"]
    model = prod_model()
    manifests = render_policy(model)
    namespaces = workload_namespaces(model)
    table = Table(title="the prod placement policy near the API server's cost limits")
    for column in ("object", "engine", "seconds", "allowed", "cost", "server's cost", "as the server"):
        table.add_column(column, justify="right" if column in ("seconds", "cost", "server's cost") else "left")
    met = True
    for engine in ENGINE_NAMES:
        bindings = compile_bindings(manifests, engine_named(engine))
        for name, obj in LARGE.items():
            request = build_request(obj, namespaces)
            decision, seconds = timed(lambda: evaluate_request(request, bindings))  # noqa: B023 (called at once)
            recorded = server[name]
            same = decision.allowed is recorded["allowed"] and (
                recorded["allowed"] or decision.message.split(" is forbidden: ", 1)[-1] == recorded["message"]
            )
            met = met and same
            table.add_row(
                name,
                engine,
                f"{seconds:.1f}",
                str(decision.allowed),
                f"{sum(decision.costs.values()):,}" if decision.costs else "-",
                f"{sum(recorded['costs'].values()):,}",
                "yes" if same else "[red]NO[/]",
            )
    console.print(table)
    return met
