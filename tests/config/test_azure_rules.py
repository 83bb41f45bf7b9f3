"""Rules that keep a plan to what AKS accepts and does: upgrade settings, spot prices, reserved keys, channels,
deployer access and arm64 (Grace) pools. The refusals with an ARM source are also in test_refusals.py."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.aks_facts import arm64_support, kubernetes_calendar
from aks_gpu.catalog import Catalog
from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw

SOURCE = "stacks/Pulumi.test.yaml"
ON = kubernetes_calendar().read_on
GB200 = "Standard_ND128isr_NDR_GB200_v6"


def pool(**fields: Any) -> dict[str, Any]:
    base = {"name": "gpu", "vendor": "nvidia", "vmSize": "Standard_NC24ads_A100_v4", "workload": "training", "maxCount": 2}
    return base | fields


def with_pool(extra: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return minimal_raw(**{"aks-gpu:gpuPools": [pool(**fields)], **(extra or {})})


def problems(raw: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings), each rendered as `path: message`."""
    try:
        validated = validate_stack(raw, SOURCE, today=ON)
    except ConfigError as caught:
        rendered = [(p.severity, f"{p.path}: {p.message}") for p in caught.problems]
        return [m for s, m in rendered if s == "error"], [m for s, m in rendered if s == "warning"]
    return [], [f"{p.path}: {p.message}" for p in validated.warnings]


def has(messages: list[str], *parts: str) -> bool:
    return any(all(part in m for part in parts) for m in messages)


# ---------------------------------------------------------------- upgrades


def test_max_unavailable_alone_is_an_in_place_upgrade() -> None:
    validated = validate_stack(with_pool(upgrade={"maxUnavailable": "1"}), SOURCE, today=ON)
    upgrade = validated.config.gpu_pools[0].upgrade
    assert upgrade.effective_max_surge == "0" and upgrade.max_unavailable == "1"


def test_surge_and_unavailable_together_is_the_preview_fallback_and_warned() -> None:
    errors, warnings = problems(with_pool(upgrade={"maxSurge": "1", "maxUnavailable": "1"}))
    assert errors == [] and has(warnings, "upgrade.maxUnavailable", "preview")


@pytest.mark.parametrize("value", ["-1", "101%", "1.5", "01"])
def test_surge_values_follow_the_api_format(value: str) -> None:
    errors, _ = problems(with_pool(upgrade={"maxSurge": value}))
    assert has(errors, "aks-gpu:gpuPools[0].upgrade.maxSurge")


def test_drain_settings_on_a_spot_pool_are_warned_as_without_effect() -> None:
    errors, warnings = problems(with_pool(spot=True, upgrade={"drainTimeoutInMinutes": 60}))
    assert errors == [] and has(warnings, "upgrade.drainTimeoutInMinutes", "no effect on a spot pool")
    # A spot training pool gets no undrainable-node default (it is sent no upgrade settings), and one it sets is warned.
    errors, warnings = problems(with_pool(spot=True, upgrade={"undrainableNodeBehavior": "Cordon"}))
    assert errors == [] and has(warnings, "upgrade.undrainableNodeBehavior", "no effect on a spot pool")
    assert problems(with_pool(spot=True)) == ([], [])


# ---------------------------------------------------------------- spot prices


@pytest.mark.parametrize("price", [-1, 0.5, 0.12345, 3])
def test_spot_prices_aks_accepts(price: float) -> None:
    assert problems(with_pool(spot=True, spotMaxPrice=price))[0] == []


@pytest.mark.parametrize("price", [0, -2, 0.000001, 1.123456])
def test_spot_prices_aks_refuses(price: float) -> None:
    assert has(problems(with_pool(spot=True, spotMaxPrice=price))[0], "spotMaxPrice", "five decimal places")


# ---------------------------------------------------------------- reserved label and taint keys


@pytest.mark.parametrize(
    "key",
    [
        "kubernetes.io/role",
        "node.kubernetes.io/exclude",
        "topology.kubernetes.io/zone",
        "kubernetes.azure.com/mode",
        "x.k8s.io/a",
    ],
)
def test_label_keys_in_reserved_domains_are_refused(key: str) -> None:
    assert has(problems(with_pool(labels={key: "x"}))[0], "gpuPools[0].labels", "reserve for themselves")


@pytest.mark.parametrize("key", ["team", "example.com/cost-center", "kubernetes.example.com/x", "notk8s.io/a"])
def test_other_label_keys_are_fine(key: str) -> None:
    assert problems(with_pool(labels={key: "x"}))[0] == []


