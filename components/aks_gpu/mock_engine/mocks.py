"""The mocks' answers: every resource registration and every call the components make answered as Azure answers it,
with stable fake ids (the same program gives the same plan), and the kubeconfig AKS hands out."""

from __future__ import annotations

import base64
from typing import Any

from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs, Mocks

from aks_gpu.azure.cluster import CLIENT_CONFIG_CALL, CREDENTIALS_CALL, GET_CLUSTER_CALL

FAKE_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
FAKE_TENANT = "11111111-1111-1111-1111-111111111111"
FAKE_OBJECT_ID = "22222222-2222-2222-2222-222222222222"
FAKE_IDENTITY_CLIENT_ID = "33333333-3333-3333-3333-333333333333"
FAKE_IDENTITY_PRINCIPAL_ID = "44444444-4444-4444-4444-444444444444"
# The first-party Entra ID applications of AKS, the same in every cloud: the server (the token's audience) and the
# public client kubelogin signs users in with. https://azure.github.io/kubelogin/concepts/aks.html
AKS_SERVER_APP_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
AKS_CLIENT_APP_ID = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"


def fake_kubeconfig(cluster: str, resource_group: str = "resource-group", tenant: str = FAKE_TENANT) -> str:
    """The kubeconfig ``listClusterUserCredentials(format=exec)`` returns for an Entra ID cluster, in AKS's own shape
    and argument order (``--login devicecode`` last), with a placeholder CA and a server that cannot resolve.
    tests/fixtures/aks/ holds a real one (with its source) and a test keeps the two in the same shape."""
    return (
        "apiVersion: v1\n"
        "clusters:\n"
        "- cluster:\n"
        "    certificate-authority-data: UExBQ0VIT0xERVItQ0E=\n"
        f"    server: https://{cluster}-dns-00000000.hcp.example.invalid:443\n"
        f"  name: {cluster}\n"
        "contexts:\n"
        "- context:\n"
        f"    cluster: {cluster}\n"
        f"    user: clusterUser_{resource_group}_{cluster}\n"
        f"  name: {cluster}\n"
        f"current-context: {cluster}\n"
        "kind: Config\n"
        "preferences: {}\n"
        "users:\n"
        f"- name: clusterUser_{resource_group}_{cluster}\n"
        "  user:\n"
        "    exec:\n"
        "      apiVersion: client.authentication.k8s.io/v1beta1\n"
        "      args:\n"
        "      - get-token\n"
        "      - --environment\n"
        "      - AzurePublicCloud\n"
        "      - --server-id\n"
        f"      - {AKS_SERVER_APP_ID}\n"
        "      - --client-id\n"
        f"      - {AKS_CLIENT_APP_ID}\n"
        "      - --tenant-id\n"
        f"      - {tenant}\n"
        "      - --login\n"
        "      - devicecode\n"
        "      command: kubelogin\n"
        "      env: null\n"
        "      installHint: |2\n"
        "\n"
        "        kubelogin is not installed which is required to connect to AAD enabled cluster.\n"
        "\n"
        "        To learn more, please go to https://aka.ms/aks/kubelogin\n"
        "      provideClusterInfo: false\n"
    )


def revealed(value: Any) -> Any:
    """``value`` with secrets unwrapped, as a provider sees its inputs."""
    if rpc.is_rpc_secret(value):
        return revealed(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {key: revealed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [revealed(item) for item in value]
    return value


def arm_id(resource_group: str, provider_type: str, name: str) -> str:
    return f"/subscriptions/{FAKE_SUBSCRIPTION}/resourceGroups/{resource_group}/providers/{provider_type}/{name}"


class PlanMocks(Mocks):
    """Answers registrations and invokes with stable values: the same program gives the same plan. Every call the
    components make (``aks_gpu.azure.cluster.CALLS``) is answered as Azure answers it; other calls get ``{}``.
    Consumers' unit tests use it as ``aks_gpu.testing.AksGpuMocks``.

    With ``preview=True`` it answers as ``pulumi preview`` does for resources that do not exist yet: outputs are the
    inputs, nothing the provider computes (ids, names, FQDNs) is known, so code that needs those values at program
    time fails here, offline."""

    def __init__(self, preview: bool = False) -> None:
        super().__init__()
        self.preview = preview

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        if self.preview:
            # An empty id is an unknown id in a dry run; properties not returned are unknown too.
            return ("", state) if args.custom else (None, {})
        if args.typ == "azure-native:containerservice:ManagedCluster":
            # A provider reads secret inputs in plain text; outputs of the same name stay secret (state above).
            inputs = revealed(args.inputs)
            group = str(inputs.get("resourceGroupName"))
            cluster = str(inputs.get("resourceName", args.name))
            location = str(inputs.get("location", "swedencentral")).replace(" ", "").lower()
            state |= {"name": cluster, "fqdn": f"{cluster}.hcp.example.invalid"}
            state["nodeResourceGroup"] = f"MC_{group}_{cluster}_{location}"
            state["oidcIssuerProfile"] = {"issuerURL": f"https://oidc.example.invalid/{cluster}/"}
            return arm_id(group, "Microsoft.ContainerService/managedClusters", cluster), state
        if args.typ == "azure-native:managedidentity:UserAssignedIdentity":
            # What ARM computes for a new identity: its application (client) id and its service principal's object id.
            state |= {"clientId": FAKE_IDENTITY_CLIENT_ID, "principalId": FAKE_IDENTITY_PRINCIPAL_ID, "tenantId": FAKE_TENANT}
        if not args.custom:
            return None, {}
        return f"{args.name}-id", state

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token = args.token
        arguments = revealed(args.args)  # a provider reads secret arguments in plain text
        if token == CREDENTIALS_CALL:
            group, cluster = str(arguments.get("resourceGroupName")), str(arguments.get("resourceName"))
            encoded = base64.b64encode(fake_kubeconfig(cluster, group).encode()).decode()
            return {"kubeconfigs": [{"name": "clusterUser", "value": encoded}]}, []
        if token == GET_CLUSTER_CALL:
            group, cluster = str(arguments.get("resourceGroupName")), str(arguments.get("resourceName"))
            return {
                "id": arm_id(group, "Microsoft.ContainerService/managedClusters", cluster),
                "name": cluster,
                "location": "swedencentral",
                "oidcIssuerProfile": {"enabled": True, "issuerURL": f"https://oidc.example.invalid/{cluster}/"},
                "nodeResourceGroup": f"MC_{group}_{cluster}_swedencentral",
            }, []
        if token == "azure-native:resources:getResourceGroup":
            group = str(arguments.get("resourceGroupName"))
            return {
                "id": f"/subscriptions/{FAKE_SUBSCRIPTION}/resourceGroups/{group}",
                "name": group,
                "location": "swedencentral",
            }, []
        if token == CLIENT_CONFIG_CALL:
            return {
                "clientId": "plan-client",
                "objectId": FAKE_OBJECT_ID,
                "subscriptionId": FAKE_SUBSCRIPTION,
                "tenantId": FAKE_TENANT,
            }, []
        return {}, []
