"""Facts about Azure and AKS the rules and the plan rely on, read from the data files that hold them with their
sources (``data/aks_versions.yaml``, ``data/arm_refusals.yaml``, ``data/immutable_fields.yaml``,
``data/arm64_support.yaml``, ``data/azure_locations.yaml``, ``data/vm_size_regions.yaml``,
``data/node_resources.yaml``, ``data/azure_native_rules.yaml``, ``data/disruption.yaml``).

Pure: each file is read once and turned into frozen dataclasses; the date a version rule is evaluated on is the
caller's (the loader passes today, tests a fixed day).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from aks_gpu.catalog import load_catalog, vm_size_key
from aks_gpu.data_files import load_yaml

DATA_DIR = Path(__file__).parent / "data"
VERSIONS_FILE = DATA_DIR / "aks_versions.yaml"
REFUSALS_FILE = DATA_DIR / "arm_refusals.yaml"
IMMUTABLE_FILE = DATA_DIR / "immutable_fields.yaml"
ARM64_FILE = DATA_DIR / "arm64_support.yaml"
LOCATIONS_FILE = DATA_DIR / "azure_locations.yaml"
VM_SIZE_REGIONS_FILE = DATA_DIR / "vm_size_regions.yaml"
API_VERSIONS_FILE = DATA_DIR / "azure_api_versions.yaml"
NODE_RESOURCES_FILE = DATA_DIR / "node_resources.yaml"
PROVIDER_RULES_FILE = DATA_DIR / "azure_native_rules.yaml"
KUBERNETES_REPLACE_FILE = DATA_DIR / "kubernetes_replace_rules.yaml"


def _read(path: Path) -> Any:
    return load_yaml(path)


# ---------------------------------------------------------------- the AKS Kubernetes release calendar


@dataclass(frozen=True)
class MinorVersion:
    minor: str
    ga: dt.date
    end_of_life: dt.date
    lts_end_of_life: dt.date
    # The newest patch the AKS release notes announced (None: not recorded, not checked).
    latest_patch: int | None = None


@dataclass(frozen=True)
class KubernetesCalendar:
    read_on: dt.date
    source: str
    warn_days: int
    default: str
    versions: dict[str, MinorVersion]
    # Minors whose long-term support needs Ubuntu 24.04 node pools, the first minor where osSku Ubuntu means 24.04,
    # and the AKS API the provider is pinned to (which decides whether Ubuntu2404 can be asked for).
    # Which release notes the latest patches come from (their heading).
    patches_read_from: str = ""
    lts_needs_ubuntu_2404: tuple[str, ...] = ()
    ubuntu_2404_default_from: str = ""
    pinned_api_version: str = ""

    def get(self, minor: str) -> MinorVersion | None:
        return self.versions.get(minor)

    def supported(self, on: dt.date) -> tuple[str, ...]:
        """The minors that are GA and not past end of life on ``on``, oldest first (community support)."""
        found = [v for v in self.versions.values() if v.ga <= on <= v.end_of_life]
        return tuple(v.minor for v in sorted(found, key=lambda v: minor_key(v.minor)))


# The first minor that serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy, GA and on by default
# (k8s.io/kubernetes v1.36.3 pkg/features/kube_features.go, MutatingAdmissionPolicy; before it v1beta1, off by default,
# which the API schemas of 1.35 confirm: tests/conformance): the platform's void policy needs it.
MUTATING_ADMISSION_POLICY_SINCE = "1.36"


def minor_key(minor: str) -> tuple[int, ...]:
    return tuple(int(part) for part in minor.split("."))


def minor_of(version: str) -> str:
    """``1.36.2`` -> ``1.36``."""
    return ".".join(version.split(".")[:2])


@lru_cache(maxsize=1)
def kubernetes_calendar() -> KubernetesCalendar:
    raw = _read(VERSIONS_FILE)
    versions = {
        str(minor): MinorVersion(
            minor=str(minor),
            ga=entry["ga"],
            end_of_life=entry["end_of_life"],
            lts_end_of_life=entry["lts_end_of_life"],
            latest_patch=entry.get("latest_patch"),
        )
        for minor, entry in raw["versions"].items()
    }
    return KubernetesCalendar(
        read_on=raw["read_on"],
        source=raw["source"],
        warn_days=int(raw["warn_days_before_end_of_life"]),
        default=str(raw["default"]),
        versions=versions,
        patches_read_from=str(raw.get("patches_read_from", "")),
        lts_needs_ubuntu_2404=tuple(str(minor) for minor in raw["lts_needs_ubuntu_2404"]["minors"]),
        ubuntu_2404_default_from=str(raw["lts_needs_ubuntu_2404"]["ubuntu_2404_default_from"]),
        pinned_api_version=str(raw["lts_needs_ubuntu_2404"]["pinned_api_version"]),
    )


# ---------------------------------------------------------------- what ARM refuses


@dataclass(frozen=True)
class Refusal:
    id: str
    key: str
    refuses: str
    source: str
    quote: str
    note: str | None
    example: dict[str, Any]
    reported_at: str


@lru_cache(maxsize=1)
def refusals() -> dict[str, Refusal]:
    entries = _read(REFUSALS_FILE)["refusals"]
    table = {
        entry["id"]: Refusal(
            id=entry["id"],
            key=entry["key"],
            refuses=entry["refuses"],
            source=entry["source"],
            quote=entry["quote"],
            note=entry.get("note"),
            example=entry["example"],
            reported_at=entry["reported_at"],
        )
        for entry in entries
    }
    if len(table) != len(entries):
        raise ValueError(f"{REFUSALS_FILE}: an id is used twice")
    return table


def refusal_tag(refusal_id: str) -> str:
    """The tag that ends a refusal's message; raises KeyError for an id the table does not have, so no rule can
    refuse something without a source."""
    return f"[refusal {refusals()[refusal_id].id}]"


# ---------------------------------------------------------------- Azure regions


@lru_cache(maxsize=1)
def azure_locations() -> frozenset[str]:
    """The ARM location names of a recorded ``az account list-locations`` (``data/azure_locations.yaml``)."""
    return frozenset(str(name) for name in _read(LOCATIONS_FILE)["locations"])


RegionList = Literal["complete", "partial", "none"]


@dataclass(frozen=True)
class SizeRegions:
    """The regions recorded as offering one VM size; ``coverage`` (the file's ``list``) says how far they go: all of
    them (``complete``), the ones a source confirms (``partial``), or none found (``none``). ``source`` (a URL) and
    ``as_of`` are the recording's (the oldest one's day where several sources give the regions)."""

    size: str
    coverage: RegionList
    regions: frozenset[str] = frozenset()
    source: str | None = None  # the first of ``sources``
    as_of: dt.date | None = None
    sources: tuple[str, ...] = ()  # every source of the regions (URLs), where several give them


@dataclass(frozen=True)
class VmSizeRegions:
    read_on: dt.date
    sizes: dict[str, SizeRegions]  # by the size's ``vm_size_key``

    def get(self, size: str) -> SizeRegions | None:
        return self.sizes.get(vm_size_key(size))


@lru_cache(maxsize=1)
def vm_size_regions() -> VmSizeRegions:
    """The regions of each VM size (``data/vm_size_regions.yaml``); ValueError for an entry that is not one."""
    raw = _read(VM_SIZE_REGIONS_FILE)
    sources: dict[str, str] = raw["sources"]
    sizes: dict[str, SizeRegions] = {}
    for name, entry in raw["sizes"].items():
        kind = entry["list"]
        regions = frozenset(str(region) for region in entry.get("regions") or ())
        named = entry.get("source")
        keys = [str(key) for key in named] if isinstance(named, list) else [] if named is None else [str(named)]
        source = keys[0] if keys else None
        if kind not in ("complete", "partial", "none"):
            raise ValueError(f"{VM_SIZE_REGIONS_FILE}: {name}: list {kind!r} is not complete, partial or none")
        if (kind == "none") != (not regions and source is None and entry.get("as_of") is None):
            raise ValueError(f"{VM_SIZE_REGIONS_FILE}: {name}: a list of regions names its source and day; none names none")
        for key in keys:
            if key not in sources:
                raise ValueError(f"{VM_SIZE_REGIONS_FILE}: {name}: source {key!r} is not under sources")
        if vm_size_key(str(name)) in sizes:
            raise ValueError(f"{VM_SIZE_REGIONS_FILE}: {name} is listed twice")
        sizes[vm_size_key(str(name))] = SizeRegions(
            str(name), kind, regions, sources[source] if source else None, entry.get("as_of"), tuple(sources[key] for key in keys)
        )
    return VmSizeRegions(read_on=raw["read_on"], sizes=sizes)


def canonical_vm_size(name: str) -> str | None:
    """``name`` as the data files spell it (``Standard_ND96isr_H100_v5`` for ``standard_nd96isr_h100_V5``): the GPU
    catalog's spelling, else the region records' (which list every size the project picks by default or ships in a
    stack); None for a size neither knows."""
    size = load_catalog().vm_size(name)
    if size is not None:
        return size.name
    entry = vm_size_regions().get(name)
    return entry.size if entry is not None else None


@lru_cache(maxsize=1)
def checked_api_versions() -> dict[str, str]:
    """Azure resource type -> the REST API version the rules were checked against (``data/azure_api_versions.yaml``)."""
    return {str(k): str(v) for k, v in _read(API_VERSIONS_FILE)["api_versions"].items()}


# ---------------------------------------------------------------- inputs fixed at creation


@dataclass(frozen=True)
class ImmutableField:
    resource_type: str
    field: str
    source: str
    quote: str | None
    note: str | None

    def value_in(self, inputs: dict[str, Any]) -> Any:
        """The field's value in a resource's recorded (camelCase) inputs; dotted fields walk nested objects."""
        value: Any = inputs
        for part in self.field.split("."):
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return value


@lru_cache(maxsize=1)
def immutable_fields() -> dict[str, tuple[ImmutableField, ...]]:
    raw: dict[str, list[dict[str, Any]]] = _read(IMMUTABLE_FILE)
    return {
        resource_type: tuple(
            ImmutableField(resource_type, e["field"], e["source"], e.get("quote"), e.get("note")) for e in entries
        )
        for resource_type, entries in raw.items()
    }


# ---------------------------------------------------------------- the azure-native provider's own replace rules

ProviderRuleKind = Literal["path-parameter", "force-new-map", "create-only"]


@dataclass(frozen=True)
class ReplaceRule:
    """A changed input the azure-native provider's Diff answers with a replacement (``data/azure_native_rules.yaml``)."""

    resource: str
    field: str  # camelCase input path, dotted into objects (networkProfile.networkPolicy)
    rule: ProviderRuleKind
    source: str

    def covers(self, path: str) -> bool:
        """Whether a change at ``path`` (a dotted input path) falls under this rule: the field itself or inside it."""
        return path == self.field or path.startswith(self.field + ".") or path.startswith(self.field + "[")


