"""A VM size written in another letter case (``Standard_ND96isr_H100_V5``) is read as the data files spell it, with a
warning naming the key, so the stack plans, labels, covers and admits exactly as with the canonical spelling (issue 40,
A5). Before, the GPU and quota lookups matched it without case while the pool, its instance-type label in the admission
policy and the NPD coverage kept it as typed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.cli import main
from aks_gpu.monitoring.remediation import npd_coverage
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, MockHarness, planned_result, raw_stack

H100, ODD_H100 = "Standard_ND96isr_H100_v5", "standard_ND96ISR_H100_V5"
D8, ODD_D8 = "Standard_D8ds_v5", "STANDARD_D8DS_V5"


def odd_prod() -> dict[str, Any]:
    raw = copy.deepcopy(raw_stack("prod"))
    for pool in raw["aks-gpu:gpuPools"]:
        if pool["vmSize"] == H100:
            pool["vmSize"] = ODD_H100
    raw["aks-gpu:cpuPools"][0]["vmSize"] = ODD_D8
    return raw


def test_each_odd_spelling_is_read_canonically_with_a_warning_naming_its_key() -> None:
    validated = validate_stack(odd_prod(), "odd")
    respelled = {p.path: p.message for p in validated.warnings if "is read as" in p.message}
    assert sorted(respelled) == ["aks-gpu:cpuPools[0].vmSize", "aks-gpu:gpuPools[0].vmSize", "aks-gpu:gpuPools[2].vmSize"]
    assert f"'{ODD_H100}' is read as '{H100}'" in respelled["aks-gpu:gpuPools[0].vmSize"]
    assert [pool.vm_size for pool in validated.config.gpu_pools] == [H100, "Standard_NC24ads_A100_v4", H100]
    assert validated.config.cpu_pools[0].vm_size == D8


def test_the_odd_spelling_plans_like_the_canonical_one() -> None:
    odd = MockHarness().run_stack("prod", odd_prod())
    canonical = planned_result("prod")
    assert [(r.urn, r.inputs) for r in odd.resources] == [(r.urn, r.inputs) for r in canonical.resources]
    assert odd.outputs == canonical.outputs
    assert odd.manifests() == canonical.manifests()  # the admission policy's instance-type labels among them


def test_the_odd_spelling_gets_the_npd_checks_of_its_size() -> None:
    odd = validate_stack(odd_prod(), "odd").model
    canonical = validate_stack(raw_stack("prod"), "prod").model
    assert npd_coverage(odd) == npd_coverage(canonical)
    assert f"train ({H100})" in (npd_coverage(odd) or "").split(";")[0]


def pinned(kind: str) -> dict[str, Any]:
    pod = {
        "metadata": {"name": "pinned", "namespace": "gpu-training"},
        "spec": {
            "nodeSelector": {"node.kubernetes.io/instance-type": H100},
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
        },
    }
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", **pod}
    template = {"metadata": {}, "spec": pod["spec"]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": pod["metadata"], "spec": {"template": template}}


@pytest.mark.parametrize("kind", ["Pod", "Job"])
def test_a_workload_pinned_by_the_real_instance_type_label_is_judged_as_on_the_canonical_stack(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = tmp_path / "pinned.yaml"
    objects.write_text(yaml.safe_dump(pinned(kind)))
    answers = []
    for name, raw in (("canonical", raw_stack("prod")), ("odd", odd_prod())):
        stack_file = tmp_path / f"Pulumi.{name}.yaml"
        stack_file.write_text(yaml.safe_dump({"config": raw}))
        argv = ["admission", "check", "--stack", name, "--config-file", str(stack_file), "--project-dir", str(PROJECT_DIR)]
        code = main([*argv, "--json", str(objects)])
        answers.append((code, json.loads(capsys.readouterr().out)))
    assert answers[0] == answers[1]
    if kind == "Pod":
        assert answers[1][0] == 0
