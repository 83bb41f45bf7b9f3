"""The stack config as pydantic models: one model per concern, camelCase keys as the stack files spell them.

Every model forbids unknown keys, so a typo in a stack file is an error with its key path, not a silently
ignored setting. Enum values are spelled exactly as the AKS API (and ``pulumi_azure_native.containerservice``)
spells them; a test keeps them in step with the provider's enums.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from components.aks_facts import kubernetes_calendar

# AKS: "agent pool names must start with a lowercase letter and contain only lowercase letters and numbers,
# at most 12 characters (Linux)". https://learn.microsoft.com/azure/aks/create-node-pools#limitations
POOL_NAME_PATTERN = r"^[a-z][a-z0-9]{0,11}$"
# RFC 1123 label, what Kubernetes accepts for namespace names.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules#microsoftcontainerservice
CLUSTER_NAME_PATTERN = r"^[a-zA-Z0-9]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9])?$"
RESOURCE_GROUP_PATTERN = r"^[-\w._()]{0,89}[-\w_()]$"
TAINT_PATTERN = r"^[A-Za-z0-9][-A-Za-z0-9_./]*=[-A-Za-z0-9_.]*:(NoSchedule|PreferNoSchedule|NoExecute)$"
KUBE_QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P)?$"
# AgentPoolUpgradeSettings.maxSurge / maxUnavailable: "an integer (e.g. '5') or a percentage (e.g. '50%')"
# (AKS API 2025-09-01, as pulumi_azure_native documents AgentPoolUpgradeSettingsArgs).
NODE_COUNT_OR_PERCENT_PATTERN = r"^(0|[1-9]\d*|(0|[1-9]\d?|100)%)$"


def _typed_back_to_text(value: object) -> object:
    """``pulumi config set --path`` stores ``true``/``false`` as booleans and base-10 digits without a leading
    zero as integers (``coerce`` in pulumi/pulumi sdk/go/common/resource/config/object.go, v3.259.0; ``--type
    string`` keeps text), so ``upgrade.maxSurge 1`` or ``zones[0] 1`` reach a string field as ``1``. Give back
    the text the user typed; anything else is left to the field's own checks."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return value


# A string field the CLI may have turned into a number or a boolean.
ConfigText = Annotated[str, BeforeValidator(_typed_back_to_text)]
# The validator outermost, so the pattern stays in the JSON Schema editors read (upgrade.maxSurge 2).
CountOrPercent = Annotated[str, Field(pattern=NODE_COUNT_OR_PERCENT_PATTERN), BeforeValidator(_typed_back_to_text)]

Vendor = Literal["nvidia", "amd"]
MigProfile = Literal["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"]
DayOfWeek = Literal["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
PoolName = Annotated[str, Field(pattern=POOL_NAME_PATTERN)]
DnsLabel = Annotated[str, Field(pattern=DNS_LABEL_PATTERN)]
# The validator outermost, so the pattern stays in the JSON Schema editors read.
Quantity = Annotated[str, Field(pattern=KUBE_QUANTITY_PATTERN), BeforeValidator(_typed_back_to_text)]


class Spec(BaseModel):
    """Base for every config object: camelCase keys, nothing unknown, frozen once validated."""

    # allow_inf_nan=False: NaN and infinity cannot be written in JSON, the form every value reaches Azure in.
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, allow_inf_nan=False)


# ---------------------------------------------------------------- cluster


class NotAllowedDates(Spec):
    start: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    end: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


