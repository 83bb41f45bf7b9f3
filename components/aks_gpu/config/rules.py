"""Rules that span keys: what pydantic's per-field checks cannot see, and what Azure would only refuse
halfway through a deployment. Pure: config and catalog in, problems (with key paths) out.

Rules that need the resolved model (what each pool exposes, which namespaces the admission policy exempts) run on it,
in ``components/aks_gpu/resolved/rules.py``; ``aks_gpu.resolved.stack`` runs both.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections import Counter
from decimal import Decimal

from aks_gpu import naming
from aks_gpu.aks_facts import (
    Arm64Entry,
    KubernetesCalendar,
    MinorVersion,
    arm64_support,
    kubernetes_calendar,
    minor_of,
    refusal_tag,
)
from aks_gpu.catalog import Catalog, VmSize
from aks_gpu.config.models import ClusterConfig, GpuPoolConfig, PlatformConfig, SmokeJobConfig, StackConfig
from aks_gpu.config.problems import Problem, did_you_mean

P = naming.CONFIG_NAMESPACE


def check_rules(config: PlatformConfig, catalog: Catalog, *, today: dt.date) -> list[Problem]:
    """Every cross-key problem of a stack (or, for a component, of the sections it was given). ``today`` is the
    day the Kubernetes version is checked against the AKS release calendar (the loader passes the real date)."""
    problems: list[Problem] = []
    if isinstance(config, StackConfig):
        problems += _cluster_rules(config)
        if not config.cluster.existing:
            problems += kubernetes_version_problems(config.cluster, today, kubernetes_calendar())
    for index, pool in enumerate(config.gpu_pools):
        problems += _pool_rules(pool, f"{P}:gpuPools[{index}]", config, catalog)
    problems += _duplicates(config)
    problems += _workload_rules(config)
    problems += _admission_rules(config)
    problems += _amd_operator_rules(config)
    problems += _monitoring_rules(config)
    problems += _remediation_rules(config)
    return problems


def _cluster_rules(config: StackConfig) -> list[Problem]:
    problems = []
    if config.workloads and config.cluster.network_policy == "none":
        problems.append(
            Problem(
                f"{P}:cluster.networkPolicy",
                "'none' is not allowed while workload namespaces exist: their deny-all NetworkPolicies would "
                "silently not be enforced; use azure, calico or cilium",
            )
        )
    for key, window in (("nodeOs", config.cluster.maintenance.node_os), ("autoUpgrade", config.cluster.maintenance.auto_upgrade)):
        if window is None:
            continue
        path = f"{P}:cluster.maintenance.{key}"
        if window.schedule in ("weekly", "relativeMonthly") and window.day_of_week is None:
            problems.append(Problem(f"{path}.dayOfWeek", f"is required for a {window.schedule} schedule"))
        if window.schedule == "absoluteMonthly" and window.day_of_month is None:
            problems.append(Problem(f"{path}.dayOfMonth", "is required for an absoluteMonthly schedule"))
        if window.schedule == "relativeMonthly" and window.week_index is None:
            problems.append(Problem(f"{path}.weekIndex", "is required for a relativeMonthly schedule"))
        for i, dates in enumerate(window.not_allowed_dates):
            if dates.start > dates.end:
                problems.append(Problem(f"{path}.notAllowedDates[{i}]", f"start {dates.start} is after end {dates.end}"))
    if config.cluster.maintenance.node_os is not None and config.cluster.node_os_upgrade_channel in ("None", "Unmanaged"):
        problems.append(
            Problem(
                f"{P}:cluster.maintenance.nodeOs",
                f"has no effect with nodeOsUpgradeChannel {config.cluster.node_os_upgrade_channel}",
                "warning",
            )
        )
    cluster = config.cluster
    if cluster.support_plan == "AKSLongTermSupport" and cluster.sku_tier != "Premium":
        problems.append(
            Problem(
                f"{P}:cluster.supportPlan",
                f"AKSLongTermSupport needs skuTier Premium (this cluster is {cluster.sku_tier}) "
                + refusal_tag("lts-needs-premium"),
            )
        )
    if cluster.support_plan == "AKSLongTermSupport" and cluster.upgrade_channel != "patch":
        # "Enable the patch auto-upgrade channel to keep your cluster on the latest supported patches. LTS supports only
        # the two most recent patch versions for each minor version" (https://learn.microsoft.com/azure/aks/
        # long-term-support#enable-long-term-support); rapid and stable move the minor itself ("the latest supported
        # patch release on minor version N-1", https://learn.microsoft.com/azure/aks/auto-upgrade-cluster).
        moves_minor = cluster.upgrade_channel in ("rapid", "stable")
        problems.append(
            Problem(
                f"{P}:cluster.upgradeChannel",
                f"{cluster.upgrade_channel} with supportPlan AKSLongTermSupport "
                + (
                    "upgrades the cluster to a newer minor, leaving the one long-term support was chosen for"
                    if moves_minor
                    else "leaves the cluster's patch behind, and LTS supports only the two newest patches of a minor"
                )
                + "; use patch, as the AKS LTS guide does",
                "warning",
            )
        )
    if cluster.upgrade_channel == "node-image":
        # "node-image (legacy) ... This channel is no longer recommended and is planned for deprecation"
        # https://learn.microsoft.com/azure/aks/auto-upgrade-cluster#cluster-auto-upgrade-channels
        problems.append(
            Problem(
                f"{P}:cluster.upgradeChannel",
                "node-image is the legacy channel AKS plans to deprecate; use patch (or stable) with nodeOsUpgradeChannel "
                "NodeImage, which upgrades node images the same way",
                "warning",
            )
        )
    if not cluster.existing and not cluster.deployer_access.enabled and not cluster.entra_admin_group_object_ids:
        problems.append(
            Problem(
                f"{P}:cluster.deployerAccess.enabled",
                "false and no entraAdminGroupObjectIds: with Entra ID RBAC on and local accounts off, nobody is given "
                "Kubernetes access, so the first pulumi up creates the cluster and then gets 403 Forbidden on every "
                "Kubernetes object unless the deploying identity has an AKS RBAC role from elsewhere",
                "warning",
            )
        )
    if not cluster.existing:
        problems += _cluster_name_rules(config)
        problems += network_range_problems(cluster)
        problems += _system_pool_size_rules(cluster)
        problems += _lts_os_rules(config)
    problems += tag_problems(cluster.tags, f"{P}:cluster.tags")
    if cluster.upgrade_channel == "node-image" and cluster.node_os_upgrade_channel != "NodeImage":
        # "when you set the cluster autoupgrade channel to node-image, it also automatically sets the node OS
        # autoupgrade channel to NodeImage. You can't change the node OS autoupgrade channel value" (data/arm_refusals.yaml)
        problems.append(
            Problem(
                f"{P}:cluster.nodeOsUpgradeChannel",
                f"{cluster.node_os_upgrade_channel} cannot go with upgradeChannel node-image: AKS fixes the node OS "
                "channel to NodeImage there; set NodeImage, or move upgradeChannel to patch "
                + refusal_tag("node-image-channel-locks-node-os"),
            )
        )
    if config.cluster.system_pool.min_count > config.cluster.system_pool.max_count:
        problems.append(
            Problem(
                f"{P}:cluster.systemPool.minCount",
                f"{config.cluster.system_pool.min_count} is greater than maxCount {config.cluster.system_pool.max_count}",
            )
        )
    return problems


# "The Domain Name System (DNS) prefix must start and end with alphanumeric values and must be between 1-54 characters
# in length. Valid characters include alphanumeric values and hyphens" (data/arm_refusals.yaml `dns-prefix-format`).
DNS_PREFIX = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9]{0,52}[A-Za-z0-9])?$")
# "The autogenerated syntax of MC_resourceGroupName_resourceName_AzureRegion must be no greater than 80 characters"
# (data/arm_refusals.yaml `node-resource-group-too-long`).
NODE_RESOURCE_GROUP_MAX = 80


def node_resource_group_name(config: StackConfig) -> str:
    """The name AKS gives the cluster's node resource group when none is chosen (this program chooses none)."""
    cluster = config.cluster
    # The region as an ARM location name ("Sweden Central" is swedencentral), as the node resource group carries it.
    region = (cluster.location or config.location).replace(" ", "").lower()
    return f"MC_{cluster.resource_group}_{cluster.name}_{region}"


