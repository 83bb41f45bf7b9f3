"""Workload network settings the API server would refuse halfway through a deploy are refused up front."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.config.problems import ConfigError
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import minimal_raw

SOURCE = "stacks/Pulumi.test.yaml"


def with_network(network: dict[str, Any]) -> dict[str, Any]:
    return minimal_raw(**{"aks-gpu:workloads": [{"name": "team-a", "type": "training", "gpuQuota": 2, "network": network}]})


def errors_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        validate_stack(raw, SOURCE)
    return [p.render(caught.value.source) for p in caught.value.errors]


@pytest.mark.parametrize("cidr", ["10.0.0.0/33", "300.1.2.3/8", "10.00.0.0/8", "fd00:::/8"])
def test_egress_cidr_must_be_a_network(cidr: str) -> None:
    [message] = errors_of(with_network({"allowEgress": [{"cidr": "10.1.0.0/16"}, {"cidr": cidr}]}))
    assert message.startswith(f"{SOURCE}: aks-gpu:workloads[0].network.allowEgress[1].cidr: {cidr!r} is not")


def test_egress_cidr_with_host_bits_warns_with_the_network_it_means() -> None:
    warnings = validate_stack(with_network({"allowEgress": [{"cidr": "10.1.2.3/16"}]}), SOURCE).warnings
    [warning] = [w for w in warnings if "allowEgress" in w.path]
    assert warning.path == "aks-gpu:workloads[0].network.allowEgress[0].cidr"
    assert "10.1.0.0/16" in warning.message


@pytest.mark.parametrize("cidr", ["10.1.0.0/16", "0.0.0.0/0", "fd00::/8", "FD00::/8"])
def test_good_cidrs_pass_quietly(cidr: str) -> None:
    validated = validate_stack(with_network({"allowEgress": [{"cidr": cidr, "ports": [443]}]}), SOURCE)
    assert not [w for w in validated.warnings if "allowEgress" in w.path]


@pytest.mark.parametrize(
    ("network", "path"),
    [
        ({"allowEgress": [{"cidr": "10.1.0.0/16", "ports": [0]}]}, "network.allowEgress[0].ports[0]"),
        ({"allowEgress": [{"cidr": "10.1.0.0/16", "ports": [443, 65536]}]}, "network.allowEgress[0].ports[1]"),
        ({"allowFromNamespaces": [{"namespace": "gateway", "ports": [70000]}]}, "network.allowFromNamespaces[0].ports[0]"),
    ],
)
def test_ports_must_be_port_numbers(network: dict[str, Any], path: str) -> None:
    [message] = errors_of(with_network(network))
    assert f"aks-gpu:workloads[0].{path}:" in message
