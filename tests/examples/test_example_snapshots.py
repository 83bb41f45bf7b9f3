"""The example snapshots a newcomer audits first (``aksgpu audit --snapshot examples/snapshots/faulty``): each audits
to the verdict it is there to show, and the folders are what ``tests.examples.example_snapshots`` writes."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from aks_gpu.cli import main
from tests.audit.clusters import INFER_0, TRAIN_0, TRAIN_1
from tests.conftest import PROJECT_DIR
from tests.examples.example_snapshots import EXAMPLES_DIR, TRAIN_2, write_examples

FAULTY = str(EXAMPLES_DIR / "faulty")
HEALTHY = str(EXAMPLES_DIR / "healthy")


def test_the_healthy_example_passes_with_nothing_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--snapshot", HEALTHY]) == 0
    assert "audit passed: nothing fails, 0 warning(s)" in capsys.readouterr().out
    assert main(["audit", "--snapshot", HEALTHY, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_the_healthy_example_validates_with_only_the_pool_at_zero_nodes_unchecked(capsys: pytest.CaptureFixture[str]) -> None:
    # prod's inferfull pool (minCount 0) has no node in the example: said, never failed.
    argv = ["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", HEALTHY, "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is True
    unchecked = [check for check in report["checks"] if check["status"] != "pass"]
    assert {(c["pool"], c["node"], c["id"], c["status"]) for c in unchecked} == {
        ("inferfull", None, "gpu-schedulable", "warn"),
        ("inferfull", None, "driver-consistency", "warn"),
    }
    assert all(c["message"].startswith("not checked: no nodes yet") for c in unchecked)


def test_the_faulty_example_fails_with_each_common_fault_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--snapshot", FAULTY, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    found = sorted((f["id"], f["severity"], f["node"]) for f in report["findings"] if f["id"] != "gpu-pod-unfenced")
    assert found == [
        ("gpu-condition", "fail", TRAIN_2),  # the Node Problem Detector's XIDErrors
        ("gpu-idle", "warn", INFER_0),
        ("gpu-node-faulty-schedulable", "fail", TRAIN_2),  # that XIDErrors node still takes GPU pods
        ("gpu-node-untainted", "fail", TRAIN_1),
        ("gpu-squatter", "fail", TRAIN_1),
        ("hw-slowdown", "warn", TRAIN_0),  # a real nvidia-smi -q: all eight H100s, one line
        ("node-auto-repaired", "warn", TRAIN_2),  # AKS rebooted that node: its GPUs must be proven before jobs return
        ("node-image-stale", "warn", INFER_0),
        ("queue-workload-pending", "warn", None),  # a 16-GPU job in a queue with 8 GPUs free
    ]
    unfenced = {f["namespace"] for f in report["findings"] if f["id"] == "gpu-pod-unfenced"}
    assert unfenced == {"gpu-training"}
    (slowdown,) = [f for f in report["findings"] if f["id"] == "hw-slowdown"]
    assert slowdown["message"].startswith("8 GPUs (00000000:19:00.0, 00000000:3B:00.0, ")
    assert report["summary"]["cluster"]["context"] == "contoso-gpu-prod"
    assert report["summary"]["autoRepairs"] == {"gpuNodes": 1, "otherNodes": 0}


def test_the_faulty_example_reads_in_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--snapshot", FAULTY]) == 1
    output = capsys.readouterr().out
    assert "audit failed: 4 finding(s) fail" in output
    assert output.count("hw-slowdown") == 1


@pytest.mark.parametrize("folder", [FAULTY, HEALTHY], ids=["faulty", "healthy"])
def test_audit_and_validate_report_the_same_driver_versions(folder: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Both read each node's driver from its SMI output (the faulty example's hw-slowdown node is a real 535.161.08
    output beside 565.57.01 ones, on the same node image): neither guesses it from the node image label."""
    main(["audit", "--snapshot", folder, "--json"])
    audited = {pool["pool"]: pool["driverVersions"] for pool in json.loads(capsys.readouterr().out)["summary"]["pools"]}
    main(["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", folder, "--json"])
    validated: dict[str, Counter[str]] = {}
    for check in json.loads(capsys.readouterr().out)["checks"]:
        if check["id"] == "driver-version":
            found = re.match(r"driver ([0-9.]+) ", check["message"])
            assert found, check["message"]
            validated.setdefault(check["pool"], Counter())[found[1]] += 1

    assert audited == {pool: dict(versions) for pool, versions in validated.items()}
    if folder == FAULTY:
        assert audited == {"infer": {"565.57.01": 1}, "train": {"535.161.08": 1, "565.57.01": 2}}


def test_the_examples_are_what_the_generator_writes(tmp_path: Path) -> None:
    write_examples(tmp_path)
    for name in ("healthy", "faulty"):
        written = {p.relative_to(tmp_path / name): p.read_bytes() for p in (tmp_path / name).rglob("*") if p.is_file()}
        shipped = {p.relative_to(EXAMPLES_DIR / name): p.read_bytes() for p in (EXAMPLES_DIR / name).rglob("*") if p.is_file()}
        assert written.keys() == shipped.keys(), name
        stale = [str(path) for path in written if written[path] != shipped[path]]
        assert stale == [], f"examples/snapshots/{name} is out of step: python -m tests.examples.example_snapshots"


def test_the_html_report_names_the_cluster_opens_with_the_top_actions_and_prices_the_idle_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "audit.html"
    assert main(["audit", "--snapshot", FAULTY, "--html", str(page)]) == 1
    html = page.read_text(encoding="utf-8")
    # The cluster by its context and API server, not the folder it was read from.
    assert "<title>aksgpu audit: contoso-gpu-prod</title>" in html
    assert "https://contoso-gpu-prod-4f7a2c1e.hcp.eastus.azmk8s.io:443" in html
    assert "examples/snapshots" not in html and str(EXAMPLES_DIR) not in html
    # The top actions come first, failing ones before warnings, and the idle node's cost leads the warnings.
    assert html.index('id="top-actions"') < html.index('id="pools"')
    actions = html[html.index('id="top-actions"') : html.index("</section>", html.index('id="top-actions"'))]
    ranked = [part.split('"')[0] for part in actions.split('data-id="')[1:]]
    assert ranked[:5] == ["gpu-node-untainted", "gpu-squatter", "gpu-condition", "gpu-node-faulty-schedulable", "gpu-idle"]
    # 730 hours of Standard_NC24ads_A100_v4 at the eastus list price of components/aks_gpu/data/gpu_prices.yaml.
    assert "about USD 2,681 a month at list price" in actions
    cost = html[html.index('id="idle-cost"') :]
    assert 'data-node="aks-infer-31415926-vmss000000"' in cost and "USD 2,681" in cost
    assert "Prices: eastus pay-as-you-go Linux list prices (USD, 730 hours a month), read 2026-12-07" in cost


def test_an_idle_node_no_price_table_knows_is_shown_unpriced(tmp_path: Path) -> None:
    from aks_gpu.audit.engine import run_audit
    from aks_gpu.audit.html import render_html
    from aks_gpu.cluster.snapshot import read_snapshot

    snapshot = read_snapshot(EXAMPLES_DIR / "faulty")
    for node in snapshot.nodes:
        node["metadata"]["labels"]["topology.kubernetes.io/region"] = "antarctica"
    html = render_html(run_audit(snapshot), made_at=datetime(2025, 10, 20, 9, 0, tzinfo=UTC), version="0.1.0")
    assert "not priced (no price for it)" in html and "a month at list price" not in html
