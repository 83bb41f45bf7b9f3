"""GpuDevicePlugin: one plugin DaemonSet per vendor lands on every GPU node of that vendor and only there, gives
each node its own pool's plugin config, says what each pool exposes, and renders manifests that every Kubernetes
minor AKS supports today accepts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import kubernetes_validate
import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from aks_gpu.config.models import DevicePluginConfig
from aks_gpu.config.problems import ConfigError
from aks_gpu.kube.device_plugin import plugin_manifests, target_output
from aks_gpu.kube.gpu_operator import NVIDIA_RELEASE, operator_releases
from aks_gpu.kube.nvidia_plugin import plugin_config as nvidia_plugin_config
from aks_gpu.kube.plugin_pins import PINS_FILE, plugin_health_checks, resolve_pins
from aks_gpu.manifests import labelled
from aks_gpu.mock_engine import PlanResult
from aks_gpu.monitoring.exporters import dcgm_operator_values
from aks_gpu.naming import GPU_NAMESPACE, POOL_LABEL
from aks_gpu.platform.device_plugin import GpuDevicePlugin, GpuDevicePluginArgs
from aks_gpu.resolved.model import PlatformModel, ResolvedPool, Taint, resolve
from aks_gpu.resolved.node_labels import plugin_node_labels
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.resolved.targets import plugin_targets
from tests.conftest import (
    AKS_VERSIONS,
    PROJECT_DIR,
    STACK_NAMES,
    MockHarness,
    minimal_raw,
    platform_sections,
    raw_stack,
    stack_config,
    stack_model,
)

PINS = yaml.safe_load(PINS_FILE.read_text(encoding="utf-8"))
SYSTEM_NODE_LABELS = {"kubernetes.azure.com/mode": "system", "agentpool": "system", "kubernetes.io/os": "linux"}
# The AKS walkthrough's DaemonSet tolerates this; the best-practices taint is nvidia.com/gpu.
WALKTHROUGH_TOLERATION = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
NVIDIA_DS = "nvidia-device-plugin-daemonset"
AMD_DS = "amdgpu-device-plugin-daemonset"
PLUGIN_CONTAINER = "nvidia-device-plugin-ctr"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
AGENT_POOL = "azure-native:containerservice:AgentPool"


# ---------------------------------------------------------------- helpers: Kubernetes scheduling semantics


# What amdMode gpu-operator needs besides (config/rules/pools.py refuses it without).
AMD_OPERATOR = {"amdMode": "gpu-operator", "certManagerInstalled": True, "amdDriverImage": "myregistry.azurecr.io/amdgpu-driver"}


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
    return validate_stack(raw, "test").model


def raw_with_plugin(stack: str, device_plugin: dict[str, Any]) -> dict[str, Any]:
    raw = raw_stack(stack)
    raw["aks-gpu:devicePlugin"] = {**(raw.get("aks-gpu:devicePlugin") or {}), **device_plugin}
    return raw


def with_plugin(stack: str, **device_plugin: Any) -> PlatformModel:
    return model_of(raw_with_plugin(stack, device_plugin))


def prod_mixed(**device_plugin: Any) -> PlatformModel:
    """prod under the mixed strategy. Its infer pool then exposes nvidia.com/mig-1g.10gb and inferfull whole
    nvidia.com/gpu: a namespace's quota meters one resource, so the config rules ask gpu-inference to name one pool
    (here the MIG one)."""
    raw = raw_with_plugin("prod", {"migStrategy": "mixed", **device_plugin})
    (inference,) = [workload for workload in raw["aks-gpu:workloads"] if workload["name"] == "gpu-inference"]
    inference["pool"] = "infer"
    return model_of(raw)


def daemonsets(model: PlatformModel) -> list[dict[str, Any]]:
    return [m for m in plugin_manifests(model) if m["kind"] == "DaemonSet"]


def daemonset(model: PlatformModel, name: str) -> dict[str, Any]:
    return next(d for d in daemonsets(model) if d["metadata"]["name"] == name)


def pod_spec(manifest: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def container(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    spec = pod_spec(manifest)
    return next(c for c in spec["containers"] + spec.get("initContainers", []) if c["name"] == name)


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def landing_on(model: PlatformModel, pool: ResolvedPool) -> list[dict[str, Any]]:
    return [d for d in daemonsets(model) if affinity_selects(pod_spec(d)["affinity"], node_labels(pool))]


def node_config(manifests: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, Any]:
    """The config file the NVIDIA plugin on a node with ``labels`` runs with, found as the pod finds it: the
    config-manager reads its NODE_LABEL on the node and links that file of the directory where the ConfigMap is
    mounted to CONFIG_FILE_DST, in a volume the plugin container reads as its CONFIG_FILE."""
    (plugin_ds,) = [
        d
        for d in manifests
        if d["kind"] == "DaemonSet"
        and affinity_selects(pod_spec(d)["affinity"], labels)
        and any(c["name"] == PLUGIN_CONTAINER for c in pod_spec(d)["containers"])
    ]
    spec = pod_spec(plugin_ds)
    (init,) = spec["initContainers"]
    env = env_of(init)
    assert env["ONESHOT"] == "true" and env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}

    def volume_at(container: dict[str, Any], path: str) -> str:
        return next(str(m["name"]) for m in container["volumeMounts"] if m["mountPath"] == path)

    source_dir, destination = env["CONFIG_FILE_SRCDIR"], env["CONFIG_FILE_DST"]
    plugin = container(plugin_ds, PLUGIN_CONTAINER)
    directory, file_name = destination.rsplit("/", 1)
    # The plugin reads the file the config-manager writes (a shared volume), and the symlink's target resolves
    # in the plugin container too (the ConfigMap at the same path).
    assert env_of(plugin)["CONFIG_FILE"] == destination and file_name
    assert volume_at(plugin, directory) == volume_at(init, directory)
    assert volume_at(plugin, source_dir) == volume_at(init, source_dir)
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[volume_at(init, directory)]
    config_map_name = volumes[volume_at(init, source_dir)]["configMap"]["name"]
    (config_map,) = [m for m in manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"] == config_map_name]
    name = labels.get(env["NODE_LABEL"])
    if name is None and "single" in env["FALLBACK_STRATEGIES"].split(",") and len(config_map["data"]) == 1:
        (name,) = config_map["data"]
    assert name in config_map["data"], f"no config {name!r} for a node labelled {labels}"
    config: dict[str, Any] = yaml.safe_load(config_map["data"][name])
    return config


def plugin_config(model: PlatformModel, pool: str) -> dict[str, Any]:
    """The config file the plugin on a node of ``pool`` runs with."""
    return node_config(plugin_manifests(model), node_labels(model.pool(pool)))


def checksum(model: PlatformModel) -> str:
    return str(daemonset(model, NVIDIA_DS)["spec"]["template"]["metadata"]["annotations"]["aks-gpu/plugin-config-sha256"])


def mixed_fleet() -> PlatformModel:
    """Extra user taints on one pool, a spot pool, two AMD pools (one spot, one with its own taint): every kind
    of taint a GPU pool carries, spread over the pools one DaemonSet per vendor serves."""
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
                    {
                        "name": "amdspot",
                        "vendor": "amd",
                        "vmSize": "Standard_ND96isr_MI300X_v5",
                        "workload": "tuning",
                        "spot": True,
                        "taints": ["lab=rocm:NoSchedule"],
                    },
                ],
                "aks-gpu:workloads": [],
            }
        )
    )


def run_component(harness: MockHarness, model: PlatformModel) -> tuple[PlanResult, GpuDevicePlugin]:
    built: list[GpuDevicePlugin] = []

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        component = GpuDevicePlugin(
            "gpu", cast(GpuDevicePluginArgs, platform_sections(model.config)), pulumi.ResourceOptions(provider=provider)
        )
        built.append(component)
        pulumi.export("targets", component.targets)
        pulumi.export("namespace", component.namespace)

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


def test_the_amd_plugin_deployed_exits_when_no_amdgpu_driver_is_loaded() -> None:
    """The ROCm plugin and labeller are the tags of amd-gpu chart 0.21.0 (appVersion 1.31.0.9), the first to exit
    with code 2 when the amdgpu driver is not loaded (ROCm/k8s-device-plugin 75910e92, device_plugins.yaml): an older
    plugin runs on such a node and advertises no GPU, so the node looks healthy and stays empty."""
    model = mixed_fleet()
    images = {c["image"] for d in daemonsets(model) for c in pod_spec(d)["containers"]}
    amd = sorted(image for image in images if image.startswith("docker.io/rocm/k8s-device-plugin:"))
    assert amd, images
    for image in amd:
        tag = image.rsplit(":", 1)[1].removeprefix("labeller-")
        assert tuple(int(part) for part in tag.split(".")) >= (1, 31, 0, 9), image


@pytest.mark.parametrize("stack", [*STACK_NAMES, "mixed"])
def test_one_plugin_daemonset_per_vendor_named_as_the_contract_says(stack: str) -> None:
    model = mixed_fleet() if stack == "mixed" else stack_model(stack)
    names = [d["metadata"]["name"] for d in daemonsets(model)]
    assert len(names) == len(set(names))
    assert names.count(NVIDIA_DS) == (1 if model.pools_of("nvidia") else 0)
    assert names.count(AMD_DS) == (1 if model.pools_of("amd") else 0)
    # No DaemonSet is a pool's own: none carries a pool's name.
    assert not [n for n in names for pool in model.pools if n.endswith(f"-{pool.name}")]


def test_plugins_tolerate_every_taint_of_every_pool_of_their_vendor() -> None:
    model = mixed_fleet()
    taints = {pool.name: pool.taints for pool in model.pools}
    assert any(t.key == "team" for t in taints["shared"]) and any(t.key.endswith("scalesetpriority") for t in taints["cheap"])
    assert any(t.key == "lab" for t in taints["amdspot"])
    for name, vendor in ((NVIDIA_DS, "nvidia"), (AMD_DS, "amd"), ("amdgpu-node-labeller", "amd"), ("amd-smi", "amd")):
        tolerations = pod_spec(daemonset(model, name))["tolerations"]
        for pool in model.pools_of(vendor):  # type: ignore[arg-type]
            for taint in pool.taints:
                assert any(tolerates(t, taint) for t in tolerations), f"{name} does not tolerate {taint} of {pool.name}"
    for pool in model.pools:
        assert landing_on(model, pool), pool.name


def test_tolerations_follow_the_pools_taints() -> None:
    """Derived from the model, never written by hand: a taint added to a pool reaches the one DaemonSet."""
    raw = raw_stack("prod")
    raw["aks-gpu:gpuPools"][1]["taints"] = ["dedicated=inference:NoExecute"]
    tolerations = pod_spec(daemonset(model_of(raw), NVIDIA_DS))["tolerations"]
    assert any(tolerates(t, Taint("dedicated", "inference", "NoExecute")) for t in tolerations)
    before = pod_spec(daemonset(stack_model("prod"), NVIDIA_DS))["tolerations"]
    assert not any(tolerates(t, Taint("dedicated", "inference", "NoExecute")) for t in before)


def test_a_hard_coded_walkthrough_toleration_would_leave_the_gpus_unschedulable() -> None:
    pool = stack_model("prod").pool("train")
    assert not any(tolerates(WALKTHROUGH_TOLERATION, taint) for taint in pool.taints)
    manifest = daemonset(stack_model("prod"), NVIDIA_DS)
    assert WALKTHROUGH_TOLERATION not in pod_spec(manifest)["tolerations"]


@pytest.mark.parametrize("stack", [*STACK_NAMES, "mixed"])
def test_affinity_selects_gpu_pools_of_one_vendor_only(stack: str) -> None:
    model = mixed_fleet() if stack == "mixed" else stack_model(stack)
    for manifest in daemonsets(model):
        affinity = pod_spec(manifest)["affinity"]
        assert not affinity_selects(affinity, SYSTEM_NODE_LABELS), manifest["metadata"]["name"]
        selected = {pool.name for pool in model.pools if affinity_selects(affinity, node_labels(pool))}
        # Every pool of one vendor, none of the other: each agent serves all pools of its vendor.
        (vendor,) = {model.pool(name).vendor for name in selected}
        assert selected == {pool.name for pool in model.pools_of(vendor)}, manifest["metadata"]["name"]


# ---------------------------------------------------------------- the NVIDIA plugin


def test_nvidia_daemonset_is_a_hardened_node_critical_plugin() -> None:
    manifest = daemonset(stack_model("prod"), NVIDIA_DS)
    assert manifest["metadata"]["namespace"] == GPU_NAMESPACE == "gpu-resources"
    assert manifest["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    spec = pod_spec(manifest)
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    plugin = spec["containers"][0]
    assert plugin["name"] == PLUGIN_CONTAINER
    assert plugin["image"] == PINS["nvidia"]["device_plugin_image"] and ":latest" not in plugin["image"]
    assert plugin["image"].startswith("nvcr.io/nvidia/k8s-device-plugin:v")
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in plugin["volumeMounts"]}
    assert host_paths == {"device-plugins": "/var/lib/kubelet/device-plugins"}
    assert mounts["device-plugins"] == "/var/lib/kubelet/device-plugins"
    for each in spec["containers"] + spec["initContainers"]:
        security = each["securityContext"]
        assert security["allowPrivilegeEscalation"] is False, each["name"]
        assert security["capabilities"]["drop"] == ["ALL"], each["name"]
        assert set(each["resources"]["requests"]) == set(each["resources"]["limits"]) == {"cpu", "memory"}
        assert each["image"] == plugin["image"], "the config-manager ships in the plugin image"
    # Only the plugin may touch the host's device-plugins directory.
    assert [c["name"] for c in spec["containers"] + spec["initContainers"] if "device-plugins" in str(c["volumeMounts"])] == [
        PLUGIN_CONTAINER
    ]


def test_namespace_admits_host_path_plugins() -> None:
    namespace = plugin_manifests(stack_model("dev"))[0]
    assert namespace["kind"] == "Namespace" and namespace["metadata"]["name"] == GPU_NAMESPACE
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_config_manager_reads_its_node_with_a_token_only_it_gets() -> None:
    model = stack_model("prod")
    manifests = plugin_manifests(model)
    spec = pod_spec(daemonset(model, NVIDIA_DS))
    account = spec["serviceAccountName"]
    assert any(m["kind"] == "ServiceAccount" and m["metadata"] == {**m["metadata"], "name": account, "namespace": GPU_NAMESPACE}
               for m in manifests)  # fmt: skip
    subject = {"kind": "ServiceAccount", "name": account, "namespace": GPU_NAMESPACE}
    (binding,) = [m for m in manifests if m["kind"] == "ClusterRoleBinding" and subject in m["subjects"]]
    (role,) = [m for m in manifests if m["kind"] == "ClusterRole" and m["metadata"]["name"] == binding["roleRef"]["name"]]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    # No token for the plugin (root, SYS_ADMIN on MIG stacks); the config-manager containers mount one.
    assert spec["automountServiceAccountToken"] is False
    token_volumes = {
        v["name"] for v in spec["volumes"] if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))
    }
    with_token = {
        c["name"] for c in spec["containers"] + spec["initContainers"]
        if any(m["name"] in token_volumes and m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
               for m in c["volumeMounts"])
    }  # fmt: skip
    assert with_token == {c["name"] for c in spec["containers"] + spec["initContainers"]} - {PLUGIN_CONTAINER}
    assert len(with_token) == 2


def test_sidecar_follows_the_node_label_and_signals_the_plugin() -> None:
    model = stack_model("prod")
    manifest = daemonset(model, NVIDIA_DS)
    spec = pod_spec(manifest)
    (sidecar,) = [c for c in spec["containers"] if c["name"] != PLUGIN_CONTAINER]
    (init,) = spec["initContainers"]
    env, init_env = env_of(sidecar), env_of(init)
    assert sidecar["command"] == init["command"] == ["config-manager"]
    assert (env["ONESHOT"], env["SEND_SIGNAL"], env["SIGNAL"]) == ("false", "true", "1")
    assert init_env["SEND_SIGNAL"] == "false"
    # It signals the plugin by process name, which it sees only in a shared process namespace.
    assert env["PROCESS_TO_SIGNAL"] == container(manifest, PLUGIN_CONTAINER)["command"][0]
    assert spec["shareProcessNamespace"] is True
    for key in ("NODE_LABEL", "CONFIG_FILE_SRCDIR", "CONFIG_FILE_DST", "DEFAULT_CONFIG", "FALLBACK_STRATEGIES", "NODE_NAME"):
        assert env[key] == init_env[key], key
    assert env["NODE_LABEL"] == CONFIG_LABEL
    # Neither config-manager container asks the NVIDIA runtime for GPUs.
    assert env["NVIDIA_VISIBLE_DEVICES"] == init_env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert manifest["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/default-container"] == PLUGIN_CONTAINER


@pytest.mark.parametrize("stack", [*STACK_NAMES, "mixed"])
def test_every_nvidia_node_runs_its_own_pools_config(stack: str) -> None:
    model = mixed_fleet() if stack == "mixed" else stack_model(stack)
    for pool in model.pools_of("nvidia"):
        assert node_labels(pool)[CONFIG_LABEL] == pool.name
        assert plugin_config(model, pool.name) == nvidia_plugin_config(pool, model)


def test_a_node_without_the_label_runs_the_only_config_or_none() -> None:
    dev = stack_model("dev")
    unlabelled = {k: v for k, v in node_labels(dev.pool("dev")).items() if k != CONFIG_LABEL}
    assert node_config(plugin_manifests(dev), unlabelled) == plugin_config(dev, "dev")
    prod = stack_model("prod")
    unlabelled = {k: v for k, v in node_labels(prod.pool("train")).items() if k != CONFIG_LABEL}
    with pytest.raises(AssertionError, match="no config None"):
        node_config(plugin_manifests(prod), unlabelled)


def test_mig_pool_gets_the_stack_strategy_and_the_daemonset_the_mig_monitor() -> None:
    model = stack_model("prod")
    assert plugin_config(model, "infer")["flags"]["migStrategy"] == model.mig_strategy == "single"
    assert plugin_config(model, "train")["flags"]["migStrategy"] == "none"
    plugin = container(daemonset(model, NVIDIA_DS), PLUGIN_CONTAINER)
    assert {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"} in plugin["env"]
    assert plugin["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}


def test_a_stack_without_mig_gets_neither_the_mig_monitor_nor_sys_admin() -> None:
    plugin = container(daemonset(stack_model("dev"), NVIDIA_DS), PLUGIN_CONTAINER)
    assert all(e["name"] != "NVIDIA_MIG_MONITOR_DEVICES" for e in plugin["env"])
    assert plugin["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_azure_linux_mig_pool_sets_the_mig_monitor() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"osSku": "AzureLinux", "migProfile": "MIG2g"}
    plugin = container(daemonset(model_of(raw), NVIDIA_DS), PLUGIN_CONTAINER)
    assert {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"} in plugin["env"]


def test_mixed_strategy_reaches_the_config_and_the_targets() -> None:
    with pytest.raises(ConfigError, match=r"the pools of type 'inference' expose different resources .*name one pool"):
        with_plugin("prod", migStrategy="mixed")
    model = prod_mixed()
    assert plugin_config(model, "infer")["flags"]["migStrategy"] == "mixed"
    target = plugin_targets(model)["infer"]
    assert (target.resource_name, target.count_per_node, target.mig_strategy) == ("nvidia.com/mig-1g.10gb", 7, "mixed")
    assert plugin_targets(model)["train"].mig_strategy is None
    # Whole H100s without MIG: nvidia.com/gpu under either strategy.
    whole = plugin_targets(model)["inferfull"]
    assert (whole.resource_name, whole.count_per_node, whole.mig_strategy) == ("nvidia.com/gpu", 8, None)


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


def test_a_mig_pool_and_a_time_sliced_pool_get_different_files_through_their_agent_pools(harness: MockHarness) -> None:
    """The whole program: the node labels AKS puts on each pool's nodes pick that pool's file in the ConfigMap."""
    raw = raw_stack("prod")
    raw["aks-gpu:gpuPools"][0]["timeSlicingReplicas"] = 2
    result = harness.run_stack("prod", config=raw)
    manifests = list(result.manifests().values())
    assert [m["metadata"]["name"] for m in manifests if m["kind"] == "DaemonSet" and "nvidia" in m["metadata"]["name"]] == [
        NVIDIA_DS
    ]
    labels = {r.inputs["agentPoolName"]: r.inputs["nodeLabels"] for r in result.by_type(AGENT_POOL)}
    assert labels["train"][CONFIG_LABEL] != labels["infer"][CONFIG_LABEL]
    train, infer = node_config(manifests, labels["train"]), node_config(manifests, labels["infer"])
    assert train["flags"]["migStrategy"] == "none"
    assert train["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]
    assert infer["flags"]["migStrategy"] == "single" and "sharing" not in infer


def test_a_config_change_rolls_the_plugin_pods() -> None:
    before, again = checksum(stack_model("prod")), checksum(stack_model("prod"))
    raw = raw_stack("prod")
    raw["aks-gpu:gpuPools"][0]["timeSlicingReplicas"] = 2
    assert before == again
    assert checksum(model_of(raw)) != before
    # A change that leaves every config file as it is (here a pool's size) rolls nothing.
    raw = raw_stack("prod")
    raw["aks-gpu:gpuPools"][0]["maxCount"] = 5
    assert checksum(model_of(raw)) == before


def test_stack_overrides_the_plugin_image() -> None:
    image = "myacr.azurecr.io/nvidia/k8s-device-plugin:v0.20.0"
    spec = pod_spec(daemonset(with_plugin("dev", nvidiaImage=image), NVIDIA_DS))
    assert {c["image"] for c in spec["containers"] + spec["initContainers"]} == {image}


def test_nvidia_pools_carry_their_config_label_in_both_modes() -> None:
    for mode in ("daemonset", "gpu-operator"):
        raw = raw_stack("prod")
        raw["aks-gpu:devicePlugin"] = {"mode": mode}
        config = validate_stack(raw, "test").config
        for pool in config.gpu_pools:
            assert plugin_node_labels(pool, config)[CONFIG_LABEL] == pool.name
            assert resolve(config).pool(pool.name).node_labels[CONFIG_LABEL] == pool.name
    assert all(plugin_node_labels(pool, stack_config("amd")) == {} for pool in stack_config("amd").gpu_pools)
    assert all(CONFIG_LABEL not in pool.node_labels for pool in stack_model("amd").pools)


# ---------------------------------------------------------------- targets


@pytest.mark.parametrize("stack", [*STACK_NAMES, "mixed"])
def test_targets_select_the_plugin_pods_on_each_pools_nodes(stack: str) -> None:
    model = mixed_fleet() if stack == "mixed" else stack_model(stack)
    for name, target in plugin_targets(model).items():
        pool = model.pool(name)
        (manifest,) = [d for d in daemonsets(model) if d["spec"]["selector"]["matchLabels"] == target.pod_labels]
        assert manifest["spec"]["template"]["metadata"]["labels"].items() >= target.pod_labels.items()
        assert target.container in {c["name"] for c in pod_spec(manifest)["containers"]}
        assert target.namespace == manifest["metadata"]["namespace"]
        assert affinity_selects(pod_spec(manifest)["affinity"], node_labels(pool))
        # The pods are shared by the vendor's pools: the node selector narrows them to this pool's nodes alone.
        assert [p.name for p in model.pools if node_labels(p).items() >= target.node_selector.items()] == [name]
        assert target.node_selector == {POOL_LABEL: name}
        assert (target.resource_name, target.count_per_node) == (pool.resource.name, pool.resource.count_per_node)
        amd = ["sh", "-c", "amd-smi static --json; amd-smi metric --ecc --json"]
        assert target.smi_command == (["nvidia-smi", "-q", "-x"] if pool.vendor == "nvidia" else amd)


def test_plugin_targets_import_without_pulumi() -> None:
    code = "import sys, aks_gpu.resolved.targets; sys.exit('pulumi' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, check=False).returncode == 0


def test_component_registers_the_manifests_with_the_cluster_provider_and_exports_targets(harness: MockHarness) -> None:
    model = stack_model("prod")
    result, component = run_component(harness, model)
    expected = {
        f"{m['kind'].lower()}-{m['metadata'].get('namespace', '_')}-{m['metadata']['name']}.yaml": labelled(m)
        for m in plugin_manifests(model)
    }
    assert {k: v for k, v in result.manifests().items() if k in expected} == expected
    kube = [
        r for r in result.resources if r.custom and r.type.startswith("kubernetes:") and r.type != "pulumi:providers:kubernetes"
    ]
    assert kube and all(r.options["provider"] == "k8s-id" for r in kube)
    assert result.outputs["namespace"] == GPU_NAMESPACE and len(component.daemonsets) == 1 and component.releases == []
    assert result.outputs["targets"] == {pool: target_output(t) for pool, t in plugin_targets(model).items()}
    assert result.outputs["targets"]["infer"]["countPerNode"] == 7
    # The DaemonSet waits for its ConfigMap and its service account's RBAC.
    (ds,) = result.by_type("kubernetes:apps/v1:DaemonSet")
    waits_for = {r.type for r in result.resources if r.urn in ds.options["dependsOn"]}
    assert {"kubernetes:core/v1:ConfigMap", "kubernetes:core/v1:ServiceAccount",
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"} <= waits_for  # fmt: skip


# ---------------------------------------------------------------- GPU Operator mode


def test_nvidia_gpu_operator_release_replaces_the_daemonset(harness: MockHarness) -> None:
    model = with_plugin("prod", mode="gpu-operator")
    result, component = run_component(harness, model)
    assert not [d for d in daemonsets(model) if "nvidia" in d["metadata"]["name"]]
    (record,) = result.by_type("kubernetes:helm.sh/v3:Release")
    chart = PINS["nvidia"]["gpu_operator"]
    assert record.inputs["chart"] == chart["chart"] == "gpu-operator"
    assert record.inputs["repositoryOpts"]["repo"] == chart["repo"] == "https://helm.ngc.nvidia.com/nvidia"
    assert record.inputs["version"] == chart["version"] and record.inputs["namespace"] == GPU_NAMESPACE
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
    model = model_of(raw)
    (release,) = operator_releases(model, resolve_pins(model.config.device_plugin), dcgm_operator_values(model))
    assert release.values["driver"]["enabled"] is False and release.values["toolkit"]["enabled"] is False


def test_gpu_operator_time_slicing_default_is_the_pools_common_config() -> None:
    model = with_plugin("dev", mode="gpu-operator")
    (release,) = operator_releases(model, resolve_pins(model.config.device_plugin), dcgm_operator_values(model))
    config = release.values["devicePlugin"]["config"]
    assert config["create"] is True and config["default"] in config["data"]
    default = yaml.safe_load(config["data"][config["default"]])
    assert default["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert yaml.safe_load(config["data"]["dev"]) == default


def test_stack_overrides_the_operator_chart_version() -> None:
    model = with_plugin("prod", mode="gpu-operator", gpuOperatorChartVersion="v26.3.3")
    (release,) = operator_releases(model, resolve_pins(model.config.device_plugin), dcgm_operator_values(model))
    assert release.chart.version == "v26.3.3"


# ---------------------------------------------------------------- the plugin's own health checks stay on


def nvidia_plugin_envs(model: PlatformModel) -> list[list[dict[str, Any]]]:
    """Every env list the NVIDIA device plugin (and its config-manager) gets: our DaemonSet's containers, or the GPU
    Operator release's devicePlugin.env."""
    envs = []
    for manifest in daemonsets(model):
        if manifest["metadata"]["name"] == NVIDIA_DS:
            spec = pod_spec(manifest)
            envs += [c.get("env", []) for c in spec["containers"] + spec.get("initContainers", [])]
    for release in operator_releases(model, resolve_pins(model.config.device_plugin), dcgm_operator_values(model)):
        if release.name == NVIDIA_RELEASE:
            envs.append(release.values["devicePlugin"].get("env", []))
    return envs


