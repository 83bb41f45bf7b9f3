"""The stack config as ``TypedDict``s: the shape public components take as ``args``.

Pulumi's component schema inference reads these (snake_case here, camelCase in the schema and in every
other language's SDK), so TypeScript, Go, C# and YAML stacks get the same keys as a stack file. They carry
no rules: each component validates what it gets with the pydantic models in ``components/config/models.py``,
the one place the rules live. ``tests/test_specs.py`` keeps the two in step, key for key.

Plain Python types only (the inference accepts no unions): enum-like values are ``str`` here and are
checked by the models.

Plain or ``pulumi.Input``, per field. A field is plain where its value decides which resources exist, what
they are named (their URNs) or what the cross-key rules compare it with before anything is registered: pools
(name, vendor, VM size, counts, MIG), the cluster, the device plugin, admission, storage, validation. Other
stacks' values (a ``StackReference`` output, a resource's output) are accepted where they only fill in values:
a workload namespace's ``name``, ``type`` and ``gpu_quota`` (``GpuWorkloadNamespace`` checks them when they are
known), and the names and placements the components take beside their specs (``resource_group_name``,
``cluster_name``, ``resource_name``, ``node_selector``, ``tolerations``). ``GpuPlatform``,
``GpuAdmissionPolicy`` and ``NvmeCache`` compare every workload with the pools first: they refuse an output in
a workload with the property path and why (``components/args.py``).
"""

from typing import NotRequired, TypedDict

import pulumi


class NotAllowedDatesSpec(TypedDict):
    start: str
    """First blocked day, YYYY-MM-DD."""
    end: str
    """Last blocked day, YYYY-MM-DD."""


class MaintenanceWindowSpec(TypedDict):
    start_time: str
    """HH:MM in utcOffset."""
    duration_hours: int
    """4 to 24."""
    schedule: NotRequired[str]
    """weekly (default), daily, absoluteMonthly or relativeMonthly."""
    day_of_week: NotRequired[str]
    interval_weeks: NotRequired[int]
    interval_days: NotRequired[int]
    interval_months: NotRequired[int]
    day_of_month: NotRequired[int]
    week_index: NotRequired[str]
    utc_offset: NotRequired[str]
    start_date: NotRequired[str]
    not_allowed_dates: NotRequired[list[NotAllowedDatesSpec]]


class MaintenanceSpec(TypedDict):
    node_os: NotRequired[MaintenanceWindowSpec]
    """aksManagedNodeOSUpgradeSchedule."""
    auto_upgrade: NotRequired[MaintenanceWindowSpec]
    """aksManagedAutoUpgradeSchedule."""


class SystemPoolSpec(TypedDict):
    name: NotRequired[str]
    vm_size: NotRequired[str]
    min_count: NotRequired[int]
    max_count: NotRequired[int]
    zones: NotRequired[list[str]]
    os_sku: NotRequired[str]


class DeployerAccessSpec(TypedDict):
    enabled: NotRequired[bool]
    """Grant the deploying identity Azure Kubernetes Service RBAC Cluster Admin on the cluster (default true)."""
    principal_type: NotRequired[str]
    """auto (default), User or ServicePrincipal."""


class ClusterSpec(TypedDict):
    resource_group: str
    """The cluster's resource group."""
    name: str
    """The AKS cluster name."""
    existing: NotRequired[bool]
    """Adopt an existing cluster: nothing Azure-side is created."""
    location: NotRequired[str]
    kubernetes_version: NotRequired[str]
    sku_tier: NotRequired[str]
    support_plan: NotRequired[str]
    """KubernetesOfficial (default) or AKSLongTermSupport (needs skuTier Premium)."""
    dns_prefix: NotRequired[str]
    network_policy: NotRequired[str]
    """azure, calico or cilium."""
    pod_cidr: NotRequired[str]
    upgrade_channel: NotRequired[str]
    """rapid, stable, patch, node-image or none."""
    node_os_upgrade_channel: NotRequired[str]
    """None, Unmanaged, NodeImage or SecurityPatch."""
    maintenance: NotRequired[MaintenanceSpec]
    system_pool: NotRequired[SystemPoolSpec]
    entra_admin_group_object_ids: NotRequired[list[str]]
    deployer_access: NotRequired[DeployerAccessSpec]
    kubelogin_mode: NotRequired[str]
    """How the kubeconfig's kubelogin signs in: azurecli (default), workloadidentity, spn or msi."""
    local_accounts: NotRequired[bool]
    workload_identity: NotRequired[bool]
    kaito: NotRequired[bool]
    protect: NotRequired[bool]
    tags: NotRequired[dict[str, str]]