def _cluster_name_rules(config: StackConfig) -> list[Problem]:
    """Names ARM refuses at create time, though each key passes its own pattern: the DNS prefix (the cluster name
    when none is set, and a cluster name may hold underscores and 63 characters) and the node resource group name
    AKS derives from three keys."""
    cluster = config.cluster
    problems: list[Problem] = []
    prefix = cluster.dns_prefix or cluster.name
    if not DNS_PREFIX.fullmatch(prefix):
        given = f"{prefix!r}" if cluster.dns_prefix else f"not set, so the cluster name {prefix!r} is used, and that"
        problems.append(
            Problem(
                f"{P}:cluster.dnsPrefix",
                f"{given} is not a DNS prefix AKS accepts: 1 to 54 letters, digits and hyphens, starting and ending with "
                "a letter or digit; set dnsPrefix to one " + refusal_tag("dns-prefix-format"),
            )
        )
    node_group = node_resource_group_name(config)
    if len(node_group) > NODE_RESOURCE_GROUP_MAX:
        problems.append(
            Problem(
                f"{P}:cluster.name",
                f"AKS would name the node resource group {node_group!r}, {len(node_group)} characters; the limit is "
                f"{NODE_RESOURCE_GROUP_MAX}: shorten the cluster name or resourceGroup "
                + refusal_tag("node-resource-group-too-long"),
            )
        )
    return problems


# ---------------------------------------------------------------- limits ARM and AKS enforce (data/arm_refusals.yaml)

# "AKS clusters can't use 169.254.0.0/16, 172.30.0.0/16, 172.31.0.0/16, or 192.0.2.0/24 for the Kubernetes service
# address range, pod address range, or cluster virtual network address range" (`network-reserved-range`).
AKS_RESERVED_RANGES = tuple(
    ipaddress.ip_network(cidr) for cidr in ("169.254.0.0/16", "172.30.0.0/16", "172.31.0.0/16", "192.0.2.0/24")
)
# What AKS uses when the cluster sends no serviceCidr / dnsServiceIp (azure-cni-overlay.md, `--service-cidrs` and
# `--dns-service-ip` defaults).
AKS_DEFAULT_SERVICE_CIDR = "10.0.0.0/16"
AKS_DEFAULT_DNS_SERVICE_IP = "10.0.0.10"


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def network_range_problems(cluster: ClusterConfig) -> list[Problem]:
    """The pod and service ranges against the ranges AKS reserves and against each other, and the DNS service address
    inside the service range (not its first address)."""
    problems: list[Problem] = []
    service_text = cluster.service_cidr or AKS_DEFAULT_SERVICE_CIDR
    ranges = (("podCidr", cluster.pod_cidr, True), ("serviceCidr", service_text, cluster.service_cidr is not None))
    parsed: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network] = {}
    for key, text, given in ranges:
        network = _network(text)
        if network is None:
            problems.append(Problem(f"{P}:cluster.{key}", f"{text!r} is not a network in CIDR notation (e.g. 10.244.0.0/16)"))
            continue
        parsed[key] = network
        reserved = [str(r) for r in AKS_RESERVED_RANGES if r.version == network.version and network.overlaps(r)]
        if reserved and given:
            problems.append(
                Problem(
                    f"{P}:cluster.{key}",
                    f"{text} overlaps {', '.join(reserved)}, which AKS reserves; choose a private range outside it "
                    + refusal_tag("network-reserved-range"),
                )
            )
    pods, services = parsed.get("podCidr"), parsed.get("serviceCidr")
    if pods is not None and services is not None and pods.version == services.version and pods.overlaps(services):
        whose = "serviceCidr" if cluster.service_cidr is not None else f"AKS's default service range {services}"
        problems.append(
            Problem(
                f"{P}:cluster.podCidr",
                f"{cluster.pod_cidr} overlaps {whose}: pod and service ranges must not overlap; choose another podCidr "
                + refusal_tag("network-ranges-overlap"),
            )
        )
    if cluster.service_cidr is not None or cluster.dns_service_ip is not None:
        dns_text = cluster.dns_service_ip or AKS_DEFAULT_DNS_SERVICE_IP
        try:
            dns = ipaddress.ip_address(dns_text)
        except ValueError:
            dns = None
        if services is not None and (dns is None or dns not in services or int(dns) - int(services.network_address) < 2):
            said = repr(dns_text) if cluster.dns_service_ip else f"not set, so AKS's default {dns_text}, and that"
            problems.append(
                Problem(
                    f"{P}:cluster.dnsServiceIp",
                    f"{said} is not a usable address of the service range {services}: inside it, and neither its "
                    "network address nor the first one (the kubernetes service's) "
                    + refusal_tag("dns-service-ip-outside-service-range"),
                )
            )
    return problems


