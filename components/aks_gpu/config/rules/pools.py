"""The GPU pools' rules: scaling counts, the VM size against the GPU catalog (vendor, MIG, time-slicing, NVMe,
ephemeral OS disk, arm64), drivers and device plugin modes, labels and taints AKS or aks-gpu own, upgrade and spot
settings, and the storage and AMD GPU Operator settings the pools need. Pure: config and catalog in, problems (with
key paths) out."""

from __future__ import annotations

from decimal import Decimal

from aks_gpu import naming
from aks_gpu.aks_facts import Arm64Entry, arm64_support, gpu_node_images, refusal_tag, sdk_has_managed_gpu
from aks_gpu.catalog import Catalog, VmSize
from aks_gpu.config.models import GpuPoolConfig, PlatformConfig, SmokeJobConfig, StackConfig
from aks_gpu.config.problems import Problem, did_you_mean

P = naming.CONFIG_NAMESPACE


def pool_rules(pool: GpuPoolConfig, path: str, config: PlatformConfig, catalog: Catalog) -> list[Problem]:
    problems = []
    size, model, gpus = catalog.gpu_facts(pool.vm_size, pool.gpu_model, pool.gpu_count)
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
            # A typo plans a pool of "? x ?" GPUs that ARM then refuses: an error, as a compiler would, with the
            # nearest names; a size the catalog lacks is described by gpuCount and gpuModel instead.
            missing = " and ".join(
                key for key, value in (("gpuCount", pool.gpu_count), ("gpuModel", pool.gpu_model)) if value is None
            )
            nearest = did_you_mean(pool.vm_size, catalog.vm_sizes, count=3)
            problems.append(
                Problem(
                    f"{path}.vmSize",
                    f"{pool.vm_size!r} is not in the GPU catalog{nearest} (`aksgpu catalog` lists the sizes it knows; for "
                    f"a size it does not know, state {missing} on the pool so the GPU count and MIG math can be checked)",
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
                f"{pool.gpu_model!r} is unknown{did_you_mean(pool.gpu_model, catalog.gpu_models)}; known models: "
                f"{', '.join(sorted(catalog.gpu_models))}",
                "warning",
            )
        )

    if pool.mig_profile is not None:
        if pool.vendor != "nvidia":
            problems.append(Problem(f"{path}.migProfile", "MIG is an NVIDIA feature; remove it from an AMD pool"))
        elif model is None:
            problems.append(
                Problem(
                    f"{path}.migProfile",
                    "needs a known GPU model (catalog size or gpuModel) to compute the MIG slices",
                    follows=f"{path}.vmSize",
                )
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
        problems.append(
            Problem(
                f"{path}.gpuDriver",
                "'Install' is not allowed on AMD: AKS installs no AMD driver; use None " + refusal_tag("amd-driver-none"),
            )
        )
    if pool.vendor == "amd" and config.device_plugin.amd_mode == "daemonset":
        # "Currently, AKS doesn't manage nor automate the installation of GPU drivers or the AMD GPU device plugin on
        # AMD GPU-enabled node pools" (https://learn.microsoft.com/azure/aks/use-amd-gpus#options-for-using-amd-gpus,
        # read 2026-12-01, page dated 2025-06-04), and the AKS Ubuntu images list no AMD driver package (no
        # amdgpu-dkms, no ROCm; only the kernel's linux-modules-extra-*-azure and libdrm-amdgpu1): Azure/AKS
        # vhd-notes/aks-ubuntu/AKSUbuntu-2204/202607.09.0.txt and AKSUbuntu-2404/202607.09.0.txt at commit 8d1c8909.
        # Whether that kernel package's in-tree amdgpu drives an MI300X is stated by no source read, so a warning,
        # not a refusal: the page's path is the AMD GPU Operator, and a team may load amdgpu itself.
        problems.append(
            Problem(
                f"{P}:devicePlugin.amdMode",
                f"daemonset on AMD pool {pool.name}: AKS installs no AMD driver and the ROCm device plugin installs none "
                "either, so the nodes likely show no amd.com/gpu; use amdMode gpu-operator (it builds and loads amdgpu) "
                "unless something else loads amdgpu on these nodes",
                "warning",
            )
        )
    driver = pool.effective_gpu_driver(config.device_plugin.mode)
    if pool.vendor == "nvidia" and driver == "None" and config.device_plugin.mode != "gpu-operator":
        problems.append(
            Problem(
                f"{path}.gpuDriver", "None with devicePlugin.mode daemonset leaves the nodes without an NVIDIA driver", "warning"
            )
        )

    if size is not None and driver == "Install":
        problems += node_image_rules(pool, size, path)

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
                    follows=f"{path}.vmSize",
                )
            )
        # The storage settings only matter once a pool asks for the cache; report them once, on the first.
        first_nvme_pool = next(p for p in config.gpu_pools if p.nvme_cache)
        if pool is first_nvme_pool:
            problems += _storage_rules(config)
    problems += _label_and_taint_rules(pool, path)
    problems += _upgrade_rules(pool, path)
    if pool.spot and pool.spot_eviction_policy == "Deallocate":
        problems.append(
            Problem(f"{path}.spotEvictionPolicy", "Deallocate keeps evicted GPU VMs counting against quota", "warning")
        )
    if not pool.spot and pool.spot_max_price != -1:
        problems.append(Problem(f"{path}.spotMaxPrice", "is only for spot pools (spot: true)"))
    elif pool.spot and not _valid_spot_price(pool.spot_max_price):
        problems.append(
            Problem(
                f"{path}.spotMaxPrice",
                f"{pool.spot_max_price!r} is not allowed: -1 (pay up to the on-demand price) or a positive price in US "
                "dollars with at most five decimal places " + refusal_tag("spot-max-price-format"),
            )
        )
    if pool.vendor == "amd" and pool.os_sku == "AzureLinux":
        problems.append(
            Problem(
                f"{path}.osSku",
                "AzureLinux is not supported with AMD GPUs on AKS; use Ubuntu " + refusal_tag("amd-no-azure-linux"),
            )
        )
    if (
        isinstance(config, StackConfig)
        and pool.os_sku == "AzureLinux"
        and config.cluster.node_os_upgrade_channel == "SecurityPatch"
    ):
        # "Azure Linux doesn't support this channel on GPU-enabled VMs" (SecurityPatch),
        # https://learn.microsoft.com/azure/aks/auto-upgrade-node-os-image#channels-for-node-os-image-upgrades
        problems.append(
            Problem(
                f"{path}.osSku",
                "AzureLinux GPU nodes get no security patches from nodeOsUpgradeChannel SecurityPatch (AKS does not "
                "support that channel on Azure Linux GPU VMs); use NodeImage or an Ubuntu pool",
                "warning",
            )
        )
    if size is not None and size.cpu_architecture == "arm64":
        problems += _arm64_rules(pool, path, size, config, driver)
    if gpus == 0:
        problems.append(Problem(f"{path}.vmSize", "exposes no GPUs"))
    problems += _pool_limit_rules(pool, path, catalog)
    if pool.managed_gpu:
        problems += _managed_gpu_rules(pool, path, config)
    return problems


