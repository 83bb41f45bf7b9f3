"""Limits Azure enforces on the cluster as a whole, and values the ARM specs leave open: node pools and nodes per
cluster, the overlay pod range against the nodes the pools can reach, the service range's size, IPv4 ranges,
availability zone names, the region and whether it offers each pool's VM size. Pure: config and the AKS facts in,
problems (with key paths) out; each refusal is in data/arm_refusals.yaml with its source."""

from __future__ import annotations

import difflib
import ipaddress
import math
import re

from aks_gpu import naming
from aks_gpu.aks_facts import azure_locations, refusal_tag, vm_size_regions
from aks_gpu.config.models import AKS_DEFAULT_MAX_SURGE, StackConfig, surge_nodes
from aks_gpu.config.problems import Problem

P = naming.CONFIG_NAMESPACE

# "Maximum node pools per cluster: 100" (AKS quotas, `cluster-node-pool-limit`); the system pool is one of them.
MAX_NODE_POOLS = 100
# "Free tier ... Supports up to 1,000 nodes"; "Standard tier ... Supports up to 5,000 nodes" (`cluster-node-limit`);
# Premium includes every Standard feature.
MAX_NODES = {"Free": 1000, "Standard": 5000, "Premium": 5000}
# "Service address CIDR must be smaller than /12" (`service-range-too-large`): a /12 or larger is refused.
SERVICE_RANGE_LARGEST_PREFIX = 13
# "Each node receives a /24 address space for its pods" (`overlay-pod-range-too-small`).
OVERLAY_NODE_PREFIX = 24
# Availability zones are logical zones 1, 2 and 3 ("logicalZone": "1" .. "3" in `az account list-locations`
# availabilityZoneMappings; `availability-zone-values`).
ZONES = ("1", "2", "3")
# ARM location names are lowercase letters and digits ("swedencentral"); the display name ("Sweden Central") is
# also accepted by ARM, which compares without case and spaces.
LOCATION_NAME = re.compile(r"^[a-z0-9]+$")


def limit_rules(config: StackConfig) -> list[Problem]:
    problems: list[Problem] = []
    cluster = config.cluster
    pools = len(config.gpu_pools) + len(config.cpu_pools) + (0 if cluster.existing else 1)
    if pools > MAX_NODE_POOLS:
        problems.append(
            Problem(
                f"{P}:gpuPools",
                f"{len(config.gpu_pools)} GPU pools"
                + (f", {len(config.cpu_pools)} CPU pools" if config.cpu_pools else "")
                + ("" if cluster.existing else " and the system pool")
                + f" make {pools} node pools; an AKS cluster holds at most {MAX_NODE_POOLS} (a limit AKS does not raise): "
                "merge pools of the same VM size and workload " + refusal_tag("cluster-node-pool-limit"),
            )
        )
    system = 0 if cluster.existing else cluster.system_pool.max_count
    nodes = system + sum(pool.most_nodes for pool in config.gpu_pools) + sum(pool.max_count for pool in config.cpu_pools)
    limit = MAX_NODES[cluster.sku_tier]
    if nodes > limit:
        fix = (
            "use skuTier Standard (5000 nodes) or lower the pools' maxCount"
            if cluster.sku_tier == "Free"
            else "lower the pools' maxCount"
        )
        problems.append(
            Problem(
                f"{P}:cluster.skuTier",
                f"{cluster.sku_tier} holds at most {limit} nodes per cluster, and the pools reach {nodes} "
                "(each GPU pool's maxCount, or count, each CPU pool's and the system pool's maxCount): "
                + f"{fix} "
                + refusal_tag("cluster-node-limit"),
            )
        )
    problems += zone_problems(config)
    location = location_problems(config)
    problems += location
    if not any(problem.severity == "error" for problem in location):
        # A name that is no region (refused above) offers nothing: the sizes are checked against a real one only.
        problems += vm_size_region_problems(config)
    if not cluster.existing:
        problems += _range_rules(config, nodes)
    return problems