def health_checks_turned_off(model: PlatformModel) -> list[str]:
    switch = plugin_health_checks().disable_env
    return [f"{e['name']}={e.get('value')!r}" for env in nvidia_plugin_envs(model) for e in env if e["name"] == switch]


def nvidia_variants() -> list[tuple[str, PlatformModel]]:
    """Every shipped stack with NVIDIA pools, in both plugin modes, with the AKS driver and with the operator's."""
    variants = []
    for stack in STACK_NAMES:
        raw = raw_stack(stack)
        if not any(pool.get("vendor", "nvidia") == "nvidia" for pool in raw["aks-gpu:gpuPools"]):
            continue
        variants.append((stack, model_of(raw)))
        variants.append((f"{stack} gpu-operator", with_plugin(stack, mode="gpu-operator")))
        operator_driver = raw_stack(stack)
        operator_driver["aks-gpu:devicePlugin"] = {**(operator_driver.get("aks-gpu:devicePlugin") or {}), "mode": "gpu-operator"}
        for pool in operator_driver["aks-gpu:gpuPools"]:
            pool["gpuDriver"] = "None"
        variants.append((f"{stack} gpu-operator driver None", model_of(operator_driver)))
    return variants


def test_no_stack_and_no_mode_turns_the_plugins_health_checks_off() -> None:
    # The plugin marks a GPU with a critical Xid unhealthy and the kubelet takes it out of allocatable
    # (components/aks_gpu/data/device_plugins.yaml, health_checks); DP_DISABLE_HEALTHCHECKS would turn that off.
    variants = nvidia_variants()
    assert {name.split()[0] for name, _ in variants} >= {"prod", "dev"}
    for name, model in variants:
        assert nvidia_plugin_envs(model), f"{name}: no NVIDIA plugin env found to check"
        assert health_checks_turned_off(model) == [], name