# "Each resource, resource group, and subscription can have a maximum of 50 tag name-value pairs"; "Tag names can't
# contain these characters: <, >, %, &, \, ?, /" (`arm-tag-count`, `arm-tag-name-characters`).
ARM_TAG_LIMIT = 50
ARM_TAG_NAME_FORBIDDEN = frozenset("<>%&\\?/")
ARM_TAG_NAME_MAX, ARM_TAG_VALUE_MAX = 512, 256
# The tags aks-gpu puts on every Azure resource it creates beside the stack's own (components/aks_gpu/azure/cluster.py).
PLATFORM_TAGS = ("managed-by",)


def tag_problems(tags: dict[str, str], path: str) -> list[Problem]:
    """A stack's Azure tags against ARM's limits, counting the tags aks-gpu adds (tag names compare without case in
    ARM, so ``Managed-By`` is the platform's tag again, not a new one)."""
    problems: list[Problem] = []
    own = {name.lower() for name in PLATFORM_TAGS}
    total = len({name.lower() for name in tags} | own)
    if total > ARM_TAG_LIMIT:
        problems.append(
            Problem(
                path,
                f"{len(tags)} tags and the {len(PLATFORM_TAGS)} aks-gpu adds ({', '.join(PLATFORM_TAGS)}) make {total}; ARM "
                f"allows {ARM_TAG_LIMIT} per resource " + refusal_tag("arm-tag-count"),
            )
        )
    for name in sorted(tags):
        bad = sorted(set(name) & ARM_TAG_NAME_FORBIDDEN)
        if bad or not name or len(name) > ARM_TAG_NAME_MAX or len(tags[name]) > ARM_TAG_VALUE_MAX:
            why = (
                f"holds {' '.join(bad)}, which ARM tag names may not"
                if bad
                else f"is empty or longer than ARM allows ({ARM_TAG_NAME_MAX} for a name, {ARM_TAG_VALUE_MAX} for a value)"
            )
            problems.append(Problem(path, f"tag {name!r} {why} " + refusal_tag("arm-tag-name-characters")))
        elif name.lower() in own and name not in PLATFORM_TAGS:
            problems.append(Problem(path, f"tag {name!r} is aks-gpu's own {name.lower()!r} (ARM tag names ignore case)"))
    return problems


# An Azure VM size name: Standard_<family letters><vCPUs>[-<constrained vCPUs>]<features>[_<version>]
# (https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions).
VM_SIZE_VCPUS = re.compile(r"Standard_([A-Za-z]+)(\d+)(?:-(\d+))?[A-Za-z]*(?:_.*)?")
# "System node pool must use VM sku with more than 2 cores and 4GB memory" (`system-pool-vm-too-small`).
SYSTEM_POOL_MIN_VCPUS = 2


def vm_size_vcpus(vm_size: str) -> tuple[str, int] | None:
    """The family letters and (active) vCPU count a size's name states, or None for a name outside the convention."""
    match = VM_SIZE_VCPUS.fullmatch(vm_size)
    if match is None:
        return None
    family, vcpus, constrained = match.groups()
    return family.upper(), int(constrained or vcpus)


def _system_pool_size_rules(cluster: ClusterConfig) -> list[Problem]:
    path = f"{P}:cluster.systemPool.vmSize"
    size = cluster.system_pool.vm_size
    parsed = vm_size_vcpus(size)
    if parsed is None:
        return [
            Problem(
                path,
                f"{size!r} does not follow Azure's size naming, so its vCPUs cannot be checked against the system pool "
                f"minimum ({SYSTEM_POOL_MIN_VCPUS} vCPUs and 4 GB)",
                "warning",
            )
        ]
    family, vcpus = parsed
    if vcpus < SYSTEM_POOL_MIN_VCPUS or family.startswith("B"):
        why = f"has {vcpus} vCPU" if vcpus < SYSTEM_POOL_MIN_VCPUS else "is a B-series (burstable) size"
        return [
            Problem(
                path,
                f"{size} {why}: AKS requires system pools of at least {SYSTEM_POOL_MIN_VCPUS} vCPUs and 4 GB and supports "
                "no B-series there; use e.g. Standard_D4ds_v5 " + refusal_tag("system-pool-vm-too-small"),
            )
        ]
    return []


def _lts_os_rules(config: StackConfig) -> list[Problem]:
    """Long-term support on a minor whose LTS needs Ubuntu 24.04 node pools, which the pinned API cannot ask for."""
    cluster = config.cluster
    minor = minor_of(cluster.kubernetes_version)
    calendar = kubernetes_calendar()
    if cluster.support_plan != "AKSLongTermSupport" or minor not in calendar.lts_needs_ubuntu_2404:
        return []
    ubuntu = [f"systemPool ({cluster.system_pool.name})"] if cluster.system_pool.os_sku == "Ubuntu" else []
    ubuntu += [pool.name for pool in config.gpu_pools if pool.os_sku == "Ubuntu"]
    if not ubuntu:
        return []
    return [
        Problem(
            f"{P}:cluster.supportPlan",
            f"long-term support for {minor} needs Ubuntu 24.04 node pools (osSku Ubuntu means 22.04 before 1.35), and the "
            f"AKS API the provider is pinned to ({calendar.pinned_api_version}) has no Ubuntu2404 osSku: "
            f"{', '.join(ubuntu)} would run 22.04. Use {calendar.ubuntu_2404_default_from} or newer, or AzureLinux pools "
            + refusal_tag("lts-needs-ubuntu-2404"),
        )
    ]


