"""Every Kubernetes manifest `aksgpu plan` writes, for every stack, against the API schemas of every Kubernetes
minor AKS supports, in strict mode (an unknown or misspelled field is an error, as `kubectl apply
--validate=strict` would make it).

The schemas come from ``kubernetes-validate``, which bundles them in its wheel (one folder per minor,
``kubernetes-json-schema/v1.NN.0-local-strict``): nothing is fetched at test time, and a test below proves it.
"""

from __future__ import annotations

import copy
import importlib.resources
import re
import socket
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
from kubernetes_validate.utils import all_versions  # type: ignore[import-untyped]

from aks_gpu.admission.policy import render_policy
from aks_gpu.aks_facts import MUTATING_ADMISSION_POLICY_SINCE, minor_key
from aks_gpu.resolved.model import resolve
from tests.conformance import STACK_NAMES, Manifest, planned
from tests.conftest import AKS_VERSIONS, stack_config

# Kinds that are CustomResourceDefinitions, so no Kubernetes release schema knows them: each with who defines
# it. Only these may be skipped; anything else kubernetes-validate does not know is a failure (a typo in
# ``kind`` or ``apiVersion``, or an API version Kubernetes has removed).
KNOWN_CRDS: dict[tuple[str, str], str] = {
    # Azure Container Storage v1 (storage.flavour v1) creates its storage pools from this CRD.
    # https://learn.microsoft.com/azure/storage/container-storage/use-container-storage-with-local-disk-version-1
    ("containerstorage.azure.com/v1", "StoragePool"): "Azure Container Storage v1 CRD (acstor extension)",
    # Azure Monitor managed Prometheus (monitoring.engine azure-monitor) scrapes from its own copy of the Prometheus
    # Operator CRDs, in this group; the metrics add-on installs them.
    # https://learn.microsoft.com/azure/azure-monitor/containers/prometheus-metrics-scrape-crd
    ("azmonitoring.coreos.com/v1", "PodMonitor"): "Azure Monitor metrics add-on CRD (ama-metrics)",
    # A Prometheus Operator the team runs (monitoring.engine prometheus-operator).
    # https://prometheus-operator.dev/docs/api-reference/api/
    ("monitoring.coreos.com/v1", "PodMonitor"): "Prometheus Operator CRD",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "Prometheus Operator CRD",
    # Kueue (aks-gpu:queueing): its chart installs them; the e2e tier creates them on the real API server from the
    # CRDs of the same module version (sigs.k8s.io/kueue@v0.17.0 config/components/crd/bases).
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): "Kueue CRD",
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): "Kueue CRD",
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): "Kueue CRD",
}

# Kinds the platform renders only from a Kubernetes minor on, each with that minor: a stack below it renders none
# (test_a_stack_below_a_kinds_minor_renders_none_of_it), and a cluster never runs below its stack's minor, so these are
# not validated against the supported minors before it.
FROM_MINOR: dict[tuple[str, str], str] = {
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"): MUTATING_ADMISSION_POLICY_SINCE,
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding"): MUTATING_ADMISSION_POLICY_SINCE,
}

NO_MANIFESTS = "(no manifests)"


def _cases() -> list[Any]:
    cases = []
    for stack in STACK_NAMES:
        files = sorted(planned(stack).manifests) or [NO_MANIFESTS]
        for version in AKS_VERSIONS:
            cases += [pytest.param(stack, version, name, id=f"{stack}-{version}-{name}") for name in files]
    return cases


def _validate(manifest: Manifest, version: str) -> str:
    """kubernetes-validate in strict mode; returns the Kubernetes minor whose schemas were used."""
    used: str = kubernetes_validate.validate(manifest, version, strict=True)
    return used


@pytest.mark.parametrize(("stack", "version", "file_name"), _cases())
def test_manifest_is_valid_for_every_supported_kubernetes_version(stack: str, version: str, file_name: str) -> None:
    plan = planned(stack)
    assert file_name != NO_MANIFESTS, f"stack {stack} renders no Kubernetes objects (device plugin, namespaces...)"
    manifest = plan.manifests[file_name]
    crd = KNOWN_CRDS.get((manifest["apiVersion"], manifest["kind"]))
    if crd is not None:
        pytest.skip(f"{manifest['kind']} is a CRD ({crd}): no Kubernetes release schema describes it")
    since = FROM_MINOR.get((manifest["apiVersion"], manifest["kind"]))
    if since is not None and minor_key(version) < minor_key(since):
        pytest.skip(f"{manifest['kind']} is rendered from Kubernetes {since} on only")
    try:
        used = _validate(manifest, version)
    except kubernetes_validate.SchemaNotFoundError as exc:
        pytest.fail(f"{file_name}: {exc.message}; not a built-in kind, and not in KNOWN_CRDS")
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(part) for part in exc.path) or "(top level)"
        pytest.fail(f"{file_name} is not valid for Kubernetes {version}: {where}: {exc.message}")
    # kubernetes-validate silently falls back to an older minor when it lacks one: it must not have here.
    assert used == version


