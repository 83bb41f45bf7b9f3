"""The stack config as ``TypedDict``s: the shape public components take as ``args``. GENERATED from the pydantic
models in ``components/aks_gpu/config/models.py`` by ``python -m aks_gpu.config.generate`` (``make schema``): edit the
models, never this file; ``tests/config/test_generated.py`` fails when it is stale.

Pulumi's component schema inference reads these (snake_case here, camelCase in the schema and in every other
language's SDK), and each field's docstring (the model field's description, its choices and its default) becomes
its description there, so TypeScript, Go, C# and YAML stacks get the same keys and the same words as a stack file.
They carry no rules: each component validates what it gets with the models, the one place the rules live.

Plain Python types only (the inference accepts no unions): enum-like values are ``str`` here, checked by the models.

Plain or ``pulumi.Input``, per field. A field is plain where its value decides which resources exist, what they are
named (their URNs) or what the cross-key rules compare it with before anything is registered: pools (name, vendor,
VM size, counts, MIG), the cluster, the device plugin, admission, storage, validation. Other stacks' values (a
``StackReference`` output, a resource's output) are accepted where they only fill in values: a workload namespace's
``name``, ``type`` and ``gpu_quota`` (``models.TAKES_OUTPUT``; ``GpuWorkloadNamespace`` checks them when they are
known), and the names and placements the components take beside their specs (``resource_group_name``,
``cluster_name``, ``resource_name``, ``node_selector``, ``tolerations``). ``GpuPlatform``, ``GpuAdmissionPolicy``
and ``NvmeCache`` compare every workload with the pools first: they refuse an output in a workload with the property
path and why (``components/aks_gpu/args.py``).
"""

# No `from __future__ import annotations`: the schema inference reads these annotations at run time.
from typing import NotRequired, TypedDict

import pulumi


class NotAllowedDatesSpec(TypedDict):
    """Days no maintenance may start in."""

    start: str
    """First blocked day, YYYY-MM-DD."""
    end: str
    """Last blocked day, YYYY-MM-DD."""


class MaintenanceWindowSpec(TypedDict):
    """An AKS planned-maintenance window (aksManagedAutoUpgradeSchedule / aksManagedNodeOSUpgradeSchedule). https://learn.microsoft.com/azure/aks/planned-maintenance"""

    schedule: NotRequired[str]
    """The AKS schedule type; weekly is what most GPU platforms want. One of: weekly, daily, absoluteMonthly, relativeMonthly. Default: weekly."""
    day_of_week: NotRequired[str]
    """The day of a weekly or relativeMonthly window. One of: Sunday, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday."""
    interval_weeks: NotRequired[int]
    """weekly: every this many weeks. Default: 1."""
    interval_days: NotRequired[int]
    """daily: every this many days. Default: 1."""
    interval_months: NotRequired[int]
    """absoluteMonthly and relativeMonthly: every this many months. Default: 1."""
    day_of_month: NotRequired[int]
    """absoluteMonthly: the day of the month."""
    week_index: NotRequired[str]
    """relativeMonthly: which week of the month. One of: First, Second, Third, Fourth, Last."""
    start_time: str
    """When the window opens, HH:MM in utcOffset."""
    duration_hours: int
    """How long the window stays open, in hours."""
    utc_offset: NotRequired[str]
    """The time zone of startTime, as +HH:MM or -HH:MM. Default: +00:00."""
    start_date: NotRequired[str]
    """The first day the schedule applies, YYYY-MM-DD."""
    not_allowed_dates: NotRequired[list[NotAllowedDatesSpec]]
    """Date ranges no maintenance may start in."""


class MaintenanceSpec(TypedDict):
    """When AKS may upgrade the cluster and the node images."""

    node_os: NotRequired[MaintenanceWindowSpec]
    """When node images (and with them GPU drivers) are upgraded: aksManagedNodeOSUpgradeSchedule."""
    auto_upgrade: NotRequired[MaintenanceWindowSpec]
    """When Kubernetes itself is upgraded: aksManagedAutoUpgradeSchedule."""


class SystemPoolSpec(TypedDict):
    """The system node pool: CoreDNS, metrics-server and the like, tainted CriticalAddonsOnly so nothing else runs there."""

    name: NotRequired[str]
    """The AKS pool name. Default: system."""
    vm_size: NotRequired[str]
    """The VM size of the system nodes. Default: Standard_D4ds_v5."""
    min_count: NotRequired[int]
    """The fewest system nodes the autoscaler keeps. Default: 2."""
    max_count: NotRequired[int]
    """The most system nodes the autoscaler starts. Default: 3."""
    zones: NotRequired[list[str]]
    """Availability zones, e.g. [1, 2, 3]."""
    os_sku: NotRequired[str]
    """The node OS. One of: Ubuntu, AzureLinux. Default: Ubuntu."""