def _pool_rules(pool: GpuPoolConfig, path: str, config: PlatformConfig, catalog: Catalog) -> list[Problem]:
    problems = []
    size, model, gpus = catalog.gpu_facts(pool.vm_size, pool.gpu_model, pool.gpu_count)
    if pool.autoscaling:
        if pool.min_count > pool.max_count:
            problems.append(Problem(f"{path}.minCount", f"{pool.min_count} is greater than maxCount {pool.max_count}"))
        if pool.max_count < 1:
            problems.append(Problem(f"{path}.maxCount", "must be at least 1 when autoscaling is on"))
        if pool.count is not None:
            problems.append(Problem(f"{path}.count", "is only for autoscaling: false; use minCount/maxCount"))
    elif pool.count is None:
        problems.append(Problem(f"{path}.count", "is required when autoscaling is false"))

    if size is None:
        if pool.gpu_count is None or pool.gpu_model is None:
            # A typo plans a pool of "? x ?" GPUs that ARM then refuses: an error, as a compiler would, with the
            # nearest names; a size the catalog lacks is described by gpuCount and gpuModel instead.
            missing = " and ".join(
                key for key, value in (("gpuCount", pool.gpu_count), ("gpuModel", pool.gpu_model)) if value is None
            )
            nearest = did_you_mean(pool.vm_size, catalog.vm_sizes, count=3)
            problems.append(
                Problem(
                    f"{path}.vmSize",
                    f"{pool.vm_size!r} is not in the GPU catalog{nearest} (`aksgpu catalog` lists the sizes it knows; for "
                    f"a size it does not know, state {missing} on the pool so the GPU count and MIG math can be checked)",
                )
            )
    elif size.vendor != pool.vendor:
        problems.append(
            Problem(
                f"{path}.vendor", f"{pool.vendor!r} does not match {size.name}, which carries {size.gpu.product} ({size.vendor})"
            )
        )
    if pool.gpu_model is not None and pool.gpu_model not in catalog.gpu_models:
        problems.append(
            Problem(
                f"{path}.gpuModel",
                f"{pool.gpu_model!r} is unknown{did_you_mean(pool.gpu_model, catalog.gpu_models)}; known models: "
                f"{', '.join(sorted(catalog.gpu_models))}",
                "warning",
            )
        )

    if pool.mig_profile is not None:
        if pool.vendor != "nvidia":
            problems.append(Problem(f"{path}.migProfile", "MIG is an NVIDIA feature; remove it from an AMD pool"))
        elif model is None:
            problems.append(
                Problem(f"{path}.migProfile", "needs a known GPU model (catalog size or gpuModel) to compute the MIG slices")
            )
        elif not model.supports_mig:
            problems.append(
                Problem(f"{path}.migProfile", f"{pool.mig_profile!r} is not allowed: {model.product} has no MIG support")
            )
        elif pool.mig_profile not in model.mig:
            problems.append(
                Problem(
                    f"{path}.migProfile", f"{pool.mig_profile!r} is not allowed on {model.product}; it has {', '.join(model.mig)}"
                )
            )
        if pool.time_slicing_replicas is not None:
            problems.append(Problem(f"{path}.timeSlicingReplicas", "time-slicing and MIG on the same pool are refused; pick one"))
    if pool.time_slicing_replicas is not None and pool.vendor == "amd":
        problems.append(Problem(f"{path}.timeSlicingReplicas", "time-slicing is an NVIDIA device plugin feature"))

    if pool.vendor == "amd" and pool.gpu_driver == "Install":
        problems.append(
            Problem(
                f"{path}.gpuDriver",
                "'Install' is not allowed on AMD: AKS installs no AMD driver; use None " + refusal_tag("amd-driver-none"),
            )
        )
    if pool.vendor == "amd" and config.device_plugin.amd_mode == "daemonset":
        # "Currently, AKS doesn't manage nor automate the installation of GPU drivers or the AMD GPU device plugin on
        # AMD GPU-enabled node pools" (https://learn.microsoft.com/azure/aks/use-amd-gpus#options-for-using-amd-gpus,
        # read 2026-12-01, page dated 2025-06-04), and the AKS Ubuntu images list no AMD driver package (no
        # amdgpu-dkms, no ROCm; only the kernel's linux-modules-extra-*-azure and libdrm-amdgpu1): Azure/AKS
        # vhd-notes/aks-ubuntu/AKSUbuntu-2204/202607.09.0.txt and AKSUbuntu-2404/202607.09.0.txt at commit 8d1c8909.
        # Whether that kernel package's in-tree amdgpu drives an MI300X is stated by no source read, so a warning,
        # not a refusal: the page's path is the AMD GPU Operator, and a team may load amdgpu itself.
        problems.append(
            Problem(
                f"{P}:devicePlugin.amdMode",
                f"daemonset on AMD pool {pool.name}: AKS installs no AMD driver and the ROCm device plugin installs none "
                "either, so the nodes likely show no amd.com/gpu; use amdMode gpu-operator (it builds and loads amdgpu) "
                "unless something else loads amdgpu on these nodes",
                "warning",
            )
        )
    driver = pool.effective_gpu_driver(config.device_plugin.mode)
    if pool.vendor == "nvidia" and driver == "None" and config.device_plugin.mode != "gpu-operator":
        problems.append(
            Problem(
                f"{path}.gpuDriver", "None with devicePlugin.mode daemonset leaves the nodes without an NVIDIA driver", "warning"
            )
        )

    if pool.nvme_cache:
        if size is not None and size.nvme is None:
            problems.append(
                Problem(
                    f"{path}.nvmeCache",
                    f"{size.name} has no local NVMe data disks to cache on; remove nvmeCache or pick an ND/NC size with NVMe",
                )
            )
        elif size is not None and size.nvme is not None and size.nvme.disks == 1 and pool.os_disk_type == "Ephemeral":
            problems.append(
                Problem(
                    f"{path}.osDiskType",
                    f"an ephemeral OS disk on {size.name} uses its only NVMe disk, leaving none for the cache",
                    "warning",
                )
            )
        elif size is None:
            problems.append(
                Problem(
                    f"{path}.nvmeCache",
                    f"{pool.vm_size!r} is not in the GPU catalog, so whether it has local NVMe data disks cannot be "
                    "checked; without them the cache has no capacity",
                    "warning",
                )
            )
        # The storage settings only matter once a pool asks for the cache; report them once, on the first.
        first_nvme_pool = next(p for p in config.gpu_pools if p.nvme_cache)
        if pool is first_nvme_pool:
            problems += _storage_rules(config)
    problems += _label_and_taint_rules(pool, path)
    problems += _upgrade_rules(pool, path)
    if pool.spot and pool.spot_eviction_policy == "Deallocate":
        problems.append(
            Problem(f"{path}.spotEvictionPolicy", "Deallocate keeps evicted GPU VMs counting against quota", "warning")
        )
    if not pool.spot and pool.spot_max_price != -1:
        problems.append(Problem(f"{path}.spotMaxPrice", "is only for spot pools (spot: true)"))
    elif pool.spot and not _valid_spot_price(pool.spot_max_price):
        problems.append(
            Problem(
                f"{path}.spotMaxPrice",
                f"{pool.spot_max_price!r} is not allowed: -1 (pay up to the on-demand price) or a positive price in US "
                "dollars with at most five decimal places " + refusal_tag("spot-max-price-format"),
            )
        )
    if pool.vendor == "amd" and pool.os_sku == "AzureLinux":
        problems.append(
            Problem(
                f"{path}.osSku",
                "AzureLinux is not supported with AMD GPUs on AKS; use Ubuntu " + refusal_tag("amd-no-azure-linux"),
            )
        )
    if (
        isinstance(config, StackConfig)
        and pool.os_sku == "AzureLinux"
        and config.cluster.node_os_upgrade_channel == "SecurityPatch"
    ):
        # "Azure Linux doesn't support this channel on GPU-enabled VMs" (SecurityPatch),
        # https://learn.microsoft.com/azure/aks/auto-upgrade-node-os-image#channels-for-node-os-image-upgrades
        problems.append(
            Problem(
                f"{path}.osSku",
                "AzureLinux GPU nodes get no security patches from nodeOsUpgradeChannel SecurityPatch (AKS does not "
                "support that channel on Azure Linux GPU VMs); use NodeImage or an Ubuntu pool",
                "warning",
            )
        )
    if size is not None and size.cpu_architecture == "arm64":
        problems += _arm64_rules(pool, path, size, config, driver)
    if gpus == 0:
        problems.append(Problem(f"{path}.vmSize", "exposes no GPUs"))
    problems += _pool_limit_rules(pool, path, catalog)
    return problems


