"""Quarantine of faulty GPU nodes: the NVIDIA NVSentinel Helm release the stack deploys (``aks-gpu:remediation``).
Pure: the resolved model in, a ``ReleaseSpec`` (or None with mode off) out. Why NVSentinel, and what each mode does,
is in docs/remediation.md.

What the values turn on, and why (keys as NVIDIA/NVSentinel docs/configuration/*.md spell them, read 2026-12-01):

- ``syslog-health-monitor`` (a DaemonSet on the NVIDIA pools): Xid and SXid errors and "fallen off the bus" in the
  node's journal, graded fatal or not by NVSentinel's Xid mapping;
- ``kubernetes-object-monitor`` (with ``npdConditions``): one policy per critical AKS Node Problem Detector GPU
  condition (``components/aks_gpu/gpu/health/conditions.py``), a fatal health event while the condition is True;
- ``fault-quarantine``: rule sets that cordon a node on those fatal events (and on the Xid codes our own table grades
  critical, ``aks_gpu/data/xid.yaml``) and put the quarantine taint on it (``aks_gpu/naming.py``), bounded by its
  circuit breaker (``maxUnhealthy`` over ``windowMinutes``);
- ``node-drainer``: per workload namespace the drain mode of its workload type (``drain``), everything else
  ``defaultDrain``; the platform's and AKS's namespaces are never drained;
- ``global.dryRun`` with mode dry-run: every module runs and records what it would do, and changes no node.

Left off on purpose: ``gpu-health-monitor`` (it reads a standalone DCGM host engine service, which neither the AKS
managed driver nor this platform's DCGM exporter runs), and fault-remediation / janitor (reboot or terminate the VM:
AKS node auto-repair and a person do that on AKS, docs/remediation.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.data_files import load_yaml
from aks_gpu.gpu.health import GPU_CONDITIONS
from aks_gpu.kube.gpu_operator import system_pool_tolerations
from aks_gpu.naming import (
    ACCELERATOR_LABEL,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    QUARANTINE_TAINT_VALUE,
    REMEDIATION_NAMESPACE,
)
from aks_gpu.resolved.exemptions import exempt_namespaces, remediation_runs
from aks_gpu.resolved.model import PlatformModel, ResolvedPool, tolerations_for

PINS_FILE = Path(__file__).resolve().parents[1] / "data" / "remediation.yaml"
# The label every NVIDIA pool's nodes carry (components/aks_gpu/resolved/model.py): the nodes fault-quarantine watches and its
# circuit breaker counts.
GPU_NODE_SELECTOR = f"{ACCELERATOR_LABEL}=nvidia"
# NVSentinel's own opt-out label (charts/fault-quarantine/values.yaml, skipNodeLabels): a person sets it on a node to
# take it out of the engine's hands.
OPT_OUT_LABEL = "nvsentinel.dgxc.nvidia.com/managed"
NPD_POLICY_PREFIX = "aks-npd-"
# The database NVSentinel's store-client uses on an external MongoDB (NVIDIA's values-cosmosdb-test.yaml:40).
DATASTORE_DATABASE = "HealthEventsDatabase"


@dataclass(frozen=True)
class EnginePin:
    chart: str  # an OCI reference: Helm takes it as the chart, with no repository
    version: str
    release: str


@cache
def engine_pin() -> EnginePin:
    raw: dict[str, Any] = load_yaml(PINS_FILE)["nvsentinel"]
    return EnginePin(chart=raw["chart"], version=raw["version"], release=raw["release"])


@dataclass(frozen=True)
class NpdGpuChecks:
    """Where AKS runs its Node Problem Detector GPU checks (``npd_gpu_checks`` in the data file): every NVIDIA pool on
    the driver AKS installs, MIG pools included; the GRID licence check only on the GPU models AKS gives the GRID
    driver; the managed-GPU checks only with the managed GPU experience."""

    grid_gpu_models: frozenset[str]


@cache
def npd_gpu_checks() -> NpdGpuChecks:
    raw: dict[str, Any] = load_yaml(PINS_FILE)["npd_gpu_checks"]
    return NpdGpuChecks(frozenset(raw["grid_gpu_models"]))


def npd_coverage(model: PlatformModel) -> str | None:
    """One line for ``aksgpu plan``: which NVIDIA pools get AKS's NPD GPU conditions (each with the GRID licence check
    where its GPU gets the GRID driver) and what covers the others (None without NVIDIA pools)."""
    pools = model.pools_of("nvidia")
    if not pools:
        return None
    checks = npd_gpu_checks()
    covered = [p for p in pools if p.gpu_driver == "Install"]
    others = [p for p in pools if p.gpu_driver == "None"]

    def described(pool: ResolvedPool) -> str:
        notes = [pool.config.vm_size]
        if pool.mig_profile is not None:
            notes.append("MIG")
        if pool.gpu_model is not None and pool.gpu_model.key in checks.grid_gpu_models:
            notes.append("with the GRID licence check")
        return f"{pool.name} ({', '.join(notes)})"

    line = "AKS NPD GPU conditions (GPU count, Xid, NVLink, InfiniBand, clock throttling) on " + (
        ", ".join(described(p) for p in covered) if covered else "no pool"
    )
    if others:
        cover = "NVSentinel's kernel-log monitor and the DCGM alerts" if remediation_runs(model.config) else "the DCGM alerts"
        line += f"; not on {', '.join(f'{p.name} (gpuDriver None)' for p in others)}: {cover} watch those"
    return line


@dataclass(frozen=True)
class RemediationRelease:
    """The Helm release: ``helm install <name> <chart> --version <version> -n <namespace> -f <values>``."""

    name: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any]


def namespace_manifest() -> dict[str, Any]:
    """The engine's namespace. Pod Security ``privileged``: the syslog health monitor mounts the node's journal
    (hostPath), which ``baseline`` refuses; the admission policy exempts it (aks_gpu/data/admission_exemptions.yaml)."""
    labels = {"pod-security.kubernetes.io/enforce": "privileged"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": REMEDIATION_NAMESPACE, "labels": labels}}


def circuit_breaker_percentage(model: PlatformModel) -> int:
    """maxUnhealthy as NVSentinel's circuit breaker takes it: a whole percentage of the GPU nodes it watches (every
    NVIDIA node). A count is turned into the share it is of the NVIDIA pools at their largest (maxCount), rounded
    down (at least 1): with fewer nodes up the breaker trips sooner, never later."""
    text = model.config.remediation.max_unhealthy
    if text.endswith("%"):
        return max(1, int(text[:-1]))
    largest = sum(pool.config.max_count for pool in model.pools_of("nvidia"))
    if largest <= 0:
        return 100
    return max(1, min(100, math.floor(int(text) * 100 / largest)))


def breaker_threshold(nodes: int, percentage: int) -> int:
    """The recent cordons at which NVSentinel's breaker trips with ``nodes`` GPU nodes up: it trips once
    ``recent >= ceil(nodes * percentage / 100)`` (the breaker fact in components/aks_gpu/data/remediation.yaml)."""
    return math.ceil(nodes * percentage / 100)


def fewest_gpu_nodes(model: PlatformModel) -> int:
    """The fewest NVIDIA GPU nodes the breaker may count: the pools at their minCount, and at least the one node a
    fault needs."""
    return max(1, sum(pool.config.min_count for pool in model.pools_of("nvidia")))


def circuit_breaker_enabled(model: PlatformModel) -> bool:
    """Whether the breaker can run without halting the engine on its first cordon. Once tripped it stops all of
    fault-quarantine's processing, the uncordon of a recovered node included, until a person resets its ConfigMap;
    at ``fewest_gpu_nodes`` a threshold of 1 trips on the first quarantine. Then it is off and maxUnhealthy is
    reported as not enforced (``remediation_summary``)."""
    return breaker_threshold(fewest_gpu_nodes(model), circuit_breaker_percentage(model)) >= 2


def _quarantine_action() -> dict[str, Any]:
    return {
        "cordon": {"shouldCordon": True},
        "taint": {"key": QUARANTINE_TAINT_KEY, "value": QUARANTINE_TAINT_VALUE, "effect": QUARANTINE_TAINT_EFFECT},
    }


# A node a person opted out (skipNodeLabels covers it too; the rule says so where the rule is read).
_NOT_OPTED_OUT = {
    "kind": "Node",
    "expression": f"!('{OPT_OUT_LABEL}' in node.metadata.labels && node.metadata.labels['{OPT_OUT_LABEL}'] == 'false')",
}


def quarantine_rule_sets(critical_xids: tuple[int, ...], npd: bool) -> list[dict[str, Any]]:
    """fault-quarantine's rule sets: the syslog monitor's fatal events or a critical Xid of our table; with ``npd``,
    the fatal events of the NPD condition policies."""
    codes = ", ".join(f"'{code}'" for code in critical_xids)
    syslog = (
        "event.agent == 'syslog-health-monitor' && event.componentClass == 'GPU' && "
        f"(event.isFatal == true || event.errorCode.exists(e, e in [{codes}]))"
    )
    sets = [
        {
            "enabled": True,
            "version": "1",
            "name": "aks-gpu fatal GPU fault in the kernel log",
            "match": {"all": [{"kind": "HealthEvent", "expression": syslog}, _NOT_OPTED_OUT]},
            **_quarantine_action(),
        }
    ]
    if npd:
        condition = (
            f"event.agent == 'kubernetes-object-monitor' && event.checkName.startsWith('{NPD_POLICY_PREFIX}') && "
            "event.isFatal == true"
        )
        sets.append(
            {
                "enabled": True,
                "version": "1",
                "name": "aks-gpu AKS Node Problem Detector GPU condition",
                "match": {"all": [{"kind": "HealthEvent", "expression": condition}, _NOT_OPTED_OUT]},
                **_quarantine_action(),
            }
        )
    return sets


def npd_condition_types() -> tuple[str, ...]:
    """The AKS NPD GPU conditions that quarantine a node: the critical ones (GPUClockThrottling only warns)."""
    return tuple(kind for kind, condition in GPU_CONDITIONS.items() if condition.severity == "critical")


def npd_policies() -> list[dict[str, Any]]:
    """kubernetes-object-monitor policies: a fatal health event while an AKS NPD GPU condition is True on a node.
    NVSentinel sends the policy name as the event's checkName; the rule set above matches on its prefix."""
    policies = []
    for kind in npd_condition_types():
        advice = GPU_CONDITIONS[kind].advice
        policies.append(
            {
                "name": f"{NPD_POLICY_PREFIX}{re.sub(r'[^a-z0-9]+', '-', kind.lower())}",
                "enabled": True,
                "resource": {"group": "", "version": "v1", "kind": "Node"},
                "predicate": {
                    "expression": f"resource.status.conditions.filter(c, c.type == '{kind}' && c.status == 'True').size() > 0"
                },
                "healthEvent": {
                    "componentClass": "GPU",
                    "isFatal": True,
                    "message": f"AKS Node Problem Detector condition {kind}=True: {advice}",
                    "recommendedAction": "CONTACT_SUPPORT",
                    "errorCode": [kind],
                },
            }
        )
    return policies


