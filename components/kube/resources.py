"""The one function that turns a Kubernetes manifest into a Pulumi resource.

Every component registers its Kubernetes objects through ``kube_resource``: the kinds the platform creates get their
typed pulumi-kubernetes class (type tokens such as ``kubernetes:apps/v1:DaemonSet``, the provider's await logic for
rollouts and Jobs), anything else a ``CustomResource``; the inputs are the manifest's own fields as written, and the
object carries the platform's common labels (``objects.labelled``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kube.objects import Manifest, labelled

# Fields of the manifest that name its type: the typed class says them itself.
_TYPE_FIELDS = ("apiVersion", "kind")
_CAMEL_HUMP = re.compile(r"(?<!^)(?=[A-Z])")


@cache
def _typed_classes() -> dict[tuple[str, str], Callable[..., pulumi.CustomResource]]:
    """(apiVersion, kind) -> the pulumi-kubernetes class. Built on first use: the SDK loads its modules lazily."""
    return {
        ("v1", "Namespace"): k8s.core.v1.Namespace,
        ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
        ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
        ("v1", "LimitRange"): k8s.core.v1.LimitRange,
        ("v1", "ResourceQuota"): k8s.core.v1.ResourceQuota,
        ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
        ("batch/v1", "Job"): k8s.batch.v1.Job,
        ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
        ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
        ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
        ("storage.k8s.io/v1", "StorageClass"): k8s.storage.v1.StorageClass,
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding
        ),
    }


def _argument(field: str) -> str:
    """A manifest field as the typed class's argument: ``roleRef`` -> ``role_ref``."""
    return _CAMEL_HUMP.sub("_", field).lower()


def _lift(value: Any, change: Callable[[Any], Any]) -> Any:
    return pulumi.Output.from_input(value).apply(change)


def kube_resource(name: str, manifest: Manifest, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Register ``manifest`` (plain values, or outputs per top-level field) as the Pulumi resource ``name``."""
    manifest = labelled(manifest, _lift)
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    fields = {key: value for key, value in manifest.items() if key not in _TYPE_FIELDS}
    typed = _typed_classes().get((api_version, kind))
    if typed is None:
        return k8s.apiextensions.CustomResource(name, api_version=api_version, kind=kind, opts=opts, **fields)
    return typed(name, opts=opts, **{_argument(key): value for key, value in fields.items()})
