"""``GpuValidation``: per GPU pool, the article's one-shot ``nvidia-smi`` pod as a Kubernetes Job.

Where the live probe execs into the device plugin pod (is the driver there?), the smoke Job asks the question a
workload asks: can a pod that requests one ``<resource>: 1`` be scheduled on the pool (taints tolerated, node
selected, the resource advertised) and see its GPU? It requests one unit of the pool's schedulable resource
(``ResolvedPool.resource``: ``nvidia.com/gpu``, ``amd.com/gpu``, or ``nvidia.com/mig-<profile>`` for a MIG pool
under the ``mixed`` strategy) and runs the vendor's SMI tool once.

pulumi-kubernetes waits for a Job to complete and fails the update when it fails, so a pool whose GPUs do not
work fails ``pulumi up`` here. The wait is set to the Job's own deadline (plus a margin) instead of the
provider's 10-minute default, so a slow image pull on a fresh GPU node is not cut short.
https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/

A Job on a pool with ``minCount: 0`` makes the autoscaler start a GPU node for it (billed until the autoscaler
removes it again), so it is off there unless the pool sets ``smokeTest: true``; ``smoke_plan`` says per pool
whether it runs and why, for the plan summary.

Manifests are built by pure functions (``smoke_job_manifests``); the component only registers them.
"""

from dataclasses import dataclass
from typing import Any

import pulumi

from aks_gpu.args import platform_model
from aks_gpu.component import GpuComponent, kube_resource, plain_output
from aks_gpu.naming import GPU_NAMESPACE, NAME_LABEL, POOL_LABEL
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.specs import PlatformSpec
from aks_gpu.validation.schedule import schedule_manifests

SMOKE_APP = "gpu-smoke"
CONTAINER_NAME = "smi"
# Long enough to read the pod's log and status after a run, short enough not to pile up finished Jobs.
# https://kubernetes.io/docs/concepts/workloads/controllers/ttlafterfinished/
TTL_SECONDS_AFTER_FINISHED = 3600
# Pulumi waits this much longer than the Job's activeDeadlineSeconds, so Kubernetes ends a stuck Job (and
# reports why) before Pulumi gives up on it.
AWAIT_MARGIN_SECONDS = 120
# A failed smoke Job is replaced (run again) by the next update instead of awaited once more.
# https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/ ("pulumi.com/replaceUnready")
REPLACE_UNREADY = {"pulumi.com/replaceUnready": "true"}
# nobody:nogroup. The NVIDIA device nodes the runtime passes in are world read/write, so nvidia-smi needs no root.
NON_ROOT_ID = 65534


@dataclass(frozen=True)
class SmokeDecision:
    pool: str
    enabled: bool
    reason: str


def smoke_decision(model: PlatformModel, pool: ResolvedPool) -> SmokeDecision:
    """Whether ``pool`` gets a smoke Job: the stack switch, then the pool's ``smokeTest``, then its size."""
    config = pool.config
    if not model.config.validation.smoke_job.enabled:
        return SmokeDecision(pool.name, False, "off: validation.smokeJob.enabled is false")
    if not config.autoscaling and not config.count:
        # No autoscaler to start a node: the Job would wait for its deadline and fail.
        return SmokeDecision(pool.name, False, "off: the pool has count 0 and no autoscaler, so no node could run it")
    minimum = config.min_count if config.autoscaling else (config.count or 0)
    if config.smoke_test is False:
        return SmokeDecision(pool.name, False, "off: smokeTest is false on this pool")
    if config.smoke_test:
        if minimum == 0:
            return SmokeDecision(
                pool.name, True, "on: smokeTest is true (minCount 0: the autoscaler starts a GPU node for it, then removes it)"
            )
        return SmokeDecision(pool.name, True, "on: smokeTest is true")
    if minimum == 0:
        return SmokeDecision(pool.name, False, "off: minCount 0 would start a GPU node; set smokeTest: true to run it")
    setting = "minCount" if config.autoscaling else "count"
    return SmokeDecision(pool.name, True, f"on: {setting} {minimum} keeps a GPU node running")


def smoke_plan(model: PlatformModel) -> list[SmokeDecision]:
    """Per GPU pool, in stack order: does it get a smoke Job, and why (for the plan summary)."""
    return [smoke_decision(model, pool) for pool in model.pools]


def job_name(pool: ResolvedPool) -> str:
    return f"{SMOKE_APP}-{pool.name}"


def smoke_command(pool: ResolvedPool) -> list[str]:
    """NVIDIA: plain ``nvidia-smi`` (the article's command). AMD: ``amd-smi static``, falling back to
    ``rocm-smi`` on images older than amd-smi (ROCm < 6.0); either exits non-zero when the driver is not there."""
    if pool.vendor == "nvidia":
        return ["nvidia-smi"]  # the validation probe's command (smi_command) is -q -x; the smoke Job runs the article's
    return ["sh", "-c", "amd-smi static || rocm-smi --showdriverversion"]


