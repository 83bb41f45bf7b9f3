"""Plan cost: what `aksgpu plan` costs, and what the toolkit adds over registering the same resources bare.

For dev, prod and generated stacks of 10, 50 and 99 GPU pools (with as many workload namespaces), each
measurement in a fresh subprocess:

- ``cli``: the whole ``python -m aks_gpu.cli plan`` a user waits for (interpreter, imports, validation,
  the program under the mock engine, writing the files): wall time and that process's peak RSS.
- ``toolkit``: the real ``__main__.py`` under ``aks_gpu.mock_engine.run_program``, our modules imported beforehand.
- ``bare``: the same resources (the toolkit run's ResourceRecords: type, name, parent, inputs, provider,
  dependsOn, options) registered as bare ``pulumi.CustomResource`` / ``ComponentResource`` /
  ``ProviderResource`` under the same mock engine (``aks_gpu.mock_engine.run_mocked``). This is the issue's baseline.
- ``bare+aliases``: ``bare`` plus the aliases the provider SDKs' typed classes declare for each resource (an
  azure-native ``AgentPool`` carries about 110, one per API version), captured from the toolkit run. This is
  what a hand-written program using ``pulumi_azure_native`` / ``pulumi_kubernetes`` pays anyway, so the gap
  between it and ``toolkit`` is what the toolkit's own code costs.

Each worker runs the plan three times: cold (first in the process: lazy SDK imports, first-use caches), warm
(steady state: the per-resource overhead is computed from their CPU time), and, for toolkit and bare, warm
under tracemalloc (peak Python heap of one plan). ``toolkit / baseline - 1`` is the overhead per resource
(all variants register the same resources); a least-squares line over the generated stacks, its log-log
exponent and the ratio of per-resource cost at the largest stack to the smallest show how each grows.
Targets (from the issue): at most 30% overhead per resource over bare, linear growth.

    python -m bench.plan_cost [--repeats 3] [--sizes 10,50,99] [--stacks dev,prod] [--json out.json]

or ``python -m bench plan-cost``; both exit 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

PROJECT_DIR = Path(__file__).resolve().parents[1]
if str(PROJECT_DIR) not in sys.path:
    sys.path.insert(0, str(PROJECT_DIR))

from bench.stacks import generated_stack, write_stack_file  # noqa: E402

OVERHEAD_TARGET = 0.30
# Per-resource cost at the largest generated stack over the smallest: 1.0 is perfectly linear.
LINEARITY_TARGET = 1.25
# 99: the most GPU pools a cluster holds (AKS: 100 node pools, one of them the system pool).
DEFAULT_SIZES = (10, 50, 99)
DEFAULT_STACKS = ("dev", "prod")
# Stacks this large are measured once per variant whatever --repeats says (a run takes tens of seconds,
# and its spread is small next to that).
LARGE_STACK_RESOURCES = 400
WORKER_TIMEOUT_S = 1800
VARIANTS = ("toolkit", "bare", "bare+aliases")
# The cost compared between variants: CPU seconds of the warm run. The benchmark machine may be shared, and
# wall time picks up whatever else runs; CPU time of the process (all its threads) does much less.
COST = "warm_cpu_s"


# ---------------------------------------------------------------- measurements (in the worker process)


@dataclass(frozen=True)
class Sample:
    """One worker process: a cold, a warm and a traced run of the same plan."""

    resources: int
    cold_s: float
    warm_s: float
    cold_cpu_s: float
    warm_cpu_s: float
    rss_growth_mib: float  # growth of the process's peak RSS during the cold run
    traced_peak_mib: float | None  # peak Python heap during one warm run (tracemalloc); None when not traced


def _peak_rss_mib() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(run: Callable[[], int]) -> tuple[int, float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    count = run()
    return count, time.perf_counter() - wall, time.process_time() - cpu


def _measure(run: Callable[[], int], trace: bool = True, warm_runs: int = 1) -> Sample:
    """A cold run, then ``warm_runs`` warm ones (their medians are the warm figures), then a traced one."""
    rss_before = _peak_rss_mib()
    count, cold_s, cold_cpu = _timed(run)
    rss_growth = _peak_rss_mib() - rss_before
    warm: list[tuple[float, float]] = []
    for _ in range(warm_runs):
        again, wall, cpu = _timed(run)
        assert again == count, "the same plan registered a different number of resources"
        warm.append((wall, cpu))
    warm_s, warm_cpu = statistics.median(w for w, _ in warm), statistics.median(c for _, c in warm)
    traced_peak: float | None = None
    if trace:
        gc.collect()
        tracemalloc.start()
        run()
        traced_peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return Sample(count, cold_s, warm_s, cold_cpu, warm_cpu, rss_growth, traced_peak)


def _load_raw(config_file: Path) -> dict[str, Any]:
    from aks_gpu.config.loader import load_stack_file

    return load_stack_file(config_file)


def _capture_aliases(into: dict[str, list[dict[str, str]]]) -> None:
    """Record, per URN, the aliases each registration carried. The SDKs' typed classes add them (one per older
    API version); the bare baseline needs them to reproduce what the SDKs cost. Bench-only instrumentation:
    the plan's monitor is wrapped in this worker process and nowhere else."""
    from aks_gpu.mock_engine import monitors as plan

    original = plan.RecordingMonitor.RegisterResource

    def register(self: plan.RecordingMonitor, request: Any) -> Any:
        response = original(self, request)
        into[response.urn] = [{"type": a.spec.type, "name": a.spec.name} for a in request.aliases if a.HasField("spec")]
        return response

    plan.RecordingMonitor.RegisterResource = register  # type: ignore[method-assign]


