"""Security defaults, checked on what `aksgpu plan` writes for every stack of ``stacks/``:

- no credential (kubeconfig, token, certificate, key, base64 blob) in any plan file; credentials are ``[secret]``;
- the cluster has local accounts off and Entra ID + Azure RBAC on, and a network policy engine that enforces
  the namespaces' policies;
- no container gets more than Pod Security ``baseline`` allows, unless it is a vendor agent on the allowlist
  below, with the reason, and then only in a namespace that admits it;
- every workload namespace of ``aks-gpu:workloads`` has Pod Security labels, the deny-all NetworkPolicy and a
  GPU quota;
- checkov (Kubernetes framework) finds nothing beyond the checks ``.checkov.yaml`` lists, each with its reason.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.kube.kueue import gpu_ceilings
from aks_gpu.kube.node_daemonset import KUBELET_DEVICE_PLUGINS
from aks_gpu.mock_engine import SECRET, fake_kubeconfig
from aks_gpu.monitoring.exporters import AMD_EXPORTER_NAME, DCGM_EXPORTER_NAME, POD_RESOURCES_DIR
from aks_gpu.naming import GPU_NAMESPACE
from aks_gpu.resolved.model import resolve
from aks_gpu.resolved.targets import AMD_LABELLER_NAME, AMD_PLUGIN_CONTAINER, AMD_SMI_CONTAINER, NVIDIA_PLUGIN_CONTAINER
from tests.conformance import PROJECT_DIR, STACK_NAMES, Manifest, PlannedStack, planned
from tests.conftest import MockHarness, minimal_raw

# ---------------------------------------------------------------- no credentials in plan files

# Keys whose value is a credential wherever they appear (compared case-insensitively).
CREDENTIAL_KEYS = frozenset(
    {"kubeconfig", "password", "adminpassword", "clientsecret", "secret", "token", "privatekey", "clientkey", "keydata"}
)

_LEAK_PATTERNS: dict[str, re.Pattern[str]] = {
    "PEM block": re.compile(r"-----BEGIN [A-Z0-9 ]+-----"),
    "kubeconfig": re.compile(
        r"\bkind:\s*Config\b|current-context|client-(certificate|key)-data|certificate-authority-data|clusterUser_"
    ),
    "exec credential plugin": re.compile(r"\bkubelogin\b|client\.authentication\.k8s\.io"),
    "JSON web token": re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\."),
    "bearer token": re.compile(r"\b[Bb]earer\s+[A-Za-z0-9._~+/-]{16,}"),
}
# Long runs of the base64 alphabet. Hex (image digests, config checksums) is excluded below: a credential in
# base64 mixes upper case, lower case and digits.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")


def leaks(text: str) -> list[str]:
    """What in ``text`` looks like a credential: a name for each finding, with the offending snippet."""
    found = [f"{name}: {match.group(0)[:60]!r}" for name, pattern in _LEAK_PATTERNS.items() for match in pattern.finditer(text)]
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0)
        if not (re.search(r"[A-Z]", run) and re.search(r"[a-z]", run) and re.search(r"[0-9]", run)):
            continue
        try:
            decoded = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        inner = leaks(decoded.decode("utf-8", errors="replace")) if decoded else []
        found.append(f"base64 blob ({len(decoded)} bytes{', holding ' + inner[0] if inner else ''}): {run[:40]!r}...")
    return found


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def file_leaks(path: Path) -> list[str]:
    """Leaks in a plan file, read as text and, for JSON and YAML, string by string (JSON escapes newlines)."""
    text = path.read_text(encoding="utf-8")
    document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    found = leaks(text) + [leak for string in _strings(document) for leak in leaks(string)]
    return sorted(set(found))


def _credential_values(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if str(key).lower() in CREDENTIAL_KEYS:
                yield where, item
            yield from _credential_values(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _credential_values(item, f"{path}[{index}]")


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_no_plan_file_holds_a_credential(stack: str) -> None:
    plan = planned(stack)
    files = plan.files()
    assert plan.out_dir / "resources.json" in files
    found = {str(path.relative_to(plan.out_dir)): leaks for path in files if (leaks := file_leaks(path))}
    assert found == {}


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_the_kubeconfig_the_cluster_returns_appears_nowhere(stack: str) -> None:
    """The mock engine hands the program a real-shaped kubeconfig (aks_gpu.mock_engine.fake_kubeconfig): neither it,
    nor its base64 form, nor any of its distinctive lines may reach a plan file."""
    plan = planned(stack)
    kubeconfig = fake_kubeconfig(plan.config.cluster.name)
    needles = [kubeconfig, base64.b64encode(kubeconfig.encode()).decode()[:48]]
    needles += [line.strip() for line in kubeconfig.splitlines() if len(line.strip()) > 20]
    for path in plan.files():
        text = path.read_text(encoding="utf-8")
        # JSON escapes newlines, so the strings are searched as well as the text.
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        strings = "\n".join(_strings(document))
        for needle in needles:
            assert needle not in text and needle not in strings, f"{path.name} holds {needle[:40]!r}"


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_credentials_are_secret_outputs(stack: str) -> None:
    plan = planned(stack)
    assert plan.outputs["kubeconfig"] == SECRET
    providers = [r for r in plan.resources if r["type"] == "pulumi:providers:kubernetes"]
    assert providers, "the Kubernetes provider is built from the cluster's kubeconfig"
    for provider in providers:
        assert provider["inputs"]["kubeconfig"] == SECRET
    exposed = [
        f"{r['name']}: {where}"
        for r in plan.resources
        for where, value in _credential_values(r["inputs"])
        if value not in (SECRET, None) and not isinstance(value, (dict, list))
    ]
    exposed += [f"output {where}" for where, value in _credential_values(plan.outputs) if value not in (SECRET, None)]
    assert exposed == []
    for secret in plan.of_kind("Secret"):
        values = {**secret.get("data", {}), **secret.get("stringData", {})}
        assert all(value == SECRET for value in values.values()), secret["metadata"]["name"]


def test_the_leak_scanner_finds_planted_credentials() -> None:
    kubeconfig = fake_kubeconfig("aks-x")
    assert any(leak.startswith("kubeconfig") for leak in leaks(kubeconfig))
    assert any("holding kubeconfig" in leak for leak in leaks(json.dumps({"v": base64.b64encode(kubeconfig.encode()).decode()})))
    assert leaks("-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----")
    assert leaks("token: eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2ln")
    assert leaks(base64.b64encode(os.urandom(48)).decode().replace("+", "A").replace("/", "B") + "Aa1")
    # Hex digests and config checksums are not credentials.
    assert leaks("sha256:" + "0123456789abcdef" * 4) == []
    assert leaks("nvcr.io/nvidia/k8s-device-plugin:v0.20.0 app.kubernetes.io/managed-by") == []


# ---------------------------------------------------------------- the cluster's identity and network defaults


def _clusters(plan: PlannedStack) -> list[dict[str, Any]]:
    return [r for r in plan.resources if r["type"] == "azure-native:containerservice:ManagedCluster"]


def _assert_entra_only(cluster: dict[str, Any]) -> None:
    inputs = cluster["inputs"]
    assert inputs["disableLocalAccounts"] is True, "local accounts must be off: no static admin kubeconfig"
    assert inputs["aadProfile"]["managed"] is True and inputs["aadProfile"]["enableAzureRBAC"] is True
    assert inputs["enableRBAC"] is True


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_clusters_have_local_accounts_off_and_entra_rbac_on(stack: str) -> None:
    plan = planned(stack)
    clusters = _clusters(plan)
    assert len(clusters) == (0 if plan.config.cluster.existing else 1)
    for cluster in clusters:
        _assert_entra_only(cluster)


def test_local_accounts_are_off_by_default(harness: MockHarness) -> None:
    result = harness.run_stack("defaults", config=minimal_raw())
    (cluster,) = [r for r in result.resources if r.type == "azure-native:containerservice:ManagedCluster"]
    _assert_entra_only({"inputs": cluster.inputs})


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_network_policies_have_an_engine_to_enforce_them(stack: str) -> None:
    plan = planned(stack)
    if not plan.config.workloads:
        return
    for cluster in _clusters(plan):
        assert cluster["inputs"]["networkProfile"].get("networkPolicy") in {"azure", "calico", "cilium"}


# ---------------------------------------------------------------- nothing beyond Pod Security baseline, unless listed

# Pod Security "baseline" lets a container add only these capabilities.
# https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline (Capabilities)
BASELINE_CAPABILITIES = frozenset(
    {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID",
     "SETPCAP", "SETUID", "SYS_CHROOT"}
)  # fmt: skip

# (namespace, container name, what it needs beyond baseline) -> why the vendor agent needs it.
PRIVILEGE_ALLOWLIST: dict[tuple[str, str, str], str] = {
    (GPU_NAMESPACE, NVIDIA_PLUGIN_CONTAINER, f"hostPath {KUBELET_DEVICE_PLUGINS}"):
        "a device plugin registers with the kubelet through a socket in this directory",
    (GPU_NAMESPACE, NVIDIA_PLUGIN_CONTAINER, "capability SYS_ADMIN"):
        "MIG pools only: the MIG monitor device of the NVIDIA container toolkit requires CAP_SYS_ADMIN",
    (GPU_NAMESPACE, AMD_PLUGIN_CONTAINER, f"hostPath {KUBELET_DEVICE_PLUGINS}"):
        "a device plugin registers with the kubelet through a socket in this directory",
    (GPU_NAMESPACE, AMD_PLUGIN_CONTAINER, "hostPath /sys"):
        "the ROCm plugin finds the GPUs in sysfs (mounted read-only)",
    (GPU_NAMESPACE, AMD_LABELLER_NAME, "privileged"):
        "the ROCm node labeller opens the GPU device nodes to read their properties, as upstream runs it",
    (GPU_NAMESPACE, AMD_LABELLER_NAME, "hostPath /sys"): "the node labeller reads GPU properties from sysfs",
    (GPU_NAMESPACE, AMD_LABELLER_NAME, "hostPath /dev"): "the node labeller opens /dev/kfd and the render nodes",
    (GPU_NAMESPACE, AMD_SMI_CONTAINER, "privileged"):
        "amd-smi opens /dev/kfd and every GPU's render node without being allocated a GPU",
    (GPU_NAMESPACE, DCGM_EXPORTER_NAME, f"hostPath {POD_RESOURCES_DIR}"):
        "the DCGM exporter maps GPUs to the pods they are allocated to through the kubelet's pod-resources socket",
    (GPU_NAMESPACE, DCGM_EXPORTER_NAME, "capability SYS_ADMIN"):
        "DCGM's profiling metrics (DCGM_FI_PROF_*, the idle rule on MIG slices) need it, as NVIDIA's manifest says",
    (GPU_NAMESPACE, AMD_EXPORTER_NAME, "privileged"):
        "the ROCm metrics exporter opens /dev/kfd and every GPU's render node without being allocated one, as upstream runs it",
    (GPU_NAMESPACE, AMD_EXPORTER_NAME, "hostPath /dev"): "the ROCm metrics exporter opens the GPU device nodes",
    (GPU_NAMESPACE, AMD_EXPORTER_NAME, "hostPath /sys"): "the ROCm metrics exporter reads GPU state from sysfs (read-only)",
    (GPU_NAMESPACE, AMD_EXPORTER_NAME, f"hostPath {POD_RESOURCES_DIR}"):
        "the ROCm metrics exporter maps GPUs to pods through the kubelet's pod-resources socket",
}  # fmt: skip


@dataclass(frozen=True)
class Elevation:
    file: str
    namespace: str
    container: str
    need: str


def pod_specs(value: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec in an object, wherever the kind keeps it (Pod, templates, CronJob's job template...)."""
    if isinstance(value, dict):
        if isinstance(value.get("containers"), list):
            yield value
        for item in value.values():
            yield from pod_specs(item)
    elif isinstance(value, list):
        for item in value:
            yield from pod_specs(item)


