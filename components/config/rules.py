"""Rules that span keys: what pydantic's per-field checks cannot see, and what Azure would only refuse
halfway through a deployment. Pure: config and catalog in, problems (with key paths) out.
"""

from __future__ import annotations

import ipaddress
from collections import Counter

# A module reference, not names: components.model imports the config models, so when the import starts
# there, this module runs while components.model is still half-initialised.
from components import model as platform_model
from components.admission import exemptions as admission_exemptions
from components.catalog import Catalog
from components.config.models import GpuPoolConfig, PlatformConfig, StackConfig
from components.config.problems import Problem

P = "aks-gpu"
RESERVED_LABEL_PREFIXES = ("aks-gpu/", "kubernetes.azure.com/")
RESERVED_LABELS = frozenset({"accelerator", "nvidia.com/device-plugin.config", "acstor.azure.com/io-engine"})


def check_rules(config: PlatformConfig, catalog: Catalog) -> list[Problem]:
    """Every cross-key problem of a stack (or, for a component, of the sections it was given)."""
    problems: list[Problem] = []
    if isinstance(config, StackConfig):
        problems += _cluster_rules(config)
    for index, pool in enumerate(config.gpu_pools):
        problems += _pool_rules(pool, f"{P}:gpuPools[{index}]", config, catalog)
    problems += _duplicates(config)
    problems += _workload_rules(config, catalog)
    problems += _admission_rules(config)
    problems += _amd_operator_rules(config)
    return problems


def _cluster_rules(config: StackConfig) -> list[Problem]:
    problems = []
    if config.workloads and config.cluster.network_policy == "none":
        problems.append(
            Problem(
                f"{P}:cluster.networkPolicy",
                "'none' is not allowed while workload namespaces exist: their deny-all NetworkPolicies would "
                "silently not be enforced; use azure, calico or cilium",
            )
        )
    for key, window in (("nodeOs", config.cluster.maintenance.node_os), ("autoUpgrade", config.cluster.maintenance.auto_upgrade)):
        if window is None:
            continue
        path = f"{P}:cluster.maintenance.{key}"
        if window.schedule in ("weekly", "relativeMonthly") and window.day_of_week is None:
            problems.append(Problem(f"{path}.dayOfWeek", f"is required for a {window.schedule} schedule"))
        if window.schedule == "absoluteMonthly" and window.day_of_month is None:
            problems.append(Problem(f"{path}.dayOfMonth", "is required for an absoluteMonthly schedule"))
        if window.schedule == "relativeMonthly" and window.week_index is None:
            problems.append(Problem(f"{path}.weekIndex", "is required for a relativeMonthly schedule"))
        for i, dates in enumerate(window.not_allowed_dates):
            if dates.start > dates.end:
                problems.append(Problem(f"{path}.notAllowedDates[{i}]", f"start {dates.start} is after end {dates.end}"))
    if config.cluster.maintenance.node_os is not None and config.cluster.node_os_upgrade_channel in ("None", "Unmanaged"):
        problems.append(
            Problem(
                f"{P}:cluster.maintenance.nodeOs",
                f"has no effect with nodeOsUpgradeChannel {config.cluster.node_os_upgrade_channel}",
                "warning",
            )
        )
    if config.cluster.system_pool.min_count > config.cluster.system_pool.max_count:
        problems.append(
            Problem(
                f"{P}:cluster.systemPool.minCount",
                f"{config.cluster.system_pool.min_count} is greater than maxCount {config.cluster.system_pool.max_count}",
            )
        )
    return problems


