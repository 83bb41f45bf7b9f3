"""Rules that keep a plan to what AKS accepts and does: upgrade settings, spot prices, reserved keys, channels,
deployer access and arm64 (Grace) pools. The refusals with an ARM source are also in test_refusals.py."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.aks_facts import arm64_support, kubernetes_calendar
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
    lts = {"kubernetesVersion": "1.34", "skuTier": "Premium", "supportPlan": "AKSLongTermSupport", "upgradeChannel": channel}
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
    assert has(errors, key, "arm64 (Grace) VM", "components/data/arm64_support.yaml")


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