def toolkit_worker(stack: str, config_file: Path, records_out: Path | None, warm_runs: int = 1) -> Sample:
    """The real program, with our own modules imported before the clock starts (runpy re-runs only
    ``__main__.py``); the provider SDKs load their submodules lazily, inside the cold run, as in `aksgpu plan`."""
    from aks_gpu.mock_engine import PlanResult, run_program

    raw = _load_raw(config_file)
    aliases: dict[str, list[dict[str, str]]] = {}
    _capture_aliases(aliases)
    results: list[PlanResult] = []

    def run() -> int:
        result = run_program(PROJECT_DIR, stack, raw)
        if not results:
            results.append(result)  # the records come from the first; later plans are dropped, as the typed worker's are
        return len(result.resources)

    sample = _measure(run, trace=warm_runs == 1, warm_runs=warm_runs)
    if records_out is not None:
        records = [r.to_json() | {"aliases": aliases.get(r.urn, [])} for r in results[0].resources]
        records_out.write_text(json.dumps(records), encoding="utf-8")
    return sample


def register_records(
    records: Sequence[dict[str, Any]],
    make: Callable[[dict[str, Any], Any], Any],
    aliases_of: Callable[[dict[str, Any]], Any] | None = None,
) -> int:
    """Register every record through ``make(record, options)``: with the record's name, parent, provider, dependsOn and
    options (and, with ``aliases_of``, the aliases it returns). Parents, providers and dependencies are registered
    before what names them; components are plain ``ComponentResource``s. Returns how many were registered."""
    import pulumi

    by_urn = {record["urn"]: record for record in records}
    provider_urns = {f"{r['name']}-id": r["urn"] for r in records if r["type"].startswith("pulumi:providers:")}
    created: dict[str, pulumi.Resource] = {}

    def create(urn: str) -> pulumi.Resource:
        if urn in created:
            return created[urn]
        record = by_urn[urn]
        options = record.get("options", {})
        parent = create(record["parent"]) if record["parent"] in by_urn else None
        provider_urn = provider_urns.get(options.get("provider") or "")
        provider = create(provider_urn) if provider_urn else None
        depends_on = [create(dep) for dep in options.get("dependsOn", []) if dep in by_urn]
        opts = pulumi.ResourceOptions(
            parent=parent,
            provider=provider if isinstance(provider, pulumi.ProviderResource) else None,
            depends_on=depends_on or None,
            protect=options.get("protect") or None,
            delete_before_replace=options.get("deleteBeforeReplace") or None,
            ignore_changes=options.get("ignoreChanges") or None,
            aliases=aliases_of(record) if aliases_of else None,
        )
        made: pulumi.Resource
        if record["custom"]:
            made = make(record, opts)
        else:
            component = pulumi.ComponentResource(record["type"], record["name"], None, opts)
            component.register_outputs({})
            made = component
        created[urn] = made
        return made

    for urn in by_urn:
        create(urn)
    return len(created)


