"""The compute quota a stack needs, per region and VM family, and how it compares with what a subscription has. Pure:
config and the quota facts (``data/vm_quota_families.yaml``) in, needs out; usages (already read) in, verdicts out.

Azure checks two quotas on every VM it creates: its family's vCPUs and the region's total vCPUs (a spot VM: the
region's spot vCPUs instead of its family's). A pool needs, at most, ``maxCount`` nodes, plus ``maxSurge`` extra nodes
while AKS upgrades it: "Extra GPU VMs added while old ones drain (needs that much GPU quota to spare)". Every pool the
stack creates counts: the system pool, each GPU pool and each CPU user pool, each in its own VM family.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from aks_gpu.catalog import vm_size_key
from aks_gpu.config.models import AKS_DEFAULT_MAX_SURGE, StackConfig, surge_nodes
from aks_gpu.data_files import load_yaml

QUOTA_FILE = Path(__file__).resolve().parent.parent / "data" / "vm_quota_families.yaml"

# How to ask for more: the portal's Quotas page (Compute, filtered by region, "New quota request") or `az quota update`
# on the Microsoft.Compute scope of the region (https://learn.microsoft.com/azure/quotas/per-vm-quota-requests and
# https://learn.microsoft.com/cli/azure/quota#az-quota-update, read 2026-12-01; the command needs the Microsoft.Quota
# provider registered and the azure-cli `quota` extension).
QUOTA_REQUEST_DOC = "https://learn.microsoft.com/azure/quotas/per-vm-quota-requests"
QUOTA_CLI_DOC = "https://learn.microsoft.com/cli/azure/quota#az-quota-update"
# A subscription id is a GUID: anything else is refused before it reaches a URL or a command line.
SUBSCRIPTION_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@dataclass(frozen=True)
class SizeQuota:
    """One VM size's quota facts; ``vcpus`` and ``family`` None where no source names them."""

    size: str
    vcpus: int | None
    family: str | None
    local_name: str | None
    source: str | None


@dataclass(frozen=True)
class QuotaFacts:
    sizes: dict[str, SizeQuota]
    total: SizeQuota  # the regional vCPUs quota (`cores`)
    spot: SizeQuota  # the regional spot vCPUs quota (`lowPriorityCores`)

    def size(self, name: str) -> SizeQuota:
        """The facts of ``name`` (compared without case, as Azure compares sizes); unknown when none are recorded."""
        key = vm_size_key(name)
        found = next((entry for spelled, entry in self.sizes.items() if vm_size_key(spelled) == key), None)
        return found or SizeQuota(name, None, None, None, None)


def _build(raw: Mapping[str, Any]) -> QuotaFacts:
    sources: Mapping[str, str] = raw["sources"]

    def entry(name: str, item: Mapping[str, Any]) -> SizeQuota:
        vcpus = item.get("vcpus")
        source = item.get("source")
        return SizeQuota(
            size=name,
            vcpus=int(vcpus) if vcpus is not None else None,
            family=item.get("family"),
            local_name=item.get("local_name"),
            source=sources.get(source, source) if source else None,
        )

    regional = raw["regional"]
    return QuotaFacts(
        sizes={str(name): entry(str(name), item) for name, item in raw["sizes"].items()},
        total=entry("(every size)", regional["total"]),
        spot=entry("(every spot size)", regional["spot"]),
    )


@lru_cache(maxsize=1)
def load_quota_facts() -> QuotaFacts:
    return _build(load_yaml(QUOTA_FILE))


# ---------------------------------------------------------------- what a stack needs


@dataclass(frozen=True)
class PoolNeed:
    """One pool at its largest: ``nodes`` (maxCount, or count without autoscaling) plus ``surge`` during an upgrade."""

    pool: str
    vm_size: str
    nodes: int
    surge: int
    spot: bool
    quota: SizeQuota

    @property
    def vcpus(self) -> int | None:
        per_node = self.quota.vcpus
        return None if per_node is None else per_node * (self.nodes + self.surge)

    @property
    def family(self) -> str | None:
        return self.quota.family


@dataclass(frozen=True)
class QuotaLine:
    """One quota the stack draws on, with what it needs of it (``unknown``: pools whose vCPUs no source gives, so the
    need is at least ``vcpus``)."""

    family: str
    local_name: str | None
    vcpus: int
    pools: tuple[str, ...]
    kind: Literal["family", "spot", "total"]
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuotaPlan:
    location: str
    pools: tuple[PoolNeed, ...]
    lines: tuple[QuotaLine, ...]  # families first (by name), then the spot and regional totals
    unknown: tuple[PoolNeed, ...] = field(default=())

    def request_commands(self, subscription: str = "<subscription>", limits: Mapping[str, int] | None = None) -> list[str]:
        """One ``az quota update`` per family or spot line the stack draws on. A request sets the new limit, so it must
        cover what the region already uses too: ``limits`` (family -> the limit to ask for, from ``aksgpu preflight``)
        where known, else ``<used + N>``. The regional total is not requested: "An increase in the VM Series quota
        automatically increase[s] the Total Regional vCPUs limit by the same amount"
        (https://docs.microsoft.com/azure/azure-supportability/resource-manager-core-quotas-request)."""
        scope = f"/subscriptions/{subscription}/providers/Microsoft.Compute/locations/{self.location}"
        commands: list[str] = []
        for line in self.lines:
            if line.kind == "total" or not line.vcpus:
                continue
            wanted = (limits or {}).get(line.family)
            value = str(wanted) if wanted is not None else f"<used + {line.vcpus}>"
            commands.append(f"az quota update --resource-name '{line.family}' --scope {scope} --limit-object value={value}")
        return commands


