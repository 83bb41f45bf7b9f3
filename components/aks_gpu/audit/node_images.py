"""The node-image practice: each GPU node's image against the latest AKS offers its pool (its upgrade profile), else
against its age at the snapshot's collection (``node-image-stale``), one image per pool (``node-image-mixed``), and
against its GPU family's image facts (``node-image-known-bad``, ``node-image-below-gpu-minimum``,
data/gpu_node_images.yaml). Pure."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from aks_gpu.aks_facts import gpu_node_images, node_image_version_key
from aks_gpu.audit.judging import Commands, Run, listed_names
from aks_gpu.catalog import load_catalog
from aks_gpu.cluster.inventory import NODE_IMAGE_LABEL, GpuNode
from aks_gpu.cluster.snapshot import NODEPOOL_UPGRADES_FILE, ClusterSnapshot
from aks_gpu.naming import INSTANCE_TYPE_LABEL

STALE_AFTER_DAYS = 60

# The build date at the end of an AKS node image version. Today: <image>-YYYYMM.DD.V, as the AKS release notes name
# them ("AKSUbuntu-2204-YYYYMM.DD.V", https://github.com/Azure/AKS/blob/master/.github/instructions/changelog.instructions.md)
# and the label shows (AKSUbuntu-2204gen2containerd-202509.23.0, AKSCBLMariner-V2katagen2-202503.13.0): read by
# aks_facts.node_image_version_key. Before 2023: <image>-YYYY.MM.DD (AKSUbuntu-1804gen2containerd-2022.01.19,
# https://learn.microsoft.com/azure/aks/use-labels shows AKSUbuntu-1804-2020.03.05). A version without either (a base
# image, AKSWindows-23H2-gen2, Windows' build numbers) has no date this reads: not checked.
_OLD_IMAGE_DATE = re.compile(r"-(?P<year>20\d{2})\.(?P<month>\d{2})\.(?P<day>\d{2})$")


# The pool an upgrade profile belongs to, from its ARM id (.../agentPools/<pool>/upgradeProfiles/default), as
# `az aks nodepool get-upgrades` prints it (AgentPoolUpgradeProfile, AKS REST API).
_PROFILE_POOL = re.compile(r"/agentPools/(?P<pool>[^/]+)/upgradeProfiles/", re.IGNORECASE)


def latest_node_images(profiles: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Pool -> the latest node image AKS offers it, from upgrade profiles (``latestNodeImageVersion``; the REST shape
    nests it under ``properties``); a profile without a pool in its id or without the version is skipped."""
    found: dict[str, str] = {}
    for profile in profiles:
        match = _PROFILE_POOL.search(str(profile.get("id", "")))
        properties = profile.get("properties")
        nested = properties if isinstance(properties, Mapping) else {}
        latest = profile.get("latestNodeImageVersion") or nested.get("latestNodeImageVersion")
        if match and isinstance(latest, str) and latest.strip():
            found[match["pool"]] = latest.strip()
    return found


def _older_than(image: str, latest: str) -> bool:
    """Whether ``image`` is older than ``latest``: by their build dates where both carry one, else any difference."""
    if image == latest:
        return False
    built, newest = image_build_date(image), image_build_date(latest)
    if built is not None and newest is not None:
        return built < newest
    return True


def image_build_date(version: str) -> date | None:
    """The build date an AKS node image version carries, None when it carries none this can read."""
    current = node_image_version_key(version)
    if current is not None:
        (year, month), day = divmod(current[0], 100), current[1]
    elif (old := _OLD_IMAGE_DATE.search(version.strip())) is not None:
        year, month, day = int(old["year"]), int(old["month"]), int(old["day"])
    else:
        return None
    try:
        return date(year, month, day)
    except ValueError:
        return None