class CpuPoolSpec(TypedDict):
    """A small autoscaled CPU user pool, untainted: the CPU companions of GPU jobs (Ray heads, MPI launchers, trainer initializers, gateways) run here, since the system pool is tainted CriticalAddonsOnly and the GPU pools are tainted for GPU work. Its nodes carry ``serves.aks-gpu/<type>=true`` for every workload type of the stack, so each workload namespace's Pods may land here (the namespace's PodNodeSelector annotation asks for its type's label). A list of its own, not a GPU pool without a GPU: nothing a GPU pool needs (vendor, workload type, driver, MIG, quota) applies. User pools may scale to zero (https://learn.microsoft.com/azure/aks/scale-cluster#scale-user-node-pools-to-0)."""

    name: str
    """The AKS pool name: a lowercase letter, then up to 11 lowercase letters or digits."""
    vm_size: NotRequired[str]
    """The VM size of the CPU nodes. Default: Standard_D8ds_v5."""
    min_count: NotRequired[int]
    """The fewest nodes (0: the pool scales to zero). Default: 0."""
    max_count: NotRequired[int]
    """The most nodes the autoscaler starts. Default: 3."""
    zones: NotRequired[list[str]]
    """Availability zones, e.g. [1, 2, 3]."""
    os_sku: NotRequired[str]
    """The node OS. One of: Ubuntu, AzureLinux. Default: Ubuntu."""
    max_pods: NotRequired[int]
    """The most pods per node. Default: 30."""
    protect: NotRequired[bool]
    """Protect the pool from pulumi destroy and replacement. Default: false."""


class DeployerAccessSpec(TypedDict):
    """Kubernetes access for the identity that runs ``pulumi up``: with Entra ID RBAC on and local accounts off, nothing else lets it create the in-cluster objects of the same deployment."""

    enabled: NotRequired[bool]
    """Grant the deploying identity Azure Kubernetes Service RBAC Cluster Admin on the cluster; off: list an admin group in entraAdminGroupObjectIds instead. Default: true."""
    principal_type: NotRequired[str]
    """The role assignment's principalType. auto: ServicePrincipal when the azure-native provider signs in as an application (clientId, useOidc, useMsi, or ARM_CLIENT_ID / ARM_USE_OIDC / ARM_USE_MSI) or the Azure CLI login it falls back to is one (az login --service-principal or --identity, read from azureProfile.json), else User; set it when that guess is wrong. One of: auto, User, ServicePrincipal. Default: auto."""


class ClusterSpec(TypedDict):
    """The AKS cluster the GPU pools attach to, created with safe defaults or adopted as it is."""

    resource_group: str
    """The cluster's resource group: created by the stack unless existingResourceGroup is true."""
    existing_resource_group: NotRequired[bool]
    """Adopt resourceGroup as it exists (looked up, never created or deleted); false: the stack creates it, and pulumi destroy deletes it. An adopted cluster (existing: true) always adopts its group. Default: false."""
    name: str
    """The AKS cluster's name."""
    existing: NotRequired[bool]
    """Adopt a cluster that already exists: nothing Azure-side is created, the rest attaches to it. Default: false."""
    kubeconfig: NotRequired[str]
    """A kubeconfig file of a cluster that already runs: only the in-cluster layer is deployed onto it (through a Kubernetes provider built from the file) and no Azure resource is created or read."""
    location: NotRequired[str]
    """The cluster's Azure region, when it differs from azure-native:location."""
    kubernetes_version: NotRequired[str]
    """1.NN or 1.NN.P, supported on AKS today (components/aks_gpu/data/aks_versions.yaml). Default: 1.36."""
    sku: NotRequired[str]
    """AKS Standard, or AKS Automatic (managed system nodes, node auto-provisioning, Deployment Safeguards enforced): GPU pools there are Karpenter NodePools (docs/automatic.md). One of: Standard, Automatic. Default: Standard."""
    node_provisioning: NotRequired[str]
    """Node auto-provisioning (Karpenter) on a Standard cluster: Auto lets GPU pools with provisioning nap be NodePools. Not set: Auto on Automatic, Manual on Standard. One of: Manual, Auto."""
    sku_tier: NotRequired[str]
    """The AKS pricing tier. One of: Free, Standard, Premium. Default: Standard."""
    support_plan: NotRequired[str]
    """AKSLongTermSupport keeps a minor supported a year past its end of life; it needs skuTier Premium. One of: KubernetesOfficial, AKSLongTermSupport. Default: KubernetesOfficial."""
    dns_prefix: NotRequired[str]
    """The API server's DNS prefix (default: the cluster name)."""
    network_policy: NotRequired[str]
    """The network policy engine; none is refused while workload namespaces exist. One of: azure, calico, cilium, none. Default: cilium."""
    pod_cidr: NotRequired[str]
    """The pod network of Azure CNI overlay. Default: 10.244.0.0/16."""
    service_cidr: NotRequired[str]
    """The Kubernetes service address range (default: AKS's, 10.0.0.0/16); set together with dnsServiceIp."""
    dns_service_ip: NotRequired[str]
    """The cluster DNS service's address inside serviceCidr (default: AKS's, 10.0.0.10)."""
    upgrade_channel: NotRequired[str]
    """How AKS upgrades Kubernetes (node-image is legacy and warned about). One of: rapid, stable, patch, node-image, none. Default: patch."""
    node_os_upgrade_channel: NotRequired[str]
    """How AKS upgrades node images; NodeImage brings the newest production GPU driver and CVE fixes. One of: None, Unmanaged, NodeImage, SecurityPatch. Default: NodeImage."""
    maintenance: NotRequired[MaintenanceSpec]
    """When AKS may upgrade the cluster and the node images."""
    system_pool: NotRequired[SystemPoolSpec]
    """The system node pool."""
    entra_admin_group_object_ids: NotRequired[list[str]]
    """Entra ID groups that administer the cluster (Kubernetes cluster-admin), by object id."""
    deployer_access: NotRequired[DeployerAccessSpec]
    """Kubernetes access for the identity that runs pulumi up."""
    kubelogin_mode: NotRequired[str]
    """How the kubeconfig's kubelogin signs in: azurecli (the az login session), workloadidentity (federated CI), spn (a service principal from AZURE_CLIENT_ID and AZURE_CLIENT_SECRET) or msi (the machine's managed identity). One of: azurecli, workloadidentity, spn, msi. Default: azurecli."""
    local_accounts: NotRequired[bool]
    """Keep AKS local accounts (off: Entra ID only). Default: false."""
    workload_identity: NotRequired[bool]
    """The OIDC issuer and workload identity. Default: true."""
    kaito: NotRequired[bool]
    """The KAITO (AI toolchain operator) add-on. Default: false."""
    protect: NotRequired[bool]
    """Protect the cluster from pulumi destroy and replacement. Default: false."""
    tags: NotRequired[dict[str, str]]
    """Azure tags on the cluster (beside managed-by: aks-gpu)."""


