"""``aksgpu admission check`` and the rendered policy over the good, bad and adversarial objects in tests/admission/objects/.

Each object carries what the check must decide in its annotations (which the policy does not read):
``expect.aks-gpu.test/decision`` (admitted or denied), and ``.../message`` (the denial, or its start: the line the
real API server answers with), ``.../also`` (a second rule the object breaks, where it breaks two) or ``.../note``
(why the policy does not apply); the attacker's files also name the ``.../threat`` each object covers.
``timesliced.yaml`` runs on the dev stack (a time-sliced pool), every other file on the prod stack as it is.

Every object goes through the command line (with the engine it picks) and through the rendered policy on both CEL
engines, cel-python and cel-cpp: any difference in decision or message between them fails.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.admission.engine import ENGINE_NAMES, engine_named
from aks_gpu.admission.evaluate import Decision, evaluate
from aks_gpu.admission.policy import render_policy, workload_namespaces
from aks_gpu.admission.reader import GENERATED_SUFFIX
from aks_gpu.cli import admission
from tests.conftest import stack_model

OBJECTS_DIR = Path(__file__).parent / "objects"
EXPECT = "expect.aks-gpu.test/"
FILE_STACKS = {"timesliced.yaml": "dev"}
# Objects the API server refuses before admission: the check exits 2 with the server's refusal.
REFUSED_FILE = "refused-before-admission.yaml"
ATTACKER_FILES = {"adversarial.yaml", "timesliced.yaml", "dra.yaml", "plugins.yaml", REFUSED_FILE}


def expanded(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for entry in document["items"] for item in expanded(entry)] if document["kind"] == "List" else [document]


def objects_of(path: Path) -> list[dict[str, Any]]:
    return [obj for doc in yaml.safe_load_all(path.read_text()) if doc for obj in expanded(doc)]


def cases() -> list[Any]:
    found = []
    for path in sorted(OBJECTS_DIR.glob("*.yaml")):
        for index, obj in enumerate(objects_of(path)):
            found.append(pytest.param(path.name, index, obj, id=f"{path.stem}-{name_of(obj)}"))
    return found


def name_of(obj: dict[str, Any]) -> str:
    """The object's name, or its generateName (the API server names it on create)."""
    metadata = obj["metadata"]
    return str(metadata.get("name") or metadata["generateName"])


def stack_of(file: str) -> str:
    return FILE_STACKS.get(file, "prod")


@pytest.fixture(scope="module")
def decisions() -> dict[str, list[dict[str, Any]]]:
    """The --json output of one check per file, by file name."""
    results = {}
    for path in sorted(OBJECTS_DIR.glob("*.yaml")):
        argv = ["admission", "check", "--stack", stack_of(path.name), "--json", str(path)]
        parser = argparse.ArgumentParser(prog="aksgpu")
        admission.register(parser.add_subparsers(dest="command"))
        args = parser.parse_args(argv)
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            exit_code = args.handler(args)
        results[path.name] = json.loads(stdout.getvalue())
        denied = any(not d["allowed"] for d in results[path.name])
        assert exit_code == (2 if path.name == REFUSED_FILE else 1 if denied else 0), path.name
    return results


@pytest.fixture(scope="module")
def by_engine() -> dict[str, dict[str, list[Decision]]]:
    """Per engine, per file: the rendered policy's decisions."""
    results: dict[str, dict[str, list[Decision]]] = {}
    for name in ENGINE_NAMES:
        engine = engine_named(name)
        results[name] = {}
        for path in sorted(OBJECTS_DIR.glob("*.yaml")):
            model = stack_model(stack_of(path.name))
            namespaces = {
                **workload_namespaces(model),
                **{o["metadata"]["name"]: o for o in objects_of(path) if o["kind"] == "Namespace"},
            }
            results[name][path.name] = evaluate(objects_of(path), render_policy(model), namespaces, engine=engine)
    return results


@pytest.mark.parametrize(("file", "index", "obj"), cases())
def test_decision_and_message(decisions: dict[str, list[dict[str, Any]]], file: str, index: int, obj: dict[str, Any]) -> None:
    expect = {key.removeprefix(EXPECT): value for key, value in obj["metadata"]["annotations"].items() if key.startswith(EXPECT)}
    decision = decisions[file][index]
    if expect["decision"] == "refused":
        # What the server refuses before admission: the reader (the object's own fields) or, for what its namespace
        # decides (a DRA claim's admin access), the command, which knows the namespaces.
        assert (decision["decision"], decision["message"]) == ("refused", expect["message"])
        return
    # A generateName object is named as the server names it before validating admission: the prefix and 5 random
    # characters, offline GENERATED_SUFFIX.
    shown = obj["metadata"].get("name") or obj["metadata"]["generateName"] + GENERATED_SUFFIX
    assert (decision["kind"], decision["name"]) == (obj["kind"], shown)
    # A cluster-scoped object (a Namespace) has none: null in JSON.
    assert decision["namespace"] == (None if obj["kind"] == "Namespace" else obj["metadata"].get("namespace", "default"))
    assert decision["allowed"] is (expect["decision"] == "admitted"), decision["messages"]
    if expect["decision"] == "admitted":
        assert decision["messages"] == []
    else:
        # The first is the line the API server answers with (its first failing validation); ``also`` names the one
        # other rule the object breaks, where the AKS chain (ExtendedResourceToleration, PodNodeSelector) makes it
        # break two, so that each rule stays checked.
        wanted = [expect["message"], *([expect["also"]] if "also" in expect else [])]
        assert len(decision["messages"]) == len(wanted), decision["messages"]
        for message, start in zip(decision["messages"], wanted, strict=True):
            assert message.startswith(start) or start in message
    if "note" in expect:
        # Why the policy left the object alone: not in the JSON contract, so asked of the evaluator.
        model = stack_model(stack_of(file))
        [evaluated] = evaluate([obj], render_policy(model), workload_namespaces(model))
        assert expect["note"] in evaluated.note


