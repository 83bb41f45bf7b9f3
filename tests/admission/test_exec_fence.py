"""The standing amd-smi probe is a privileged pod on every AMD node: a root shell for anyone who may exec into it.
The fence is RBAC: nothing any stack installs grants exec, attach or ephemeral containers (``kubectl debug``) on pods
but the team role (Kubernetes' ``edit`` less NetworkPolicy writes, which keeps exec and attach), and that only through
RoleBindings in the workload namespaces; nothing binds any role in gpu-resources, so only the cluster's admins reach
the probe. Checked on what ``aksgpu plan`` writes for every stack."""

from __future__ import annotations

from typing import Any

import pytest

from aks_gpu.naming import GPU_NAMESPACE, TEAM_ROLE_NAME
from aks_gpu.resolved.targets import AMD_SMI_NAME
from tests.conformance import STACK_NAMES, planned

# Subresources that give a shell or a new container in a running pod.
SHELL_SUBRESOURCES = frozenset({"pods/exec", "pods/attach", "pods/ephemeralcontainers", "pods/*", "*"})


def grants_a_shell(rule: dict[str, Any]) -> bool:
    core = not rule.get("apiGroups") or {"", "*"} & set(rule["apiGroups"])
    return bool(core) and bool(SHELL_SUBRESOURCES & set(rule.get("resources") or ()))


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_no_role_of_any_stack_grants_a_shell_in_a_pod(stack: str) -> None:
    manifests = planned(stack).manifests.values()
    roles = [m for m in manifests if m.get("kind") in {"Role", "ClusterRole"}]
    assert roles, "every stack installs a device plugin agent with a role"
    shells = {role["metadata"]["name"] for role in roles if any(grants_a_shell(rule) for rule in role.get("rules") or ())}
    # The team role gives a shell in the team's own pods; it is a ClusterRole only so that one object serves every
    # workload namespace, and the bindings below hold it to them.
    assert shells <= {TEAM_ROLE_NAME}, shells
    bindings = [m for m in manifests if m.get("kind") in {"RoleBinding", "ClusterRoleBinding"}]
    for binding in bindings:
        # Only the agents' own service accounts are bound cluster-wide, and nothing in gpu-resources but them.
        if binding["kind"] == "RoleBinding" and binding["metadata"].get("namespace") == GPU_NAMESPACE:
            pytest.fail(f"{binding['metadata']['name']}: a role binding in {GPU_NAMESPACE}")
        if binding["kind"] == "ClusterRoleBinding":
            assert {s["kind"] for s in binding["subjects"]} == {"ServiceAccount"}, binding["metadata"]["name"]
            assert binding["roleRef"]["name"] not in {"cluster-admin", "admin", "edit", TEAM_ROLE_NAME}
        else:
            assert binding["roleRef"]["name"] in {TEAM_ROLE_NAME, "view"}  # the workload namespaces' own


def test_the_amd_probe_only_waits_and_holds_no_api_token() -> None:
    [probe] = [
        m for m in planned("amd").manifests.values() if m.get("kind") == "DaemonSet" and m["metadata"]["name"] == AMD_SMI_NAME
    ]
    assert probe["metadata"]["namespace"] == GPU_NAMESPACE
    pod = probe["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    [container] = pod["containers"]
    assert container["command"] == ["sleep", "infinity"]
