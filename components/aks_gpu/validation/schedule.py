"""The vendor diagnostics on a schedule, in the cluster (``validation.diagnosticsSchedule``): a CronJob in ``gpu-resources``
runs ``aksgpu validate --deep --level N --quarantine --in-cluster`` from the aks-gpu image (the checkout's
``Dockerfile``), the same command the CI workflow runs (``examples/ci/gpu-diagnose.yml``), graded by the same readers.

What the stack creates for it, all pure manifests here (the component, ``GpuValidation``, registers them):

- a ConfigMap with the stack's in-cluster sections (``schedule_stack_file``): what the command needs to know the pools,
  rendered from the stack's own validated config, so the CronJob grades the pools the stack deployed;
- a ServiceAccount and the least RBAC the live path needs (``aks_gpu.cluster.diag_run``): list, get and patch nodes; in
  ``gpu-resources`` only, create, get and delete pods, get pods/log, create pods/exec;
- a ValidatingAdmissionPolicy and its binding (``fence_policy_manifest``) that fence what that ServiceAccount may do
  with those verbs: on a node of the stack's GPU pools (no other), add or remove only the diagnostic quarantine taint
  (``aks-gpu/gpu-quarantine=diagnostic:NoSchedule``), set ``spec.unschedulable`` and write
  ``aks-gpu/diagnostics-passed-boot-id``, nothing else; create only the diagnostic pod
  (``aks_gpu.validation.diagnostics.diagnostic_pod_manifest``'s shape: its name, its images, no host access, no
  privilege, no token), and delete and exec into only those pods. RBAC cannot say "only this taint" (a patch of a node
  is a patch of all of it), nor "only pods of this shape";
- the CronJob: ``concurrencyPolicy: Forbid`` (two runs would each wait on the other's GPUs), a deadline for its whole
  run from the level's time per node and the most GPU nodes the pools may have, no retry of a run that failed
  (a failed run is a verdict, exit 1, or a config error, exit 2: running it again would only hold the GPUs again),
  and the restricted Pod Security profile.
"""

from __future__ import annotations

from typing import Any

import yaml

from aks_gpu.admission.policy import lit, lit_list
from aks_gpu.gpu.diag.expectations import diagnostic_images
from aks_gpu.naming import (
    CONFIG_NAMESPACE,
    DIAGNOSTIC_TAINT_VALUE,
    DIAGNOSTICS_FENCE_POLICY,
    DIAGNOSTICS_PASSED_ANNOTATION,
    DIAGNOSTICS_SCHEDULE_NAME,
    GPU_NAMESPACE,
    NAME_LABEL,
    POOL_LABEL,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
)
from aks_gpu.resolved.model import SYSTEM_POOL_TOLERATION, PlatformModel
from aks_gpu.validation.diagnostics import DEADLINE_SECONDS, DIAG_APP, SCHEDULE_WAIT_S, pod_name

# The user and group the image runs as (the Dockerfile's `useradd --uid`; tests/test_image.py holds them together): a
# number, so the kubelet can check runAsNonRoot without reading the image's /etc/passwd.
IMAGE_USER_ID = 10001
# Where the ConfigMap is mounted in the CronJob's pod, and the file the command reads.
CONFIG_DIR = "/etc/aks-gpu"
SECTIONS_FILE = "sections.yaml"
CONTAINER_NAME = "aksgpu"
# The stack's in-cluster sections the command needs: the pools (and what the rules check them against: the workloads
# they serve, the queues and the device plugin that shape their resource) and the validation settings. Not
# monitoring, remediation, admission or storage: the diagnostics read none of them, and those sections may name
# receivers and secrets that have no place in a ConfigMap.
SCHEDULE_SECTIONS = ("gpu_pools", "workloads", "device_plugin", "validation", "queueing")
# Room for listing the nodes, pulling the image and patching the nodes.
RUN_MARGIN_S = 600
# A run the controller could not start within an hour of its time (the controller was down, the previous run still
# going) is skipped, not started late into the working day; the next one comes at the next scheduled time.
# https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#job-creation
STARTING_DEADLINE_S = 3600
SUCCESSFUL_HISTORY = 3
FAILED_HISTORY = 5
# The controller reads the schedule in this zone, whatever the controller manager's own; the CI workflow's cron is UTC
# too. spec.timeZone, stable since Kubernetes 1.27: https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones
TIME_ZONE = "Etc/UTC"
RBAC_API = "rbac.authorization.k8s.io/v1"
ADMISSION_API = "admissionregistration.k8s.io/v1"


def schedule_runs(model: PlatformModel) -> bool:
    """Whether the stack creates the schedule: asked for, and a GPU pool to diagnose (NVIDIA's tools or AMD's,
    ``aks_gpu.validation.diagnostics.tools``)."""
    return model.config.validation.diagnostics_schedule.enabled and bool(model.pools)