class UpgradeSettingsSpec(TypedDict):
    """How AKS replaces a pool's nodes on a node image or Kubernetes upgrade. Spot pools take none of these: AKS upgrades them without surge nodes and without a drain (config rules refuse maxSurge/maxUnavailable there)."""

    max_surge: NotRequired[str]
    """Extra GPU VMs added while old ones drain (needs that much GPU quota to spare): a count or a percentage. Not set: 1, or 0 when maxUnavailable is set."""
    max_unavailable: NotRequired[str]
    """Nodes drained at once without a replacement first (maxSurge 0): no spare quota needed, but the pool runs that many GPU nodes short during the upgrade."""
    drain_timeout_in_minutes: NotRequired[int]
    """How long a pod (a long training job) may hold a node's drain. Default: 30."""
    node_soak_duration_in_minutes: NotRequired[int]
    """How long to wait between nodes. Default: 0."""
    undrainable_node_behavior: NotRequired[str]
    """A node whose drain cannot finish (a PDB, a pod outliving drainTimeoutInMinutes): Cordon keeps it cordoned on its old image while the upgrade goes on (label kubernetes.azure.com/upgrade-status=Quarantined); Schedule makes it schedulable again and the upgrade fails. Not set: Cordon for workload training, else AKS's default (Schedule). One of: Cordon, Schedule."""


class NapPoolSettingsSpec(TypedDict):
    """How Karpenter removes a NAP pool's nodes (the NodePool's disruption; components/aks_gpu/azure/node_provisioning.py)."""

    consolidation: NotRequired[str]
    """WhenEmpty: only a node with no pod left is removed, and never one under a running job (training); WhenEmptyOrUnderutilized: Karpenter also moves pods to pack nodes, one node at a time (stateless serving). One of: WhenEmpty, WhenEmptyOrUnderutilized. Default: WhenEmpty."""
    consolidate_after_minutes: NotRequired[int]
    """How long a node stays empty (or underutilised) before it is removed. Default: 10."""