@dataclass(frozen=True)
class _ProviderRules:
    replaces: dict[str, tuple[ReplaceRule, ...]]
    delete_first: dict[str, tuple[bool, str]]


@lru_cache(maxsize=1)
def _provider_rules() -> _ProviderRules:
    raw = _read(PROVIDER_RULES_FILE)
    sources: dict[str, str] = {key: " ".join(str(text).split()) for key, text in raw["sources"].items()}
    replaces: dict[str, tuple[ReplaceRule, ...]] = {}
    delete_first: dict[str, tuple[bool, str]] = {}
    for resource, entry in raw["resources"].items():
        rules = []
        for item in entry["replaces"]:
            kind = str(item["rule"])
            if kind not in ("path-parameter", "force-new-map", "create-only"):
                raise ValueError(f"{PROVIDER_RULES_FILE}: {resource} {item['field']}: unknown rule {kind!r}")
            rules.append(ReplaceRule(resource, str(item["field"]), kind, sources[kind]))  # type: ignore[arg-type]
        replaces[str(resource)] = tuple(rules)
        answer = entry["delete_before_replace"]
        because = " ".join(str(answer["because"]).split())
        delete_first[str(resource)] = (bool(answer["answer"]), f"{because} ({sources['diff']})")
    return _ProviderRules(replaces, delete_first)