# AKS sizes a default ephemeral OS disk to the temp storage "so long as the temp is at least 128 GiB"
# (`ephemeral-os-disk-too-large`); below that its default OS disk does not fit.
EPHEMERAL_DEFAULT_MIN_TEMP_GIB = 128


def _ephemeral_os_disk_rules(pool: GpuPoolConfig, path: str, catalog: Catalog) -> list[Problem]:
    """An ephemeral OS disk against the local disks of the size that can hold it: the temp disk, and one local NVMe
    disk where the size has them (which of the two AKS picks on a size with both is not documented, so only a disk
    that fits on neither is refused)."""
    if pool.os_disk_type != "Ephemeral":
        return []
    temp = catalog.temp_disk_of(pool.vm_size)
    size = catalog.vm_size(pool.vm_size)
    if temp is None:
        return [
            Problem(
                f"{path}.osDiskType",
                f"Ephemeral on {pool.vm_size}: its temp disk size is not in the catalog (gpu_catalog.yaml temp_disk_gib), so "
                "whether the OS disk fits cannot be checked; AKS refuses one that does not",
                "warning",
            )
        ]
    places = {f"its {temp} GiB temp disk": temp}
    if size is not None and size.nvme is not None:
        per_disk = size.nvme.capacity_gib // size.nvme.disks
        places[f"one of its {per_disk} GiB NVMe disks"] = per_disk
    largest = max(places.values())
    where = " or ".join(places)
    wanted = pool.os_disk_size_gb
    if wanted is None and largest < EPHEMERAL_DEFAULT_MIN_TEMP_GIB:
        return [
            Problem(
                f"{path}.osDiskType",
                f"Ephemeral on {pool.vm_size}: AKS's default OS disk does not fit {where} (it sizes the disk to the temp "
                f"storage only from {EPHEMERAL_DEFAULT_MIN_TEMP_GIB} GiB); set osDiskSizeGb to {largest} or less, or use "
                "Managed " + refusal_tag("ephemeral-os-disk-too-large"),
            )
        ]
    if wanted is not None and wanted > largest:
        return [
            Problem(
                f"{path}.osDiskType",
                f"Ephemeral with osDiskSizeGb {wanted} on {pool.vm_size}: the OS disk fits neither {where}; set "
                f"osDiskSizeGb to {largest} or less, or use Managed " + refusal_tag("ephemeral-os-disk-too-large"),
            )
        ]
    return []


# "The minimum value that can be set for maximum pods per node is 10 if and only if the configuration of each node
# pool has space for a minimum of 30 pods" (`max-pods-minimum`).
POOL_MIN_PODS = 30


def _pool_limit_rules(pool: GpuPoolConfig, path: str, catalog: Catalog) -> list[Problem]:
    problems: list[Problem] = []
    nodes = pool.min_count if pool.autoscaling else (pool.count or 0)
    if pool.max_pods < POOL_MIN_PODS and pool.max_pods * nodes < POOL_MIN_PODS:
        problems.append(
            Problem(
                f"{path}.maxPods",
                f"{pool.max_pods} pods per node on {nodes} node(s) is room for {pool.max_pods * nodes} pods; AKS takes a "
                f"maxPods under {POOL_MIN_PODS} only when the pool holds {POOL_MIN_PODS} pods: raise maxPods to "
                f"{POOL_MIN_PODS} or keep more nodes " + refusal_tag("max-pods-minimum"),
            )
        )
    problems += _ephemeral_os_disk_rules(pool, path, catalog)
    retired = catalog.not_offered_reason(pool.vm_size)
    if retired is not None:
        problems.append(
            Problem(
                f"{path}.vmSize",
                f"{pool.vm_size!r}: {retired}; `aksgpu catalog` lists the sizes to use " + refusal_tag("gpu-size-not-offered"),
            )
        )
    elif pool.vendor == "amd" and catalog.aks_amd_sizes and not catalog.aks_supports_amd_size(pool.vm_size):
        problems.append(
            Problem(
                f"{path}.vmSize",
                f"{pool.vm_size!r}: AKS supports AMD GPU pools on {', '.join(sorted(catalog.aks_amd_sizes))} only "
                + refusal_tag("amd-size-not-supported"),
            )
        )
    if pool.managed_gpu:
        problems.append(
            Problem(
                f"{path}.managedGpu",
                "AKS-managed GPU pools need gpuProfile.nvidia.managementMode, which the provider's AKS API 2025-09-01 "
                "does not have (preview on 2026-01-02-preview, stable from 2026-08-01); see docs/platform.md "
                + refusal_tag("managed-gpu-api-unreachable"),
            )
        )
    return problems


