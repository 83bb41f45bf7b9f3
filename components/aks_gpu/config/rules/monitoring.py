"""The monitoring and remediation sections' rules: what they cannot do on this stack (alerts that notify nobody, an
adopted cluster's metrics, a circuit breaker that stops everything, drains that apply to nothing). Pure: config in,
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
        if not azure.action_group_ids and isinstance(config, StackConfig):
            # A whole stack's plan only: a component consumer builds no alerts from the admission or plugin sections.
            # The alerts are created either way, but an Azure Monitor alert without an action group only shows in the
            # portal: a GPU that fails at night is found by the next person who happens to look.
            problems.append(
                Problem(
                    f"{path}.azureMonitor.actionGroupIds",
                    "empty: the health alerts (lost GPUs, critical Xids, Node Problem Detector GPU conditions, "
                    "quarantined nodes) notify nobody and show in the Azure portal only. Name an action group that "
                    "reaches the on-call (az monitor action-group create ...; its ARM id here)",
                    "warning",
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
    elif azure.action_group_ids or azure.workspace_name or azure.workspace_resource_id:
        unused = "has no effect with engine prometheus-operator (alerts go to its Alertmanager)"
        problems.append(Problem(f"{path}.azureMonitor", unused, "warning"))
    return problems


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
