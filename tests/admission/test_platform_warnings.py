"""Warnings for manifests that would take the platform's place: the server admits them, the check says what they
replace. Exit codes do not change; every object keeps its decision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aks_gpu.admission.platform_warnings import image_path
from tests.admission.test_cli import GOOD, run

# The attacker's or the careless user's shapes: the stack's own DaemonSet rewritten, the plugin pulled through a
# mirror by digest, an init container running it, a workload hidden in a system namespace, the stack's quota
# replaced by a bigger one, the GPU Operator brought in beside the stack's plugin.
MANIFESTS = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-device-plugin-daemonset, namespace: gpu-resources}
spec:
  selector: {matchLabels: {name: x}}
  template:
    metadata: {labels: {name: x}}
    spec:
      containers: [{name: nvidia-device-plugin-ctr, image: nvcr.io/nvidia/k8s-device-plugin:v0.17.0}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: second-plugin, namespace: gpu-training}
spec:
  selector: {matchLabels: {name: x}}
  template:
    metadata: {labels: {name: x}}
    spec:
      initContainers: [{name: plugin, image: "myregistry.azurecr.io:443/mirror/nvidia/k8s-device-plugin@sha256:abc"}]
      containers: [{name: sleep, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: miner, namespace: kube-system}
spec: {containers: [{name: c, image: busybox}]}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu-quota, namespace: gpu-training}
spec: {hard: {requests.nvidia.com/gpu: "1000"}}
---
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec: {}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: kube-system}
data: {a: b}
"""


@pytest.mark.parametrize(
    ("image", "path"),
    [
        ("nvcr.io/nvidia/k8s-device-plugin:v0.17.0", "nvidia/k8s-device-plugin"),
        ("docker.io/rocm/k8s-device-plugin:1.31.0.2", "rocm/k8s-device-plugin"),
        ("rocm/k8s-device-plugin", "rocm/k8s-device-plugin"),
        ("localhost/nvidia/k8s-device-plugin@sha256:abc", "nvidia/k8s-device-plugin"),
        ("registry:5000/team/app:1.0", "team/app"),
        ("busybox", "busybox"),
    ],
)
def test_an_image_is_compared_by_its_repository_path(image: str, path: str) -> None:
    assert image_path(image) == path


def test_what_would_replace_the_platform_is_warned_about(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "platform.yaml"
    manifest.write_text(MANIFESTS)
    assert run(["admission", "check", "--stack", "prod", "--json", str(manifest)]) == 0
    decisions = json.loads(capsys.readouterr().out)
    warned = {d["name"]: d["warnings"] for d in decisions}
    assert all(d["allowed"] for d in decisions)  # the server admits each: a warning decides nothing
    [own, system] = warned["nvidia-device-plugin-daemonset"]
    assert own.startswith("the stack deploys DaemonSet nvidia-device-plugin-daemonset in gpu-resources itself")
    assert system.startswith("gpu-resources, a system namespace (aks-gpu runs its agents there)")
    [second] = warned["second-plugin"]
    assert second.startswith("container plugin (myregistry.azurecr.io:443/mirror/nvidia/k8s-device-plugin@sha256:abc) runs")
    [hidden] = warned["miner"]
    assert "nothing checks this workload's GPU placement" in hidden
    [quota] = warned["gpu-quota"]
    assert quota.startswith("the stack deploys ResourceQuota gpu-quota in gpu-training itself")
    [operator] = warned["cluster-policy"]
    assert operator.startswith("a ClusterPolicy makes NVIDIA's GPU Operator deploy")
    assert warned["settings"] == []  # not a workload, not the platform's
    assert run(["admission", "check", "--stack", "prod", str(manifest)]) == 0
    assert "warning: the stack deploys DaemonSet" in " ".join(capsys.readouterr().out.split())


def test_ordinary_workloads_get_no_warning(capsys: pytest.CaptureFixture[str]) -> None:
    run(["admission", "check", "--stack", "prod", "--json", GOOD])
    decisions = json.loads(capsys.readouterr().out)
    system = {"kube-system", "gpu-resources", "nvsentinel"}
    assert all(d["warnings"] == [] for d in decisions if d["namespace"] not in system)
    assert all(len(d["warnings"]) == 1 for d in decisions if d["namespace"] in system)