def service_account_user(namespace: str = GPU_NAMESPACE) -> str:
    """The user name the API server gives the CronJob's ServiceAccount (its tokens authenticate as it)."""
    return f"system:serviceaccount:{namespace}:{DIAGNOSTICS_SCHEDULE_NAME}"


def run_deadline_seconds(model: PlatformModel) -> int:
    """The whole run's deadline: per GPU node at the pools' largest, the wait for its pod (``SCHEDULE_WAIT_S``, as
    the command waits) and the level's deadline, one node after the other, plus a margin."""
    level = model.config.validation.diagnostics_schedule.level
    nodes = sum(pool.config.most_nodes for pool in model.pools)
    return max(1, nodes) * (SCHEDULE_WAIT_S + DEADLINE_SECONDS[level]) + RUN_MARGIN_S


def schedule_sections_file(model: PlatformModel) -> str:
    """The stack's in-cluster sections (``SCHEDULE_SECTIONS``) as a stack file's ``config:`` map, the values as the
    stack's validated config holds them (defaults left out): what ``aksgpu validate --sections-file`` reads."""
    config = model.config
    dumped = config.model_dump(mode="json", by_alias=True, exclude_defaults=True, include=set(SCHEDULE_SECTIONS))
    return yaml.safe_dump({"config": {f"{CONFIG_NAMESPACE}:{key}": value for key, value in dumped.items()}}, sort_keys=False)


def schedule_command(model: PlatformModel, stack: str) -> list[str]:
    """The CronJob's command line: ``aksgpu`` and its arguments."""
    level = model.config.validation.diagnostics_schedule.level
    return [
        "aksgpu",
        "validate",
        "--stack",
        stack,
        "--sections-file",
        f"{CONFIG_DIR}/{SECTIONS_FILE}",
        "--in-cluster",
        "--deep",
        "--level",
        str(level),
        "--quarantine",
        "--json",
    ]


def _labels() -> dict[str, str]:
    return {NAME_LABEL: DIAGNOSTICS_SCHEDULE_NAME}


def _metadata(namespaced: bool = True) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": DIAGNOSTICS_SCHEDULE_NAME, "labels": _labels()}
    if namespaced:
        metadata["namespace"] = GPU_NAMESPACE
    return metadata


def config_map_manifest(model: PlatformModel) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(),
        "data": {SECTIONS_FILE: schedule_sections_file(model)},
    }


def service_account_manifest() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(), "automountServiceAccountToken": False}


def role_manifests() -> list[dict[str, Any]]:
    """The ClusterRole on nodes and the Role on pods in gpu-resources, each with its binding to the ServiceAccount: the
    calls of ``aks_gpu.cluster.diag_run`` and nothing more. The exec is a WebSocket upgrade of a GET, authorized as
    ``get`` on pods/exec and, since Kubernetes 1.35, also as ``create`` (the AuthorizePodWebsocketUpgradeCreatePermission
    feature gate, beta and on by default: k8s.io/kubernetes pkg/features/kube_features.go, kubernetes/kubernetes#134577),
    so both."""
    subject = [{"kind": "ServiceAccount", "name": DIAGNOSTICS_SCHEDULE_NAME, "namespace": GPU_NAMESPACE}]
    cluster_role = {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": _metadata(namespaced=False),
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}],
    }
    role = {
        "apiVersion": RBAC_API,
        "kind": "Role",
        "metadata": _metadata(),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "delete"]},
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        ],
    }

    def binding(kind: str, namespaced: bool) -> dict[str, Any]:
        return {
            "apiVersion": RBAC_API,
            "kind": f"{kind}Binding",
            "metadata": _metadata(namespaced),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": DIAGNOSTICS_SCHEDULE_NAME},
            "subjects": subject,
        }

    return [cluster_role, binding("ClusterRole", False), role, binding("Role", True)]


# ---------------------------------------------------------------- the fence


def _or_empty(path: str, field: str, empty: str) -> str:
    return f"(has({path}.{field}) ? {path}.{field} : {empty})"


# The Node's spec fields other than taints and unschedulable (k8s.io/api core/v1 NodeSpec): none may change.
OTHER_NODE_SPEC_FIELDS = ("podCIDR", "podCIDRs", "providerID", "configSource", "externalID")
# The Node's metadata fields a patch could change besides labels and annotations.
OTHER_NODE_METADATA_FIELDS = ("ownerReferences", "finalizers")


def _same(field_path: str, field: str) -> str:
    new, old = f"object.{field_path}", f"oldObject.{field_path}"
    return f"(has({new}.{field}) == has({old}.{field}) && (!has({new}.{field}) || {new}.{field} == {old}.{field}))"