def elevations(file_name: str, manifest: Manifest) -> list[Elevation]:
    """What each container gets beyond Pod Security baseline: privileged, extra capabilities, host namespaces,
    host ports and hostPath volumes."""
    namespace = manifest.get("metadata", {}).get("namespace", "")
    found = []
    for spec in pod_specs(manifest):
        host_paths = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
        pod_needs = [need for need in ("hostNetwork", "hostPID", "hostIPC") if spec.get(need)]
        containers = spec.get("containers", []) + spec.get("initContainers", []) + spec.get("ephemeralContainers", [])
        for container in containers:
            context = container.get("securityContext") or {}
            needs = list(pod_needs)
            if context.get("privileged"):
                needs.append("privileged")
            added = set((context.get("capabilities") or {}).get("add", [])) - BASELINE_CAPABILITIES
            needs += [f"capability {cap}" for cap in sorted(added)]
            needs += [f"hostPort {p['hostPort']}" for p in container.get("ports", []) if p.get("hostPort")]
            needs += [f"hostPath {host_paths[m['name']]}" for m in container.get("volumeMounts", []) if m["name"] in host_paths]
            found += [Elevation(file_name, namespace, container["name"], need) for need in needs]
    return found


def _all_elevations() -> dict[str, list[Elevation]]:
    return {
        stack: [e for name, manifest in planned(stack).manifests.items() for e in elevations(name, manifest)]
        for stack in STACK_NAMES
    }


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_no_container_gets_more_than_baseline_unless_allowlisted(stack: str) -> None:
    unexpected = [e for e in _all_elevations()[stack] if (e.namespace, e.container, e.need) not in PRIVILEGE_ALLOWLIST]
    assert unexpected == []