def register_bare(records: Sequence[dict[str, Any]], with_aliases: bool = False) -> int:
    """Register every record as a bare Pulumi resource: same type, name, parent, inputs, provider, dependsOn
    and options, no component code and no typed argument classes (and, ``with_aliases``, the aliases the
    typed classes declared)."""
    import pulumi

    def sdk_aliases(record: dict[str, Any]) -> list[pulumi.Alias] | None:
        if not record.get("aliases"):
            return None
        # The SDKs' aliases name only an older type; an empty field means "same as the resource's".
        fields = (("type_", "type"), ("name", "name"))
        return [pulumi.Alias(**{arg: a[key] for arg, key in fields if a[key]}) for a in record["aliases"]]

    def bare(record: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
        kind: str = record["type"]
        if kind.startswith("pulumi:providers:"):
            return pulumi.ProviderResource(kind.removeprefix("pulumi:providers:"), record["name"], dict(record["inputs"]), opts)
        return pulumi.CustomResource(kind, record["name"], dict(record["inputs"]), opts)

    return register_records(records, bare, sdk_aliases if with_aliases else None)


# The Python modules of the provider SDKs' Kubernetes API groups (the type token's group, as pulumi-kubernetes names it).
_KUBE_GROUPS = {
    "core": "core",
    "apps": "apps",
    "batch": "batch",
    "helm.sh": "helm",
    "rbac.authorization.k8s.io": "rbac",
    "admissionregistration.k8s.io": "admissionregistration",
    "networking.k8s.io": "networking",
    "storage.k8s.io": "storage",
}


def sdk_class(token: str) -> Any | None:
    """The provider SDK's typed class of a type token; None for a Kubernetes kind it has none for (a custom resource)."""
    import importlib

    package, module, name = token.split(":")
    if token == "pulumi:providers:kubernetes":
        return importlib.import_module("pulumi_kubernetes").Provider
    if package == "azure-native":
        return getattr(importlib.import_module(f"pulumi_azure_native.{module}"), name)
    group, _, version = module.rpartition("/")
    python_group = _KUBE_GROUPS.get(group)
    if package != "kubernetes" or python_group is None:
        return None
    return getattr(importlib.import_module(f"pulumi_kubernetes.{python_group}.{version}"), name)


def typed_arguments(cls: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """A record's inputs (as the provider receives them) as the typed class's keyword arguments, through its Args
    class's name table (``enableRBAC`` is ``enable_rbac``); nested values as recorded."""
    import importlib

    from pulumi._types import input_type_py_to_pulumi_names

    module = importlib.import_module(cls.__module__)
    args_class = getattr(module, f"{cls.__name__}Args", None) or getattr(module, f"{cls.__name__}InitArgs")
    python_names = {pulumi: python for python, pulumi in input_type_py_to_pulumi_names(args_class).items()}
    kubernetes = cls.__module__.startswith("pulumi_kubernetes")
    arguments: dict[str, Any] = {}
    for key, value in inputs.items():
        if kubernetes and key in ("apiVersion", "kind"):
            continue  # a typed Kubernetes class names its own
        if kubernetes and value in ("true", "false"):
            value = value == "true"  # provider inputs travel as JSON text; the class takes the boolean
        python = python_names[key]
        # azure-native's `resourceName` argument is `resource_name_` (the first one names the Pulumi resource).
        arguments[python + "_" if python == "resource_name" else python] = value
    return arguments


def register_typed(records: Sequence[dict[str, Any]]) -> int:
    """The same resources as a hand-written program registers them: each through its provider SDK's typed class (which
    declares its output properties and its aliases itself), with the record's names, parents, providers, dependencies
    and options."""
    import pulumi

    def typed(record: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
        cls = sdk_class(record["type"])
        inputs = dict(record["inputs"])
        if cls is None:
            from pulumi_kubernetes.apiextensions import CustomResource

            fields = {k: v for k, v in inputs.items() if k not in ("apiVersion", "kind")}
            return CustomResource(record["name"], inputs["apiVersion"], inputs["kind"], opts=opts, **fields)
        made: pulumi.Resource = cls(record["name"], opts=opts, **typed_arguments(cls, inputs))
        return made

    return register_records(records, typed)


def typed_worker(stack: str, records_file: Path, warm_runs: int = 1) -> Sample:
    """The toolkit run's resources, registered through the typed SDK classes under the same mock engine."""
    from aks_gpu.mock_engine import run_mocked

    records = json.loads(records_file.read_text(encoding="utf-8"))

    def run() -> int:
        result = run_mocked(lambda: register_typed(records), stack, {})
        assert len(result.resources) == len(records), "the hand-written program must register exactly the toolkit's resources"
        return len(result.resources)

    return _measure(run, trace=False, warm_runs=warm_runs)


def baseline_worker(stack: str, records_file: Path, with_aliases: bool) -> Sample:
    """The toolkit run's resources, registered bare under the same mock engine."""
    from aks_gpu.mock_engine import run_mocked

    records = json.loads(records_file.read_text(encoding="utf-8"))

    def run() -> int:
        result = run_mocked(lambda: register_bare(records, with_aliases), stack, {})
        assert len(result.resources) == len(records), "the baseline must register exactly the toolkit's resources"
        return len(result.resources)

    # The heap is compared between toolkit and bare; tracing the aliases baseline too would only add minutes.
    return _measure(run, trace=not with_aliases)


# ---------------------------------------------------------------- the driver


@dataclass(frozen=True)
class CliSample:
    wall_s: float
    cpu_s: float
    peak_rss_mib: float


@dataclass(frozen=True)
class Scenario:
    name: str
    stack: str
    config_file: Path
    pools: int
    generated: bool


@dataclass
class ScenarioResult:
    scenario: str
    pools: int
    generated: bool
    resources: int = 0
    cli: list[CliSample] = field(default_factory=list)
    samples: dict[str, list[Sample]] = field(default_factory=lambda: {variant: [] for variant in VARIANTS})

    def median(self, variant: str, attribute: str) -> float:
        values = self.cli if variant == "cli" else self.samples[variant]
        return float(statistics.median(getattr(s, attribute) for s in values))

    def overhead(self, baseline: str) -> float:
        return self.median("toolkit", COST) / self.median(baseline, COST) - 1

    def per_resource_ms(self, variant: str) -> float:
        return 1000 * self.median(variant, COST) / self.resources


def _worker_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "bench.plan_cost", "--worker", *args]


def _run_worker(command: list[str]) -> Sample:
    done = subprocess.run(command, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return Sample(**json.loads(done.stdout.strip().splitlines()[-1]))


def _run_cli(scenario: Scenario, out_dir: Path) -> CliSample:
    """`aksgpu plan` end to end in its own process: wall time, and that process's CPU time and peak RSS (wait4)."""
    command = [sys.executable, "-m", "aks_gpu.cli", "plan", "--stack", scenario.stack, "--config-file"]
    command += [str(scenario.config_file), "--out", str(out_dir), "--project-dir", str(PROJECT_DIR)]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            text = errors.read().decode(errors="replace")
            raise RuntimeError(f"aksgpu plan {scenario.name} exited {process.returncode}:\n{text[-4000:]}")
    return CliSample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def scenarios(work_dir: Path, stacks: Sequence[str], sizes: Sequence[int]) -> list[Scenario]:
    found = []
    for stack in stacks:
        config_file = PROJECT_DIR / "stacks" / f"Pulumi.{stack}.yaml"
        pools = len(_load_raw(config_file).get("aks-gpu:gpuPools", []))
        found.append(Scenario(stack, stack, config_file, pools, generated=False))
    for size in sizes:
        name = f"gen{size}"
        config_file = write_stack_file(work_dir / f"Pulumi.{name}.yaml", generated_stack(size, name=name))
        found.append(Scenario(name, name, config_file, size, generated=True))
    return found


def measure(scenario: Scenario, repeats: int, work_dir: Path, log: Callable[[str], None]) -> ScenarioResult:
    result = ScenarioResult(scenario.name, scenario.pools, scenario.generated)
    records = work_dir / f"{scenario.name}.records.json"
    attempt = 0
    while attempt < repeats:
        attempt += 1
        log(f"{scenario.name}: run {attempt}/{repeats}")
        result.cli.append(_run_cli(scenario, work_dir / f"{scenario.name}-plan"))
        toolkit_args = ["toolkit", "--stack", scenario.stack, "--config-file", str(scenario.config_file)]
        if attempt == 1:
            toolkit_args += ["--records-out", str(records)]
        result.samples["toolkit"].append(_run_worker(_worker_command(*toolkit_args)))
        bare = ["bare", "--stack", scenario.stack, "--records", str(records)]
        result.samples["bare"].append(_run_worker(_worker_command(*bare)))
        result.samples["bare+aliases"].append(_run_worker(_worker_command(*bare, "--aliases")))
        result.resources = result.samples["toolkit"][0].resources
        if result.resources > LARGE_STACK_RESOURCES:
            break
    return result


# ---------------------------------------------------------------- growth and the report


@dataclass(frozen=True)
class Fit:
    """warm CPU seconds (cli: wall seconds) = intercept + slope x resources, over the generated stacks."""

    slope_ms: float
    intercept_s: float
    r_squared: float
    exponent: float  # log-log slope: 1.0 is linear
    per_resource_ratio: float  # per-resource cost at the largest stack / at the smallest


def fit(points: Sequence[tuple[int, float]]) -> Fit | None:
    if len(points) < 2:
        return None
    xs, ys = [float(x) for x, _ in points], [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum((x - mean_x) ** 2 for x in xs)
    intercept = mean_y - slope * mean_x
    total = sum((y - mean_y) ** 2 for y in ys)
    residual = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    lxs, lys = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mean_lx, mean_ly = statistics.fmean(lxs), statistics.fmean(lys)
    exponent = sum((a - mean_lx) * (b - mean_ly) for a, b in zip(lxs, lys, strict=True)) / sum((a - mean_lx) ** 2 for a in lxs)
    (small_x, small_y), (large_x, large_y) = min(points), max(points)
    ratio = (large_y / large_x) / (small_y / small_x)
    return Fit(1000 * slope, intercept, 1 - residual / total if total else 1.0, exponent, ratio)


@dataclass
class PlanCostReport:
    machine: dict[str, str]
    results: list[ScenarioResult]
    fits: dict[str, Fit | None]

    def worst_overhead(self, baseline: str) -> float:
        return max(r.overhead(baseline) for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "results": [
                asdict(r) | {"overhead_vs_bare": r.overhead("bare"), "overhead_vs_bare_aliases": r.overhead("bare+aliases")}
                for r in self.results
            ],
            "fits": {name: asdict(f) if f else None for name, f in self.fits.items()},
            "targets": {"overhead": OVERHEAD_TARGET, "per_resource_ratio": LINEARITY_TARGET},
        }


def machine() -> dict[str, str]:
    cpu, memory = platform.processor() or "unknown", "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    return {"cpus": str(os.cpu_count()), "cpu": cpu, "memory": memory, "python": platform.python_version()}


def build_report(results: list[ScenarioResult]) -> PlanCostReport:
    generated = [r for r in results if r.generated]
    fits = {variant: fit([(r.resources, r.median(variant, COST)) for r in generated]) for variant in VARIANTS}
    fits["cli"] = fit([(r.resources, r.median("cli", "wall_s")) for r in generated])
    return PlanCostReport(machine(), results, fits)


def _pct(value: float) -> str:
    style = "green" if value <= OVERHEAD_TARGET else "red"
    return f"[{style}]{value:+.0%}[/]"


def render(report: PlanCostReport, console: Console) -> None:
    from rich.table import Table

    m = report.machine
    table = Table(title=f"aksgpu plan cost on {m['cpus']} CPUs ({m['cpu']}), {m['memory']} RAM, Python {m['python']} (medians)")
    columns = (
        "stack", "pools", "res", "cli s", "cli MiB", "cold s", "wall s", "cpu s", "bare cpu", "+ali cpu",
        "ms/res", "bare ms/res", "vs bare", "vs +ali", "heap MiB", "bare heap",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "stack" else "right")
    for r in report.results:
        table.add_row(
            r.scenario,
            str(r.pools),
            str(r.resources),
            f"{r.median('cli', 'wall_s'):.2f}",
            f"{r.median('cli', 'peak_rss_mib'):.0f}",
            f"{r.median('toolkit', 'cold_s'):.2f}",
            f"{r.median('toolkit', 'warm_s'):.2f}",
            f"{r.median('toolkit', COST):.2f}",
            f"{r.median('bare', COST):.2f}",
            f"{r.median('bare+aliases', COST):.2f}",
            f"{r.per_resource_ms('toolkit'):.2f}",
            f"{r.per_resource_ms('bare'):.2f}",
            _pct(r.overhead("bare")),
            _pct(r.overhead("bare+aliases")),
            f"{r.median('toolkit', 'traced_peak_mib'):.1f}",
            f"{r.median('bare', 'traced_peak_mib'):.1f}",
        )
    console.print(table)
    console.print(
        "res: resources registered. cli: `aksgpu plan` end to end (wall s, peak RSS). cold s: the toolkit's first plan in"
        " its process. wall s, cpu s, ms/res: the toolkit's warm plan; bare / +ali: the bare baseline without / with the"
        " SDKs' aliases (CPU s); vs: toolkit over that baseline per resource; heap: tracemalloc peak of one plan (MiB)."
    )

    growth = Table(title="growth over the generated stacks (warm CPU seconds vs resources; cli: wall seconds)")
    for column in (
        "variant",
        "ms per resource (slope)",
        "fixed s (intercept)",
        "R²",
        "log-log exponent",
        "per-res cost large/small",
    ):
        growth.add_column(column, justify="left" if column == "variant" else "right")
    for variant, line in report.fits.items():
        if line is None:
            continue
        style = "green" if line.per_resource_ratio <= LINEARITY_TARGET else "red"
        growth.add_row(
            variant,
            f"{line.slope_ms:.2f}",
            f"{line.intercept_s:.2f}",
            f"{line.r_squared:.4f}",
            f"{line.exponent:.2f}",
            f"[{style}]{line.per_resource_ratio:.2f}[/]",
        )
    console.print(growth)
    for baseline in ("bare", "bare+aliases"):
        worst = report.worst_overhead(baseline)
        verdict = "met" if worst <= OVERHEAD_TARGET else "MISSED"
        console.print(
            f"overhead target (at most +{OVERHEAD_TARGET:.0%} per resource) vs {baseline}: {verdict}, worst {worst:+.0%}"
        )
    toolkit_fit = report.fits.get("toolkit")
    if toolkit_fit is not None:
        verdict = "met" if toolkit_fit.per_resource_ratio <= LINEARITY_TARGET else "MISSED"
        console.print(
            f"linear growth target (per-resource cost at the largest stack at most {LINEARITY_TARGET}x the smallest): "
            f"{verdict}, {toolkit_fit.per_resource_ratio:.2f}x, log-log exponent {toolkit_fit.exponent:.2f}"
        )


def measure_all(repeats: int, sizes: Sequence[int], stacks: Sequence[str], log: Callable[[str], None]) -> PlanCostReport:
    with tempfile.TemporaryDirectory(prefix="aksgpu-bench-") as folder:
        work_dir = Path(folder)
        results = [measure(s, repeats, work_dir, log) for s in scenarios(work_dir, stacks, sizes)]
    return build_report(results)


def targets_met(report: PlanCostReport) -> bool:
    """The issue's targets: at most +30% per resource over bare Pulumi, linear growth."""
    toolkit_fit = report.fits.get("toolkit")
    linear = toolkit_fit is None or toolkit_fit.per_resource_ratio <= LINEARITY_TARGET
    return report.worst_overhead("bare") <= OVERHEAD_TARGET and linear


def run(console: Console) -> bool:
    """``python -m bench plan-cost``: the default scenarios; True when the targets are met."""
    report = measure_all(3, DEFAULT_SIZES, DEFAULT_STACKS, log=lambda line: console.print(f"[dim]{line}[/]"))
    render(report, console)
    return targets_met(report)


def _csv_ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def _csv(text: str) -> list[str]:
    return [part for part in text.split(",") if part]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.plan_cost", description="Plan cost: toolkit vs bare Pulumi.")
    parser.add_argument("--repeats", type=int, default=3, help="worker processes per scenario and variant (medians)")
    parser.add_argument("--sizes", type=_csv_ints, default=list(DEFAULT_SIZES), help="generated stacks' pool counts")
    parser.add_argument("--stacks", type=_csv, default=list(DEFAULT_STACKS), help="stacks of stacks/ to measure")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    # Internal: one worker process (cold, warm and traced runs); prints a Sample as JSON.
    parser.add_argument("--worker", choices=("toolkit", "bare", "typed"), help=argparse.SUPPRESS)
    parser.add_argument("--stack", help=argparse.SUPPRESS)
    parser.add_argument("--config-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--records-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--records", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--aliases", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--warm-runs", type=int, default=1, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker == "toolkit":
        print(json.dumps(asdict(toolkit_worker(args.stack, args.config_file, args.records_out, args.warm_runs))))
        return 0
    if args.worker == "typed":
        print(json.dumps(asdict(typed_worker(args.stack, args.records, args.warm_runs))))
        return 0
    if args.worker == "bare":
        print(json.dumps(asdict(baseline_worker(args.stack, args.records, args.aliases))))
        return 0
    from rich.console import Console

    report = measure_all(args.repeats, args.sizes, args.stacks, log=lambda line: print(line, file=sys.stderr, flush=True))
    render(report, Console(highlight=False, width=None if sys.stdout.isatty() else 180))
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    return 0 if targets_met(report) else 1


if __name__ == "__main__":
    sys.exit(main())
