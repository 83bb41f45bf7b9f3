"""The policies compile in the real Kubernetes CEL environment of every supported compatibility version.

kube-apiserver compiles a ValidatingAdmissionPolicy when it is created, in the base environment of its
compatibility version (homogeneous aggregate literals, duration/timestamp/regex literal validators, the libraries
each version enables). Before issue #23 the placement policy's ``pools`` variable mixed string, bool and map values
in one map literal: both evaluating engines ran it, and every real API server refused the policy.
``aks_gpu.admission.cel_environment`` applies those rules offline; its verdicts are held equal to the real
environment's on the corpus of tests/fixtures/kubernetes_cel (recorded with vaph, see SOURCES.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aks_gpu.admission.engine import cpp_available
from aks_gpu.admission.pod_security import baseline_policy_manifests, rdma_policy_manifests
from aks_gpu.admission.policy import render_policy
from aks_gpu.data_files import load_yaml
from tests.conftest import FIXTURES_DIR, STACK_NAMES, stack_model

pytestmark = pytest.mark.skipif(not cpp_available(), reason="the offline checker type-checks with cel-cpp (cel-expr-python)")

CORPUS = FIXTURES_DIR / "kubernetes_cel"


def _environment() -> Any:
    from aks_gpu.admission import cel_environment

    return cel_environment


def _verdicts() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / "verdicts.json").read_text())
    return data


def _corpus() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = load_yaml(CORPUS / "corpus.yaml")["cases"]
    return cases


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_every_stack_policy_compiles_at_every_compat_version(stack: str) -> None:
    env = _environment()
    policies = [m for m in render_policy(stack_model(stack)) if m["kind"] == "ValidatingAdmissionPolicy"]
    assert policies
    for policy in policies:
        for version in env.compat_versions():
            errors = env.check_policy(policy["spec"], version)
            assert not errors, f"{policy['metadata']['name']} at compat {version}:\n" + "\n".join(map(str, errors))


def test_the_pod_security_policies_compile_at_every_compat_version() -> None:
    """The RDMA namespaces' baseline policy (deployed) and plain baseline (evaluated offline) compile as well."""
    env = _environment()
    for manifests in (rdma_policy_manifests("team"), baseline_policy_manifests("team")):
        for version in env.compat_versions():
            assert not env.check_policy(manifests[0]["spec"], version), manifests[0]["metadata"]["name"]


def test_the_compat_versions_are_the_ones_the_verdicts_were_recorded_at() -> None:
    assert _environment().compat_versions() == tuple(_verdicts()["provenance"]["compat_versions"])


@pytest.mark.parametrize("case", _corpus(), ids=lambda case: case["name"])
def test_offline_verdicts_are_the_real_environments(case: dict[str, Any]) -> None:
    """Per expression and version: refused offline exactly when the server refuses it; the homogeneous-literal and
    literal-validator refusals word for word at the server's line and column; a refusal marked "not checked
    offline" (a library cel-cpp does not carry) is allowed to be stricter than the server, never looser."""
    env = _environment()
    recorded = _verdicts()["verdicts"][case["name"]]
    spec = {"variables": case.get("variables", []), "validations": case.get("validations") or [{"expression": "true"}]}
    for version in env.compat_versions():
        server: dict[str, list[tuple[int, int, str]]] = {}
        for error in recorded[version]:
            server.setdefault(error["field"], []).append((error["line"], error["column"], error["message"]))
        offline: dict[str, list[Any]] = {}
        for error in env.check_policy(spec, version):
            offline.setdefault(error.field, []).append(error)
        for field, _source, _name in env.policy_expressions(spec):
            mine, theirs = offline.get(field, []), server.get(field, [])
            where = f"{case['name']} {field} at {version}: offline {[str(e) for e in mine]} vs server {theirs}"
            if not theirs:
                assert all(error.conservative for error in mine), where
                continue
            assert mine, where
            ours = [(e.line, e.column, e.message) for e in mine if e.message.startswith(("expected type", "invalid "))]
            rules = [error for error in theirs if error[2].startswith(("expected type", "invalid "))]
            assert ours == rules, where


def test_the_refused_pools_literal_is_in_the_corpus() -> None:
    """The regression itself: today's checker refuses the pools variable the way every server did."""
    recorded = _verdicts()["verdicts"]["placement-pools-before-23"]
    assert all(recorded[version] for version in _environment().compat_versions())