# AKS sizes a default ephemeral OS disk to the temp storage "so long as the temp is at least 128 GiB"
# (`ephemeral-os-disk-too-large`); below that its default OS disk does not fit.
EPHEMERAL_DEFAULT_MIN_TEMP_GIB = 128


def _ephemeral_os_disk_rules(pool: GpuPoolConfig, path: str, catalog: Catalog) -> list[Problem]:
    """An ephemeral OS disk against the local disks of the size that can hold it: the temp disk, and one local NVMe
    disk where the size has them (which of the two AKS picks on a size with both is not documented, so only a disk
    that fits on neither is refused)."""
    if pool.os_disk_type != "Ephemeral":
        return []
    temp = catalog.temp_disk_of(pool.vm_size)
    size = catalog.vm_size(pool.vm_size)
    if temp is None:
        return [
            Problem(
                f"{path}.osDiskType",
                f"Ephemeral on {pool.vm_size}: its temp disk size is not in the catalog (gpu_catalog.yaml temp_disk_gib), so "
                "whether the OS disk fits cannot be checked; AKS refuses one that does not",
                "warning",
            )
        ]
    places = {f"its {temp} GiB temp disk": temp}
    if size is not None and size.nvme is not None:
        per_disk = size.nvme.capacity_gib // size.nvme.disks
        places[f"one of its {per_disk} GiB NVMe disks"] = per_disk
    largest = max(places.values())
    where = " or ".join(places)
    wanted = pool.os_disk_size_gb
    if wanted is None and largest < EPHEMERAL_DEFAULT_MIN_TEMP_GIB:
        return [
            Problem(
                f"{path}.osDiskType",
                f"Ephemeral on {pool.vm_size}: AKS's default OS disk does not fit {where} (it sizes the disk to the temp "
                f"storage only from {EPHEMERAL_DEFAULT_MIN_TEMP_GIB} GiB); set osDiskSizeGb to {largest} or less, or use "
                "Managed " + refusal_tag("ephemeral-os-disk-too-large"),
            )
        ]
    if wanted is not None and wanted > largest:
        return [
            Problem(
                f"{path}.osDiskType",
                f"Ephemeral with osDiskSizeGb {wanted} on {pool.vm_size}: the OS disk fits neither {where}; set "
                f"osDiskSizeGb to {largest} or less, or use Managed " + refusal_tag("ephemeral-os-disk-too-large"),
            )
        ]
    return []


