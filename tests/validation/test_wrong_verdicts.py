"""Inputs that got a passing (or merely warning) verdict they did not deserve: a trailing newline past a `$`, a
number Pulumi reads in octal, a List of mixed kinds, GPU counts no kubelet writes, one GPU listed twice, full-width
digits in a timestamp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aks_gpu.cluster.inventory import read_gpu_nodes
from aks_gpu.cluster.snapshot import (
    NODES_FILE,
    ClusterSnapshot,
    SnapshotError,
    parse_rfc3339,
    read_snapshot,
    shape_problem,
    write_snapshot,
)
from aks_gpu.config.loader import load_stack_file
from aks_gpu.config.problems import ConfigError
from aks_gpu.gpu.versions import parse_version
from aks_gpu.resolved.stack import validate_stack
from aks_gpu.resolved.targets import plugin_targets
from aks_gpu.validation.checks import run_checks
from tests.cluster.snapshots import edited, find_node, healthy_snapshot, node_name
from tests.conftest import minimal_raw, stack_model

PROD = stack_model("prod")


def healthy() -> ClusterSnapshot:
    return edited(healthy_snapshot(PROD, plugin_targets(PROD), {"train": 1, "infer": 1}))


def verdicts(snapshot: ClusterSnapshot, check: str, node: str) -> set[str]:
    return {r.status for r in run_checks(PROD, plugin_targets(PROD), snapshot) if r.id == check and r.node == node}


# ---------------------------------------------------------------- a trailing newline is not the end of a value


@pytest.mark.parametrize(
    "pool_labels",
    [{"team\n": "a"}, {"team": "a\n"}],
)
def test_a_label_with_a_trailing_newline_is_refused(pool_labels: dict[str, str]) -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"][0]["labels"] = pool_labels
    with pytest.raises(ConfigError, match="label"):
        validate_stack(raw, "x")


def test_a_dns_prefix_with_a_trailing_newline_is_refused() -> None:
    raw = minimal_raw()
    raw["aks-gpu:cluster"]["dnsPrefix"] = "aks-test\n"
    with pytest.raises(ConfigError, match="dnsPrefix"):
        validate_stack(raw, "x")


def test_a_node_name_or_quantity_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    snapshot = healthy()
    name = node_name("train", 0)
    with pytest.raises(SnapshotError, match="not a Kubernetes node name"):
        write_snapshot(ClusterSnapshot(**{**snapshot.__dict__, "smi": {f"{name}\n": "x"}}), tmp_path)
    node = dict(find_node(snapshot, name))
    node["status"] = {**node["status"], "allocatable": {"nvidia.com/gpu": "8\n"}}
    assert shape_problem([node], "Node") is not None


FULL_WIDTH_YEAR = "".join(chr(0xFF10 + int(digit)) for digit in "2025")  # what a Japanese IME types
ARABIC_INDIC_ONE = chr(0x0661)


@pytest.mark.parametrize("text", [f"{FULL_WIDTH_YEAR}-03-01T09:30:00Z", f"2025-03-01T09:30:00+0{ARABIC_INDIC_ONE}:00"])
def test_full_width_or_other_script_digits_are_no_timestamp(text: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_rfc3339(text)


def test_versions_are_ascii_digits_only() -> None:
    assert parse_version("535.129.03") is not None
    assert parse_version(f"{FULL_WIDTH_YEAR}.129.03") is None


# ---------------------------------------------------------------- octal


def test_a_leading_zero_number_in_structured_config_is_refused_not_guessed(tmp_path: Path) -> None:
    # Pulumi decodes structured config with yaml.v3, where 010 is octal 8; the plan read it as 10.
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(
        "config:\n  aks-gpu:cluster: {resourceGroup: rg, name: aks}\n  aks-gpu:gpuPools:\n"
        "    - {name: gpu, vendor: nvidia, vmSize: Standard_NC24ads_A100_v4, workload: training, maxCount: 010}\n"
    )
    with pytest.raises(ConfigError, match="leading zero") as error:
        validate_stack(load_stack_file(path), str(path))
    [refused] = [problem for problem in error.value.errors if "leading zero" in problem.message]
    assert refused.path == "aks-gpu:gpuPools[0].maxCount"  # beside the file's other mistake (no location)
    path.write_text(path.read_text().replace("maxCount: 010", 'maxCount: "010"'))
    load_stack_file(path)  # quoted: the text "010", which the config model then reads


# ---------------------------------------------------------------- mixed kinds, impossible GPU counts, one GPU twice


def test_a_list_of_mixed_kinds_is_not_read_as_nodes(tmp_path: Path) -> None:
    # `kubectl get nodes,pods -o json` writes one List of both; a Pod in nodes.json was audited as a node.
    snapshot = healthy()
    write_snapshot(snapshot, tmp_path)
    document = json.loads((tmp_path / NODES_FILE).read_text())
    for item in document["items"]:
        item["kind"] = "Node"
    document["items"].append({"kind": "Pod", "apiVersion": "v1", **snapshot.pods[0]})
    (tmp_path / NODES_FILE).write_text(json.dumps(document))
    with pytest.raises(SnapshotError, match="is a Pod, not a Node"):
        read_snapshot(tmp_path)


@pytest.mark.parametrize("value", ["-8", "7500m", "7.5"])
def test_a_gpu_count_no_kubelet_writes_fails_and_is_refused_by_the_audit(value: str) -> None:
    snapshot = healthy()
    name = node_name("train", 0)
    find_node(snapshot, name)["status"]["allocatable"]["nvidia.com/gpu"] = value
    assert verdicts(snapshot, "gpu-schedulable", name) == {"fail"}
    with pytest.raises(SnapshotError, match="not a whole number of GPUs"):
        read_gpu_nodes(snapshot.nodes)


def test_one_gpu_listed_twice_fails_the_gpu_count() -> None:
    snapshot = healthy()
    name = node_name("train", 0)
    assert verdicts(snapshot, "gpu-count", name) == {"pass"}
    # The second GPU's rows now name the first GPU's PCI address: 8 rows, 7 GPUs.
    snapshot.smi[name] = snapshot.smi[name].replace("00000000:2A:00.0", "00000000:18:00.0")
    assert verdicts(snapshot, "gpu-count", name) == {"fail"}
