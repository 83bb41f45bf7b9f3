"""Unit tests for a Pulumi program that composes aks-gpu: mocks that answer what the components ask Azure.

Pulumi's unit tests replace the engine with ``pulumi.runtime.Mocks``
(https://www.pulumi.com/docs/iac/guides/testing/unit/): ``new_resource`` gives each resource its id and outputs,
``call`` answers each provider function. The components call Azure for the cluster's kubeconfig, the deploying
identity and, for an existing cluster, the cluster itself (``CALLS``); mocks that answer ``{}`` leave them without
a value and the component stops with ``UnansweredCallError`` naming the call. ``AksGpuMocks`` answers them all as
Azure does, with stable fake values, the same answers ``aksgpu plan`` runs on::

    import pulumi
    from aks_gpu.testing import AksGpuMocks

    pulumi.runtime.set_mocks(AksGpuMocks(), preview=False)  # before the program's modules are imported

To answer resources or calls of your own, subclass it and hand the rest to ``super()``::

    class TeamMocks(AksGpuMocks):
        def call(self, args):
            if args.token == "azure-native:resources:getResourceGroup":
                return {"location": "swedencentral"}, []
            return super().call(args)

docs/composing.md#unit-tests says the same for consumers, and what mocks of their own must answer instead.
"""

from __future__ import annotations

from aks_gpu.azure.cluster import CALLS, UnansweredCallError
from aks_gpu.mock_engine import FAKE_OBJECT_ID, FAKE_SUBSCRIPTION, FAKE_TENANT, PlanMocks, fake_kubeconfig

__all__ = [
    "CALLS",
    "FAKE_OBJECT_ID",
    "FAKE_SUBSCRIPTION",
    "FAKE_TENANT",
    "AksGpuMocks",
    "UnansweredCallError",
    "fake_kubeconfig",
]


class AksGpuMocks(PlanMocks):
    """``pulumi.runtime.Mocks`` for programs that use the aks-gpu components.

    - ``call``: every call in ``CALLS`` answered as Azure does (an exec kubeconfig for ``kubelogin``, the client
      config ``FAKE_TENANT``/``FAKE_SUBSCRIPTION``/``FAKE_OBJECT_ID``, an existing cluster's id); any other call ``{}``.
    - ``new_resource``: each custom resource gets the id ``<name>-id`` and its inputs as outputs; the AKS cluster gets
      the outputs Azure computes (``name``, ``fqdn``, ``oidcIssuerProfile``) and its ARM id.

    ``AksGpuMocks(preview=True)`` answers as ``pulumi preview`` does (ids and computed outputs unknown); pass the same
    ``preview`` to ``pulumi.runtime.set_mocks``.
    """

