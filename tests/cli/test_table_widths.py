"""At 80 columns and wider nothing a person needs is cut: every finding id and every node name of the example
snapshot, and the plan's GPU columns, appear whole. A table that does not fit the terminal is laid out as a list,
one entry a finding (or pool), instead of folding ids and names or leaving the message no room."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from rich.console import Console

from aks_gpu.azure.prerequisites import subscription_prerequisites
from aks_gpu.azure.quota import quota_plan
from aks_gpu.cli import common, main, tables
from aks_gpu.cluster.inventory import is_gpu_node
from tests.conftest import FIXTURES_DIR, PROJECT_DIR, stack_config
from tests.examples.example_snapshots import EXAMPLES_DIR

FAULTY = EXAMPLES_DIR / "faulty"
WIDTHS = (80, 100, 120)


@contextmanager
def terminal_width(columns: int) -> Iterator[int]:
    """The command line's console at ``columns``, its own width given back after. The width an earlier --wide run
    replaced, which the next command would give back, is forgotten before and after."""
    before = common.out._width
    tables._REPLACED_WIDTH.clear()
    common.out.width = columns
    try:
        yield columns
    finally:
        tables._REPLACED_WIDTH.clear()
        common.out.width = before  # type: ignore[assignment]


@pytest.fixture
def width(request: pytest.FixtureRequest) -> Iterator[int]:
    with terminal_width(request.param) as columns:
        yield columns


def _node_names(snapshot: Path) -> set[str]:
    """The GPU nodes' names (what the audit and validate report on; the system pool's node is not named)."""
    nodes = json.loads((snapshot / "nodes.json").read_text())
    return {node["metadata"]["name"] for node in nodes["items"] if is_gpu_node(node)}


def _finding_ids(capsys: pytest.CaptureFixture[str]) -> set[str]:
    main(["audit", "--snapshot", str(FAULTY), "--json"])
    return {finding["id"] for finding in json.loads(capsys.readouterr().out)["findings"]}


@pytest.mark.parametrize("width", WIDTHS, indirect=True)
def test_the_audit_shows_every_finding_id_and_node_name_whole(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    ids = _finding_ids(capsys)
    assert "gpu-node-untainted" in ids
    main(["audit", "--snapshot", str(FAULTY)])
    output = capsys.readouterr().out
    lines = output.splitlines()
    assert max(len(line) for line in lines) <= width
    words = {word.strip("│ ,():") for line in lines for word in line.split()}
    for finding_id in ids:
        assert finding_id in words, finding_id
    for node in _node_names(FAULTY):
        assert node in words, node
    assert "…" not in output


@pytest.mark.parametrize("width", WIDTHS, indirect=True)
def test_a_message_never_gets_a_sliver_of_a_column(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    main(["audit", "--snapshot", str(FAULTY)])
    lines = capsys.readouterr().out.splitlines()
    # the untainted node's message: wrapped at most a few lines at 80 columns, never one word a line
    start = next(index for index, line in enumerate(lines) if "GPU node (capacity nvidia.com/gpu)" in line)
    message = []
    for line in lines[start:]:
        message.append(line)
        if "the toleration" in line:
            break
    assert len(message) <= 8


def test_the_list_layout_says_how_to_get_a_table_or_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    with terminal_width(80):
        main(["audit", "--snapshot", str(FAULTY)])
    output = " ".join(capsys.readouterr().out.split())
    assert "--wide" in output and "--json" in output


@pytest.mark.parametrize("width", WIDTHS, indirect=True)
def test_the_plan_shows_the_gpu_columns_of_every_pool(width: int, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    main(["plan", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--out", str(tmp_path / "plan")])
    output = capsys.readouterr().out
    for value in ("Standard_ND96isr_H100_v5", "Standard_NC24ads_A100_v4", "8 x H100-80GB", "1 x A100-80GB", "nvidia.com/gpu"):
        assert value in output, value
    assert "MIG1g (1g.10gb, single)" in " ".join(output.split())
    assert "nvidia.com/gpu=present:NoSchedule" in output
    assert "…" not in output
    # each command on a line of its own, never broken (the terminal wraps it; it copies whole)
    lines = [line.strip() for line in output.splitlines()]
    config = stack_config("prod")
    for command in [*quota_plan(config).request_commands(), *(item.command for item in subscription_prerequisites(config))]:
        assert command in lines, command


@pytest.mark.parametrize("width", WIDTHS, indirect=True)
def test_validate_shows_every_node_name_check_id_and_message_whole(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", str(FAULTY)]
    main([*argv, "--json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    main([*argv, "--verbose"])
    output = capsys.readouterr().out
    words, flat = _words(output), _flat(output)
    for node in _node_names(FAULTY):
        assert node in words, node
    for check in checks:
        assert check["id"] in words and check["pool"] in words, check
        assert " ".join(check["message"].split()) in flat, check["message"]
    assert max(len(line) for line in output.splitlines()) <= width
    assert "…" not in output
    assert _says_wide_and_json(output)


def test_validate_lists_each_node_with_its_checks_by_status(capsys: pytest.CaptureFixture[str]) -> None:
    with terminal_width(100):
        main(["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", str(FAULTY)])
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("  train aks-train-31415926-vmss000000")
    assert lines[start + 1 : start + 4] == [
        "    fail: driver-version",
        "    warn: gpu-health",
        "    pass: device-plugin-ready, gpu-schedulable, smi-error, gpu-count, mig-mode",
    ]


def test_validate_is_a_table_with_wide(capsys: pytest.CaptureFixture[str]) -> None:
    with terminal_width(80):
        main(["validate", "--stack", "prod", "--project-dir", str(PROJECT_DIR), "--snapshot", str(FAULTY), "--wide"])
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "device-plugin-ready" in line)
    assert "driver-consistency" in header and "gpu-health" in header
    assert sum(1 for line in lines if line.startswith("│ train ")) == 1  # the pool named once, its nodes under it
    assert any("aks-train-31415926-vmss000000" in line and "FAIL" in line and "warn" in line for line in lines)


def test_fits_counts_kept_columns_whole_and_flexible_ones_at_their_minimum() -> None:
    headers = ("id", "message")
    rows = [("gpu-node-untainted", "a long message " * 10)]
    assert tables.fits(headers, rows, 80, flexible={"message": 40})
    assert not tables.fits(headers, rows, 60, flexible={"message": 40})
    assert not tables.fits(headers, rows, 100)  # not flexible: the message whole on one line would need more


def test_piped_output_follows_columns_when_it_is_set() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "aks_gpu.cli", "audit", "--snapshot", str(FAULTY)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    words = {word.strip("│ ,():") for line in lines for word in line.split()}
    assert "gpu-node-untainted" in words and "aks-train-31415926-vmss000001" in words


def _console(width: int) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=width, highlight=False, emoji=False), buffer


def test_a_flexible_column_is_never_narrower_than_its_longest_word_header_included() -> None:
    headers = ("pool", "GPUs allocatable")
    rows = [("train", "24")]
    # "allocatable" is 11 columns: a 9-column minimum would fold it
    assert tables.column_widths(headers, rows, 40, flexible={"GPUs allocatable": 9}) == [5, 16]
    assert tables.column_widths(headers, rows, 5 + 11 + 7, flexible={"GPUs allocatable": 9}) == [5, 11]
    assert not tables.fits(headers, rows, 5 + 10 + 7, flexible={"GPUs allocatable": 9})


def test_a_kept_column_needs_its_widest_cell_and_its_header_wraps_between_words() -> None:
    headers = ("quota (az vm list-usage name)", "needed")
    rows = [("standardNCADSA100v4Family", "48")]
    assert tables.column_widths(headers, rows, 25 + 6 + 7, keep=headers[:1]) == [25, 6]
    assert not tables.fits(headers, rows, 25 + 6 + 6, keep=headers[:1])


@pytest.mark.parametrize("width", (72, 80, 100))
def test_every_wrapped_column_keeps_its_minimum_however_rich_would_share_the_room(width: int) -> None:
    from rich.text import Text

    console, buffer = _console(width)
    message = "a message that wraps " * 8
    rows = [("gpu-node-untainted", message, "needs Standard_ND96isr_H100_v5 " * 3)]
    headers = ("id", "message", "remedy")
    assert not tables.print_table(console, None, headers, rows, keep=("id",), flexible={"message": 20, "remedy": 24})
    printed = buffer.getvalue()
    assert max(len(line) for line in printed.splitlines()) <= width
    words = {word.strip("│") for word in printed.split()}
    assert {"gpu-node-untainted", "Standard_ND96isr_H100_v5", "message"} <= words
    assert " ".join(Text(printed).plain.split()).count("Standard_ND96isr_H100_v5") == 3


def test_a_grouped_table_names_its_group_once_and_the_list_names_it_in_every_entry() -> None:
    headers = ("pool", "node", "check")
    rows = [("train", "(pool)", "pass"), ("train", "aks-train-0", ""), ("infer", "aks-infer-0", "FAIL")]
    console, buffer = _console(60)
    assert not tables.print_table(console, None, headers, rows, keep=headers, group=True, missing="-")
    table = buffer.getvalue()
    assert table.count("│ train") == 1 and table.count("│ infer") == 1 and "├" in table
    assert "│ -     │" in table
    console, buffer = _console(20)
    assert tables.print_table(console, None, headers, rows, keep=headers, group=True, missing="-", lead=2)
    listed = buffer.getvalue()
    assert listed.count("  train ") == 2 and "check: -" not in listed and "check: FAIL" in listed


def test_a_list_may_be_arranged_otherwise_than_the_table() -> None:
    headers = ("node", "a", "b")
    rows = [("aks-train-0", "pass", "FAIL")]
    console, buffer = _console(20)
    listed = (("node", "FAIL", "pass"), [("aks-train-0", "b", "a")])
    assert tables.print_table(console, None, headers, rows, keep=headers, listed=listed)
    assert buffer.getvalue().splitlines() == ["  aks-train-0", "    FAIL: b", "    pass: a"]


def test_a_cell_of_several_lines_is_one_line_of_the_list() -> None:
    console, buffer = _console(200)
    rows = [("size", "MIG1g=1g.10gbx7\nMIG2g=2g.20gbx3", "Preview sizes.\nInfiniBand sizes; plan the pool in one zone.")]
    tables.print_rows(console, None, ("vm size", "MIG profiles", "caveats"), rows)
    assert buffer.getvalue().splitlines()[1:] == [
        "    MIG profiles: MIG1g=1g.10gbx7, MIG2g=2g.20gbx3",
        "    caveats: Preview sizes. InfiniBand sizes; plan the pool in one zone.",
    ]


def _words(output: str) -> set[str]:
    """The output's words, a table's borders and the punctuation around a name stripped."""
    return {word.strip("│ ,():;") for line in output.splitlines() for word in line.split()}


def _flat(output: str) -> str:
    """The output with its whitespace (and a table's borders) normalised, for text a list wraps between words."""
    return " ".join(output.replace("│", " ").split())


def _says_wide_and_json(output: str) -> bool:
    flat = _flat(output)
    return "--wide for one line a row" in flat and "--json for every field" in flat


@pytest.mark.parametrize("width", WIDTHS, indirect=True)
def test_the_catalog_shows_every_size_series_profile_and_caveat_whole(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "--json"]) == 0
    sizes = json.loads(capsys.readouterr().out)
    assert main(["catalog"]) == 0
    output = capsys.readouterr().out
    assert max(len(line) for line in output.splitlines()) <= width
    assert "…" not in output
    words, flat = _words(output), _flat(output)
    for size in sizes:
        assert size["vmSize"] in words and size["series"] in words, size["vmSize"]
        for name, profile in size["migProfiles"].items():
            assert any(word.startswith(f"{name}={profile}x") for word in words), (size["vmSize"], name)
        for caveat in size["caveats"]:
            assert " ".join(caveat.split()) in flat, caveat
    assert _says_wide_and_json(output)


