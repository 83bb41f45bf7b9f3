"""``aksgpu advise --metrics DIR`` on exporter outputs with the labels the exporters emit (tests/fixtures/advise), and
``aksgpu audit --metrics DIR --html``: what a team reads, the JSON contract, the exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aks_gpu.audit.prices import load_prices
from aks_gpu.cli import main
from tests.conftest import FIXTURES_DIR, PROJECT_DIR, STACKS_DIR

DCGM = FIXTURES_DIR / "advise" / "dcgm"
AMD = FIXTURES_DIR / "advise" / "amd"
CONTRACT_KEYS = {
    "namespace",
    "owner",
    "pod",
    "gpuModel",
    "gpus",
    "peakMemoryMiB",
    "p95MemoryMiB",
    "p95Activity",
    "recommend",
    "profile",
    "monthlySaving",
    "why",
}
# Standard_NC24ads_A100_v4 (one A100 80GB) a month at the eastus table's list price (components/aks_gpu/data/gpu_prices.yaml).
A100_MONTH = load_prices().monthly("eastus", "Standard_NC24ads_A100_v4")[0]  # type: ignore[index]


def advise(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["advise", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def advise_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = advise(capsys, *argv, "--json")
    return code, json.loads(out)


def by_pod(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["pod"]: row for row in document["recommendations"]}


@pytest.fixture
def eastus_prod(tmp_path: Path) -> Path:
    """The prod stack filed in eastus, the region the price table has (its `infer` pool: Standard_NC24ads_A100_v4)."""
    raw = yaml.safe_load((STACKS_DIR / "Pulumi.prod.yaml").read_text(encoding="utf-8"))
    raw["config"]["azure-native:location"] = "eastus"
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_dcgm_history_gives_one_recommendation_per_workload(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = advise_json(capsys, "--metrics", str(DCGM))
    assert code == 1  # a change would save GPUs
    assert set(document) >= {"recommendations", "window", "notEvaluated"}
    rows = by_pod(document)
    assert all(set(row) >= CONTRACT_KEYS for row in rows.values())
    small = rows["llm-small-7d9c5b6f4-x2k9p"]
    assert (small["owner"], small["gpuModel"], small["recommend"], small["profile"]) == (
        "llm-small",
        "A100-80GB",
        "mig",
        "1g.10gb",
    )
    assert small["peakMemoryMiB"] == 6998 and 0.07 < small["p95Activity"] <= 0.08
    assert rows["trainer-0"]["recommend"] == "keep" and rows["trainer-0"]["owner"] == "trainer"
    assert rows["notebook-x7k2p"]["recommend"] == "release"
    # The GPU no pod held is idle capacity of its pool: a whole node (one A100 each) the autoscaler can remove.
    assert document["notEvaluated"] == []
    (idle,) = document["idleCapacity"]
    assert (idle["pool"], idle["gpuModel"], idle["gpus"], idle["nodes"], idle["nodesFreed"]) == ("infer", "A100-80GB", 1, 1, 1)
    assert small["coverage"] == {"samples": 300, "span": 300 * 300, "share": 1.0} and small["droppedSamples"] == {}
    assert document["window"]["start"] == "2025-12-01T00:00:00Z" and document["window"]["end"] == "2025-12-02T00:55:00Z"


def test_amd_history_releases_the_idle_gpu_and_keeps_the_busy_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = advise_json(capsys, "--metrics", str(AMD))
    assert code == 1
    rows = by_pod(document)
    assert rows["eval-batch-q8zt4"]["recommend"] == "release" and rows["eval-batch-q8zt4"]["gpuModel"] == "MI300X"
    assert rows["llama-pretrain-0"]["recommend"] == "keep"
    assert rows["llama-pretrain-0"]["peakMemoryMiB"] == 154600


def test_the_stack_prices_the_savings(capsys: pytest.CaptureFixture[str], eastus_prod: Path) -> None:
    code, document = advise_json(
        capsys, "--metrics", str(DCGM), "--stack", "prod", "--config-file", str(eastus_prod), "--project-dir", str(PROJECT_DIR)
    )
    assert code == 1
    rows = by_pod(document)
    assert rows["notebook-x7k2p"]["monthlySaving"] == pytest.approx(A100_MONTH, abs=0.01)
    # Alone on a new 1g.10gb pool, the small service still needs a whole node (one A100): no node freed, nothing saved.
    assert rows["llm-small-7d9c5b6f4-x2k9p"]["monthlySaving"] == 0.0
    assert rows["trainer-0"]["monthlySaving"] == 0.0
    release = next(change for change in document["poolChanges"] if change["recommend"] == "release")
    assert (release["pool"], release["gpusNow"], release["gpusAfter"], release["nodesFreed"]) == ("infer", 1, 0, 1)
    assert release["monthlySaving"] == pytest.approx(A100_MONTH, abs=0.01) and release["priced"] is True


def test_without_prices_the_saving_is_unknown_not_zero(capsys: pytest.CaptureFixture[str]) -> None:
    _, document = advise_json(capsys, "--metrics", str(DCGM))
    assert by_pod(document)["notebook-x7k2p"]["monthlySaving"] is None


def test_the_table_names_each_workload_and_the_pool_change(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = advise(capsys, "--metrics", str(DCGM))
    assert code == 1
    assert "llm-small" in out and "mig 1g.10gb" in out and "release" in out
    assert "migProfile MIG1g" in out


def test_exit_0_when_nothing_would_change(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for name in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
        document = json.loads((DCGM / f"{name}.json").read_text(encoding="utf-8"))
        document["data"]["result"] = [s for s in document["data"]["result"] if s["metric"].get("pod") == "trainer-0"]
        (tmp_path / f"{name}.json").write_text(json.dumps(document), encoding="utf-8")
    code, document = advise_json(capsys, "--metrics", str(tmp_path))
    assert code == 0 and [row["recommend"] for row in document["recommendations"]] == ["keep"]


def _altered(folder: Path, change: Any) -> Path:
    """The DCGM fixture with ``change`` made to each response, in ``folder``."""
    folder.mkdir(exist_ok=True)
    for path in DCGM.glob("*.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        change(document)
        (folder / path.name).write_text(json.dumps(document), encoding="utf-8")
    return folder


def test_exit_2_for_a_series_without_the_labels_it_needs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def drop_model(document: dict[str, Any]) -> None:
        del document["data"]["result"][1]["metric"]["modelName"]

    code, _, err = advise(capsys, "--metrics", str(_altered(tmp_path, drop_model)))
    assert code == 2
    assert "series 1 has no GPU model label (modelName)" in err


def test_exit_2_for_a_gpu_model_the_tables_do_not_know(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def rename(document: dict[str, Any]) -> None:
        document["data"]["result"][0]["metric"]["modelName"] = "NVIDIA L4"

    code, _, err = advise(capsys, "--metrics", str(_altered(tmp_path, rename)))
    assert code == 2 and "'NVIDIA L4'" in err and "not in the catalog" in err


def test_exit_2_for_an_empty_window(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def empty(document: dict[str, Any]) -> None:
        document["data"]["result"] = []

    code, _, err = advise(capsys, "--metrics", str(_altered(tmp_path, empty)))
    assert code == 2 and "the window is empty" in err


def test_exit_2_for_an_instant_query_or_a_folder_without_metrics(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def instant(document: dict[str, Any]) -> None:
        document["data"]["resultType"] = "vector"

    code, _, err = advise(capsys, "--metrics", str(_altered(tmp_path / "a", instant)))
    assert code == 2 and "use /api/v1/query_range" in err
    (tmp_path / "b").mkdir()
    code, _, err = advise(capsys, "--metrics", str(tmp_path / "b"))
    assert code == 2 and "DCGM_FI_DEV_FB_USED.json" in err


def test_html_page_escapes_cluster_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def hostile(document: dict[str, Any]) -> None:
        for series in document["data"]["result"]:
            if series["metric"].get("pod") == "trainer-0":
                series["metric"]["namespace"] = "<script>alert(1)</script>"

    page = tmp_path / "advice.html"
    code, _, _ = advise(capsys, "--metrics", str(_altered(tmp_path / "m", hostile)), "--html", str(page))
    assert code == 1
    text = page.read_text(encoding="utf-8")
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert 'data-recommend="mig"' in text and "default-src 'none'" in text


def test_the_audit_page_gains_the_recommendations(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    page = tmp_path / "audit.html"
    snapshot = PROJECT_DIR / "examples" / "snapshots" / "faulty"
    main(["audit", "--snapshot", str(snapshot), "--metrics", str(DCGM), "--html", str(page)])
    capsys.readouterr()
    text = page.read_text(encoding="utf-8")
    assert 'id="advice"' in text and "llm-small-7d9c5b6f4-x2k9p" in text and "1g.10gb" in text
    # --metrics belongs to the page.
    assert main(["audit", "--snapshot", str(snapshot), "--metrics", str(DCGM)]) == 2
    assert "give --html FILE too" in capsys.readouterr().err


def test_fixtures_keep_the_exporters_label_names() -> None:
    # The labels as dcgm-exporter 4.5.3-4.8.2 and device-metrics-exporter v1.5.1 emit them (SOURCES.md).
    dcgm = json.loads((DCGM / "DCGM_FI_DEV_FB_USED.json").read_text(encoding="utf-8"))["data"]["result"][0]["metric"]
    assert {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "pod", "namespace", "container"} <= set(dcgm)
    amd = json.loads((AMD / "gpu_used_vram.json").read_text(encoding="utf-8"))["data"]["result"][0]["metric"]
    assert {"gpu_id", "card_model", "serial_number", "hostname", "pod", "namespace", "container"} <= set(amd)