def _node_validations(model: PlatformModel) -> list[dict[str, str]]:
    ours = f"t.key == {lit(QUARANTINE_TAINT_KEY)} && has(t.value) && t.value == {lit(DIAGNOSTIC_TAINT_VALUE)}"
    new_taints, old_taints = _or_empty("object.spec", "taints", "[]"), _or_empty("oldObject.spec", "taints", "[]")
    new_notes, old_notes = (
        _or_empty("object.metadata", "annotations", "{}"),
        _or_empty("oldObject.metadata", "annotations", "{}"),
    )
    annotation = lit(DIAGNOSTICS_PASSED_ANNOTATION)
    node = "'node ' + object.metadata.name + ': '"
    # The nodes the schedule diagnoses, and so may quarantine and return: those of the stack's GPU pools, by the
    # label it lists them by (aks_gpu.cluster.probe.pool_selector). The label itself may not change (below).
    pools = sorted(pool.name for pool in model.pools)
    label = lit(POOL_LABEL)
    diagnosed = (
        f"has(object.metadata.labels) && {label} in object.metadata.labels && "
        f"object.metadata.labels[{label}] in {lit_list(pools)}"
    )
    return [
        {
            "expression": f"({diagnosed}) || ({new_taints} == {old_taints} && {_same('spec', 'unschedulable')})",
            "messageExpression": f"{node} + 'the diagnostic schedule may taint and cordon only the nodes it diagnoses, "
            f"those of the GPU pools ({POOL_LABEL} in {', '.join(pools)})'",
            "reason": "Forbidden",
        },
        {
            "expression": f"{new_taints}.filter(t, !({ours})) == {old_taints}.filter(t, !({ours}))",
            "messageExpression": f"{node} + 'the diagnostic schedule may add or remove only its own taint "
            f"{QUARANTINE_TAINT_KEY}={DIAGNOSTIC_TAINT_VALUE}:{QUARANTINE_TAINT_EFFECT}; another taint changed'",
            "reason": "Forbidden",
        },
        {
            "expression": f"{new_taints}.all(t, !({ours}) || (t.effect == {lit(QUARANTINE_TAINT_EFFECT)} && !has(t.timeAdded)))",
            "messageExpression": f"{node} + 'the diagnostic taint is {QUARANTINE_TAINT_EFFECT} only (NoExecute would "
            "evict every pod of the node)'",
            "reason": "Forbidden",
        },
        {
            "expression": " && ".join(_same("spec", field) for field in OTHER_NODE_SPEC_FIELDS),
            "messageExpression": f"{node} + 'the diagnostic schedule may change only spec.taints (its own) and "
            "spec.unschedulable of a node'",
            "reason": "Forbidden",
        },
        {
            "expression": f"{_or_empty('object.metadata', 'labels', '{}')} == {_or_empty('oldObject.metadata', 'labels', '{}')}",
            "messageExpression": f"{node} + 'the diagnostic schedule may not change a node\\'s labels'",
            "reason": "Forbidden",
        },
        {
            "expression": f"{new_notes}.all(k, k == {annotation} || (k in {old_notes} && {old_notes}[k] == {new_notes}[k]))"
            f" && {old_notes}.all(k, k == {annotation} || k in {new_notes})",
            "messageExpression": f"{node} + 'the diagnostic schedule may write only the annotation "
            f"{DIAGNOSTICS_PASSED_ANNOTATION} of a node'",
            "reason": "Forbidden",
        },
        {
            "expression": " && ".join(_same("metadata", field) for field in OTHER_NODE_METADATA_FIELDS),
            "messageExpression": f"{node} + 'the diagnostic schedule may not change a node\\'s owners or finalizers'",
            "reason": "Forbidden",
        },
    ]