def test_the_catalog_is_a_table_with_wide(capsys: pytest.CaptureFixture[str]) -> None:
    with terminal_width(80):
        assert main(["catalog", "--wide"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("Standard_ND96isr_H100_v5" in line and "MIG1g=1g.10gbx7" in line and "8 disks" in line for line in lines)
    assert not any("laid out as a list" in line for line in lines)


@pytest.mark.parametrize("width", WIDTHS, indirect=True)
def test_advise_shows_every_workload_profile_and_reason_whole(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    metrics = str(FIXTURES_DIR / "advise" / "dcgm")
    main(["advise", "--metrics", metrics, "--json"])
    document = json.loads(capsys.readouterr().out)
    main(["advise", "--metrics", metrics])
    output = capsys.readouterr().out
    assert max(len(line) for line in output.splitlines()) <= width
    assert "…" not in output
    words, flat = _words(output), _flat(output)
    for row in document["recommendations"]:
        for name in (row["namespace"], row["owner"], row["pod"], row["gpuModel"]):
            assert name in words, name
        if row["profile"]:
            assert f"{row['recommend']} {row['profile']}" in flat
        assert " ".join(row["why"].split()) in flat, row["why"]
    for change in document["poolChanges"]:
        assert " ".join(change["change"].split()) in flat
    for skipped in document["notEvaluated"]:
        assert set(skipped["what"].split()) <= words
    assert _says_wide_and_json(output)


ADMISSION_CORPUS = FIXTURES_DIR / "admission-corpus" / "manifests"


def _admission_check(*options: str) -> list[str]:
    """``aksgpu admission check --stack prod`` of the acceptance corpus, each file named as a user in its folder
    would name it (the source column shows the path as given)."""
    return [
        "admission",
        "check",
        "--stack",
        "prod",
        "--project-dir",
        str(PROJECT_DIR),
        *options,
        *sorted(path.name for path in ADMISSION_CORPUS.glob("*.yaml")),
    ]


@pytest.mark.parametrize("width", WIDTHS, indirect=True)
def test_admission_check_shows_every_object_namespace_source_and_message_whole(
    width: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ADMISSION_CORPUS)
    main(_admission_check("--json"))
    decisions = json.loads(capsys.readouterr().out)
    main(_admission_check())
    output = capsys.readouterr().out
    assert max(len(line) for line in output.splitlines()) <= width
    assert "…" not in output
    words, flat = _words(output), _flat(output)
    assert len(decisions) >= 17
    for decision in decisions:
        assert f"{decision['kind']}/{decision['name']}" in words, decision["name"]
        assert (decision["namespace"] or "-") in words, decision["name"]
        texts = [decision["message"] or "", *decision["messages"][1:], *decision["warnings"]]
        for text in texts:
            assert _words(text) <= words, text  # every word whole, in a table or a list
            assert " ".join(text.split()) in flat or "laid out as a list" not in flat, text
    for path in ADMISSION_CORPUS.glob("*.yaml"):
        assert f"{path.name}#1" in words, path.name
    assert _says_wide_and_json(output)


def test_admission_check_is_a_table_with_wide(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ADMISSION_CORPUS)
    with terminal_width(80):
        main(_admission_check("--wide"))
    lines = capsys.readouterr().out.splitlines()
    assert any(
        "│ Job/samples-tf-mnist-demo " in line and "│ admitted " in line and "aks-docs-tf-mnist-job.yaml#1" in line
        for line in lines
    )
    assert any("│ Deployment/tf-notebook " in line and "│ admitted, pods denied " in line for line in lines)
    assert not any("laid out as a list" in line for line in lines)