# Kubernetes label values (and taint values, validated the same way): up to 63 characters, alphanumeric at both ends.
# https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set
@pytest.mark.parametrize("value", ["", "a", "gpu-team_1.x", "a" * 63, "true"])
def test_label_and_taint_values_kubernetes_takes_are_fine(value: str) -> None:
    assert problems(with_pool(labels={"team": value}, taints=[f"team={value}:NoSchedule"]))[0] == []


@pytest.mark.parametrize("value", ["a b", "a" * 64, "-a", "a.", "ä", "a/b"])
def test_label_and_taint_values_kubernetes_refuses_are_refused(value: str) -> None:
    errors = problems(with_pool(labels={"team": value}, taints=[f"team={value}:NoSchedule"]))[0]
    assert has(errors, "gpuPools[0].labels", "not a Kubernetes label value"), errors
    assert has(errors, "gpuPools[0].taints[0]", "up to 63 letters"), errors


@pytest.mark.parametrize(
    "label",
    [
        "nvidia.com/gpu.deploy.driver",
        "nvidia.com/gpu.deploy.container-toolkit",
        "nvidia.com/mig.config",
        "acstor.azure.com/io-engine",
    ],
)
def test_labels_the_platform_sets_in_some_mode_are_refused_in_every_mode(label: str) -> None:
    # nvidia.com/gpu.deploy.driver: "true" would replace the "false" the operator mode sets (issue: pool labels won).
    assert has(problems(with_pool(labels={label: "true"}))[0], f"'{label}' is set by aks-gpu itself")


@pytest.mark.parametrize("taint", ["kubernetes.azure.com/scalesetpriority=spot:NoSchedule", "node.kubernetes.io/x=y:NoExecute"])
def test_taints_aks_owns_are_refused(taint: str) -> None:
    assert has(problems(with_pool(taints=[taint]))[0], "gpuPools[0].taints[0]", "[refusal reserved-taint-key]")


def test_the_gpu_taint_is_the_platforms() -> None:
    assert has(problems(with_pool(taints=["amd.com/gpu=x:NoSchedule"]))[0], "taints[0]", "GPU taint aks-gpu sets")


# ---------------------------------------------------------------- channels and access


def test_the_legacy_node_image_channel_is_warned() -> None:
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", "upgradeChannel": "node-image"}})
    assert has(problems(raw)[1], "cluster.upgradeChannel", "legacy")


@pytest.mark.parametrize(
    ("channel", "says"), [("stable", "newer minor"), ("rapid", "newer minor"), ("none", "two newest patches"), ("patch", None)]
)
def test_long_term_support_is_kept_by_the_patch_channel_only(channel: str, says: str | None) -> None:
    lts = {"kubernetesVersion": "1.35", "skuTier": "Premium", "supportPlan": "AKSLongTermSupport", "upgradeChannel": channel}
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", **lts}})
    errors, warnings = problems(raw)
    assert errors == []
    assert has(warnings, "cluster.upgradeChannel", "AKSLongTermSupport") is (says is not None), warnings
    if says is not None:
        assert has(warnings, "cluster.upgradeChannel", says)


def test_security_patch_on_azure_linux_gpu_nodes_is_warned() -> None:
    raw = with_pool(osSku="AzureLinux")
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], "nodeOsUpgradeChannel": "SecurityPatch"}
    assert has(problems(raw)[1], "gpuPools[0].osSku", "SecurityPatch")
    raw["aks-gpu:cluster"]["nodeOsUpgradeChannel"] = "NodeImage"
    assert not has(problems(raw)[1], "osSku")


def test_no_deployer_access_and_no_admin_group_is_warned() -> None:
    cluster = {"resourceGroup": "rg", "name": "aks", "deployerAccess": {"enabled": False}}
    assert has(problems(minimal_raw(**{"aks-gpu:cluster": cluster}))[1], "cluster.deployerAccess.enabled", "403")
    with_group = {**cluster, "entraAdminGroupObjectIds": ["4a8c0f62-1111-2222-3333-444444444444"]}
    assert not has(problems(minimal_raw(**{"aks-gpu:cluster": with_group}))[1], "deployerAccess")


# ---------------------------------------------------------------- arm64 (Grace) pools