class GpuPoolSpec(TypedDict):
    """One AKS agent pool of GPU VMs, tainted and labelled so only GPU work lands on it."""

    name: str
    """The AKS pool name: a lowercase letter, then up to 11 lowercase letters or digits."""
    vendor: str
    """The GPU vendor. One of: nvidia, amd."""
    vm_size: str
    """The GPU VM size (`aksgpu catalog` lists the sizes the rules know)."""
    workload: str
    """The workload type this pool serves: namespaces of this type run their GPU pods here."""
    autoscaling: NotRequired[bool]
    """Let the cluster autoscaler size the pool between minCount and maxCount. Default: true."""
    min_count: NotRequired[int]
    """The fewest nodes (0: the pool scales to zero). Default: 0."""
    max_count: NotRequired[int]
    """The most nodes. Default: 1."""
    count: NotRequired[int]
    """The node count, with autoscaling false."""
    mig_profile: NotRequired[str]
    """Partition every GPU into MIG instances of this size (NVIDIA A100, H100, H200): AKS's name (MIG3g) or NVIDIA's, as `aksgpu catalog` prints it (3g.40gb). One of: MIG1g, MIG2g, MIG3g, MIG4g, MIG7g."""
    time_slicing_replicas: NotRequired[int]
    """Share each GPU between this many pods (time-slicing); not with MIG."""
    nvme_cache: NotRequired[bool]
    """Serve the VMs' local NVMe disks as a cache volume (Azure Container Storage); data is lost with the VM. Default: false."""
    spot: NotRequired[bool]
    """Spot VMs: cheaper, evicted when Azure needs the capacity. Default: false."""
    spot_max_price: NotRequired[float]
    """The most to pay per VM hour in US dollars; -1: up to the on-demand price. Default: -1."""
    spot_eviction_policy: NotRequired[str]
    """What happens to an evicted spot VM (Deallocate keeps it counting against quota). One of: Delete, Deallocate. Default: Delete."""
    os_sku: NotRequired[str]
    """The node OS. One of: Ubuntu, AzureLinux. Default: Ubuntu."""
    os_disk_type: NotRequired[str]
    """The OS disk kind. One of: Managed, Ephemeral. Default: Managed."""
    os_disk_size_gb: NotRequired[int]
    """The OS disk size in GB (default: the VM's)."""
    zones: NotRequired[list[str]]
    """Availability zones, e.g. [1, 2, 3]."""
    max_pods: NotRequired[int]
    """The most pods per node. Default: 30."""
    taints: NotRequired[list[str]]
    """Extra node taints, key=value:Effect (the vendor's GPU taint is always there)."""
    labels: NotRequired[dict[str, str]]
    """Extra node labels (not on the keys the platform sets: components/aks_gpu/naming.py)."""
    upgrade: NotRequired[UpgradeSettingsSpec]
    """How AKS replaces the pool's nodes on upgrades."""
    gpu_driver: NotRequired[str]
    """gpuProfile.driver: Install (AKS installs the NVIDIA driver) or None. Not set: None for AMD and where the GPU Operator owns the driver, else Install. One of: Install, None."""
    gpu_count: NotRequired[int]
    """GPUs per VM, for a size the catalog does not know."""
    gpu_model: NotRequired[str]
    """The GPU model, for a size the catalog does not know."""
    min_driver_version: NotRequired[str]
    """The oldest driver aksgpu validate accepts on the pool's nodes, e.g. 565.57."""
    smoke_test: NotRequired[bool]
    """Run the smoke Job on this pool (not set: only where minCount keeps a node running)."""
    protect: NotRequired[bool]
    """Protect the pool from pulumi destroy and replacement. Default: false."""
    repair: NotRequired[bool]
    """With remediation.repair on: NVSentinel may reboot this pool's faulty nodes (false: its nodes are only quarantined and drained, a person repairs them). Default: true."""
    provisioning: NotRequired[str]
    """agentPool: an AKS agent pool; nap: a Karpenter NodePool and AKSNodeClass of node auto-provisioning (the same taint and labels; needs cluster.sku Automatic or cluster.nodeProvisioning Auto). Not set: nap on Automatic, else agentPool. One of: agentPool, nap."""
    nap: NotRequired[NapPoolSettingsSpec]
    """provisioning nap: how Karpenter removes the pool's nodes."""
    managed_gpu: NotRequired[bool]
    """AKS-managed GPU experience (AKS installs driver, device plugin and DCGM exporter): a NAP pool's AKSNodeClass tag; on an agent pool refused while the installed provider's API has no gpuProfile.nvidia.managementMode (docs/platform.md). Default: false."""


class EgressRuleSpec(TypedDict):
    """Egress to one network."""

    cidr: str
    """The network, in CIDR notation (e.g. 10.20.0.0/16)."""
    ports: NotRequired[list[int]]
    """The ports; none: every port of protocol."""
    protocol: NotRequired[str]
    """The protocol. One of: TCP, UDP. Default: TCP."""


class IngressFromSpec(TypedDict):
    """Ingress from another namespace."""

    namespace: str
    """The namespace allowed in."""
    ports: NotRequired[list[int]]
    """TCP ports; none: all traffic from that namespace."""


class NetworkAccessSpec(TypedDict):
    """What the namespace's deny-all NetworkPolicy lets through, one allow policy each."""

    allow_dns: NotRequired[bool]
    """Egress to CoreDNS in kube-system. Default: true."""
    allow_same_namespace: NotRequired[bool]
    """Traffic between the namespace's own pods. Default: false."""
    allow_to_namespaces: NotRequired[list[str]]
    """Egress to these namespaces."""
    allow_from_namespaces: NotRequired[list[IngressFromSpec]]
    """Ingress from these namespaces."""
    allow_egress: NotRequired[list[EgressRuleSpec]]
    """Egress to these networks."""


