"""aks-gpu as a library other programs import: the public names at the top, loaded lazily, and the mocks a consumer's
unit tests use (``aks_gpu.testing``), with a clear error naming the call when a consumer's own mocks leave one out.
The same, from outside the repository against the built wheel: tests/package/test_wheel.py."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

import aks_gpu
from aks_gpu.azure.cluster import CALLS, CLIENT_CONFIG_CALL, CREDENTIALS_CALL, GET_CLUSTER_CALL, GpuCluster
from aks_gpu.package import PUBLIC_COMPONENTS
from aks_gpu.platform import GpuPlatform
from aks_gpu.testing import AksGpuMocks, UnansweredCallError
from tests.conftest import PROJECT_DIR, MockHarness, raw_stack, stack_config

NEW_CLUSTER = {"cluster": {"resource_group": "rg-team", "name": "aks-team"}, "location": "swedencentral"}
EXISTING_CLUSTER = {"cluster": {"resource_group": "rg-team", "name": "aks-team", "existing": True}, "location": "swedencentral"}


def test_every_public_component_and_its_args_import_from_the_top() -> None:
    for component in PUBLIC_COMPONENTS:
        assert getattr(aks_gpu, component.__name__) is component
        assert component.__name__ in aks_gpu.__all__
    from aks_gpu import (  # the line the README and docs/composing.md show
        GpuAdmissionPolicy,
        GpuCluster,
        GpuDevicePlugin,
        GpuNodePool,
        GpuPlatformArgs,
        GpuValidation,
        GpuWorkloadNamespace,
        GpuWorkloadNamespaceArgs,
        NvmeCache,
    )

    assert GpuWorkloadNamespaceArgs.__annotations__.keys() >= {"workload", "node_selector", "tolerations"}
    assert "gpu_pools" in GpuPlatformArgs.__annotations__
    assert {GpuAdmissionPolicy, GpuCluster, GpuDevicePlugin, GpuNodePool, GpuValidation, GpuWorkloadNamespace, NvmeCache} <= set(
        PUBLIC_COMPONENTS
    )
    assert sorted(aks_gpu.__all__) == sorted(["__version__", *aks_gpu._PUBLIC])
    with pytest.raises(AttributeError, match="no attribute 'GpuPlatfrom'"):
        aks_gpu.GpuPlatfrom  # noqa: B018


def test_importing_the_package_loads_no_pulumi_sdk_until_a_component_is_used() -> None:
    # The aksgpu light commands import aks_gpu first (tests/test_light_commands.py); the components load on first use.
    probe = (
        "import sys, aks_gpu; heavy = {'pulumi', 'pulumi_azure_native', 'pulumi_kubernetes'} & set(sys.modules);"
        " assert not heavy, heavy; aks_gpu.GpuNodePool; assert 'pulumi_azure_native' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_DIR, check=True)


def test_the_package_is_typed_for_consumers() -> None:
    assert (PROJECT_DIR / "components" / "aks_gpu" / "py.typed").is_file()


# ---------------------------------------------------------------- mocks for a consumer's unit tests


class GuideMocks(pulumi.runtime.Mocks):
    """The mocks of Pulumi's unit-testing guide (https://www.pulumi.com/docs/iac/guides/testing/unit/, read
    2026-12-01): every resource's outputs are its inputs, every call returns ``{}``."""

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}_id", dict(args.inputs)

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return {}, []


class AllButOne(AksGpuMocks):
    """AksGpuMocks that leave one call unanswered, as a consumer's own mocks might."""

    def __init__(self, unanswered: str) -> None:
        super().__init__()
        self.unanswered = unanswered

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return ({}, []) if args.token == self.unanswered else super().call(args)


class Recording(AksGpuMocks):
    def __init__(self) -> None:
        super().__init__()
        self.tokens: set[str] = set()

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.tokens.add(args.token)
        return super().call(args)


