"""The stack config as pydantic models: one model per concern, camelCase keys as the stack files spell them.

The one source of the config's shape: each field's type, bounds, default and ``description`` are written here once,
and everything else is generated from them (``components/aks_gpu/config/generate.py``): the editor JSON Schema of a stack
file, the component args TypedDicts (``components/aks_gpu/specs.py``, hence the component package schema other languages'
SDKs are built from) and the key table of docs/config.md. A field marked ``TAKES_OUTPUT`` is a ``pulumi.Input`` in the
component args; every other field is a plain value there (see ``components/aks_gpu/specs.py`` for why).

Every model forbids unknown keys, so a typo in a stack file is an error with its key path, not a silently
ignored setting. Enum values are spelled exactly as the AKS API (and ``pulumi_azure_native.containerservice``)
spells them; a test keeps them in step with the provider's enums.
"""

from __future__ import annotations

import math
import re
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from aks_gpu.aks_facts import canonical_vm_size, disruption_facts, kubernetes_calendar
from aks_gpu.config.encrypted import Encrypted
from aks_gpu.config.safe_yaml import LeadingZeroNumber
from aks_gpu.naming import GPU_NAMESPACE, TEAM_ROLE_NAME, Vendor

# AKS: "agent pool names must start with a lowercase letter and contain only lowercase letters and numbers,
# at most 12 characters (Linux)". https://learn.microsoft.com/azure/aks/create-node-pools#limitations
POOL_NAME_PATTERN = r"^[a-z][a-z0-9]{0,11}$"
# RFC 1123 label, what Kubernetes accepts for namespace names.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
# https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules#microsoftcontainerservice
CLUSTER_NAME_PATTERN = r"^[a-zA-Z0-9]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9])?$"
RESOURCE_GROUP_PATTERN = r"^[-\w._()]{0,89}[-\w_()]$"
# A taint's value is a label value (Kubernetes validates it with IsValidLabelValue): empty, or up to 63 letters, digits,
# '-', '_' and '.', starting and ending with a letter or digit. kubectl taint --help: "If given, it must begin with a
# letter or number, and may contain letters, numbers, hyphens, dots, and underscores, up to 63 characters."
LABEL_VALUE_PATTERN = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
TAINT_PATTERN = (
    r"^[A-Za-z0-9][-A-Za-z0-9_./]*=([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?:(NoSchedule|PreferNoSchedule|NoExecute)$"
)
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


def _as_the_data_files_spell_it(value: str) -> str:
    """A VM size in the data files' spelling, whatever its letter case (``aks_facts.canonical_vm_size``): one spelling
    for the agent pool, its nodes' instance-type label, the admission policy and every lookup. The loader warns where
    the stack file spells it otherwise."""
    return canonical_vm_size(value) or value


# A VM size: read in the data files' spelling.
VmSizeName = Annotated[str, AfterValidator(_as_the_data_files_spell_it)]
# A string field the CLI may have turned into a number or a boolean.
ConfigText = Annotated[str, BeforeValidator(_typed_back_to_text)]
# The validator outermost, so the pattern stays in the JSON Schema editors read (upgrade.maxSurge 2).
CountOrPercent = Annotated[str, Field(pattern=NODE_COUNT_OR_PERCENT_PATTERN), BeforeValidator(_typed_back_to_text)]