def kubernetes_version_problems(cluster: ClusterConfig, today: dt.date, calendar: KubernetesCalendar) -> list[Problem]:
    """The cluster's Kubernetes minor against the AKS release calendar on ``today``: refused past end of life
    (unless in long-term support), warned within the calendar's warning window."""
    path = f"{P}:cluster.kubernetesVersion"
    minor = minor_of(cluster.kubernetes_version)
    supported = calendar.supported(today)
    choose = f"supported on {today}: {', '.join(supported) or 'none in the calendar data'}"
    entry = calendar.get(minor)
    if entry is None:
        return [
            Problem(
                path,
                f"{cluster.kubernetes_version!r}: {minor} is not in the AKS release calendar data (components/aks_gpu/data/"
                f"aks_versions.yaml, read {calendar.read_on}); {choose}; if AKS has released {minor} since, update "
                "the data from the calendar page " + refusal_tag("kubernetes-version-unknown"),
            )
        ]
    problems: list[Problem] = problem_of_patch(cluster, entry, calendar)
    if today < entry.ga:
        problems.append(
            Problem(path, f"{minor} is not GA on AKS until {entry.ga} (preview versions carry no SLA); {choose}", "warning")
        )
    long_term = cluster.support_plan == "AKSLongTermSupport" and cluster.sku_tier == "Premium"
    end = entry.lts_end_of_life if long_term else entry.end_of_life
    if today > entry.end_of_life and not long_term:
        problems.append(
            Problem(
                path,
                f"{cluster.kubernetes_version!r}: {minor} reached end of life on AKS on {entry.end_of_life}; {choose}; "
                f"or keep {minor} under long-term support until {entry.lts_end_of_life} (skuTier Premium, "
                "supportPlan AKSLongTermSupport) " + refusal_tag("kubernetes-version-end-of-life"),
            )
        )
    elif today > end:
        problems.append(
            Problem(
                path,
                f"{cluster.kubernetes_version!r}: long-term support for {minor} ended on {end}; {choose} "
                + refusal_tag("kubernetes-version-end-of-life"),
            )
        )
    elif (end - today).days <= calendar.warn_days:
        support = "long-term support" if long_term else "support"
        problems.append(
            Problem(
                path,
                f"{minor} leaves AKS {support} on {end}, in {(end - today).days} days: plan the upgrade ({choose})",
                "warning",
            )
        )
    return problems


def problem_of_patch(cluster: ClusterConfig, entry: MinorVersion, calendar: KubernetesCalendar) -> list[Problem]:
    """A pinned patch (1.NN.P) against the newest one the AKS release notes announced for its minor."""
    parts = cluster.kubernetes_version.split(".")
    if len(parts) < 3 or entry.latest_patch is None:
        return []
    path, patch, newest = f"{P}:cluster.kubernetesVersion", int(parts[2]), f"{entry.minor}.{entry.latest_patch}"
    if patch > entry.latest_patch:
        return [
            Problem(
                path,
                f"{cluster.kubernetes_version!r}: AKS has not announced it; the newest {entry.minor} patch in the AKS "
                f"release notes ({calendar.patches_read_from}) is {newest}. Write {entry.minor} (AKS picks its newest "
                "patch), or update components/aks_gpu/data/aks_versions.yaml if AKS has released it since "
                + refusal_tag("kubernetes-patch-not-offered"),
            )
        ]
    if patch < entry.latest_patch:
        return [
            Problem(
                path,
                f"{cluster.kubernetes_version!r} is older than {newest}: AKS removes old patches (two months minimum "
                "lifecycle) and then creates no cluster or node pool on them; write "
                f"{entry.minor} to get the newest patch",
                "warning",
            )
        ]
    return []


def _storage_rules(config: PlatformConfig) -> list[Problem]:
    storage = config.storage
    problems: list[Problem] = []
    if storage.extension_version is None:
        return problems
    if storage.flavour == "v2":
        problems.append(
            Problem(
                f"{P}:storage.extensionVersion",
                f"{storage.extension_version!r}: Azure Container Storage v2 cannot be pinned to a version (it installs "
                "the latest and updates itself); remove extensionVersion " + refusal_tag("acstor-v2-no-version"),
            )
        )
    elif storage.extension_auto_upgrade:
        problems.append(
            Problem(
                f"{P}:storage.extensionVersion",
                f"{storage.extension_version!r} pins the Azure Container Storage extension, which needs "
                "extensionAutoUpgrade: false " + refusal_tag("extension-version-needs-manual-upgrade"),
            )
        )
    return problems


def _label_and_taint_rules(pool: GpuPoolConfig, path: str) -> list[Problem]:
    """Labels and taints the platform or AKS set themselves: a user value would break pool placement, the device
    plugin's per-pool config, the GPU Operator's operand switches, or be refused by AKS."""
    problems: list[Problem] = []
    for key in sorted(pool.labels):
        domain = naming.reserved_domain(key)
        if key in naming.PLATFORM_NODE_LABELS or key.startswith(naming.PLATFORM_LABEL_PREFIX):
            problems.append(
                Problem(f"{path}.labels", f"{key!r} is set by aks-gpu itself on this pool's nodes; choose another label key")
            )
        elif domain is not None:
            problems.append(
                Problem(
                    f"{path}.labels",
                    f"{key!r} is in {domain}, a label domain AKS and Kubernetes reserve for themselves; choose another "
                    "label key " + refusal_tag("reserved-label-prefix"),
                )
            )
    for index, taint in enumerate(pool.taints):
        key = taint.split("=", 1)[0].split(":", 1)[0]
        if key in naming.PLATFORM_TAINT_KEYS - {naming.SPOT_TAINT_KEY}:
            problems.append(
                Problem(f"{path}.taints[{index}]", f"{taint!r} uses {key}, the GPU taint aks-gpu sets on every pool itself")
            )
        elif key == naming.SPOT_TAINT_KEY or naming.reserved_domain(key) is not None:
            problems.append(
                Problem(
                    f"{path}.taints[{index}]",
                    f"{taint!r} uses a key AKS sets or reserves itself (spot pools get the spot taint from AKS) "
                    + refusal_tag("reserved-taint-key"),
                )
            )
    return problems


