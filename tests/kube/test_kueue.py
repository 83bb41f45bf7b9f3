"""The Kueue objects of a queueing stack: a flavor per GPU pool, a queue per team in its type's cohort, the LocalQueue
Jobs land in without a label, and the namespace's ResourceQuota as the ceiling a borrowing Job never hits."""

from __future__ import annotations

from typing import Any

import yaml

from aks_gpu.admission.namespace_admission import Amount, canonical
from aks_gpu.admission.quantity import Quantity
from aks_gpu.kube.kueue import (
    controller_configuration,
    gpu_ceilings,
    kueue_release,
    queue_manifests,
    split,
)
from aks_gpu.kube.workload_manifests import namespace_facts, pod_placement
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import MockHarness, minimal_raw

QUEUEING = {"engine": "kueue"}


def pool(name: str, workload: str, max_count: int = 8) -> dict[str, Any]:
    return {"name": name, "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": workload, "maxCount": max_count}


def model_of(*workloads: dict[str, Any], pools: list[dict[str, Any]] | None = None, queueing: bool = True) -> PlatformModel:
    raw = minimal_raw(
        **{
            "aks-gpu:gpuPools": pools or [pool("train", "training"), pool("serve", "inference")],
            "aks-gpu:workloads": list(workloads),
            **({"aks-gpu:queueing": QUEUEING} if queueing else {}),
        }
    )
    return validate_stack(raw, "stacks/Pulumi.test.yaml").model


def team(name: str, kind: str = "training", gpus: int = 2, **more: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "gpuQuota": gpus, **more}


def of_kind(manifests: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}


def test_no_queueing_no_kueue_objects_and_the_quota_is_gpu_quota() -> None:
    model = model_of(team("team-a"), team("team-b"), queueing=False)
    assert queue_manifests(model) == []
    assert namespace_facts(model)["team-a"].gpu_quota == {"requests.nvidia.com/gpu": "2"}


def test_a_flavor_per_pool_places_pods_as_the_platform_does() -> None:
    model = model_of(team("team-a"), team("serving", "inference"))
    flavors = of_kind(queue_manifests(model), "ResourceFlavor")
    assert set(flavors) == {"train", "serve"}
    workload = model.workloads[0]
    placement = pod_placement(workload.resource_name, workload.node_selector, workload.kube_tolerations)
    assert flavors["train"]["spec"]["nodeLabels"] == placement["nodeSelector"]
    assert flavors["train"]["spec"]["tolerations"] == placement["tolerations"]


