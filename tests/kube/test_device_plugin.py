"""GpuDevicePlugin: the device plugin lands on every GPU node and only there, says what each pool exposes, and
renders manifests Kubernetes 1.32-1.34 accept."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components.config import validate_config
from components.kube.device_plugin import GpuDevicePlugin, GpuDevicePluginArgs, plugin_manifests
from components.kube.gpu_operator import operator_releases
from components.kube.nvidia_plugin import plugin_config as nvidia_plugin_config
from components.kube.operator_labels import operator_node_labels
from components.kube.plugin_pins import PINS_FILE, resolve_pins
from components.kube.plugin_targets import NAMESPACE, plugin_targets
from components.model import PlatformModel, ResolvedPool, Taint, resolve
from components.plan import PlanResult
from tests.conftest import PROJECT_DIR, STACK_NAMES, MockHarness, minimal_raw, raw_stack, stack_config, stack_model

PINS = yaml.safe_load(PINS_FILE.read_text(encoding="utf-8"))
SYSTEM_NODE_LABELS = {"kubernetes.azure.com/mode": "system", "agentpool": "system", "kubernetes.io/os": "linux"}
# The AKS walkthrough's DaemonSet tolerates this; the best-practices taint is nvidia.com/gpu.
WALKTHROUGH_TOLERATION = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


# ---------------------------------------------------------------- helpers: Kubernetes scheduling semantics


def tolerates(toleration: dict[str, str], taint: Taint) -> bool:
    """Does ``toleration`` tolerate ``taint``, as the scheduler decides it."""
    if toleration.get("effect") and toleration["effect"] != taint.effect:
        return False
    operator = toleration.get("operator", "Equal")
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration["key"] != taint.key:
        return False
    return operator == "Exists" or toleration.get("value", "") == taint.value


def affinity_selects(affinity: dict[str, Any], labels: dict[str, str]) -> bool:
    """Does a required node affinity accept a node with ``labels`` (terms ORed, expressions ANDed)."""
    required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]

    def matches(expression: dict[str, Any]) -> bool:
        value, operator = labels.get(expression["key"]), expression["operator"]
        if operator == "In":
            return value in expression["values"]
        if operator == "NotIn":
            return value not in expression["values"]
        if operator == "Exists":
            return value is not None
        if operator == "DoesNotExist":
            return value is None
        raise AssertionError(f"unexpected operator {operator}")

    return any(all(matches(e) for e in term["matchExpressions"]) for term in required["nodeSelectorTerms"])


def node_labels(pool: ResolvedPool) -> dict[str, str]:
    """What a node of the pool carries: the pool's labels plus what AKS adds."""
    return {**pool.node_labels, "agentpool": pool.name, "kubernetes.azure.com/mode": "user", "kubernetes.io/os": "linux"}


def model_of(raw: dict[str, Any]) -> PlatformModel:
    return resolve(validate_config(raw, "test").config)


def with_plugin(stack: str, **device_plugin: Any) -> PlatformModel:
    raw = raw_stack(stack)
    raw["aks-gpu:devicePlugin"] = {**(raw.get("aks-gpu:devicePlugin") or {}), **device_plugin}
    return model_of(raw)


def daemonsets(model: PlatformModel) -> list[dict[str, Any]]:
    return [m for m in plugin_manifests(model) if m["kind"] == "DaemonSet"]


def daemonset(model: PlatformModel, name: str) -> dict[str, Any]:
    return next(d for d in daemonsets(model) if d["metadata"]["name"] == name)