def _pool_rules(pool: GpuPoolConfig, path: str, config: PlatformConfig, catalog: Catalog) -> list[Problem]:
    problems = []
    size, model, gpus = platform_model.gpu_facts(pool, catalog)
    if pool.autoscaling:
        if pool.min_count > pool.max_count:
            problems.append(Problem(f"{path}.minCount", f"{pool.min_count} is greater than maxCount {pool.max_count}"))
        if pool.max_count < 1:
            problems.append(Problem(f"{path}.maxCount", "must be at least 1 when autoscaling is on"))
        if pool.count is not None:
            problems.append(Problem(f"{path}.count", "is only for autoscaling: false; use minCount/maxCount"))
    elif pool.count is None:
        problems.append(Problem(f"{path}.count", "is required when autoscaling is false"))

    if size is None:
        if pool.gpu_count is None or pool.gpu_model is None:
            problems.append(
                Problem(
                    f"{path}.vmSize",
                    f"{pool.vm_size!r} is not in the GPU catalog (`aksgpu catalog` lists it); state gpuCount and "
                    "gpuModel on the pool so the GPU count and MIG math can be checked",
                    "warning",
                )
            )
    elif size.vendor != pool.vendor:
        problems.append(
            Problem(
                f"{path}.vendor", f"{pool.vendor!r} does not match {size.name}, which carries {size.gpu.product} ({size.vendor})"
            )
        )
    if pool.gpu_model is not None and pool.gpu_model not in catalog.gpu_models:
        problems.append(
            Problem(
                f"{path}.gpuModel",
                f"{pool.gpu_model!r} is unknown; known models: {', '.join(sorted(catalog.gpu_models))}",
                "warning",
            )
        )

    if pool.mig_profile is not None:
        if pool.vendor != "nvidia":
            problems.append(Problem(f"{path}.migProfile", "MIG is an NVIDIA feature; remove it from an AMD pool"))
        elif model is None:
            problems.append(
                Problem(f"{path}.migProfile", "needs a known GPU model (catalog size or gpuModel) to compute the MIG slices")
            )
        elif not model.supports_mig:
            problems.append(
                Problem(f"{path}.migProfile", f"{pool.mig_profile!r} is not allowed: {model.product} has no MIG support")
            )
        elif pool.mig_profile not in model.mig:
            problems.append(
                Problem(
                    f"{path}.migProfile", f"{pool.mig_profile!r} is not allowed on {model.product}; it has {', '.join(model.mig)}"
                )
            )
        if pool.time_slicing_replicas is not None:
            problems.append(Problem(f"{path}.timeSlicingReplicas", "time-slicing and MIG on the same pool are refused; pick one"))
    if pool.time_slicing_replicas is not None and pool.vendor == "amd":
        problems.append(Problem(f"{path}.timeSlicingReplicas", "time-slicing is an NVIDIA device plugin feature"))

    if pool.vendor == "amd" and pool.gpu_driver == "Install":
        problems.append(Problem(f"{path}.gpuDriver", "'Install' is not allowed on AMD: AKS installs no AMD driver; use None"))
    resolved = platform_model.resolve_pool(pool, config, catalog)
    if pool.vendor == "nvidia" and resolved.gpu_driver == "None" and config.device_plugin.mode != "gpu-operator":
        problems.append(
            Problem(
                f"{path}.gpuDriver", "None with devicePlugin.mode daemonset leaves the nodes without an NVIDIA driver", "warning"
            )
        )

    if pool.nvme_cache:
        if size is not None and size.nvme is None:
            problems.append(
                Problem(
                    f"{path}.nvmeCache",
                    f"{size.name} has no local NVMe data disks to cache on; remove nvmeCache or pick an ND/NC size with NVMe",
                )
            )
        elif size is not None and size.nvme is not None and size.nvme.disks == 1 and pool.os_disk_type == "Ephemeral":
            problems.append(
                Problem(
                    f"{path}.osDiskType",
                    f"an ephemeral OS disk on {size.name} uses its only NVMe disk, leaving none for the cache",
                    "warning",
                )
            )
        elif size is None:
            problems.append(
                Problem(
                    f"{path}.nvmeCache",
                    f"{pool.vm_size!r} is not in the GPU catalog, so whether it has local NVMe data disks cannot be "
                    "checked; without them the cache has no capacity",
                    "warning",
                )
            )
        storage = config.storage
        # The storage settings only matter once a pool asks for the cache; report them once, on the first.
        first_nvme_pool = next(p for p in config.gpu_pools if p.nvme_cache)
        if pool is first_nvme_pool and storage.extension_version is not None and storage.extension_auto_upgrade:
            # ARM: "To use 'version', autoUpgradeMinorVersion must be 'false'" (Microsoft.KubernetesConfiguration).
            problems.append(
                Problem(
                    f"{P}:storage.extensionVersion",
                    f"{storage.extension_version!r} pins the Azure Container Storage extension, which needs "
                    "extensionAutoUpgrade: false",
                )
            )
    # Labels and taints the platform sets itself: a user value would break pool placement, the device
    # plugin's per-pool config or the vendor taint every GPU pod must tolerate.
    for key in pool.labels:
        if key.startswith(RESERVED_LABEL_PREFIXES) or key in RESERVED_LABELS:
            problems.append(Problem(f"{path}.labels", f"{key!r} is set by aks-gpu itself; choose another label key"))
    for index, taint in enumerate(pool.taints):
        if taint.split("=", 1)[0] in ("nvidia.com/gpu", "amd.com/gpu", "kubernetes.azure.com/scalesetpriority"):
            problems.append(Problem(f"{path}.taints[{index}]", f"{taint!r} uses a key aks-gpu or AKS sets itself"))
    if pool.spot and pool.spot_eviction_policy == "Deallocate":
        problems.append(
            Problem(f"{path}.spotEvictionPolicy", "Deallocate keeps evicted GPU VMs counting against quota", "warning")
        )
    if not pool.spot and pool.spot_max_price != -1:
        problems.append(Problem(f"{path}.spotMaxPrice", "is only for spot pools (spot: true)"))
    if gpus is not None and resolved.resource.count_per_node == 0:
        problems.append(Problem(f"{path}.vmSize", "exposes no GPUs"))
    return problems


