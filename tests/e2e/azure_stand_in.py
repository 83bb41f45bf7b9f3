"""A loopback stand-in for the azure-native provider plugin (test infrastructure, written for this project): a gRPC
resource provider the real Pulumi CLI loads as ``azure-native`` at the version the Python SDK asks (3.29.0), so the
program runs in Azure mode under the real engine with no Azure behind it.

It answers with the provider's own replace rules (``data/azure_native_rules.yaml``, read from the provider's source):
Diff marks a changed input "replace" where a rule covers it and asks for delete-before-replace as the rule says.
It does not add the program's ``replace_on_changes`` (``data/immutable_fields.yaml``): the engine applies those
itself, as it does protect, ignoreChanges, cascades and the order of a replacement. Created resources get ARM ids;
``listManagedClusterUserCredentials`` hands out a kubeconfig whose user runs a ``kubelogin`` stand-in, pointed at a
local kwok cluster when the test set ``AKSGPU_STAND_IN_KUBECONFIG`` (an exec kubeconfig file) in the engine's
environment.

What it cannot know: ARM's own refusals (PropertyChangeNotAllowed and the like), the real provider's Read and refresh
drift, and the API's validation of values. Run as ``python -m tests.e2e.azure_stand_in`` (the plugin executable
``install`` writes does so); it prints its port on stdout, as the engine expects of a plugin.
"""

# ruff: noqa: N802 -- the gRPC service's method names are the protocol's (GetPluginInfo, Diff, Create...).
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from concurrent import futures
from pathlib import Path
from typing import Any

# The Python SDK's azure-native version (requirements.txt: pulumi-azure-native==3.29.0), the one the engine loads.
PLUGIN_VERSION = "3.29.0"
KUBECONFIG_ENV = "AKSGPU_STAND_IN_KUBECONFIG"
SUBSCRIPTION = "00000000-0000-0000-0000-00000000aaaa"
TENANT = "00000000-0000-0000-0000-00000000bbbb"
DEPLOYER = "00000000-0000-0000-0000-00000000cccc"
# The server id AKS's Entra ID kubeconfigs name (kubelogin --server-id: the AKS AAD server application).
AKS_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
# The engine's placeholder for a value not known yet (a preview's computed input).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

_GROUP = "/subscriptions/{subscription}/resourceGroups/{resourceGroupName}"
_CLUSTER = _GROUP + "/providers/Microsoft.ContainerService/managedClusters/{resourceName}"
# Each type's ARM id, from its inputs (the placeholders are input names; the last one is the resource's name).
ARM_IDS = {
    "azure-native:resources:ResourceGroup": _GROUP,
    "azure-native:containerservice:ManagedCluster": _CLUSTER,
    "azure-native:containerservice:AgentPool": _CLUSTER + "/agentPools/{agentPoolName}",
    "azure-native:containerservice:MaintenanceConfiguration": _CLUSTER + "/maintenanceConfigurations/{configName}",
    "azure-native:authorization:RoleAssignment": "{scope}/providers/Microsoft.Authorization/roleAssignments/{roleAssignmentName}",
    "azure-native:monitor:AzureMonitorWorkspace": _GROUP + "/providers/Microsoft.Monitor/accounts/{azureMonitorWorkspaceName}",
    "azure-native:monitor:DataCollectionEndpoint": _GROUP
    + "/providers/Microsoft.Insights/dataCollectionEndpoints/{dataCollectionEndpointName}",
    "azure-native:monitor:DataCollectionRule": _GROUP
    + "/providers/Microsoft.Insights/dataCollectionRules/{dataCollectionRuleName}",
    "azure-native:monitor:DataCollectionRuleAssociation": "{resourceUri}/providers/Microsoft.Insights"
    "/dataCollectionRuleAssociations/{associationName}",
    "azure-native:monitor:ActionGroup": _GROUP + "/providers/Microsoft.Insights/actionGroups/{actionGroupName}",
    "azure-native:alertsmanagement:PrometheusRuleGroup": _GROUP
    + "/providers/Microsoft.AlertsManagement/prometheusRuleGroups/{ruleGroupName}",
    "azure-native:managedidentity:UserAssignedIdentity": _GROUP
    + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{resourceName}",
    "azure-native:managedidentity:FederatedIdentityCredential": _GROUP
    + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{resourceName}"
    + "/federatedIdentityCredentials/{federatedIdentityCredentialResourceName}",
    "azure-native:authorization:RoleDefinition": "{scope}/providers/Microsoft.Authorization/roleDefinitions/{roleDefinitionId}",
    "azure-native:containerservice:DeploymentSafeguard": "{resourceUri}/providers/Microsoft.ContainerService"
    "/deploymentSafeguards/{safeguardName}",
    "azure-native:kubernetesconfiguration:Extension": _GROUP
    + "/providers/Microsoft.ContainerService/managedClusters/{clusterName}"
    + "/providers/Microsoft.KubernetesConfiguration/extensions/{extensionName}",
}


