"""``aksgpu admission check`` on a queueing stack (teams): a Job Kueue would hold suspended forever is said to wait,
one it can admit by borrowing is admitted, and Kueue's own placement of an admitted Job passes the policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.admission.test_cli import run


def job(name: str, pods: int, gpus: int, queue: str | None = None, namespace: str = "research") -> dict[str, object]:
    metadata: dict[str, object] = {"name": name, "namespace": namespace}
    if queue is not None:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    container = {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"parallelism": pods, "completions": pods, "template": template},
    }


def decisions(capsys: pytest.CaptureFixture[str], tmp_path: Path, *objects: dict[str, object]) -> dict[str, dict[str, object]]:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    run(["admission", "check", "--stack", "teams", "--json", str(path)])
    return {d["name"]: d for d in json.loads(capsys.readouterr().out)}


def test_a_job_that_borrows_is_admitted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # 24 GPUs: research's 16 and 8 of vision's; the ResourceQuota allows 28 (16 plus the 12 vision lends).
    found = decisions(capsys, tmp_path, job("borrows", pods=3, gpus=8), job("named", pods=1, gpus=1, queue="default"))
    assert found["borrows"]["allowed"] is True and found["named"]["allowed"] is True


def test_a_job_larger_than_its_queue_can_ever_admit_waits_forever(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    found = decisions(capsys, tmp_path, job("huge", pods=5, gpus=8))
    # The server stores it (decision admitted) and Kueue never lets it run (allowed false).
    assert (found["huge"]["decision"], found["huge"]["allowed"]) == ("admitted", False)
    assert "its 5 Pods together ask 40 nvidia.com/gpu, more than Kueue can ever admit in namespace research (28" in str(
        found["huge"]["message"]
    )


def test_a_job_naming_a_missing_local_queue_waits_forever(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    found = decisions(capsys, tmp_path, job("lost", pods=1, gpus=1, queue="team-queue"))
    assert (found["lost"]["decision"], found["lost"]["allowed"]) == ("admitted", False)
    assert "names the LocalQueue team-queue" in str(found["lost"]["message"])


def test_kueues_placement_on_the_teams_own_flavor_passes_and_another_types_is_denied(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # What Kueue writes into an admitted Job's template: the flavor's node labels and tolerations (kube/kueue.py).
    own, other = job("own-flavor", pods=1, gpus=8), job("other-flavor", pods=1, gpus=8)
    toleration = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    for placed, pool in ((own, "train"), (other, "infer")):
        spec = placed["spec"]["template"]["spec"]  # type: ignore[index]
        spec["nodeSelector"] = {"aks-gpu/pool": pool}
        spec["tolerations"] = [toleration]
    found = decisions(capsys, tmp_path, own, other)
    assert found["own-flavor"]["allowed"] is True
    assert found["other-flavor"]["decision"] == "denied"