@pytest.mark.parametrize(("file", "index", "obj"), cases())
def test_both_engines_agree(by_engine: dict[str, dict[str, list[Decision]]], file: str, index: int, obj: dict[str, Any]) -> None:
    python, cpp = (by_engine[name][file][index] for name in ("cel-python", "cel-cpp"))
    assert (python.allowed, python.messages, python.note) == (cpp.allowed, cpp.messages, cpp.note)
    assert not any("resulted in error" in message for message in python.messages), python.messages


def test_every_case_says_what_it_expects() -> None:
    threats = 0
    for param in cases():
        file, _, obj = param.values
        annotations = obj["metadata"]["annotations"]
        assert annotations[f"{EXPECT}decision"] in {"admitted", "denied", "refused"}
        assert (annotations[f"{EXPECT}decision"] != "admitted") == (f"{EXPECT}message" in annotations)
        assert (file == REFUSED_FILE) == (annotations[f"{EXPECT}decision"] == "refused")
        if file in ATTACKER_FILES:
            assert annotations[f"{EXPECT}threat"].strip(), name_of(obj)
            threats += 1
    assert threats >= 30


def test_an_object_the_api_server_refuses_is_exit_2_with_its_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before admission is not "admitted" and not "denied": the server answers 422 with its field errors
    (pkg/apis/core/validation/validation.go), and the check exits 2 saying so."""
    parser = argparse.ArgumentParser(prog="aksgpu")
    admission.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["admission", "check", "--stack", "prod", str(OBJECTS_DIR / REFUSED_FILE)])
    assert args.handler(args) == 2
    assert 'Pod "request-below-limit" is invalid: spec.containers[0].resources.requests' in " ".join(
        capsys.readouterr().err.split()
    )


SERVER_DECISIONS = Path(__file__).parent.parent / "fixtures" / "kubernetes_cel" / "decisions"


def server_cases() -> list[Any]:
    found = []
    for path in sorted(SERVER_DECISIONS.glob("*.json")):
        recorded = json.loads(path.read_text())["decisions"]
        objects = objects_of(OBJECTS_DIR / f"{path.stem}.yaml")
        for name, decision in sorted(recorded.items()):
            index = int(name.rsplit("#", 1)[1])
            found.append(
                pytest.param(path.stem + ".yaml", index, objects[index], decision, id=f"{path.stem}-{name_of(objects[index])}")
            )
    return found


@pytest.mark.parametrize(("file", "index", "obj", "server"), server_cases())
def test_the_policies_decide_as_the_real_environment_did(
    by_engine: dict[str, dict[str, list[Decision]]], file: str, index: int, obj: dict[str, Any], server: dict[str, Any]
) -> None:
    """The real cel-go and k8s.io/apiserver evaluation of the same rendered policies (vaph, see
    tests/fixtures/kubernetes_cel/SOURCES.md) decided every object: each engine decides the same, and its denial
    line is the server's (after the `<resource> "<name>" is forbidden: ` that apierrors.NewForbidden puts first)."""
    for engine in ENGINE_NAMES:
        decision = by_engine[engine][file][index]
        assert decision.allowed is server["allowed"], (engine, decision.messages, server["message"])
        if not server["allowed"]:
            assert decision.message.split(" is forbidden: ", 1)[1] == server["message"], engine


@pytest.mark.parametrize(("file", "index", "obj", "server"), server_cases())
def test_cel_python_costs_what_the_real_environment_counted(
    by_engine: dict[str, dict[str, list[Decision]]], file: str, index: int, obj: dict[str, Any], server: dict[str, Any]
) -> None:
    """The runtime cost of each applied policy, validations and the variables they read, as vaph's cel-go cost
    tracker counted it: the number the server holds against its per-call and per-binding limits. Where the server's
    own count varied between runs (``costRange``: an exists() over a map stops at the first key that satisfies it,
    and Go visits a map's keys in a random order; PodNodeSelector gives most Pods of a workload namespace a second
    nodeSelector key), the cost lies within what the server counted."""
    decision = by_engine["cel-python"][file][index]
    assert set(decision.costs) == set(server["costs"])
    for policy, cost in decision.costs.items():
        low, high = server.get("costRange", {}).get(policy, [server["costs"][policy]] * 2)
        assert low <= cost <= high, (policy, cost, low, high)