def test_the_health_check_guard_sees_the_switch_where_it_would_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from aks_gpu.kube import gpu_operator

    model = stack_model("prod")
    switched = [{"name": plugin_health_checks().disable_env, "value": "xids"}]
    monkeypatch.setattr(gpu_operator, "DEVICE_LIST_HARDENING", switched)
    operator = raw_stack("prod")
    operator["aks-gpu:devicePlugin"] = {"mode": "gpu-operator"}
    for pool in operator["aks-gpu:gpuPools"]:
        pool["gpuDriver"] = "None"
    assert health_checks_turned_off(model_of(operator)) == ["DP_DISABLE_HEALTHCHECKS='xids'"]
    manifest = daemonset(model, NVIDIA_DS)
    container(manifest, PLUGIN_CONTAINER)["env"].append(switched[0])
    monkeypatch.setattr(sys.modules[__name__], "daemonsets", lambda _model: [manifest])
    assert health_checks_turned_off(model) == ["DP_DISABLE_HEALTHCHECKS='xids'"]


def test_no_config_key_reaches_the_plugins_environment() -> None:
    # The stack can change the plugin's image and mode, never its env: no devicePlugin key takes an env list.
    fields = set(DevicePluginConfig.model_fields)
    assert not {f for f in fields if "env" in f.lower() or "health" in f.lower()}, fields


