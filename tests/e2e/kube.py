"""A small client of a local cluster's API server for the e2e tests: the admin kubeconfig's client certificate, a
server-side dry-run create (``dryRun=All``) of any object the admission fixtures hold, and its answer as a decision.

Plain HTTPS (requests) rather than a kubectl per object: one process, a kept-alive connection, every call bounded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import yaml

TIMEOUT_S = 20
# The built-in kinds these tests create, by apiVersion and kind (a custom resource's kind may share a built-in's name:
# Volcano's batch.volcano.sh/v1alpha1 Job is no batch/v1 Job): the collection path and whether it is namespaced.
RESOURCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Pod"): ("/api/v1/pods", True),
    ("v1", "ConfigMap"): ("/api/v1/configmaps", True),
    ("v1", "Secret"): ("/api/v1/secrets", True),
    ("v1", "Service"): ("/api/v1/services", True),
    ("v1", "ServiceAccount"): ("/api/v1/serviceaccounts", True),
    ("policy/v1", "PodDisruptionBudget"): ("/apis/policy/v1/poddisruptionbudgets", True),
    ("v1", "ReplicationController"): ("/api/v1/replicationcontrollers", True),
    ("v1", "Namespace"): ("/api/v1/namespaces", False),
    ("apps/v1", "Deployment"): ("/apis/apps/v1/deployments", True),
    ("apps/v1", "ReplicaSet"): ("/apis/apps/v1/replicasets", True),
    ("apps/v1", "StatefulSet"): ("/apis/apps/v1/statefulsets", True),
    ("apps/v1", "DaemonSet"): ("/apis/apps/v1/daemonsets", True),
    ("batch/v1", "Job"): ("/apis/batch/v1/jobs", True),
    ("batch/v1", "CronJob"): ("/apis/batch/v1/cronjobs", True),
    ("resource.k8s.io/v1", "ResourceClaim"): ("/apis/resource.k8s.io/v1/resourceclaims", True),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ("/apis/resource.k8s.io/v1/resourceclaimtemplates", True),
}


def built_in(obj: dict[str, Any]) -> bool:
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", ""))) in RESOURCES


@dataclass(frozen=True)
class Answer:
    """What the server said: ``admitted``, ``denied`` (admission: 403), ``refused`` (before admission: 422/400) or
    ``other`` (any other status), with the first line of its message (empty when admitted)."""

    decision: str
    line: str
    code: int


class Server:
    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.base = str(cluster["server"])
        self.session = requests.Session()
        # Not the environment's CA bundle or proxies (REQUESTS_CA_BUNDLE would replace the cluster's CA): loopback only.
        self.session.trust_env = False
        self.session.verify = str(cluster["certificate-authority"])
        self.session.cert = (str(user["client-certificate"]), str(user["client-key"]))

    def _path(self, obj: dict[str, Any], namespace: str | None) -> str:
        collection, namespaced = RESOURCES[(str(obj.get("apiVersion", "")), str(obj["kind"]))]
        if not namespaced:
            return collection
        group, plural = collection.rsplit("/", 1)
        return f"{group}/namespaces/{namespace}/{plural}"

    def create(self, obj: dict[str, Any], *, dry_run: bool, timeout: float = TIMEOUT_S) -> Answer:
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        response = self.session.post(
            self.base + self._path(obj, namespace),
            params={"dryRun": "All"} if dry_run else {},
            json=obj,
            timeout=timeout,
        )
        if response.status_code in (200, 201):
            return Answer("admitted", "", response.status_code)
        try:
            message = str(response.json().get("message", ""))
        except ValueError:
            message = response.text
        line = message.splitlines()[0] if message else ""
        decision = {403: "denied", 422: "refused", 400: "refused"}.get(response.status_code, "other")
        if "ValidatingAdmissionPolicy '" in line:
            # A policy validation with reason Invalid answers 422: still an admission denial, not schema validation.
            decision = "denied"
        return Answer(decision, line, response.status_code)

    def exists(self, path: str) -> bool:
        return self.session.get(self.base + path, timeout=TIMEOUT_S).status_code == 200

    def ensure_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        if self.exists(f"/api/v1/namespaces/{name}"):
            return
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
        answer = self.create(body, dry_run=False)
        assert answer.decision == "admitted", answer
