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

With ``repair.enabled`` (mode on): ``fault-remediation``, ``janitor`` and ``janitor-provider`` reset a GPU where the
GPU Operator owns the node's GPU clients, else reboot the node's scale set VM through Azure (a workload identity
whose custom role restarts this cluster's node resource group VMs, created by the stack), never on a pool with
``repair: false``; a repaired node stays quarantined until the node diagnostics passed on its current boot
(``DIAGNOSTICS_PASSED_ANNOTATION``).

Left off on purpose: ``gpu-health-monitor`` (it reads a standalone DCGM host engine service, which neither the AKS
managed driver nor this platform's DCGM exporter runs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.config.models import PlatformConfig
from aks_gpu.config.rules.monitoring import circuit_breaker_enabled, circuit_breaker_percentage, fewest_gpu_nodes, nvidia_pools
from aks_gpu.data_files import load_yaml
from aks_gpu.gpu.health import GPU_CONDITIONS
from aks_gpu.kube.gpu_operator import system_pool_tolerations
from aks_gpu.naming import (
    ACCELERATOR_LABEL,
    DIAGNOSTICS_GATE_POLICY,
    DIAGNOSTICS_PASSED_ANNOTATION,
    POOL_LABEL,
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


def quarantine_rule_sets(critical_xids: tuple[int, ...], npd: bool, gate: bool = False) -> list[dict[str, Any]]:
    """fault-quarantine's rule sets: the syslog monitor's fatal events or a critical Xid of our table; with ``npd``,
    the fatal events of the NPD condition policies; with ``gate`` (repair), the diagnostics gate's event, which holds a
    quarantined node until the diagnostics passed on its current boot."""
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
    if gate:
        held = f"event.agent == 'kubernetes-object-monitor' && event.checkName == '{GATE_POLICY}' && event.isFatal == true"
        sets.append(
            {
                "enabled": True,
                "version": "1",
                "name": "aks-gpu diagnostics not yet passed since the repair",
                "match": {"all": [{"kind": "HealthEvent", "expression": held}, _NOT_OPTED_OUT]},
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
        "fault-remediation": no_client_cert,
        "platformConnector": {"mongodbStore": no_client_cert},
    }


# ---------------------------------------------------------------- repair (remediation.repair)

# The kubernetes-object-monitor policy that holds a quarantined node until the diagnostics passed on its current boot.
GATE_POLICY = DIAGNOSTICS_GATE_POLICY
GPU_RESET_TEMPLATE = "gpureset-template.yaml"


@dataclass(frozen=True)
class RepairFacts:
    """``repair`` in the data file: what NVSentinel's chart and code at the pin require of the repair half."""

    switches: tuple[str, ...]
    api_group: str
    api_version: str
    gpu_reset_kind: str
    gpu_reset_service_manager: str
    gpu_reset_runtime_class: str
    service_account: str
    arm_actions: tuple[str, ...]
    federated_audience: str
    quarantine_annotation: str
    gate_recommended_action: str


@cache
def repair_facts() -> RepairFacts:
    raw: dict[str, Any] = load_yaml(PINS_FILE)["repair"]
    return RepairFacts(
        switches=tuple(raw["switches"]),
        api_group=raw["actions"]["api_group"],
        api_version=raw["actions"]["api_version"],
        gpu_reset_kind=raw["actions"]["gpu_reset_kind"],
        gpu_reset_service_manager=raw["gpu_reset"]["service_manager"],
        gpu_reset_runtime_class=raw["gpu_reset"]["runtime_class"],
        service_account=raw["janitor_provider"]["service_account"],
        arm_actions=tuple(raw["janitor_provider"]["arm_actions"]),
        federated_audience=raw["federated_audience"],
        quarantine_annotation=raw["quarantine_annotation"],
        gate_recommended_action=raw["gate_recommended_action"],
    )


@dataclass(frozen=True)
class RepairTarget:
    """Where the janitor-provider acts and as whom: the subscription, the cluster's node resource group, its region,
    and the client id of the identity the stack created for it. Pulumi inputs in a deployment, text in tests."""

    subscription_id: Any
    node_resource_group: Any
    location: str
    client_id: Any


def repair_runs(config: PlatformConfig) -> bool:
    """Whether the repair half is deployed: the engine acts (mode on), repair is asked for, and an NVIDIA pool lets it."""
    settings = config.remediation
    return settings.mode == "on" and settings.repair.enabled and any(pool.repair for pool in nvidia_pools(config))


def repair_subject() -> str:
    """The federated credential's subject: the janitor-provider's ServiceAccount, the one Azure trusts."""
    return f"system:serviceaccount:{REMEDIATION_NAMESPACE}:{repair_facts().service_account}"


def kept_out_of_repair(model: PlatformModel) -> list[str]:
    """The NVIDIA pools with ``repair: false``: quarantined and drained, never reset or rebooted by the engine."""
    return sorted(pool.name for pool in model.pools_of("nvidia") if not pool.config.repair)


def gpu_reset_applies(model: PlatformModel) -> bool:
    """A GPU reset instead of a reboot for COMPONENT_RESET: only where the janitor can take the GPU's clients down,
    that is where the GPU Operator runs them (devicePlugin.mode gpu-operator, driver None) on every pool it may repair."""
    repaired = [pool for pool in model.pools_of("nvidia") if pool.config.repair]
    return (
        bool(repaired)
        and model.config.device_plugin.mode == "gpu-operator"
        and all(pool.gpu_driver == "None" for pool in repaired)
    )


def gate_policy() -> dict[str, Any]:
    """kubernetes-object-monitor policy: a fatal event, recommending no action, while a node fault-quarantine
    quarantined has no diagnostics pass for its current boot (the diagnostics record the boot id they passed on,
    ``aks_gpu.validation.diagnostics.node_action``).
    When it turns false the monitor sends the healthy event, and the node may return."""
    facts = repair_facts()
    annotations = "resource.metadata.annotations"
    quarantined = f"has(resource.metadata.annotations) && '{facts.quarantine_annotation}' in {annotations}"
    passed = (
        f"'{DIAGNOSTICS_PASSED_ANNOTATION}' in {annotations} && "
        f"{annotations}['{DIAGNOSTICS_PASSED_ANNOTATION}'] == resource.status.nodeInfo.bootID"
    )
    return {
        "name": GATE_POLICY,
        "enabled": True,
        "resource": {"group": "", "version": "v1", "kind": "Node"},
        "predicate": {"expression": f"{quarantined} && !({passed})"},
        "healthEvent": {
            "componentClass": "GPU",
            "isFatal": True,
            "message": "quarantined node: the node diagnostics have not passed since its last boot (`aksgpu validate "
            f"--deep --quarantine` records a pass in {DIAGNOSTICS_PASSED_ANNOTATION})",
            "recommendedAction": facts.gate_recommended_action,
            "errorCode": ["DiagnosticsPending"],
        },
    }


def repair_values(model: PlatformModel, target: RepairTarget) -> dict[str, Any]:
    """The repair half's values: the three modules on, the janitor-provider on Azure with the stack's identity, the
    janitor never acting on a pool with ``repair: false``, and COMPONENT_RESET a GPU reset where it can be one."""
    facts = repair_facts()
    controllers = {"tolerations": system_pool_tolerations()}
    kept_out = kept_out_of_repair(model)
    exclusions = [{"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": kept_out}]}] if kept_out else []
    janitor_config: dict[str, Any] = {"nodes": {"exclusions": exclusions}}
    remediation: dict[str, Any] = dict(controllers)
    if gpu_reset_applies(model):
        remediation["maintenance"] = {
            "actions": {
                "COMPONENT_RESET": {
                    "apiGroup": facts.api_group,
                    "version": facts.api_version,
                    "kind": facts.gpu_reset_kind,
                    "scope": "Cluster",
                    "completeConditionType": "Complete",
                    "templateFileName": GPU_RESET_TEMPLATE,
                    "equivalenceGroup": "reset",
                    "supersedingEquivalenceGroups": ["restart"],
                    "impactedEntityScope": "GPU_UUID",
                }
            },
            "templates": {
                GPU_RESET_TEMPLATE: (
                    "apiVersion: {{.ApiGroup}}/{{.Version}}\nkind: GPUReset\nmetadata:\n"
                    "  name: maintenance-{{ .HealthEvent.NodeName }}-{{ .HealthEventID }}\nspec:\n"
                    "  nodeName: {{ .HealthEvent.NodeName }}\n  selector:\n    uuids:\n"
                    "      - {{ .ImpactedEntityScopeValue }}\n"
                )
            },
        }
        janitor_config["controllers"] = {
            "gpuReset": {
                "serviceManager": {"name": facts.gpu_reset_service_manager},
                "resetJob": {"runtimeClassName": facts.gpu_reset_runtime_class},
            }
        }
    else:
        # No GPU Operator to take the GPU's clients down: COMPONENT_RESET stays the chart's RebootNode.
        janitor_config["controllers"] = {"gpuReset": {"enabled": False}}
    return {
        "global": {
            "faultRemediation": {"enabled": True},
            "janitor": {"enabled": True},
            "janitorProvider": {"enabled": True},
        },
        "fault-remediation": remediation,
        "janitor": {**controllers, "config": janitor_config},
        "janitor-provider": {
            **controllers,
            "csp": {
                "provider": "azure",
                "azure": {
                    "subscriptionId": target.subscription_id,
                    "resourceGroup": target.node_resource_group,
                    "location": target.location,
                    "clientId": target.client_id,
                },
            },
        },
    }


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def remediation_values(
    model: PlatformModel, critical_xids: tuple[int, ...], target: RepairTarget | None = None
) -> dict[str, Any]:
    settings = model.config.remediation
    repair = repair_runs(model.config)
    if repair and target is None:
        raise ValueError("remediation.repair runs on this stack: the values need the Azure target (RepairTarget)")
    nvidia = model.pools_of("nvidia")
    agents = {"nodeSelector": {ACCELERATOR_LABEL: "nvidia"}, "tolerations": tolerations_for(nvidia)}
    controllers = {"tolerations": system_pool_tolerations()}
    values: dict[str, Any] = {
        "global": {
            "dryRun": settings.mode == "dry-run",
            "gpuHealthMonitor": {"enabled": False},
            "syslogHealthMonitor": {"enabled": True},
            "kubernetesObjectMonitor": {"enabled": settings.npd_conditions or repair},
            "faultQuarantine": {"enabled": True},
            "nodeDrainer": {"enabled": True},
            "faultRemediation": {"enabled": False},
            "janitor": {"enabled": False},
            "janitorProvider": {"enabled": False},
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
                "enabled": circuit_breaker_enabled(model.config),
                "percentage": circuit_breaker_percentage(model.config),
                "duration": f"{settings.window_minutes}m",
            },
            "ruleSets": quarantine_rule_sets(critical_xids, settings.npd_conditions, gate=repair),
        },
        "node-drainer": {
            **controllers,
            "systemNamespaces": never_drained(model),
            "deleteAfterTimeoutMinutes": settings.drain_timeout_minutes,
            "userNamespaces": drain_rules(model),
        },
    }
    policies = [*(npd_policies() if settings.npd_conditions else []), *([gate_policy()] if repair else [])]
    if policies:
        values["kubernetes-object-monitor"] = {**controllers, "policies": policies}
    if repair and target is not None:
        values = _merge(values, repair_values(model, target))
    return _merge(values, datastore_values(model))


def remediation_release(
    model: PlatformModel, critical_xids: tuple[int, ...], target: RepairTarget | None = None
) -> RemediationRelease | None:
    """The NVSentinel release, or None when nothing is deployed (mode off, or no NVIDIA pool). ``target``: where the
    repair half acts, needed when it runs (``repair_runs``)."""
    if not remediation_runs(model.config):
        return None
    pin = engine_pin()
    version = model.config.remediation.chart_version or pin.version
    values = remediation_values(model, critical_xids, target)
    return RemediationRelease(pin.release, pin.chart, version, REMEDIATION_NAMESPACE, values)


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
    share = circuit_breaker_percentage(model.config)
    if circuit_breaker_enabled(model.config):
        breaker = f"circuit breaker {settings.max_unhealthy} = {share}% of NVIDIA GPU nodes per {settings.window_minutes}m"
    else:
        breaker = (
            f"circuit breaker off: at {fewest_gpu_nodes(model.config)} GPU node(s) {share}% trips on the first quarantine and "
            "halts the engine, uncordons included (maxUnhealthy not enforced)"
        )
    if repair_runs(model.config):
        kept_out = kept_out_of_repair(model)
        how = "GPU reset, else reboot" if gpu_reset_applies(model) else "reboot of the VM"
        repair = (
            f"; repair: {how} through Azure (restart/instanceView of the node resource group's scale set VMs), at most "
            f"maxUnhealthy per {settings.window_minutes}m (the breaker), back in service after the node diagnostics pass"
            + (f", not on {', '.join(kept_out)}" if kept_out else "")
        )
    else:
        repair = "; repair: off (a person reboots or reimages a quarantined node)"
    return (
        f"remediation: NVSentinel {settings.chart_version or pin.version} in {REMEDIATION_NAMESPACE}, mode {settings.mode}; "
        f"quarantine ({QUARANTINE_TAINT_KEY}={QUARANTINE_TAINT_VALUE}:{QUARANTINE_TAINT_EFFECT} + cordon) on {sources}; "
        f"{breaker}; datastore {settings.datastore}; drain {drains}{repair}"
    )