# "The minimum value that can be set for maximum pods per node is 10 if and only if the configuration of each node
# pool has space for a minimum of 30 pods" (`max-pods-minimum`).
POOL_MIN_PODS = 30


def _pool_limit_rules(pool: GpuPoolConfig, path: str, catalog: Catalog) -> list[Problem]:
    problems: list[Problem] = []
    nodes = pool.min_count if pool.autoscaling else (pool.count or 0)
    if pool.max_pods < POOL_MIN_PODS and pool.max_pods * nodes < POOL_MIN_PODS:
        problems.append(
            Problem(
                f"{path}.maxPods",
                f"{pool.max_pods} pods per node on {nodes} node(s) is room for {pool.max_pods * nodes} pods; AKS takes a "
                f"maxPods under {POOL_MIN_PODS} only when the pool holds {POOL_MIN_PODS} pods: raise maxPods to "
                f"{POOL_MIN_PODS} or keep more nodes " + refusal_tag("max-pods-minimum"),
            )
        )
    problems += _ephemeral_os_disk_rules(pool, path, catalog)
    retired = catalog.not_offered_reason(pool.vm_size)
    if retired is not None:
        problems.append(
            Problem(
                f"{path}.vmSize",
                f"{pool.vm_size!r}: {retired}; `aksgpu catalog` lists the sizes to use " + refusal_tag("gpu-size-not-offered"),
            )
        )
    elif pool.vendor == "amd" and catalog.aks_amd_sizes and not catalog.aks_supports_amd_size(pool.vm_size):
        problems.append(
            Problem(
                f"{path}.vmSize",
                f"{pool.vm_size!r}: AKS supports AMD GPU pools on {', '.join(sorted(catalog.aks_amd_sizes))} only "
                + refusal_tag("amd-size-not-supported"),
            )
        )
    return problems


def _managed_gpu_rules(pool: GpuPoolConfig, path: str, config: PlatformConfig) -> list[Problem]:
    """An agent pool needs gpuProfile.nvidia.managementMode, which the installed azure-native SDK may lack (read from it,
    so a provider bump lifts the refusal); a NAP pool asks by its AKSNodeClass's tag (docs/automatic.md)."""
    cluster = config.cluster if isinstance(config, StackConfig) else None
    key = f"{path}.managedGpu"
    if pool.vendor != "nvidia":
        return [Problem(key, "the AKS-managed GPU experience is NVIDIA's only (aks-managed-gpu-nodes.md)")]
    if pool.effective_provisioning(cluster) != "nap" and not sdk_has_managed_gpu():
        return [
            Problem(
                key,
                "AKS-managed GPU pools need gpuProfile.nvidia.managementMode, which the installed azure-native SDK's "
                "GPUProfileArgs does not have (AKS API 2025-09-01 in 3.29.0; preview on 2026-01-02-preview, stable from "
                "2026-08-01); see docs/platform.md " + refusal_tag("managed-gpu-api-unreachable"),
            )
        ]
    # AKS then installs its own device plugin and DCGM exporter on the pool's nodes (aks-managed-gpu-nodes.md,
    # "Managed GPU components"); the platform's still target every GPU pool.
    return [
        Problem(
            key,
            "AKS installs its device plugin and DCGM exporter on this pool's nodes, and the platform's device plugin and "
            "exporter still target every GPU pool: two plugins register nvidia.com/gpu (docs/automatic.md)",
            "warning",
        )
    ]


def _storage_rules(config: PlatformConfig) -> list[Problem]:
    storage = config.storage
    problems: list[Problem] = []
    if storage.extension_version is None:
        return problems
    if storage.flavour == "v2":
        problems.append(
            Problem(
                f"{P}:storage.extensionVersion",
                f"{storage.extension_version!r}: Azure Container Storage v2 cannot be pinned to a version (it installs "
                "the latest and updates itself); remove extensionVersion " + refusal_tag("acstor-v2-no-version"),
            )
        )
    elif storage.extension_auto_upgrade:
        problems.append(
            Problem(
                f"{P}:storage.extensionVersion",
                f"{storage.extension_version!r} pins the Azure Container Storage extension, which needs "
                "extensionAutoUpgrade: false " + refusal_tag("extension-version-needs-manual-upgrade"),
            )
        )
    return problems