def provider_replace_rules(resource_type: str) -> tuple[ReplaceRule, ...]:
    """The inputs whose change the azure-native provider itself answers with a replacement, for a resource type the
    program creates (``azure-native:containerservice:AgentPool``); () for a type the data file does not hold."""
    return _provider_rules().replaces.get(resource_type, ())


def provider_deletes_before_replace(resource_type: str) -> tuple[bool, str]:
    """Whether the provider's Diff asks the engine to delete the old resource before creating its replacement, and
    why (with the source). A type the data file does not hold: the provider's default for a named resource (True)."""
    rules = _provider_rules()
    found = rules.delete_first.get(resource_type)
    if found is not None:
        return found
    return True, f"not recorded for {resource_type}; the provider deletes first unless it named the resource at random"


def fixed_at_creation(resource_type: str) -> list[str]:
    """The camelCase input paths of ``resource_type`` Azure fixes at creation (data/immutable_fields.yaml): the
    resource's ``replace_on_changes``, so the engine replaces it instead of sending an update AKS refuses."""
    return [fixed.field for fixed in immutable_fields().get(resource_type, ())]


# ---------------------------------------------------------------- what the Kubernetes provider replaces


@dataclass(frozen=True)
class KubernetesReplaceRule:
    """A property of a Kubernetes object whose change the pulumi-kubernetes provider answers with a replacement."""

    field: str
    source: str