# ---------------------------------------------------------------- pure: the provider's answers


def type_of(urn: str) -> str:
    """``urn:pulumi:stack::project::parent$azure-native:containerservice:AgentPool::name`` -> the resource type."""
    return urn.split("::")[2].rsplit("$", 1)[-1]


def arm_id(resource_type: str, inputs: dict[str, Any]) -> tuple[str, str]:
    """The resource's ARM id and name. A resource the program leaves unnamed (a role assignment or definition, the
    repair identity) gets a name made from its inputs, as the provider names it itself; a Deployment Safeguard's name
    is always ``default``."""
    values = {key: value for key, value in inputs.items() if isinstance(value, str)}
    values["subscription"] = SUBSCRIPTION
    values["safeguardName"] = "default"
    template = ARM_IDS[resource_type]
    name_key = re.findall(r"\{(\w+)\}", template)[-1]
    values.setdefault(name_key, str(uuid.uuid5(uuid.NAMESPACE_URL, json.dumps(inputs, sort_keys=True))))
    return template.format_map(_Missing(values)), values[name_key]


class _Missing(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return UNKNOWN


def changes(old: Any, new: Any, path: str = "") -> dict[str, str]:
    """Every changed input path between two input values (dotted into objects, ``[i]`` into lists): add, delete or
    update. Keys starting ``__`` are the provider's own bookkeeping, never a change."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: dict[str, str] = {}
        for key in sorted(set(old) | set(new)):
            if key.startswith("__"):
                continue
            at = f"{path}.{key}" if path else key
            if key not in old:
                found[at] = "add"
            elif key not in new:
                found[at] = "delete"
            else:
                found.update(changes(old[key], new[key], at))
        return found
    if isinstance(old, list) and isinstance(new, list) and old and new:
        found = {}
        for index in range(max(len(old), len(new))):
            at = f"{path}[{index}]"
            if index >= len(old):
                found[at] = "add"
            elif index >= len(new):
                found[at] = "delete"
            else:
                found.update(changes(old[index], new[index], at))
        return found
    return {} if old == new else {path: "update"}


def diff(resource_type: str, old_inputs: dict[str, Any], new_inputs: dict[str, Any]) -> dict[str, Any]:
    """The provider's Diff, as a plain document: detailedDiff {path: kind}, replaces, deleteBeforeReplace."""
    from aks_gpu.aks_facts import provider_deletes_before_replace, provider_replace_rules

    rules = provider_replace_rules(resource_type)
    detailed = {}
    for path, kind in changes(old_inputs, new_inputs).items():
        replaced = any(rule.covers(path) for rule in rules)
        detailed[path] = kind + ("_replace" if replaced else "")
    replaces = sorted({_top(path) for path, kind in detailed.items() if kind.endswith("_replace")})
    return {
        "detailedDiff": detailed,
        "diffs": sorted({_top(path) for path in detailed}),
        "replaces": replaces,
        "deleteBeforeReplace": bool(replaces) and provider_deletes_before_replace(resource_type)[0],
    }


def _top(path: str) -> str:
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def outputs(resource_type: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A created resource's id and state: its inputs, its ARM id and name, and a succeeded provisioning state."""
    resource_id, name = arm_id(resource_type, inputs)
    state = {**inputs, "id": resource_id, "name": name, "provisioningState": "Succeeded"}
    if resource_type == "azure-native:containerservice:ManagedCluster":
        state["fqdn"] = f"{name}.hcp.stand-in.azmk8s.io"
        state["nodeResourceGroup"] = f"MC_{inputs.get('resourceGroupName')}_{name}"
        state["oidcIssuerProfile"] = {
            **(inputs.get("oidcIssuerProfile") or {}),
            "issuerURL": f"https://oidc.stand-in.invalid/{name}/",
        }
    if resource_type == "azure-native:managedidentity:UserAssignedIdentity":
        for output in ("principalId", "clientId"):
            state[output] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{resource_id}#{output}"))
        state["tenantId"] = TENANT
    return resource_id, state


def kubeconfig(cluster_name: str, environment: dict[str, str]) -> str:
    """The user kubeconfig AKS hands out for an Entra ID cluster: an exec user running kubelogin. Pointed at the
    test's local cluster when it gave one (``AKSGPU_STAND_IN_KUBECONFIG``), else at a closed port."""
    given = environment.get(KUBECONFIG_ENV)
    if given:
        return Path(given).read_text(encoding="utf-8")
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": "clusterUser"}}],
        "current-context": cluster_name,
        "users": [
            {
                "name": "clusterUser",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "kubelogin",
                        "args": ["get-token", "--login", "devicecode", "--server-id", AKS_SERVER_ID],
                    }
                },
            }
        ],
    }
    return json.dumps(document)


