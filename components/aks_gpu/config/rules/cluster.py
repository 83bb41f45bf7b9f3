"""The cluster section's rules: maintenance windows, channels and support plans, the names and network ranges ARM
refuses at create time, the stack's Azure tags, the system pool's size, and the Kubernetes version against the AKS
release calendar. Pure: config and the AKS facts in, problems (with key paths) out."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re

from aks_gpu import naming
from aks_gpu.aks_facts import (
    MUTATING_ADMISSION_POLICY_SINCE,
    KubernetesCalendar,
    MinorVersion,
    kubernetes_calendar,
    minor_key,
    minor_of,
    refusal_tag,
)
from aks_gpu.config.models import ClusterConfig, StackConfig
from aks_gpu.config.problems import Problem

P = naming.CONFIG_NAMESPACE


def cluster_rules(config: StackConfig) -> list[Problem]:
    problems = []
    minor = minor_of(config.cluster.kubernetes_version)
    nvidia = any(pool.vendor == "nvidia" for pool in config.gpu_pools)
    # An adopted cluster's version is not the stack's to set (nor known offline), as for the calendar's rule.
    old_minor = not config.cluster.existing and minor_key(minor) < minor_key(MUTATING_ADMISSION_POLICY_SINCE)
    if config.admission.enabled and nvidia and old_minor:
        problems.append(
            Problem(
                f"{P}:admission",
                f"cluster.kubernetesVersion {minor} serves no MutatingAdmissionPolicy (v1 from "
                f"{MUTATING_ADMISSION_POLICY_SINCE}), so the platform's "
                "aks-gpu-device-void is not deployed: a container that asks for no GPU, in a pod that asks for one, sees "
                "every GPU of its node when its image sets NVIDIA_VISIBLE_DEVICES=all (CUDA images do); set "
                "NVIDIA_VISIBLE_DEVICES=void in such containers, or upgrade",
                "warning",
            )
        )
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
        # Long-term support is offered only while its window is still open on ``today``: one that ended months ago
        # is no way out, and saying "until" a past date sends people to a plan AKS refuses.
        lts = (
            f"or keep {minor} under long-term support until {entry.lts_end_of_life} (skuTier Premium, "
            "supportPlan AKSLongTermSupport)"
            if today <= entry.lts_end_of_life
            else f"its long-term support ended on {entry.lts_end_of_life} too"
        )
        problems.append(
            Problem(
                path,
                f"{cluster.kubernetes_version!r}: {minor} reached end of life on AKS on {entry.end_of_life}; {choose}; "
                f"{lts} " + refusal_tag("kubernetes-version-end-of-life"),
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