def _is_zero(value: str | None) -> bool:
    return value in ("0", "0%")


def _upgrade_rules(pool: GpuPoolConfig, path: str) -> list[Problem]:
    upgrade = pool.upgrade
    given = upgrade.model_fields_set
    problems: list[Problem] = []
    if pool.spot:
        # "There are no surge nodes available for Spot node pool upgrades" and "no drain is applied"
        # (https://learn.microsoft.com/azure/aks/spot-node-pool#upgrade-a-spot-node-pool): the pool is sent no
        # upgradeSettings at all (components/aks_gpu/azure/node_pool.py).
        if upgrade.max_surge is not None:
            problems.append(
                Problem(
                    f"{path}.upgrade.maxSurge",
                    "is not allowed on a spot pool: AKS upgrades spot pools without surge nodes and ARM refuses the "
                    "setting; remove it " + refusal_tag("spot-no-max-surge"),
                )
            )
        if upgrade.max_unavailable is not None:
            problems.append(
                Problem(
                    f"{path}.upgrade.maxUnavailable",
                    "is not allowed on a spot pool (ARM refuses it); remove it " + refusal_tag("spot-no-max-unavailable"),
                )
            )
        for key, field in (
            ("drainTimeoutInMinutes", "drain_timeout_in_minutes"),
            ("nodeSoakDurationInMinutes", "node_soak_duration_in_minutes"),
        ):
            if field in given:
                problems.append(
                    Problem(
                        f"{path}.upgrade.{key}",
                        "has no effect on a spot pool: AKS cordons spot nodes and sends an eviction notice on upgrade, "
                        "without a drain, and aks-gpu sends spot pools no upgrade settings",
                        "warning",
                    )
                )
        return problems
    if _is_zero(upgrade.max_surge) and (upgrade.max_unavailable is None or _is_zero(upgrade.max_unavailable)):
        problems.append(
            Problem(
                f"{path}.upgrade.maxSurge",
                f"{upgrade.max_surge!r} needs upgrade.maxUnavailable above zero: AKS requires a surge when no node may "
                "be unavailable " + refusal_tag("max-surge-zero-needs-max-unavailable"),
            )
        )
    elif (
        upgrade.max_unavailable is not None
        and not _is_zero(upgrade.max_unavailable)
        and not _is_zero(upgrade.effective_max_surge)
    ):
        # Both above zero is AKS's "MaxUnavailable fallback", documented as preview and needing the aks-preview CLI
        # (https://learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling#maxunavailable-fallback-preview);
        # what the stable 2025-09-01 API the provider uses does with it is not documented.
        problems.append(
            Problem(
                f"{path}.upgrade.maxUnavailable",
                f"together with maxSurge {upgrade.effective_max_surge!r} is AKS's preview surge-then-in-place fallback, "
                'not documented for the stable API this program uses; set maxSurge "0" for in-place upgrades',
                "warning",
            )
        )
    return problems


def _valid_spot_price(price: float) -> bool:
    # "the value must be -1 or a positive value with up to five decimal places"
    # https://learn.microsoft.com/azure/aks/spot-node-pool#limitations
    if price == -1:
        return True
    exponent = Decimal(repr(price)).as_tuple().exponent
    return price > 0 and isinstance(exponent, int) and exponent >= -5


def _arm64_rules(pool: GpuPoolConfig, path: str, size: VmSize, config: PlatformConfig, driver: str) -> list[Problem]:
    """An arm64 (Grace) pool runs only what has linux/arm64 images: each thing the platform puts on its nodes is
    looked up in components/aks_gpu/data/arm64_support.yaml; unknown or no is refused, unsettled is a warning."""
    facts = arm64_support()
    problems: list[Problem] = []

    def judge(key: str, what: str, entry: Arm64Entry) -> None:
        reason = entry.note.split(". ")[0].rstrip(".")
        where = f"components/aks_gpu/data/arm64_support.yaml ({entry.name})"
        if entry.arm64 in ("no", "unknown"):
            verdict = "does not run on arm64" if entry.arm64 == "no" else "is not known to run on arm64"
            problems.append(Problem(key, f"{size.name} is an arm64 (Grace) VM and {what} {verdict}: {reason}; see {where}"))
        elif entry.arm64 == "unsettled":
            problems.append(Problem(key, f"{size.name} is an arm64 (Grace) VM; {what}: {reason}; see {where}", "warning"))

    def unchecked(key: str, image: str) -> None:
        problems.append(
            Problem(
                key,
                f"{image!r} runs on {pool.name}, an arm64 (Grace) pool; aks-gpu cannot check it: make sure its manifest "
                "list has linux/arm64",
                "warning",
            )
        )

    if pool.vendor != "nvidia":
        return problems
    plugin = config.device_plugin
    if plugin.mode == "daemonset":
        if plugin.nvidia_image is not None:
            unchecked(f"{P}:devicePlugin.nvidiaImage", plugin.nvidia_image)
        else:
            judge(f"{P}:devicePlugin.mode", "the NVIDIA device plugin image", facts["nvidia-device-plugin"])
    else:
        judge(f"{P}:devicePlugin.mode", "the NVIDIA GPU Operator and its operands", facts["nvidia-gpu-operator"])
    monitoring = config.monitoring
    if monitoring.enabled and plugin.mode == "daemonset":
        if monitoring.dcgm_exporter_image is not None:
            unchecked(f"{P}:monitoring.dcgmExporterImage", monitoring.dcgm_exporter_image)
        else:
            judge(f"{P}:monitoring.enabled", "the DCGM exporter image", facts["dcgm-exporter"])
    smoke = config.validation.smoke_job
    if smoke.enabled:
        if smoke.image != SmokeJobConfig().image:
            unchecked(f"{P}:validation.smokeJob.image", smoke.image)
        else:
            judge(f"{P}:validation.smokeJob.image", "the smoke Job's CUDA image", facts["smoke-job-cuda"])
    if pool.nvme_cache:
        judge(
            f"{path}.nvmeCache",
            f"Azure Container Storage {config.storage.flavour}",
            facts[f"azure-container-storage-{config.storage.flavour}"],
        )
    if driver == "Install":
        os_entry = facts["aks-nvidia-driver-ubuntu" if pool.os_sku == "Ubuntu" else "aks-nvidia-driver-azurelinux"]
        judge(f"{path}.osSku", f"the NVIDIA driver AKS installs on {pool.os_sku}", os_entry)
    return problems