def test_a_gb200_pool_with_the_default_pins_plans_with_the_driver_question_as_a_warning() -> None:
    errors, warnings = problems(with_pool(vmSize=GB200))
    assert errors == []
    # AKS's driver install on arm64 is unsettled (AgentBaker #8950 vs #8745): said, not refused.
    assert has(warnings, "gpuPools[0].osSku", "arm64", "aks-nvidia-driver-ubuntu")


@pytest.mark.parametrize(
    ("fields", "extra", "key"),
    [
        ({}, {"aks-gpu:devicePlugin": {"mode": "gpu-operator"}}, "aks-gpu:devicePlugin.mode"),
        ({"nvmeCache": True}, {}, "aks-gpu:gpuPools[0].nvmeCache"),
        ({"osSku": "AzureLinux"}, {}, "aks-gpu:gpuPools[0].osSku"),
    ],
)
def test_what_is_not_known_to_run_on_arm64_is_refused_with_why(fields: dict[str, Any], extra: dict[str, Any], key: str) -> None:
    errors, _ = problems(with_pool(extra, vmSize=GB200, **fields))
    assert has(errors, key, "arm64 (Grace) VM", "components/aks_gpu/data/arm64_support.yaml")


def test_an_image_the_stack_chooses_cannot_be_checked_and_is_warned() -> None:
    extra = {"aks-gpu:devicePlugin": {"nvidiaImage": "registry.example.com/plugin:1"}}
    errors, warnings = problems(with_pool(extra, vmSize=GB200))
    assert errors == [] and has(warnings, "devicePlugin.nvidiaImage", "linux/arm64")


def test_every_arm64_status_is_sourced() -> None:
    for entry in arm64_support().values():
        assert entry.source.startswith("https://") and entry.note, entry.name


# ---------------------------------------------------------------- names ARM derives (data/arm_refusals.yaml)


def with_cluster(**fields: Any) -> dict[str, Any]:
    return minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg-test", "name": "aks-test", **fields}})


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ({"name": "a" * 54}, False),  # 54 characters: the longest prefix AKS takes
        ({"name": "a" * 55}, True),
        ({"name": "aks_gpu"}, True),  # a valid cluster name, not a valid prefix
        ({"name": "aks_gpu", "dnsPrefix": "aks-gpu"}, False),
        ({"dnsPrefix": "aks.gpu"}, True),
        ({"dnsPrefix": "-aks"}, True),
        ({"dnsPrefix": "1aks"}, False),
        ({"name": "aks_gpu", "existing": True}, False),  # adopted: the prefix is already Azure's
    ],
)
def test_the_dns_prefix_is_one_aks_accepts(fields: dict[str, Any], refused: bool) -> None:
    errors, _ = problems(with_cluster(**fields))
    assert has(errors, "aks-gpu:cluster.dnsPrefix", "[refusal dns-prefix-format]") is refused, errors


def test_the_node_resource_group_name_stays_within_80_characters() -> None:
    # MC_ + group + _ + name + _ + swedencentral (13): 3 + 30 + 1 + 33 + 1 + 13 = 81, then 80.
    too_long = with_cluster(resourceGroup="r" * 30, name="a" * 33)
    errors, _ = problems(too_long)
    assert has(errors, "aks-gpu:cluster.name", "81 characters", "[refusal node-resource-group-too-long]"), errors
    assert problems(with_cluster(resourceGroup="r" * 30, name="a" * 32)) == ([], [])
    # The cluster's own region counts, as its ARM name ("West Europe" is westeurope, 10 characters).
    errors, _ = problems(with_cluster(resourceGroup="r" * 30, name="a" * 36, location="West Europe"))
    assert has(errors, "81 characters"), errors


@pytest.mark.parametrize(("ids", "refused"), [(["platform-admins"], True), (["7304e4e7-b148-4ada-a135-6049c702d21e"], False)])
def test_admin_groups_are_object_ids(ids: list[str], refused: bool) -> None:
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", "entraAdminGroupObjectIds": ids}})
    assert has(problems(raw)[0], "cluster.entraAdminGroupObjectIds[0]") is refused


# ---------------------------------------------------------------- issue 24: the families of each new refusal