def drain_rules(model: PlatformModel) -> list[dict[str, str]]:
    """node-drainer's userNamespaces: each workload namespace with the drain mode of its type, then every other
    namespace with defaultDrain (the catch-all the drainer's docs ask for)."""
    settings = model.config.remediation
    rules = [
        {"name": workload.name, "mode": settings.drain.get(workload.type, settings.default_drain)} for workload in model.workloads
    ]
    return [*rules, {"name": "*", "mode": settings.default_drain}]


def never_drained(model: PlatformModel) -> str:
    """node-drainer's systemNamespaces: the engine's own and every namespace the admission policy exempts (AKS's
    agents, the GPU stack's), as one anchored regular expression."""
    cluster = model.cluster
    names = sorted({REMEDIATION_NAMESPACE, *exempt_namespaces(model.config, cluster.network_policy if cluster else None)})
    return "^(" + "|".join(re.escape(name) for name in names) + ")$"


def datastore_values(model: PlatformModel) -> dict[str, Any]:
    """The chart's datastore keys for the stack's choice (the datastore facts in components/aks_gpu/data/remediation.yaml).
    external-mongodb: NVIDIA's own Azure Cosmos DB for MongoDB values (values-cosmosdb-test.yaml): no in-cluster store,
    the connection string from a Secret (key MONGODB_URI), TLS with the system CAs, SCRAM, and no client-certificate
    mounts in the modules that would otherwise wait on a certificate Secret nothing creates. mongodb-store: the chart's
    own MongoDB, whose TLS certificates cert-manager issues (the config rules require certManagerInstalled)."""
    settings = model.config.remediation
    if settings.datastore == "mongodb-store":
        return {"global": {"mongodbStore": {"enabled": True}}}
    external: dict[str, Any] = {
        "mongodbStore": {"enabled": False},
        "datastore": {
            "provider": "mongodb",
            "credentialsFromSecret": {"name": settings.datastore_secret or ""},
            "connection": {"database": DATASTORE_DATABASE},
            "tls": {"enabled": True, "caSecretName": ""},
            "auth": {"mechanism": "scram"},
        },
    }
    no_client_cert = {"clientCertMountPath": ""}
    return {
        "global": external,
        "fault-quarantine": no_client_cert,
        "node-drainer": no_client_cert,
        "platformConnector": {"mongodbStore": no_client_cert},
    }


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def remediation_values(model: PlatformModel, critical_xids: tuple[int, ...]) -> dict[str, Any]:
    settings = model.config.remediation
    nvidia = model.pools_of("nvidia")
    agents = {"nodeSelector": {ACCELERATOR_LABEL: "nvidia"}, "tolerations": tolerations_for(nvidia)}
    controllers = {"tolerations": system_pool_tolerations()}
    values: dict[str, Any] = {
        "global": {
            "dryRun": settings.mode == "dry-run",
            "gpuHealthMonitor": {"enabled": False},
            "syslogHealthMonitor": {"enabled": True},
            "kubernetesObjectMonitor": {"enabled": settings.npd_conditions},
            "faultQuarantine": {"enabled": True},
            "nodeDrainer": {"enabled": True},
            "faultRemediation": {"enabled": False},
            "janitor": {"enabled": False},
            # The kernel-log monitor schedules only on nodes labelled driver.installed=true, which the labeler sets.
            "labeler": {"enabled": True},
            # The datastore setup Job runs on the system pool, whose CriticalAddonsOnly taint it must tolerate.
            "systemNodeTolerations": system_pool_tolerations(),
        },
        # The chart's PodMonitor is monitoring.coreos.com/v1, a CRD AKS managed Prometheus does not install (it has
        # azmonitoring.coreos.com): Helm refuses the release while it renders.
        "podMonitor": {"enabled": False},
        # AKS installs the driver on the node, so no driver pod shows it: the labeler takes nvidia.com/gpu.present=true
        # (which the platform puts on those pools, resolved/node_labels.py) as "driver installed".
        "labeler": {**controllers, "assumeDriverInstalled": True},
        "syslog-health-monitor": agents,
        # Its default RuntimeClass "nvidia" is the GPU Operator's; AKS creates none, and the API server refuses a pod
        # naming a RuntimeClass that does not exist (seen on the local control plane): the node's default runtime.
        "metadata-collector": {"runtimeClassName": ""},
        "fault-quarantine": {
            **controllers,
            "gpuNodeLabel": GPU_NODE_SELECTOR,
            "circuitBreaker": {
                "enabled": circuit_breaker_enabled(model),
                "percentage": circuit_breaker_percentage(model),
                "duration": f"{settings.window_minutes}m",
            },
            "ruleSets": quarantine_rule_sets(critical_xids, settings.npd_conditions),
        },
        "node-drainer": {
            **controllers,
            "systemNamespaces": never_drained(model),
            "deleteAfterTimeoutMinutes": settings.drain_timeout_minutes,
            "userNamespaces": drain_rules(model),
        },
    }
    if settings.npd_conditions:
        values["kubernetes-object-monitor"] = {**controllers, "policies": npd_policies()}
    return _merge(values, datastore_values(model))


