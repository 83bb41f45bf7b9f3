"""The team role: the ClusterRole a workload's ``roleBindings`` entry with role ``edit`` binds a team's group to, inside
its namespace. Kubernetes' ``edit`` less NetworkPolicy writes: with ``edit`` a team deletes its namespace's
``deny-cross-namespace`` or adds an allow-all policy beside it, and reaches other teams' pods, the internet, IMDS and
the API server (issue 40, B1). The team still reads its policies; the platform's stack is what writes them.

The rules are Kubernetes v1.36.3's own, transcribed: ``edit`` is an aggregated ClusterRole whose rules are those of
``system:aggregate-to-edit`` (``editRules()``) plus those of ``view`` (labelled ``aggregate-to-edit``, itself aggregating
``system:aggregate-to-view``: ``viewRules()``), in kubernetes/kubernetes v1.36.3
plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, with the feature gates of 1.36 (DynamicResourceAllocation GA
and on, its rules kept; GenericWorkload alpha and off, its rules left out: pkg/features/kube_features.go). The e2e
compares the result with the real server's ``edit`` (tests/e2e/test_team_rbac.py).

Explicit rules, no ``aggregationRule``: aggregation only adds (the controller sets an aggregated role's rules to the
union of the roles its selector matches), so a role aggregating ``aggregate-to-edit`` gets ``system:aggregate-to-edit``
back, NetworkPolicy writes with it. What an add-on's CRDs grant ``edit`` through that label is not granted here: the
operator binds such rights by a Role of their own.

PodDisruptionBudgets stay writable, as in ``edit``: refusing a budget that allows no disruption is the platform's
admission policy's work (issue 40 B4), not RBAC's, so a team keeps budgets that protect a serving Deployment in a drain.

Pure: plain dicts, no Pulumi.
"""

from __future__ import annotations

from typing import Any

from aks_gpu.kube.workload_manifests import RBAC_API_GROUP
from aks_gpu.naming import TEAM_ROLE_NAME

# policy.go's verb sets.
READ = ("get", "list", "watch")
WRITE = ("create", "update", "patch", "delete", "deletecollection")
READ_WRITE = (*READ, *WRITE)

CORE, APPS, AUTOSCALING, BATCH, EXTENSIONS = "", "apps", "autoscaling", "batch", "extensions"
POLICY, NETWORKING, COORDINATION, RESOURCE, DISCOVERY, EVENTS = (
    "policy",
    "networking.k8s.io",
    "coordination.k8s.io",
    "resource.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
)


def _rule(verbs: tuple[str, ...], groups: tuple[str, ...], *resources: str) -> dict[str, Any]:
    return {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}


def _edit_rules() -> list[dict[str, Any]]:
    """policy.go ``editRules()``, in its order; ``networkpolicies`` taken out of its two write rules."""
    return [
        # Read on escalating resources.
        _rule(READ, (CORE,), "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
        _rule(("impersonate",), (CORE,), "serviceaccounts"),
        _rule(WRITE, (CORE,), "pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
        _rule(("create",), (CORE,), "pods/eviction"),
        _rule(
            WRITE,
            (CORE,),
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/proxy",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
        ),
        _rule(("create",), (CORE,), "serviceaccounts/token"),
        _rule(WRITE, (CORE, EVENTS), "events"),
        _rule(
            WRITE,
            (APPS,),
            "statefulsets",
            "statefulsets/scale",
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "replicasets",
            "replicasets/scale",
        ),
        _rule(WRITE, (AUTOSCALING,), "horizontalpodautoscalers"),
        _rule(WRITE, (BATCH,), "jobs", "cronjobs"),
        # edit: ... "replicationcontrollers/scale", "networkpolicies".
        _rule(
            WRITE,
            (EXTENSIONS,),
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "ingresses",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
        ),
        _rule(WRITE, (POLICY,), "poddisruptionbudgets"),
        # edit: "networkpolicies", "ingresses".
        _rule(WRITE, (NETWORKING,), "ingresses"),
        _rule(READ_WRITE, (COORDINATION,), "leases"),
        # DynamicResourceAllocation (GA, on in 1.36).
        _rule(WRITE, (RESOURCE,), "resourceclaims", "resourceclaimtemplates"),
    ]


def _view_rules() -> list[dict[str, Any]]:
    """policy.go ``viewRules()``, in its order (DynamicResourceAllocation's rule kept, GenericWorkload's left out)."""
    return [
        _rule(
            READ,
            (CORE,),
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "configmaps",
        ),
        _rule(
            READ,
            (CORE,),
            "limitranges",
            "resourcequotas",
            "bindings",
            "pods/status",
            "resourcequotas/status",
            "namespaces/status",
            "replicationcontrollers/status",
            "pods/log",
        ),
        _rule(READ, (CORE,), "namespaces"),
        _rule(READ, (CORE, EVENTS), "events"),
        _rule(READ, (DISCOVERY,), "endpointslices"),
        _rule(
            READ,
            (APPS,),
            "controllerrevisions",
            "statefulsets",
            "statefulsets/status",
            "statefulsets/scale",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/status",
            "deployments/scale",
            "replicasets",
            "replicasets/status",
            "replicasets/scale",
        ),
        _rule(READ, (AUTOSCALING,), "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
        _rule(READ, (BATCH,), "jobs", "cronjobs", "cronjobs/status", "jobs/status"),
        _rule(
            READ,
            (EXTENSIONS,),
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
            "networkpolicies",
        ),
        _rule(READ, (POLICY,), "poddisruptionbudgets", "poddisruptionbudgets/status"),
        _rule(READ, (NETWORKING,), "networkpolicies", "ingresses", "ingresses/status"),
        _rule(READ, (RESOURCE,), "resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
    ]


def team_role_manifest() -> dict[str, Any]:
    """The team role, cluster-scoped (bound per namespace by the workloads' RoleBindings)."""
    return {
        "apiVersion": f"{RBAC_API_GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": TEAM_ROLE_NAME},
        "rules": [*_edit_rules(), *_view_rules()],
    }