@pytest.mark.parametrize(
    ("cluster", "path", "refused"),
    [
        # Each reserved range, and a range that merely contains one.
        ({"podCidr": "169.254.0.0/20"}, "cluster.podCidr", True),
        ({"podCidr": "192.0.2.0/25"}, "cluster.podCidr", True),
        ({"podCidr": "172.31.128.0/17"}, "cluster.podCidr", True),
        ({"podCidr": "172.0.0.0/8"}, "cluster.podCidr", True),
        ({"podCidr": "172.29.0.0/16"}, "cluster.podCidr", False),
        ({"serviceCidr": "172.30.0.0/16", "dnsServiceIp": "172.30.0.10"}, "cluster.serviceCidr", True),
        # Overlap with AKS's default service range, with a given one, and none.
        ({"podCidr": "10.0.128.0/17"}, "cluster.podCidr", True),
        ({"podCidr": "10.96.0.0/12", "serviceCidr": "10.100.0.0/16", "dnsServiceIp": "10.100.0.10"}, "cluster.podCidr", True),
        ({"podCidr": "10.244.0.0/16", "serviceCidr": "10.100.0.0/16", "dnsServiceIp": "10.100.0.10"}, "cluster.podCidr", False),
        # The DNS address: outside, the network address, the first address, the default against a new range.
        ({"serviceCidr": "10.100.0.0/16", "dnsServiceIp": "10.101.0.10"}, "cluster.dnsServiceIp", True),
        ({"serviceCidr": "10.100.0.0/16", "dnsServiceIp": "10.100.0.0"}, "cluster.dnsServiceIp", True),
        ({"serviceCidr": "10.100.0.0/16", "dnsServiceIp": "10.100.0.1"}, "cluster.dnsServiceIp", True),
        ({"serviceCidr": "10.100.0.0/16", "dnsServiceIp": "10.100.0.2"}, "cluster.dnsServiceIp", False),
        ({"serviceCidr": "10.100.0.0/16"}, "cluster.dnsServiceIp", True),
        ({"dnsServiceIp": "10.0.0.20"}, "cluster.dnsServiceIp", False),
    ],
)
def test_network_ranges_against_aks_reserved_ranges_and_each_other(cluster: dict[str, str], path: str, refused: bool) -> None:
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", **cluster}})
    errors, _ = problems(raw)
    assert has(errors, path, "[refusal ") is refused, errors


def test_tags_count_the_platform_tag_and_compare_names_without_case() -> None:
    def tagged(tags: dict[str, str]) -> list[str]:
        return problems(minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", "tags": tags}}))[0]

    forty_nine = {f"t{i}": "x" for i in range(49)}
    assert tagged(forty_nine) == []
    assert has(tagged({**forty_nine, "one-more": "x"}), "cluster.tags", "arm-tag-count")
    # The platform's own tag spelled in another case is the same tag: 49 + Managed-By is still 50.
    assert not has(tagged({**forty_nine, "Managed-By": "x"}), "cluster.tags", "arm-tag-count")
    for name in ("a<b", "a>b", "50%", "r&d", "back\\slash", "why?", "cost/center"):
        assert has(tagged({name: "x"}), "cluster.tags", "arm-tag-name-characters"), name
    assert has(tagged({"n" * 513: "x"}), "cluster.tags", "arm-tag-name-characters")
    assert has(tagged({"n": "v" * 257}), "cluster.tags", "arm-tag-name-characters")
    assert tagged({"cost-center": "gpu:team_a.b=1"}) == []


@pytest.mark.parametrize(
    ("size", "refused"),
    [
        ("Standard_DS1_v2", True),
        ("Standard_F1s", True),
        ("Standard_E4-1ds_v5", True),  # constrained: 1 active vCPU
        ("Standard_B4ms", True),
        ("Standard_B2ts_v2", True),
        ("Standard_D2s_v3", False),
        ("Standard_D4ds_v5", False),
        ("Standard_E8-2ds_v5", False),
    ],
)
def test_system_pool_sizes_under_the_aks_minimum_are_refused(size: str, refused: bool) -> None:
    raw = minimal_raw(**{"aks-gpu:cluster": {"resourceGroup": "rg", "name": "aks", "systemPool": {"vmSize": size}}})
    assert has(problems(raw)[0], "cluster.systemPool.vmSize", "system-pool-vm-too-small") is refused


@pytest.mark.parametrize(
    ("pool", "refused"),
    [
        ({"maxPods": 10, "minCount": 3, "maxCount": 3}, False),
        ({"maxPods": 10, "minCount": 2}, True),
        ({"maxPods": 15, "minCount": 0}, True),
        ({"maxPods": 15, "autoscaling": False, "count": 2}, False),
        ({"maxPods": 29, "autoscaling": False, "count": 1}, True),
        ({"maxPods": 30, "minCount": 0}, False),
    ],
)
def test_max_pods_below_30_needs_room_for_30_pods_in_the_pool(pool: dict[str, object], refused: bool) -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] = {**raw["aks-gpu:gpuPools"][0], **pool}
    assert has(problems(raw)[0], "gpuPools[0].maxPods", "max-pods-minimum") is refused


