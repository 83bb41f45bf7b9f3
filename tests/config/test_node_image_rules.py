"""A GPU family's node image facts (components/aks_gpu/data/gpu_node_images.yaml) in the plan: a pool whose driver AKS
installs comes up on the newest image AKS announces, so the stack is refused where that image is below the family's
minimum or known to break it, naming the pool's key."""

from __future__ import annotations

from dataclasses import replace

import pytest

from aks_gpu.aks_facts import gpu_node_images
from aks_gpu.config.rules import pools
from tests.config.test_rules import SOURCE, errors_of, pool
from tests.conftest import minimal_raw

A10_POOL = pool(name="viz", vmSize="Standard_NV36ads_A10_v5")
# Where the recorded region list has the size (data/vm_size_regions.yaml), so only the image rule speaks.
REGION = {"azure-native:location": "spaincentral"}


def test_the_recorded_facts_are_the_published_ones() -> None:
    """Azure/AKS#5875: A10 pools need 202606.08.1 or later; Azure/AKS#5869 and #5860: 202607.02.0 breaks them on Ubuntu."""
    facts = gpu_node_images()
    a10 = facts.families["A10"]
    assert a10.minimum == "202606.08.1" and a10.minimum_source.endswith("/Azure/AKS/issues/5875")
    assert [bad.version for bad in a10.known_bad] == ["202607.02.0"]
    assert facts.problem("A10", "AKSUbuntu-2404gen2containerd-202607.02.0") is not None
    assert facts.problem("A10", "AKSUbuntu-2204gen2containerd-202606.08.0") is not None
    assert facts.problem("A10", "AKSUbuntu-2204gen2containerd-202606.08.1") is None
    assert facts.problem("A100", "AKSUbuntu-2204gen2containerd-202607.02.0") is None  # another family


def test_an_a10_pool_plans_on_the_current_image() -> None:
    from aks_gpu.resolved.stack import validate_stack

    validate_stack(minimal_raw(**REGION, **{"aks-gpu:gpuPools": [A10_POOL]}), SOURCE)


@pytest.mark.parametrize(("current", "said"), [("202607.02.0", "known to break A10"), ("202606.01.0", "older than 202606.08.1")])
def test_an_a10_pool_is_refused_while_the_current_image_does_not_serve_it(
    monkeypatch: pytest.MonkeyPatch, current: str, said: str
) -> None:
    monkeypatch.setattr(pools, "gpu_node_images", lambda: replace(gpu_node_images(), current=current))
    [message] = errors_of(minimal_raw(**REGION, **{"aks-gpu:gpuPools": [A10_POOL]}))
    assert message.startswith(f"{SOURCE}: aks-gpu:gpuPools[0].vmSize: Standard_NV36ads_A10_v5: the newest AKS node image")
    assert said in message and "github.com/Azure/AKS/issues/58" in message


def test_a_pool_with_its_own_driver_is_not_judged_by_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    from aks_gpu.resolved.stack import validate_stack

    monkeypatch.setattr(pools, "gpu_node_images", lambda: replace(gpu_node_images(), current="202607.02.0"))
    validate_stack(
        minimal_raw(
            **REGION, **{"aks-gpu:gpuPools": [A10_POOL | {"gpuDriver": "None"}], "aks-gpu:devicePlugin": {"mode": "gpu-operator"}}
        ),
        SOURCE,
    )
