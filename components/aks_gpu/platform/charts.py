"""A platform engine's Helm release (NVSentinel, Kueue): its chart from the pure builder's spec, in the namespace the
platform creates for it (with its own labels), after that namespace."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pulumi
import pulumi_kubernetes as k8s


class ReleaseSpec(Protocol):
    """``helm install <name> <chart> --version <version> -n <namespace> -f <values>``."""

    @property
    def name(self) -> str: ...
    @property
    def chart(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def values(self) -> dict[str, Any]: ...


def chart_release(
    name: str,
    spec: ReleaseSpec,
    namespace: pulumi.Resource,
    opts: pulumi.ResourceOptions,
    after: Sequence[pulumi.Resource] = (),
) -> k8s.helm.v3.Release:
    """The release, after its namespace and ``after`` (what its values name that the stack creates first)."""
    return k8s.helm.v3.Release(
        name,
        name=spec.name,
        # An OCI chart: Helm takes the reference as the chart, with no repository.
        chart=spec.chart,
        version=spec.version,
        namespace=spec.namespace,
        # The namespace is ours (Pod Security label, the platform's common labels), not Helm's.
        create_namespace=False,
        values=spec.values,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace, *after])),
    )
