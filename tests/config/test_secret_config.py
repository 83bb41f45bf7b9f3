"""Secret config stays secret: a key set with ``pulumi config set --secret`` reaches the program in
``PULUMI_CONFIG_SECRET_KEYS`` (as the Python language host passes it), and what the program builds from it is
registered as secret inputs and exported as secret outputs; messages show ``[secret]`` in its place."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from aks_gpu.mock_engine import SECRET, PlanResult
from aks_gpu.program import SecretConfig, secret_config
from tests.conftest import MockHarness, raw_stack

TAG = "cc-4711-hush"
CLUSTER, GROUP = "aks-hush-dev", "rg-hush-dev"


def secret_cluster_raw(**cluster: Any) -> dict[str, Any]:
    raw = raw_stack("dev")
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], "name": CLUSTER, "resourceGroup": GROUP, "tags": {"costCenter": TAG}}
    raw["aks-gpu:cluster"].update(cluster)
    return raw


@pytest.fixture
def secret_cluster_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # What `pulumi config set --secret --path aks-gpu:cluster.tags.costCenter ...` leads to.
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps(["aks-gpu:cluster"]))


def record(result: PlanResult, type_: str) -> dict[str, Any]:
    # The first of its type: the GPU pool comes before the CPU pool.
    return result.by_type(type_)[0].inputs


def test_secret_config_is_secret_in_every_input_and_output(secret_cluster_key: None) -> None:
    result = MockHarness().run_stack("dev", secret_cluster_raw())
    written = json.dumps(result.to_json()) + json.dumps(result.manifests())
    for text in (TAG, CLUSTER, GROUP):
        assert text not in written, text
    cluster = record(result, "azure-native:containerservice:ManagedCluster")
    assert cluster["tags"] == cluster["resourceName"] == cluster["resourceGroupName"] == SECRET
    # Derived values too: the pool's cluster name comes from the cluster's output, the provider's id from its ARM id.
    assert record(result, "azure-native:containerservice:AgentPool")["resourceName"] == SECRET
    assert record(result, "pulumi:providers:kubernetes")["clusterIdentifier"] == SECRET
    assert result.outputs["clusterName"] == result.outputs["resourceGroupName"] == SECRET
    # What is not secret stays readable in the plan.
    pool = record(result, "azure-native:containerservice:AgentPool")
    assert pool["vmSize"] == "Standard_NC4as_T4_v3" and cluster["sku"]["tier"] == "Free"


def test_a_bad_secret_value_is_not_printed(secret_cluster_key: None) -> None:
    with pytest.raises(pulumi.RunError) as caught:
        MockHarness().run_stack("dev", secret_cluster_raw(name="aks hush dev"))
    message = str(caught.value)
    assert "aks-gpu:cluster.name: '[secret]' is not allowed" in message
    assert "hush" not in message


def test_without_secret_keys_nothing_is_tracked() -> None:
    assert not secret_config(secret_cluster_raw())


def test_short_texts_match_whole_values_only() -> None:
    secrets = SecretConfig(frozenset({"a1", "hush-value"}))
    assert secrets.found_in({"x": ["a1"]}) and secrets.found_in("prefix-hush-value-suffix")
    assert not secrets.found_in("a1b2") and not secrets.found_in({"k": 1})
    assert secrets.mask("'a1' and hush-value, a1b2") == "'[secret]' and [secret], a1b2"


def test_a_long_bad_secret_value_shown_cut_leaves_no_piece_of_it(secret_cluster_key: None) -> None:
    # Messages cut a long value to its head and tail; neither may show.
    secret = "hush-" + "".join(f"{n:02x}" for n in range(60)) + " not a name"
    with pytest.raises(pulumi.RunError) as caught:
        MockHarness().run_stack("dev", secret_cluster_raw(name=secret))
    message = str(caught.value)
    assert "aks-gpu:cluster.name" in message
    assert not any(secret[start : start + 8] in message for start in range(len(secret) - 7))


def test_a_secret_text_in_resource_names_is_warned_about_once_without_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # `pulumi config set --secret --path 'aks-gpu:gpuPools[0].name' hushpool`: the whole gpuPools key is secret, and
    # the pool's name is part of its components' and AgentPool's names, which Pulumi keeps in clear (URNs).
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", json.dumps(["aks-gpu:gpuPools"]))
    raw = raw_stack("dev")
    raw["aks-gpu:gpuPools"][0]["name"] = "hushpool"
    result = MockHarness().run_stack("dev", raw)

    assert any("hushpool" in record.urn for record in result.resources)  # what cannot be secret
    [warning] = [w for w in result.warnings if w.startswith("secret config: resource names hold a secret text")]
    assert "in clear" in warning and "hushpool" not in warning
    assert record(result, "azure-native:containerservice:AgentPool")["agentPoolName"] == SECRET  # inputs stay secret


def test_secret_texts_outside_names_give_no_name_warning(secret_cluster_key: None) -> None:
    result = MockHarness().run_stack("dev", secret_cluster_raw())
    assert not [w for w in result.warnings if w.startswith("secret config: resource names")]