def test_the_runbook_names_the_xids_the_plugin_ignores() -> None:
    text = (PROJECT_DIR / "docs" / "remediation.md").read_text(encoding="utf-8")
    section = text.split("## What the device plugin already does", 1)[1].split("\n## ", 1)[0]
    checks = plugin_health_checks()
    assert checks.disable_env in section
    for xid in checks.ignored_xids:
        assert f"{xid}" in section, xid
    # Critical in our own table but ignored by the plugin: only the quarantine takes such a GPU out of service.
    from aks_gpu.gpu.xid import critical_xid_codes

    for xid in sorted(set(checks.ignored_xids) & set(critical_xid_codes())):
        assert f"Xid {xid}" in section, xid


# ---------------------------------------------------------------- AMD


def test_amd_daemonset_mode_runs_rocm_plugin_labeller_and_smi_probe() -> None:
    model = stack_model("amd")
    names = {d["metadata"]["name"] for d in daemonsets(model)}
    assert names == {AMD_DS, "amdgpu-node-labeller", "amd-smi"}
    plugin = pod_spec(daemonset(model, AMD_DS))["containers"][0]
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
    probe = pod_spec(daemonset(model, "amd-smi"))["containers"][0]
    assert probe["image"] == model.config.validation.smoke_job.amd_image
    target = plugin_targets(model)["mi300x"]
    probe_command = ["sh", "-c", "amd-smi static --json; amd-smi metric --ecc --json"]
    assert (target.container, target.smi_command) == ("amd-smi", probe_command)
    assert target.pod_labels == daemonset(model, "amd-smi")["spec"]["selector"]["matchLabels"]
    assert (target.resource_name, target.count_per_node, target.mig_strategy) == ("amd.com/gpu", 8, None)
    assert model.pool("mi300x").gpu_driver == "None"