class QuotaLimitsSpec(TypedDict):
    """The namespace's quota beyond its GPUs (requests)."""

    cpu: NotRequired[str]
    """CPU requests in all (requests.cpu), e.g. 64."""
    memory: NotRequired[str]
    """Memory requests in all (requests.memory), e.g. 512Gi."""
    pods: NotRequired[int]
    """Pods in all."""
    persistent_volume_claims: NotRequired[int]
    """PersistentVolumeClaims in all."""
    requests_storage: NotRequired[str]
    """Storage requests in all (requests.storage)."""


class DefaultRequestsSpec(TypedDict):
    """The requests a container gets when it states none (LimitRange), so the quota does not refuse it."""

    cpu: NotRequired[str]
    """CPU request. Default: 500m."""
    memory: NotRequired[str]
    """Memory request. Default: 1Gi."""


class RoleBindingSpec(TypedDict):
    """An Entra ID group bound to a role inside the namespace."""

    group_object_id: str
    """The Entra ID group's object id."""
    role: str
    """edit: the platform's team role aks-gpu-team-edit (Kubernetes' edit without NetworkPolicy writes); view: Kubernetes' view. One of: edit, view."""


class WorkloadSpec(TypedDict):
    """One workload namespace: quota on the GPU resource its pools expose, default requests, a deny-all network policy with opt-in allows, Pod Security labels and Entra ID group bindings."""

    name: pulumi.Input[str]
    """The namespace (a DNS label)."""
    type: pulumi.Input[str]
    """The workload type: pools whose workload equals it serve this namespace."""
    gpu_quota: pulumi.Input[int]
    """GPUs (units of the pools' GPU resource) the namespace may request in all."""
    pool: NotRequired[str]
    """Place the namespace on this one pool (default: every pool whose workload equals type)."""
    pod_security: NotRequired[str]
    """The Pod Security level enforced (restricted is warned about and audited either way). One of: baseline, restricted. Default: baseline."""
    quota: NotRequired[QuotaLimitsSpec]
    """The namespace's quota beyond its GPUs."""
    default_requests: NotRequired[DefaultRequestsSpec]
    """The requests a container gets when it states none."""
    network: NotRequired[NetworkAccessSpec]
    """What the deny-all NetworkPolicy lets through."""
    role_bindings: NotRequired[list[RoleBindingSpec]]
    """Entra ID groups bound to the team role (edit) or view."""
    nvme_volume: NotRequired[bool]
    """Export a ready NVMe cache volume snippet for this namespace. Default: false."""
    rdma: NotRequired[bool]
    """RDMA/InfiniBand jobs: pods may add IPC_LOCK, and nothing else beyond Pod Security baseline. Default: false."""
    borrowing_limit: NotRequired[int]
    """aks-gpu:queueing on: GPUs this team may borrow, on top of gpuQuota, from the idle quota of the other workloads of its type (default: no limit but what they lend)."""
    lending_limit: NotRequired[int]
    """aks-gpu:queueing on: GPUs of its idle gpuQuota this team lends to the other workloads of its type (default: all of it; 0 keeps the whole quota for itself)."""


class DevicePluginSpec(TypedDict):
    """What makes the GPUs schedulable: the vendors' device plugins or GPU Operators."""

    mode: NotRequired[str]
    """NVIDIA: the device plugin DaemonSet, or the NVIDIA GPU Operator (driver and toolkit where AKS installs none, MIG manager, DCGM exporter). One of: daemonset, gpu-operator. Default: daemonset."""
    mig_strategy: NotRequired[str]
    """How MIG pools expose their slices: single (nvidia.com/gpu) or mixed (nvidia.com/mig-<profile>). One of: single, mixed. Default: single."""
    time_slicing_replicas: NotRequired[int]
    """Time-slicing for every NVIDIA pool without MIG; a pool's own setting wins."""
    nvidia_image: NotRequired[str]
    """The NVIDIA device plugin image (default: the pin in aks_gpu/data/device_plugins.yaml)."""
    gpu_operator_chart_version: NotRequired[str]
    """The NVIDIA GPU Operator chart version (default: the pin)."""
    amd_mode: NotRequired[str]
    """AMD: the ROCm device plugin with its node labeller (needs amdgpu on the nodes, which AKS does not install: warned), or the AMD GPU Operator (builds and loads amdgpu). One of: daemonset, gpu-operator. Default: daemonset."""
    amd_image: NotRequired[str]
    """The ROCm device plugin image (default: the pin)."""
    amd_operator_chart_version: NotRequired[str]
    """The AMD GPU Operator chart version (default: the pin)."""
    amd_driver_image: NotRequired[str]
    """amdMode gpu-operator: the repository (no tag) KMM pushes the amdgpu driver image it builds to."""
    cert_manager_installed: NotRequired[bool]
    """amdMode gpu-operator: cert-manager, which the AMD GPU Operator needs, is installed. Default: false."""