@pytest.mark.parametrize("node_os", ["None", "Unmanaged", "SecurityPatch"])
def test_the_node_image_channel_fixes_the_node_os_channel(node_os: str) -> None:
    cluster = {"resourceGroup": "rg", "name": "aks", "upgradeChannel": "node-image", "nodeOsUpgradeChannel": node_os}
    assert has(problems(minimal_raw(**{"aks-gpu:cluster": cluster}))[0], "cluster.nodeOsUpgradeChannel", "node-image-channel")
    cluster["nodeOsUpgradeChannel"] = "NodeImage"
    assert problems(minimal_raw(**{"aks-gpu:cluster": cluster}))[0] == []


@pytest.mark.parametrize(
    ("version", "system_os", "pool_os", "refused"),
    [
        ("1.33", "Ubuntu", "AzureLinux", True),
        ("1.34", "AzureLinux", "Ubuntu", True),
        ("1.34", "AzureLinux", "AzureLinux", False),
        ("1.35", "Ubuntu", "Ubuntu", False),
    ],
)
def test_lts_on_minors_that_need_ubuntu_2404_is_refused_while_the_api_cannot_ask_for_it(
    version: str, system_os: str, pool_os: str, refused: bool
) -> None:
    cluster = {
        "resourceGroup": "rg",
        "name": "aks",
        "kubernetesVersion": version,
        "skuTier": "Premium",
        "supportPlan": "AKSLongTermSupport",
        "systemPool": {"osSku": system_os},
    }
    raw = minimal_raw(**{"aks-gpu:cluster": cluster})
    raw["aks-gpu:gpuPools"][0]["osSku"] = pool_os
    assert has(problems(raw)[0], "cluster.supportPlan", "lts-needs-ubuntu-2404") is refused


def test_amd_pools_on_the_daemonset_plugin_are_warned_that_nothing_loads_amdgpu() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"vendor": "amd", "vmSize": "Standard_ND96isr_MI300X_v5"}
    assert has(problems(raw)[1], "devicePlugin.amdMode", "installs no AMD driver")
    raw["aks-gpu:devicePlugin"] = {"amdMode": "gpu-operator", "certManagerInstalled": True, "amdDriverImage": "r.io/amdgpu"}
    assert not has(problems(raw)[1], "devicePlugin.amdMode", "installs no AMD driver")


@pytest.mark.parametrize(
    ("size", "refused"),
    [
        ("Standard_NV6", True),
        ("Standard_NV24_Promo", True),
        ("standard_nc24s_v3", True),  # sizes compare without case
        ("Standard_NV32as_v4", True),
        ("Standard_NC24rs_v3", False),  # not in the NCv3 retirement page's three sizes
        ("Standard_NV36ads_A10_v5", False),
        ("Standard_NV6ads_A10_v5", False),
    ],
)
def test_retired_and_unsupported_gpu_sizes_are_refused(size: str, refused: bool) -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"vmSize": size, "gpuCount": 1, "gpuModel": "T4"}
    assert has(problems(raw)[0], "gpuPools[0].vmSize", "gpu-size-not-offered") is refused


def test_no_catalog_size_is_one_the_catalog_says_aks_cannot_use(catalog: Catalog) -> None:
    assert [name for name in catalog.vm_sizes if catalog.not_offered_reason(name)] == []
    assert all(catalog.vm_size(name) is not None for name in catalog.aks_amd_sizes)


@pytest.mark.parametrize(
    ("size", "os_disk", "refused"),
    [
        # 64 GiB temp disk and an 894 GiB NVMe disk: which one AKS picks is not documented, so only a disk that fits
        # on neither is refused.
        ("Standard_NC24ads_A100_v4", None, False),
        ("Standard_NC24ads_A100_v4", 894, False),
        ("Standard_NC24ads_A100_v4", 895, True),
        ("Standard_NC48ads_A100_v4", None, False),  # 128 GiB: AKS sizes the disk to the temp disk
        ("Standard_NC4as_T4_v3", 176, False),
        ("Standard_NC4as_T4_v3", 256, True),
        ("Standard_ND96isr_H100_v5", 2048, False),  # 1,024 GiB temp, 3,576 GiB per NVMe disk
    ],
)
def test_an_ephemeral_os_disk_must_fit_the_temp_disk(size: str, os_disk: int | None, refused: bool) -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"vmSize": size, "osDiskType": "Ephemeral"}
    if os_disk is not None:
        raw["aks-gpu:gpuPools"][0]["osDiskSizeGb"] = os_disk
    assert has(problems(raw)[0], "gpuPools[0].osDiskType", "ephemeral-os-disk-too-large") is refused


