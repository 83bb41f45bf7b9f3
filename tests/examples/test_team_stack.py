"""``examples/team-stack``: an application team's stack, run under the mock engine against the outputs of a real
plan of the platform's ``prod`` stack (and ``dev``), its ``StackReference`` answered with them. What it creates
must be fenced like the platform's own namespaces, land on the pool it names, and be admitted by the platform's
GPU policy."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest
from pulumi.runtime.mocks import MockResourceArgs

from aks_gpu.admission.evaluate import Decision, evaluate
from aks_gpu.admission.policy import render_policy
from aks_gpu.mock_engine import SECRET, PlanMocks, PlanResult, fake_kubeconfig, run_program
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, MockHarness, raw_stack, stack_model

TEAM_DIR = PROJECT_DIR / "examples" / "team-stack"
PROJECT = "aks-gpu-team"
PLATFORM_STACK = "org/aks-gpu/prod"
STACK_REFERENCE = "pulumi:pulumi:StackReference"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
SPOT_TOLERATION = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}


class PlatformStackMocks(PlanMocks):
    """``PlanMocks`` that also answer a ``StackReference`` the way the Pulumi service does: the referenced stack's
    ``outputs``, and ``secretOutputNames`` (the SDK marks those outputs secret when the program reads them)."""

    def __init__(self, stacks: Mapping[str, Mapping[str, Any]], secret_outputs: tuple[str, ...] = ("kubeconfig",)) -> None:
        super().__init__()
        self.stacks = stacks
        self.secret_outputs = secret_outputs

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == STACK_REFERENCE:
            name = str(args.inputs.get("name") or args.resource_id)
            if name not in self.stacks:
                raise KeyError(f"no stack {name!r} to reference")
            return name, {"name": name, "outputs": dict(self.stacks[name]), "secretOutputNames": list(self.secret_outputs)}
        return super().new_resource(args)


@functools.cache
def platform_plan(stack: str) -> PlanResult:
    """The platform: this repository's ``__main__.py`` for ``stacks/Pulumi.<stack>.yaml``."""
    return MockHarness().run_stack(stack)


def prod_plan() -> PlanResult:
    return platform_plan("prod")


def outputs_of(stack: str) -> dict[str, Any]:
    """A platform stack's outputs as ``pulumi stack output --show-secrets`` would give them: the plan masks the
    kubeconfig, so a fake one (same shape as the cluster's) stands in."""
    outputs = copy.deepcopy(platform_plan(stack).outputs)
    assert outputs["kubeconfig"] == SECRET
    outputs["kubeconfig"] = fake_kubeconfig(str(outputs["clusterName"]))
    return outputs


def prod_outputs() -> dict[str, Any]:
    return outputs_of("prod")


@pytest.fixture
def platform_outputs() -> dict[str, Any]:
    return prod_outputs()


def run_team(outputs: Mapping[str, Any], platform_stack: str = PLATFORM_STACK, **config: Any) -> PlanResult:
    """The example's ``__main__.py`` for stack ``dev`` with ``platformStack`` set (its stack reference answered
    with ``outputs``), plus ``config`` (its keys)."""
    raw = {f"{PROJECT}:platformStack": platform_stack, **{f"{PROJECT}:{key}": value for key, value in config.items()}}
    mocks = PlatformStackMocks({platform_stack: outputs})
    # The same runner as `aksgpu plan`, with the stack reference answered.
    return run_program(TEAM_DIR, "dev", raw, project=PROJECT, mocks=mocks)


@functools.cache
def team_plan() -> PlanResult:
    """The example with its default config: ``platformStack`` only."""
    return run_team(prod_outputs())


@pytest.fixture
def team() -> PlanResult:
    return team_plan()


def manifest(result: PlanResult, kind: str, namespace: str, name: str) -> dict[str, Any]:
    return result.manifests()[f"{kind.lower()}-{namespace}-{name}.yaml"]


def pod_spec(job: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def restricted_prod() -> PlatformModel:
    """prod with the admission policy's rule 3 on: GPU pods only in workload namespaces, on their type's pools."""
    raw = raw_stack("prod")
    raw["aks-gpu:admission"] = {**raw.get("aks-gpu:admission", {}), "restrictToWorkloadNamespaces": True}
    return validate_stack(raw, "stacks/Pulumi.prod.yaml").model


def admission(result: PlanResult, model: PlatformModel) -> Decision:
    """The platform's policy on the team's Job, reading the team's Namespace object as the API server would."""
    namespace = result.outputs["namespace"]
    [decision] = evaluate(
        [manifest(result, "Job", namespace, result.outputs["jobName"])],
        render_policy(model),
        {namespace: manifest(result, "Namespace", "_", namespace)},
    )
    return decision


# ---------------------------------------------------------------- the namespace


def test_the_team_namespace_is_fenced_like_the_platforms_own(team: PlanResult) -> None:
    assert team.outputs["namespace"] == "team-vision"
    namespace = manifest(team, "Namespace", "_", "team-vision")
    labels = namespace["metadata"]["labels"]
    assert labels["aks-gpu/workload"] == "training"
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    quota = manifest(team, "ResourceQuota", "team-vision", "gpu-quota")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}
    # The same deny-all policy the platform gives its own training namespace.
    platform = prod_plan()
    deny = manifest(team, "NetworkPolicy", "team-vision", "deny-cross-namespace")
    assert deny["spec"] == manifest(platform, "NetworkPolicy", "gpu-training", "deny-cross-namespace")["spec"]
    assert deny["spec"]["policyTypes"] == ["Ingress", "Egress"]