def _label_and_taint_rules(pool: GpuPoolConfig, path: str) -> list[Problem]:
    """Labels and taints the platform or AKS set themselves: a user value would break pool placement, the device
    plugin's per-pool config, the GPU Operator's operand switches, or be refused by AKS."""
    problems: list[Problem] = []
    for key in sorted(pool.labels):
        domain = naming.reserved_domain(key)
        if naming.is_platform_node_label(key) or key.startswith(naming.PLATFORM_LABEL_PREFIX):
            problems.append(
                Problem(f"{path}.labels", f"{key!r} is set by aks-gpu itself on this pool's nodes; choose another label key")
            )
        elif domain is not None:
            problems.append(
                Problem(
                    f"{path}.labels",
                    f"{key!r} is in {domain}, a label domain AKS and Kubernetes reserve for themselves; choose another "
                    "label key " + refusal_tag("reserved-label-prefix"),
                )
            )
    for index, taint in enumerate(pool.taints):
        key = taint.split("=", 1)[0].split(":", 1)[0]
        if key in naming.PLATFORM_TAINT_KEYS - {naming.SPOT_TAINT_KEY}:
            problems.append(
                Problem(f"{path}.taints[{index}]", f"{taint!r} uses {key}, the GPU taint aks-gpu sets on every pool itself")
            )
        elif key == naming.SPOT_TAINT_KEY or naming.reserved_domain(key) is not None:
            problems.append(
                Problem(
                    f"{path}.taints[{index}]",
                    f"{taint!r} uses a key AKS sets or reserves itself (spot pools get the spot taint from AKS) "
                    + refusal_tag("reserved-taint-key"),
                )
            )
    return problems


def is_zero(value: str | None) -> bool:
    """Whether a count or percentage setting (an upgrade's maxSurge, remediation's maxUnhealthy) is zero."""
    return value in ("0", "0%")


def _upgrade_rules(pool: GpuPoolConfig, path: str) -> list[Problem]:
    upgrade = pool.upgrade
    given = upgrade.model_fields_set
    problems: list[Problem] = []
    if pool.spot:
        # "There are no surge nodes available for Spot node pool upgrades" and "no drain is applied"
        # (https://learn.microsoft.com/azure/aks/spot-node-pool#upgrade-a-spot-node-pool): the pool is sent no
        # upgradeSettings at all (components/aks_gpu/azure/node_pool.py).
        if upgrade.max_surge is not None:
            problems.append(
                Problem(
                    f"{path}.upgrade.maxSurge",
                    "is not allowed on a spot pool: AKS upgrades spot pools without surge nodes and ARM refuses the "
                    "setting; remove it " + refusal_tag("spot-no-max-surge"),
                )
            )
        if upgrade.max_unavailable is not None:
            problems.append(
                Problem(
                    f"{path}.upgrade.maxUnavailable",
                    "is not allowed on a spot pool (ARM refuses it); remove it " + refusal_tag("spot-no-max-unavailable"),
                )
            )
        for key, field in (
            ("drainTimeoutInMinutes", "drain_timeout_in_minutes"),
            ("nodeSoakDurationInMinutes", "node_soak_duration_in_minutes"),
            ("undrainableNodeBehavior", "undrainable_node_behavior"),
        ):
            if field in given:
                problems.append(
                    Problem(
                        f"{path}.upgrade.{key}",
                        "has no effect on a spot pool: AKS cordons spot nodes and sends an eviction notice on upgrade, "
                        "without a drain, and aks-gpu sends spot pools no upgrade settings",
                        "warning",
                    )
                )
        return problems
    if is_zero(upgrade.max_surge) and (upgrade.max_unavailable is None or is_zero(upgrade.max_unavailable)):
        problems.append(
            Problem(
                f"{path}.upgrade.maxSurge",
                f"{upgrade.max_surge!r} needs upgrade.maxUnavailable above zero: AKS requires a surge when no node may "
                "be unavailable " + refusal_tag("max-surge-zero-needs-max-unavailable"),
            )
        )
    elif (
        upgrade.max_unavailable is not None and not is_zero(upgrade.max_unavailable) and not is_zero(upgrade.effective_max_surge)
    ):
        # Both above zero is AKS's "MaxUnavailable fallback", documented as preview and needing the aks-preview CLI
        # (https://learn.microsoft.com/azure/aks/upgrade-aks-node-pools-rolling#maxunavailable-fallback-preview);
        # what the stable 2025-09-01 API the provider uses does with it is not documented.
        problems.append(
            Problem(
                f"{path}.upgrade.maxUnavailable",
                f"together with maxSurge {upgrade.effective_max_surge!r} is AKS's preview surge-then-in-place fallback, "
                'not documented for the stable API this program uses; set maxSurge "0" for in-place upgrades',
                "warning",
            )
        )
    return problems