@dataclass(frozen=True)
class KubernetesProviderRules:
    """The provider resource's own: which computed inputs force its replacement, and the identifier that decides."""

    computed: tuple[str, ...]
    identifier: str
    source: str
    # Where the provider's Diff replaces a named object delete-first.
    named_delete_first_source: str


@lru_cache(maxsize=1)
def _kubernetes_replace_rules() -> dict[str, Any]:
    raw: dict[str, Any] = _read(KUBERNETES_REPLACE_FILE)
    return raw


def kubernetes_replace_rules(resource_type: str) -> tuple[KubernetesReplaceRule, ...]:
    """The forceNew properties of a ``kubernetes:`` resource type (data/kubernetes_replace_rules.yaml): those of every
    object, and its kind's; a Helm release's own."""
    raw = _kubernetes_replace_rules()
    releases = raw["helm_release"]
    if resource_type in releases["types"]:
        return tuple(KubernetesReplaceRule(field, releases["source"]) for field in releases["fields"])
    every = raw["every_object"]
    rules = [KubernetesReplaceRule(field, every["source"]) for field in every["fields"]]
    kind = raw["kinds"].get(resource_type)
    if kind is not None:
        rules += [KubernetesReplaceRule(field, kind["source"]) for field in kind["fields"]]
    return tuple(rules)


def kubernetes_provider_rules() -> KubernetesProviderRules:
    raw = _kubernetes_replace_rules()
    provider = raw["provider"]
    return KubernetesProviderRules(
        tuple(provider["computed"]), provider["identifier"], provider["source"], raw["named_object_delete_first"]["source"]
    )


# ---------------------------------------------------------------- arm64 (Grace) GPU nodes

Arm64Status = Literal["yes", "no", "unknown", "unsettled"]


@dataclass(frozen=True)
class Arm64Entry:
    name: str
    arm64: Arm64Status
    source: str
    note: str
    image: str | None = None
    chart: str | None = None
    version: str | None = None


@lru_cache(maxsize=1)
def arm64_support() -> dict[str, Arm64Entry]:
    raw = _read(ARM64_FILE)
    entries: dict[str, Arm64Entry] = {}
    for section in ("images", "node"):
        for name, entry in raw[section].items():
            status = str(entry["arm64"])
            if status not in ("yes", "no", "unknown", "unsettled"):
                raise ValueError(f"{ARM64_FILE}: {name}.arm64 must be yes, no, unknown or unsettled, not {status!r}")
            entries[name] = Arm64Entry(
                name=name,
                arm64=status,  # type: ignore[arg-type]
                source=entry["source"],
                note=" ".join(str(entry["note"]).split()),
                image=entry.get("image"),
                chart=entry.get("chart"),
                version=entry.get("version"),
            )
    return entries


# ---------------------------------------------------------------- what a node of a VM size offers pods


@dataclass(frozen=True)
class SizeFigures:
    """A VM size's vCPUs and memory (Azure's size page), and its temp disk where ``node_resources.yaml`` holds it."""

    vcpus: int
    memory_gib: int
    source: str
    temp_disk_gib: int | None = None