def _pod_validations() -> list[dict[str, str]]:
    """A created pod is a diagnostic pod as ``diagnostic_pod_manifest`` writes it; a deleted or exec'd one is named so."""
    prefix = lit(pod_name(""))
    images = lit_list(image.reference for image in diagnostic_images().values())
    spec = "object.spec"
    containers = f"({spec}.containers + {_or_empty(spec, 'initContainers', '[]')})"
    context = "c.securityContext"
    plain = (
        f"{containers}.all(c, c.image in {images} && has({context}) && has({context}.allowPrivilegeEscalation) && "
        f"!{context}.allowPrivilegeEscalation && (!has({context}.privileged) || !{context}.privileged) && "
        f"(!has({context}.capabilities) || !has({context}.capabilities.add) || size({context}.capabilities.add) == 0))"
    )
    no_host = " && ".join(f"(!has({spec}.{field}) || !{spec}.{field})" for field in ("hostNetwork", "hostPID", "hostIPC"))
    shape = (
        f"object.metadata.name.startsWith({prefix}) && has(object.metadata.labels) && "
        f"{lit(NAME_LABEL)} in object.metadata.labels && object.metadata.labels[{lit(NAME_LABEL)}] == {lit(DIAG_APP)} && "
        f"{no_host} && (!has({spec}.volumes) || size({spec}.volumes) == 0) && !has({spec}.ephemeralContainers) && "
        f"!has({spec}.nodeName) && has({spec}.automountServiceAccountToken) && !{spec}.automountServiceAccountToken && "
        f"(!has({spec}.serviceAccountName) || {spec}.serviceAccountName == 'default') && {plain}"
    )
    return [
        {
            "expression": f"request.resource.resource != 'pods' || request.subResource != '' || "
            f"request.operation != 'CREATE' || ({shape})",
            "messageExpression": "'pod ' + object.metadata.name + ': the diagnostic schedule creates only diagnostic "
            f"pods ({pod_name('<node>')}, label {NAME_LABEL}={DIAG_APP}, the pinned diagnostic images, no host "
            "namespaces, volumes, privilege or token)'",
            "reason": "Forbidden",
        },
        {
            "expression": f"request.resource.resource != 'pods' || request.operation == 'CREATE' || "
            f"request.name.startsWith({prefix})",
            "messageExpression": "'pod ' + request.name + ': the diagnostic schedule deletes and execs into its own "
            f"diagnostic pods only ({pod_name('<node>')})'",
            "reason": "Forbidden",
        },
    ]


def fence_policy_manifest(model: PlatformModel) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy that holds the schedule's ServiceAccount to what the schedule does (the module's
    docstring); every other user is left to RBAC and the platform's other policies."""
    return {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": DIAGNOSTICS_FENCE_POLICY, "labels": _labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": {},
                "objectSelector": {},
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["nodes"],
                        "scope": "Cluster",
                    },
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "DELETE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    },
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CONNECT"],
                        "resources": ["pods/exec"],
                        "scope": "Namespaced",
                    },
                ],
            },
            "matchConditions": [
                {"name": "the-diagnostic-schedule", "expression": f"request.userInfo.username == {lit(service_account_user())}"}
            ],
            "validations": [
                *(
                    {**v, "expression": f"request.resource.resource != 'nodes' || ({v['expression']})"}
                    for v in _node_validations(model)
                ),
                *_pod_validations(),
            ],
        },
    }


def fence_binding_manifest() -> dict[str, Any]:
    return {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": DIAGNOSTICS_FENCE_POLICY, "labels": _labels()},
        "spec": {"policyName": DIAGNOSTICS_FENCE_POLICY, "validationActions": ["Deny"]},
    }


def cron_job_manifest(model: PlatformModel, stack: str) -> dict[str, Any]:
    settings = model.config.validation.diagnostics_schedule
    labels = _labels()
    container = {
        "name": CONTAINER_NAME,
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "command": schedule_command(model, stack)[:1],
        "args": schedule_command(model, stack)[1:],
        # rich and Python write nothing outside /tmp; HOME for any library that looks for one.
        "env": [{"name": "HOME", "value": "/tmp"}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": IMAGE_USER_ID,
            "runAsGroup": IMAGE_USER_ID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "stack", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    pod_spec = {
        "serviceAccountName": DIAGNOSTICS_SCHEDULE_NAME,
        # Its own token, to call the API server with (the ServiceAccount itself mounts none into other pods).
        "automountServiceAccountToken": True,
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        # It needs no GPU: the system pool (its CriticalAddonsOnly taint tolerated) or any CPU pool; never a GPU
        # node, whose taints it does not tolerate.
        "tolerations": [SYSTEM_POOL_TOLERATION.to_kube()],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [
            {"name": "stack", "configMap": {"name": DIAGNOSTICS_SCHEDULE_NAME}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _metadata(),
        "spec": {
            "schedule": settings.cron,
            "timeZone": TIME_ZONE,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": STARTING_DEADLINE_S,
            "successfulJobsHistoryLimit": SUCCESSFUL_HISTORY,
            "failedJobsHistoryLimit": FAILED_HISTORY,
            "jobTemplate": {
                "metadata": {"labels": labels},
                "spec": {
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": run_deadline_seconds(model),
                    "template": {"metadata": {"labels": labels}, "spec": pod_spec},
                },
            },
        },
    }


def schedule_manifests(model: PlatformModel, stack: str) -> list[dict[str, Any]]:
    """Everything the schedule needs, in the order it is created (the fence before the RBAC it fences, the RBAC and the
    ConfigMap before the CronJob); nothing when ``schedule_runs`` is false."""
    if not schedule_runs(model):
        return []
    return [
        fence_policy_manifest(model),
        fence_binding_manifest(),
        service_account_manifest(),
        *role_manifests(),
        config_map_manifest(model),
        cron_job_manifest(model, stack),
    ]
