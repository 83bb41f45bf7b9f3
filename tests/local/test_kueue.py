"""aksgpu local's Kueue: the stack's own Configuration on this machine's loopback, the module's webhooks pointed at the
process and fenced to the workload namespaces, and the local stack config that leaves the chart out."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from aks_gpu.config.models import QueueingConfig
from aks_gpu.kube.kueue import full_configuration
from aks_gpu.local.engine import local_stack_config
from aks_gpu.local.kueue import local_configuration, local_webhooks

QUEUEING = QueueingConfig(engine="kueue")
# The shape of the module's config/components/webhook/manifests.yaml (sigs.k8s.io/kueue@v0.17.0).
MODULE_WEBHOOKS: list[Any] = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            {
                "name": "mjob.kb.io",
                "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/mutate-batch-v1-job"}},
                "failurePolicy": "Fail",
                "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "operations": ["CREATE"], "apiVersions": ["v1"]}],
            }
        ],
    },
    None,
]


def test_the_local_controller_runs_the_stacks_configuration_on_loopback() -> None:
    local = local_configuration(QUEUEING, 30001, 30002, Path("/certs"))
    azure = full_configuration(QUEUEING)
    for key in ("waitForPodsReady", "managedJobsNamespaceSelector", "manageJobsWithoutQueueName", "integrations"):
        assert local[key] == azure[key]
    assert local["webhook"] == {"host": "127.0.0.1", "port": 30001, "certDir": "/certs"}
    assert local["health"] == {"healthProbeBindAddress": "127.0.0.1:30002"}
    # Kueue's certificate rotator on, over the Secret local up fills with certificates for 127.0.0.1.
    assert local["internalCertManagement"]["webhookSecretName"] == "kueue-local-webhook-server-cert"
    assert local["leaderElection"] == {"leaderElect": False}


def test_the_webhooks_call_the_process_trust_its_certificate_and_only_in_workload_namespaces() -> None:
    [mutating] = local_webhooks(MODULE_WEBHOOKS, 30001, b"PEM")
    assert mutating["metadata"] == {"name": "kueue-local-mutating-webhook-configuration"}
    [webhook] = mutating["webhooks"]
    assert webhook["clientConfig"] == {
        "url": "https://127.0.0.1:30001/mutate-batch-v1-job",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }
    assert webhook["namespaceSelector"] == {"matchExpressions": [{"key": "aks-gpu/workload", "operator": "Exists"}]}
    assert webhook["failurePolicy"] == "Fail" and webhook["rules"] == MODULE_WEBHOOKS[0]["webhooks"][0]["rules"]


def test_the_local_stack_queues_without_the_chart() -> None:
    raw = {"aks-gpu:queueing": {"engine": "kueue"}, "aks-gpu:cluster": {"name": "c"}}
    config = local_stack_config(raw, Path("/kubeconfig"), {})
    assert config["aks-gpu:queueing"] == {"engine": "kueue", "installChart": False}
    assert "aks-gpu:queueing" not in local_stack_config({"aks-gpu:cluster": {"name": "c"}}, Path("/k"), {})