@dataclass(frozen=True)
class NodeRules:
    """AKS's reservations and defaults (``data/node_resources.yaml``, each with its source there)."""

    cpu_millicores: tuple[tuple[int, int], ...]  # (cores, kube-reserved millicores), by cores
    memory_mib_per_pod: int
    memory_mib_base: int
    memory_max_fraction: float
    eviction_memory_mib: int
    eviction_nodefs_percent: int
    default_max_pods: int
    ephemeral_min_temp_gib: int
    managed_gib_from_vcpus: tuple[tuple[int, int], ...]  # (from vCPUs, GiB), by vCPUs
    sizes: dict[str, SizeFigures]  # by vm_size_key: Azure compares sizes without case

    def size(self, name: str) -> SizeFigures | None:
        return self.sizes.get(vm_size_key(name))


@dataclass(frozen=True)
class NodeResources:
    """A node's ``status.capacity`` and ``status.allocatable`` (cpu, memory, ephemeral-storage, pods) as Kubernetes
    quantities, as an AKS node of that size shows them."""

    vm_size: str
    capacity: dict[str, str]
    allocatable: dict[str, str]


@lru_cache(maxsize=1)
def node_rules() -> NodeRules:
    raw = _read(NODE_RESOURCES_FILE)
    sources: dict[str, str] = raw["sources"]
    reservations, os_disk = raw["reservations"], raw["os_disk"]
    sizes: dict[str, SizeFigures] = {}
    for name, entry in raw["sizes"].items():
        if vm_size_key(str(name)) in sizes:
            raise ValueError(f"{NODE_RESOURCES_FILE}: {name} is listed twice")
        temp = entry.get("temp_disk_gib")
        sizes[vm_size_key(str(name))] = SizeFigures(
            int(entry["vcpus"]), int(entry["memory_gib"]), sources[entry["source"]], int(temp) if temp is not None else None
        )
    return NodeRules(
        cpu_millicores=tuple(sorted((int(k), int(v)) for k, v in reservations["cpu_millicores"].items())),
        memory_mib_per_pod=int(reservations["memory_mib_per_pod"]),
        memory_mib_base=int(reservations["memory_mib_base"]),
        memory_max_fraction=float(reservations["memory_max_fraction"]),
        eviction_memory_mib=int(reservations["eviction_memory_mib"]),
        eviction_nodefs_percent=int(reservations["eviction_nodefs_percent"]),
        default_max_pods=int(raw["default_max_pods"]["pods"]),
        ephemeral_min_temp_gib=int(os_disk["ephemeral_min_temp_gib"]),
        managed_gib_from_vcpus=tuple(sorted((int(k), int(v)) for k, v in os_disk["managed_gib_from_vcpus"].items())),
        sizes=sizes,
    )


def kube_reserved_cpu_millicores(cores: int, rules: NodeRules | None = None) -> int:
    """AKS's kube-reserved CPU: the table's row, linear between two rows, the last two rows' slope past the last."""
    table = (rules or node_rules()).cpu_millicores
    if cores <= table[0][0]:
        return table[0][1]
    for (low, low_m), (high, high_m) in pairwise(table):
        if cores <= high:
            return low_m + (high_m - low_m) * (cores - low) // (high - low)
    (low, low_m), (high, high_m) = table[-2], table[-1]
    return high_m + (high_m - low_m) * (cores - high) // (high - low)


def os_disk_gib(
    vcpus: int, os_disk_type: str | None, os_disk_size_gb: int | None, temp_disk_gib: int | None, rules: NodeRules | None = None
) -> int:
    """The OS disk AKS gives a node: the size asked; else, unless Managed is asked, an ephemeral disk the size of a temp
    disk of at least 128 GiB; else the managed default by vCPUs."""
    rules = rules or node_rules()
    if os_disk_size_gb is not None:
        return os_disk_size_gb
    if os_disk_type != "Managed" and temp_disk_gib is not None and temp_disk_gib >= rules.ephemeral_min_temp_gib:
        return temp_disk_gib
    return next(gib for start, gib in reversed(rules.managed_gib_from_vcpus) if vcpus >= start)