def _duplicates(config: PlatformConfig) -> list[Problem]:
    problems = []
    pool_names = Counter(p.name for p in config.gpu_pools)
    seen: set[str] = set()
    system_pool = config.cluster.system_pool.name if isinstance(config, StackConfig) else None
    for index, pool in enumerate(config.gpu_pools):
        if pool_names[pool.name] > 1 and pool.name in seen:
            problems.append(Problem(f"{P}:gpuPools[{index}].name", f"{pool.name!r} is used by another pool"))
        seen.add(pool.name)
        if pool.name == system_pool:
            problems.append(Problem(f"{P}:gpuPools[{index}].name", f"{pool.name!r} is the system pool's name"))
    names: set[str] = set()
    for index, workload in enumerate(config.workloads):
        if workload.name in names:
            problems.append(Problem(f"{P}:workloads[{index}].name", f"{workload.name!r} is used by another workload"))
        names.add(workload.name)
    return problems


def _workload_rules(config: PlatformConfig) -> list[Problem]:
    """What a workload's own keys must satisfy; which pools serve it is checked on the model (resolved/rules.py)."""
    problems = []
    for index, workload in enumerate(config.workloads):
        for rule_index, rule in enumerate(workload.network.allow_egress):
            problems += cidr_problems(rule.cidr, f"{P}:workloads[{index}].network.allowEgress[{rule_index}].cidr")
    return problems


def cidr_problems(cidr: str, path: str) -> list[Problem]:
    """An egress CIDR the API server would refuse (or read differently than written) in a NetworkPolicy ipBlock."""
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return [Problem(path, f"{cidr!r} is not an IPv4 or IPv6 network in CIDR notation (e.g. 10.20.0.0/16)")]
    if network.network_address != ipaddress.ip_address(cidr.partition("/")[0]):
        return [Problem(path, f"{cidr!r} has host bits set; it allows all of {network}", "warning")]
    return []


def _admission_rules(config: PlatformConfig) -> list[Problem]:
    admission = config.admission
    actions = admission.validation_actions
    problems = []
    if not actions:
        problems.append(Problem(f"{P}:admission.validationActions", "needs at least one of Deny, Warn, Audit"))
    elif "Deny" in actions and "Warn" in actions:
        problems.append(
            Problem(f"{P}:admission.validationActions", "Deny and Warn may not be used together (Kubernetes refuses it)")
        )
    # No tenant namespace is exempt: a workload namespace outside the policy would have no GPU rules at all. (A
    # workload named like a namespace the stack exempts for its own agents is checked on the model.)
    workloads = {workload.name for workload in config.workloads}
    for name in admission.exempt_namespaces:
        if name in workloads:
            problems.append(
                Problem(
                    f"{P}:admission.exemptNamespaces",
                    f"{name} is a workload namespace; the GPU placement policy must apply there, remove it",
                )
            )
    for index, workload in enumerate(config.workloads):
        if workload.rdma and workload.pod_security == "restricted":
            problems.append(
                Problem(
                    f"{P}:workloads[{index}].rdma",
                    "RDMA needs the IPC_LOCK capability, which podSecurity restricted forbids; use baseline (the default)",
                )
            )
    for name in admission.gpu_namespaces:
        if name in workloads:
            problems.append(
                Problem(f"{P}:admission.gpuNamespaces", f"{name} is a workload namespace already; remove it", "warning")
            )
    return problems


def _amd_operator_rules(config: PlatformConfig) -> list[Problem]:
    """The AMD GPU Operator's prerequisites, refused before the Helm release would hang or do nothing.
    https://instinct.docs.amd.com/projects/gpu-operator/en/latest/installation/kubernetes-helm.html (cert-manager
    first), https://instinct.docs.amd.com/projects/gpu-operator/en/latest/drivers/installation.html (spec.driver.image:
    "your repository to host driver image", no tag)."""
    plugin = config.device_plugin
    if plugin.amd_mode != "gpu-operator" or not any(pool.vendor == "amd" for pool in config.gpu_pools):
        return []
    problems = []
    if not plugin.cert_manager_installed:
        problems.append(
            Problem(
                f"{P}:devicePlugin.certManagerInstalled",
                "the AMD GPU Operator needs cert-manager for its webhooks' certificates, and this stack does not "
                "install it: install it (helm install cert-manager jetstack/cert-manager --namespace cert-manager "
                "--create-namespace --set crds.enabled=true), then set certManagerInstalled: true",
            )
        )
    if plugin.amd_driver_image is None:
        problems.append(
            Problem(
                f"{P}:devicePlugin.amdDriverImage",
                "AKS installs no AMD driver, so the AMD GPU Operator builds the amdgpu driver image (KMM) and pushes it "
                "to a registry you own: name the repository without a tag (e.g. myregistry.azurecr.io/amdgpu-driver) "
                "and give the cluster push and pull rights on it",
            )
        )
    return problems


def _monitoring_rules(config: PlatformConfig) -> list[Problem]:
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


def _remediation_rules(config: PlatformConfig) -> list[Problem]:
    """What the remediation section cannot do on this stack (components/aks_gpu/monitoring/remediation.py)."""
    settings, path = config.remediation, f"{P}:remediation"
    if settings.mode == "off":
        return []
    problems: list[Problem] = []
    if _is_zero(settings.max_unhealthy):
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
    # Only a drain the stack wrote: the defaults name the common types, which a stack need not have.
    types = {workload.type for workload in config.workloads}
    written = settings.drain if "drain" in settings.model_fields_set else {}
    for kind in sorted(set(written) - types):
        problems.append(
            Problem(f"{path}.drain.{kind}", f"no workload has type {kind}: this drain mode applies to nothing", "warning")
        )
    return problems
