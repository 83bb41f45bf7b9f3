"""Run the real Pulumi program offline under Pulumi's mock engine and record what it would create.

No Azure account, no Pulumi CLI: ``__main__.py`` runs as it would under ``pulumi up``, but every resource
registration and every invoke is answered here, with stable fake IDs, so two runs give identical records.

The parts: ``runner`` runs a program, ``mocks`` answers it, ``monitors`` record its registrations (and run its
resource hooks), ``records`` is what a run gives back, ``references`` finds the Azure scopes it names without
creating or looking them up, ``urns`` matches a plan to a previous deployment, ``changes`` tells what the engine
does with each change against it, and ``plan_files`` writes a plan out.
"""

from __future__ import annotations

from aks_gpu.mock_engine.mocks import (
    AKS_CLIENT_APP_ID,
    AKS_SERVER_APP_ID,
    FAKE_OBJECT_ID,
    FAKE_SUBSCRIPTION,
    FAKE_TENANT,
    PlanMocks,
    arm_id,
    fake_kubeconfig,
    revealed,
)
from aks_gpu.mock_engine.monitors import HookFailedError, HookRunningMonitor, RecordingMonitor
from aks_gpu.mock_engine.plan_files import ACCEPTED_FILE, CHANGES_FILE, MANIFEST_DIR, PLAN_FILE, PlanWriteError, write_plan
from aks_gpu.mock_engine.records import (
    KUBE_PREFIX,
    SECRET,
    UNKNOWN,
    AliasSpec,
    HookRun,
    PlanResult,
    ResourceRecord,
    kube_manifest,
    mask_secrets,
)
from aks_gpu.mock_engine.references import UndeclaredAzureReferenceError, undeclared_azure_references
from aks_gpu.mock_engine.runner import DuplicateUrnError, run_mocked, run_program
from aks_gpu.mock_engine.urns import (
    ROOT_STACK_TYPE,
    engine_aliases,
    engine_urn,
    previous_urns,
    qualified_type,
)

__all__ = [
    "ACCEPTED_FILE",
    "AKS_CLIENT_APP_ID",
    "AKS_SERVER_APP_ID",
    "CHANGES_FILE",
    "FAKE_OBJECT_ID",
    "FAKE_SUBSCRIPTION",
    "FAKE_TENANT",
    "KUBE_PREFIX",
    "MANIFEST_DIR",
    "PLAN_FILE",
    "ROOT_STACK_TYPE",
    "SECRET",
    "UNKNOWN",
    "AliasSpec",
    "DuplicateUrnError",
    "HookFailedError",
    "HookRun",
    "HookRunningMonitor",
    "PlanMocks",
    "PlanResult",
    "PlanWriteError",
    "RecordingMonitor",
    "ResourceRecord",
    "UndeclaredAzureReferenceError",
    "arm_id",
    "engine_aliases",
    "engine_urn",
    "fake_kubeconfig",
    "kube_manifest",
    "mask_secrets",
    "previous_urns",
    "qualified_type",
    "revealed",
    "run_mocked",
    "run_program",
    "undeclared_azure_references",
    "write_plan",
]