class MaintenanceWindow(Spec):
    """An AKS planned-maintenance window (aksManagedAutoUpgradeSchedule / aksManagedNodeOSUpgradeSchedule).

    ``schedule`` picks the AKS schedule type; ``weekly`` is what most GPU platforms want.
    https://learn.microsoft.com/azure/aks/planned-maintenance
    """

    schedule: Literal["weekly", "daily", "absoluteMonthly", "relativeMonthly"] = "weekly"
    day_of_week: DayOfWeek | None = None
    interval_weeks: int = Field(default=1, ge=1, le=4)
    interval_days: int = Field(default=1, ge=1, le=7)
    interval_months: int = Field(default=1, ge=1, le=6)
    day_of_month: int | None = Field(default=None, ge=1, le=31)
    week_index: Literal["First", "Second", "Third", "Fourth", "Last"] | None = None
    start_time: str = Field(pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    duration_hours: int = Field(ge=4, le=24)
    utc_offset: str = Field(default="+00:00", pattern=r"^[+-](0\d|1[0-4]):[0-5]\d$")
    start_date: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    not_allowed_dates: tuple[NotAllowedDates, ...] = ()


class Maintenance(Spec):
    node_os: MaintenanceWindow | None = None
    auto_upgrade: MaintenanceWindow | None = None


class SystemPool(Spec):
    name: PoolName = "system"
    vm_size: str = "Standard_D4ds_v5"
    min_count: int = Field(default=2, ge=1, le=1000)
    max_count: int = Field(default=3, ge=1, le=1000)
    zones: tuple[ConfigText, ...] = ()
    os_sku: Literal["Ubuntu", "AzureLinux"] = "Ubuntu"


class DeployerAccess(Spec):
    """Kubernetes access for the identity that runs ``pulumi up``: with Entra ID RBAC on and local accounts off,
    nothing else lets it create the in-cluster objects of the same deployment."""

    # A role assignment of "Azure Kubernetes Service RBAC Cluster Admin" on the cluster to the client config's
    # object id (components/azure/cluster.py). Off: list an admin group instead (entraAdminGroupObjectIds).
    enabled: bool = True
    # The assignment's principalType. ARM refuses a wrong one ("UnmatchedPrincipalType"), and the azure-native SDK
    # sends "User" when none is given, so it is always set: "auto" is ServicePrincipal when the azure-native
    # provider signs in as a service principal, with OIDC or a managed identity (clientId / useOidc / useMsi config
    # or ARM_CLIENT_ID / ARM_USE_OIDC / ARM_USE_MSI), and User otherwise (az login as a person). Set it when that
    # guess is wrong, e.g. `az login --service-principal` with CLI authentication.
    principal_type: Literal["auto", "User", "ServicePrincipal"] = "auto"


class ClusterConfig(Spec):
    resource_group: str = Field(pattern=RESOURCE_GROUP_PATTERN)
    name: str = Field(pattern=CLUSTER_NAME_PATTERN)
    # Adopt a cluster that already exists: nothing Azure-side is created, the rest attaches to it.
    existing: bool = False
    location: str | None = None
    # Checked against the AKS release calendar (components/data/aks_versions.yaml), which also sets the default.
    kubernetes_version: str = Field(default=kubernetes_calendar().default, pattern=r"^1\.\d{2}(\.\d+)?$")
    sku_tier: Literal["Free", "Standard", "Premium"] = "Standard"
    # AKSLongTermSupport keeps a minor supported a year past its end of life; it needs the Premium tier.
    support_plan: Literal["KubernetesOfficial", "AKSLongTermSupport"] = "KubernetesOfficial"
    dns_prefix: str | None = None
    network_policy: Literal["azure", "calico", "cilium", "none"] = "cilium"
    pod_cidr: str = "10.244.0.0/16"
    upgrade_channel: Literal["rapid", "stable", "patch", "node-image", "none"] = "patch"
    node_os_upgrade_channel: Literal["None", "Unmanaged", "NodeImage", "SecurityPatch"] = "NodeImage"
    maintenance: Maintenance = Maintenance()
    system_pool: SystemPool = SystemPool()
    entra_admin_group_object_ids: tuple[str, ...] = ()
    deployer_access: DeployerAccess = DeployerAccess()
    # How the kubeconfig's kubelogin gets a token. AKS returns `--login devicecode`, which waits for a person at a
    # browser; the platform rewrites it to this mode (components/azure/kubeconfig.py): azurecli (the `az login`
    # session), workloadidentity (federated CI), spn (a service principal from AZURE_CLIENT_ID/_SECRET), msi.
    kubelogin_mode: Literal["azurecli", "workloadidentity", "spn", "msi"] = "azurecli"
    local_accounts: bool = False
    workload_identity: bool = True
    kaito: bool = False
    protect: bool = False
    tags: dict[str, ConfigText] = {}


# ---------------------------------------------------------------- GPU pools


class UpgradeSettings(Spec):
    """How AKS replaces a pool's nodes on a node image or Kubernetes upgrade. Spot pools take none of these: AKS
    upgrades them without surge nodes and without a drain (config rules refuse maxSurge/maxUnavailable there)."""

    # Extra GPU VMs added while old ones drain; needs that much GPU quota to spare. Not set: "1", or "0" when
    # maxUnavailable is set.
    max_surge: CountOrPercent | None = None
    # Nodes drained at once without a replacement first (maxSurge "0"): no spare quota needed, but the pool runs
    # short by that many GPU nodes during the upgrade.
    max_unavailable: CountOrPercent | None = None
    drain_timeout_in_minutes: int = Field(default=30, ge=1, le=1440)
    node_soak_duration_in_minutes: int = Field(default=0, ge=0, le=30)

    @property
    def effective_max_surge(self) -> str:
        if self.max_surge is not None:
            return self.max_surge
        return "0" if self.max_unavailable is not None else "1"


class GpuPoolConfig(Spec):
    name: PoolName
    vendor: Vendor
    vm_size: str = Field(min_length=1)
    workload: DnsLabel
    autoscaling: bool = True
    min_count: int = Field(default=0, ge=0, le=1000)
    max_count: int = Field(default=1, ge=0, le=1000)
    count: int | None = Field(default=None, ge=0, le=1000)
    mig_profile: MigProfile | None = None
    time_slicing_replicas: int | None = Field(default=None, ge=2, le=64)
    nvme_cache: bool = False
    spot: bool = False
    spot_max_price: float = -1
    spot_eviction_policy: Literal["Delete", "Deallocate"] = "Delete"
    os_sku: Literal["Ubuntu", "AzureLinux"] = "Ubuntu"
    os_disk_type: Literal["Managed", "Ephemeral"] = "Managed"
    os_disk_size_gb: int | None = Field(default=None, ge=30, le=2048)
    zones: tuple[ConfigText, ...] = ()
    max_pods: int = Field(default=30, ge=10, le=250)
    taints: tuple[Annotated[str, Field(pattern=TAINT_PATTERN)], ...] = ()
    labels: dict[str, ConfigText] = {}
    upgrade: UpgradeSettings = UpgradeSettings()
    # AKS installs the NVIDIA driver unless told not to; AMD pools and GPU-Operator-managed drivers use None.
    gpu_driver: Literal["Install", "None"] | None = None
    # For VM sizes the catalog does not know: the pool states its own GPU facts.
    gpu_count: int | None = Field(default=None, ge=1, le=16)
    gpu_model: str | None = None
    min_driver_version: Annotated[str, Field(pattern=r"^\d+(\.\d+){0,3}$"), BeforeValidator(_typed_back_to_text)] | None = None
    smoke_test: bool | None = None
    protect: bool = False

    def effective_gpu_driver(self, device_plugin_mode: str) -> Literal["Install", "None"]:
        """The agent pool's gpuProfile.driver: as set, else None where AKS installs no driver (AMD) or the GPU Operator
        owns the NVIDIA one (devicePlugin.mode gpu-operator), else Install."""
        if self.gpu_driver is not None:
            return self.gpu_driver
        operator_manages = self.vendor == "nvidia" and device_plugin_mode == "gpu-operator"
        return "None" if self.vendor == "amd" or operator_manages else "Install"

    @field_validator("labels")
    @classmethod
    def _label_keys_are_kubernetes_keys(cls, labels: dict[str, str]) -> dict[str, str]:
        key = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
        bad = [name for name in labels if not key.match(name)]
        if bad:
            raise ValueError(f"not a Kubernetes label key: {', '.join(bad)}")
        return labels


# ---------------------------------------------------------------- workloads


Port = Annotated[int, Field(ge=1, le=65535)]


class EgressRule(Spec):
    # Parsed as a network (and host bits flagged) by the workload rules.
    cidr: str = Field(pattern=r"^[0-9a-fA-F:.]+/\d{1,3}$")
    # No ports: every port of `protocol`.
    ports: tuple[Port, ...] = ()
    protocol: Literal["TCP", "UDP"] = "TCP"


class IngressFrom(Spec):
    namespace: DnsLabel
    # TCP ports; none: all traffic from that namespace.
    ports: tuple[Port, ...] = ()


class NetworkAccess(Spec):
    allow_dns: bool = True
    allow_same_namespace: bool = False
    allow_to_namespaces: tuple[DnsLabel, ...] = ()
    allow_from_namespaces: tuple[IngressFrom, ...] = ()
    allow_egress: tuple[EgressRule, ...] = ()


class QuotaLimits(Spec):
    cpu: Quantity | None = None
    memory: Quantity | None = None
    pods: int | None = Field(default=None, ge=1)
    persistent_volume_claims: int | None = Field(default=None, ge=0)
    requests_storage: Quantity | None = None


class DefaultRequests(Spec):
    cpu: Quantity = "500m"
    memory: Quantity = "1Gi"


class RoleBindingSpec(Spec):
    group_object_id: str = Field(pattern=r"^[0-9a-fA-F-]{36}$")
    role: Literal["edit", "view"]


class WorkloadConfig(Spec):
    name: DnsLabel
    type: DnsLabel
    gpu_quota: int = Field(ge=0, le=100000)
    # Place the namespace on one named pool; by default every pool whose workload equals `type`.
    pool: PoolName | None = None
    pod_security: Literal["baseline", "restricted"] = "baseline"
    quota: QuotaLimits = QuotaLimits()
    default_requests: DefaultRequests = DefaultRequests()
    network: NetworkAccess = NetworkAccess()
    role_bindings: tuple[RoleBindingSpec, ...] = ()
    nvme_volume: bool = False
    # RDMA/InfiniBand jobs (ND sizes) need CAP_IPC_LOCK, which Pod Security baseline forbids: the namespace then
    # enforces baseline plus IPC_LOCK through its own admission policy (components/admission/pod_security.py).
    rdma: bool = False


# ---------------------------------------------------------------- in-cluster GPU enablement


class DevicePluginConfig(Spec):
    mode: Literal["daemonset", "gpu-operator"] = "daemonset"
    mig_strategy: Literal["single", "mixed"] = "single"
    # Time-slicing replicas for every non-MIG NVIDIA pool; a pool's timeSlicingReplicas overrides it.
    time_slicing_replicas: int | None = Field(default=None, ge=2, le=64)
    nvidia_image: str | None = None
    gpu_operator_chart_version: str | None = None
    amd_mode: Literal["daemonset", "gpu-operator"] = "daemonset"
    amd_image: str | None = None
    amd_operator_chart_version: str | None = None
    # amdMode gpu-operator: the operator's KMM builds the amdgpu driver image and pushes it here (a repository,
    # no tag: the operator tags it per kernel), and needs cert-manager installed first. Both are refused unset.
    amd_driver_image: str | None = Field(default=None, pattern=r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+$")
    cert_manager_installed: bool = False


class AdmissionConfig(Spec):
    # The GPU placement ValidatingAdmissionPolicy (components/admission/policy.py).
    enabled: bool = True
    # The binding's validationActions: Deny refuses, Warn returns a warning, Audit annotates the audit event.
    validation_actions: tuple[Literal["Deny", "Warn", "Audit"], ...] = ("Deny",)
    # Left out of the policy on top of what the stack derives (kube-system, gpu-resources, and per config the
    # Calico and Azure Container Storage v1 namespaces: components/data/admission_exemptions.yaml).
    exempt_namespaces: tuple[DnsLabel, ...] = ()
    # GPU requests only in workload namespaces (and gpuNamespaces); false admits them in any namespace.
    restrict_to_workload_namespaces: bool = True
    # Namespaces besides the workload namespaces where GPU requests are admitted (no pool or quota check there).
    gpu_namespaces: tuple[DnsLabel, ...] = ()

    @field_validator("validation_actions", "exempt_namespaces", "gpu_namespaces")
    @classmethod
    def _no_duplicates(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        # The API server refuses a binding that lists an action twice ("Duplicate value").
        repeated = sorted({value for value in values if values.count(value) > 1})
        if repeated:
            raise ValueError(f"listed more than once: {', '.join(repeated)}")
        return values


class StorageConfig(Spec):
    # Azure Container Storage for the nvmeCache pools. v2 creates the StorageClass `storageClassName` itself;
    # v1 (legacy) creates a StoragePool of that name and ACStor derives the class `acstor-<storageClassName>`.
    # A pinned extensionVersion needs extensionAutoUpgrade: false (checked by the rules).
    flavour: Literal["v2", "v1"] = "v2"
    storage_class_name: DnsLabel = "local-nvme"
    extension_auto_upgrade: bool = True
    extension_version: str | None = None


class SmokeJobConfig(Spec):
    enabled: bool = True
    image: str = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"
    # Also the amd-smi probe's image (components/kube/amd_plugin.py). ROCm's terminal image at ROCm 6.4.1: upstream's
    # rocm-terminal/Dockerfile builds it with ARG ROCM_VERSION=6.4.1 since commit 15f4755 "release-6.4.1"
    # (https://github.com/ROCm/ROCm-docker/blob/master/rocm-terminal/Dockerfile), published as rocm/rocm-terminal
    # (https://hub.docker.com/r/rocm/rocm-terminal). Docker Hub's tag list cannot be read from here; a missing tag or
    # a missing amd-smi shows as an SMI error of `aksgpu validate`, never as a pass.
    amd_image: str = "docker.io/rocm/rocm-terminal:6.4.1"
    deadline_seconds: int = Field(default=600, ge=60, le=7200)


class ValidationConfig(Spec):
    on_deploy: Literal["fail", "warn", "off"] = "warn"
    concurrency: int = Field(default=16, ge=1, le=256)
    exec_timeout_seconds: int = Field(default=30, ge=1, le=600)
    retries: int = Field(default=2, ge=0, le=10)
    smoke_job: SmokeJobConfig = SmokeJobConfig()


# ---------------------------------------------------------------- continuous validation (components/monitoring/)

# ARM ids as Azure writes them; resource types are case-insensitive in ARM, so the patterns are too.
# https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules
ACTION_GROUP_ID_PATTERN = r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/microsoft\.insights/actionGroups/[^/]+$"
MONITOR_WORKSPACE_ID_PATTERN = r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/microsoft\.monitor/accounts/[^/]+$"
# Microsoft.Monitor/accounts names, as the REST spec publishes them (Microsoft.Monitor/accounts@2023-04-03 in
# Azure/bicep-types-az, generated from azure-rest-api-specs) is ^(?!-)[a-zA-Z0-9-]+[^-]$; written without the
# look-ahead, which pydantic's regex engine lacks (the same strings match). It states no length.
MONITOR_WORKSPACE_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9-]*[^-]$"


class AzureMonitorSettings(Spec):
    """Azure Monitor managed service for Prometheus: where the metrics go and who hears the alerts."""

    # The Azure Monitor workspace to create in the cluster's resource group (default: `<cluster name>-amw`, with any
    # `_` as `-`), unless workspaceResourceId names an existing one, which is then used and no workspace is created.
    workspace_name: str | None = Field(default=None, pattern=MONITOR_WORKSPACE_NAME_PATTERN)
    workspace_resource_id: str | None = Field(default=None, pattern=MONITOR_WORKSPACE_ID_PATTERN)
    # Action groups every alert of the rule groups notifies (email, Teams, PagerDuty...). None: alerts appear in
    # Azure Monitor alerts in the portal only.
    action_group_ids: tuple[Annotated[str, Field(pattern=ACTION_GROUP_ID_PATTERN)], ...] = ()


class PrometheusOperatorSettings(Spec):
    """A Prometheus Operator the team already runs (kube-prometheus-stack and the like)."""

    # Where the PodMonitors and the PrometheusRule go (the operator's podMonitorNamespaceSelector and
    # ruleNamespaceSelector must include it).
    namespace: DnsLabel = "gpu-resources"
    # Put on the PodMonitors and the PrometheusRule so the operator's podMonitorSelector and ruleSelector pick them,
    # e.g. {release: kube-prometheus-stack} for that chart's defaults.
    labels: dict[str, str] = {}


class AlertThresholds(Spec):
    """When the waste and slowdown alerts fire. Health alerts (Xid, ECC, row remapping) have no threshold."""

    # A GPU allocated to a pod counts as idle below this utilisation (percent; MIG slices: graphics engine active).
    idle_utilization_percent: int = Field(default=5, ge=1, le=50)
    # ... for this long, every evaluation.
    idle_minutes: int = Field(default=60, ge=10, le=1440)
    # A GPU node above its pool's minCount that runs no GPU pod this long (the cluster autoscaler removes an unneeded
    # node after 10 minutes by default, so anything longer means something keeps it).
    empty_node_minutes: int = Field(default=30, ge=10, le=1440)
    # A workload namespace whose peak GPU requests over quotaWindowHours stay below this share of its GPU quota.
    quota_used_below_percent: int = Field(default=25, ge=1, le=99)
    quota_window_hours: int = Field(default=24, ge=1, le=168)
    # HW slowdown, HW thermal slowdown or power brake reported this long without a break.
    throttle_minutes: int = Field(default=15, ge=1, le=720)


class MonitoringConfig(Spec):
    # GPU metrics exporters on every GPU pool, the scrape configuration and the alert rules. Off: none of it.
    enabled: bool = True
    # azure-monitor: Azure Monitor managed Prometheus (the cluster's azureMonitorProfile, a workspace, the data
    # collection rule, PrometheusRuleGroups); prometheus-operator: PodMonitors and a PrometheusRule for an operator
    # the team runs. `aksgpu rules --stack <name>` prints the same rules as a Prometheus rule file either way.
    engine: Literal["azure-monitor", "prometheus-operator"] = "azure-monitor"
    azure_monitor: AzureMonitorSettings = AzureMonitorSettings()
    prometheus_operator: PrometheusOperatorSettings = PrometheusOperatorSettings()
    alerts: AlertThresholds = AlertThresholds()
    scrape_interval_seconds: int = Field(default=30, ge=10, le=300)
    # Override the pins in components/data/gpu_exporters.yaml (the whole image reference).
    dcgm_exporter_image: str | None = None
    amd_exporter_image: str | None = None


class PlatformConfig(Spec):
    """The in-cluster part of a stack: GPU pools and what runs for them. Components that need no cluster
    settings (device plugin, admission, NVMe cache, validation) take this much."""

    gpu_pools: tuple[GpuPoolConfig, ...] = ()
    workloads: tuple[WorkloadConfig, ...] = ()
    device_plugin: DevicePluginConfig = DevicePluginConfig()
    admission: AdmissionConfig = AdmissionConfig()
    storage: StorageConfig = StorageConfig()
    validation: ValidationConfig = ValidationConfig()
    monitoring: MonitoringConfig = MonitoringConfig()


class StackConfig(PlatformConfig):
    """Everything under the ``aks-gpu:`` namespace of a stack file, plus the Azure location."""

    location: str = Field(min_length=1)
    cluster: ClusterConfig