def _duplicates(config: PlatformConfig) -> list[Problem]:
    problems = []
    pool_names = Counter(p.name for p in config.gpu_pools)
    seen: set[str] = set()
    system_pool = config.cluster.system_pool.name if isinstance(config, StackConfig) else None
    for index, pool in enumerate(config.gpu_pools):
        if pool_names[pool.name] > 1 and pool.name in seen:
            problems.append(Problem(f"{P}:gpuPools[{index}].name", f"{pool.name!r} is used by another pool"))
        seen.add(pool.name)
        if pool.name == system_pool:
            problems.append(Problem(f"{P}:gpuPools[{index}].name", f"{pool.name!r} is the system pool's name"))
    names: set[str] = set()
    for index, workload in enumerate(config.workloads):
        if workload.name in names:
            problems.append(Problem(f"{P}:workloads[{index}].name", f"{workload.name!r} is used by another workload"))
        names.add(workload.name)
    return problems


def _workload_rules(config: PlatformConfig, catalog: Catalog) -> list[Problem]:
    problems = []
    pools = tuple(platform_model.resolve_pool(p, config, catalog) for p in config.gpu_pools)
    pool_names = {p.name for p in pools}
    for index, workload in enumerate(config.workloads):
        path = f"{P}:workloads[{index}]"
        for rule_index, rule in enumerate(workload.network.allow_egress):
            problems += cidr_problems(rule.cidr, f"{path}.network.allowEgress[{rule_index}].cidr")
        if workload.pool is not None and workload.pool not in pool_names:
            problems.append(
                Problem(
                    f"{path}.pool",
                    f"{workload.pool!r} is not a GPU pool of this stack ({', '.join(sorted(pool_names)) or 'none'})",
                )
            )
            continue
        targets = platform_model.workload_pools(workload, pools)
        if workload.pool is not None and targets and targets[0].workload != workload.type:
            problems.append(
                Problem(
                    f"{path}.type", f"{workload.type!r} differs from pool {workload.pool!r}'s workload {targets[0].workload!r}"
                )
            )
        if not targets:
            if workload.gpu_quota > 0:
                types = sorted({p.workload for p in pools})
                problems.append(
                    Problem(
                        f"{path}.type",
                        f"no GPU pool serves workload type {workload.type!r}, so gpuQuota {workload.gpu_quota} "
                        f"could never be used; pool workload types are: {', '.join(types) or 'none'}",
                    )
                )
            continue
        resources = sorted({p.resource.name for p in targets})
        if len(resources) > 1:
            problems.append(
                Problem(
                    f"{path}.pool",
                    f"the pools of type {workload.type!r} expose different resources ({', '.join(resources)}); name one pool",
                )
            )
        if workload.nvme_volume and not any(p.config.nvme_cache for p in targets):
            problems.append(Problem(f"{path}.nvmeVolume", "none of the workload's pools has nvmeCache: true"))
        capacity = [p.resource.count_per_node * p.config.max_count for p in targets if p.resource.count_per_node is not None]
        if capacity and workload.gpu_quota > sum(capacity):
            problems.append(
                Problem(
                    f"{path}.gpuQuota",
                    f"{workload.gpu_quota} is more than its pools can ever offer ({sum(capacity)} at maxCount)",
                    "warning",
                )
            )
    return problems