def smoke_security_context(pool: ResolvedPool) -> dict[str, Any]:
    """Nothing but the GPU: no privilege escalation, every capability dropped, RuntimeDefault seccomp.

    NVIDIA runs as nobody. AMD runs as uid 0 with no capabilities: /dev/kfd and the render node the device plugin
    passes in belong to root and the host's ``render`` group, whose id differs between node images; as owner,
    root reaches them without any capability.
    """
    context: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if pool.vendor == "nvidia":
        return context | {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_ID,
            "runAsGroup": NON_ROOT_ID,
            # The NVIDIA container runtime writes the container's ld cache when it injects the driver libraries
            # (nvidia-smi comes in with them): the root filesystem must stay writable.
            # https://github.com/NVIDIA/nvidia-container-toolkit/pull/1326
            "readOnlyRootFilesystem": False,
        }
    return context | {"runAsUser": 0, "readOnlyRootFilesystem": True}


def smoke_job_manifest(model: PlatformModel, pool: ResolvedPool, namespace: str = GPU_NAMESPACE) -> dict[str, Any]:
    """The Job for one pool: one pod, one GPU unit, tolerating exactly the pool's taints, on the pool's nodes."""
    settings = model.config.validation.smoke_job
    labels = {NAME_LABEL: SMOKE_APP, POOL_LABEL: pool.name}
    container = {
        "name": CONTAINER_NAME,
        "image": settings.image if pool.vendor == "nvidia" else settings.amd_image,
        "imagePullPolicy": "IfNotPresent",
        "command": smoke_command(pool),
        "env": [{"name": "HOME", "value": "/tmp"}],
        # An extended resource is requested through its limit (the request defaults to it).
        # https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi", pool.resource.name: "1"},
        },
        "securityContext": smoke_security_context(pool),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(pool), "namespace": namespace, "labels": labels, "annotations": dict(REPLACE_UNREADY)},
        # https://kubernetes.io/docs/concepts/workloads/controllers/job/#job-termination-and-cleanup
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.deadline_seconds,
            "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": dict(pool.node_selector),
                    "tolerations": [t.to_kube() for t in pool.tolerations],
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 5,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}],
                },
            },
        },
    }


def smoke_job_manifests(model: PlatformModel, namespace: str = GPU_NAMESPACE) -> dict[str, dict[str, Any]]:
    """The Jobs ``smoke_plan`` turns on, by pool name."""
    enabled = {d.pool for d in smoke_plan(model) if d.enabled}
    return {pool.name: smoke_job_manifest(model, pool, namespace) for pool in model.pools if pool.name in enabled}


class GpuValidationArgs(PlatformSpec):
    """The stack's GPU pools and validation settings (as a stack file's keys, snake_case here)."""


class GpuValidation(GpuComponent[PlatformModel]):
    """The smoke half of post-deploy validation: one smoke Job per GPU pool that ``smoke_plan`` turns on,
    awaited by Pulumi (the SMI checks on every node run as a hook on the device plugin, see GpuDevicePlugin); and with
    ``validation.diagnosticsSchedule``, the diagnostic schedule's CronJob with its ServiceAccount, RBAC, ConfigMap and
    the admission policy that fences it (``aks_gpu.validation.schedule``).

    ``opts`` should carry the cluster's Kubernetes provider and ``depends_on`` the device plugin: the Job needs
    the plugin to advertise the resource before its pod can be scheduled.
    """

    smoke_jobs: pulumi.Output[dict[str, str]]
    """Per pool with a smoke Job: the Job's name (in gpu-resources)."""
    smoke_decisions: pulumi.Output[dict[str, str]]
    """Per pool: whether its smoke Job runs, and why."""

    def __init__(self, name: str, args: GpuValidationArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(name, args, opts)

    @classmethod
    def resolve_args(cls, name: str, args: Any) -> PlatformModel:
        return platform_model(args, f"GpuValidation {name}")

    def build(self, name: str, model: PlatformModel) -> dict[str, Any]:
        deadline = model.config.validation.smoke_job.deadline_seconds
        wait = f"{deadline + AWAIT_MARGIN_SECONDS}s"
        manifests = smoke_job_manifests(model)
        for pool, manifest in manifests.items():
            kube_resource(f"{name}-{pool}", manifest, self.child(custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait)))
        # The diagnostic schedule, one object after the other: the fence before the RBAC it fences, the CronJob last.
        previous: list[pulumi.Resource] = []
        for manifest in schedule_manifests(model, pulumi.get_stack()):
            kind = manifest["kind"].lower()
            previous = [kube_resource(f"{name}-diagnostics-{kind}", manifest, self.child(after=previous))]
        self.smoke_jobs = plain_output({pool: m["metadata"]["name"] for pool, m in manifests.items()})
        self.smoke_decisions = plain_output({d.pool: d.reason for d in smoke_plan(model)})
        return {"smokeJobs": self.smoke_jobs, "smokeDecisions": self.smoke_decisions}