class AdmissionSpec(TypedDict):
    """The GPU placement ValidatingAdmissionPolicy (components/aks_gpu/admission/policy.py)."""

    enabled: NotRequired[bool]
    """Install the GPU placement admission policy. Default: true."""
    validation_actions: NotRequired[list[str]]
    """What a violation does: Deny refuses, Warn returns a warning, Audit annotates the audit event. One of: Deny, Warn, Audit. Default: ["Deny"]."""
    exempt_namespaces: NotRequired[list[str]]
    """Left out of the policy on top of the namespaces the stack derives (kube-system, gpu-resources, Calico's, acstor with storage v1: components/aks_gpu/data/admission_exemptions.yaml)."""
    restrict_to_workload_namespaces: NotRequired[bool]
    """GPU requests only in workload namespaces and gpuNamespaces; false admits them anywhere. Default: true."""
    gpu_namespaces: NotRequired[list[str]]
    """More namespaces where GPU requests are admitted (no pool or quota check there)."""


class StorageSpec(TypedDict):
    """Azure Container Storage for the nvmeCache pools."""

    flavour: NotRequired[str]
    """v2 creates the StorageClass storageClassName; v1 (legacy) a StoragePool of that name, and Azure Container Storage the class acstor-<storageClassName>. One of: v2, v1. Default: v2."""
    storage_class_name: NotRequired[str]
    """The StorageClass (v1: StoragePool) name. Default: local-nvme."""
    extension_auto_upgrade: NotRequired[bool]
    """Let AKS upgrade the extension's minor version. Default: true."""
    extension_version: NotRequired[str]
    """v1 only: pin the extension version (needs extensionAutoUpgrade false)."""


class SmokeJobSpec(TypedDict):
    """The per-pool smoke Job: one pod asks for one GPU unit and runs the vendor's SMI tool."""

    enabled: NotRequired[bool]
    """Run the smoke Jobs. Default: true."""
    image: NotRequired[str]
    """The image of NVIDIA pools' Job. Default: nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04."""
    amd_image: NotRequired[str]
    """The image of AMD pools' Job and of the amd-smi probe. Default: docker.io/rocm/rocm-terminal:6.4.1."""
    deadline_seconds: NotRequired[int]
    """How long a Job may run before it fails. Default: 600."""


class DiagnosticsScheduleSpec(TypedDict):
    """The vendor diagnostics on a schedule, in the cluster: a CronJob runs aksgpu validate --deep --quarantine."""

    enabled: NotRequired[bool]
    """Create the CronJob (with its ServiceAccount, its RBAC and the admission policy that fences it) in gpu-resources. Needs image. Default: false."""
    cron: NotRequired[str]
    """When it runs: a five-field cron schedule in UTC (minute hour day-of-month month day-of-week); put it in the maintenance window. Default: 17 2 * * 0."""
    level: NotRequired[int]
    """The dcgmi diag level: 2 (minutes per node) or 3 (about half an hour per node). Default: 2."""
    image: NotRequired[str]
    """The aks-gpu image the CronJob runs, built from the checkout's Dockerfile into your registry and pinned by digest, e.g. myregistry.azurecr.io/aks-gpu@sha256:(64 hex digits)."""


class ValidationSpec(TypedDict):
    """Post-deploy validation: the checks of aksgpu validate, in pulumi up and on the command line."""

    on_deploy: NotRequired[str]
    """After the device plugin rolls out in pulumi up: fail the update on a failed check, warn, or run no checks (off also removes the amd-smi probe). One of: fail, warn, off. Default: warn."""
    concurrency: NotRequired[int]
    """SMI commands run at once. Default: 16."""
    exec_timeout_seconds: NotRequired[int]
    """The time one SMI command may take. Default: 30."""
    retries: NotRequired[int]
    """Retries of a failed command or list on temporary errors. Default: 2."""
    smoke_job: NotRequired[SmokeJobSpec]
    """The per-pool smoke Jobs."""
    diagnostics_on_deploy: NotRequired[bool]
    """After the checks in pulumi up, also run the vendors' diagnostics at level 1 on every GPU node (aksgpu validate --deep: on NVIDIA dcgmi diag, a CUDA context on every GPU, NCCL all-reduce; on AMD amd-smi's RAS counters and ROCm's validation suite; in a pod holding all the node's GPUs); a node not proven healthy counts as a failed check for onDeploy. Off by default: it pulls the diagnostic images onto every GPU node and takes minutes per node. Default: false."""
    diagnostics_schedule: NotRequired[DiagnosticsScheduleSpec]
    """The vendors' diagnostics at level 2 or 3 on a schedule, in the cluster: a CronJob runs aksgpu validate --deep --quarantine on every GPU node; a node that fails is tainted aks-gpu/gpu-quarantine=diagnostic and cordoned, and returns only after a passing run."""


class AlertReceiverSpec(TypedDict):
    """Who an alert reaches: one e-mail address or one webhook (a pager, a chat bridge)."""

    name: str
    """The receiver's name in the action group (unique)."""
    email: NotRequired[str]
    """An e-mail address the alerts go to."""
    webhook: NotRequired[str]
    """An https URL the alerts are posted to (Azure Monitor's common alert schema). A URL that carries a token is a secret: pulumi config set --secret --path."""