def cidr_problems(cidr: str, path: str) -> list[Problem]:
    """An egress CIDR the API server would refuse (or read differently than written) in a NetworkPolicy ipBlock."""
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return [Problem(path, f"{cidr!r} is not an IPv4 or IPv6 network in CIDR notation (e.g. 10.20.0.0/16)")]
    if network.network_address != ipaddress.ip_address(cidr.partition("/")[0]):
        return [Problem(path, f"{cidr!r} has host bits set; it allows all of {network}", "warning")]
    return []


def _admission_rules(config: PlatformConfig) -> list[Problem]:
    admission = config.admission
    actions = admission.validation_actions
    problems = []
    if not actions:
        problems.append(Problem(f"{P}:admission.validationActions", "needs at least one of Deny, Warn, Audit"))
    elif "Deny" in actions and "Warn" in actions:
        problems.append(
            Problem(f"{P}:admission.validationActions", "Deny and Warn may not be used together (Kubernetes refuses it)")
        )
    # No tenant namespace is exempt: a workload namespace outside the policy would have no GPU rules at all.
    network_policy = config.cluster.network_policy if isinstance(config, StackConfig) else None
    derived = {item.namespace for item in admission_exemptions.derived_exemptions(config, network_policy)}
    workloads = {workload.name for workload in config.workloads}
    for name in admission.exempt_namespaces:
        if name in workloads:
            problems.append(
                Problem(
                    f"{P}:admission.exemptNamespaces",
                    f"{name} is a workload namespace; the GPU placement policy must apply there, remove it",
                )
            )
    for index, workload in enumerate(config.workloads):
        if workload.name in derived:
            problems.append(
                Problem(
                    f"{P}:workloads[{index}].name",
                    f"{workload.name!r} is a namespace the admission policy exempts for the platform's own agents; "
                    "name the workload namespace something else",
                )
            )
    for index, workload in enumerate(config.workloads):
        if workload.rdma and workload.pod_security == "restricted":
            problems.append(
                Problem(
                    f"{P}:workloads[{index}].rdma",
                    "RDMA needs the IPC_LOCK capability, which podSecurity restricted forbids; use baseline (the default)",
                )
            )
    for name in admission.gpu_namespaces:
        if name in workloads:
            problems.append(
                Problem(f"{P}:admission.gpuNamespaces", f"{name} is a workload namespace already; remove it", "warning")
            )
    return problems


def _amd_operator_rules(config: PlatformConfig) -> list[Problem]:
    """The AMD GPU Operator's prerequisites, refused before the Helm release would hang or do nothing.
    https://instinct.docs.amd.com/projects/gpu-operator/en/latest/installation/kubernetes-helm.html (cert-manager
    first), https://instinct.docs.amd.com/projects/gpu-operator/en/latest/drivers/installation.html (spec.driver.image:
    "your repository to host driver image", no tag)."""
    plugin = config.device_plugin
    if plugin.amd_mode != "gpu-operator" or not any(pool.vendor == "amd" for pool in config.gpu_pools):
        return []
    problems = []
    if not plugin.cert_manager_installed:
        problems.append(
            Problem(
                f"{P}:devicePlugin.certManagerInstalled",
                "the AMD GPU Operator needs cert-manager for its webhooks' certificates, and this stack does not "
                "install it: install it (helm install cert-manager jetstack/cert-manager --namespace cert-manager "
                "--create-namespace --set crds.enabled=true), then set certManagerInstalled: true",
            )
        )
    if plugin.amd_driver_image is None:
        problems.append(
            Problem(
                f"{P}:devicePlugin.amdDriverImage",
                "AKS installs no AMD driver, so the AMD GPU Operator builds the amdgpu driver image (KMM) and pushes it "
                "to a registry you own: name the repository without a tag (e.g. myregistry.azurecr.io/amdgpu-driver) "
                "and give the cluster push and pull rights on it",
            )
        )
    return problems
