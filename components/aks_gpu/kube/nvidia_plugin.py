"""The NVIDIA device plugin as plain manifests (devicePlugin.mode: daemonset). Pure: model in, dicts out.

One DaemonSet, ``nvidia-device-plugin-daemonset``, on every NVIDIA pool, although pools differ in what the
plugin's config file must say (a MIG pool exposes its slices under the stack's MIG strategy and is never
time-sliced; a shared pool time-slices with its own replica count). It is done as NVIDIA's Helm chart does
per-node configs (https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml):

- the ConfigMap ``nvidia-device-plugin-config`` holds one config file per pool, keyed by pool name;
- every node of a pool carries ``nvidia.com/device-plugin.config=<pool>`` (``plugin_node_labels``, set through
  the agent pool);
- the image's ``config-manager`` (https://github.com/NVIDIA/k8s-device-plugin/blob/main/cmd/config-manager/main.go)
  reads that label on its own node and links the file of that name to ``/config/config.yaml`` in an emptyDir the
  plugin reads: once as an init container (the plugin starts with its pool's config), then as a sidecar that
  follows label changes and sends the plugin SIGHUP to reload (hence ``shareProcessNamespace``). It reads its
  node through the API server: a ServiceAccount with get/list/watch on nodes, its token mounted into the
  config-manager containers only.

The plugin runs as root: it creates its socket in the kubelet's root-owned device-plugins directory and opens
the GPU device nodes through NVML. Its root filesystem stays writable because the NVIDIA container runtime
writes the container's ld cache (/etc/ld.so.cache) when it injects the driver libraries into it
(https://github.com/NVIDIA/nvidia-container-toolkit/pull/1326).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import yaml

from aks_gpu.kube.node_daemonset import (
    KUBELET_DEVICE_PLUGINS,
    SERVICE_ACCOUNT_DIR,
    api_token_volume,
    empty_dir_volume,
    host_path_volume,
    node_access_rbac,
    node_daemonset,
    resources,
    root_security_context,
)
from aks_gpu.naming import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    GPU_NAMESPACE,
    NAME_LABEL,
    PLATFORM_LABEL_PREFIX,
    platform_object_name,
    vendor_resource,
)
from aks_gpu.resolved.model import PlatformModel, ResolvedPool
from aks_gpu.resolved.node_labels import plugin_config_name
from aks_gpu.resolved.targets import NVIDIA_PLUGIN_CONTAINER, NVIDIA_PLUGIN_DAEMONSET, NVIDIA_PLUGIN_NAME, app_labels

CONFIG_MAP_NAME = "nvidia-device-plugin-config"
SERVICE_ACCOUNT = NVIDIA_PLUGIN_NAME
# Cluster-scoped, so prefixed: it must not collide with a role another installation of the plugin creates.
CLUSTER_ROLE = platform_object_name("nvidia-device-plugin")
CONFIG_CHECKSUM_ANNOTATION = f"{PLATFORM_LABEL_PREFIX}plugin-config-sha256"
# `kubectl logs/exec ds/nvidia-device-plugin-daemonset` goes to the plugin, not to a config-manager:
# https://kubernetes.io/docs/reference/labels-annotations-taints/#kubectl-kubernetes-io-default-container
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"

# The binaries in the device plugin image (/usr/bin), and the plugin's process name the sidecar signals:
# https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/container/Dockerfile
PLUGIN_COMMAND = "nvidia-device-plugin"
CONFIG_MANAGER_COMMAND = "config-manager"
CONFIG_MANAGER_INIT_CONTAINER = "config-manager-init"
CONFIG_MANAGER_CONTAINER = "config-manager"

# Every pool's file (the ConfigMap) and the node's own (a symlink into it, in an emptyDir). The symlink is
# resolved in the plugin container, so the ConfigMap is mounted at the same path there as in the config-manager.
CONFIG_SOURCE_DIR = "/available-configs"
CONFIG_DIR = "/config"
CONFIG_FILE = f"{CONFIG_DIR}/config.yaml"
SIGHUP = 1


def plugin_config(pool: ResolvedPool, model: PlatformModel) -> dict[str, Any]:
    """The device plugin's config file for one pool (format ``version: v1``).

    https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/customizing.md
    MIG pools expose their slices under the stack's strategy; a pool without MIG says ``none``, which is what
    its GPUs are. ``failOnInitError`` makes a node without a working driver crash-loop visibly instead of
    running a plugin that advertises nothing.

    A time-sliced pool sets ``failRequestsGreaterThanOne``: asking for more than one shared GPU buys no more of
    it (NVIDIA recommends the flag, off by default for compatibility only). The admission policy denies such
    requests up front wherever it can tell the pod targets time-sliced pools (rule 8 of
    components/aks_gpu/admission/policy.py); the flag catches the rest on the node, where the pod fails with
    UnexpectedAdmissionError. https://github.com/NVIDIA/k8s-device-plugin#with-cuda-time-slicing

    The device list strategy stays ``envvar`` (the plugin's default): on AKS-managed GPU nodes the NVIDIA container
    toolkit's config.toml belongs to the node image (AKS exposes no setting for it: custom node configuration covers
    kubelet and sysctls only, https://learn.microsoft.com/azure/aks/custom-node-configuration), and there
    ``accept-nvidia-visible-devices-as-volume-mounts`` is off, so ``volume-mounts`` would hand no GPU to anyone.
    The admission policy refuses the device-selection env vars instead (rule 5), and keeps pods without a GPU
    request off GPU nodes (rules 3, 4). With the GPU Operator owning the toolkit, see
    ``gpu_operator.device_list_hardening``.
    """
    config: dict[str, Any] = {
        "version": "v1",
        "flags": {"migStrategy": model.mig_strategy if pool.mig_profile else "none", "failOnInitError": True},
    }
    if pool.time_slicing_replicas:
        config["sharing"] = {
            "timeSlicing": {
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": vendor_resource("nvidia"), "replicas": pool.time_slicing_replicas}],
            }
        }
    return config


def config_text(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def pool_configs(pools: tuple[ResolvedPool, ...], model: PlatformModel) -> dict[str, str]:
    """Every pool's config file under the name its nodes' ``nvidia.com/device-plugin.config`` label gives."""
    return {plugin_config_name(pool.config): config_text(plugin_config(pool, model)) for pool in pools}


def config_map(pools: tuple[ResolvedPool, ...], model: PlatformModel) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIG_MAP_NAME,
            "namespace": GPU_NAMESPACE,
            "labels": {NAME_LABEL: NVIDIA_PLUGIN_NAME},
        },
        "data": pool_configs(pools, model),
    }


def config_checksum(data: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def uses_mig(pools: tuple[ResolvedPool, ...]) -> bool:
    return any(pool.mig_profile for pool in pools)


def plugin_rbac() -> list[dict[str, Any]]:
    """The config-manager reads its own node's labels (an informer: list and watch, on one node by name)."""
    labels = {NAME_LABEL: NVIDIA_PLUGIN_NAME}
    return node_access_rbac(SERVICE_ACCOUNT, CLUSTER_ROLE, labels, ("get", "list", "watch"))


def config_manager_container(image: str, *, follow: bool) -> dict[str, Any]:
    """The config-manager: once (``follow=False``, the init container) or for good, signalling the plugin.

    Its settings are environment variables (cmd/config-manager/main.go). No default config: every node of an
    NVIDIA pool is labelled with its pool's config. A node without the label (removed by hand) takes the only
    config when the ConfigMap has one (fallback ``single``); otherwise the config-manager exits with an error and
    the pod does not start, rather than run the plugin with some other pool's config.
    """
    env: list[dict[str, Any]] = [
        {"name": "ONESHOT", "value": "false" if follow else "true"},
        # Empty: the in-cluster config, from the token mounted below.
        {"name": "KUBECONFIG", "value": ""},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NODE_LABEL", "value": DEVICE_PLUGIN_CONFIG_LABEL},
        {"name": "CONFIG_FILE_SRCDIR", "value": CONFIG_SOURCE_DIR},
        {"name": "CONFIG_FILE_DST", "value": CONFIG_FILE},
        {"name": "DEFAULT_CONFIG", "value": ""},
        {"name": "FALLBACK_STRATEGIES", "value": "single"},
        # The init container runs before the plugin exists: nothing to signal.
        {"name": "SEND_SIGNAL", "value": "true" if follow else "false"},
    ]
    if follow:
        env += [
            # SIGHUP makes the plugin restart its servers with the new config.
            {"name": "SIGNAL", "value": str(SIGHUP)},
            {"name": "PROCESS_TO_SIGNAL", "value": PLUGIN_COMMAND},
        ]
    # The image asks for every GPU; "void" makes the NVIDIA runtime treat this container like runc (no GPUs, no
    # driver libraries, no ld cache write), none of which it needs:
    # https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
    env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    return {
        "name": CONFIG_MANAGER_CONTAINER if follow else CONFIG_MANAGER_INIT_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": [CONFIG_MANAGER_COMMAND],
        "env": env,
        # Root like the plugin: without capabilities, kill(2) reaches only processes of the same user.
        "securityContext": root_security_context(read_only_root=True),
        "resources": resources("10m", "32Mi", "100m", "128Mi"),
        "volumeMounts": [
            {"name": "available-configs", "mountPath": CONFIG_SOURCE_DIR, "readOnly": True},
            {"name": "config", "mountPath": CONFIG_DIR},
            {"name": "api-token", "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True},
        ],
    }


def plugin_container(image: str, mig: bool) -> dict[str, Any]:
    env = [
        {"name": "CONFIG_FILE", "value": CONFIG_FILE},
        # The NVIDIA container runtime injects the driver (NVML, nvidia-smi) into containers that ask for
        # it; the image sets these too, spelled out here because the validation execs nvidia-smi in this pod.
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
    ]
    if mig:
        # The plugin watches MIG devices through the MIG monitor capability (Azure Linux MIG pools need it asked
        # for). NVIDIA's chart sets it whenever any config may use MIG (addMigMonitorDevices in
        # https://github.com/NVIDIA/k8s-device-plugin/blob/main/deployments/helm/nvidia-device-plugin/templates/_helpers.tpl);
        # harmless on the DaemonSet's pods on pools without MIG.
        env.append({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"})
    return {
        "name": NVIDIA_PLUGIN_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # Spelled out: the sidecar finds the process to signal by this name (argv[0]).
        "command": [PLUGIN_COMMAND],
        "env": env,
        # The toolkit grants the MIG monitor devices only to a container with CAP_SYS_ADMIN in its bounding set
        # (the chart's requiresCapSysAdmin, same file). One DaemonSet serves every NVIDIA pool, so the capability
        # is DaemonSet-wide when any pool has MIG, and absent from stacks without MIG.
        "securityContext": root_security_context(add_capabilities=["SYS_ADMIN"] if mig else [], read_only_root=False),
        "resources": resources("50m", "64Mi", "500m", "256Mi"),
        "volumeMounts": [
            {"name": "device-plugins", "mountPath": KUBELET_DEVICE_PLUGINS},
            {"name": "available-configs", "mountPath": CONFIG_SOURCE_DIR, "readOnly": True},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        ],
    }


def plugin_daemonset(pools: tuple[ResolvedPool, ...], model: PlatformModel, image: str) -> dict[str, Any]:
    """``nvidia-device-plugin-daemonset``: on every node of ``pools``, tolerating every taint they carry."""
    mig = uses_mig(pools)
    volumes = [
        host_path_volume("device-plugins", KUBELET_DEVICE_PLUGINS),
        {"name": "available-configs", "configMap": {"name": CONFIG_MAP_NAME}},
        # Holds only the symlink the config-manager writes.
        empty_dir_volume("config", size_limit="1Mi"),
        api_token_volume("api-token"),
    ]
    return node_daemonset(
        name=NVIDIA_PLUGIN_DAEMONSET,
        selector=app_labels(NVIDIA_PLUGIN_NAME),
        pools=pools,
        init_containers=[config_manager_container(image, follow=False)],
        # The plugin first: the container the validation execs into and `kubectl` defaults to.
        containers=[plugin_container(image, mig), config_manager_container(image, follow=True)],
        volumes=volumes,
        service_account=SERVICE_ACCOUNT,
        # The token goes to the config-manager containers only (api_token_volume), not to the plugin.
        automount_token=False,
        # The sidecar signals the plugin's process, which it sees only in a shared process namespace.
        share_process_namespace=True,
        pod_annotations={
            DEFAULT_CONTAINER_ANNOTATION: NVIDIA_PLUGIN_CONTAINER,
            # The config-manager follows the node's label, not the files' contents, and the plugin reads its
            # file at start (or on SIGHUP): a changed config rolls the pods through this checksum. Every pool's
            # file is in it, so any pool's change rolls the plugin on every NVIDIA node, one node at a time.
            CONFIG_CHECKSUM_ANNOTATION: config_checksum(pool_configs(pools, model)),
        },
    )


def nvidia_manifests(model: PlatformModel, image: str) -> list[dict[str, Any]]:
    """The ConfigMap, the config-manager's RBAC and the one plugin DaemonSet for all NVIDIA pools; nothing
    when the GPU Operator owns the plugin."""
    pools = model.pools_of("nvidia")
    if not pools or model.config.device_plugin.mode != "daemonset":
        return []
    return [config_map(pools, model), *plugin_rbac(), plugin_daemonset(pools, model, image)]