def test_every_allowlist_entry_is_still_needed() -> None:
    used = {(e.namespace, e.container, e.need) for found in _all_elevations().values() for e in found}
    assert sorted(set(PRIVILEGE_ALLOWLIST) - used) == []


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_elevated_pods_run_only_in_namespaces_that_admit_them(stack: str) -> None:
    """Pod Security would refuse them elsewhere: the namespace we render for them must enforce ``privileged``."""
    plan = planned(stack)
    levels = {ns["metadata"]["name"]: ns["metadata"].get("labels", {}).get(PSA_ENFORCE) for ns in plan.of_kind("Namespace")}
    workload_namespaces = {w.name for w in plan.config.workloads}
    for elevation in _all_elevations()[stack]:
        assert elevation.namespace not in workload_namespaces, elevation
        if elevation.namespace in levels:
            assert levels[elevation.namespace] == "privileged", elevation


def test_elevations_are_found() -> None:
    pod = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "x", "namespace": "n"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "hostPID": True,
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [{
                "name": "c",
                "image": "i",
                "securityContext": {"privileged": True, "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}},
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "volumeMounts": [{"name": "root", "mountPath": "/host"}],
            }],
        }}}}},
    }  # fmt: skip
    needs = {e.need for e in elevations("cronjob.yaml", pod)}
    assert needs == {"hostPID", "privileged", "capability NET_ADMIN", "hostPort 80", "hostPath /"}