def node_resources(
    vm_size: str, max_pods: int | None, os_disk_type: str | None = None, os_disk_size_gb: int | None = None
) -> NodeResources | None:
    """What an AKS (1.29+) Linux node of ``vm_size`` shows: capacity = the size's vCPUs and memory, the OS disk as
    ephemeral storage and maxPods (``None``: the pool sets none, AKS's default); allocatable = capacity less the
    kube-reserved CPU, the kube-reserved memory (20 MiB per pod + 50 MiB, at most 25% of memory) and the 100 MiB memory
    eviction threshold, and less the 10% nodefs eviction threshold of the ephemeral storage (``os_disk_type`` None:
    the pool asks none). The temp disk is the GPU catalog's figure, else ``node_resources.yaml``'s. None for a size
    with no recorded vCPUs and memory."""
    rules = node_rules()
    figures = rules.size(vm_size)
    if figures is None:
        return None
    pods = max_pods if max_pods is not None else rules.default_max_pods
    memory_mib = figures.memory_gib * 1024
    reserved_mib = min(rules.memory_mib_per_pod * pods + rules.memory_mib_base, int(memory_mib * rules.memory_max_fraction))
    temp = load_catalog().temp_disk_of(vm_size)
    temp = temp if temp is not None else figures.temp_disk_gib
    disk_gib = os_disk_gib(figures.vcpus, os_disk_type, os_disk_size_gb, temp, rules)
    disk_ki = disk_gib * 1024 * 1024
    cpu_m = figures.vcpus * 1000 - kube_reserved_cpu_millicores(figures.vcpus, rules)
    capacity = {
        "cpu": str(figures.vcpus),
        "memory": f"{memory_mib * 1024}Ki",
        "ephemeral-storage": f"{disk_ki}Ki",
        "pods": str(pods),
    }
    allocatable = {
        "cpu": f"{cpu_m}m",
        "memory": f"{(memory_mib - reserved_mib - rules.eviction_memory_mib) * 1024}Ki",
        "ephemeral-storage": f"{disk_ki - disk_ki * rules.eviction_nodefs_percent // 100}Ki",
        "pods": str(pods),
    }
    return NodeResources(vm_size, capacity, allocatable)


# ---------------------------------------------------------------- node images and GPU families

GPU_NODE_IMAGES_FILE = DATA_DIR / "gpu_node_images.yaml"

# The version at the end of an AKS node image label (AKSUbuntu-2204gen2containerd-202607.02.0), or a bare one.
_IMAGE_VERSION = re.compile(r"(?:^|-)(?P<month>\d{6})\.(?P<day>\d{2})\.(?P<build>\d+)$")
# The image names of the node image label per OS SKU, as AKS's label shows them (audit/node_images.py).
NODE_IMAGE_NAMES = {"Ubuntu": "AKSUbuntu-2204gen2containerd", "AzureLinux": "AzureLinuxgen2containerd"}


def node_image_version_key(image: str) -> tuple[int, int, int] | None:
    """``YYYYMM.DD.V`` (bare or at the end of a node image label) as a sortable key; None for any other form."""
    match = _IMAGE_VERSION.search(image.strip())
    return (int(match["month"]), int(match["day"]), int(match["build"])) if match else None


@dataclass(frozen=True)
class KnownBadImage:
    version: str
    images: tuple[str, ...]  # the image names (label prefixes) the reports cover
    why: str
    source: str

    def matches(self, image: str) -> bool:
        return node_image_version_key(image) == node_image_version_key(self.version) and image.startswith(self.images)


@dataclass(frozen=True)
class GpuFamilyImages:
    gpu_model: str
    minimum: str
    minimum_source: str
    known_bad: tuple[KnownBadImage, ...]


@dataclass(frozen=True)
class NodeImageProblem:
    kind: Literal["below-minimum", "known-bad"]
    message: str
    source: str