def cluster_location(config: StackConfig) -> str:
    """The region the pools' VMs run in: cluster.location, else azure-native:location (azure/cluster.py)."""
    return config.cluster.location or config.location


def quota_plan(config: StackConfig, facts: QuotaFacts | None = None) -> QuotaPlan:
    """What the stack draws on each quota of its region, every pool at its largest and upgrading."""
    facts = facts or load_quota_facts()
    pools: list[PoolNeed] = []
    cluster = config.cluster
    if not cluster.existing:
        # An adopted cluster's system pool is there already and not the stack's to size.
        system = cluster.system_pool
        surge = surge_nodes(AKS_DEFAULT_MAX_SURGE, system.max_count)
        pools.append(PoolNeed(system.name, system.vm_size, system.max_count, surge, False, facts.size(system.vm_size)))
    for pool in config.gpu_pools:
        surge = pool.upgrade_surge_nodes(pool.most_nodes)
        pools.append(PoolNeed(pool.name, pool.vm_size, pool.most_nodes, surge, pool.spot, facts.size(pool.vm_size)))
    for cpu in config.cpu_pools:
        # CPU user pools always autoscale (cpu_agent_pool_inputs: enableAutoScaling, minCount..maxCount).
        surge = surge_nodes(AKS_DEFAULT_MAX_SURGE, cpu.max_count)
        pools.append(PoolNeed(cpu.name, cpu.vm_size, cpu.max_count, surge, False, facts.size(cpu.vm_size)))
    return QuotaPlan(
        location=cluster_location(config),
        pools=tuple(pools),
        lines=tuple(_lines(pools, facts)),
        unknown=tuple(need for need in pools if need.vcpus is None or need.family is None),
    )


def _lines(pools: Iterable[PoolNeed], facts: QuotaFacts) -> list[QuotaLine]:
    families: dict[str, list[PoolNeed]] = {}
    spot: list[PoolNeed] = []
    every = list(pools)
    for need in every:
        if need.spot:
            spot.append(need)
        elif need.family is not None:
            families.setdefault(need.family, []).append(need)

    def line(family: SizeQuota, needs: list[PoolNeed], kind: Literal["family", "spot", "total"]) -> QuotaLine:
        return QuotaLine(
            family=family.family or "?",
            local_name=family.local_name,
            vcpus=sum(need.vcpus or 0 for need in needs),
            pools=tuple(need.pool for need in needs),
            kind=kind,
            unknown=tuple(need.pool for need in needs if need.vcpus is None),
        )

    lines = [line(needs[0].quota, needs, "family") for _, needs in sorted(families.items(), key=lambda kv: kv[0].lower())]
    if spot:
        lines.append(line(facts.spot, spot, "spot"))
    # Spot VMs count against the regional spot quota, not the regional vCPUs (two rows of `az vm list-usage`).
    lines.append(line(facts.total, [need for need in every if not need.spot], "total"))
    return lines


# ---------------------------------------------------------------- what the subscription has


@dataclass(frozen=True)
class Usage:
    """One row of the Microsoft.Compute usages list: ``name.value``, ``name.localizedValue``, currentValue, limit."""

    name: str
    local_name: str
    used: int
    limit: int


class UsageShapeError(ValueError):
    """The usages response is not the list the API documents."""


def read_usages(document: Any) -> list[Usage]:
    """The rows of a usages response (``{"value": [{"name": {"value", "localizedValue"}, "currentValue", "limit"}]}``,
    https://learn.microsoft.com/rest/api/compute/usage/list); ``UsageShapeError`` naming the first row that is not one."""
    rows = document.get("value") if isinstance(document, dict) else None
    if not isinstance(rows, list):
        raise UsageShapeError("not a usages list (an object with a `value` list)")
    usages: list[Usage] = []
    for index, row in enumerate(rows):
        name = row.get("name") if isinstance(row, dict) else None
        if not isinstance(name, dict) or not isinstance(name.get("value"), str):
            raise UsageShapeError(f"value[{index}] has no name.value")
        used, limit = row.get("currentValue"), row.get("limit")
        if not all(isinstance(number, int) and not isinstance(number, bool) for number in (used, limit)):
            raise UsageShapeError(f"value[{index}] ({name['value'][:80]}): currentValue and limit are not integers")
        usages.append(Usage(name["value"], str(name.get("localizedValue") or ""), int(used), int(limit)))
    return usages


Verdict = Literal["enough", "short", "not offered", "unknown"]


@dataclass(frozen=True)
class QuotaCheck:
    line: QuotaLine
    limit: int | None
    used: int | None
    verdict: Verdict

    @property
    def free(self) -> int | None:
        return None if self.limit is None or self.used is None else self.limit - self.used


def check_quota(plan: QuotaPlan, usages: Iterable[Usage]) -> list[QuotaCheck]:
    """Each quota line against the subscription's usage: enough when what is free covers the need; short when not;
    not offered when the region lists no such quota (the family is not sold there, or not to this subscription);
    unknown when a pool's vCPUs are not known (the need shown is then a lower bound)."""
    by_name = {usage.name.lower(): usage for usage in usages}
    checks: list[QuotaCheck] = []
    for line in plan.lines:
        usage = by_name.get(line.family.lower())
        if usage is None:
            checks.append(QuotaCheck(line, None, None, "unknown" if line.family == "?" else "not offered"))
            continue
        verdict: Verdict = "enough" if line.vcpus <= usage.limit - usage.used else "short"
        if line.unknown and verdict == "enough":
            verdict = "unknown"
        checks.append(QuotaCheck(line, usage.limit, usage.used, verdict))
    return checks
