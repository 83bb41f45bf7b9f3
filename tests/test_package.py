"""The component package: every public component passes Pulumi's schema inference, and the committed
schema (what `pulumi package add` builds other languages' SDKs from) is in step with the code."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2  # type: ignore[import-untyped]
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from pulumi.runtime import rpc
from pulumi.runtime.proto import (
    engine_pb2,
    engine_pb2_grpc,
    errors_pb2,
    provider_pb2,
    provider_pb2_grpc,
    resource_pb2,
    resource_pb2_grpc,
    status_pb2,
)

from aks_gpu.cli import main
from aks_gpu.mock_engine import SECRET, arm_id
from aks_gpu.naming import PACKAGE_NAME
from aks_gpu.package import PUBLIC_COMPONENTS, SCHEMA_FILE, PackageProvider, component_schema, schema_text
from tests.conftest import PROJECT_DIR, MockHarness

EXPECTED = {
    "GpuCluster": ({"cluster", "location"}, {"kubeconfig", "clusterName", "resourceGroupName", "clusterId"}),
    "GpuNodePool": (
        {"pool", "resourceGroupName", "clusterName", "devicePlugin", "storage"},
        {"nodeSelector", "tolerations", "resourceName", "resourceCountPerNode"},
    ),
    "GpuDevicePlugin": ({"gpuPools", "devicePlugin", "validation", "kubeconfig"}, {"namespace", "targets"}),
    "GpuWorkloadNamespace": (
        {"workload", "resourceName", "nodeSelector", "tolerations", "otherGpuResources"},
        {"namespaceName", "podPlacement", "gpuQuota"},
    ),
    "GpuAdmissionPolicy": ({"gpuPools", "workloads", "admission"}, {"policyName", "validationActions"}),
    "NvmeCache": ({"gpuPools", "workloads", "storage", "resourceGroupName", "clusterName"}, {"storageClassName"}),
    "GpuValidation": ({"gpuPools", "validation"}, {"smokeJobs", "smokeDecisions"}),
    "GpuMonitoring": (
        {"gpuPools", "workloads", "monitoring", "resourceGroupName", "clusterName", "clusterId", "location"},
        {"workspaceId", "ruleGroupNames"},
    ),
    "GpuPlatform": (
        {"location", "cluster", "gpuPools", "workloads", "devicePlugin", "admission", "storage", "validation"},
        {"kubeconfig", "pools", "namespaces", "clusterName"},
    ),
}


def test_the_public_set_is_the_one_the_docs_promise() -> None:
    assert {c.__name__ for c in PUBLIC_COMPONENTS} == set(EXPECTED)


@pytest.mark.parametrize("component", sorted(EXPECTED))
def test_schema_inference_accepts_each_component_with_its_inputs_and_outputs(component: str) -> None:
    resource = component_schema()["resources"][f"aks-gpu:index:{component}"]
    inputs, outputs = EXPECTED[component]
    assert resource["isComponent"] is True
    assert inputs <= set(resource["inputProperties"]), set(resource["inputProperties"])
    assert outputs <= set(resource["properties"]), set(resource["properties"])


def test_spec_types_carry_the_stack_file_keys_in_camel_case() -> None:
    pool = component_schema()["types"]["aks-gpu:index:GpuPoolSpec"]
    assert {"name", "vendor", "vmSize", "migProfile", "minCount", "maxCount", "nvmeCache"} <= set(pool["properties"])
    assert set(pool["required"]) == {"name", "vendor", "vmSize", "workload"}


def test_committed_schema_is_in_step_with_the_code() -> None:
    expected = schema_text()
    fix = "run `aksgpu schema --components > components/aks_gpu/schema.json`"
    assert SCHEMA_FILE.read_text(encoding="utf-8") == expected, fix


def test_cli_prints_the_component_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--components"]) == 0
    assert capsys.readouterr().out == schema_text()


def test_the_plugin_entry_point_starts_from_its_own_folder() -> None:
    # Pulumi starts the package as a script in the components/ folder, not from the repository root; with no
    # engine address the provider stops at its own usage message, after every component has been imported.
    completed = subprocess.run(
        [sys.executable, "__main__.py"], cwd=PROJECT_DIR / "components", capture_output=True, text=True, check=False
    )
    assert "Traceback" not in completed.stderr, completed.stderr
    assert "engine" in completed.stderr and completed.returncode == 2


# ---------------------------------------------------------------- the package as Pulumi runs it, over gRPC
#
# The engine starts the plugin the way the Python language host's RunPlugin does (`python <plugin folder>
# <engine address>`, pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go), reads the port it prints
# (pulumi.provider.main), asks for its schema (GetSchema) and, for a component a program declares, calls Construct
# with the resource monitor's address; the provider registers the children with that monitor. The engine and
# the monitor here are minimal fakes on 127.0.0.1.

STACK_URN = "urn:pulumi:dev::team::pulumi:pulumi:Stack::team-dev"
PROVIDER_REF = "urn:pulumi:dev::team::pulumi:providers:kubernetes::cluster::provider-id"
SECRET_SIG = {rpc._special_sig_key: rpc._special_secret_sig}
# The features the engine's monitor announces that this exchange uses (pulumi/pulumi proto/pulumi/resource.proto).
MONITOR_FEATURES = [
    resource_pb2.RESOURCE_MONITOR_FEATURE_SECRETS,
    resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES,
    resource_pb2.RESOURCE_MONITOR_FEATURE_OUTPUT_VALUES,
    resource_pb2.RESOURCE_MONITOR_FEATURE_DELETED_WITH,
    resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS,
    resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_HOOKS,
]


class FakeEngine(engine_pb2_grpc.EngineServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.logs: list[str] = []

    def Log(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.logs.append(request.message)
        return empty_pb2.Empty()

    def GetRootResource(self, request: Any, context: Any) -> Any:  # noqa: N802
        return engine_pb2.GetRootResourceResponse(urn=STACK_URN)

    def SetRootResource(self, request: Any, context: Any) -> Any:  # noqa: N802
        return engine_pb2.SetRootResourceResponse()


class FakeMonitor(resource_pb2_grpc.ResourceMonitorServicer):  # type: ignore[misc]
    """Records each registration and answers as the engine does in a preview: custom resources get no id and
    their outputs are their inputs."""

    def __init__(self) -> None:
        self.registered: list[Any] = []
        self.lock = threading.Lock()

    def GetDeploymentInfo(self, request: Any, context: Any) -> Any:  # noqa: N802
        return resource_pb2.DeploymentInfo(project="team", stack="dev", dryRun=True, supportedFeatures=MONITOR_FEATURES)

    def SupportsFeature(self, request: Any, context: Any) -> Any:  # noqa: N802
        return resource_pb2.SupportsFeatureResponse(hasSupport=request.id != "invokeTransforms")

    def RegisterResource(self, request: Any, context: Any) -> Any:  # noqa: N802
        parent_type = request.parent.split("::")[-2] if request.parent else ""
        qualified = f"{parent_type.split('$')[-1]}${request.type}" if parent_type and "Stack" not in parent_type else request.type
        urn = f"urn:pulumi:dev::team::{qualified}::{request.name}"
        with self.lock:
            self.registered.append(request)
        return resource_pb2.RegisterResourceResponse(urn=urn, object=request.object)

    def RegisterResourceOutputs(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()

    def Invoke(self, request: Any, context: Any) -> Any:  # noqa: N802
        # The engine's builtin that turns a resource reference (the provider handed over) back into a resource
        # (pulumi/pulumi pkg/resource/deploy/builtins.go getResource): its urn, id and outputs.
        assert request.tok == "pulumi:pulumi:getResource", request.tok
        urn = json_format.MessageToDict(request.args)["urn"]
        found = {"urn": urn, "id": PROVIDER_REF.rpartition("::")[2], "provider": "", "state": {}}
        return resource_pb2.ResourceInvokeResponse(**{"return": struct(found)})

    def RegisterResourceHook(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()

    def SignalAndWaitForShutdown(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Any, FakeEngine, FakeMonitor, int]]:
    """The package's provider, started once as Pulumi starts it, and the fake engine and monitor it talks to."""
    engine, monitor = FakeEngine(), FakeMonitor()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    engine_pb2_grpc.add_EngineServicer_to_server(engine, server)
    resource_pb2_grpc.add_ResourceMonitorServicer_to_server(monitor, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    plugin = subprocess.Popen(
        [sys.executable, str(PROJECT_DIR / "components"), f"127.0.0.1:{port}"],
        cwd=PROJECT_DIR / "components",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert plugin.stdout is not None
        provider_port = int(plugin.stdout.readline().strip())
        channel = grpc.insecure_channel(f"127.0.0.1:{provider_port}")
        yield provider_pb2_grpc.ResourceProviderStub(channel), engine, monitor, port
        channel.close()
    finally:
        plugin.kill()
        plugin.wait(timeout=10)
        server.stop(grace=None)


def struct(value: dict[str, Any]) -> Any:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def construct_request(inputs: dict[str, Any], monitor_port: int, name: str) -> Any:
    return provider_pb2.ConstructRequest(
        project="team",
        stack="dev",
        dryRun=True,
        monitorEndpoint=f"127.0.0.1:{monitor_port}",
        type=f"{PACKAGE_NAME}:index:GpuWorkloadNamespace",
        name=name,
        parent=STACK_URN,
        inputs=struct(inputs),
        providers={"kubernetes": PROVIDER_REF},
    )


def test_the_provider_serves_its_schema_over_grpc(served: Any) -> None:
    stub, *_ = served
    response = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60)
    assert json.loads(response.schema) == json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def test_a_component_is_constructed_over_grpc_from_unknown_and_secret_inputs(served: Any) -> None:
    stub, _, monitor, monitor_port = served
    inputs = {
        # A workload type from another stack, not known during this preview (an output value with no value).
        "workload": {
            "name": "team-vision",
            "type": {rpc._special_sig_key: rpc._special_output_value_sig, "dependencies": [STACK_URN]},
            "gpuQuota": 16.0,
            "podSecurity": "restricted",
        },
        "resourceName": "nvidia.com/gpu",
        "nodeSelector": rpc.UNKNOWN,
        "tolerations": {**SECRET_SIG, "value": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    }
    response = stub.Construct(construct_request(inputs, monitor_port, "team"), timeout=120)
    assert response.urn == f"urn:pulumi:dev::team::{PACKAGE_NAME}:index:GpuWorkloadNamespace::team"
    state = json_format.MessageToDict(response.state)
    assert state["resourceName"] == "nvidia.com/gpu"
    # Not known in a preview: the name (its labels wait for the type) and the placement (its node selector); the
    # placement holds the secret tolerations, so it stays a secret.
    assert state["namespaceName"] == rpc.UNKNOWN
    assert state["podPlacement"] == {**SECRET_SIG, "value": rpc.UNKNOWN}
    registered = {r.type: r for r in monitor.registered if r.parent == response.urn}
    kinds = {"kubernetes:core/v1:Namespace", "kubernetes:core/v1:ResourceQuota", "kubernetes:core/v1:LimitRange"}
    assert kinds <= set(registered)
    # Every child goes through the stack's Kubernetes provider, handed over in the providers map.
    assert {r.provider for r in registered.values()} == {PROVIDER_REF}


def test_bad_args_come_back_as_property_errors_in_camel_case_without_a_traceback(served: Any) -> None:
    stub, _, _, monitor_port = served
    inputs = {"workload": {"name": "Team_A", "type": "training", "gpuQuota": -1.0}, "nodeSelector": {}, "tolerations": []}
    with pytest.raises(grpc.RpcError) as caught:
        stub.Construct(construct_request(inputs, monitor_port, "bad"), timeout=120)
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Traceback" not in error.details() and 'File "' not in error.details()
    status = status_pb2.Status.FromString(dict(error.trailing_metadata())["grpc-status-details-bin"])
    details = errors_pb2.InputPropertiesError()
    assert status.details[0].Unpack(details)
    reasons = {e.property_path: e.reason for e in details.errors}
    assert set(reasons) == {"workload.name", "workload.gpuQuota"}
    assert reasons["workload.gpuQuota"].startswith("-1 is not allowed")  # an integer, as the caller wrote it


def test_warnings_reach_the_engine_log(served: Any) -> None:
    stub, engine, _, monitor_port = served
    workload = {"name": "team-b", "type": "training", "gpuQuota": 1.0, "network": {"allowEgress": [{"cidr": "10.0.0.1/8"}]}}
    inputs = {"workload": workload, "nodeSelector": {}, "tolerations": []}
    stub.Construct(construct_request(inputs, monitor_port, "warned"), timeout=120)
    assert "workload.network.allowEgress[0].cidr: '10.0.0.1/8' has host bits set; it allows all of 10.0.0.0/8" in engine.logs


# ---------------------------------------------------------------- installable as a plugin from a fresh clone


def pins(path: Path) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of a requirements file (names normalized)."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            [specifier] = requirement.specifier
            assert specifier.operator == "==", line
            found[canonicalize_name(requirement.name)] = specifier.version
    return found


def test_the_plugin_installs_the_runtime_pins_of_the_repository() -> None:
    # The language host installs components/requirements.txt into the plugin's own virtualenv: the same versions as
    # the repository's, for every runtime dependency the package declares, and nothing for development.
    plugin = pins(PROJECT_DIR / "components" / "requirements.txt")
    repository = pins(PROJECT_DIR / "requirements.txt")
    declared = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert set(plugin) == {canonicalize_name(Requirement(line).name) for line in declared}
    assert plugin == {name: repository[name] for name in plugin}


def test_the_plugin_needs_nothing_outside_its_folder() -> None:
    # A git plugin is a fresh clone: its virtualenv must be one the language host creates in the plugin folder.
    plugin = yaml.safe_load((PROJECT_DIR / "components" / "PulumiPlugin.yaml").read_text(encoding="utf-8"))
    options = plugin["runtime"]["options"]
    assert options["toolchain"] == "pip"
    venv = Path(options["virtualenv"])
    assert not venv.is_absolute() and ".." not in venv.parts
    # ... and kept out of git, ruff and mypy like the repository's own .venv.
    assert f"{venv}/" in (PROJECT_DIR / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_both_projects_state_the_cli_that_fails_an_update_on_a_failed_hook() -> None:
    for name in ("Pulumi.yaml", "components/PulumiPlugin.yaml"):
        project = yaml.safe_load((PROJECT_DIR / name).read_text(encoding="utf-8"))
        assert project["requiredPulumiVersion"] == ">=3.238.0", name
    # Which CLIs read the key, per file (pulumi/pulumi CHANGELOG: 3.219.0 #21627 for Pulumi.yaml, 3.221.0 #21807 for
    # PulumiPlugin.yaml, where 3.219 and 3.220 read pulumiVersionRange): the deployment guide says both.
    guide = " ".join((PROJECT_DIR / "docs" / "deploying.md").read_text(encoding="utf-8").split())
    assert "from 3.219.0 in `Pulumi.yaml` (#21627) and from 3.221.0 in `PulumiPlugin.yaml` (#21807" in guide


# ---------------------------------------------------------------- a Kubernetes provider in another language


def test_another_language_builds_its_kubernetes_provider_from_kubeconfig_and_cluster_id(harness: MockHarness) -> None:
    # What a TypeScript or Go stack gets from GpuCluster: `provider` only as an output (a resource reference it
    # cannot put in its options), and the two strings to build its own provider from.
    outputs = component_schema()["resources"][f"{PACKAGE_NAME}:index:GpuCluster"]["properties"]
    assert outputs["kubeconfig"]["type"] == outputs["clusterId"]["type"] == "string"
    assert outputs["provider"]["$ref"].endswith("#/resources/pulumi:providers:kubernetes")
    provider = PackageProvider(PUBLIC_COMPONENTS, PACKAGE_NAME)

    def program() -> None:
        built = provider.construct(
            "team",
            f"{PACKAGE_NAME}:index:GpuCluster",
            {"cluster": {"resourceGroup": "rg-team", "name": "aks-team"}, "location": "swedencentral"},
            pulumi.ResourceOptions(),
        )
        k8s.Provider("own", kubeconfig=built.state["kubeconfig"], cluster_identifier=built.state["clusterId"])

    result = harness.run(program)
    [own] = [r for r in result.by_type("pulumi:providers:kubernetes") if r.name == "own"]
    assert own.inputs["kubeconfig"] == SECRET
    assert own.inputs["clusterIdentifier"] == arm_id("rg-team", "Microsoft.ContainerService/managedClusters", "aks-team")


def test_the_docs_name_the_npm_package_each_form_of_package_add_generates() -> None:
    # No namespace in the schema: a local path gives @pulumi/aks-gpu, the git form @<owner>/aks-gpu, the owner taken
    # from the URL (pulumi/pulumi pkg/codegen/nodejs/gen.go genNPMPackageMetadata, pkg/cmd/pulumi/packages/packages.go
    # setSpecNamespace). Both guides install the git form, so they import the owner's package.
    assert "namespace" not in component_schema()
    text = (PROJECT_DIR / "docs" / "composing.md").read_text(encoding="utf-8")
    for name in ("docs/composing.md",):
        assert "aks-gpu.git/components@" in text, name
        assert 'from "@<org>/aks-gpu"' in text and 'from "@pulumi/aks-gpu"' not in text, name


def test_the_wheel_carries_every_package_folder_under_the_import_name() -> None:
    # pyproject.toml finds the packages under components/ (a src layout rooted there): a folder of modules without an
    # __init__.py would be left out of the wheel while every test in the checkout still passed, and nothing but the
    # one package may sit beside the plugin's own files.
    setuptools = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"": "components"}
    assert setuptools["packages"]["find"] == {"where": ["components"], "include": ["aks_gpu*"]}
    package = PROJECT_DIR / "components" / "aks_gpu"
    folders = {path.parent for path in package.rglob("*.py")} - {package}
    assert [str(folder) for folder in sorted(folders) if not (folder / "__init__.py").is_file()] == []
    beside = {path.name for path in (PROJECT_DIR / "components").iterdir() if not path.name.startswith(".")}
    beside = {name for name in beside if not name.endswith(".egg-info")}
    assert beside - {"__pycache__"} == {"aks_gpu", "PulumiPlugin.yaml", "__main__.py", "requirements.txt"}


def test_the_tree_holds_no_link() -> None:
    # One tree on disk: a checkout without symlink support (Windows) and tools that do not follow links see it whole.
    tracked = subprocess.run(["git", "ls-files", "-s"], cwd=PROJECT_DIR, capture_output=True, text=True, check=False)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    assert [line.split("\t")[1] for line in tracked.stdout.splitlines() if line.startswith("120000")] == []