def test_amd_smi_probe_exists_only_while_validation_runs() -> None:
    raw = raw_stack("amd")
    raw["aks-gpu:validation"] = {"onDeploy": "off"}
    model = model_of(raw)
    assert "amd-smi" not in {d["metadata"]["name"] for d in daemonsets(model)}
    assert plugin_targets(model)["mi300x"].container == "amdgpu-device-plugin"


def test_amd_gpu_operator_release_installs_the_driver_on_amd_pools(harness: MockHarness) -> None:
    model = with_plugin("amd", **AMD_OPERATOR)
    assert {d["metadata"]["name"] for d in daemonsets(model)} == {"amd-smi"}
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
    assert spec["driver"]["image"] == AMD_OPERATOR["amdDriverImage"]
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
            "aks-gpu:devicePlugin": {"mode": "gpu-operator", **AMD_OPERATOR},
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


STACK_VARIANTS: dict[str, Callable[[], PlatformModel]] = {
    **{stack: partial(stack_model, stack) for stack in STACK_NAMES},
    "prod-operator": partial(with_plugin, "prod", mode="gpu-operator"),
    "prod-mixed": partial(prod_mixed, timeSlicingReplicas=3),
    "amd-operator": partial(with_plugin, "amd", **AMD_OPERATOR),
}