def test_each_type_is_its_own_cohort_and_each_team_its_own_queue() -> None:
    model = model_of(team("team-a", gpus=2), team("team-b", gpus=3), team("serving", "inference", gpus=1))
    queues = of_kind(queue_manifests(model), "ClusterQueue")
    assert {name: q["spec"]["cohortName"] for name, q in queues.items()} == {
        "team-a": "training",
        "team-b": "training",
        "serving": "inference",
    }
    [group] = queues["serving"]["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["serve"]
    assert queues["team-b"]["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}
    assert queues["team-a"]["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


def test_nominal_borrowing_and_lending_are_the_workloads_gpus() -> None:
    model = model_of(team("team-a", gpus=2, borrowingLimit=3), team("team-b", gpus=4, lendingLimit=3))
    queues = of_kind(queue_manifests(model), "ClusterQueue")
    gpu_a = queues["team-a"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    gpu_b = queues["team-b"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert gpu_a == {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "3"}
    assert gpu_b == {"name": "nvidia.com/gpu", "nominalQuota": "4", "lendingLimit": "3"}


def test_the_resource_quota_allows_nominal_plus_what_the_team_can_borrow() -> None:
    model = model_of(
        team("team-a", gpus=2, borrowingLimit=1),
        team("team-b", gpus=4, lendingLimit=3),
        team("serving", "inference", gpus=2),
    )
    # team-a borrows at most 1; team-b, no limit of its own, at most what team-a lends (2); serving has no one.
    assert gpu_ceilings(model) == {"team-a": 3, "team-b": 6, "serving": 2}
    assert namespace_facts(model)["team-b"].gpu_quota == {"requests.nvidia.com/gpu": "6"}


def test_a_cpu_quota_stays_the_teams_own_and_without_one_cpu_never_binds() -> None:
    model = model_of(team("team-a", gpus=2, quota={"cpu": "16", "memory": "64Gi"}), team("team-b"))
    queues = of_kind(queue_manifests(model), "ClusterQueue")
    cpu_a, memory_a = queues["team-a"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1:]
    assert cpu_a == {"name": "cpu", "nominalQuota": "16", "borrowingLimit": "0"}
    assert memory_a == {"name": "memory", "nominalQuota": "64Gi", "borrowingLimit": "0"}
    cpu_b = queues["team-b"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]
    # The pool's 8 nodes' allocatable CPU (24 vCPUs each less AKS's reservation), as the server prints a quantity.
    assert "borrowingLimit" not in cpu_b and Quantity.parse(cpu_b["nominalQuota"]).value > 8 * 16
    assert cpu_b["nominalQuota"] == canonical(Amount.of(cpu_b["nominalQuota"]))


def test_a_team_on_two_pools_shares_its_quota_by_their_gpus() -> None:
    pools = [pool("small", "training", max_count=1), pool("big", "training", max_count=3)]
    model = model_of(team("team-a", gpus=5), team("team-b", gpus=1), pools=pools)
    [group] = of_kind(queue_manifests(model), "ClusterQueue")["team-a"]["spec"]["resourceGroups"]
    assert [(f["name"], f["resources"][0]["nominalQuota"]) for f in group["flavors"]] == [("small", "1"), ("big", "4")]


def test_split_sums_to_the_total() -> None:
    assert split(5, [1, 3]) == [1, 4]
    assert split(3, [1, 1, 1, 1]) == [1, 1, 1, 0]
    assert split(4, [0, 0]) == [2, 2]
    assert sum(split(7, [2, 3, 5])) == 7


def test_jobs_without_a_queue_land_in_the_namespaces_default_local_queue() -> None:
    model = model_of(team("team-a"), team("serving", "inference"))
    local = [m for m in queue_manifests(model) if m["kind"] == "LocalQueue"]
    assert [(m["metadata"]["namespace"], m["metadata"]["name"], m["spec"]) for m in local] == [
        ("team-a", "default", {"clusterQueue": "team-a"}),
        ("serving", "default", {"clusterQueue": "serving"}),
    ]


def test_the_controller_manages_only_workload_namespaces_and_admits_all_or_nothing() -> None:
    model = model_of(team("team-a"))
    assert model.config.queueing is not None
    config = controller_configuration(model.config.queueing)
    assert config["manageJobsWithoutQueueName"] is False
    assert config["managedJobsNamespaceSelector"] == {"matchExpressions": [{"key": "aks-gpu/workload", "operator": "Exists"}]}
    assert config["waitForPodsReady"]["timeout"] == "5m"
    assert "batch/job" in config["integrations"]["frameworks"]


def test_the_chart_is_kueues_own_at_the_pin_with_the_platforms_configuration() -> None:
    assert kueue_release(model_of(team("team-a"), queueing=False)) is None
    release = kueue_release(model_of(team("team-a")))
    assert release is not None
    assert (release.chart, release.version, release.namespace) == (
        "oci://registry.k8s.io/kueue/charts/kueue",
        "0.17.0",
        "kueue-system",
    )
    configuration = yaml.safe_load(release.values["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and configuration["webhook"] == {"port": 9443}
    assert configuration["waitForPodsReady"] == {"timeout": "5m", "blockAdmission": False}
    assert {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"} in release.values["controllerManager"][
        "tolerations"
    ]


def test_without_the_chart_the_stack_creates_the_queues_alone(harness: MockHarness) -> None:
    raw = minimal_raw(
        **{
            "aks-gpu:gpuPools": [pool("train", "training")],
            "aks-gpu:workloads": [team("team-a"), team("team-b")],
            "aks-gpu:queueing": {**QUEUEING, "installChart": False},
        }
    )
    records = harness.run_stack("test", raw).resources
    kinds = [r.type.rsplit(":", 1)[-1] for r in records]
    assert "Release" not in kinds and kinds.count("ClusterQueue") == 2 and kinds.count("LocalQueue") == 2
    assert not [r for r in records if r.inputs.get("metadata", {}).get("name") == "kueue-system"]