def judge_node_images(
    run: Run, nodes: Sequence[GpuNode], collected: datetime | None, commands: Commands, snapshot: ClusterSnapshot
) -> None:
    unlabelled = [node.name for node in nodes if node.image is None]
    if unlabelled:
        run.gap(
            "node-image",
            ("node-image-stale", "node-image-mixed", *FAMILY_IDS),
            f"no {NODE_IMAGE_LABEL} label on {listed_names(unlabelled)} (not an AKS node, or a virtual node)",
            len(unlabelled),
        )
    labelled = [node for node in nodes if node.image is not None]
    judged = bool(labelled) or not nodes  # no GPU node at all: nothing is left unjudged

    if judged:
        run.checked.add("node-image-mixed")
        run.checked.update(FAMILY_IDS)
    judge_gpu_family_images(run, labelled, commands)
    by_pool: dict[str, Counter[str]] = defaultdict(Counter)
    for node in labelled:
        by_pool[node.pool][str(node.image)] += 1
    for pool, images in sorted(by_pool.items()):
        if len(images) > 1:
            spread = "; ".join(
                f"{image} on {count} node(s)" for image, count in sorted(images.items(), key=lambda i: (-i[1], i[0]))
            )
            run.add(
                "node-image-mixed",
                "warn",
                f"pool {pool} runs {len(images)} node images: {spread}. A node image upgrade is half done (or nodes were "
                "reimaged one by one), and one image per pool is what keeps one GPU driver per pool",
                f"Let the pool's node image upgrade finish, or run {commands.nodepool('upgrade', pool, ' --node-image-only')}",
            )

    # Where the snapshot has the pool's upgrade profile, a node image is judged against the latest one AKS offers that
    # pool; the age rule judges the rest (and its message says so).
    offered = latest_node_images(snapshot.nodepool_upgrades or [])
    by_age = [node for node in labelled if node.pool not in offered]
    for node in labelled:
        latest = offered.get(node.pool)
        if latest is None:
            continue
        run.checked.add("node-image-stale")
        if _older_than(str(node.image), latest):
            run.add(
                "node-image-stale",
                "warn",
                f"node image {node.image} is older than {latest}, the latest AKS offers pool {node.pool} (its upgrade "
                f"profile in {NODEPOOL_UPGRADES_FILE}): it misses that image's GPU driver and security fixes",
                f"Upgrade the pool with {commands.nodepool('upgrade', node.pool, ' --node-image-only')}, or set the node "
                "OS upgrade channel NodeImage with a maintenance window",
                node=node.name,
            )
    if not by_age:
        if not labelled:
            run.checked.add("node-image-stale")
        return
    profile_hint = (
        f"judged by age: the snapshot has no upgrade profile of pool {{pool}} ({NODEPOOL_UPGRADES_FILE}: `az aks nodepool "
        "get-upgrades` per pool) to compare with the latest image AKS offers"
    )
    if collected is None:
        why = "meta.json is not in the snapshot" if snapshot.collected_at is None else "the snapshot's collectedAt is unknown"
        run.gap(
            "node-image",
            ("node-image-stale",),
            f"{why}: node image age needs the time of collection (`aksgpu audit collect` or `aksgpu validate collect`"
            " writes meta.json with "
            f"collectedAt), or {NODEPOOL_UPGRADES_FILE} to compare with the latest image AKS offers the pool",
            len(by_age) if len(by_age) < len(labelled) else None,
        )
        return
    undated: list[str] = []
    day = collected.astimezone(UTC).date()
    for node in by_age:
        built = image_build_date(str(node.image))
        if built is None:
            undated.append(node.name)
            continue
        age = (day - built).days
        if age > STALE_AFTER_DAYS:
            run.add(
                "node-image-stale",
                "warn",
                f"node image {node.image} was built on {built.isoformat()}, {age} days before the snapshot "
                f"({snapshot.collected_at}; more than {STALE_AFTER_DAYS}): it misses the newer images' GPU drivers and "
                f"security fixes ({profile_hint.format(pool=node.pool)})",
                f"Upgrade pool {node.pool} with {commands.nodepool('upgrade', node.pool, ' --node-image-only')}, or set the "
                "node OS upgrade channel NodeImage with a maintenance window",
                node=node.name,
            )
    if len(undated) < len(by_age) or not nodes:
        run.checked.add("node-image-stale")
    if undated:
        run.gap(
            "node-image",
            ("node-image-stale",),
            f"the node image version of {listed_names(undated)} carries no build date this reads "
            "(YYYYMM.DD.V or YYYY.MM.DD at its end)",
            len(undated),
        )


FAMILY_IDS = ("node-image-known-bad", "node-image-below-gpu-minimum")
_FAMILY_ID = {"known-bad": "node-image-known-bad", "below-minimum": "node-image-below-gpu-minimum"}


def judge_gpu_family_images(run: Run, labelled: Sequence[GpuNode], commands: Commands) -> None:
    """Each labelled GPU node's image against the facts of its GPU family (its size's GPU model in the catalog): an
    image known to break the family, or one below the family's minimum, fails. A size the catalog lacks has no family:
    nothing is recorded against it."""
    facts, catalog = gpu_node_images(), load_catalog()
    for node in labelled:
        size = catalog.vm_size(node.labels.get(INSTANCE_TYPE_LABEL, ""))
        problem = facts.problem(size.gpu.key, str(node.image)) if size is not None else None
        if size is None or problem is None:
            continue
        run.add(
            _FAMILY_ID[problem.kind],
            "fail",
            f"{problem.message} ({size.name}, pool {node.pool}; {problem.source})",
            f"Upgrade the pool to the newest node image with {commands.nodepool('upgrade', node.pool, ' --node-image-only')} "
            f"(AKS's newest announced: {facts.current}); until then keep GPU work off the node",
            node=node.name,
        )
