"""The monitoring and remediation sections' rules: what they cannot do on this stack (alerts that notify nobody,
refused; an adopted cluster's metrics, a circuit breaker that stops everything, drains that apply to nothing, a repair
nothing bounds). Pure: config in, problems (with key paths) out. NVSentinel's circuit breaker arithmetic lives here too,
since the rules and the release's values (components/aks_gpu/monitoring/remediation.py) both need it."""

from __future__ import annotations

import math

from aks_gpu import naming
from aks_gpu.config.models import GpuPoolConfig, PlatformConfig, StackConfig
from aks_gpu.config.problems import Problem
from aks_gpu.config.rules.pools import is_zero

P = naming.CONFIG_NAMESPACE


def monitoring_rules(config: PlatformConfig) -> list[Problem]:
    """What the monitoring section cannot do on this stack (components/aks_gpu/monitoring/)."""
    monitoring, path = config.monitoring, f"{P}:monitoring"
    if not monitoring.enabled or not config.gpu_pools:
        return []
    problems: list[Problem] = []
    azure = monitoring.azure_monitor
    if monitoring.engine == "azure-monitor":
        if not (azure.action_group_ids or azure.receivers) and isinstance(config, StackConfig):
            # A whole stack's plan only: a component consumer builds no alerts from the admission or plugin sections.
            # An Azure Monitor alert without an action group only shows in the portal: a GPU that fails at night is
            # found by the next person who happens to look. Refused, not warned: nobody reads a plan's warnings at 03:00.
            problems.append(
                Problem(
                    f"{path}.azureMonitor.receivers",
                    "empty, and so is actionGroupIds: the health alerts (lost GPUs, critical Xids, Node Problem "
                    "Detector GPU conditions, quarantined nodes) would notify nobody and show in the Azure portal only. "
                    f"Set {path}.azureMonitor.receivers (e.g. [{{name: gpu-oncall, email: gpu-oncall@example.com}}] or a "
                    "webhook: https://...) for an action group the stack creates, or name existing action groups in "
                    f"{path}.azureMonitor.actionGroupIds (ARM ids)",
                )
            )
        if isinstance(config, StackConfig) and config.cluster.existing:
            if azure.workspace_resource_id is None:
                problems.append(
                    Problem(
                        f"{path}.azureMonitor.workspaceResourceId",
                        "not set on an adopted cluster (cluster.existing): only the GPU exporters are deployed, no scrape "
                        "configuration and no alert rules. Its owner turns managed Prometheus on (az aks update "
                        "--enable-azure-monitor-metrics --azure-monitor-workspace-resource-id <id> "
                        "--ksm-metric-labels-allow-list 'nodes=[aks-gpu/pool]'); name that workspace here, or use engine "
                        "prometheus-operator",
                        "warning",
                    )
                )
            else:
                problems.append(
                    Problem(
                        f"{P}:cluster.existing",
                        "an adopted cluster's azureMonitorProfile is its owner's: the per-pool alerts need "
                        "kube-state-metrics to export the aks-gpu/pool node label (--ksm-metric-labels-allow-list "
                        "'nodes=[aks-gpu/pool]'); GpuPoolLabelNotExported fires while it does not",
                        "warning",
                    )
                )
    else:
        if azure.action_group_ids or azure.receivers or azure.workspace_name or azure.workspace_resource_id:
            unused = "has no effect with engine prometheus-operator (alerts go to its Alertmanager)"
            problems.append(Problem(f"{path}.azureMonitor", unused, "warning"))
        if isinstance(config, StackConfig):
            problems += _alertmanager_problems(config)
    if monitoring.engine == "azure-monitor" and monitoring.prometheus_operator.alertmanager_receiver is not None:
        unused = "has no effect with engine azure-monitor (alerts go to azureMonitor.receivers and actionGroupIds)"
        problems.append(Problem(f"{path}.prometheusOperator.alertmanagerReceiver", unused, "warning"))
    return problems


# The receiver that notifies nobody: kube-prometheus-stack's default configuration routes
# every alert to it (alertmanager.config.route.receiver 'null', receivers [{name: 'null'}] with no *_configs;
# charts/kube-prometheus-stack/values.yaml in prometheus-community/helm-charts, read 2026-12-02).
NULL_RECEIVER = "null"


