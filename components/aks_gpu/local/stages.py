"""The kwok Stages of a local cluster: how a simulated kubelet moves its nodes and pods through their lifecycle. Pure:
the workload namespaces in, ``kwok.x-k8s.io/v1alpha1`` Stage documents out (``control_plane.kwokctl_documents`` puts
them into the file ``kwokctl create cluster --config`` reads).

kwokctl (sigs.k8s.io/kwok v0.8.0) gives a cluster its own default Stages only when its configuration holds none
(``pkg/kwokctl/runtime/cluster.go``: ``getDefaultNodeStages``, ``getDefaultPodStages``): a node one that initializes
a node, a heartbeat with a node lease, and its *fast* pod Stages (``kustomize/stage/pod/fast/``: pod-ready,
pod-complete, pod-delete). Its fast pod-complete marks every running pod a Job owns Succeeded at once, whatever the
pod's annotations say (only the *general* Stages, ``kustomize/stage/pod/general/pod-complete.yaml``, read a delay
from them). On AKS a pod runs as long as its program does, and a simulated pod has none: a team's training or
inference Job on AKS runs for hours, until it ends, is deleted, or Kueue preempts it (suspends the Job, whose
controller deletes its pods). So here a Job's pod in a workload namespace stays Running until it is deleted, and
a Job's pod anywhere else (a system check) completes at once, as kwok's default does. The Stages below are written
here, with the same effect as kwok's defaults in everything else: giving any Stage replaces all of kwok's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STAGE_API = "kwok.x-k8s.io/v1alpha1"
NOT_DELETED: dict[str, Any] = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
# The status of a node's or pod's Ready condition.
READY = '.status.conditions.[] | select( .type == "Ready" ) | .status'
# kwokctl's heartbeat delay with its binary runtime's defaults (kustomize/stage/node/heartbeat-with-lease/
# node-heartbeat-with-lease.yaml: 600 s, jitter 610 s; a node status update frequency of 10 s, the default in
# pkg/apis/config/v1alpha1/zz_generated.defaults.go, is below both, so cluster.go keeps them).
HEARTBEAT_MS, HEARTBEAT_JITTER_MS = 600_000, 610_000

_CONDITIONS = """{{ $now := Now }}
{{ $since := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- {lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $since | Quote }}, message: {{ .message | Quote }},
   reason: {{ .reason | Quote }}, status: {{ .status | Quote }}, type: {{ .type | Quote }}}
{{ end }}
addresses:
{{ with .status.addresses }}
{{ YAML . 1 }}
{{ else }}
{{ with NodeIP }}
- {address: {{ . | Quote }}, type: InternalIP}
{{ end }}
{{ with NodeName }}
- {address: {{ . | Quote }}, type: Hostname}
{{ end }}
{{ end }}
{{ with NodePort }}
daemonEndpoints: {kubeletEndpoint: {Port: {{ . }}}}
{{ end }}
"""

_NODE_INITIALIZE = (
    _CONDITIONS
    + """{{ range $field := list "allocatable" "capacity" }}
{{ $field }}:
{{ with index (or $.status dict) $field }}
{{ YAML . 1 }}
{{ else }}
  {cpu: 1k, memory: 1Ti, pods: 1M}
{{ end }}
{{ end }}
{{ $info := or .status.nodeInfo dict }}
{{ $kwok := printf "kwok-%s" Version }}
nodeInfo:
  architecture: {{ or $info.architecture "amd64" }}
  bootID: {{ or $info.bootID `""` }}
  containerRuntimeVersion: {{ or $info.containerRuntimeVersion $kwok }}
  kernelVersion: {{ or $info.kernelVersion $kwok }}
  kubeProxyVersion: {{ or $info.kubeProxyVersion $kwok }}
  kubeletVersion: {{ or $info.kubeletVersion $kwok }}
  machineID: {{ or $info.machineID `""` }}
  operatingSystem: {{ or $info.operatingSystem "linux" }}
  osImage: {{ or $info.osImage `""` }}
  systemUUID: {{ or $info.systemUUID `""` }}
phase: Running
"""
)

_POD_RUNNING = """{{ $now := Now }}
conditions:
{{ range list "Initialized" "Ready" "ContainersReady" }}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: {{ . }}}
{{ end }}
{{ range .spec.readinessGates }}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: {{ .conditionType | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- {image: {{ .image | Quote }}, name: {{ .name | Quote }}, ready: true, restartCount: 0,
   state: {running: {startedAt: {{ $now | Quote }}}}}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  {{ if eq .restartPolicy "Always" }}
  started: true
  state: {running: {startedAt: {{ $now | Quote }}}}
  {{ else }}
  state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}
  {{ end }}
{{ end }}
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- {ip: {{ . | Quote }}}
{{ end }}
{{ end }}
{{ $meta := .metadata }}
{{ with PodIPsWith .spec.nodeName (or .spec.hostNetwork false) (or $meta.uid "") (or $meta.name "") (or $meta.namespace "") }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- {ip: {{ . | Quote }}}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""

_POD_SUCCEEDED = """{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- {image: {{ .image | Quote }}, name: {{ .name | Quote }}, ready: false, restartCount: 0, started: false,
   state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}}
{{ end }}
phase: Succeeded
"""


def _stage(name: str, kind: str, expressions: list[dict[str, Any]], spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": STAGE_API,
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {"resourceRef": {"apiGroup": "v1", "kind": kind}, "selector": {"matchExpressions": expressions}, **spec},
    }


def node_stages() -> list[dict[str, Any]]:
    """A node turns Ready once created and keeps sending heartbeats (with a lease, which the kwok controller renews)."""
    not_ready = {"key": READY, "operator": "NotIn", "values": ["True"]}
    ready = [{"key": ".status.phase", "operator": "In", "values": ["Running"]}, {**not_ready, "operator": "In"}]
    delay = {"durationMilliseconds": HEARTBEAT_MS, "jitterDurationMilliseconds": HEARTBEAT_JITTER_MS}
    return [
        _stage("node-initialize", "Node", [not_ready], {"next": {"statusTemplate": _NODE_INITIALIZE}}),
        _stage("node-heartbeat-with-lease", "Node", ready, {"delay": delay, "next": {"statusTemplate": _CONDITIONS}}),
    ]


def pod_stages(workload_namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """A bound pod runs at once; a Job's pod completes at once, unless it is in one of ``workload_namespaces``, where
    it runs until deleted; a deleted pod goes (its finalizers cleared)."""
    pending: list[dict[str, Any]] = [
        NOT_DELETED,
        {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
        {"key": READY, "operator": "NotIn", "values": ["True"]},
    ]
    completes: list[dict[str, Any]] = [
        NOT_DELETED,
        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
        {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
    ]
    if workload_namespaces:
        completes.append({"key": ".metadata.namespace", "operator": "NotIn", "values": sorted(set(workload_namespaces))})
    deleted = [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}]
    return [
        _stage("pod-ready", "Pod", pending, {"next": {"statusTemplate": _POD_RUNNING}}),
        _stage("pod-complete", "Pod", completes, {"next": {"statusTemplate": _POD_SUCCEEDED}}),
        _stage("pod-delete", "Pod", deleted, {"next": {"delete": True}}),
    ]


def local_stages(workload_namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """Every Stage of a local cluster (kwok plays none of its own once any is given)."""
    return [*node_stages(), *pod_stages(workload_namespaces)]