@pytest.mark.parametrize("variant", sorted(STACK_VARIANTS))
@pytest.mark.parametrize("kubernetes", AKS_VERSIONS)
def test_rendered_manifests_are_valid_kubernetes(variant: str, kubernetes: str, harness: MockHarness) -> None:
    model = STACK_VARIANTS[variant]()
    result, _ = run_component(harness, model)
    manifests = result.manifests()
    assert manifests
    for file_name, manifest in manifests.items():
        assert manifest["metadata"]["name"], file_name
        kubernetes_validate.validate(manifest, kubernetes, strict=True)


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
        GpuDevicePlugin(
            "gpu", cast(GpuDevicePluginArgs, platform_sections(with_plugin("prod", mode="gpu-operator").config)), opts
        )

    result = harness.run(program)
    pool_urn = next(r.urn for r in result.resources if r.name == "stand-in-for-a-node-pool")
    children = [
        r
        for r in result.resources
        if r.type in ("kubernetes:helm.sh/v3:Release", "kubernetes:core/v1:Namespace") and r.urn != pool_urn
    ]
    assert children and all(pool_urn in r.options["dependsOn"] for r in children)


def test_operator_mode_labels_point_each_pool_at_its_config_and_keep_aks_drivers() -> None:
    raw = raw_stack("prod")
    raw["aks-gpu:devicePlugin"] = {"mode": "gpu-operator"}
    raw["aks-gpu:gpuPools"][0]["gpuDriver"] = "Install"
    config = validate_stack(raw, "test").config
    model = resolve(config)
    (release,) = operator_releases(model, resolve_pins(config.device_plugin), dcgm_operator_values(model))
    data = release.values["devicePlugin"]["config"]["data"]
    labels = {pool.name: plugin_node_labels(pool, config) for pool in config.gpu_pools}
    train, infer, inferfull = labels["train"], labels["infer"], labels["inferfull"]
    assert yaml.safe_load(data[train["nvidia.com/device-plugin.config"]]) == plugin_config_of(model, "train")
    assert yaml.safe_load(data[infer["nvidia.com/device-plugin.config"]])["flags"]["migStrategy"] == "single"
    assert yaml.safe_load(data[inferfull["nvidia.com/device-plugin.config"]]) == plugin_config_of(model, "inferfull")
    # AKS installs train's driver: the operator's driver and toolkit stay off it, and on for both inference pools.
    assert train["nvidia.com/gpu.deploy.driver"] == train["nvidia.com/gpu.deploy.container-toolkit"] == "false"
    assert "nvidia.com/gpu.deploy.driver" not in infer and release.values["driver"]["enabled"] is True
    assert "nvidia.com/gpu.deploy.driver" not in inferfull
    # Daemonset mode: the config label, and nvidia.com/gpu.present while NVSentinel runs (prod runs it: its kernel-log
    # monitor schedules on that label, components/aks_gpu/resolved/node_labels.py); the operator's deploy labels mean
    # nothing there.
    assert all(
        plugin_node_labels(pool, stack_config("prod")) == {CONFIG_LABEL: pool.name, "nvidia.com/gpu.present": "true"}
        for pool in stack_config("prod").gpu_pools
    )