def _alertmanager_problems(config: StackConfig) -> list[Problem]:
    """The team's Alertmanager is theirs, and its default route is what the GPU alerts take unless a route matches
    them: the stack says which receiver that is, and one that notifies nobody is refused."""
    key = f"{P}:monitoring.prometheusOperator.alertmanagerReceiver"
    receiver = config.monitoring.prometheus_operator.alertmanager_receiver
    if receiver is None:
        return [
            Problem(
                key,
                "not set: the GPU alerts go to an Alertmanager this stack does not configure, and kube-prometheus-stack's "
                "default route sends every alert to the receiver null, which notifies nobody. Route the alerts "
                "(severity critical and warning) to a receiver with an e-mail, webhook or pager config in your "
                "Alertmanager configuration (alertmanager.config.route in kube-prometheus-stack's values) and name "
                "that receiver here",
            )
        ]
    if receiver.strip() in ("", NULL_RECEIVER):
        return [
            Problem(
                key,
                f"{receiver!r} notifies nobody (kube-prometheus-stack's default route ends there): route the GPU "
                "alerts to a receiver with an e-mail, webhook or pager config and name it here",
            )
        ]
    return []


# ---------------------------------------------------------------- NVSentinel's circuit breaker (also the repair rate limit)


def nvidia_pools(config: PlatformConfig) -> list[GpuPoolConfig]:
    return [pool for pool in config.gpu_pools if pool.vendor == "nvidia"]


def circuit_breaker_percentage(config: PlatformConfig) -> int:
    """maxUnhealthy as NVSentinel's circuit breaker takes it: a whole percentage of the GPU nodes it watches (every
    NVIDIA node). A count is turned into the share it is of the NVIDIA pools at their largest (maxCount), rounded
    down (at least 1): with fewer nodes up the breaker trips sooner, never later."""
    text = config.remediation.max_unhealthy
    if text.endswith("%"):
        return max(1, int(text[:-1]))
    largest = sum(pool.max_count for pool in nvidia_pools(config))
    if largest <= 0:
        return 100
    return max(1, min(100, math.floor(int(text) * 100 / largest)))


def breaker_threshold(nodes: int, percentage: int) -> int:
    """The recent cordons at which NVSentinel's breaker trips with ``nodes`` GPU nodes up: it trips once
    ``recent >= ceil(nodes * percentage / 100)`` (the breaker fact in components/aks_gpu/data/remediation.yaml)."""
    return math.ceil(nodes * percentage / 100)


def fewest_gpu_nodes(config: PlatformConfig) -> int:
    """The fewest NVIDIA GPU nodes the breaker may count: the pools at their minCount, and at least the one node a
    fault needs."""
    return max(1, sum(pool.min_count for pool in nvidia_pools(config)))


def circuit_breaker_enabled(config: PlatformConfig) -> bool:
    """Whether the breaker can run without halting the engine on its first cordon. Once tripped it stops all of
    fault-quarantine's processing, the uncordon of a recovered node included, until a person resets its ConfigMap;
    at ``fewest_gpu_nodes`` a threshold of 1 trips on the first quarantine. Then it is off and maxUnhealthy is
    reported as not enforced (``remediation_summary``)."""
    return breaker_threshold(fewest_gpu_nodes(config), circuit_breaker_percentage(config)) >= 2


def remediation_rules(config: PlatformConfig) -> list[Problem]:
    """What the remediation section cannot do on this stack (components/aks_gpu/monitoring/remediation.py)."""
    settings, path = config.remediation, f"{P}:remediation"
    if settings.mode == "off":
        return []
    problems: list[Problem] = []
    if is_zero(settings.max_unhealthy):
        problems.append(
            Problem(
                f"{path}.maxUnhealthy",
                "0 lets the circuit breaker stop every quarantine: use mode dry-run to watch without acting",
            )
        )
    if config.gpu_pools and not any(pool.vendor == "nvidia" for pool in config.gpu_pools):
        problems.append(
            Problem(
                f"{path}.mode",
                f"{settings.mode} on a stack without NVIDIA pools deploys nothing: NVSentinel reads NVIDIA signals, and AKS "
                "runs no Node Problem Detector GPU check on AMD pools (driver None); set mode off",
                "warning",
            )
        )
    if not config.gpu_pools or any(pool.vendor == "nvidia" for pool in config.gpu_pools):
        problems += _datastore_problems(config)
    if settings.repair.enabled:
        problems += _repair_problems(config)
    # Only a drain the stack wrote: the defaults name the common types, which a stack need not have.
    types = {workload.type for workload in config.workloads}
    written = settings.drain if "drain" in settings.model_fields_set else {}
    for kind in sorted(set(written) - types):
        problems.append(
            Problem(f"{path}.drain.{kind}", f"no workload has type {kind}: this drain mode applies to nothing", "warning")
        )
    return problems