# ---------------------------------------------------------------- workload namespaces: fenced and labelled

PSA_PREFIX = "pod-security.kubernetes.io"
PSA_ENFORCE = f"{PSA_PREFIX}/enforce"
PSA_LEVELS = {"privileged", "baseline", "restricted"}
# The article's name for the namespace's deny-all policy.
DENY_ALL_POLICY = "deny-cross-namespace"


def _namespaced(plan: PlannedStack, kind: str, namespace: str) -> list[Manifest]:
    return [m for m in plan.of_kind(kind) if m["metadata"].get("namespace") == namespace]


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_namespace_carries_pod_security_labels(stack: str) -> None:
    plan = planned(stack)
    assert plan.of_kind("Namespace"), f"stack {stack} renders no namespace"
    for namespace in plan.of_kind("Namespace"):
        labels = namespace["metadata"].get("labels", {})
        assert labels.get(PSA_ENFORCE) in PSA_LEVELS, namespace["metadata"]["name"]
        for mode in ("warn", "audit"):
            level = labels.get(f"{PSA_PREFIX}/{mode}")
            assert level is None or level in PSA_LEVELS


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_workload_namespace_is_fenced(stack: str) -> None:
    """Per entry of ``aks-gpu:workloads``: its Namespace enforces the configured Pod Security level, a
    NetworkPolicy ``deny-cross-namespace`` isolates every pod both ways, and a ResourceQuota caps the GPU
    resource its pools expose at ``gpuQuota`` (plus what it may borrow, with queueing)."""
    plan = planned(stack)
    namespaces = {ns["metadata"]["name"]: ns for ns in plan.of_kind("Namespace")}
    model = resolve(plan.config)
    ceilings = gpu_ceilings(model)
    for workload in model.workloads:
        name = workload.name
        assert name in namespaces, f"workload namespace {name} is not rendered"
        labels = namespaces[name]["metadata"].get("labels", {})
        assert labels.get(PSA_ENFORCE) == workload.config.pod_security, name
        assert {labels.get(f"{PSA_PREFIX}/warn"), labels.get(f"{PSA_PREFIX}/audit")} <= PSA_LEVELS, name

        policies = {p["metadata"]["name"]: p for p in _namespaced(plan, "NetworkPolicy", name)}
        assert DENY_ALL_POLICY in policies, f"{name} has no NetworkPolicy {DENY_ALL_POLICY}"
        spec = policies[DENY_ALL_POLICY]["spec"]
        assert spec["podSelector"] == {} and set(spec["policyTypes"]) == {"Ingress", "Egress"}
        assert not spec.get("ingress") and not spec.get("egress"), f"{name}: the deny-all policy allows something"

        assert workload.quota_key is not None
        quotas = _namespaced(plan, "ResourceQuota", name)
        hard = [q["spec"]["hard"].get(workload.quota_key) for q in quotas]
        # With queueing the quota is the ceiling of what Kueue may admit: gpuQuota plus what the team may borrow.
        ceiling = ceilings.get(name, workload.config.gpu_quota)
        assert str(ceiling) in hard, f"{name} has no quota {workload.quota_key}={ceiling}"


