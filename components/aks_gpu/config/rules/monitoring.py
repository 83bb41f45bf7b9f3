"""The monitoring and remediation sections' rules: what they cannot do on this stack (alerts that notify nobody,
refused; an adopted cluster's metrics, a circuit breaker that stops everything, drains that apply to nothing). Pure: config in,
problems (with key paths) out."""

from __future__ import annotations

from aks_gpu import naming
from aks_gpu.config.models import PlatformConfig, StackConfig
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
