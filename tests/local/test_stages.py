"""The kwok Stages of a local cluster: a Job's pod in a workload namespace runs until deleted, every other Job's pod
completes at once, and the nodes still turn Ready (giving kwok any Stage replaces all of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from aks_gpu.local.control_plane import LocalPaths, kwokctl_configuration, kwokctl_documents
from aks_gpu.local.engine import Local
from aks_gpu.local.stages import local_stages


def stage(stages: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [found] = [s for s in stages if s["metadata"]["name"] == name]
    return found


def expressions(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["key"]: e for e in found["spec"]["selector"]["matchExpressions"]}


def test_a_job_pod_of_a_workload_namespace_is_never_completed() -> None:
    complete = stage(local_stages(["vision", "research"]), "pod-complete")
    assert complete["spec"]["resourceRef"] == {"apiGroup": "v1", "kind": "Pod"}
    namespace = expressions(complete)[".metadata.namespace"]
    assert namespace == {"key": ".metadata.namespace", "operator": "NotIn", "values": ["research", "vision"]}
    # Only a Job's running pod completes, to Succeeded.
    by_key = expressions(complete)
    assert by_key[".metadata.ownerReferences.[].kind"]["values"] == ["Job"]
    assert by_key[".status.phase"]["values"] == ["Running"]
    assert "phase: Succeeded" in complete["spec"]["next"]["statusTemplate"]


def test_without_workload_namespaces_every_job_pod_completes_as_kwok_does() -> None:
    assert ".metadata.namespace" not in expressions(stage(local_stages([]), "pod-complete"))


def test_every_lifecycle_step_has_a_stage_since_ours_replace_all_of_kwoks() -> None:
    stages = local_stages(["research"])
    names = {(s["spec"]["resourceRef"]["kind"], s["metadata"]["name"]) for s in stages}
    assert names == {
        ("Node", "node-initialize"),
        ("Node", "node-heartbeat-with-lease"),
        ("Pod", "pod-ready"),
        ("Pod", "pod-complete"),
        ("Pod", "pod-delete"),
    }
    assert all(s["apiVersion"] == "kwok.x-k8s.io/v1alpha1" and s["kind"] == "Stage" for s in stages)
    assert stage(stages, "pod-delete")["spec"]["next"] == {"delete": True}
    assert "phase: Running" in stage(stages, "node-initialize")["spec"]["next"]["statusTemplate"]


def test_the_kwokctl_file_holds_the_configuration_first_and_the_server_is_read_back(tmp_path: Path) -> None:
    paths = LocalPaths(tmp_path, "teams")
    documents = kwokctl_documents(kwokctl_configuration(tmp_path, 31234, "v1.36.3"), ["research"])
    assert documents[0]["kind"] == "KwokctlConfiguration"
    assert [d["kind"] for d in documents[1:]] == ["Stage"] * 5
    paths.root.mkdir(parents=True)
    paths.kwokctl_config.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    assert Local(paths, tmp_path).server() == "https://127.0.0.1:31234"
