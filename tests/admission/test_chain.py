"""AKS's mutating admission plugins as the offline check repeats them (aks_gpu.admission.chain): PodTolerationRestriction's
merge of a namespace's default tolerations, the toleration it adds to every Pod but BestEffort ones, and the
namespaces the stack creates with them. `make e2e` holds the same Pods to kube-apiserver 1.36.3
(tests/e2e/test_stacks.py, what a team writes lands on its own type's pools)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aks_gpu.admission.chain import (
    DEFAULT_TOLERATIONS_ANNOTATION,
    MEMORY_PRESSURE_TOLERATION,
    best_effort,
    default_tolerations_annotation,
    merge_tolerations,
    mutate_pod,
)
from aks_gpu.admission.policy import workload_namespaces
from aks_gpu.naming import SPOT_TAINT_KEY
from tests.conftest import stack_model
from tests.kube.test_device_plugin import tolerates

GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
GPU_EQUAL = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
SPOT = {"key": SPOT_TAINT_KEY, "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
EVERYTHING = {"operator": "Exists"}


def not_ready(seconds: int | None) -> dict[str, Any]:
    toleration: dict[str, Any] = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return toleration


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        ([GPU], [GPU], [GPU]),  # equal: the first stays
        ([GPU_EQUAL], [GPU], [GPU]),  # Exists of the key covers Equal of it, whichever comes first
        ([GPU], [GPU_EQUAL], [GPU]),
        ([GPU, SPOT], [EVERYTHING], [EVERYTHING]),  # an empty key with Exists covers every toleration
        ([{**GPU, "effect": ""}], [GPU], [{**GPU, "effect": ""}]),  # an empty effect covers every effect
        ([GPU_EQUAL], [{**GPU_EQUAL, "value": "other"}], [GPU_EQUAL, {**GPU_EQUAL, "value": "other"}]),
        ([not_ready(300)], [not_ready(100)], [not_ready(300)]),  # tolerating longer covers shorter
        ([not_ready(300)], [not_ready(None)], [not_ready(None)]),  # for ever covers any bound
        ([SPOT], [GPU], [SPOT, GPU]),
    ],
)
def test_tolerations_merge_as_the_api_server_merges_them(
    first: list[dict[str, Any]], second: list[dict[str, Any]], merged: list[dict[str, Any]]
) -> None:
    assert merge_tolerations(first, second) == merged


def gpu_pod(**spec: Any) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}}
    container = {"name": "main", "image": "busybox", "resources": resources}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}


def test_a_pod_asking_no_cpu_or_memory_is_best_effort_and_gets_no_memory_pressure_toleration() -> None:
    pod = gpu_pod()
    assert best_effort(pod["spec"])
    assert MEMORY_PRESSURE_TOLERATION not in mutate_pod(pod, None)["spec"]["tolerations"]
    pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1Gi"
    assert not best_effort(pod["spec"])
    assert MEMORY_PRESSURE_TOLERATION in mutate_pod(pod, None)["spec"]["tolerations"]


def test_the_namespace_defaults_join_on_create_only() -> None:
    namespace = {"metadata": {"name": "n", "annotations": {DEFAULT_TOLERATIONS_ANNOTATION: json.dumps([SPOT])}}}
    created = mutate_pod(gpu_pod(), namespace)["spec"]["tolerations"]
    assert SPOT in created and GPU in created  # the default, then ExtendedResourceToleration's
    assert SPOT not in mutate_pod(gpu_pod(), namespace, operation="UPDATE")["spec"]["tolerations"]
    # A pod's own wider toleration stays and the default it covers is dropped.
    own = {"key": SPOT_TAINT_KEY, "operator": "Exists"}
    assert mutate_pod(gpu_pod(tolerations=[own]), namespace)["spec"]["tolerations"] == [own, GPU]


def test_no_namespace_hands_out_a_gpu_toleration() -> None:
    # A Pod without GPUs that tolerates the GPU taint is a squatter; ExtendedResourceToleration gives GPU Pods theirs.
    assert default_tolerations_annotation([GPU, GPU_EQUAL]) is None
    assert json.loads(default_tolerations_annotation([GPU, SPOT]) or "[]") == [SPOT]


@pytest.mark.parametrize("stack", ["dev", "prod", "amd"])
def test_each_workload_namespace_tolerates_its_pools_taints_but_the_gpu_taint(stack: str) -> None:
    model = stack_model(stack)
    namespaces = workload_namespaces(model)
    for workload in model.workloads:
        annotations = namespaces[workload.name]["metadata"]["annotations"]
        wanted = [t for t in workload.kube_tolerations if t["key"] not in ("nvidia.com/gpu", "amd.com/gpu")]
        assert json.loads(annotations.get(DEFAULT_TOLERATIONS_ANNOTATION, "[]")) == wanted
        # What a team writes (a GPU limit, no toleration) then tolerates every taint of its pools.
        pod = mutate_pod(gpu_pod(), namespaces[workload.name])
        if workload.resource_name == "nvidia.com/gpu":
            taints = [taint for pool in workload.pools for taint in pool.taints]
            assert all(any(tolerates(t, taint) for t in pod["spec"]["tolerations"]) for taint in taints), workload.name


def test_the_dev_stacks_spot_namespace_is_annotated_and_prods_are_not() -> None:
    dev = workload_namespaces(stack_model("dev"))["gpu-dev"]["metadata"]["annotations"]
    assert json.loads(dev[DEFAULT_TOLERATIONS_ANNOTATION]) == [SPOT]
    prod = workload_namespaces(stack_model("prod")).values()
    assert all(DEFAULT_TOLERATIONS_ANNOTATION not in namespace["metadata"]["annotations"] for namespace in prod)