def pod_spec(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def landing_on(model: PlatformModel, pool: ResolvedPool) -> list[dict[str, Any]]:
    return [d for d in daemonsets(model) if affinity_selects(pod_spec(d)["affinity"], node_labels(pool))]


def plugin_config(model: PlatformModel, pool: str) -> dict[str, Any]:
    config_map = next(m for m in plugin_manifests(model) if m["kind"] == "ConfigMap")
    config: dict[str, Any] = yaml.safe_load(config_map["data"][f"{pool}.yaml"])
    return config


def mixed_fleet() -> PlatformModel:
    """An extra user taint on one pool, a spot pool, an AMD pool: every kind of taint a GPU pool carries."""
    return model_of(
        minimal_raw(
            **{
                "aks-gpu:gpuPools": [
                    {
                        "name": "shared",
                        "vendor": "nvidia",
                        "vmSize": "Standard_NC4as_T4_v3",
                        "workload": "research",
                        "taints": ["team=research:NoSchedule", "maintenance=true:NoExecute"],
                    },
                    {
                        "name": "cheap",
                        "vendor": "nvidia",
                        "vmSize": "Standard_NC24ads_A100_v4",
                        "workload": "batch",
                        "spot": True,
                    },
                    {"name": "amd", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "training"},
                ],
                "aks-gpu:workloads": [],
            }
        )
    )


def run_component(harness: MockHarness, model: PlatformModel) -> tuple[PlanResult, GpuDevicePlugin]:
    built: list[GpuDevicePlugin] = []

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        component = GpuDevicePlugin("gpu", GpuDevicePluginArgs(model=model), pulumi.ResourceOptions(provider=provider))
        built.append(component)
        pulumi.export("targets", component.targets)

    return harness.run(program), built[0]


def release_values(result: PlanResult, release: str) -> dict[str, Any]:
    record = next(r for r in result.by_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == release)
    values: dict[str, Any] = record.inputs["values"]
    return values


# ---------------------------------------------------------------- placement


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_gpu_pool_gets_exactly_one_plugin_of_its_vendor(stack: str) -> None:
    model = stack_model(stack)
    images = {"nvidia": PINS["nvidia"]["device_plugin_image"], "amd": PINS["amd"]["device_plugin_image"]}
    for pool in model.pools:
        plugins = [d for d in landing_on(model, pool) if pod_spec(d)["containers"][0]["image"] == images[pool.vendor]]
        assert len(plugins) == 1, f"{stack}/{pool.name}: {[d['metadata']['name'] for d in plugins]}"
    deployed = {c["image"] for d in daemonsets(model) for c in pod_spec(d)["containers"]}
    assert {vendor for vendor, image in images.items() if image in deployed} == set(model.vendors)


def test_plugins_tolerate_every_taint_of_every_gpu_pool() -> None:
    model = mixed_fleet()
    taints = {pool.name: pool.taints for pool in model.pools}
    assert any(t.key == "team" for t in taints["shared"]) and any(t.key.endswith("scalesetpriority") for t in taints["cheap"])
    for pool in model.pools:
        on_pool = landing_on(model, pool)
        assert on_pool, pool.name
        for manifest in on_pool:
            tolerations = pod_spec(manifest)["tolerations"]
            for taint in pool.taints:
                assert any(tolerates(t, taint) for t in tolerations), f"{manifest['metadata']['name']} does not tolerate {taint}"


def test_a_hard_coded_walkthrough_toleration_would_leave_the_gpus_unschedulable() -> None:
    pool = stack_model("prod").pool("train")
    assert not any(tolerates(WALKTHROUGH_TOLERATION, taint) for taint in pool.taints)
    manifest = daemonset(stack_model("prod"), "nvidia-device-plugin-train")
    assert WALKTHROUGH_TOLERATION not in pod_spec(manifest)["tolerations"]


@pytest.mark.parametrize("stack", [*STACK_NAMES, "mixed"])
def test_affinity_selects_gpu_pools_only(stack: str) -> None:
    model = mixed_fleet() if stack == "mixed" else stack_model(stack)
    for manifest in daemonsets(model):
        affinity = pod_spec(manifest)["affinity"]
        assert not affinity_selects(affinity, SYSTEM_NODE_LABELS), manifest["metadata"]["name"]
        assert any(affinity_selects(affinity, node_labels(pool)) for pool in model.pools)
        # A pool's plugin and probe land on that pool alone; the AMD labeller on every AMD pool alone.
        selected = {pool.vendor for pool in model.pools if affinity_selects(affinity, node_labels(pool))}
        assert len(selected) == 1, manifest["metadata"]["name"]


# ---------------------------------------------------------------- the NVIDIA plugin


def test_nvidia_daemonset_is_a_hardened_node_critical_plugin() -> None:
    manifest = daemonset(stack_model("prod"), "nvidia-device-plugin-train")
    assert manifest["metadata"]["namespace"] == NAMESPACE == "gpu-resources"
    assert manifest["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    spec = pod_spec(manifest)
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["image"] == PINS["nvidia"]["device_plugin_image"] and ":latest" not in container["image"]
    assert container["image"].startswith("nvcr.io/nvidia/k8s-device-plugin:v")
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]["requests"]) == set(container["resources"]["limits"]) == {"cpu", "memory"}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert host_paths == {"device-plugins": "/var/lib/kubelet/device-plugins"}
    assert mounts["device-plugins"] == "/var/lib/kubelet/device-plugins"


