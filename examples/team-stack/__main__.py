"""An application team's stack on the aks-gpu platform: the team's own GPU namespace and a training Job.

The platform stack (this repository's ``__main__.py``) owns the cluster, the GPU pools, the device plugin and the
admission policy, and exports what other stacks need to use them. This stack reads those outputs through a
``StackReference`` and places everything from them: no taint, label or GPU resource name is written here, so a
platform change (a MIG profile, a new taint, a spot pool) reaches the Job on the next ``pulumi up``.

Config (``Pulumi.<stack>.yaml``; only ``platformStack`` is required):
  platformStack  the platform stack, ``<org>/<project>/<stack>``
  gpuPool        the platform's GPU pool to train on: a key of its ``pools`` output (default ``train``)
  workloadType   the namespace's workload type (default: the ``workload`` of that pool)
  namespace      the team's namespace (default ``team-vision``)
  gpuQuota       GPUs the namespace may hold in all (default 8)
  gpus           GPUs of the training Job (default: all of one node; a pod cannot span nodes)
  image          the training image (default: NGC PyTorch)

A wrong setting stops the program with one clean message (a ``pulumi.RunError``, which Pulumi prints without a
traceback) and nothing is created: the settings of this stack are checked first, and everything that depends on
the platform's pools (the namespace and its objects, the Job) waits for the chosen pool to be checked.
"""

from typing import cast

import pulumi
import pulumi_kubernetes as k8s

# PoolOutput: one entry of the platform stack's `pools` output, keys as every language reads them.
from aks_gpu import GpuWorkloadNamespace
from aks_gpu import PoolOutput as PlatformPool

# NGC's PyTorch image (CUDA, NCCL, PyTorch); pin the month you validated.
# https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-25-04.html
DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:25.04-py3"
JOB_NAME = "train"
# pulumi-kubernetes waits for a Job to complete, and fails the update after 10 minutes; a training run is
# longer, so `pulumi up` returns once the Job is created. https://github.com/pulumi/pulumi-kubernetes/pull/417
# https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


def checked_pool(pools: dict[str, PlatformPool], name: str, wanted: int | None, quota: int) -> tuple[PlatformPool, int]:
    """The platform's pool ``name`` and the Job's GPU count: ``wanted``, or every GPU of one node. It must fit one
    node and the namespace quota, or the pod would never schedule (or never be created)."""
    if name not in pools:
        raise pulumi.RunError(f"gpuPool: the platform stack has no GPU pool {name!r}; its pools: {', '.join(sorted(pools))}")
    pool = pools[name]
    per_node = int(pool["resourceCountPerNode"])  # JSON numbers come back from a StackReference as floats
    gpus = wanted if wanted is not None else per_node
    if (per_node and gpus > per_node) or gpus > quota:
        raise pulumi.RunError(
            f"gpus is {gpus}: set it between 1 and the smaller of one node's {per_node or '(unknown)'} "
            f"{pool['resourceName']} and the namespace's gpuQuota {quota}"
        )
    return pool, gpus


config = pulumi.Config()
platform = pulumi.StackReference("platform", config.require("platformStack"))
pool_name = config.get("gpuPool") or "train"
configured_quota = config.get_int("gpuQuota")
gpu_quota = 8 if configured_quota is None else configured_quota
wanted_gpus = config.get_int("gpus")
# What this stack's own settings say is checked before anything else.
if gpu_quota < 1 or (wanted_gpus is not None and not 1 <= wanted_gpus <= gpu_quota):
    raise pulumi.RunError(f"gpus is {wanted_gpus} and gpuQuota {gpu_quota}: both at least 1, gpus at most gpuQuota")

pools = platform.require_output("pools")
# The chosen pool and the Job's GPU count, checked. Everything below waits for them, so a wrong pool or count stops
# the program before any object is created.
checked = pools.apply(lambda found: checked_pool(found, pool_name, wanted_gpus, gpu_quota))
pool: pulumi.Output[PlatformPool] = checked.apply(lambda c: c[0])
gpu_resources = checked.apply(lambda c: {c[0]["resourceName"]: str(c[1])})

# The kubeconfig output is a secret in the platform stack, and stays one here. The cluster's ARM id as the
# provider's clusterIdentifier: a rotated kubeconfig then updates the provider instead of replacing it, and with it
# every object of this stack (https://www.pulumi.com/registry/packages/kubernetes/api-docs/provider/).
provider = k8s.Provider(
    "platform-cluster",
    kubeconfig=platform.require_output("kubeconfig"),
    cluster_identifier=platform.require_output("clusterId"),
)

configured_type = config.get("workloadType")
team = GpuWorkloadNamespace(
    "team",
    {
        "workload": {
            "name": config.get("namespace") or "team-vision",
            # The pool's workload type by default: the type the platform's admission policy expects there.
            "type": pool.apply(lambda p: configured_type or p["workload"]),
            "gpu_quota": gpu_quota,
            "pod_security": "restricted",
        },
        "resource_name": pool.apply(lambda p: p["resourceName"]),
        "node_selector": pool.apply(lambda p: p["nodeSelector"]),
        "tolerations": pool.apply(lambda p: p["tolerations"]),
        # The platform's other GPU resources are capped at zero in the team's quota.
        "other_gpu_resources": pools.apply(lambda found: sorted({p["resourceName"] for p in found.values()})),
    },
    pulumi.ResourceOptions(provider=provider),
)

# The Kubernetes SDK's typed dicts: snake_case keys, sent to the cluster in camelCase.
pod_spec: k8s.core.v1.PodSpecArgsDict = {
    "restart_policy": "Never",
    "node_selector": pool.apply(lambda p: p["nodeSelector"]),
    # Kubernetes' own toleration fields (key, operator, value, effect), as the SDK's type names them.
    "tolerations": pool.apply(lambda p: cast(list[k8s.core.v1.TolerationArgsDict], p["tolerations"])),
    "automount_service_account_token": False,
    "security_context": {"run_as_non_root": True, "run_as_user": 1000, "seccomp_profile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "train",
            "image": config.get("image") or DEFAULT_IMAGE,
            "command": ["python", "-c", "import torch; print(torch.cuda.device_count(), 'GPUs visible')"],
            # The admission policy wants a GPU request equal to its limit (GPUs are never overcommitted).
            "resources": {"limits": gpu_resources, "requests": gpu_resources},
            "security_context": {
                "allow_privilege_escalation": False,
                "read_only_root_filesystem": True,
                "capabilities": {"drop": ["ALL"]},
            },
            "volume_mounts": [{"name": "tmp", "mount_path": "/tmp"}, {"name": "dshm", "mount_path": "/dev/shm"}],
        }
    ],
    # NCCL and PyTorch data loaders share memory through /dev/shm, which container runtimes keep small (64Mi):
    # a memory-backed emptyDir gives it room. https://kubernetes.io/docs/concepts/storage/volumes/#emptydir
    "volumes": [
        {"name": "tmp", "empty_dir": {}},
        {"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": "64Gi"}},
    ],
}

job = k8s.batch.v1.Job(
    "train",
    metadata={"name": JOB_NAME, "namespace": team.namespace_name, "labels": {"app": JOB_NAME}, "annotations": SKIP_AWAIT},
    spec={
        "backoff_limit": 2,
        "active_deadline_seconds": 24 * 3600,
        "template": {"metadata": {"labels": {"app": JOB_NAME}}, "spec": pod_spec},
    },
    # After the namespace and its quota: a pod created before its quota is not counted against it.
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[team]),
)

pulumi.export("namespace", team.namespace_name)
pulumi.export("jobName", job.metadata.apply(lambda meta: meta.name))
