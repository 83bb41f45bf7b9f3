"""The Pods a workload object will have created: a built-in template (Deployment, Job, CronJob...) or the pod
templates of a well-known custom resource (PyTorchJob, RayCluster, LeaderWorkerSet, JobSet, Volcano Job, KServe...,
``components/aks_gpu/data/operator_pod_templates.yaml``). Pure.

The API server judges a Deployment's template by the stack's policy when the Deployment is created, and each Pod
again when its controller creates it, after AKS's mutating plugins (:mod:`aks_gpu.admission.chain`). No policy of the
stack matches a custom resource: the server stores it, and its operator's Pods meet admission later. So the check
decides an object by what its Pods will be.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aks_gpu.admission.reader import POD_SPEC_PATHS, builtin_kind
from aks_gpu.data_files import load_yaml

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "operator_pod_templates.yaml"
# KServe component fields that are not PodSpec fields (pkg/apis/serving/v1beta1/component.go ComponentExtensionSpec,
# predictor.go PredictorSpec): dropped from the Pod.
KSERVE_EXTENSION_FIELDS = frozenset(
    {
        "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "scaleMetricType", "containerConcurrency",
        "timeout", "canaryTrafficPercent", "logger", "batcher", "labels", "annotations", "deploymentStrategy",
        "autoScaling", "model", "workerSpec", "storageUri", "runtimeVersion", "protocolVersion", "storage",
        "tensorflow", "pytorch", "sklearn", "xgboost", "onnx", "triton", "pmml", "lightgbm", "paddle", "huggingface",
        "pipelineParallelSize", "tensorParallelSize",
    }
)
KSERVE_CONTAINER = "kserve-container"
KSERVE_MODEL_FIELDS = frozenset({"modelFormat", "runtime", "storageUri", "protocolVersion", "runtimeVersion", "storage"})


@dataclass(frozen=True)
class OperatorKind:
    group: str
    kind: str
    paths: tuple[str, ...]
    pod: str  # template or kserve
    source: str


@dataclass(frozen=True)
class PodOf:
    """One Pod an object will have created: where its template is, and the Pod."""

    path: str
    pod: dict[str, Any]


@cache
def operator_kinds() -> tuple[dict[tuple[str, str], OperatorKind], dict[tuple[str, str], str]]:
    data = load_yaml(DATA_FILE)
    known = {
        (str(e["group"]), str(e["kind"])): OperatorKind(
            str(e["group"]), str(e["kind"]), tuple(str(p) for p in e["paths"]), str(e["pod"]), str(e["source"])
        )
        for e in data["kinds"]
    }
    skipped = {(str(e["group"]), str(e["kind"])): str(e["why"]) for e in data["notEvaluated"]}
    return known, skipped


def group_of(obj: Mapping[str, Any]) -> str:
    api_version = str(obj.get("apiVersion") or "v1")
    return api_version.rpartition("/")[0]


def _walk(value: Any, steps: list[str], where: str) -> Iterator[tuple[str, Any]]:
    if not steps:
        yield where, value
        return
    step, rest = steps[0], steps[1:]
    if step == "*":
        if isinstance(value, Mapping):
            for key, item in value.items():
                yield from _walk(item, rest, f"{where}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from _walk(item, rest, f"{where}[{index}]")
    elif isinstance(value, Mapping) and step in value:
        yield from _walk(value[step], rest, f"{where}.{step}" if where else step)


def _pod(obj: Mapping[str, Any], path: str, metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> PodOf:
    own = obj.get("metadata") or {}
    name = str(own.get("name") or own.get("generateName") or "")
    suffix = path.replace("spec.", "").replace(".template", "").replace("[", "-").replace("]", "").replace(".", "-")
    pod_metadata: dict[str, Any] = {"name": f"{name}-{suffix}".lower()[:253]}
    if own.get("namespace"):
        pod_metadata["namespace"] = own["namespace"]
    for field in ("labels", "annotations"):
        if isinstance(metadata.get(field), Mapping):
            pod_metadata[field] = dict(metadata[field])
    return PodOf(path, {"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata, "spec": dict(spec)})


def _kserve_pod(obj: Mapping[str, Any], path: str, component: Mapping[str, Any]) -> PodOf | None:
    spec = {key: value for key, value in component.items() if key not in KSERVE_EXTENSION_FIELDS}
    model = component.get("model")
    if isinstance(model, Mapping):
        container = {key: value for key, value in model.items() if key not in KSERVE_MODEL_FIELDS}
        container.setdefault("name", KSERVE_CONTAINER)
        spec["containers"] = [container, *(c for c in spec.get("containers") or () if c.get("name") != KSERVE_CONTAINER)]
    if not spec.get("containers"):
        return None
    metadata = {"labels": component.get("labels") or {}, "annotations": component.get("annotations") or {}}
    return _pod(obj, path, metadata, spec)


def operator_pods(obj: Mapping[str, Any]) -> list[PodOf] | None:
    """The Pods of a well-known custom resource, one per template; None when the kind is not one."""
    known, _ = operator_kinds()
    entry = known.get((group_of(obj), str(obj.get("kind", ""))))
    if entry is None:
        return None
    pods: list[PodOf] = []
    for path in entry.paths:
        for where, found in _walk(obj, path.split("."), ""):
            if not isinstance(found, Mapping):
                continue
            if entry.pod == "kserve":
                pod = _kserve_pod(obj, where, found)
                if pod is not None:
                    pods.append(pod)
            elif isinstance(found.get("spec"), Mapping):
                pods.append(_pod(obj, where, found.get("metadata") or {}, found["spec"]))
    return pods


def not_evaluated_reason(obj: Mapping[str, Any]) -> str | None:
    """Why the Pods of a known kind are not judged from the object, or, for an unknown kind holding pod templates,
    where they are; None for everything else."""
    _, skipped = operator_kinds()
    key = (group_of(obj), str(obj.get("kind", "")))
    if key in skipped:
        return f"the Pods of {key[1]}.{key[0]}: {skipped[key]}"
    known, _ = operator_kinds()
    if key in known or builtin_kind(obj):
        return None
    paths = list(_templates(obj, ""))
    if not paths:
        return None
    shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    return f"the Pods of {key[1]}.{key[0] or 'core'} (pod templates at {shown}): this check does not know its operator"


def _templates(value: Any, where: str) -> Iterator[str]:
    if isinstance(value, Mapping):
        spec = value.get("spec")
        if where and isinstance(spec, Mapping) and isinstance(spec.get("containers"), list):
            yield where
            return
        for key, item in value.items():
            yield from _templates(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _templates(item, f"{where}[{index}]")


def template_pod(obj: Mapping[str, Any]) -> PodOf | None:
    """The Pod a built-in workload (Deployment, Job, CronJob...) will have created from its template."""
    kind = str(obj.get("kind", ""))
    if kind == "Pod" or not builtin_kind(obj):
        return None
    path = POD_SPEC_PATHS.get(kind)
    if path is None:
        return None
    template: Any = obj
    for step in path[:-1]:
        template = template.get(step) if isinstance(template, Mapping) else None
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        return None
    return _pod(obj, ".".join(path[:-1]), template.get("metadata") or {}, template["spec"])