def remediation_release(model: PlatformModel, critical_xids: tuple[int, ...]) -> RemediationRelease | None:
    """The NVSentinel release, or None when nothing is deployed (mode off, or no NVIDIA pool)."""
    if not remediation_runs(model.config):
        return None
    pin = engine_pin()
    version = model.config.remediation.chart_version or pin.version
    return RemediationRelease(pin.release, pin.chart, version, REMEDIATION_NAMESPACE, remediation_values(model, critical_xids))


def remediation_summary(model: PlatformModel) -> str:
    """One line for ``aksgpu plan``: what the engine does on this stack, or why nothing is deployed."""
    settings = model.config.remediation
    if settings.mode == "off":
        return "remediation: off (no quarantine engine; faulty GPU nodes stay schedulable until a person acts)"
    if not model.pools_of("nvidia"):
        return f"remediation: {settings.mode}, but no NVIDIA pool: nothing deployed (NVSentinel reads NVIDIA signals)"
    pin = engine_pin()
    drains = ", ".join(f"{rule['name']} {rule['mode']}" for rule in drain_rules(model))
    sources = "kernel-log Xids" + (", AKS NPD GPU conditions" if settings.npd_conditions else "")
    share = circuit_breaker_percentage(model)
    if circuit_breaker_enabled(model):
        breaker = f"circuit breaker {settings.max_unhealthy} = {share}% of NVIDIA GPU nodes per {settings.window_minutes}m"
    else:
        breaker = (
            f"circuit breaker off: at {fewest_gpu_nodes(model)} GPU node(s) {share}% trips on the first quarantine and "
            "halts the engine, uncordons included (maxUnhealthy not enforced)"
        )
    return (
        f"remediation: NVSentinel {settings.chart_version or pin.version} in {REMEDIATION_NAMESPACE}, mode {settings.mode}; "
        f"quarantine ({QUARANTINE_TAINT_KEY}={QUARANTINE_TAINT_VALUE}:{QUARANTINE_TAINT_EFFECT} + cordon) on {sources}; "
        f"{breaker}; datastore {settings.datastore}; drain {drains}"
    )
