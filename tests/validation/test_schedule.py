"""The diagnostic schedule in the cluster (``validation.diagnosticsSchedule``): what the plan refuses, what the stack
renders (the CronJob, its ServiceAccount, RBAC, ConfigMap and fence), that the rendered sections give the command the
pools the stack deployed, and ``--in-cluster`` / ``--sections-file`` on the command line. The fence's decisions on a
real API server are tests/e2e/test_diagnostics_schedule.py's."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.admission.engine import cpp_available
from aks_gpu.cli import main
from aks_gpu.cli.common import load_rendered_sections
from aks_gpu.cluster.client_config import ProbeError, load_in_cluster_configuration
from aks_gpu.naming import DIAGNOSTICS_FENCE_POLICY, DIAGNOSTICS_SCHEDULE_NAME, GPU_NAMESPACE
from aks_gpu.resolved.model import PlatformModel
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.validation import schedule
from aks_gpu.validation.diagnostics import DEADLINE_SECONDS
from tests.conftest import PROJECT_DIR, STACKS_DIR, raw_stack

IMAGE = "myregistry.azurecr.io/aks-gpu@sha256:" + "0123456789abcdef" * 4


def with_schedule(stack: str, **settings: Any) -> dict[str, Any]:
    raw = dict(raw_stack(stack))
    validation = dict(raw.get("aks-gpu:validation") or {})
    validation["diagnosticsSchedule"] = {"enabled": True, "image": IMAGE, **settings}
    raw["aks-gpu:validation"] = validation
    return raw


def model_of(stack: str, **settings: Any) -> PlatformModel:
    return validate_stack(with_schedule(stack, **settings), f"Pulumi.{stack}.yaml").model


def plan_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], **settings: Any) -> tuple[int, str]:
    document = yaml.safe_load((STACKS_DIR / "Pulumi.dev.yaml").read_text())
    document["config"]["aks-gpu:validation"]["diagnosticsSchedule"] = settings
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(document))
    code = main(["plan", "--stack", "dev", "--config-file", str(path), "--project-dir", str(PROJECT_DIR), "--out", str(tmp_path)])
    return code, " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    ("settings", "fix"),
    [
        ({"enabled": True}, "enabled without an image: build the aks-gpu image"),
        ({"enabled": True, "image": "myregistry.azurecr.io/aks-gpu:1.0"}, "is not pinned by digest"),
        ({"image": "myregistry.azurecr.io/aks-gpu@sha256:abc"}, "is not pinned by digest"),
        ({"enabled": True, "image": IMAGE, "level": 1}, "the schedule runs the diagnostics at level 2 or 3"),
        ({"enabled": True, "image": IMAGE, "cron": "@weekly"}, "'@weekly' has 1 field(s): write five"),
        ({"enabled": True, "image": IMAGE, "cron": "0 17 2 * * 0"}, "has 6 field(s): write five"),
    ],
)
def test_the_plan_refuses_a_schedule_it_cannot_run_and_says_the_fix(
    settings: dict[str, Any], fix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = plan_errors(tmp_path, capsys, **settings)
    assert code == 2
    assert "aks-gpu:validation.diagnosticsSchedule" in err and fix in err, err


def test_off_by_default_nothing_is_rendered() -> None:
    model = validate_stack(raw_stack("prod"), "Pulumi.prod.yaml").model
    assert not model.config.validation.diagnostics_schedule.enabled
    assert schedule.schedule_manifests(model, "prod") == []


def test_an_amd_stack_is_diagnosed_on_the_schedule_too() -> None:
    # AMD's nodes get their own diagnostic pod (amd-smi, RVS): the schedule runs there, its deadline counts them, and
    # its fence lets it quarantine their nodes, the test runner's image among the pod's allowed ones.
    model = model_of("amd", level=2)
    objects = by_kind(schedule.schedule_manifests(model, "amd"))
    nodes = sum(pool.config.most_nodes for pool in model.pools)
    assert nodes and {pool.vendor for pool in model.pools} == {"amd"}
    deadline = objects["CronJob"]["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
    assert deadline == nodes * (600 + DEADLINE_SECONDS[2]) + schedule.RUN_MARGIN_S
    fence = yaml.safe_dump(objects["ValidatingAdmissionPolicy"]["spec"]["validations"])
    assert all(f"'{pool.name}'" in fence for pool in model.pools)
    assert "docker.io/rocm/test-runner" in fence


def by_kind(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = [m["kind"] for m in manifests]
    assert len(set(kinds)) == len(kinds), kinds
    return {m["kind"]: m for m in manifests}


def test_the_cron_job_runs_the_ci_workflows_command_in_the_cluster_once_at_a_time() -> None:
    model = model_of("prod", level=3, cron="30 1 * * 6")
    objects = by_kind(schedule.schedule_manifests(model, "prod"))
    cron_job = objects["CronJob"]
    spec = cron_job["spec"]
    assert cron_job["metadata"]["namespace"] == GPU_NAMESPACE
    assert (spec["schedule"], spec["timeZone"], spec["concurrencyPolicy"]) == ("30 1 * * 6", "Etc/UTC", "Forbid")
    assert spec["startingDeadlineSeconds"] > 0 and spec["successfulJobsHistoryLimit"] and spec["failedJobsHistoryLimit"]
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    # Per NVIDIA node at the pools' largest (prod: 4 + 3 + 2), the wait for its pod and level 3's deadline.
    assert job["activeDeadlineSeconds"] == 9 * (600 + DEADLINE_SECONDS[3]) + schedule.RUN_MARGIN_S
    pod = job["template"]["spec"]
    assert pod["serviceAccountName"] == DIAGNOSTICS_SCHEDULE_NAME and pod["restartPolicy"] == "Never"
    [container] = pod["containers"]
    assert container["image"] == IMAGE
    command = [*container["command"], *container["args"]]
    assert command == [
        "aksgpu", "validate", "--stack", "prod", "--sections-file", "/etc/aks-gpu/sections.yaml", "--in-cluster",
        "--deep", "--level", "3", "--quarantine", "--json",
    ]  # fmt: skip
    # The CI workflow's step runs the same command, with the stack file and kubeconfig of the runner.
    workflow = (PROJECT_DIR / "examples" / "ci" / "gpu-diagnose.yml").read_text()
    assert 'aksgpu validate --stack "$STACK" --deep --level "$LEVEL" --quarantine --json' in workflow
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_the_cron_jobs_pod_meets_the_restricted_pod_security_profile() -> None:
    pod = by_kind(schedule.schedule_manifests(model_of("prod"), "prod"))["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]
    spec = pod["spec"]
    [container] = spec["containers"]
    context = {**spec["securityContext"], **container["securityContext"]}
    # https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted
    assert context["runAsNonRoot"] is True and context["runAsUser"] == schedule.IMAGE_USER_ID != 0
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert context["readOnlyRootFilesystem"] is True
    assert {v["name"]: set(v) - {"name"} for v in spec["volumes"]} == {"stack": {"configMap"}, "tmp": {"emptyDir"}}
    assert not any(spec.get(field) for field in ("hostNetwork", "hostPID", "hostIPC"))


def test_the_rbac_is_what_the_live_path_calls_and_no_more() -> None:
    objects = schedule.schedule_manifests(model_of("prod"), "prod")
    roles = {m["kind"]: m for m in objects if m["kind"] in ("Role", "ClusterRole")}
    rules = {
        (kind, resource, verb)
        for kind, role in roles.items()
        for rule in role["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert rules == {
        ("ClusterRole", "nodes", "get"),
        ("ClusterRole", "nodes", "list"),
        ("ClusterRole", "nodes", "patch"),
        ("Role", "pods", "create"),
        ("Role", "pods", "get"),
        ("Role", "pods", "delete"),
        ("Role", "pods/log", "get"),
        ("Role", "pods/exec", "create"),
        ("Role", "pods/exec", "get"),
    }
    assert roles["Role"]["metadata"]["namespace"] == GPU_NAMESPACE
    bindings = [m for m in objects if m["kind"].endswith("RoleBinding")]
    assert len(bindings) == 2
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": DIAGNOSTICS_SCHEDULE_NAME, "namespace": GPU_NAMESPACE}]
    # The fence comes before the RBAC it fences.
    kinds = [m["kind"] for m in objects]
    assert kinds.index("ValidatingAdmissionPolicyBinding") < kinds.index("ClusterRoleBinding")


def test_the_fence_binds_to_the_service_account_and_denies() -> None:
    objects = by_kind(schedule.schedule_manifests(model_of("prod"), "prod"))
    policy, binding = objects["ValidatingAdmissionPolicy"], objects["ValidatingAdmissionPolicyBinding"]
    assert policy["metadata"]["name"] == binding["spec"]["policyName"] == DIAGNOSTICS_FENCE_POLICY
    assert binding["spec"]["validationActions"] == ["Deny"] and policy["spec"]["failurePolicy"] == "Fail"
    [condition] = policy["spec"]["matchConditions"]
    assert f"'system:serviceaccount:{GPU_NAMESPACE}:{DIAGNOSTICS_SCHEDULE_NAME}'" in condition["expression"]
    rules = {(tuple(r["resources"]), tuple(r["operations"])) for r in policy["spec"]["matchConstraints"]["resourceRules"]}
    assert rules == {(("nodes",), ("UPDATE",)), (("pods",), ("CREATE", "DELETE")), (("pods/exec",), ("CONNECT",))}


@pytest.mark.skipif(not cpp_available(), reason="the offline checker type-checks with cel-cpp (cel-expr-python)")
def test_the_fence_compiles_at_every_compat_version() -> None:
    from aks_gpu.admission import cel_environment

    policy = schedule.fence_policy_manifest(model_of("prod"))
    for version in cel_environment.compat_versions():
        errors = cel_environment.check_policy(policy["spec"], version)
        assert not errors, f"compat {version}:\n" + "\n".join(map(str, errors))


# What the diagnostics read of a pool: the pod's resource and placement, the NCCL figure's size, the GPU count.
READ_BY_DIAGNOSTICS = ("name", "vendor", "resource", "node_selector", "tolerations", "gpus_per_node", "vm_size")


@pytest.mark.parametrize("stack", ["dev", "prod", "teams", "amd"])
def test_the_rendered_sections_give_the_command_the_pools_the_stack_deployed(stack: str, tmp_path: Path) -> None:
    model = model_of(stack)
    config_map = by_kind(schedule.schedule_manifests(model, stack))["ConfigMap"]
    path = tmp_path / schedule.SECTIONS_FILE
    path.write_text(config_map["data"][schedule.SECTIONS_FILE])
    read = load_rendered_sections(path)

    def seen(m: PlatformModel) -> list[dict[str, Any]]:
        return [{f: getattr(pool, f) for f in READ_BY_DIAGNOSTICS} for pool in m.pools]

    assert seen(read) == seen(model)
    assert read.config.validation == model.config.validation
    assert all(dataclasses.is_dataclass(pool) for pool in read.pools)


def test_the_rendered_sections_leave_out_what_the_diagnostics_do_not_read() -> None:
    text = schedule.schedule_sections_file(model_of("prod"))
    keys = set(yaml.safe_load(text)["config"])
    assert keys <= {"aks-gpu:gpuPools", "aks-gpu:workloads", "aks-gpu:devicePlugin", "aks-gpu:validation", "aks-gpu:queueing"}
    # The alert receivers and the remediation datastore are the stack's, not the CronJob's.
    assert "receivers" not in text and "datastore" not in text


def test_in_cluster_reads_the_service_accounts_token_and_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import incluster_config

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token-1")
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    configuration = load_in_cluster_configuration()
    assert configuration.host == "https://10.0.0.1:443"
    assert [value.lower() for value in configuration.api_key.values()] == ["bearer sa-token-1"]
    assert configuration.ssl_ca_cert == str(ca)
    assert configuration.retries is False
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(ProbeError, match="--in-cluster: not in a pod with a ServiceAccount token"):
        load_in_cluster_configuration()


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        (["--in-cluster"], "--in-cluster: for the vendor diagnostics; add --deep"),
        (["--deep", "--in-cluster", "--kubeconfig", "k"], "--kubeconfig: --in-cluster calls the API server as the pod's"),
        (["--deep", "--sections-file", "s.yaml", "--config-file", "c.yaml"], "give the stack's rendered sections or a"),
    ],
)
def test_in_cluster_usage_errors_exit_2(extra: list[str], complaint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), *extra]) == 2
    assert complaint in " ".join(capsys.readouterr().err.split())


def test_a_sections_file_the_models_refuse_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / schedule.SECTIONS_FILE
    path.write_text(yaml.safe_dump({"config": {"aks-gpu:gpuPools": [{"name": "Bad!", "vendor": "nvidia"}]}}))
    assert main(["validate", "--stack", "prod", "--sections-file", str(path), "--deep", "--in-cluster"]) == 2
    assert re.search(r"aks-gpu:gpuPools\[0\]\.name", " ".join(capsys.readouterr().err.split()))