class UpgradeSettingsSpec(TypedDict):
    max_surge: NotRequired[str]
    max_unavailable: NotRequired[str]
    drain_timeout_in_minutes: NotRequired[int]
    node_soak_duration_in_minutes: NotRequired[int]


class GpuPoolSpec(TypedDict):
    name: str
    """AKS pool name: a lowercase letter, then up to 11 lowercase letters or digits."""
    vendor: str
    """nvidia or amd."""
    vm_size: str
    workload: str
    """The workload type this pool serves (a DNS label)."""
    autoscaling: NotRequired[bool]
    min_count: NotRequired[int]
    max_count: NotRequired[int]
    count: NotRequired[int]
    mig_profile: NotRequired[str]
    """MIG1g, MIG2g, MIG3g, MIG4g or MIG7g."""
    time_slicing_replicas: NotRequired[int]
    nvme_cache: NotRequired[bool]
    spot: NotRequired[bool]
    spot_max_price: NotRequired[float]
    spot_eviction_policy: NotRequired[str]
    os_sku: NotRequired[str]
    os_disk_type: NotRequired[str]
    os_disk_size_gb: NotRequired[int]
    zones: NotRequired[list[str]]
    max_pods: NotRequired[int]
    taints: NotRequired[list[str]]
    """Extra taints, key=value:Effect."""
    labels: NotRequired[dict[str, str]]
    upgrade: NotRequired[UpgradeSettingsSpec]
    gpu_driver: NotRequired[str]
    gpu_count: NotRequired[int]
    gpu_model: NotRequired[str]
    min_driver_version: NotRequired[str]
    smoke_test: NotRequired[bool]
    protect: NotRequired[bool]


class EgressRuleSpec(TypedDict):
    cidr: str
    ports: NotRequired[list[int]]
    protocol: NotRequired[str]


class IngressFromSpec(TypedDict):
    namespace: str
    ports: NotRequired[list[int]]


class NetworkAccessSpec(TypedDict):
    allow_dns: NotRequired[bool]
    allow_same_namespace: NotRequired[bool]
    allow_to_namespaces: NotRequired[list[str]]
    allow_from_namespaces: NotRequired[list[IngressFromSpec]]
    allow_egress: NotRequired[list[EgressRuleSpec]]


class QuotaLimitsSpec(TypedDict):
    cpu: NotRequired[str]
    memory: NotRequired[str]
    pods: NotRequired[int]
    persistent_volume_claims: NotRequired[int]
    requests_storage: NotRequired[str]


class DefaultRequestsSpec(TypedDict):
    cpu: NotRequired[str]
    memory: NotRequired[str]


class RoleBindingSpec(TypedDict):
    group_object_id: str
    role: str
    """edit or view."""


class WorkloadSpec(TypedDict):
    name: pulumi.Input[str]
    """The namespace (a DNS label). An output only for GpuWorkloadNamespace."""
    type: pulumi.Input[str]
    """The workload type: pools whose workload equals it serve this namespace. An output only for
    GpuWorkloadNamespace."""
    gpu_quota: pulumi.Input[int]
    """GPUs (units of the pools' GPU resource) the namespace may request in all. An output only for
    GpuWorkloadNamespace."""
    pool: NotRequired[str]
    pod_security: NotRequired[str]
    quota: NotRequired[QuotaLimitsSpec]
    default_requests: NotRequired[DefaultRequestsSpec]
    network: NotRequired[NetworkAccessSpec]
    role_bindings: NotRequired[list[RoleBindingSpec]]
    nvme_volume: NotRequired[bool]
    rdma: NotRequired[bool]
    """RDMA/InfiniBand jobs: pods may add IPC_LOCK, and nothing else beyond Pod Security baseline."""