# ---------------------------------------------------------------- checkov

CHECKOV_CONFIG = PROJECT_DIR / ".checkov.yaml"
_SKIP_LINE = re.compile(r"^\s*-\s*(?P<check>CKV2?_[A-Z0-9_]+)\s*#\s*(?P<reason>\S.*)$")


def checkov_executable() -> str | None:
    """``$AKSGPU_CHECKOV``, else the Makefile's ``.venv-checkov``, else ``checkov`` on PATH. checkov pins
    ``packaging<24`` and cannot share a virtualenv with pulumi (``packaging>=26``), hence its own."""
    configured = os.environ.get("AKSGPU_CHECKOV")
    if configured:
        return configured
    local = PROJECT_DIR / ".venv-checkov" / "bin" / "checkov"
    if local.is_file():
        return str(local)
    return shutil.which("checkov")


def allowed_checks() -> dict[str, str]:
    """``.checkov.yaml``'s skip-check list as checkov reads it, each with the reason on its line."""
    listed = yaml.safe_load(CHECKOV_CONFIG.read_text(encoding="utf-8")).get("skip-check", [])
    reasons = {}
    for line in CHECKOV_CONFIG.read_text(encoding="utf-8").splitlines():
        match = _SKIP_LINE.match(line)
        if match:
            reasons[match["check"]] = match["reason"].strip()
    missing = sorted(set(listed) - set(reasons))
    assert missing == [], f".checkov.yaml: give each skipped check a reason on its line: {missing}"
    return {check: reasons[check] for check in listed}


@dataclass(frozen=True)
class CheckovRun:
    summary: dict[str, Any]
    failed: list[tuple[str, str, str]]  # check id, resource, file (relative to the scanned folder, "/"-rooted)