@dataclass(frozen=True)
class GpuNodeImages:
    current: str
    current_source: str
    families: dict[str, GpuFamilyImages]

    def current_image(self, os_sku: str) -> str:
        """The node image label of the newest image for ``os_sku`` (Ubuntu, AzureLinux)."""
        return f"{NODE_IMAGE_NAMES[os_sku]}-{self.current}"

    def problem(self, gpu_model: str, image: str) -> NodeImageProblem | None:
        """What is wrong with ``image`` (a node image label) for a node of ``gpu_model``: a known-bad image first,
        then one below the family's minimum; None when neither (or the version cannot be read)."""
        family = self.families.get(gpu_model)
        version = node_image_version_key(image)
        if family is None or version is None:
            return None
        for bad in family.known_bad:
            if bad.matches(image):
                message = f"node image {image} is known to break {gpu_model} nodes: {bad.why}"
                return NodeImageProblem("known-bad", message, bad.source)
        minimum = node_image_version_key(family.minimum)
        if minimum is not None and version < minimum:
            return NodeImageProblem(
                "below-minimum",
                f"node image {image} is older than {family.minimum}, the minimum {gpu_model} nodes need",
                family.minimum_source,
            )
        return None


@lru_cache(maxsize=1)
def gpu_node_images() -> GpuNodeImages:
    raw = _read(GPU_NODE_IMAGES_FILE)
    families = {
        str(model): GpuFamilyImages(
            gpu_model=str(model),
            minimum=str(entry["minimum"]["version"]),
            minimum_source=str(entry["minimum"]["source"]),
            known_bad=tuple(
                KnownBadImage(str(bad["version"]), tuple(bad["images"]), " ".join(str(bad["why"]).split()), str(bad["source"]))
                for bad in entry.get("known_bad", ())
            ),
        )
        for model, entry in raw["families"].items()
    }
    for family in families.values():
        for version in (family.minimum, *(bad.version for bad in family.known_bad)):
            if node_image_version_key(version) is None:
                raise ValueError(f"{GPU_NODE_IMAGES_FILE}: {family.gpu_model}: {version!r} is not YYYYMM.DD.V")
    return GpuNodeImages(str(raw["current"]["version"]), str(raw["current"]["source"]), families)


# ---------------------------------------------------------------- node auto-provisioning (Karpenter)

KARPENTER_FILE = DATA_DIR / "karpenter.yaml"


@lru_cache(maxsize=1)
def karpenter_facts() -> dict[str, Any]:
    """The NodePool and AKSNodeClass facts of ``data/karpenter.yaml`` (fields and enums read from their CRDs)."""
    return dict(_read(KARPENTER_FILE))


# ---------------------------------------------------------------- what the installed azure-native SDK carries

# The AgentPool's gpuProfile input type in pulumi_azure_native (containerservice/_inputs.py): AKS API 2025-09-01 has
# `driver` only; the API that carries the managed GPU experience adds `nvidia` (gpuProfile.nvidia.managementMode,
# https://learn.microsoft.com/azure/aks/aks-managed-gpu-nodes). Read from the SDK's source text, not imported: the pure
# layers import no Pulumi (tests/test_layers.py), and the module is 5 MB.
GPU_PROFILE_CLASS = "GPUProfileArgs"


def azure_native_dir() -> Path | None:
    """The installed pulumi_azure_native package's folder (found, not imported), or None."""
    import importlib.util

    spec = importlib.util.find_spec("pulumi_azure_native")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def gpu_profile_fields(sdk_dir: Path | None = None) -> frozenset[str]:
    """The keyword inputs of the installed SDK's ``GPUProfileArgs`` (``{"driver"}`` in 3.29.0); empty when the SDK
    or the class cannot be found."""
    root = sdk_dir if sdk_dir is not None else azure_native_dir()
    if root is None:
        return frozenset()
    try:
        text = (root / "containerservice" / "_inputs.py").read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    start = text.find(f"\nclass {GPU_PROFILE_CLASS}:\n")
    if start < 0:
        return frozenset()
    end = text.find("\nclass ", start + 1)
    body = text[start : end if end > 0 else len(text)]
    header = body.split("def __init__(__self__, *,", 1)
    if len(header) < 2:
        return frozenset()
    params = header[1].split("):", 1)[0]
    return frozenset(re.findall(r"^\s*(\w+): ", params, re.M))