def _valid_spot_price(price: float) -> bool:
    # "the value must be -1 or a positive value with up to five decimal places"
    # https://learn.microsoft.com/azure/aks/spot-node-pool#limitations
    if price == -1:
        return True
    exponent = Decimal(repr(price)).as_tuple().exponent
    return price > 0 and isinstance(exponent, int) and exponent >= -5


def _arm64_rules(pool: GpuPoolConfig, path: str, size: VmSize, config: PlatformConfig, driver: str) -> list[Problem]:
    """An arm64 (Grace) pool runs only what has linux/arm64 images: each thing the platform puts on its nodes is
    looked up in components/aks_gpu/data/arm64_support.yaml; unknown or no is refused, unsettled is a warning."""
    facts = arm64_support()
    problems: list[Problem] = []

    def judge(key: str, what: str, entry: Arm64Entry) -> None:
        reason = entry.note.split(". ")[0].rstrip(".")
        where = f"components/aks_gpu/data/arm64_support.yaml ({entry.name})"
        if entry.arm64 in ("no", "unknown"):
            verdict = "does not run on arm64" if entry.arm64 == "no" else "is not known to run on arm64"
            problems.append(Problem(key, f"{size.name} is an arm64 (Grace) VM and {what} {verdict}: {reason}; see {where}"))
        elif entry.arm64 == "unsettled":
            problems.append(Problem(key, f"{size.name} is an arm64 (Grace) VM; {what}: {reason}; see {where}", "warning"))

    def unchecked(key: str, image: str) -> None:
        problems.append(
            Problem(
                key,
                f"{image!r} runs on {pool.name}, an arm64 (Grace) pool; aks-gpu cannot check it: make sure its manifest "
                "list has linux/arm64",
                "warning",
            )
        )

    if pool.vendor != "nvidia":
        return problems
    plugin = config.device_plugin
    if plugin.mode == "daemonset":
        if plugin.nvidia_image is not None:
            unchecked(f"{P}:devicePlugin.nvidiaImage", plugin.nvidia_image)
        else:
            judge(f"{P}:devicePlugin.mode", "the NVIDIA device plugin image", facts["nvidia-device-plugin"])
    else:
        judge(f"{P}:devicePlugin.mode", "the NVIDIA GPU Operator and its operands", facts["nvidia-gpu-operator"])
    monitoring = config.monitoring
    if monitoring.enabled and plugin.mode == "daemonset":
        if monitoring.dcgm_exporter_image is not None:
            unchecked(f"{P}:monitoring.dcgmExporterImage", monitoring.dcgm_exporter_image)
        else:
            judge(f"{P}:monitoring.enabled", "the DCGM exporter image", facts["dcgm-exporter"])
    smoke = config.validation.smoke_job
    if smoke.enabled:
        if smoke.image != SmokeJobConfig().image:
            unchecked(f"{P}:validation.smokeJob.image", smoke.image)
        else:
            judge(f"{P}:validation.smokeJob.image", "the smoke Job's CUDA image", facts["smoke-job-cuda"])
    if pool.nvme_cache:
        judge(
            f"{path}.nvmeCache",
            f"Azure Container Storage {config.storage.flavour}",
            facts[f"azure-container-storage-{config.storage.flavour}"],
        )
    if driver == "Install":
        os_entry = facts["aks-nvidia-driver-ubuntu" if pool.os_sku == "Ubuntu" else "aks-nvidia-driver-azurelinux"]
        judge(f"{path}.osSku", f"the NVIDIA driver AKS installs on {pool.os_sku}", os_entry)
    return problems


def amd_operator_rules(config: PlatformConfig) -> list[Problem]:
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


def node_image_rules(pool: GpuPoolConfig, size: VmSize, path: str) -> list[Problem]:
    """A pool whose driver AKS installs gets the newest node image AKS announces (node image versions cannot be pinned
    through the pinned provider: data/gpu_node_images.yaml): refused where that image is below the GPU family's minimum
    or known to break the family, since every node of the pool would come up on it."""
    images = gpu_node_images()
    problem = images.problem(size.gpu.key, images.current_image(pool.os_sku))
    if problem is None:
        return []
    return [
        Problem(
            f"{path}.vmSize",
            f"{size.name}: the newest AKS node image ({images.current}, {images.current_source}) does not serve it: "
            f"{problem.message} ({problem.source}); wait for a newer image, or use another size or gpuDriver None with "
            "a driver you install",
        )
    ]