def run_checkov(executable: str, directory: Path, *extra: str) -> CheckovRun:
    command = [executable, "--directory", str(directory), "--framework", "kubernetes", "--output", "json", "--skip-download"]
    env = {**os.environ, "LOG_LEVEL": "ERROR"}
    # checkov reads .checkov.yaml from its working directory by itself: run it where there is none, so the
    # unfiltered run sees every check and the config applies only when passed on purpose.
    done = subprocess.run([*command, *extra], capture_output=True, text=True, env=env, cwd=directory, timeout=600, check=False)
    assert done.returncode in (0, 1), f"checkov failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return parse_checkov(done.stdout)


def parse_checkov(stdout: str) -> CheckovRun:
    """checkov's JSON: one report object per framework (a list when there are several), or a bare summary
    when it found nothing to scan."""
    data = json.loads(stdout)
    reports = data if isinstance(data, list) else [data]
    summary: dict[str, Any] = {}
    failed = []
    for report in reports:
        summary = report.get("summary", report)
        for check in report.get("results", {}).get("failed_checks", []):
            failed.append((check["check_id"], check["resource"], check["file_path"]))
    return CheckovRun(summary, sorted(failed))


# A pod checkov must fault (privileged, in the default namespace): scanned with the stacks so that a runner
# or parser that sees no failures cannot pass by accident.
CONTROL_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "control", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
}


@dataclass(frozen=True)
class CheckovScans:
    stacks: CheckovRun  # every stack's manifests, no skips, plus the control pod under /control/
    with_config: CheckovRun  # every stack's manifests with --config-file .checkov.yaml
    manifest_count: int


@pytest.fixture(scope="module")
def checkov_scans(tmp_path_factory: pytest.TempPathFactory) -> CheckovScans:
    executable = checkov_executable()
    if executable is None:
        pytest.fail("checkov is not installed: `make checkov-venv` (requirements-checkov.txt), or set AKSGPU_CHECKOV")
    root = tmp_path_factory.mktemp("checkov")
    for stack in STACK_NAMES:
        shutil.copytree(planned(stack).out_dir / "manifests", root / "stacks" / stack)
    (root / "control").mkdir()
    (root / "control" / "pod.yaml").write_text(yaml.safe_dump(CONTROL_POD), encoding="utf-8")
    with ThreadPoolExecutor(max_workers=2) as pool:
        unfiltered = pool.submit(run_checkov, executable, root)
        configured = pool.submit(run_checkov, executable, root / "stacks", "--config-file", str(CHECKOV_CONFIG))
        scans = CheckovScans(unfiltered.result(), configured.result(), sum(len(planned(s).manifests) for s in STACK_NAMES))
    return scans


def _stack_failures(run: CheckovRun) -> list[tuple[str, str, str]]:
    return [failure for failure in run.failed if failure[2].startswith("/stacks/")]


def test_checkov_finds_nothing_beyond_the_listed_checks(checkov_scans: CheckovScans) -> None:
    allowed = allowed_checks()
    assert checkov_scans.manifest_count > 0, "no stack renders manifests to scan"
    summary = checkov_scans.stacks.summary
    assert summary["parsing_errors"] == 0
    assert summary["resource_count"] >= checkov_scans.manifest_count + 1, "checkov did not read every manifest"
    unexpected = [failure for failure in _stack_failures(checkov_scans.stacks) if failure[0] not in allowed]
    assert unexpected == []


def test_every_listed_check_still_fails_somewhere(checkov_scans: CheckovScans) -> None:
    """A check that passes everywhere comes off the list, so the list stays the honest set of exceptions."""
    failing = {failure[0] for failure in _stack_failures(checkov_scans.stacks)}
    assert sorted(set(allowed_checks()) - failing) == []


def test_checkov_with_the_project_config_passes(checkov_scans: CheckovScans) -> None:
    """What a user runs: ``checkov --config-file .checkov.yaml -d build/<stack>/manifests``."""
    assert checkov_scans.with_config.failed == []
    assert checkov_scans.with_config.summary["passed"] > 0


def test_checkov_reports_the_control_pod(checkov_scans: CheckovScans) -> None:
    control = {check for check, _, file in checkov_scans.stacks.failed if file.startswith("/control/")}
    assert {"CKV_K8S_16", "CKV_K8S_21"} <= control  # privileged; default namespace