def plugin_config_of(model: PlatformModel, pool: str) -> dict[str, Any]:
    return nvidia_plugin_config(model.pool(pool), model)


def test_amd_gpu_operator_mode_is_refused_without_cert_manager_and_a_driver_image() -> None:
    raw = raw_stack("amd")
    raw["aks-gpu:devicePlugin"] = {"amdMode": "gpu-operator"}
    with pytest.raises(ConfigError) as error:
        validate_stack(raw, "test")
    # The errors alone: the warnings that follow them are not this test's.
    paths = {problem.path for problem in error.value.problems if problem.severity == "error"}
    assert paths == {"aks-gpu:devicePlugin.certManagerInstalled", "aks-gpu:devicePlugin.amdDriverImage"}
    assert any("helm install cert-manager" in problem.message for problem in error.value.problems)


def test_time_sliced_pools_fail_requests_above_one_on_the_node() -> None:
    model = stack_model("dev")
    assert plugin_config(model, "dev")["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True


def test_volume_mounts_only_where_the_operator_owns_every_toolkit() -> None:
    from aks_gpu.kube.gpu_operator import nvidia_operator_values

    owned = with_plugin("prod", mode="gpu-operator")  # every NVIDIA pool gets gpuDriver None from the operator mode
    values = nvidia_operator_values(owned, dcgm_operator_values(owned))
    assert {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"} in values["devicePlugin"]["env"]
    assert {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"} in values["toolkit"]["env"]
    raw = raw_stack("prod")
    raw["aks-gpu:devicePlugin"] = {"mode": "gpu-operator"}
    raw["aks-gpu:gpuPools"][1]["gpuDriver"] = "Install"  # AKS keeps this pool's toolkit: volume mounts would starve it
    mixed = nvidia_operator_values(model_of(raw), dcgm_operator_values(model_of(raw)))
    assert "env" not in mixed["devicePlugin"] and "env" not in mixed["toolkit"]