def test_the_shipped_mocks_run_the_whole_platform_and_give_a_working_kubeconfig(harness: MockHarness) -> None:
    def program() -> None:
        platform = GpuPlatform("platform", stack_config("prod").model_dump(exclude_defaults=True))  # type: ignore[arg-type]
        pulumi.export("kubeconfig", platform.kubeconfig)

    result = harness.run(program, config={"azure-native:location": "swedencentral"}, mocks=AksGpuMocks())
    assert result.by_type("azure-native:containerservice:AgentPool")
    [provider] = [r for r in result.by_type("pulumi:providers:kubernetes") if r.name.endswith("-k8s")]
    assert provider.inputs["kubeconfig"] == "[secret]"


def unanswered_messages() -> dict[str, str]:
    """What GpuCluster says under mocks that leave calls unanswered: the testing guide's (a new cluster and an existing
    one), and the shipped mocks with one call left out; "" where it did not stop."""
    harness = MockHarness()
    cases: dict[str, tuple[dict[str, Any], pulumi.runtime.Mocks]] = {
        "guide-new": (NEW_CLUSTER, GuideMocks()),
        "guide-existing": (EXISTING_CLUSTER, GuideMocks()),
    }
    for token in CALLS:
        cases[token] = (EXISTING_CLUSTER if token == GET_CLUSTER_CALL else NEW_CLUSTER, AllButOne(token))
    messages = {}
    for case, (cluster, mocks) in cases.items():
        try:
            harness.run(lambda cluster=cluster: GpuCluster("team", cluster), mocks=mocks)  # type: ignore[misc]
            messages[case] = ""
        except UnansweredCallError as error:
            messages[case] = str(error)
    return messages


# Run in an interpreter of its own: the failed outputs such a run leaves behind are reported while they are collected,
# and under pytest that has left CPython 3.11.7's AST recursion counter off ("SystemError: AST constructor recursion
# depth mismatch" on the next module pytest rewrites), which would fail unrelated tests after these.
_UNANSWERED = "import json; from tests.test_library import unanswered_messages; print(json.dumps(unanswered_messages()))"


@functools.cache
def unanswered() -> dict[str, str]:
    done = subprocess.run([sys.executable, "-c", _UNANSWERED], cwd=PROJECT_DIR, capture_output=True, text=True, check=True)
    messages: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return messages


@pytest.mark.parametrize("case", ["guide-new", "guide-existing"])
def test_the_mocks_of_pulumis_testing_guide_get_an_error_naming_what_to_answer(case: str) -> None:
    # Before: TypeError: 'NoneType' object is not subscriptable, from deep in the SDK.
    message = unanswered()[case]
    assert "aks_gpu.testing.AksGpuMocks" in message and "docs/composing.md#unit-tests" in message
    # A new cluster: its name (new_resource echoed the inputs) or the client config, whichever is awaited first.
    named = [GET_CLUSTER_CALL] if case == "guide-existing" else ["ManagedCluster team-aks", CLIENT_CONFIG_CALL]
    assert any(call in message for call in named), message


@pytest.mark.parametrize("token", CALLS)
def test_each_call_left_unanswered_is_named(token: str) -> None:
    assert unanswered()[token].startswith(f"{token} returned no `"), unanswered()[token]


def test_the_calls_the_mocks_answer_are_every_call_the_components_make(harness: MockHarness) -> None:
    recording = Recording()
    harness.run(lambda: GpuCluster("new", NEW_CLUSTER), mocks=recording)  # type: ignore[arg-type]
    harness.run(lambda: GpuCluster("old", EXISTING_CLUSTER), mocks=recording)  # type: ignore[arg-type]
    raw = raw_stack("prod")
    raw["aks-gpu:cluster"] = {**raw["aks-gpu:cluster"], "existing": True}
    harness.run_stack("prod", mocks=recording)
    harness.run_stack("prod", raw, mocks=recording)
    assert recording.tokens == set(CALLS) == {CREDENTIALS_CALL, CLIENT_CONFIG_CALL, GET_CLUSTER_CALL}


def test_the_composing_guide_lists_every_call_a_consumers_mocks_must_answer() -> None:
    text = (PROJECT_DIR / "docs" / "composing.md").read_text(encoding="utf-8")
    section = text.split("## Unit tests", 1)[1].split("\n## ", 1)[0]
    for token in CALLS:
        assert f"`{token}`" in section, token
    assert "from aks_gpu.testing import AksGpuMocks" in section