def invoke(token: str, args: dict[str, Any], environment: dict[str, str]) -> dict[str, Any]:
    if token == "azure-native:authorization:getClientConfig":
        return {"clientId": DEPLOYER, "objectId": DEPLOYER, "subscriptionId": SUBSCRIPTION, "tenantId": TENANT}
    if token == "azure-native:containerservice:listManagedClusterUserCredentials":
        value = base64.b64encode(kubeconfig(str(args.get("resourceName")), environment).encode()).decode()
        return {"kubeconfigs": [{"name": "clusterUser", "value": value}]}
    if token == "azure-native:resources:getResourceGroup":
        resource_id, name = arm_id("azure-native:resources:ResourceGroup", args)
        return {"id": resource_id, "name": name, "location": "swedencentral"}
    if token == "azure-native:containerservice:getManagedCluster":
        _, state = outputs("azure-native:containerservice:ManagedCluster", {**args, "oidcIssuerProfile": {"enabled": True}})
        return {key: state[key] for key in ("id", "name", "nodeResourceGroup", "oidcIssuerProfile")} | {
            "location": "swedencentral"
        }
    raise LookupError(f"the azure-native stand-in does not answer {token}")


# ---------------------------------------------------------------- the gRPC edge


def serve() -> None:
    import grpc  # type: ignore[import-untyped]
    from google.protobuf import empty_pb2, json_format, struct_pb2
    from pulumi.runtime.proto import plugin_pb2, provider_pb2, provider_pb2_grpc

    def plain(message: Any) -> dict[str, Any]:
        return json_format.MessageToDict(message) if message is not None else {}

    def struct(value: dict[str, Any]) -> struct_pb2.Struct:
        result = struct_pb2.Struct()
        result.update(value)
        return result

    kinds = {
        "add": provider_pb2.PropertyDiff.ADD,
        "add_replace": provider_pb2.PropertyDiff.ADD_REPLACE,
        "delete": provider_pb2.PropertyDiff.DELETE,
        "delete_replace": provider_pb2.PropertyDiff.DELETE_REPLACE,
        "update": provider_pb2.PropertyDiff.UPDATE,
        "update_replace": provider_pb2.PropertyDiff.UPDATE_REPLACE,
    }

    class StandIn(provider_pb2_grpc.ResourceProviderServicer):  # type: ignore[misc]
        def GetPluginInfo(self, request: Any, context: Any) -> Any:
            return plugin_pb2.PluginInfo(version=PLUGIN_VERSION)

        def CheckConfig(self, request: Any, context: Any) -> Any:
            return provider_pb2.CheckResponse(inputs=request.news)

        def DiffConfig(self, request: Any, context: Any) -> Any:
            return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_NONE)

        def Configure(self, request: Any, context: Any) -> Any:
            return provider_pb2.ConfigureResponse(acceptSecrets=True, supportsPreview=True, acceptResources=True)

        def Check(self, request: Any, context: Any) -> Any:
            return provider_pb2.CheckResponse(inputs=request.news)

        def Diff(self, request: Any, context: Any) -> Any:
            olds = plain(request.old_inputs) or plain(request.olds)
            answer = diff(type_of(request.urn), olds, plain(request.news))
            detailed = {path: provider_pb2.PropertyDiff(kind=kinds[kind]) for path, kind in answer["detailedDiff"].items()}
            return provider_pb2.DiffResponse(
                changes=provider_pb2.DiffResponse.DIFF_SOME if detailed else provider_pb2.DiffResponse.DIFF_NONE,
                replaces=answer["replaces"],
                diffs=answer["diffs"],
                detailedDiff=detailed,
                hasDetailedDiff=True,
                deleteBeforeReplace=answer["deleteBeforeReplace"],
            )

        def Create(self, request: Any, context: Any) -> Any:
            inputs = plain(request.properties)
            if request.preview:
                return provider_pb2.CreateResponse(properties=request.properties)
            resource_id, state = outputs(type_of(request.urn), inputs)
            return provider_pb2.CreateResponse(id=resource_id, properties=struct(state))

        def Read(self, request: Any, context: Any) -> Any:
            return provider_pb2.ReadResponse(id=request.id, properties=request.properties, inputs=request.inputs)

        def Update(self, request: Any, context: Any) -> Any:
            if request.preview:
                return provider_pb2.UpdateResponse(properties=request.news)
            _, state = outputs(type_of(request.urn), plain(request.news))
            # An update keeps the resource: its id and name stay (a role assignment's auto-made name too).
            state.update(id=request.id, name=plain(request.olds).get("name", state["name"]))
            return provider_pb2.UpdateResponse(properties=struct(state))

        def Delete(self, request: Any, context: Any) -> Any:
            return empty_pb2.Empty()

        def Invoke(self, request: Any, context: Any) -> Any:
            try:
                answer = invoke(request.tok, plain(request.args), dict(os.environ))
            except LookupError as exc:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, str(exc))
            return provider_pb2.InvokeResponse(**{"return": struct(answer)})

        def Cancel(self, request: Any, context: Any) -> Any:
            return empty_pb2.Empty()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(StandIn(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


# ---------------------------------------------------------------- installing it as the engine's plugin


def install(pulumi: Path, pulumi_home: Path, work: Path, env: dict[str, str]) -> None:
    """Install the stand-in as ``azure-native`` ``PLUGIN_VERSION`` into ``pulumi_home`` (no download: ``--file``)."""
    project = Path(__file__).resolve().parents[2]
    executable = work / "pulumi-resource-azure-native"
    python_path = f"{project / 'components'}:{project}"
    executable.write_text(
        f'#!/bin/sh\nPYTHONPATH={python_path} exec {sys.executable} -m tests.e2e.azure_stand_in "$@"\n', encoding="utf-8"
    )
    executable.chmod(0o755)
    command = [str(pulumi), "plugin", "install", "resource", "azure-native", PLUGIN_VERSION, "--file", str(executable)]
    done = subprocess.run(
        command, env={**env, "PULUMI_HOME": str(pulumi_home)}, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"pulumi plugin install azure-native failed: {done.stderr[-2000:]}")


def exec_kubeconfig(admin_kubeconfig: Path, work: Path) -> Path:
    """An Entra-ID-shaped kubeconfig for a local cluster: its server and CA, and an exec user whose command is a
    ``kubelogin`` stand-in that hands the cluster admin's client certificate back (an ExecCredential)."""
    import yaml

    admin = yaml.safe_load(admin_kubeconfig.read_text(encoding="utf-8"))
    cluster = dict(admin["clusters"][0]["cluster"])
    user = admin["users"][0]["user"]

    def data(key: str) -> str:
        if f"{key}-data" in user:
            return base64.b64decode(user[f"{key}-data"]).decode()
        return Path(user[key]).read_text(encoding="utf-8")

    if "certificate-authority" in cluster:
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"clientCertificateData": data("client-certificate"), "clientKeyData": data("client-key")},
    }
    answer = work / "exec-credential.json"
    answer.write_text(json.dumps(credential), encoding="utf-8")
    answer.chmod(0o600)
    kubelogin = work / "kubelogin"
    kubelogin.write_text(f"#!/bin/sh\ncat {answer}\n", encoding="utf-8")
    kubelogin.chmod(0o700)
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stand-in", "cluster": cluster}],
        "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "clusterUser"}}],
        "current-context": "stand-in",
        "users": [
            {
                "name": "clusterUser",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": str(kubelogin),
                        "args": ["get-token", "--login", "devicecode", "--server-id", AKS_SERVER_ID],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
    }
    path = work / "exec-kubeconfig.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    path.chmod(0o600)
    return path


if __name__ == "__main__":
    serve()