def _datastore_problems(config: PlatformConfig) -> list[Problem]:
    """NVSentinel without a datastore stores no health event, and its fault-quarantine and node-drainer crash-loop on
    a connection config nothing creates (components/aks_gpu/data/remediation.yaml, datastore): refused, naming what
    to set."""
    settings, path = config.remediation, f"{P}:remediation"
    if settings.datastore == "none":
        return [
            Problem(
                f"{path}.datastore",
                f"none with mode {settings.mode}: NVSentinel keeps its health events in a datastore and quarantines "
                "from it; set datastore external-mongodb (e.g. Azure Cosmos DB for MongoDB) with datastoreSecret, the "
                "Secret in nvsentinel whose key MONGODB_URI holds its connection string, or mongodb-store (the chart's "
                "in-cluster MongoDB) with certManagerInstalled: true (docs/remediation.md, Datastore)",
            )
        ]
    if settings.datastore == "external-mongodb" and settings.datastore_secret is None:
        return [
            Problem(
                f"{path}.datastoreSecret",
                "not set with datastore external-mongodb: name the Secret in the nvsentinel namespace whose key "
                "MONGODB_URI holds the connection string (kubectl -n nvsentinel create secret generic <name> "
                "--from-literal=MONGODB_URI=...)",
            )
        ]
    if settings.datastore == "mongodb-store" and not settings.cert_manager_installed:
        return [
            Problem(
                f"{path}.certManagerInstalled",
                "not set with datastore mongodb-store: the chart's MongoDB takes its TLS certificates from cert-manager, "
                "which this stack does not install: install it (helm install cert-manager jetstack/cert-manager "
                "--namespace cert-manager --create-namespace --set crds.enabled=true), then set certManagerInstalled: true",
            )
        ]
    return []


def _repair_problems(config: PlatformConfig) -> list[Problem]:
    """What the repair half needs (components/aks_gpu/data/remediation.yaml, repair): the engine acting, cert-manager
    for the janitor's certificates, an Azure cluster with workload identity for the provider's identity, and the
    circuit breaker enforced, the only bound NVSentinel puts on how many nodes are repaired at once."""
    settings, path = config.remediation, f"{P}:remediation"
    problems: list[Problem] = []
    if settings.mode != "on":
        problems.append(
            Problem(
                f"{path}.repair.enabled",
                f"true with mode {settings.mode}: a repair reboots a node, which only mode on may do; set mode on, or "
                "repair.enabled false",
            )
        )
    if not settings.cert_manager_installed:
        problems.append(
            Problem(
                f"{path}.certManagerInstalled",
                "not set with repair: the janitor's webhook and the janitor-provider's gRPC certificates come from "
                "cert-manager Issuers the chart creates; install cert-manager, then set certManagerInstalled: true",
            )
        )
    if settings.mode == "on" and not circuit_breaker_enabled(config):
        problems.append(
            Problem(
                f"{path}.maxUnhealthy",
                f"{settings.max_unhealthy!r} with repair: at the NVIDIA pools' fewest nodes ({fewest_gpu_nodes(config)}, "
                "their minCount) the circuit breaker would halt on the first quarantine, so it is turned off, and it is "
                "the repair's only rate limit (a repair follows a quarantine): raise the pools' minCount or set a "
                "maxUnhealthy whose share of them is at least 2 nodes",
            )
        )
    if not any(pool.repair for pool in nvidia_pools(config)):
        problems.append(
            Problem(f"{path}.repair.enabled", "true, but every NVIDIA pool sets repair: false: nothing is repaired", "warning")
        )
    if isinstance(config, StackConfig):
        if config.cluster.kubeconfig is not None:
            problems.append(
                Problem(
                    f"{path}.repair.enabled",
                    "true on a cluster given by a kubeconfig: the janitor-provider reboots nodes through Azure with an "
                    "identity the stack creates on the cluster's node resource group, which needs the AKS cluster as "
                    "an Azure resource of the stack (cluster.existing or a new one)",
                )
            )
        elif not config.cluster.workload_identity:
            problems.append(
                Problem(
                    f"{P}:cluster.workloadIdentity",
                    "false with remediation.repair: the janitor-provider signs in to Azure through a federated "
                    "credential on the cluster's OIDC issuer; set workloadIdentity true",
                )
            )
    return problems