class AzureMonitorSettingsSpec(TypedDict):
    """Azure Monitor managed service for Prometheus: where the metrics go and who hears the alerts."""

    workspace_name: NotRequired[str]
    """The Azure Monitor workspace to create in the cluster's resource group (default <cluster name>-amw)."""
    workspace_resource_id: NotRequired[str]
    """An existing workspace to use instead (its ARM id); required for an adopted cluster."""
    action_group_ids: NotRequired[list[str]]
    """Existing action groups every alert notifies (ARM ids)."""
    receivers: NotRequired[list[AlertReceiverSpec]]
    """E-mail addresses and webhooks of an action group the stack creates (<cluster>-gpu-alerts) and every alert notifies, beside actionGroupIds. With neither, a stack with GPU pools is refused: its alerts would reach nobody."""


class PrometheusOperatorSettingsSpec(TypedDict):
    """A Prometheus Operator the team already runs (kube-prometheus-stack and the like)."""

    namespace: NotRequired[str]
    """Where the PodMonitors and the PrometheusRule go (the operator's namespace selectors must include it). Default: gpu-resources."""
    labels: NotRequired[dict[str, str]]
    """Labels the operator's podMonitorSelector and ruleSelector match, e.g. {release: kube-prometheus-stack}."""
    alertmanager_receiver: NotRequired[str]
    """The receiver of the Alertmanager route the GPU alerts reach (route.receiver, or the child route matching severity critical, in the Alertmanager configuration your team deploys). Required with GPU pools; kube-prometheus-stack's default route ends at the receiver null, which notifies nobody, and is refused."""


class AlertThresholdsSpec(TypedDict):
    """When the waste and slowdown alerts fire. Health alerts (Xid, ECC, row remapping) have no threshold."""

    idle_utilization_percent: NotRequired[int]
    """A GPU allocated to a pod counts as idle below this utilisation, in percent. Default: 5."""
    idle_minutes: NotRequired[int]
    """...for this long, in minutes. Default: 60."""
    empty_node_minutes: NotRequired[int]
    """A GPU node above its pool's minCount that runs no GPU pod for this long. Default: 30."""
    quota_used_below_percent: NotRequired[int]
    """A namespace whose peak GPU requests stay below this share of its GPU quota... Default: 25."""
    quota_window_hours: NotRequired[int]
    """...over this many hours. Default: 24."""
    throttle_minutes: NotRequired[int]
    """HW slowdown, thermal slowdown or power brake reported this long without a break. Default: 15."""


class MonitoringSpec(TypedDict):
    """Continuous validation: GPU exporters on every pool, their scraping and the health and waste alert rules."""

    enabled: NotRequired[bool]
    """GPU metrics exporters, scraping and alert rules. Default: true."""
    engine: NotRequired[str]
    """azure-monitor: Azure Monitor managed Prometheus (workspace, data collection, rule groups); prometheus-operator: PodMonitors and a PrometheusRule for an operator the team runs. One of: azure-monitor, prometheus-operator. Default: azure-monitor."""
    azure_monitor: NotRequired[AzureMonitorSettingsSpec]
    """The azure-monitor engine's settings."""
    prometheus_operator: NotRequired[PrometheusOperatorSettingsSpec]
    """The prometheus-operator engine's settings."""
    alerts: NotRequired[AlertThresholdsSpec]
    """When the waste and slowdown alerts fire."""
    scrape_interval_seconds: NotRequired[int]
    """How often the exporters are scraped. Default: 30."""
    dcgm_exporter_image: NotRequired[str]
    """The DCGM exporter image (default: the pin in components/aks_gpu/data/gpu_exporters.yaml)."""
    amd_exporter_image: NotRequired[str]
    """The AMD device metrics exporter image (default: the pin)."""


class RepairSpec(TypedDict):
    """NVSentinel's repair half (docs/remediation.md, "Repair"): fault-remediation asks the janitor to reset a GPU or reboot the node through Azure, with a workload identity whose custom role restarts this cluster's scale set VMs only."""

    enabled: NotRequired[bool]
    """Repair quarantined nodes: a GPU reset where it suffices (GPU Operator pools), else a reboot of the VM through Azure. Needs remediation mode on, cert-manager (certManagerInstalled), the cluster's workload identity, and the circuit breaker enforced: repairs follow quarantines, so maxUnhealthy per windowMinutes is their rate limit. Default: false."""