def _range_rules(config: StackConfig, nodes: int) -> list[Problem]:
    problems: list[Problem] = []
    cluster = config.cluster
    try:
        pods = ipaddress.ip_network(cluster.pod_cidr, strict=False)
    except ValueError:
        pods = None  # reported by the network range rules
    if pods is not None and pods.version != 4:
        problems.append(
            Problem(
                f"{P}:cluster.podCidr",
                f"{cluster.pod_cidr} is an IPv6 range; networkProfile.podCidr takes IPv4 only (dual stack needs podCidrs, "
                "which aks-gpu does not send): choose an IPv4 range such as 10.244.0.0/16 " + refusal_tag("pod-range-ipv4"),
            )
        )
    elif pods is not None:
        # The system pool and the CPU pools are sent no upgrade settings: AKS's default surge (AKS_DEFAULT_MAX_SURGE).
        # An adopted cluster's system pool is not the stack's: neither its nodes nor its surge are counted.
        defaulted = [*([] if cluster.existing else [cluster.system_pool.max_count]), *(p.max_count for p in config.cpu_pools)]
        surge = sum(surge_nodes(AKS_DEFAULT_MAX_SURGE, count) for count in defaulted)
        surge += sum(p.upgrade_surge_nodes(p.most_nodes) for p in config.gpu_pools)
        reach = nodes + surge
        blocks = 2 ** (OVERLAY_NODE_PREFIX - pods.prefixlen) if pods.prefixlen <= OVERLAY_NODE_PREFIX else 0
        if reach > blocks:
            wanted = OVERLAY_NODE_PREFIX - max(0, math.ceil(math.log2(reach)))
            problems.append(
                Problem(
                    f"{P}:cluster.podCidr",
                    f"{cluster.pod_cidr} holds {blocks} /24 node ranges, and the pools reach {reach} nodes with their "
                    f"upgrade surge; Azure CNI overlay gives every node a /24: use a /{wanted} or larger "
                    + refusal_tag("overlay-pod-range-too-small"),
                )
            )
    if cluster.service_cidr is not None:
        try:
            services = ipaddress.ip_network(cluster.service_cidr, strict=False)
        except ValueError:
            services = None
        if services is not None and services.version == 4 and services.prefixlen < SERVICE_RANGE_LARGEST_PREFIX:
            problems.append(
                Problem(
                    f"{P}:cluster.serviceCidr",
                    f"{cluster.service_cidr} is a /{services.prefixlen}; the service range must be smaller than /12 "
                    "(a /13 or smaller, e.g. 10.0.0.0/16) " + refusal_tag("service-range-too-large"),
                )
            )
    return problems


def zone_problems(config: StackConfig) -> list[Problem]:
    problems: list[Problem] = []
    lists = [(f"{P}:cluster.systemPool.zones", config.cluster.system_pool.zones)]
    lists += [(f"{P}:gpuPools[{i}].zones", pool.zones) for i, pool in enumerate(config.gpu_pools)]
    for path, zones in lists:
        for index, zone in enumerate(zones):
            if zone not in ZONES:
                problems.append(
                    Problem(
                        f"{path}[{index}]",
                        f"{zone!r} is not an availability zone: Azure's zones are 1, 2 and 3 "
                        + refusal_tag("availability-zone-values"),
                    )
                )
    return problems


