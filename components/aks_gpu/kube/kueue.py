"""The Kueue objects of a stack with ``aks-gpu:queueing: {engine: kueue}``, built as plain dicts (docs/queueing.md).

One ResourceFlavor per GPU pool, one ClusterQueue per workload namespace in its workload type's cohort, a LocalQueue
named ``default`` in each workload namespace, and the controller's Configuration. Pure (model in, dicts out).

Every field name and enum value is Kueue's, read from its Go API types at the pinned version,
sigs.k8s.io/kueue@v0.17.0:
- ``apis/kueue/v1beta2/resourceflavor_types.go``: ResourceFlavorSpec ``nodeLabels``, ``tolerations`` (Kueue adds both
  to the pods of a Job admitted on the flavor).
- ``apis/kueue/v1beta2/clusterqueue_types.go``: ClusterQueueSpec ``cohortName``, ``namespaceSelector``,
  ``queueingStrategy`` (Enum StrictFIFO;BestEffortFIFO), ``resourceGroups[].coveredResources`` and
  ``.flavors[].resources[]`` (``name``, ``nominalQuota``, ``borrowingLimit``, ``lendingLimit``), ``preemption``
  (ClusterQueuePreemption ``reclaimWithinCohort``: Enum Never;LowerPriority;Any, ``withinClusterQueue``: Enum
  Never;LowerPriority;LowerOrNewerEqualPriority).
- ``apis/kueue/v1beta2/localqueue_types.go``: LocalQueueSpec ``clusterQueue``.
- ``apis/config/v1beta2/configuration_types.go``: Configuration ``waitForPodsReady`` (``timeout``, ``blockAdmission``),
  ``manageJobsWithoutQueueName``, ``managedJobsNamespaceSelector``, ``integrations.frameworks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from aks_gpu.admission.namespace_admission import Amount, canonical
from aks_gpu.config.models import QueueingConfig
from aks_gpu.config.rules.workloads import lendable_gpus
from aks_gpu.data_files import load_yaml
from aks_gpu.kube.gpu_operator import system_pool_tolerations
from aks_gpu.local.nodes import simulated_gpu_pool
from aks_gpu.naming import (
    KUEUE_DEFAULT_LOCAL_QUEUE,
    KUEUE_NAMESPACE,
    NAMESPACE_NAME_LABEL,
    WORKLOAD_LABEL,
    cluster_queue_name,
    cohort_name,
    flavor_name,
)
from aks_gpu.resolved.model import PlatformModel, ResolvedPool, ResolvedWorkload

Manifest = dict[str, Any]

PINS_FILE = Path(__file__).resolve().parents[1] / "data" / "kueue.yaml"

API_VERSION = "kueue.x-k8s.io/v1beta2"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
# BestEffortFIFO, not StrictFIFO: a Job that does not fit (one larger than its cohort, say) must not hold back the
# smaller ones behind it (clusterqueue_types.go, QueueingStrategy).
QUEUEING_STRATEGY = "BestEffortFIFO"
# A team reclaims its lent GPUs from whoever borrowed them, whatever their priority (Any); inside one team's queue a
# higher priority Job preempts lower ones (LowerPriority). clusterqueue_types.go, ClusterQueuePreemption.
PREEMPTION = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
# The job kinds Kueue integrates that GPU teams use (configuration_types.go, Integrations.Frameworks lists the names).
# Left out (docs/queueing.md): "pod", "deployment" and "statefulset", which would gate every plain Pod, serving
# Deployment and StatefulSet of a workload namespace, and "leaderworkerset.x-k8s.io/leaderworkerset", which turns the
# pod integration on with it (pkg/controller/jobs/leaderworkerset/leaderworkerset_controller.go:49,
# ImplicitlyEnabledFrameworkNames: ["pod"]; seen on the real engines: a plain GPU Pod got Kueue's admission
# scheduling gate); and the Kubeflow kinds other than PyTorchJob.
FRAMEWORKS = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/pytorchjob",
    "ray.io/rayjob",
    "ray.io/raycluster",
)
CPU_MEMORY = ("cpu", "memory")


def resource_flavor(pool: ResolvedPool) -> Manifest:
    """The pool's nodes, as Kueue places an admitted Job's pods on them: its pool label and every taint tolerated."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor_name(pool.name), "labels": {WORKLOAD_LABEL: pool.workload}},
        "spec": {"nodeLabels": dict(pool.node_selector), "tolerations": [t.to_kube() for t in pool.tolerations]},
    }