class RemediationSpec(TypedDict):
    """Quarantine of faulty GPU nodes by NVIDIA NVSentinel (docs/remediation.md): fault-quarantine taints and cordons a node with a fatal GPU fault, node-drainer moves its pods per workload type, bounded by a circuit breaker."""

    mode: NotRequired[str]
    """off: NVSentinel is not deployed; dry-run: it reports what it would quarantine (node annotations, events, metrics) and touches nothing; on: it taints, cordons and drains. One of: off, dry-run, on. Default: off."""
    max_unhealthy: NotRequired[str]
    """The circuit breaker: never more than this many GPU nodes (a count, e.g. 1) or this share of them (e.g. 25%) quarantined at once; past it NVSentinel quarantines nothing more until a person looks. Default: 25%."""
    window_minutes: NotRequired[int]
    """The circuit breaker counts the quarantines of this sliding window, in minutes. Default: 5."""
    drain: NotRequired[dict[str, str]]
    """Per workload type (workloads[].type): how a quarantined node's pods of that type leave it. A type not listed gets defaultDrain. Default: {"training": "DeleteAfterTimeout", "inference": "Immediate"}."""
    default_drain: NotRequired[str]
    """The drain of workload types drain does not list: wait for the pods to finish. One of: Immediate, AllowCompletion, DeleteAfterTimeout. Default: AllowCompletion."""
    drain_timeout_minutes: NotRequired[int]
    """DeleteAfterTimeout: how long a pod may keep running (to checkpoint) after the fault before it is deleted. Default: 60."""
    npd_conditions: NotRequired[bool]
    """Also quarantine on a True AKS Node Problem Detector GPU condition (GPUMissing, XIDErrors, NVLinkStatusInactive, ...), read by NVSentinel's kubernetes-object-monitor. Default: true."""
    chart_version: NotRequired[str]
    """The NVSentinel chart version (default: the pin in components/aks_gpu/data/remediation.yaml)."""
    datastore: NotRequired[str]
    """Where NVSentinel stores health events: external-mongodb (e.g. Azure Cosmos DB for MongoDB; its connection string in the Secret datastoreSecret), mongodb-store (the chart's in-cluster MongoDB, TLS by cert-manager: certManagerInstalled), none (only with mode off). One of: none, external-mongodb, mongodb-store. Default: none."""
    datastore_secret: NotRequired[str]
    """external-mongodb: the Secret in the nvsentinel namespace whose key MONGODB_URI holds the connection string (created by the cluster's owner, never in the stack file)."""
    cert_manager_installed: NotRequired[bool]
    """cert-manager is installed in the cluster: it issues the in-cluster MongoDB's TLS certificates (datastore mongodb-store) and the janitor's webhook and provider certificates (repair). Default: false."""
    repair: NotRequired[RepairSpec]
    """Reset or reboot quarantined nodes (off unless set); gpuPools[].repair takes a pool out."""


class QueueingSpec(TypedDict):
    """GPU job queueing by Kueue (docs/queueing.md): per workload a ClusterQueue whose nominal quota is its gpuQuota, one cohort per workload type, so a team borrows the idle GPUs of the other teams of its type and Jobs wait for quota instead of being refused."""

    engine: str
    """The queueing engine: kueue (Kubernetes SIGs' Kueue). One of: kueue."""
    chart_version: NotRequired[str]
    """The Kueue chart version (default: the pin in components/aks_gpu/data/kueue.yaml)."""
    install_chart: NotRequired[bool]
    """Install Kueue's chart; false where Kueue runs already (its owner installed it, or aksgpu local runs it as a process): the stack then creates the queues alone. Default: true."""
    pods_ready_timeout_minutes: NotRequired[int]
    """All-or-nothing admission: a Job whose pods are not all ready this long after admission gives its quota back and is requeued (Kueue's waitForPodsReady.timeout). Default: 5."""


class PlatformSpec(TypedDict):
    """The in-cluster part of a stack: GPU pools and what runs for them. Components that need no cluster settings (device plugin, admission, NVMe cache, validation) take this much."""

    gpu_pools: NotRequired[list[GpuPoolSpec]]
    """The GPU node pools."""
    workloads: NotRequired[list[WorkloadSpec]]
    """The workload namespaces."""
    device_plugin: NotRequired[DevicePluginSpec]
    """What makes the GPUs schedulable."""
    admission: NotRequired[AdmissionSpec]
    """The GPU placement admission policy."""
    storage: NotRequired[StorageSpec]
    """Azure Container Storage for the nvmeCache pools."""
    validation: NotRequired[ValidationSpec]
    """Post-deploy validation."""
    monitoring: NotRequired[MonitoringSpec]
    """GPU exporters, scraping and alert rules."""
    remediation: NotRequired[RemediationSpec]
    """Quarantine and drain of faulty GPU nodes (NVSentinel)."""
    queueing: NotRequired[QueueingSpec]
    """GPU job queueing (Kueue): teams of a workload type lend each other idle GPUs and Jobs wait for quota (default: none, each namespace's static GPU quota)."""


class StackSpec(PlatformSpec):
    """Everything under the ``aks-gpu:`` namespace of a stack file, plus the Azure location."""

    location: str
    """The Azure region (azure-native:location in a stack file)."""
    cluster: ClusterSpec
    """The AKS cluster."""
    cpu_pools: NotRequired[list[CpuPoolSpec]]
    """CPU user pools for the CPU pods of the workload namespaces (untainted, autoscaled)."""