def sdk_has_managed_gpu(sdk_dir: Path | None = None) -> bool:
    """Whether the installed SDK's agent pool can say gpuProfile.nvidia (managementMode Managed)."""
    return "nvidia" in gpu_profile_fields(sdk_dir)


# ---------------------------------------------------------------- planned disruption: upgrades, scheduled events

DISRUPTION_FILE = DATA_DIR / "disruption.yaml"


@dataclass(frozen=True)
class DisruptionFacts:
    """``data/disruption.yaml``: the undrainable-node behaviours the pinned AgentPool API takes, the default per
    workload type, the Node Problem Detector condition Azure Scheduled Events raise, and node auto-repair's events."""

    undrainable_behaviors: tuple[str, ...]
    undrainable_aks_default: str
    undrainable_by_workload_type: dict[str, str]
    upgrade_quarantine_label: str
    scheduled_event_condition: str
    scheduled_event_quiet_reason: str
    # The Node Problem Detector's event reasons for a scheduled event (reason -> event type), the text its
    # announcements carry (a plugin's failure uses the same reason without it), and the condition's own reason.
    scheduled_event_reasons: dict[str, str]
    scheduled_event_marker: str
    scheduled_event_condition_reason: str
    auto_repair_source: str
    # Each auto-repair action (reboot, reimage, redeploy) with its start, end and error reasons, in AKS's order.
    auto_repair_actions: dict[str, tuple[str, str, str]]
    auto_repair_max_repairs: int  # sequences in the window past which a node is failed as flapping
    events_window_hours: int
    events_per_reason: int  # the newest events of each node and reason that the collector keeps

    @property
    def auto_repair_reasons(self) -> frozenset[str]:
        return frozenset(reason for reasons in self.auto_repair_actions.values() for reason in reasons)

    @property
    def announcement_reasons(self) -> frozenset[str]:
        """The reasons of the Node Problem Detector's scheduled-event events and of its condition's."""
        return frozenset(self.scheduled_event_reasons) | {self.scheduled_event_condition_reason}

    def counts_event(self, reason: str, source: str, message: str) -> bool:
        """Whether the audit counts an event on a node (the collector keeps only these): an auto-repair reason from
        AKS node auto-repair's source, or a scheduled-event reason whose message announces an event (not a plugin's
        failure under the same reason)."""
        if reason in self.auto_repair_reasons:
            return source == self.auto_repair_source
        return reason in self.announcement_reasons and self.scheduled_event_marker in message


@lru_cache(maxsize=1)
def disruption_facts() -> DisruptionFacts:
    raw = _read(DISRUPTION_FILE)
    undrainable = raw["upgrade"]["undrainable_node_behavior"]
    behaviors = tuple(str(value) for value in undrainable["values"])
    defaults = raw["upgrade"]["defaults_by_workload_type"]
    by_type = {str(kind): str(entry["undrainableNodeBehavior"]) for kind, entry in defaults.items()}
    for kind, value in by_type.items():
        if value not in behaviors:
            raise ValueError(f"{DISRUPTION_FILE}: defaults_by_workload_type {kind}: {value!r} is not one of {behaviors}")
    return DisruptionFacts(
        undrainable_behaviors=behaviors,
        undrainable_aks_default=str(undrainable["aks_default"]),
        undrainable_by_workload_type=by_type,
        upgrade_quarantine_label=str(undrainable["quarantine_label"]),
        scheduled_event_condition=str(raw["scheduled_events"]["condition"]),
        scheduled_event_quiet_reason=str(raw["scheduled_events"]["quiet_reason"]),
        scheduled_event_reasons={str(reason): str(kind) for reason, kind in raw["scheduled_events"]["event_reasons"].items()},
        scheduled_event_marker=str(raw["scheduled_events"]["announced_marker"]),
        scheduled_event_condition_reason=str(raw["scheduled_events"]["condition_reason"]),
        auto_repair_source=str(raw["auto_repair"]["source"]),
        auto_repair_actions={
            str(action): (str(start), str(end), str(error))
            for action, (start, end, error) in raw["auto_repair"]["actions"].items()
        },
        auto_repair_max_repairs=int(raw["auto_repair"]["max_repairs"]),
        events_window_hours=int(raw["events"]["window_hours"]),
        events_per_reason=int(raw["events"]["per_reason"]),
    )