def location_problems(config: StackConfig) -> list[Problem]:
    """The region against a recorded ``az account list-locations``: a name no region can have, or one a typo away
    from a region, is refused; a well-formed name the recording does not hold may be a newer region, and is a warning."""
    key, given = (
        (f"{P}:cluster.location", config.cluster.location)
        if config.cluster.location
        else ("azure-native:location", config.location)
    )
    known = azure_locations()
    # ARM reads "Sweden Central" as swedencentral: compare without case and spaces.
    name = given.replace(" ", "").lower()
    if name in known:
        return []
    squashed = re.sub(r"[^a-z0-9]", "", name)
    close = [squashed] if squashed in known else difflib.get_close_matches(squashed, sorted(known), n=3, cutoff=0.8)
    suggestion = f"; did you mean {', '.join(close)}?" if close else ""
    if close or not LOCATION_NAME.fullmatch(name):
        return [
            Problem(
                key,
                f"{given!r} is not an Azure region (ARM location names are lowercase letters and digits, e.g. "
                f"swedencentral){suggestion} " + refusal_tag("location-unknown"),
            )
        ]
    return [
        Problem(
            key,
            f"{given!r} is not among the regions recorded in components/aks_gpu/data/azure_locations.yaml; if it is a "
            'new region, add it there (`az account list-locations --query "[].name" -o tsv`), otherwise check the name',
            "warning",
        )
    ]


# What settles whether a size is offered in a region, for a subscription: the Restrictions column says
# NotAvailableForSubscription where the region has the size but not for this subscription
# (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-sku-not-available).
LIST_SKUS = "az vm list-skus --location {location} --size {size} --all --output table"
REGIONS_FILE = "components/aks_gpu/data/vm_size_regions.yaml"


def pool_sizes(config: StackConfig) -> list[tuple[str, str]]:
    """(key path, VM size) of every pool the stack creates in Azure: the system pool (unless the cluster is adopted),
    each GPU pool and each CPU pool; none when the cluster is given by a kubeconfig (no Azure resource is created)."""
    cluster = config.cluster
    if cluster.kubeconfig is not None:
        return []
    sizes = [] if cluster.existing else [(f"{P}:cluster.systemPool.vmSize", cluster.system_pool.vm_size)]
    sizes += [(f"{P}:gpuPools[{i}].vmSize", pool.vm_size) for i, pool in enumerate(config.gpu_pools)]
    sizes += [(f"{P}:cpuPools[{i}].vmSize", pool.vm_size) for i, pool in enumerate(config.cpu_pools)]
    return sizes


def vm_size_region_problems(config: StackConfig) -> list[Problem]:
    """Each pool's VM size against the regions recorded as offering it (data/vm_size_regions.yaml): refused where the
    record is complete and lacks the location; a warning where it is partial and lacks it, or where nothing is
    recorded, with the ``az vm list-skus`` that settles it."""
    given = config.cluster.location or config.location
    location = given.replace(" ", "").lower()
    facts = vm_size_regions()
    problems: list[Problem] = []
    for key, size in pool_sizes(config):
        check = LIST_SKUS.format(location=location, size=size)
        entry = facts.get(size)
        if entry is None or entry.coverage == "none":
            problems.append(
                Problem(
                    key,
                    f"whether {size} is offered in {location} is not recorded ({REGIONS_FILE} has no regions for it): "
                    f"check with `{check}` (no row: not offered there; NotAvailableForSubscription: not to this "
                    "subscription) before the deploy",
                    "warning",
                )
            )
            continue
        if location in entry.regions:
            continue
        recorded = ", ".join(sorted(entry.regions))
        if entry.coverage == "complete":
            problems.append(
                Problem(
                    key,
                    f"{size} is not offered in {location}: the regions that offer it, as a recorded `az vm list-skus "
                    f"--all` and the file's other sources name them (as of {entry.as_of}, {REGIONS_FILE}), are "
                    f"{recorded}; choose one of them or another size (if Azure "
                    f"offers it there since, `{check}` shows it: add the region to the file) "
                    + refusal_tag("vm-size-not-in-region"),
                )
            )
        else:
            problems.append(
                Problem(
                    key,
                    f"{size} is not confirmed in {location}: the recorded list of its regions is partial (as of "
                    f"{entry.as_of}: {recorded}; {REGIONS_FILE}); check with `{check}` (no row: not offered there; "
                    "NotAvailableForSubscription: not to this subscription) before the deploy",
                    "warning",
                )
            )
    return problems