def test_an_ephemeral_os_disk_on_a_size_without_temp_disk_facts_is_warned_and_managed_is_never_checked() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"vmSize": "Standard_ND96asr_v4", "osDiskType": "Ephemeral"}
    assert has(problems(raw)[1], "gpuPools[0].osDiskType", "cannot be checked")
    raw["aks-gpu:gpuPools"][0] |= {"vmSize": "Standard_NC24ads_A100_v4", "osDiskType": "Managed", "osDiskSizeGb": 1024}
    assert not has(problems(raw)[0] + problems(raw)[1], "osDiskType")


def test_every_temp_disk_figure_is_of_a_catalog_size(catalog: Catalog) -> None:
    assert [name for name in catalog.temp_disk_gib if catalog.vm_size(name) is None] == []


def test_a_temp_disk_under_128_gib_cannot_take_akss_default_ephemeral_disk(catalog: Catalog) -> None:
    import dataclasses

    from aks_gpu.config.rules import check_rules

    small = dataclasses.replace(catalog, temp_disk_gib={"Standard_NC4as_T4_v3": 100})
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0] |= {"vmSize": "Standard_NC4as_T4_v3", "osDiskType": "Ephemeral"}
    config = validate_stack(raw, SOURCE, today=ON).config
    found = check_rules(config, small, today=ON)
    assert [p.path for p in found if "ephemeral-os-disk-too-large" in p.message] == ["aks-gpu:gpuPools[0].osDiskType"]
    fits = raw["aks-gpu:gpuPools"][0] | {"osDiskSizeGb": 100}
    config = validate_stack({**raw, "aks-gpu:gpuPools": [fits]}, SOURCE, today=ON).config
    assert not [p for p in check_rules(config, small, today=ON) if "ephemeral-os-disk-too-large" in p.message]


def test_cpu_pools_count_in_the_overlay_pod_range_and_the_node_pool_limit() -> None:
    # A /21 holds 8 node ranges: the system pool (3 + 1 surge) and the GPU pool (2 + 1) fit; a CPU pool of 3 (+ 1)
    # makes 11 nodes, which AKS could not give a /24 each.
    cluster = {"resourceGroup": "rg-test", "name": "aks-test", "podCidr": "10.244.0.0/21"}
    errors, _ = problems(minimal_raw(**{"aks-gpu:cluster": cluster}))
    assert not has(errors, "node ranges")
    cpu = [{"name": "cpu", "vmSize": "Standard_D8ds_v5", "maxCount": 3}]
    errors, _ = problems(minimal_raw(**{"aks-gpu:cluster": cluster, "aks-gpu:cpuPools": cpu}))
    assert has(errors, "holds 8 /24 node ranges", "reach 11 nodes"), errors
    many = [{"name": f"cpu{i}", "vmSize": "Standard_D8ds_v5", "maxCount": 1} for i in range(99)]
    errors, _ = problems(minimal_raw(**{"aks-gpu:cpuPools": many}))
    assert has(errors, "99 CPU pools", "make 101 node pools"), errors


def test_an_adopted_clusters_system_pool_counts_neither_nodes_nor_surge_in_the_overlay_pod_range() -> None:
    # A /21 holds 8 node ranges: the GPU pool (2 + 1 surge) and a CPU pool of 4 (+ 1) reach 8. The adopted cluster's
    # system pool is Azure's already; its nodes are not the stack's to count, and so neither is its surge.
    cpu = [{"name": "cpu", "vmSize": "Standard_D8ds_v5", "maxCount": 4}]
    cluster = {"resourceGroup": "rg-test", "name": "aks-test", "podCidr": "10.244.0.0/21"}
    errors, _ = problems(minimal_raw(**{"aks-gpu:cluster": {**cluster, "existing": True}, "aks-gpu:cpuPools": cpu}))
    assert not has(errors, "node ranges"), errors
    errors, _ = problems(minimal_raw(**{"aks-gpu:cluster": cluster, "aks-gpu:cpuPools": cpu}))
    assert has(errors, "holds 8 /24 node ranges", "reach 12 nodes"), errors