def test_namespace_admits_host_path_plugins() -> None:
    namespace = plugin_manifests(stack_model("dev"))[0]
    assert namespace["kind"] == "Namespace" and namespace["metadata"]["name"] == NAMESPACE
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_mig_pool_gets_the_stack_strategy_and_the_mig_monitor_only_there() -> None:
    model = stack_model("prod")
    assert plugin_config(model, "infer")["flags"]["migStrategy"] == model.mig_strategy == "single"
    assert plugin_config(model, "train")["flags"]["migStrategy"] == "none"
    infer = pod_spec(daemonset(model, "nvidia-device-plugin-infer"))["containers"][0]
    train = pod_spec(daemonset(model, "nvidia-device-plugin-train"))["containers"][0]
    assert {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"} in infer["env"]
    assert infer["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert all(e["name"] != "NVIDIA_MIG_MONITOR_DEVICES" for e in train["env"])


def test_azure_linux_mig_pool_sets_the_mig_monitor() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"osSku": "AzureLinux", "migProfile": "MIG2g"}
    container = pod_spec(daemonsets(model_of(raw))[0])["containers"][0]
    assert {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"} in container["env"]


def test_mixed_strategy_reaches_the_config_and_the_targets() -> None:
    model = with_plugin("prod", migStrategy="mixed")
    assert plugin_config(model, "infer")["flags"]["migStrategy"] == "mixed"
    target = plugin_targets(model)["infer"]
    assert (target.resource_name, target.count_per_node, target.mig_strategy) == ("nvidia.com/mig-1g.10gb", 7, "mixed")
    assert plugin_targets(model)["train"].mig_strategy is None


def test_time_slicing_goes_into_the_config_and_the_count() -> None:
    model = stack_model("dev")
    sharing = plugin_config(model, "dev")["sharing"]["timeSlicing"]["resources"]
    assert sharing == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert plugin_targets(model)["dev"].count_per_node == 4


def test_stack_time_slicing_shares_whole_gpu_pools_but_not_mig_pools() -> None:
    model = with_plugin("prod", timeSlicingReplicas=2)
    assert plugin_config(model, "train")["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]
    assert "sharing" not in plugin_config(model, "infer")
    targets = plugin_targets(model)
    assert (targets["train"].count_per_node, targets["infer"].count_per_node) == (16, 7)


def test_a_config_change_rolls_only_that_pools_plugin_pods() -> None:
    def checksums(model: PlatformModel) -> dict[str, str]:
        return {
            d["metadata"]["name"]: d["spec"]["template"]["metadata"]["annotations"]["aks-gpu/plugin-config-sha256"]
            for d in daemonsets(model)
        }

    before, again = checksums(stack_model("prod")), checksums(stack_model("prod"))
    raw = raw_stack("prod")
    raw["aks-gpu:gpuPools"][0]["timeSlicingReplicas"] = 2
    after = checksums(model_of(raw))
    assert before == again
    assert before["nvidia-device-plugin-train"] != after["nvidia-device-plugin-train"]
    assert before["nvidia-device-plugin-infer"] == after["nvidia-device-plugin-infer"]


def test_stack_overrides_the_plugin_image() -> None:
    model = with_plugin("dev", nvidiaImage="myacr.azurecr.io/nvidia/k8s-device-plugin:v0.20.0")
    assert pod_spec(daemonsets(model)[0])["containers"][0]["image"] == "myacr.azurecr.io/nvidia/k8s-device-plugin:v0.20.0"


# ---------------------------------------------------------------- targets


def test_targets_select_each_pools_plugin_pods() -> None:
    model = stack_model("prod")
    for name, target in plugin_targets(model).items():
        (manifest,) = [d for d in daemonsets(model) if d["spec"]["selector"]["matchLabels"] == target.pod_labels]
        assert manifest["spec"]["template"]["metadata"]["labels"].items() >= target.pod_labels.items()
        assert target.container in {c["name"] for c in pod_spec(manifest)["containers"]}
        assert target.smi_command == ["nvidia-smi"] and target.namespace == manifest["metadata"]["namespace"]
        assert (target.resource_name, target.count_per_node) == (
            model.pool(name).resource.name,
            model.pool(name).resource.count_per_node,
        )


def test_plugin_targets_import_without_pulumi() -> None:
    code = "import sys, components.kube.plugin_targets; sys.exit('pulumi' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, check=False).returncode == 0


def test_component_registers_the_manifests_with_the_cluster_provider_and_exports_targets(harness: MockHarness) -> None:
    model = stack_model("prod")
    result, component = run_component(harness, model)
    expected = {
        f"{m['kind'].lower()}-{m['metadata'].get('namespace', '_')}-{m['metadata']['name']}.yaml": m
        for m in plugin_manifests(model)
    }
    assert {k: v for k, v in result.manifests().items() if k in expected} == expected
    kube = [
        r for r in result.resources if r.custom and r.type.startswith("kubernetes:") and r.type != "pulumi:providers:kubernetes"
    ]
    assert kube and all(r.options["provider"] == "k8s-id" for r in kube)
    assert component.namespace == NAMESPACE and len(component.daemonsets) == 2 and component.releases == []
    assert result.outputs["targets"] == {pool: t.to_output() for pool, t in plugin_targets(model).items()}
    assert result.outputs["targets"]["infer"]["countPerNode"] == 7


# ---------------------------------------------------------------- GPU Operator mode


def test_nvidia_gpu_operator_release_replaces_the_daemonset(harness: MockHarness) -> None:
    model = with_plugin("prod", mode="gpu-operator")
    result, component = run_component(harness, model)
    assert not [d for d in daemonsets(model) if "nvidia" in d["metadata"]["name"]]
    (record,) = result.by_type("kubernetes:helm.sh/v3:Release")
    chart = PINS["nvidia"]["gpu_operator"]
    assert record.inputs["chart"] == chart["chart"] == "gpu-operator"
    assert record.inputs["repositoryOpts"]["repo"] == chart["repo"] == "https://helm.ngc.nvidia.com/nvidia"
    assert record.inputs["version"] == chart["version"] and record.inputs["namespace"] == NAMESPACE
    assert len(component.releases) == 1
    values = record.inputs["values"]
    # The model leaves the driver to the operator in this mode (gpuProfile.driver None on every pool).
    assert {p.gpu_driver for p in model.pools} == {"None"}
    assert values["driver"]["enabled"] is True and values["toolkit"]["enabled"] is True
    assert values["migManager"]["enabled"] is True and values["migManager"]["config"]["default"] == ""
    assert values["dcgmExporter"]["enabled"] is True and values["mig"]["strategy"] == "single"
    assert {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"} in values["operator"]["tolerations"]
    for pool in model.pools:
        for taint in pool.taints:
            assert any(tolerates(t, taint) for t in values["daemonsets"]["tolerations"])
            assert any(tolerates(t, taint) for t in values["node-feature-discovery"]["worker"]["tolerations"])
    target = plugin_targets(model)["infer"]
    assert (target.pod_labels, target.container) == ({"app": "nvidia-device-plugin-daemonset"}, "nvidia-device-plugin")
    assert target.node_selector == {"aks-gpu/pool": "infer"} and target.mode == "gpu-operator"


def test_gpu_operator_leaves_an_aks_installed_driver_alone() -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:devicePlugin"] = {"mode": "gpu-operator"}
    for pool in raw["aks-gpu:gpuPools"]:
        pool["gpuDriver"] = "Install"
    (release,) = operator_releases(model_of(raw), resolve_pins(model_of(raw).config.device_plugin))
    assert release.values["driver"]["enabled"] is False and release.values["toolkit"]["enabled"] is False


def test_gpu_operator_time_slicing_default_is_the_pools_common_config() -> None:
    model = with_plugin("dev", mode="gpu-operator")
    (release,) = operator_releases(model, resolve_pins(model.config.device_plugin))
    config = release.values["devicePlugin"]["config"]
    assert config["create"] is True and config["default"] in config["data"]
    default = yaml.safe_load(config["data"][config["default"]])
    assert default["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert yaml.safe_load(config["data"]["dev"]) == default


def test_stack_overrides_the_operator_chart_version() -> None:
    model = with_plugin("prod", mode="gpu-operator", gpuOperatorChartVersion="v26.3.3")
    (release,) = operator_releases(model, resolve_pins(model.config.device_plugin))
    assert release.chart.version == "v26.3.3"


# ---------------------------------------------------------------- AMD


def test_amd_daemonset_mode_runs_rocm_plugin_labeller_and_smi_probe() -> None:
    model = stack_model("amd")
    names = {d["metadata"]["name"] for d in daemonsets(model)}
    assert names == {"amdgpu-device-plugin-mi300x", "amdgpu-node-labeller", "amd-smi-mi300x"}
    plugin = pod_spec(daemonset(model, "amdgpu-device-plugin-mi300x"))["containers"][0]
    assert plugin["image"] == PINS["amd"]["device_plugin_image"] and plugin["image"].startswith(
        "docker.io/rocm/k8s-device-plugin:"
    )
    assert (
        plugin["securityContext"]["readOnlyRootFilesystem"] is True
        and plugin["securityContext"]["allowPrivilegeEscalation"] is False
    )
    labeller = pod_spec(daemonset(model, "amdgpu-node-labeller"))
    assert labeller["containers"][0]["image"] == PINS["amd"]["node_labeller_image"]
    assert "labeller-" in labeller["containers"][0]["image"]
    assert labeller["serviceAccountName"] == "amdgpu-node-labeller" and labeller["automountServiceAccountToken"] is True
    role = next(m for m in plugin_manifests(model) if m["kind"] == "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch"]}]
    probe = pod_spec(daemonset(model, "amd-smi-mi300x"))["containers"][0]
    assert probe["image"] == model.config.validation.smoke_job.amd_image
    target = plugin_targets(model)["mi300x"]
    assert (target.container, target.smi_command) == ("amd-smi", ["amd-smi", "static", "--json"])
    assert target.pod_labels == daemonset(model, "amd-smi-mi300x")["spec"]["selector"]["matchLabels"]
    assert (target.resource_name, target.count_per_node, target.mig_strategy) == ("amd.com/gpu", 8, None)
    assert model.pool("mi300x").gpu_driver == "None"


def test_amd_smi_probe_exists_only_while_validation_runs() -> None:
    raw = raw_stack("amd")
    raw["aks-gpu:validation"] = {"onDeploy": "off"}
    model = model_of(raw)
    assert "amd-smi-mi300x" not in {d["metadata"]["name"] for d in daemonsets(model)}
    assert plugin_targets(model)["mi300x"].container == "amdgpu-device-plugin"


def test_amd_gpu_operator_release_installs_the_driver_on_amd_pools(harness: MockHarness) -> None:
    model = with_plugin("amd", amdMode="gpu-operator")
    assert {d["metadata"]["name"] for d in daemonsets(model)} == {"amd-smi-mi300x"}
    result, _ = run_component(harness, model)
    (record,) = result.by_type("kubernetes:helm.sh/v3:Release")
    chart = PINS["amd"]["gpu_operator"]
    assert (record.inputs["chart"], record.inputs["repositoryOpts"]["repo"]) == (
        chart["chart"],
        "https://rocm.github.io/gpu-operator",
    )
    spec = record.inputs["values"]["deviceConfig"]["spec"]
    fleet = mixed_fleet()
    assert all((spec["selector"].items() <= node_labels(p).items()) == (p.vendor == "amd") for p in fleet.pools)
    assert spec["driver"]["enable"] is True and spec["devicePlugin"]["enableNodeLabeller"] is True
    assert record.inputs["values"]["node-feature-discovery"]["enabled"] is True
    for taint in model.pool("mi300x").taints:
        for key in ("devicePluginTolerations", "nodeLabellerTolerations"):
            assert any(tolerates(t, taint) for t in spec["devicePlugin"][key])


def test_one_nfd_serves_both_operators(harness: MockHarness) -> None:
    fleet = minimal_raw(
        **{
            "aks-gpu:gpuPools": [
                {
                    "name": "nv",
                    "vendor": "nvidia",
                    "vmSize": "Standard_NC24ads_A100_v4",
                    "workload": "a",
                    "taints": ["x=y:NoSchedule"],
                },
                {"name": "amd", "vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5", "workload": "b", "spot": True},
            ],
            "aks-gpu:workloads": [],
            "aks-gpu:devicePlugin": {"mode": "gpu-operator", "amdMode": "gpu-operator"},
        }
    )
    model = model_of(fleet)
    result, _ = run_component(harness, model)
    nvidia, amd = release_values(result, "gpu-operator"), release_values(result, "amd-gpu-operator")
    assert amd["node-feature-discovery"]["enabled"] is False
    workers = nvidia["node-feature-discovery"]["worker"]["tolerations"]
    for taint in model.pool("amd").taints:
        assert any(tolerates(t, taint) for t in workers), taint
    records = {r.inputs["name"]: r for r in result.by_type("kubernetes:helm.sh/v3:Release")}
    assert records["gpu-operator"].urn in records["amd-gpu-operator"].options["dependsOn"]


# ---------------------------------------------------------------- rendered manifests


STACK_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    **{stack: (stack, {}) for stack in STACK_NAMES},
    "prod-operator": ("prod", {"mode": "gpu-operator"}),
    "prod-mixed": ("prod", {"migStrategy": "mixed", "timeSlicingReplicas": 3}),
    "amd-operator": ("amd", {"amdMode": "gpu-operator"}),
}


@pytest.mark.parametrize("variant", sorted(STACK_VARIANTS))
@pytest.mark.parametrize("kubernetes", ["1.32.0", "1.33.0", "1.34.0"])
def test_rendered_manifests_are_valid_kubernetes(variant: str, kubernetes: str, harness: MockHarness) -> None:
    validator = pytest.importorskip("kubernetes_validate")
    stack, overrides = STACK_VARIANTS[variant]
    model = with_plugin(stack, **overrides) if overrides else stack_model(stack)
    result, _ = run_component(harness, model)
    manifests = result.manifests()
    assert manifests
    for file_name, manifest in manifests.items():
        assert manifest["metadata"]["name"], file_name
        validator.validate(manifest, kubernetes, strict=True)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_manifests_are_deterministic_and_plain_yaml(stack: str) -> None:
    first, second = plugin_manifests(stack_model(stack)), plugin_manifests(stack_model(stack))
    assert first == second
    text = yaml.safe_dump_all(first, sort_keys=True)
    assert "&id" not in text and "*id" not in text


def test_no_gpu_pools_no_plugin() -> None:
    model = model_of(minimal_raw(**{"aks-gpu:gpuPools": [], "aks-gpu:workloads": []}))
    assert plugin_manifests(model) == [] and plugin_targets(model) == {}


def test_plugins_wait_for_what_the_component_depends_on(harness: MockHarness) -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        pool = k8s.core.v1.Namespace(
            "stand-in-for-a-node-pool", metadata={"name": "x"}, opts=pulumi.ResourceOptions(provider=provider)
        )
        opts = pulumi.ResourceOptions(provider=provider, depends_on=[pool])
        GpuDevicePlugin("gpu", GpuDevicePluginArgs(model=with_plugin("prod", mode="gpu-operator")), opts)

    result = harness.run(program)
    pool_urn = next(r.urn for r in result.resources if r.name == "stand-in-for-a-node-pool")
    children = [
        r
        for r in result.resources
        if r.type in ("kubernetes:helm.sh/v3:Release", "kubernetes:core/v1:Namespace") and r.urn != pool_urn
    ]
    assert children and all(pool_urn in r.options["dependsOn"] for r in children)


def test_operator_node_labels_point_each_pool_at_its_config_and_keep_aks_drivers() -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:devicePlugin"] = {"mode": "gpu-operator"}
    raw["aks-gpu:gpuPools"][0]["gpuDriver"] = "Install"
    config = validate_config(raw, "test").config
    model = resolve(config)
    (release,) = operator_releases(model, resolve_pins(config.device_plugin))
    data = release.values["devicePlugin"]["config"]["data"]
    train, infer = (operator_node_labels(pool, config) for pool in config.gpu_pools)
    assert yaml.safe_load(data[train["nvidia.com/device-plugin.config"]]) == plugin_config_of(model, "train")
    assert yaml.safe_load(data[infer["nvidia.com/device-plugin.config"]])["flags"]["migStrategy"] == "single"
    # AKS installs train's driver: the operator's driver and toolkit stay off it, and on for infer.
    assert train["nvidia.com/gpu.deploy.driver"] == train["nvidia.com/gpu.deploy.container-toolkit"] == "false"
    assert "nvidia.com/gpu.deploy.driver" not in infer and release.values["driver"]["enabled"] is True
    assert all(operator_node_labels(pool, stack_config("prod")) == {} for pool in stack_config("prod").gpu_pools)
    assert all(operator_node_labels(pool, stack_config("amd")) == {} for pool in stack_config("amd").gpu_pools)


def plugin_config_of(model: PlatformModel, pool: str) -> dict[str, Any]:
    return nvidia_plugin_config(model.pool(pool), model)