def test_a_stack_below_a_kinds_minor_renders_none_of_it() -> None:
    for stack in STACK_NAMES:
        config = stack_config(stack)
        for since in set(FROM_MINOR.values()):
            major, minor = (int(part) for part in since.split("."))
            for version, rendered in ((f"{major}.{minor - 1}", False), (since, True)):
                cluster = config.cluster.model_copy(update={"kubernetes_version": version})
                model = resolve(config.model_copy(update={"cluster": cluster}))
                kinds = {(m["apiVersion"], m["kind"]) for m in render_policy(model)}
                gated = {kind for kind, first in FROM_MINOR.items() if first == since}
                assert (gated <= kinds) is rendered and (not gated & kinds) is not rendered, (stack, version)


def test_the_schemas_of_every_supported_version_are_bundled() -> None:
    # An empty window means the calendar data is stale (every minor it lists is past end of life): update it.
    assert AKS_VERSIONS, "no Kubernetes minor in components/aks_gpu/data/aks_versions.yaml is supported today"
    bundled = {version.rsplit(".", 1)[0] for version in all_versions()}
    assert set(AKS_VERSIONS) <= bundled, "kubernetes-validate lacks the schemas of a supported minor: upgrade it"


def test_every_stack_runs_a_kubernetes_version_its_manifests_are_validated_against() -> None:
    for stack in STACK_NAMES:
        minor = ".".join(planned(stack).config.cluster.kubernetes_version.split(".")[:2])
        assert minor in AKS_VERSIONS, f"stack {stack} runs Kubernetes {minor}; validate its manifests for it too"


def test_validation_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("kubernetes-validate tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "offline"}}
    for version in AKS_VERSIONS:
        assert _validate(namespace, version) == version


# ---------------------------------------------------------------- the check catches what it is meant to catch


def _a_real_manifest() -> Manifest:
    """A rendered object to break, or a hand-written one while no stack renders any."""
    for stack in STACK_NAMES:
        for manifest in planned(stack).manifests.values():
            if (manifest["apiVersion"], manifest["kind"]) not in KNOWN_CRDS:
                return copy.deepcopy(manifest)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-training", "labels": {"a": "b"}}}


def test_strict_mode_refuses_a_misspelled_field() -> None:
    broken = _a_real_manifest()
    broken["metadata"]["lables"] = broken["metadata"].pop("labels", {"a": "b"})
    with pytest.raises(kubernetes_validate.ValidationError, match="lables"):
        _validate(broken, AKS_VERSIONS[-1])


def test_a_wrong_type_is_refused() -> None:
    broken = _a_real_manifest()
    broken["metadata"]["name"] = 42
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(broken, AKS_VERSIONS[-1])


def test_an_unknown_kind_is_not_mistaken_for_a_crd() -> None:
    broken = _a_real_manifest()
    broken["kind"] = broken["kind"] + "s"
    assert (broken["apiVersion"], broken["kind"]) not in KNOWN_CRDS
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        _validate(broken, AKS_VERSIONS[-1])


def _schema_group(api_version: str) -> str:
    """The API group/version as kubernetes-validate names its schema files: ``networking.k8s.io/v1`` ->
    ``networking-v1``, ``v1`` -> ``v1`` (the rule of ``kubernetes_validate.validate``)."""
    return re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)


def _served_groups(version: str) -> set[str]:
    """Every API group/version some built-in kind of Kubernetes ``version`` has a schema file for."""
    folder = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v{version}.0-local-strict"
    names = (entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json"))
    return {name.split("-", 1)[1] for name in names if "-" in name}


@pytest.mark.parametrize(("api_version", "kind"), sorted(KNOWN_CRDS))
def test_known_crds_are_really_crds(api_version: str, kind: str) -> None:
    """The skip list cannot hide a built-in kind: no supported Kubernetes release has a schema for the kind,
    nor serves its API group/version at all (a built-in group with an unknown kind is a typo, not a CRD)."""
    for version in AKS_VERSIONS:
        assert _schema_group(api_version) not in _served_groups(version), f"{api_version} is served by Kubernetes {version}"
        with pytest.raises(kubernetes_validate.SchemaNotFoundError):
            _validate({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}, version)


def test_served_groups_know_the_builtin_groups() -> None:
    served = _served_groups(AKS_VERSIONS[-1])
    for builtin in ("v1", "apps/v1", "batch/v1", "networking.k8s.io/v1", "admissionregistration.k8s.io/v1", "storage.k8s.io/v1"):
        assert _schema_group(builtin) in served, builtin


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_object_and_every_pod_carries_the_common_labels(stack: str) -> None:
    """`kubectl get -l app.kubernetes.io/part-of=aks-gpu` lists everything the platform created, pods included."""
    from aks_gpu.naming import COMMON_LABELS

    for file_name, manifest in planned(stack).manifests.items():
        labels = (manifest.get("metadata") or {}).get("labels") or {}
        assert COMMON_LABELS.items() <= labels.items(), file_name
        template = (manifest.get("spec") or {}).get("template")
        if isinstance(template, dict):
            assert COMMON_LABELS.items() <= ((template.get("metadata") or {}).get("labels") or {}).items(), file_name