def split(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` shared out in proportion to ``weights`` in whole units, summing to ``total`` (largest remainder,
    the first pool winning a tie). Equal shares where every weight is zero."""
    if not weights:
        return []
    weights = list(weights) if any(weights) else [1] * len(weights)
    exact = [Fraction(total * weight, sum(weights)) for weight in weights]
    shares = [int(share) for share in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - shares[i]), i))
    for index in by_remainder[: total - sum(shares)]:
        shares[index] += 1
    return shares


def pool_capacity(pool: ResolvedPool) -> int:
    """GPU units the pool offers at its maxCount (0 when its size's GPUs are unknown)."""
    return (pool.resource.count_per_node or 0) * pool.config.max_count


def _cpu_memory_quota(workload: ResolvedWorkload, pool: ResolvedPool, share: Fraction) -> list[dict[str, str]]:
    """cpu and memory on the flavor: the team's own quota (its share on this pool), never borrowed, since the
    namespace's ResourceQuota holds them; without one, what the pool's nodes offer at maxCount, which never binds.
    Written as the API server prints a quantity, so a second deploy finds nothing changed."""
    limits = {"cpu": workload.config.quota.cpu, "memory": workload.config.quota.memory}
    allocatable = simulated_gpu_pool(pool).resources()[1]
    quotas = []
    for name in CPU_MEMORY:
        own = limits[name]
        if own is not None:
            quotas.append({"name": name, "nominalQuota": _scaled(own, share), "borrowingLimit": "0"})
        else:
            quotas.append({"name": name, "nominalQuota": _scaled(allocatable[name], Fraction(pool.config.max_count))})
    return quotas


def _scaled(text: str, factor: Fraction) -> str:
    """``text`` times ``factor``, in whole milli-units (cpu) or bytes (memory), as the server prints it."""
    amount = Amount.of(text)
    value = amount.value * factor
    whole = Fraction(int(value * 1000), 1000) if not amount.binary else Fraction(int(value))
    return canonical(Amount(whole, amount.binary))


def cluster_queue(workload: ResolvedWorkload) -> Manifest:
    """The namespace's queue: its gpuQuota as nominal quota on its pools' flavors (shared out by the pools' GPUs at
    maxCount), borrowing and lending within the cohort of its workload type, preemption that reclaims lent GPUs."""
    config = workload.config
    resource = workload.resource_name or ""
    pools = workload.pools
    weights = [pool_capacity(pool) for pool in pools]
    nominal = split(config.gpu_quota, weights)
    borrowing = split(config.borrowing_limit, weights) if config.borrowing_limit is not None else None
    lending = split(config.lending_limit, weights) if config.lending_limit is not None else None
    flavors = []
    for index, pool in enumerate(pools):
        gpu: dict[str, str] = {"name": resource, "nominalQuota": str(nominal[index])}
        if borrowing is not None:
            gpu["borrowingLimit"] = str(borrowing[index])
        if lending is not None:
            gpu["lendingLimit"] = str(lending[index])
        share = Fraction(nominal[index], config.gpu_quota) if config.gpu_quota else Fraction(1, len(pools))
        flavors.append({"name": flavor_name(pool.name), "resources": [gpu, *_cpu_memory_quota(workload, pool, share)]})
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": cluster_queue_name(config.name), "labels": {WORKLOAD_LABEL: config.type}},
        "spec": {
            "cohortName": cohort_name(config.type),
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: config.name}},
            "queueingStrategy": QUEUEING_STRATEGY,
            "resourceGroups": [{"coveredResources": [resource, *CPU_MEMORY], "flavors": flavors}],
            "preemption": dict(PREEMPTION),
        },
    }


def local_queue(workload: ResolvedWorkload) -> Manifest:
    """``default`` in the workload namespace: Kueue's LocalQueueDefaulting puts every Job that names no queue here
    (GA and locked on in v0.17, pkg/features/kube_features.go), so teams submit Jobs as they are. Chosen over
    ``manageJobsWithoutQueueName``: a Job still shows which queue it is in (the label Kueue sets), and a namespace
    without a LocalQueue is left alone instead of having its Jobs suspended with no queue to admit them."""
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {
            "name": KUEUE_DEFAULT_LOCAL_QUEUE,
            "namespace": workload.name,
            "labels": {WORKLOAD_LABEL: workload.type},
        },
        "spec": {"clusterQueue": cluster_queue_name(workload.name)},
    }


def queue_manifests(model: PlatformModel) -> list[Manifest]:
    """Every Kueue object of the stack: the flavors first (the queues name them); none without queueing."""
    if model.config.queueing is None:
        return []
    served = [workload for workload in model.workloads if workload.pools and workload.resource_name]
    used = {pool.name for workload in served for pool in workload.pools}
    return [
        *(resource_flavor(pool) for pool in model.pools if pool.name in used),
        *(cluster_queue(workload) for workload in served),
        *(local_queue(workload) for workload in served),
    ]


def gpu_ceilings(model: PlatformModel) -> dict[str, int]:
    """Per workload namespace, the GPUs its ResourceQuota allows with queueing on: its gpuQuota plus what it may
    borrow (its borrowingLimit, or all the other teams of its type lend), so a Job Kueue admits by borrowing is never
    refused by the quota. Empty without queueing (the quota is the gpuQuota)."""
    if model.config.queueing is None:
        return {}
    ceilings = {}
    for workload in model.workloads:
        config = workload.config
        others = [other.config for other in model.workloads if other.type == config.type and other is not workload]
        lent = sum(lendable_gpus(other) for other in others)
        borrow = lent if config.borrowing_limit is None else min(config.borrowing_limit, lent)
        ceilings[config.name] = config.gpu_quota + borrow
    return ceilings


def controller_configuration(queueing: QueueingConfig) -> dict[str, Any]:
    """What the platform sets in Kueue's Configuration; the chart's and the binary's defaults stand for the rest.
    Kueue touches only the workload namespaces (they carry the workload label); a Job must name a queue, or get the
    namespace's ``default`` by LocalQueueDefaulting; an admitted Job's pods all become ready within the timeout, or
    it gives its quota back (all-or-nothing: ``blockAdmission`` false lets other Jobs be admitted meanwhile)."""
    return {
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": WORKLOAD_LABEL, "operator": "Exists"}]},
        "waitForPodsReady": {"timeout": f"{queueing.pods_ready_timeout_minutes}m", "blockAdmission": False},
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }


@dataclass(frozen=True)
class KueuePin:
    """The pinned engine (components/aks_gpu/data/kueue.yaml): its chart, and the Go module of the same version."""

    chart: str  # an OCI reference: Helm takes it as the chart, with no repository
    version: str
    release: str
    module: str
    module_version: str
    chart_configuration: dict[str, Any]


@cache
def kueue_pin() -> KueuePin:
    raw: dict[str, Any] = load_yaml(PINS_FILE)
    pin = raw["kueue"]
    return KueuePin(
        pin["chart"], pin["version"], pin["release"], pin["module"], pin["module_version"], raw["chart_configuration"]
    )


@dataclass(frozen=True)
class KueueRelease:
    """The Helm release: ``helm install <name> <chart> --version <version> -n <namespace> -f <values>``."""

    name: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any]


def full_configuration(queueing: QueueingConfig) -> dict[str, Any]:
    """The controller's whole Configuration: the chart's default lines and the platform's keys."""
    return {**kueue_pin().chart_configuration, **controller_configuration(queueing)}


def kueue_release(model: PlatformModel) -> KueueRelease | None:
    """Kueue's own chart at the pin (or queueing.chartVersion), or None without queueing. Its values: the
    Configuration, which the chart takes as one YAML text (charts/kueue/values.yaml:106,
    managerConfig.controllerManagerConfigYaml), and the system pool's taint tolerated."""
    queueing = model.config.queueing
    if queueing is None:
        return None
    pin = kueue_pin()
    text = yaml.safe_dump(full_configuration(queueing), sort_keys=False)
    values = {
        "managerConfig": {"controllerManagerConfigYaml": text},
        # Its webhooks admit every Job of the workload namespaces: it runs with the cluster's critical add-ons, on the
        # system pool (charts/kueue/values.yaml:93-94, controllerManager.tolerations).
        "controllerManager": {"tolerations": system_pool_tolerations()},
    }
    return KueueRelease(pin.release, pin.chart, queueing.chart_version or pin.version, KUEUE_NAMESPACE, values)


def kueue_namespace_manifest() -> Manifest:
    """The engine's namespace, Pod Security restricted: the chart's controller runs as non-root with no privilege
    (charts/kueue/values.yaml:54-64, controllerManager.manager.podSecurityContext and containerSecurityContext)."""
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE, "labels": labels}}
