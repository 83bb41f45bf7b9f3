"""How ``aksgpu local`` runs Kueue for a stack with queueing on: the controller ``make tools`` built from
sigs.k8s.io/kueue (the version of the chart the stack deploys on Azure) as a process on this machine, against the local
control plane, with its CRDs and webhook configurations from the same module. Pure: documents in, documents out
(``local/engine.py`` starts the process and applies them).

The webhooks are served on 127.0.0.1 with a certificate ``local/engine.py`` makes for that address; each webhook
configuration calls ``https://127.0.0.1:<port><path>`` (``clientConfig.url`` in place of the in-cluster Service) and
trusts that certificate (``caBundle``), and only in the workload namespaces (``namespaceSelector``), so a stopped
controller never blocks the rest of the cluster. Kueue's own certificate management is off (it writes the Service's
certificate into a Secret), and so is leader election (one process). Field names: Configuration ``webhook.host``,
``.port``, ``.certDir``, ``internalCertManagement.enable``, ``leaderElection.leaderElect``, ``metrics.bindAddress``,
``health.healthProbeBindAddress`` (apis/config/v1beta2/configuration_types.go in sigs.k8s.io/kueue@v0.17.0).
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aks_gpu.config.models import QueueingConfig
from aks_gpu.kube.kueue import full_configuration
from aks_gpu.local.control_plane import LOOPBACK
from aks_gpu.naming import WORKLOAD_LABEL

# The binary and the documents the kueue group of tools/go/recipes puts in .tools/bin.
KUEUE_BINARY = "kueue"
KUEUE_CRDS = "kueue-crds.yaml"
KUEUE_WEBHOOKS = "kueue-webhooks.yaml"
# controller-runtime's webhook server reads these two files from certDir (its defaults, CertName and KeyName).
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
# The prefix of the local webhook configurations' names (the module's are mutating- / validating-webhook-configuration).
WEBHOOK_PREFIX = "kueue-local-"


def local_configuration(queueing: QueueingConfig, webhook_port: int, health_port: int, cert_dir: Path) -> dict[str, Any]:
    """The stack's Configuration (the one its chart gets on Azure), served on this machine's loopback."""
    configuration = full_configuration(queueing)
    configuration["webhook"] = {"host": LOOPBACK, "port": webhook_port, "certDir": str(cert_dir)}
    configuration["internalCertManagement"] = {"enable": False}
    configuration["leaderElection"] = {"leaderElect": False}
    # "0": controller-runtime serves no metrics endpoint.
    configuration["metrics"] = {"bindAddress": "0"}
    configuration["health"] = {"healthProbeBindAddress": f"{LOOPBACK}:{health_port}"}
    return configuration


def local_webhooks(documents: Iterable[Any], webhook_port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations (the module's config/components/webhook/manifests.yaml), each webhook calling
    the local process and only for the workload namespaces."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    found = []
    for document in documents:
        if not isinstance(document, dict) or document.get("kind") not in WEBHOOK_KINDS:
            continue
        configuration = copy.deepcopy(document)
        configuration["metadata"] = {"name": WEBHOOK_PREFIX + document["metadata"]["name"]}
        for webhook in configuration.get("webhooks", []):
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://{LOOPBACK}:{webhook_port}{path}", "caBundle": bundle}
            webhook["namespaceSelector"] = {"matchExpressions": [{"key": WORKLOAD_LABEL, "operator": "Exists"}]}
        found.append(configuration)
    return found


def certificate_command(cert_dir: Path, days: int = 30) -> list[str]:
    """openssl's self-signed serving certificate for 127.0.0.1: the API server trusts it as the webhooks' CA."""
    return [
        "openssl",
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(cert_dir / KEY_FILE),
        "-out",
        str(cert_dir / CERT_FILE),
        "-days",
        str(days),
        "-subj",
        "/CN=aks-gpu local kueue webhooks",
        "-addext",
        f"subjectAltName=IP:{LOOPBACK}",
    ]