def test_the_namespace_type_is_its_pools_workload_by_default(platform_outputs: dict[str, Any]) -> None:
    result = run_team(platform_outputs, gpuPool="infer", namespace="team-serve", gpus=1)
    assert manifest(result, "Namespace", "_", "team-serve")["metadata"]["labels"]["aks-gpu/workload"] == "inference"
    assert admission(result, restricted_prod()).allowed


def test_the_kubeconfig_stays_a_secret_in_the_team_stack(team: PlanResult) -> None:
    [provider] = team.by_type("pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == SECRET
    # Keyed by the cluster's ARM id: a rotated kubeconfig updates the provider, it does not replace every object.
    assert provider.inputs["clusterIdentifier"] == prod_outputs()["clusterId"]
    namespaced = [r for r in team.resources if r.custom and r.type.startswith("kubernetes:")]
    # Every Kubernetes object goes through that provider (the only one): none falls back to an ambient kubeconfig.
    providers = {r.options["provider"] for r in namespaced}
    assert namespaced and len(providers) == 1 and None not in providers


# ---------------------------------------------------------------- the job


def test_the_job_is_placed_from_the_platforms_outputs(team: PlanResult, platform_outputs: dict[str, Any]) -> None:
    train = platform_outputs["pools"]["train"]
    job = manifest(team, "Job", "team-vision", team.outputs["jobName"])
    spec = pod_spec(job)
    assert spec["nodeSelector"] == train["nodeSelector"] == {"aks-gpu/pool": "train"}
    assert GPU_TOLERATION in spec["tolerations"]
    assert spec["tolerations"] == train["tolerations"]
    [container] = spec["containers"]
    # One whole node by default: the pool's count per node (8 on ND96isr_H100_v5), requested as it is limited.
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert train["resourceCountPerNode"] == 8


def test_the_job_is_a_hardened_one_shot_run(team: PlanResult) -> None:
    job = manifest(team, "Job", "team-vision", team.outputs["jobName"])
    assert job["spec"]["backoffLimit"] >= 0 and job["spec"]["activeDeadlineSeconds"] > 0
    # pulumi up must not wait hours (and time out after 10 minutes) for a training run to finish.
    assert job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    spec = pod_spec(job)
    assert spec["restartPolicy"] == "Never"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    [container] = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def test_the_job_waits_for_the_namespace_and_its_quota(team: PlanResult) -> None:
    [job] = team.by_type("kubernetes:batch/v1:Job")
    [namespace] = team.by_type("kubernetes:core/v1:Namespace")
    quotas = team.by_type("kubernetes:core/v1:ResourceQuota")
    assert quotas and {namespace.urn, *(quota.urn for quota in quotas)} <= set(job.options["dependsOn"])


def test_the_job_is_admitted_by_the_platforms_gpu_policy(team: PlanResult) -> None:
    for model in (stack_model("prod"), restricted_prod()):
        decision = admission(team, model)
        assert decision.actions == ("Deny",), decision.note  # the policy applied
        assert decision.allowed, decision.messages


# ---------------------------------------------------------------- config


def test_another_pool_and_gpu_count_come_from_config(platform_outputs: dict[str, Any]) -> None:
    result = run_team(platform_outputs, gpuPool="infer", workloadType="inference", namespace="team-serve", gpus=2)
    assert result.outputs["namespace"] == "team-serve"
    spec = pod_spec(manifest(result, "Job", "team-serve", result.outputs["jobName"]))
    assert spec["nodeSelector"] == platform_outputs["pools"]["infer"]["nodeSelector"] == {"aks-gpu/pool": "infer"}
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert admission(result, restricted_prod()).allowed


def test_on_the_dev_platform_the_job_also_tolerates_spot_eviction() -> None:
    # dev's only pool is a time-sliced T4 spot pool: AKS taints spot nodes, the platform exports that toleration.
    dev = outputs_of("dev")
    result = run_team(dev, "org/aks-gpu/dev", gpuPool="dev", workloadType="experiments", gpus=1)
    spec = pod_spec(manifest(result, "Job", "team-vision", "train"))
    assert SPOT_TOLERATION in spec["tolerations"] and GPU_TOLERATION in spec["tolerations"]
    assert spec["tolerations"] == dev["pools"]["dev"]["tolerations"]
    decision = admission(result, stack_model("dev"))
    assert decision.actions == ("Warn", "Audit") and decision.allowed, decision.messages


def test_a_namespace_type_that_does_not_match_its_pool_is_refused_by_the_platform(platform_outputs: dict[str, Any]) -> None:
    # A training namespace sending its Job to the inference pool: the platform's rule 3 refuses it.
    result = run_team(platform_outputs, gpuPool="infer", workloadType="training", gpus=1)
    decision = admission(result, restricted_prod())
    assert not decision.allowed
    assert "training pools" in " ".join(decision.messages)


FAILING_CONFIGS: dict[str, dict[str, Any]] = {
    "unknown pool": {"gpuPool": "gpu"},
    "more than one node": {"gpus": 9, "gpuQuota": 16},
    "more than the quota": {"gpus": 8, "gpuQuota": 4},
    "no gpus": {"gpus": 0},
}


class RecordingPlatformMocks(PlatformStackMocks):
    """Also remembers the type of every resource the engine was asked to create, for runs that fail."""

    def __init__(self, stacks: Mapping[str, Mapping[str, Any]]) -> None:
        super().__init__(stacks)
        self.created: list[str] = []

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.created.append(args.typ)
        return super().new_resource(args)


# Runs each config of FAILING_CONFIGS and prints, as JSON, the error's type and message and what was created.
# The mock settings share the runtime's set of pending outputs across runs, and a run that fails midway leaves its
# failed ones (bound to its closed event loop) there: dropped between runs, as pulumi.runtime.mocks.test does.
FAILING_RUNS = """
import json, sys
from pulumi.runtime.settings import SETTINGS
from aks_gpu.mock_engine import run_program
from tests.examples.test_team_stack import PLATFORM_STACK, PROJECT, TEAM_DIR, RecordingPlatformMocks
request = json.load(sys.stdin)
found = {}
for case, config in request["cases"].items():
    mocks = RecordingPlatformMocks({PLATFORM_STACK: request["outputs"]})
    raw = {f"{PROJECT}:platformStack": PLATFORM_STACK, **{f"{PROJECT}:{k}": v for k, v in config.items()}}
    try:
        run_program(TEAM_DIR, "dev", raw, project=PROJECT, mocks=mocks)
        found[case] = {"error": None}
    except Exception as error:
        found[case] = {"error": type(error).__name__, "message": str(error)}
    found[case]["created"] = mocks.created
    SETTINGS.outputs.clear()
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def failures() -> dict[str, dict[str, Any]]:
    """How the example fails, per config of FAILING_CONFIGS. In a child interpreter, so that what a failed
    program leaves in Pulumi's runtime (and asyncio's reports of it) stays out of the other tests."""
    request = json.dumps({"outputs": prod_outputs(), "cases": FAILING_CONFIGS})
    done = subprocess.run(
        [sys.executable, "-c", FAILING_RUNS], cwd=PROJECT_DIR, input=request, capture_output=True, text=True, check=True
    )
    found: dict[str, dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_wrong_setting_stops_cleanly_before_anything_is_created(failures: dict[str, dict[str, Any]]) -> None:
    # RunError: Pulumi prints the message alone, no traceback. Only the stack reference (a read) and the provider
    # (nothing in the cluster) exist by then; no Kubernetes object was sent to the engine.
    for case, found in failures.items():
        assert found["error"] == "RunError", (case, found)
        assert set(found["created"]) <= {STACK_REFERENCE, "pulumi:providers:kubernetes", "aks-gpu:index:GpuWorkloadNamespace"}


def test_an_unknown_pool_names_the_platforms_pools(failures: dict[str, dict[str, Any]]) -> None:
    message = failures["unknown pool"]["message"]
    assert message == "gpuPool: the platform stack has no GPU pool 'gpu'; its pools: infer, inferfull, train"


def test_more_gpus_than_one_node_or_the_quota_is_refused(
    failures: dict[str, dict[str, Any]], platform_outputs: dict[str, Any]
) -> None:
    node, quota = failures["more than one node"]["message"], failures["more than the quota"]["message"]
    assert "gpus is 9" in node and "one node's 8 nvidia.com/gpu" in node
    assert "gpus is 8" in quota and "gpuQuota 4" in quota
    assert failures["no gpus"]["message"].startswith("gpus is 0 and gpuQuota 8")
    # Within both: accepted.
    result = run_team(platform_outputs, gpus=4, gpuQuota=4)
    limits = pod_spec(manifest(result, "Job", "team-vision", "train"))["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "4"}


def test_no_taint_label_or_resource_name_is_written_into_the_example() -> None:
    # Placement comes from the platform's outputs only: a changed taint or MIG profile reaches the Job unedited.
    source = (TEAM_DIR / "__main__.py").read_text(encoding="utf-8")
    for literal in ("nvidia.com/gpu", "aks-gpu/pool", "NoSchedule", "present"):
        assert literal not in source
