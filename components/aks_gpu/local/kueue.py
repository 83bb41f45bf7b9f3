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
from aks_gpu.naming import KUEUE_NAMESPACE, WORKLOAD_LABEL

# The binary and the documents the kueue group of tools/go/recipes puts in .tools/bin.
KUEUE_BINARY = "kueue"
KUEUE_CRDS = "kueue-crds.yaml"
KUEUE_WEBHOOKS = "kueue-webhooks.yaml"
# controller-runtime's webhook server reads tls.crt and tls.key from certDir (its defaults, CertName and KeyName); the
# certificate rotator's Secret holds the CA's too (cert-controller's caCertName, caKeyName).
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_CERT_FILE = "ca.crt"
CA_KEY_FILE = "ca.key"
# Kueue's certificate rotator: the Secret it reads, and the Service name its certificate must be valid for
# (pkg/util/cert/cert.go, buildCertRotatorConfig: "<webhookServiceName>.<namespace>.svc"); it puts the CA into the
# webhook configurations "<service name less -webhook-service>-{mutating,validating}-webhook-configuration" and into
# the conversion webhooks of these CRDs.
WEBHOOK_SERVICE = "kueue-local-webhook-service"
WEBHOOK_SECRET = "kueue-local-webhook-server-cert"
WEBHOOK_DNS_NAME = f"{WEBHOOK_SERVICE}.{KUEUE_NAMESPACE}.svc"
# The rotator keeps a CA only if it is valid for this name (cert-controller v0.16.0 pkg/rotator/rotator.go validCACert:
# ValidCert(..., cr.CAName, ...); Kueue's caName, pkg/util/cert/cert.go).
CA_NAME = "kueue-ca"
CONVERTED_CRDS = (
    "localqueues.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
)
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
# The prefix of the local webhook configurations' names (the module's are mutating- / validating-webhook-configuration).
WEBHOOK_PREFIX = "kueue-local-"


def local_configuration(queueing: QueueingConfig, webhook_port: int, health_port: int, cert_dir: Path) -> dict[str, Any]:
    """The stack's Configuration (the one its chart gets on Azure), served on this machine's loopback."""
    configuration = full_configuration(queueing)
    configuration["webhook"] = {"host": LOOPBACK, "port": webhook_port, "certDir": str(cert_dir)}
    # Kueue's own certificate management on (with it off, v0.17.0 reads metrics certificates from the fixed
    # /etc/kueue/metrics/certs, cmd/kueue/main.go:205-217), over a Secret that already holds certificates for 127.0.0.1.
    configuration["internalCertManagement"] = {
        "enable": True,
        "webhookServiceName": WEBHOOK_SERVICE,
        "webhookSecretName": WEBHOOK_SECRET,
    }
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


def certificate_commands(cert_dir: Path, days: int = 365) -> list[list[str]]:
    """openssl's CA and serving certificate for the webhooks: valid for 127.0.0.1 (the address the API server calls)
    and for the Service name Kueue's certificate rotator checks; RSA keys in PKCS#1, the form the rotator parses
    (open-policy-agent/cert-controller, as Kueue v0.17.0 vendors it)."""
    ca, server = cert_dir / CA_CERT_FILE, cert_dir / CERT_FILE
    extensions = cert_dir / "server.ext"
    return [
        ["openssl", "genrsa", "-traditional", "-out", str(cert_dir / CA_KEY_FILE), "2048"],
        [
            "openssl",
            "req",
            "-x509",
            "-new",
            "-key",
            str(cert_dir / CA_KEY_FILE),
            "-out",
            str(ca),
            "-days",
            str(days * 10),
            "-subj",
            f"/O=kueue/CN={CA_NAME}",
            "-addext",
            f"subjectAltName=DNS:{CA_NAME}",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        ["openssl", "genrsa", "-traditional", "-out", str(cert_dir / KEY_FILE), "2048"],
        [
            "openssl",
            "req",
            "-new",
            "-key",
            str(cert_dir / KEY_FILE),
            "-out",
            str(cert_dir / "server.csr"),
            "-subj",
            f"/CN={WEBHOOK_DNS_NAME}",
        ],
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            str(cert_dir / "server.csr"),
            "-CA",
            str(ca),
            "-CAkey",
            str(cert_dir / CA_KEY_FILE),
            "-CAcreateserial",
            "-out",
            str(server),
            "-days",
            str(days),
            "-extfile",
            str(extensions),
        ],
    ]


def server_extensions() -> str:
    """The serving certificate's extensions (the -extfile of ``certificate_commands``)."""
    return f"subjectAltName=DNS:{WEBHOOK_DNS_NAME},IP:{LOOPBACK}\nextendedKeyUsage=serverAuth\n"


def webhook_secret(cert_dir: Path) -> dict[str, Any]:
    """The Secret Kueue's certificate rotator reads (internalCertManagement.webhookSecretName): with these
    certificates already in it and valid, it keeps them, writes them to certDir and puts the CA into the webhook
    configurations and the CRDs' conversion webhooks."""
    names = (CA_CERT_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE)
    data = {name: base64.b64encode((cert_dir / name).read_bytes()).decode("ascii") for name in names}
    metadata = {"name": WEBHOOK_SECRET, "namespace": KUEUE_NAMESPACE}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata, "data": data}


def local_crds(documents: Iterable[Any], webhook_port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's CRDs (the module's config/components/crd/bases), the versioned ones converted by the process as the
    chart has them converted by the controller's Service (charts/kueue/templates/crd: conversion strategy Webhook,
    path /convert)."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    found = []
    for document in documents:
        if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
            continue
        crd = copy.deepcopy(document)
        if crd["metadata"]["name"] in CONVERTED_CRDS:
            client = {"url": f"https://{LOOPBACK}:{webhook_port}/convert", "caBundle": bundle}
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {"clientConfig": client, "conversionReviewVersions": ["v1"]},
            }
        found.append(crd)
    return found