MigProfile = Literal["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"]
# NVIDIA's own names for a GPU-instance profile, as nvidia-smi mig -lgip and `aksgpu catalog` print them: 3g.40gb
# (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html). The slice count is what AKS's
# gpuInstanceProfile names (MIG3g); the memory part must be that GPU's.
NVIDIA_MIG_PROFILE_PATTERN = r"^([1-7])g\.([0-9]+)gb$"
_NVIDIA_MIG_PROFILE = re.compile(NVIDIA_MIG_PROFILE_PATTERN, re.IGNORECASE)
# What a stack file may write for migProfile, in the JSON Schema editors read: AKS's name or NVIDIA's.
_MIG_PROFILE_SCHEMA = {
    "anyOf": [
        {"enum": ["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"], "type": "string"},
        {"pattern": NVIDIA_MIG_PROFILE_PATTERN, "type": "string"},
        {"type": "null"},
    ]
}
DayOfWeek = Literal["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
PoolName = Annotated[str, Field(pattern=POOL_NAME_PATTERN)]
DnsLabel = Annotated[str, Field(pattern=DNS_LABEL_PATTERN)]
# The validator outermost, so the pattern stays in the JSON Schema editors read.
Quantity = Annotated[str, Field(pattern=KUBE_QUANTITY_PATTERN), BeforeValidator(_typed_back_to_text)]


class TakesOutput:
    """Field metadata (``Annotated[T, TAKES_OUTPUT]``): in the component args this field is a ``pulumi.Input``, so
    another stack may pass an output. Only where the value fills in an object and decides neither which resources exist,
    nor their names, nor what the rules compare before anything is registered."""

    def __repr__(self) -> str:
        return "TAKES_OUTPUT"


TAKES_OUTPUT = TakesOutput()

# The error a field gives an encrypted value it cannot take (``aks_gpu.config.encrypted``): its value is not a text.
ENCRYPTED_ERROR = "encrypted_needs_plaintext"
# The error of an unquoted number with a leading zero (``safe_yaml.LeadingZeroNumber``), wherever it stands.
LEADING_ZERO_ERROR = "leading_zero_number"


def _refuse_leading_zero(value: object) -> None:
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else (value,)
    number = next((item for item in items if isinstance(item, LeadingZeroNumber)), None)
    if number is not None:
        raise PydanticCustomError(LEADING_ZERO_ERROR, "{message}", {"message": number.message})


def takes_text(annotation: Any) -> bool:
    """Whether a field of this type takes any text (``str``, with or without a pattern, or None), not a choice
    (``Literal``), a number, a switch or an object."""
    if annotation is str:
        return True
    if typing.get_origin(annotation) is Annotated:
        return takes_text(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return len(members) == 1 and takes_text(members[0])
    return False


def _item_type(annotation: Any) -> Any:
    """The item type of ``tuple[X, ...]`` (X), the value type of ``dict[str, X]`` (X), through ``| None``; else None."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return _item_type(members[0]) if len(members) == 1 else None
    if origin in (tuple, list):
        return typing.get_args(annotation)[0]
    if origin is dict:
        return typing.get_args(annotation)[1]
    return None


def _refuse_encrypted(annotation: Any) -> None:
    if not takes_text(annotation):
        raise PydanticCustomError(ENCRYPTED_ERROR, "its value is needed to check it, and it is encrypted")


class ConfigModel(BaseModel):
    """Base for every config object: camelCase keys, nothing unknown, frozen once validated."""

    # allow_inf_nan=False: NaN and infinity cannot be written in JSON, the form every value reaches Azure in.
    # defer_build: a model's validator is built when it first validates, not at import (light commands never do).
    # A section's default is therefore its ``model_construct()``, the same value, built without validating: calling
    # the class would build that model's validator at import (16 of them: a third of the import's time).
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True, allow_inf_nan=False, defer_build=True
    )

    @field_validator("*", mode="wrap")
    @classmethod
    def _encrypted_text(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """An encrypted value (``aks_gpu.config.encrypted``) stands in a text field unchecked, the field's pattern
        included, and in a list or map of texts at its place, the other items checked; any other field refuses it
        (``ENCRYPTED_ERROR``). An unquoted number with a leading zero is refused wherever it stands
        (``LEADING_ZERO_ERROR``)."""
        _refuse_leading_zero(value)
        annotation = cls.model_fields[info.field_name].annotation if info.field_name else None
        if isinstance(value, Encrypted):
            _refuse_encrypted(annotation)
            return value
        items = _item_type(annotation)
        if items is None:
            return handler(value)
        if isinstance(value, list | tuple) and any(isinstance(item, Encrypted) for item in value):
            _refuse_encrypted(items)
            checked = iter(handler([item for item in value if not isinstance(item, Encrypted)]))
            return tuple(item if isinstance(item, Encrypted) else next(checked) for item in value)
        if isinstance(value, dict) and any(isinstance(item, Encrypted) for item in value.values()):
            _refuse_encrypted(items)
            checked_map = handler({key: item for key, item in value.items() if not isinstance(item, Encrypted)})
            return {key: item if isinstance(item, Encrypted) else checked_map[key] for key, item in value.items()}
        return handler(value)


# ---------------------------------------------------------------- cluster


class NotAllowedDates(ConfigModel):
    """Days no maintenance may start in."""

    start: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="First blocked day, YYYY-MM-DD.")
    end: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="Last blocked day, YYYY-MM-DD.")


class MaintenanceWindow(ConfigModel):
    """An AKS planned-maintenance window (aksManagedAutoUpgradeSchedule / aksManagedNodeOSUpgradeSchedule).
    https://learn.microsoft.com/azure/aks/planned-maintenance"""

    schedule: Literal["weekly", "daily", "absoluteMonthly", "relativeMonthly"] = Field(
        default="weekly", description="The AKS schedule type; weekly is what most GPU platforms want."
    )
    day_of_week: DayOfWeek | None = Field(default=None, description="The day of a weekly or relativeMonthly window.")
    interval_weeks: int = Field(default=1, ge=1, le=4, description="weekly: every this many weeks.")
    interval_days: int = Field(default=1, ge=1, le=7, description="daily: every this many days.")
    interval_months: int = Field(
        default=1, ge=1, le=6, description="absoluteMonthly and relativeMonthly: every this many months."
    )
    day_of_month: int | None = Field(default=None, ge=1, le=31, description="absoluteMonthly: the day of the month.")
    week_index: Literal["First", "Second", "Third", "Fourth", "Last"] | None = Field(
        default=None, description="relativeMonthly: which week of the month."
    )
    start_time: str = Field(pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="When the window opens, HH:MM in utcOffset.")
    duration_hours: int = Field(ge=4, le=24, description="How long the window stays open, in hours.")
    utc_offset: str = Field(
        default="+00:00", pattern=r"^[+-](0\d|1[0-4]):[0-5]\d$", description="The time zone of startTime, as +HH:MM or -HH:MM."
    )
    start_date: str | None = Field(
        default=None, pattern=r"^\d{4}-\d{2}-\d{2}$", description="The first day the schedule applies, YYYY-MM-DD."
    )
    not_allowed_dates: tuple[NotAllowedDates, ...] = Field(default=(), description="Date ranges no maintenance may start in.")


class Maintenance(ConfigModel):
    """When AKS may upgrade the cluster and the node images."""

    node_os: MaintenanceWindow | None = Field(
        default=None, description="When node images (and with them GPU drivers) are upgraded: aksManagedNodeOSUpgradeSchedule."
    )
    auto_upgrade: MaintenanceWindow | None = Field(
        default=None, description="When Kubernetes itself is upgraded: aksManagedAutoUpgradeSchedule."
    )


class SystemPool(ConfigModel):
    """The system node pool: CoreDNS, metrics-server and the like, tainted CriticalAddonsOnly so nothing else runs there."""

    name: PoolName = Field(default="system", description="The AKS pool name.")
    vm_size: VmSizeName = Field(default="Standard_D4ds_v5", description="The VM size of the system nodes.")
    min_count: int = Field(default=2, ge=1, le=1000, description="The fewest system nodes the autoscaler keeps.")
    max_count: int = Field(default=3, ge=1, le=1000, description="The most system nodes the autoscaler starts.")
    zones: tuple[ConfigText, ...] = Field(default=(), description="Availability zones, e.g. [1, 2, 3].")
    os_sku: Literal["Ubuntu", "AzureLinux"] = Field(default="Ubuntu", description="The node OS.")


class CpuPoolConfig(ConfigModel):
    """A small autoscaled CPU user pool, untainted: the CPU companions of GPU jobs (Ray heads, MPI launchers, trainer
    initializers, gateways) run here, since the system pool is tainted CriticalAddonsOnly and the GPU pools are tainted
    for GPU work. Its nodes carry ``serves.aks-gpu/<type>=true`` for every workload type of the stack, so each workload
    namespace's Pods may land here (the namespace's PodNodeSelector annotation asks for its type's label). A list of
    its own, not a GPU pool without a GPU: nothing a GPU pool needs (vendor, workload type, driver, MIG, quota) applies.
    User pools may scale to zero (https://learn.microsoft.com/azure/aks/scale-cluster#scale-user-node-pools-to-0)."""

    name: PoolName = Field(description="The AKS pool name: a lowercase letter, then up to 11 lowercase letters or digits.")
    vm_size: VmSizeName = Field(default="Standard_D8ds_v5", min_length=1, description="The VM size of the CPU nodes.")
    min_count: int = Field(default=0, ge=0, le=1000, description="The fewest nodes (0: the pool scales to zero).")
    max_count: int = Field(default=3, ge=1, le=1000, description="The most nodes the autoscaler starts.")
    zones: tuple[ConfigText, ...] = Field(default=(), description="Availability zones, e.g. [1, 2, 3].")
    os_sku: Literal["Ubuntu", "AzureLinux"] = Field(default="Ubuntu", description="The node OS.")
    max_pods: int = Field(default=30, ge=10, le=250, description="The most pods per node.")
    protect: bool = Field(default=False, description="Protect the pool from pulumi destroy and replacement.")


class DeployerAccess(ConfigModel):
    """Kubernetes access for the identity that runs ``pulumi up``: with Entra ID RBAC on and local accounts off,
    nothing else lets it create the in-cluster objects of the same deployment."""

    # A role assignment of "Azure Kubernetes Service RBAC Cluster Admin" on the cluster to the client config's
    # object id (components/aks_gpu/azure/cluster.py).
    enabled: bool = Field(
        default=True,
        description="Grant the deploying identity Azure Kubernetes Service RBAC Cluster Admin on the cluster; off: list an "
        "admin group in entraAdminGroupObjectIds instead.",
    )
    # ARM refuses a wrong principalType ("UnmatchedPrincipalType"), and the azure-native SDK sends "User" when none is
    # given, so it is always set.
    principal_type: Literal["auto", "User", "ServicePrincipal"] = Field(
        default="auto",
        description="The role assignment's principalType. auto: ServicePrincipal when the azure-native provider signs in "
        "as an application (clientId, useOidc, useMsi, or ARM_CLIENT_ID / ARM_USE_OIDC / ARM_USE_MSI) or the Azure CLI "
        "login it falls back to is one (az login --service-principal or --identity, read from azureProfile.json), else "
        "User; set it when that guess is wrong.",
    )


class ClusterConfig(ConfigModel):
    """The AKS cluster the GPU pools attach to, created with safe defaults or adopted as it is."""

    resource_group: str = Field(
        pattern=RESOURCE_GROUP_PATTERN,
        description="The cluster's resource group: created by the stack unless existingResourceGroup is true.",
    )
    # ARM refuses a cluster PUT into a group that does not exist (ResourceGroupNotFound), and azure-native creates
    # nothing it is not told to: the group is either a resource of the stack or looked up (getResourceGroup).
    existing_resource_group: bool = Field(
        default=False,
        description="Adopt resourceGroup as it exists (looked up, never created or deleted); false: the stack creates "
        "it, and pulumi destroy deletes it. An adopted cluster (existing: true) always adopts its group.",
    )
    name: str = Field(pattern=CLUSTER_NAME_PATTERN, description="The AKS cluster's name.")
    existing: bool = Field(
        default=False, description="Adopt a cluster that already exists: nothing Azure-side is created, the rest attaches to it."
    )
    # The mode where the cluster is given: a team deploying the platform onto a cluster it already has, and
    # `aksgpu local` onto its local control plane (docs/local.md). The provider reads the file when it connects.
    kubeconfig: str | None = Field(
        default=None,
        min_length=1,
        description="A kubeconfig file of a cluster that already runs: only the in-cluster layer is deployed onto it "
        "(through a Kubernetes provider built from the file) and no Azure resource is created or read.",
    )
    location: str | None = Field(
        default=None, description="The cluster's Azure region, when it differs from azure-native:location."
    )
    # Checked against the AKS release calendar (components/aks_gpu/data/aks_versions.yaml), which also sets the default.
    kubernetes_version: str = Field(
        default=kubernetes_calendar().default,
        pattern=r"^1\.\d{2}(\.\d+)?$",
        description="1.NN or 1.NN.P, supported on AKS today (components/aks_gpu/data/aks_versions.yaml).",
    )
    # ManagedClusterSKUName "Base" (sent for Standard) or "Automatic" in the provider's AKS API 2025-09-01
    # (pulumi_azure_native 3.29.0 containerservice/_enums.py); https://learn.microsoft.com/azure/aks/intro-aks-automatic
    sku: Literal["Standard", "Automatic"] = Field(
        default="Standard",
        description="AKS Standard, or AKS Automatic (managed system nodes, node auto-provisioning, Deployment Safeguards "
        "enforced): GPU pools there are Karpenter NodePools (docs/automatic.md).",
    )
    # ManagedClusterNodeProvisioningProfile.mode, "Manual" or "Auto" (same SDK): Auto runs node auto-provisioning
    # (Karpenter) on a Standard cluster; Automatic clusters have it preconfigured.
    node_provisioning: Literal["Manual", "Auto"] | None = Field(
        default=None,
        description="Node auto-provisioning (Karpenter) on a Standard cluster: Auto lets GPU pools with provisioning nap "
        "be NodePools. Not set: Auto on Automatic, Manual on Standard.",
    )
    sku_tier: Literal["Free", "Standard", "Premium"] = Field(default="Standard", description="The AKS pricing tier.")
    support_plan: Literal["KubernetesOfficial", "AKSLongTermSupport"] = Field(
        default="KubernetesOfficial",
        description="AKSLongTermSupport keeps a minor supported a year past its end of life; it needs skuTier Premium.",
    )
    dns_prefix: str | None = Field(default=None, description="The API server's DNS prefix (default: the cluster name).")
    network_policy: Literal["azure", "calico", "cilium", "none"] = Field(
        default="cilium", description="The network policy engine; none is refused while workload namespaces exist."
    )
    pod_cidr: str = Field(default="10.244.0.0/16", description="The pod network of Azure CNI overlay.")
    # Not sent when not set, so AKS keeps its defaults (10.0.0.0/16 and 10.0.0.10, "--service-cidrs ... default value
    # of 10.0.0.0/16", https://learn.microsoft.com/azure/aks/azure-cni-overlay); the rules check those defaults too.
    service_cidr: str | None = Field(
        default=None,
        pattern=r"^[0-9.]+/\d{1,2}$",
        description="The Kubernetes service address range (default: AKS's, 10.0.0.0/16); set together with dnsServiceIp.",
    )
    dns_service_ip: str | None = Field(
        default=None,
        pattern=r"^[0-9.]+$",
        description="The cluster DNS service's address inside serviceCidr (default: AKS's, 10.0.0.10).",
    )
    upgrade_channel: Literal["rapid", "stable", "patch", "node-image", "none"] = Field(
        default="patch", description="How AKS upgrades Kubernetes (node-image is legacy and warned about)."
    )
    node_os_upgrade_channel: Literal["None", "Unmanaged", "NodeImage", "SecurityPatch"] = Field(
        default="NodeImage",
        description="How AKS upgrades node images; NodeImage brings the newest production GPU driver and CVE fixes.",
    )
    maintenance: Maintenance = Field(
        default=Maintenance.model_construct(), description="When AKS may upgrade the cluster and the node images."
    )
    system_pool: SystemPool = Field(default=SystemPool.model_construct(), description="The system node pool.")
    # Object ids, not display names (aadProfile.adminGroupObjectIDs; the AKS guide sets AAD_ADMIN_GROUP_OBJECT_IDS to
    # "<group-object-id>", comma-separated: https://learn.microsoft.com/azure/aks/entra-id-control-plane-authentication).
    # An Entra object id is a GUID: the same check as workloads[].roleBindings[].groupObjectId. A group name here
    # would fail the cluster's PUT, or grant nobody; which of the two is not documented.
    entra_admin_group_object_ids: tuple[Annotated[str, Field(pattern=r"^[0-9a-fA-F-]{36}$")], ...] = Field(
        default=(), description="Entra ID groups that administer the cluster (Kubernetes cluster-admin), by object id."
    )
    deployer_access: DeployerAccess = Field(
        default=DeployerAccess.model_construct(), description="Kubernetes access for the identity that runs pulumi up."
    )
    # AKS returns `--login devicecode`, which waits for a person at a browser; the platform rewrites it to this mode
    # (components/aks_gpu/azure/kubeconfig.py).
    kubelogin_mode: Literal["azurecli", "workloadidentity", "spn", "msi"] = Field(
        default="azurecli",
        description="How the kubeconfig's kubelogin signs in: azurecli (the az login session), workloadidentity (federated "
        "CI), spn (a service principal from AZURE_CLIENT_ID and AZURE_CLIENT_SECRET) or msi (the machine's managed identity).",
    )
    local_accounts: bool = Field(default=False, description="Keep AKS local accounts (off: Entra ID only).")
    workload_identity: bool = Field(default=True, description="The OIDC issuer and workload identity.")
    kaito: bool = Field(default=False, description="The KAITO (AI toolchain operator) add-on.")
    protect: bool = Field(default=False, description="Protect the cluster from pulumi destroy and replacement.")
    tags: dict[str, ConfigText] = Field(default={}, description="Azure tags on the cluster (beside managed-by: aks-gpu).")

    @property
    def node_auto_provisioning(self) -> bool:
        """Whether the cluster runs node auto-provisioning (Karpenter): Automatic always, Standard with Auto."""
        return self.sku == "Automatic" or self.node_provisioning == "Auto"


# ---------------------------------------------------------------- GPU pools

# What AKS surges a pool by when it is sent no maxSurge: one node ("The default value for max surge is 1",
# https://learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling). The system pool and the CPU user pools are sent
# no upgradeSettings, so they get it too. Newer AKS API versions may default new pools to a percentage instead; that is
# not read here, and for a pool of up to 10 nodes 10% is one node too.
AKS_DEFAULT_MAX_SURGE = "1"


def surge_nodes(max_surge: str, nodes: int) -> int:
    """The extra nodes of ``max_surge`` ("1", "33%") for a pool of ``nodes``: a percentage is of the pool's nodes and a
    partial node counts whole, as AKS rounds it up (the page above, "Customize node surge upgrade")."""
    if max_surge.endswith("%"):
        return math.ceil(nodes * int(max_surge[:-1]) / 100)
    return int(max_surge)


class UpgradeSettings(ConfigModel):
    """How AKS replaces a pool's nodes on a node image or Kubernetes upgrade. Spot pools take none of these: AKS
    upgrades them without surge nodes and without a drain (config rules refuse maxSurge/maxUnavailable there)."""

    max_surge: CountOrPercent | None = Field(
        default=None,
        description="Extra GPU VMs added while old ones drain (needs that much GPU quota to spare): a count or a "
        "percentage. Not set: 1, or 0 when maxUnavailable is set.",
    )
    max_unavailable: CountOrPercent | None = Field(
        default=None,
        description="Nodes drained at once without a replacement first (maxSurge 0): no spare quota needed, but the "
        "pool runs that many GPU nodes short during the upgrade.",
    )
    drain_timeout_in_minutes: int = Field(
        default=30, ge=1, le=1440, description="How long a pod (a long training job) may hold a node's drain."
    )
    node_soak_duration_in_minutes: int = Field(default=0, ge=0, le=30, description="How long to wait between nodes.")
    # AgentPool upgradeSettings.undrainableNodeBehavior (AKS API 2025-09-01; components/aks_gpu/data/disruption.yaml).
    # Not set: the default of the pool's workload type there (training: Cordon), else AKS's own (Schedule).
    undrainable_node_behavior: Literal["Cordon", "Schedule"] | None = Field(
        default=None,
        description="A node whose drain cannot finish (a PDB, a pod outliving drainTimeoutInMinutes): Cordon keeps it "
        "cordoned on its old image while the upgrade goes on (label kubernetes.azure.com/upgrade-status=Quarantined); "
        "Schedule makes it schedulable again and the upgrade fails. Not set: Cordon for workload training, else AKS's "
        "default (Schedule).",
    )

    @property
    def effective_max_surge(self) -> str:
        if self.max_surge is not None:
            return self.max_surge
        return "0" if self.max_unavailable is not None else AKS_DEFAULT_MAX_SURGE


class NapPoolSettings(ConfigModel):
    """How Karpenter removes a NAP pool's nodes (the NodePool's disruption; components/aks_gpu/azure/node_provisioning.py)."""

    # karpenter.sh/v1 NodePool spec.disruption.consolidationPolicy (components/aks_gpu/data/karpenter.yaml).
    consolidation: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = Field(
        default="WhenEmpty",
        description="WhenEmpty: only a node with no pod left is removed, and never one under a running job (training); "
        "WhenEmptyOrUnderutilized: Karpenter also moves pods to pack nodes, one node at a time (stateless serving).",
    )
    # The cluster autoscaler's scale-down-unneeded-time default is 10 minutes; the same here.
    consolidate_after_minutes: int = Field(
        default=10, ge=0, le=1440, description="How long a node stays empty (or underutilised) before it is removed."
    )


class GpuPoolConfig(ConfigModel):
    """One AKS agent pool of GPU VMs, tainted and labelled so only GPU work lands on it."""

    name: PoolName = Field(description="The AKS pool name: a lowercase letter, then up to 11 lowercase letters or digits.")
    vendor: Vendor = Field(description="The GPU vendor.")
    vm_size: VmSizeName = Field(min_length=1, description="The GPU VM size (`aksgpu catalog` lists the sizes the rules know).")
    workload: DnsLabel = Field(description="The workload type this pool serves: namespaces of this type run their GPU pods here.")
    autoscaling: bool = Field(default=True, description="Let the cluster autoscaler size the pool between minCount and maxCount.")
    min_count: int = Field(default=0, ge=0, le=1000, description="The fewest nodes (0: the pool scales to zero).")
    max_count: int = Field(default=1, ge=0, le=1000, description="The most nodes.")
    count: int | None = Field(default=None, ge=0, le=1000, description="The node count, with autoscaling false.")
    mig_profile: MigProfile | None = Field(
        default=None,
        description="Partition every GPU into MIG instances of this size (NVIDIA A100, H100, H200): AKS's name (MIG3g) or "
        "NVIDIA's, as `aksgpu catalog` prints it (3g.40gb).",
        json_schema_extra=_MIG_PROFILE_SCHEMA,  # type: ignore[arg-type]
    )
    time_slicing_replicas: int | None = Field(
        default=None, ge=2, le=64, description="Share each GPU between this many pods (time-slicing); not with MIG."
    )
    nvme_cache: bool = Field(
        default=False,
        description="Serve the VMs' local NVMe disks as a cache volume (Azure Container Storage); data is lost with the VM.",
    )
    spot: bool = Field(default=False, description="Spot VMs: cheaper, evicted when Azure needs the capacity.")
    spot_max_price: float = Field(
        default=-1, description="The most to pay per VM hour in US dollars; -1: up to the on-demand price."
    )
    spot_eviction_policy: Literal["Delete", "Deallocate"] = Field(
        default="Delete", description="What happens to an evicted spot VM (Deallocate keeps it counting against quota)."
    )
    os_sku: Literal["Ubuntu", "AzureLinux"] = Field(default="Ubuntu", description="The node OS.")
    os_disk_type: Literal["Managed", "Ephemeral"] = Field(default="Managed", description="The OS disk kind.")
    os_disk_size_gb: int | None = Field(default=None, ge=30, le=2048, description="The OS disk size in GB (default: the VM's).")
    zones: tuple[ConfigText, ...] = Field(default=(), description="Availability zones, e.g. [1, 2, 3].")
    max_pods: int = Field(default=30, ge=10, le=250, description="The most pods per node.")
    taints: tuple[Annotated[str, Field(pattern=TAINT_PATTERN)], ...] = Field(
        default=(), description="Extra node taints, key=value:Effect (the vendor's GPU taint is always there)."
    )
    labels: dict[str, ConfigText] = Field(
        default={}, description="Extra node labels (not on the keys the platform sets: components/aks_gpu/naming.py)."
    )
    upgrade: UpgradeSettings = Field(
        default=UpgradeSettings.model_construct(), description="How AKS replaces the pool's nodes on upgrades."
    )
    # AKS installs the NVIDIA driver unless told not to; AMD pools and GPU-Operator-managed drivers use None.
    gpu_driver: Literal["Install", "None"] | None = Field(
        default=None,
        description="gpuProfile.driver: Install (AKS installs the NVIDIA driver) or None. Not set: None for AMD and where "
        "the GPU Operator owns the driver, else Install.",
    )
    # For VM sizes the catalog does not know: the pool states its own GPU facts.
    gpu_count: int | None = Field(default=None, ge=1, le=16, description="GPUs per VM, for a size the catalog does not know.")
    gpu_model: str | None = Field(default=None, description="The GPU model, for a size the catalog does not know.")
    min_driver_version: Annotated[str, Field(pattern=r"^\d+(\.\d+){0,3}$"), BeforeValidator(_typed_back_to_text)] | None = Field(
        default=None, description="The oldest driver aksgpu validate accepts on the pool's nodes, e.g. 565.57."
    )
    smoke_test: bool | None = Field(
        default=None,
        description="Run the smoke Job on this pool (not set: only where minCount keeps a node running).",
    )
    protect: bool = Field(default=False, description="Protect the pool from pulumi destroy and replacement.")
    repair: bool = Field(
        default=True,
        description="With remediation.repair on: NVSentinel may reboot this pool's faulty nodes (false: its nodes are "
        "only quarantined and drained, a person repairs them).",
    )
    provisioning: Literal["agentPool", "nap"] | None = Field(
        default=None,
        description="agentPool: an AKS agent pool; nap: a Karpenter NodePool and AKSNodeClass of node auto-provisioning "
        "(the same taint and labels; needs cluster.sku Automatic or cluster.nodeProvisioning Auto). Not set: nap on "
        "Automatic, else agentPool.",
    )
    nap: NapPoolSettings = Field(
        default=NapPoolSettings.model_construct(), description="provisioning nap: how Karpenter removes the pool's nodes."
    )
    # gpuProfile.nvidia.managementMode Managed on an agent pool: refused while the installed azure-native SDK lacks it
    # (`managed-gpu-api-unreachable`, read from the SDK); on a NAP pool the AKSNodeClass's EnableManagedGPUExperience
    # tag (docs/automatic.md).
    managed_gpu: bool = Field(
        default=False,
        description="AKS-managed GPU experience (AKS installs driver, device plugin and DCGM exporter): a NAP pool's "
        "AKSNodeClass tag; on an agent pool refused while the installed provider's API has no "
        "gpuProfile.nvidia.managementMode (docs/platform.md).",
    )

    def effective_provisioning(self, cluster: ClusterConfig | None) -> Literal["agentPool", "nap"]:
        """How the pool's nodes come to be: as set, else a NodePool on an Automatic cluster (whose nodes node
        auto-provisioning manages, https://learn.microsoft.com/azure/aks/intro-aks-automatic), else an agent pool. A
        component's pool (no cluster) is an agent pool unless it says nap."""
        if self.provisioning is not None:
            return self.provisioning
        return "nap" if cluster is not None and cluster.sku == "Automatic" else "agentPool"

    def effective_gpu_driver(self, device_plugin_mode: str) -> Literal["Install", "None"]:
        """The agent pool's gpuProfile.driver: as set, else None where AKS installs no driver (AMD) or the GPU Operator
        owns the NVIDIA one (devicePlugin.mode gpu-operator), else Install."""
        if self.gpu_driver is not None:
            return self.gpu_driver
        operator_manages = self.vendor == "nvidia" and device_plugin_mode == "gpu-operator"
        return "None" if self.vendor == "amd" or operator_manages else "Install"

    @property
    def undrainable_node_behavior(self) -> str | None:
        """upgradeSettings.undrainableNodeBehavior as sent: the pool's own, else its workload type's default
        (components/aks_gpu/data/disruption.yaml), else None (AKS's default, Schedule)."""
        if self.upgrade.undrainable_node_behavior is not None:
            return self.upgrade.undrainable_node_behavior
        return disruption_facts().undrainable_by_workload_type.get(self.workload)

    @property
    def most_nodes(self) -> int:
        """The most nodes the pool runs: maxCount when autoscaling, else count (which the rules require there)."""
        return self.max_count if self.autoscaling else (self.count or 0)

    def upgrade_surge_nodes(self, nodes: int) -> int:
        """The extra nodes an upgrade of the pool at ``nodes`` adds: none for spot (AKS upgrades spot pools without
        surge; the rules refuse maxSurge there), else its maxSurge."""
        return 0 if self.spot else surge_nodes(self.upgrade.effective_max_surge, nodes)

    @field_validator("mig_profile", mode="before")
    @classmethod
    def _nvidia_mig_profile_name(cls, value: object, info: ValidationInfo) -> object:
        """NVIDIA's profile name (``3g.40gb``) as AKS's (``MIG3g``); its memory must be the pool's GPU's, where the
        catalog knows the size (a ``3g.20gb`` on an H100 80GB is a profile of another GPU)."""
        if not isinstance(value, str):
            return value
        match = _NVIDIA_MIG_PROFILE.match(value.strip())
        if match is None:
            return value
        aks_name = f"MIG{match.group(1)}g"
        from aks_gpu.catalog import load_catalog  # a fact, read only when a stack names a profile NVIDIA's way

        size = load_catalog().vm_size(str(info.data.get("vm_size") or ""))
        if size is not None and size.gpu.mig:
            profile = size.gpu.mig.get(aks_name)
            known = ", ".join(instance.profile for instance in size.gpu.mig.values())
            if profile is None or profile.profile.lower() != value.strip().lower():
                raise ValueError(f"{size.gpu.product} ({size.name}) has no MIG profile {value.strip()}; its profiles: {known}")
        return aks_name

    @field_validator("labels")
    @classmethod
    def _label_keys_are_kubernetes_keys(cls, labels: dict[str, str]) -> dict[str, str]:
        key = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
        bad = [name for name in labels if not key.fullmatch(name)]
        if bad:
            raise ValueError(f"not a Kubernetes label key: {', '.join(bad)}")
        # "Valid label value: must be 63 characters or less (can be empty), unless empty, must begin and end with an
        # alphanumeric character ([a-z0-9A-Z]), could contain dashes (-), underscores (_), dots (.), and alphanumerics
        # between." https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set
        # The API server refuses a Node object carrying another value, so such a pool gets no usable nodes; whether ARM
        # already refuses the agent pool's nodeLabels is not documented.
        value = re.compile(LABEL_VALUE_PATTERN)
        bad = [f"{name}={text!r}" for name, text in labels.items() if not (isinstance(text, Encrypted) or value.fullmatch(text))]
        if bad:
            raise ValueError(
                f"not a Kubernetes label value (up to 63 letters, digits, '-', '_', '.', alphanumeric at both ends): "
                f"{', '.join(bad)}"
            )
        return labels


# ---------------------------------------------------------------- workloads


Port = Annotated[int, Field(ge=1, le=65535)]


class EgressRule(ConfigModel):
    """Egress to one network."""

    # Parsed as a network (and host bits flagged) by the workload rules.
    cidr: str = Field(pattern=r"^[0-9a-fA-F:.]+/\d{1,3}$", description="The network, in CIDR notation (e.g. 10.20.0.0/16).")
    ports: tuple[Port, ...] = Field(default=(), description="The ports; none: every port of protocol.")
    protocol: Literal["TCP", "UDP"] = Field(default="TCP", description="The protocol.")


class IngressFrom(ConfigModel):
    """Ingress from another namespace."""

    namespace: DnsLabel = Field(description="The namespace allowed in.")
    ports: tuple[Port, ...] = Field(default=(), description="TCP ports; none: all traffic from that namespace.")


class NetworkAccess(ConfigModel):
    """What the namespace's deny-all NetworkPolicy lets through, one allow policy each."""

    allow_dns: bool = Field(default=True, description="Egress to CoreDNS in kube-system.")
    allow_same_namespace: bool = Field(default=False, description="Traffic between the namespace's own pods.")
    allow_to_namespaces: tuple[DnsLabel, ...] = Field(default=(), description="Egress to these namespaces.")
    allow_from_namespaces: tuple[IngressFrom, ...] = Field(default=(), description="Ingress from these namespaces.")
    allow_egress: tuple[EgressRule, ...] = Field(default=(), description="Egress to these networks.")


class QuotaLimits(ConfigModel):
    """The namespace's quota beyond its GPUs (requests)."""

    cpu: Quantity | None = Field(default=None, description="CPU requests in all (requests.cpu), e.g. 64.")
    memory: Quantity | None = Field(default=None, description="Memory requests in all (requests.memory), e.g. 512Gi.")
    pods: int | None = Field(default=None, ge=1, description="Pods in all.")
    persistent_volume_claims: int | None = Field(default=None, ge=0, description="PersistentVolumeClaims in all.")
    requests_storage: Quantity | None = Field(default=None, description="Storage requests in all (requests.storage).")


class DefaultRequests(ConfigModel):
    """The requests a container gets when it states none (LimitRange), so the quota does not refuse it."""

    cpu: Quantity = Field(default="500m", description="CPU request.")
    memory: Quantity = Field(default="1Gi", description="Memory request.")


class RoleBinding(ConfigModel):
    """An Entra ID group bound to a role inside the namespace."""

    group_object_id: str = Field(pattern=r"^[0-9a-fA-F-]{36}$", description="The Entra ID group's object id.")
    role: Literal["edit", "view"] = Field(
        description=f"edit: the platform's team role {TEAM_ROLE_NAME} (Kubernetes' edit without NetworkPolicy writes); "
        "view: Kubernetes' view."
    )


class WorkloadConfig(ConfigModel):
    """One workload namespace: quota on the GPU resource its pools expose, default requests, a deny-all network policy
    with opt-in allows, Pod Security labels and Entra ID group bindings."""

    name: Annotated[DnsLabel, TAKES_OUTPUT] = Field(description="The namespace (a DNS label).")
    type: Annotated[DnsLabel, TAKES_OUTPUT] = Field(
        description="The workload type: pools whose workload equals it serve this namespace."
    )
    gpu_quota: Annotated[int, TAKES_OUTPUT] = Field(
        ge=0, le=100000, description="GPUs (units of the pools' GPU resource) the namespace may request in all."
    )
    pool: PoolName | None = Field(
        default=None, description="Place the namespace on this one pool (default: every pool whose workload equals type)."
    )
    pod_security: Literal["baseline", "restricted"] = Field(
        default="baseline", description="The Pod Security level enforced (restricted is warned about and audited either way)."
    )
    quota: QuotaLimits = Field(default=QuotaLimits.model_construct(), description="The namespace's quota beyond its GPUs.")
    default_requests: DefaultRequests = Field(
        default=DefaultRequests.model_construct(), description="The requests a container gets when it states none."
    )
    network: NetworkAccess = Field(
        default=NetworkAccess.model_construct(), description="What the deny-all NetworkPolicy lets through."
    )
    role_bindings: tuple[RoleBinding, ...] = Field(
        default=(), description="Entra ID groups bound to the team role (edit) or view."
    )
    nvme_volume: bool = Field(default=False, description="Export a ready NVMe cache volume snippet for this namespace.")
    # ND sizes need CAP_IPC_LOCK, which Pod Security baseline forbids: the namespace then enforces baseline plus
    # IPC_LOCK through its own admission policy (components/aks_gpu/admission/pod_security.py).
    rdma: bool = Field(
        default=False, description="RDMA/InfiniBand jobs: pods may add IPC_LOCK, and nothing else beyond Pod Security baseline."
    )
    # Kueue's ClusterQueue quota fields of the same names (apis/kueue/v1beta2/clusterqueue_types.go in
    # sigs.k8s.io/kueue@v0.17.0, ResourceQuota.borrowingLimit and .lendingLimit): absent is Kueue's own nil, no limit.
    borrowing_limit: int | None = Field(
        default=None,
        ge=0,
        le=100000,
        description="aks-gpu:queueing on: GPUs this team may borrow, on top of gpuQuota, from the idle quota of the other "
        "workloads of its type (default: no limit but what they lend).",
    )
    lending_limit: int | None = Field(
        default=None,
        ge=0,
        le=100000,
        description="aks-gpu:queueing on: GPUs of its idle gpuQuota this team lends to the other workloads of its type "
        "(default: all of it; 0 keeps the whole quota for itself).",
    )


# ---------------------------------------------------------------- in-cluster GPU enablement


class DevicePluginConfig(ConfigModel):
    """What makes the GPUs schedulable: the vendors' device plugins or GPU Operators."""

    mode: Literal["daemonset", "gpu-operator"] = Field(
        default="daemonset",
        description="NVIDIA: the device plugin DaemonSet, or the NVIDIA GPU Operator (driver and toolkit where AKS installs "
        "none, MIG manager, DCGM exporter).",
    )
    mig_strategy: Literal["single", "mixed"] = Field(
        default="single",
        description="How MIG pools expose their slices: single (nvidia.com/gpu) or mixed (nvidia.com/mig-<profile>).",
    )
    time_slicing_replicas: int | None = Field(
        default=None, ge=2, le=64, description="Time-slicing for every NVIDIA pool without MIG; a pool's own setting wins."
    )
    nvidia_image: str | None = Field(
        default=None, description="The NVIDIA device plugin image (default: the pin in aks_gpu/data/device_plugins.yaml)."
    )
    gpu_operator_chart_version: str | None = Field(
        default=None, description="The NVIDIA GPU Operator chart version (default: the pin)."
    )
    amd_mode: Literal["daemonset", "gpu-operator"] = Field(
        default="daemonset",
        description="AMD: the ROCm device plugin with its node labeller (needs amdgpu on the nodes, which AKS does not "
        "install: warned), or the AMD GPU Operator (builds and loads amdgpu).",
    )
    amd_image: str | None = Field(default=None, description="The ROCm device plugin image (default: the pin).")
    amd_operator_chart_version: str | None = Field(
        default=None, description="The AMD GPU Operator chart version (default: the pin)."
    )
    # The operator's KMM tags the image it builds per kernel, so a repository without a tag.
    amd_driver_image: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+$",
        description="amdMode gpu-operator: the repository (no tag) KMM pushes the amdgpu driver image it builds to.",
    )
    cert_manager_installed: bool = Field(
        default=False, description="amdMode gpu-operator: cert-manager, which the AMD GPU Operator needs, is installed."
    )


class AdmissionConfig(ConfigModel):
    """The GPU placement ValidatingAdmissionPolicy (components/aks_gpu/admission/policy.py)."""

    enabled: bool = Field(default=True, description="Install the GPU placement admission policy.")
    validation_actions: tuple[Literal["Deny", "Warn", "Audit"], ...] = Field(
        default=("Deny",),
        description="What a violation does: Deny refuses, Warn returns a warning, Audit annotates the audit event.",
    )
    exempt_namespaces: tuple[DnsLabel, ...] = Field(
        default=(),
        description="Left out of the policy on top of the namespaces the stack derives (kube-system, gpu-resources, "
        "Calico's, acstor with storage v1: components/aks_gpu/data/admission_exemptions.yaml).",
    )
    restrict_to_workload_namespaces: bool = Field(
        default=True, description="GPU requests only in workload namespaces and gpuNamespaces; false admits them anywhere."
    )
    gpu_namespaces: tuple[DnsLabel, ...] = Field(
        default=(), description="More namespaces where GPU requests are admitted (no pool or quota check there)."
    )

    @field_validator("validation_actions", "exempt_namespaces", "gpu_namespaces")
    @classmethod
    def _no_duplicates(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        # The API server refuses a binding that lists an action twice ("Duplicate value").
        repeated = sorted({value for value in values if values.count(value) > 1})
        if repeated:
            raise ValueError(f"listed more than once: {', '.join(repeated)}")
        return values


class StorageConfig(ConfigModel):
    """Azure Container Storage for the nvmeCache pools."""

    flavour: Literal["v2", "v1"] = Field(
        default="v2",
        description="v2 creates the StorageClass storageClassName; v1 (legacy) a StoragePool of that name, and Azure "
        "Container Storage the class acstor-<storageClassName>.",
    )
    storage_class_name: DnsLabel = Field(default="local-nvme", description="The StorageClass (v1: StoragePool) name.")
    extension_auto_upgrade: bool = Field(default=True, description="Let AKS upgrade the extension's minor version.")
    extension_version: str | None = Field(
        default=None, description="v1 only: pin the extension version (needs extensionAutoUpgrade false)."
    )


class SmokeJobConfig(ConfigModel):
    """The per-pool smoke Job: one pod asks for one GPU unit and runs the vendor's SMI tool."""

    enabled: bool = Field(default=True, description="Run the smoke Jobs.")
    image: str = Field(default="nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04", description="The image of NVIDIA pools' Job.")
    # Also the amd-smi probe's image (components/aks_gpu/kube/amd_plugin.py). ROCm's terminal image at ROCm 6.4.1: upstream's
    # rocm-terminal/Dockerfile builds it with ARG ROCM_VERSION=6.4.1 since commit 15f4755 "release-6.4.1"
    # (https://github.com/ROCm/ROCm-docker/blob/master/rocm-terminal/Dockerfile), published as rocm/rocm-terminal
    # (https://hub.docker.com/r/rocm/rocm-terminal). Docker Hub's tag list cannot be read from here; a missing tag or
    # a missing amd-smi shows as an SMI error of `aksgpu validate`, never as a pass.
    amd_image: str = Field(
        default="docker.io/rocm/rocm-terminal:6.4.1", description="The image of AMD pools' Job and of the amd-smi probe."
    )
    deadline_seconds: int = Field(default=600, ge=60, le=7200, description="How long a Job may run before it fails.")


# An image named by its content: <registry>/<repository>[:<tag>]@sha256:<64 hex digits> (the runtime pulls by the
# digest; a tag beside it is ignored). https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests
DIGEST_IMAGE_PATTERN = re.compile(r"^[a-z0-9][-a-z0-9._/:]*@sha256:[0-9a-f]{64}$")


class DiagnosticsScheduleConfig(ConfigModel):
    """The vendor diagnostics on a schedule, in the cluster: a CronJob runs aksgpu validate --deep --quarantine."""

    enabled: bool = Field(
        default=False,
        description="Create the CronJob (with its ServiceAccount, its RBAC and the admission policy that fences it) in "
        "gpu-resources. Needs image.",
    )
    cron: str = Field(
        default="17 2 * * 0",
        description="When it runs: a five-field cron schedule in UTC (minute hour day-of-month month day-of-week); "
        "put it in the maintenance window.",
    )
    level: int = Field(default=2, description="The dcgmi diag level: 2 (minutes per node) or 3 (about half an hour per node).")
    image: str | None = Field(
        default=None,
        description="The aks-gpu image the CronJob runs, built from the checkout's Dockerfile into your registry and "
        "pinned by digest, e.g. myregistry.azurecr.io/aks-gpu@sha256:(64 hex digits).",
    )

    @field_validator("cron")
    @classmethod
    def _five_fields(cls, cron: str) -> str:
        fields = cron.split()
        if len(fields) != 5:
            raise ValueError(
                f"{cron!r} has {len(fields)} field(s): write five, minute hour day-of-month month day-of-week "
                '(e.g. "17 2 * * 0", Sunday 02:17 UTC); macros such as @weekly and a seconds field are not taken'
            )
        return " ".join(fields)

    @field_validator("level")
    @classmethod
    def _scheduled_level(cls, level: int) -> int:
        if level not in (2, 3):
            raise ValueError(
                f"level {level}: the schedule runs the diagnostics at level 2 or 3 (level 1 is the quick check after a deploy, "
                "validation.diagnosticsOnDeploy); set level: 2, or 3 where the window allows half an hour per node"
            )
        return level

    @field_validator("image")
    @classmethod
    def _pinned(cls, image: str | None) -> str | None:
        if image and not isinstance(image, Encrypted) and not DIGEST_IMAGE_PATTERN.match(image):
            raise ValueError(
                f"{image!r} is not pinned by digest: name the image as <registry>/<repository>@sha256:<digest> "
                "(az acr manifest show-metadata -r <registry> -n <repository>:<tag> --query digest -o tsv; "
                "docs/validation.md, The diagnostic schedule), so the CronJob runs the image that was built and nothing "
                "pushed over its tag"
            )
        return image

    @model_validator(mode="after")
    def _image_when_enabled(self) -> DiagnosticsScheduleConfig:
        if self.enabled and not self.image:
            raise ValueError(
                "enabled without an image: build the aks-gpu image from the checkout's Dockerfile into your registry "
                "(az acr build) and set image: <registry>/<repository>@sha256:<digest> (docs/validation.md, The "
                "diagnostic schedule)"
            )
        return self


class ValidationConfig(ConfigModel):
    """Post-deploy validation: the checks of aksgpu validate, in pulumi up and on the command line."""

    on_deploy: Literal["fail", "warn", "off"] = Field(
        default="warn",
        description="After the device plugin rolls out in pulumi up: fail the update on a failed check, warn, or run no "
        "checks (off also removes the amd-smi probe).",
    )
    concurrency: int = Field(default=16, ge=1, le=256, description="SMI commands run at once.")
    exec_timeout_seconds: int = Field(default=30, ge=1, le=600, description="The time one SMI command may take.")
    retries: int = Field(default=2, ge=0, le=10, description="Retries of a failed command or list on temporary errors.")
    smoke_job: SmokeJobConfig = Field(default=SmokeJobConfig.model_construct(), description="The per-pool smoke Jobs.")
    diagnostics_on_deploy: bool = Field(
        default=False,
        description="After the checks in pulumi up, also run the vendors' diagnostics at level 1 on every GPU node "
        "(aksgpu validate --deep: on NVIDIA dcgmi diag, a CUDA context on every GPU, NCCL all-reduce; on AMD amd-smi's "
        "RAS counters and ROCm's validation suite; in a pod holding all the node's GPUs); a node not proven healthy "
        "counts as a failed check for onDeploy. Off by default: it pulls the diagnostic images onto every GPU node and "
        "takes minutes per node.",
    )
    diagnostics_schedule: DiagnosticsScheduleConfig = Field(
        default=DiagnosticsScheduleConfig.model_construct(),
        description="The vendors' diagnostics at level 2 or 3 on a schedule, in the cluster: a CronJob runs aksgpu "
        "validate --deep --quarantine on every GPU node; a node that fails is tainted "
        "aks-gpu/gpu-quarantine=diagnostic and cordoned, and returns only after a passing run.",
    )


# ---------------------------------------------------------------- continuous validation (components/aks_gpu/monitoring/)

# ARM ids as Azure writes them; resource types are case-insensitive in ARM, so the patterns are too.
# https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules
ACTION_GROUP_ID_PATTERN = r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/microsoft\.insights/actionGroups/[^/]+$"
MONITOR_WORKSPACE_ID_PATTERN = r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/microsoft\.monitor/accounts/[^/]+$"
# Microsoft.Monitor/accounts names, as the REST spec publishes them (Microsoft.Monitor/accounts@2023-04-03 in
# Azure/bicep-types-az, generated from azure-rest-api-specs) is ^(?!-)[a-zA-Z0-9-]+[^-]$; written without the
# look-ahead, which pydantic's regex engine lacks (the same strings match). It states no length.
MONITOR_WORKSPACE_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9-]*[^-]$"


# An action group's receivers (Microsoft.Insights/actionGroups@2024-10-01-preview, the API version
# pulumi_azure_native.monitor.ActionGroup 3.x uses): EmailReceiver {name, emailAddress} and WebhookReceiver
# {name, serviceUri}, "Names must be unique across all receivers within an action group"; the group's groupShortName
# is at most 12 characters (generated/monitor_5/microsoft.insights/2024-10-01-preview/types.md in Azure/bicep-types-az).
RECEIVER_NAME_PATTERN = r"^[A-Za-z0-9][-A-Za-z0-9_. ]{0,62}$"
EMAIL_PATTERN = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
WEBHOOK_PATTERN = r"^https://[^\s]+$"


class AlertReceiver(ConfigModel):
    """Who an alert reaches: one e-mail address or one webhook (a pager, a chat bridge)."""

    name: str = Field(pattern=RECEIVER_NAME_PATTERN, description="The receiver's name in the action group (unique).")
    email: str | None = Field(default=None, pattern=EMAIL_PATTERN, description="An e-mail address the alerts go to.")
    webhook: str | None = Field(
        default=None,
        pattern=WEBHOOK_PATTERN,
        description="An https URL the alerts are posted to (Azure Monitor's common alert schema). A URL that carries "
        "a token is a secret: pulumi config set --secret --path.",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> AlertReceiver:
        if (self.email is None) == (self.webhook is None):
            raise ValueError("a receiver has exactly one of email or webhook")
        return self


class AzureMonitorSettings(ConfigModel):
    """Azure Monitor managed service for Prometheus: where the metrics go and who hears the alerts."""

    workspace_name: str | None = Field(
        default=None,
        pattern=MONITOR_WORKSPACE_NAME_PATTERN,
        description="The Azure Monitor workspace to create in the cluster's resource group (default <cluster name>-amw).",
    )
    workspace_resource_id: str | None = Field(
        default=None,
        pattern=MONITOR_WORKSPACE_ID_PATTERN,
        description="An existing workspace to use instead (its ARM id); required for an adopted cluster.",
    )
    action_group_ids: tuple[Annotated[str, Field(pattern=ACTION_GROUP_ID_PATTERN)], ...] = Field(
        default=(), description="Existing action groups every alert notifies (ARM ids)."
    )
    receivers: tuple[AlertReceiver, ...] = Field(
        default=(),
        description="E-mail addresses and webhooks of an action group the stack creates (<cluster>-gpu-alerts) and "
        "every alert notifies, beside actionGroupIds. With neither, a stack with GPU pools is refused: its alerts "
        "would reach nobody.",
    )

    @field_validator("receivers")
    @classmethod
    def _unique_receivers(cls, receivers: tuple[AlertReceiver, ...]) -> tuple[AlertReceiver, ...]:
        names = [receiver.name.lower() for receiver in receivers]
        if len(set(names)) != len(names):
            raise ValueError("receiver names must be unique within the action group")
        return receivers


class PrometheusOperatorSettings(ConfigModel):
    """A Prometheus Operator the team already runs (kube-prometheus-stack and the like)."""

    namespace: DnsLabel = Field(
        default=GPU_NAMESPACE,
        description="Where the PodMonitors and the PrometheusRule go (the operator's namespace selectors must include it).",
    )
    labels: dict[str, str] = Field(
        default={},
        description="Labels the operator's podMonitorSelector and ruleSelector match, e.g. {release: kube-prometheus-stack}.",
    )
    alertmanager_receiver: str | None = Field(
        default=None,
        description="The receiver of the Alertmanager route the GPU alerts reach (route.receiver, or the child route "
        "matching severity critical, in the Alertmanager configuration your team deploys). Required with GPU pools; "
        "kube-prometheus-stack's default route ends at the receiver null, which notifies nobody, and is refused.",
    )


class AlertThresholds(ConfigModel):
    """When the waste and slowdown alerts fire. Health alerts (Xid, ECC, row remapping) have no threshold."""

    idle_utilization_percent: int = Field(
        default=5, ge=1, le=50, description="A GPU allocated to a pod counts as idle below this utilisation, in percent."
    )
    idle_minutes: int = Field(default=60, ge=10, le=1440, description="...for this long, in minutes.")
    # The cluster autoscaler removes an unneeded node after 10 minutes by default, so anything longer means something
    # keeps it.
    empty_node_minutes: int = Field(
        default=30, ge=10, le=1440, description="A GPU node above its pool's minCount that runs no GPU pod for this long."
    )
    quota_used_below_percent: int = Field(
        default=25, ge=1, le=99, description="A namespace whose peak GPU requests stay below this share of its GPU quota..."
    )
    quota_window_hours: int = Field(default=24, ge=1, le=168, description="...over this many hours.")
    throttle_minutes: int = Field(
        default=15, ge=1, le=720, description="HW slowdown, thermal slowdown or power brake reported this long without a break."
    )


class MonitoringConfig(ConfigModel):
    """Continuous validation: GPU exporters on every pool, their scraping and the health and waste alert rules."""

    enabled: bool = Field(default=True, description="GPU metrics exporters, scraping and alert rules.")
    engine: Literal["azure-monitor", "prometheus-operator"] = Field(
        default="azure-monitor",
        description="azure-monitor: Azure Monitor managed Prometheus (workspace, data collection, rule groups); "
        "prometheus-operator: PodMonitors and a PrometheusRule for an operator the team runs.",
    )
    azure_monitor: AzureMonitorSettings = Field(
        default=AzureMonitorSettings.model_construct(), description="The azure-monitor engine's settings."
    )
    prometheus_operator: PrometheusOperatorSettings = Field(
        default=PrometheusOperatorSettings.model_construct(), description="The prometheus-operator engine's settings."
    )
    alerts: AlertThresholds = Field(
        default=AlertThresholds.model_construct(), description="When the waste and slowdown alerts fire."
    )
    scrape_interval_seconds: int = Field(default=30, ge=10, le=300, description="How often the exporters are scraped.")
    dcgm_exporter_image: str | None = Field(
        default=None, description="The DCGM exporter image (default: the pin in components/aks_gpu/data/gpu_exporters.yaml)."
    )
    amd_exporter_image: str | None = Field(default=None, description="The AMD device metrics exporter image (default: the pin).")


# ---------------------------------------------------------------- remediation (components/aks_gpu/monitoring/remediation.py)

# NVSentinel node-drainer's eviction modes, spelled as its values take them (docs/configuration/node-drainer.md in
# NVIDIA/NVSentinel, read 2026-12-01): Immediate evicts through the Eviction API, AllowCompletion waits for the pods to
# finish, DeleteAfterTimeout waits drainTimeoutMinutes from the fault and then deletes them.
DrainMode = Literal["Immediate", "AllowCompletion", "DeleteAfterTimeout"]


class RepairConfig(ConfigModel):
    """NVSentinel's repair half (docs/remediation.md, "Repair"): fault-remediation asks the janitor to reset a GPU or
    reboot the node through Azure, with a workload identity whose custom role restarts this cluster's scale set VMs only."""

    enabled: bool = Field(
        default=False,
        description="Repair quarantined nodes: a GPU reset where it suffices (GPU Operator pools), else a reboot of the "
        "VM through Azure. Needs remediation mode on, cert-manager (certManagerInstalled), the cluster's workload "
        "identity, and the circuit breaker enforced: repairs follow quarantines, so maxUnhealthy per windowMinutes is their "
        "rate limit.",
    )


class RemediationConfig(ConfigModel):
    """Quarantine of faulty GPU nodes by NVIDIA NVSentinel (docs/remediation.md): fault-quarantine taints and cordons a
    node with a fatal GPU fault, node-drainer moves its pods per workload type, bounded by a circuit breaker."""

    # Off unless a stack asks: upgrading aks-gpu must not start a new engine that drains nodes in a cluster whose owner
    # did not choose it. The shipped stacks choose (stacks/Pulumi.*.yaml, docs/remediation.md).
    mode: Literal["off", "dry-run", "on"] = Field(
        default="off",
        description="off: NVSentinel is not deployed; dry-run: it reports what it would quarantine (node annotations, "
        "events, metrics) and touches nothing; on: it taints, cordons and drains.",
    )
    max_unhealthy: CountOrPercent = Field(
        default="25%",
        description="The circuit breaker: never more than this many GPU nodes (a count, e.g. 1) or this share of them "
        "(e.g. 25%) quarantined at once; past it NVSentinel quarantines nothing more until a person looks.",
    )
    window_minutes: int = Field(
        default=5, ge=1, le=1440, description="The circuit breaker counts the quarantines of this sliding window, in minutes."
    )
    drain: dict[DnsLabel, DrainMode] = Field(
        default={"training": "DeleteAfterTimeout", "inference": "Immediate"},
        description="Per workload type (workloads[].type): how a quarantined node's pods of that type leave it. A type "
        "not listed gets defaultDrain.",
    )
    default_drain: DrainMode = Field(
        default="AllowCompletion", description="The drain of workload types drain does not list: wait for the pods to finish."
    )
    drain_timeout_minutes: int = Field(
        default=60,
        ge=1,
        le=10080,
        description="DeleteAfterTimeout: how long a pod may keep running (to checkpoint) after the fault before it is deleted.",
    )
    npd_conditions: bool = Field(
        default=True,
        description="Also quarantine on a True AKS Node Problem Detector GPU condition (GPUMissing, XIDErrors, "
        "NVLinkStatusInactive, ...), read by NVSentinel's kubernetes-object-monitor.",
    )
    chart_version: str | None = Field(
        default=None, description="The NVSentinel chart version (default: the pin in components/aks_gpu/data/remediation.yaml)."
    )
    # NVSentinel keeps its health events in a datastore and fault-quarantine and node-drainer read them from it; the
    # chart configures none by default (components/aks_gpu/data/remediation.yaml, datastore). No default here: a
    # stack names one, or the plan refuses mode dry-run or on (config/rules/monitoring.py).
    datastore: Literal["none", "external-mongodb", "mongodb-store"] = Field(
        default="none",
        description="Where NVSentinel stores health events: external-mongodb (e.g. Azure Cosmos DB for MongoDB; its "
        "connection string in the Secret datastoreSecret), mongodb-store (the chart's in-cluster MongoDB, TLS by "
        "cert-manager: certManagerInstalled), none (only with mode off).",
    )
    datastore_secret: DnsLabel | None = Field(
        default=None,
        description="external-mongodb: the Secret in the nvsentinel namespace whose key MONGODB_URI holds the "
        "connection string (created by the cluster's owner, never in the stack file).",
    )
    cert_manager_installed: bool = Field(
        default=False,
        description="cert-manager is installed in the cluster: it issues the in-cluster MongoDB's TLS certificates "
        "(datastore mongodb-store) and the janitor's webhook and provider certificates (repair).",
    )
    repair: RepairConfig = Field(
        default=RepairConfig.model_construct(),
        description="Reset or reboot quarantined nodes (off unless set); gpuPools[].repair takes a pool out.",
    )


class QueueingConfig(ConfigModel):
    """GPU job queueing by Kueue (docs/queueing.md): per workload a ClusterQueue whose nominal quota is its gpuQuota, one
    cohort per workload type, so a team borrows the idle GPUs of the other teams of its type and Jobs wait for quota
    instead of being refused."""

    engine: Literal["kueue"] = Field(description="The queueing engine: kueue (Kubernetes SIGs' Kueue).")
    chart_version: str | None = Field(
        default=None, description="The Kueue chart version (default: the pin in components/aks_gpu/data/kueue.yaml)."
    )
    install_chart: bool = Field(
        default=True,
        description="Install Kueue's chart; false where Kueue runs already (its owner installed it, or aksgpu local runs "
        "it as a process): the stack then creates the queues alone.",
    )
    pods_ready_timeout_minutes: int = Field(
        default=5,
        ge=1,
        le=1440,
        description="All-or-nothing admission: a Job whose pods are not all ready this long after admission gives its "
        "quota back and is requeued (Kueue's waitForPodsReady.timeout).",
    )


class PlatformConfig(ConfigModel):
    """The in-cluster part of a stack: GPU pools and what runs for them. Components that need no cluster settings
    (device plugin, admission, NVMe cache, validation) take this much."""

    gpu_pools: tuple[GpuPoolConfig, ...] = Field(default=(), description="The GPU node pools.")
    workloads: tuple[WorkloadConfig, ...] = Field(default=(), description="The workload namespaces.")
    device_plugin: DevicePluginConfig = Field(
        default=DevicePluginConfig.model_construct(), description="What makes the GPUs schedulable."
    )
    admission: AdmissionConfig = Field(
        default=AdmissionConfig.model_construct(), description="The GPU placement admission policy."
    )
    storage: StorageConfig = Field(
        default=StorageConfig.model_construct(), description="Azure Container Storage for the nvmeCache pools."
    )
    validation: ValidationConfig = Field(default=ValidationConfig.model_construct(), description="Post-deploy validation.")
    monitoring: MonitoringConfig = Field(
        default=MonitoringConfig.model_construct(), description="GPU exporters, scraping and alert rules."
    )
    remediation: RemediationConfig = Field(
        default=RemediationConfig.model_construct(), description="Quarantine and drain of faulty GPU nodes (NVSentinel)."
    )
    queueing: QueueingConfig | None = Field(
        default=None,
        description="GPU job queueing (Kueue): teams of a workload type lend each other idle GPUs and Jobs wait for quota "
        "(default: none, each namespace's static GPU quota).",
    )


class StackConfig(PlatformConfig):
    """Everything under the ``aks-gpu:`` namespace of a stack file, plus the Azure location."""

    location: str = Field(min_length=1, description="The Azure region (azure-native:location in a stack file).")
    cluster: ClusterConfig = Field(description="The AKS cluster.")
    cpu_pools: tuple[CpuPoolConfig, ...] = Field(
        default=(), description="CPU user pools for the CPU pods of the workload namespaces (untainted, autoscaled)."
    )