class DevicePluginSpec(TypedDict):
    mode: NotRequired[str]
    """daemonset or gpu-operator."""
    mig_strategy: NotRequired[str]
    """single or mixed."""
    time_slicing_replicas: NotRequired[int]
    nvidia_image: NotRequired[str]
    gpu_operator_chart_version: NotRequired[str]
    amd_mode: NotRequired[str]
    amd_image: NotRequired[str]
    amd_operator_chart_version: NotRequired[str]
    amd_driver_image: NotRequired[str]
    """amdMode gpu-operator: the repository (no tag) KMM pushes the amdgpu driver image it builds to."""
    cert_manager_installed: NotRequired[bool]
    """amdMode gpu-operator: cert-manager, which the AMD GPU Operator needs, is installed in the cluster."""


class AdmissionSpec(TypedDict):
    enabled: NotRequired[bool]
    validation_actions: NotRequired[list[str]]
    exempt_namespaces: NotRequired[list[str]]
    """On top of the namespaces the stack derives (kube-system, gpu-resources, Calico's, acstor with storage v1)."""
    restrict_to_workload_namespaces: NotRequired[bool]
    """GPU requests only in workload namespaces and gpuNamespaces (default true)."""
    gpu_namespaces: NotRequired[list[str]]


class StorageSpec(TypedDict):
    flavour: NotRequired[str]
    storage_class_name: NotRequired[str]
    extension_auto_upgrade: NotRequired[bool]
    extension_version: NotRequired[str]


class SmokeJobSpec(TypedDict):
    enabled: NotRequired[bool]
    image: NotRequired[str]
    amd_image: NotRequired[str]
    deadline_seconds: NotRequired[int]


class ValidationSpec(TypedDict):
    on_deploy: NotRequired[str]
    """fail, warn or off."""
    concurrency: NotRequired[int]
    exec_timeout_seconds: NotRequired[int]
    retries: NotRequired[int]
    smoke_job: NotRequired[SmokeJobSpec]


class AzureMonitorSettingsSpec(TypedDict):
    workspace_name: NotRequired[str]
    """The Azure Monitor workspace to create (default `<cluster name>-amw`)."""
    workspace_resource_id: NotRequired[str]
    """An existing workspace to use instead (its ARM id); required for an adopted cluster."""
    action_group_ids: NotRequired[list[str]]
    """Action groups every alert notifies (ARM ids)."""


class PrometheusOperatorSettingsSpec(TypedDict):
    namespace: NotRequired[str]
    """Where the PodMonitors and the PrometheusRule go (default gpu-resources)."""
    labels: NotRequired[dict[str, str]]
    """Labels the operator's podMonitorSelector and ruleSelector match, e.g. {release: kube-prometheus-stack}."""


class AlertThresholdsSpec(TypedDict):
    idle_utilization_percent: NotRequired[int]
    idle_minutes: NotRequired[int]
    empty_node_minutes: NotRequired[int]
    quota_used_below_percent: NotRequired[int]
    quota_window_hours: NotRequired[int]
    throttle_minutes: NotRequired[int]


class MonitoringSpec(TypedDict):
    enabled: NotRequired[bool]
    """GPU metrics exporters, scraping and alert rules (default true)."""
    engine: NotRequired[str]
    """azure-monitor (default: managed Prometheus) or prometheus-operator."""
    azure_monitor: NotRequired[AzureMonitorSettingsSpec]
    prometheus_operator: NotRequired[PrometheusOperatorSettingsSpec]
    alerts: NotRequired[AlertThresholdsSpec]
    scrape_interval_seconds: NotRequired[int]
    dcgm_exporter_image: NotRequired[str]
    amd_exporter_image: NotRequired[str]


class PlatformSpec(TypedDict):
    """The in-cluster part of a stack: pools and what runs for them."""

    gpu_pools: NotRequired[list[GpuPoolSpec]]
    workloads: NotRequired[list[WorkloadSpec]]
    device_plugin: NotRequired[DevicePluginSpec]
    admission: NotRequired[AdmissionSpec]
    storage: NotRequired[StorageSpec]
    validation: NotRequired[ValidationSpec]
    monitoring: NotRequired[MonitoringSpec]


class StackSpec(PlatformSpec):
    """A whole stack, as a stack file's ``aks-gpu:`` keys plus ``azure-native:location``."""

    location: str
    cluster: ClusterSpec
