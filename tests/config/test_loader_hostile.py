"""Hostile stack files: whatever a user hands ``aksgpu plan --config-file``, the answer is exit 2 with one line
naming the file and the limit, key or line, never a traceback, a hang, or a value silently changed."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.cli import main
from aks_gpu.config.loader import MAX_STACK_FILE_BYTES, load_stack_file
from aks_gpu.config.problems import ConfigError
from aks_gpu.config.safe_yaml import MAX_DEPTH, MAX_NODES
from aks_gpu.mock_engine.runner import _config_values
from aks_gpu.resolved.stack import validate_stack
from tests.conftest import PROJECT_DIR, minimal_raw

PROD_TEXT = (PROJECT_DIR / "stacks" / "Pulumi.prod.yaml").read_text(encoding="utf-8")


def plan_file(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    out = tmp_path / "out"
    code = main(["plan", "--stack", "x", "--config-file", str(path), "--project-dir", str(PROJECT_DIR), "--out", str(out)])
    captured = capsys.readouterr()
    assert not out.exists(), "nothing is written for a file that is refused"
    assert "Traceback" not in captured.err + captured.out
    return code, " ".join(captured.err.split())  # as one line: rich wraps long lines


def refused(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *expected: str) -> str:
    code, stderr = plan_file(path, tmp_path, capsys)
    assert code == 2, stderr
    assert path.name in stderr
    for text in expected:
        assert text in stderr, (text, stderr)
    return stderr


def written(tmp_path: Path, text: str | bytes, name: str = "Pulumi.x.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def config_text(body: str) -> str:
    """A valid stack with ``body`` appended under ``config:``."""
    return PROD_TEXT.rstrip("\n") + "\n" + body


# ---------------------------------------------------------------- what the file is


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [("utf-16", "UTF-16 encoded"), ("utf-32", "UTF-32 encoded"), ("utf-16-le", "looks UTF-16 encoded")],
)
def test_other_unicode_encodings_are_named(encoding: str, expected: str, tmp_path, capsys) -> None:
    refused(written(tmp_path, PROD_TEXT.encode(encoding)), tmp_path, capsys, expected, "save it as UTF-8")


def test_a_latin_1_file_names_the_byte_and_line(tmp_path, capsys) -> None:
    text = PROD_TEXT.replace("name: aks-gpu-prod", "name: aks-gpu-prod  # Zürich")
    line = next(n for n, row in enumerate(text.splitlines(), start=1) if "Zürich" in row)
    refused(written(tmp_path, text.encode("latin-1")), tmp_path, capsys, "not UTF-8", "0xFC", f"line {line}")


def test_a_utf8_byte_order_mark_is_fine() -> None:
    path = PROJECT_DIR / "stacks" / "Pulumi.prod.yaml"
    assert path.read_bytes()[:3] != b"\xef\xbb\xbf"


def test_a_binary_file(tmp_path, capsys) -> None:
    refused(written(tmp_path, b"config:\n  a: \x00\x01\x02\xff"), tmp_path, capsys, "NUL byte", "binary")


def test_a_folder(tmp_path, capsys) -> None:
    folder = tmp_path / "Pulumi.x.yaml"
    folder.mkdir()
    refused(folder, tmp_path, capsys, "is a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file(tmp_path, capsys) -> None:
    path = written(tmp_path, PROD_TEXT)
    path.chmod(0)
    try:
        refused(path, tmp_path, capsys, "permission denied")
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_a_file_that_cannot_be_opened_says_why(tmp_path, capsys, monkeypatch) -> None:
    # Stands in for an unreadable file where the tests run as root (which reads any file).
    path = written(tmp_path, PROD_TEXT)
    real_open = os.open

    def refuse(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if str(name) == str(path):
            raise PermissionError(13, "Permission denied")
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    refused(path, tmp_path, capsys, "permission denied")


def test_a_fifo_is_refused_without_blocking(tmp_path, capsys) -> None:
    fifo = tmp_path / "Pulumi.x.yaml"
    os.mkfifo(fifo)  # opening it for reading the usual way waits for a writer: forever
    started = time.monotonic()
    refused(fifo, tmp_path, capsys, "named pipe")
    assert time.monotonic() - started < 5


def test_a_symlink_to_dev_zero(tmp_path, capsys) -> None:
    link = tmp_path / "Pulumi.x.yaml"
    link.symlink_to("/dev/zero")
    refused(link, tmp_path, capsys, "character device")


def test_a_huge_file_names_the_limit(tmp_path, capsys) -> None:
    path = written(tmp_path, config_text("  # " + "x" * MAX_STACK_FILE_BYTES + "\n"))
    refused(path, tmp_path, capsys, "over the 1 MiB limit")


def test_a_missing_file(tmp_path, capsys) -> None:
    refused(tmp_path / "Pulumi.x.yaml", tmp_path, capsys, "no such stack file")


# ---------------------------------------------------------------- what the YAML says


def test_20000_levels_of_nesting(tmp_path, capsys) -> None:
    for text in (
        "config:\n  kubernetes:x: " + "[" * 20_000 + "]" * 20_000 + "\n",
        "config:\n  kubernetes:x:\n    " + "- " * 20_000 + "x\n",
    ):
        refused(written(tmp_path, text), tmp_path, capsys, f"nested deeper than {MAX_DEPTH} levels", "limit")


def test_not_yaml_names_line_and_column_without_quoting_the_line(tmp_path, capsys) -> None:
    stderr = refused(written(tmp_path, "config:\n  aks-gpu:cluster: {name: x\n  token: s3cr3t-t0ken-value\n"), tmp_path, capsys)
    assert "line 3" in stderr and "not valid YAML" in stderr
    assert "s3cr3t-t0ken-value" not in stderr  # PyYAML's own message copies the line


def test_a_second_aks_gpu_cluster_is_refused_with_both_lines(tmp_path, capsys) -> None:
    text = config_text("  aks-gpu:cluster:\n    resourceGroup: rg-somebody-else\n    name: aks-gpu-prod\n")
    first = next(n for n, row in enumerate(text.splitlines(), start=1) if row.startswith("  aks-gpu:cluster:"))
    second = len(text.splitlines()) - 2
    refused(written(tmp_path, text), tmp_path, capsys, "duplicate key 'aks-gpu:cluster'", f"line {first}", f"line {second}")


def test_a_duplicate_key_deep_inside_is_named_by_its_path(tmp_path, capsys) -> None:
    text = PROD_TEXT.replace(
        "      vmSize: Standard_ND96isr_H100_v5\n", "      vmSize: Standard_ND96isr_H100_v5\n      vmSize: Standard_NC6s_v3\n"
    )
    assert text != PROD_TEXT
    refused(written(tmp_path, text), tmp_path, capsys, "aks-gpu:gpuPools[0].vmSize", "duplicate key 'vmSize'")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.Inf", "1e999"])
def test_spot_max_price_refuses_nan_and_infinity(value: str, tmp_path, capsys) -> None:
    text = PROD_TEXT.replace(
        "      vmSize: Standard_ND96isr_H100_v5\n", f"      vmSize: Standard_ND96isr_H100_v5\n      spotMaxPrice: {value}\n"
    )
    refused(written(tmp_path, text), tmp_path, capsys, "aks-gpu:gpuPools[0].spotMaxPrice", "not a finite number")


def test_spot_max_price_refuses_nan_from_pulumi_json_and_from_python() -> None:
    raw = minimal_raw()
    raw["aks-gpu:gpuPools"] = json.dumps(raw["aks-gpu:gpuPools"]).replace('"maxCount": 2', '"maxCount": 2, "spotMaxPrice": NaN')
    with pytest.raises(ConfigError) as error:
        validate_stack(raw, "stacks/Pulumi.x.yaml")
    assert "aks-gpu:gpuPools[0].spotMaxPrice" in str(error.value) and "finite" in str(error.value)
    pools = [dict(minimal_raw()["aks-gpu:gpuPools"][0], spot=True, spotMaxPrice=float("inf"))]
    from aks_gpu.resolved.stack import validate_sections

    with pytest.raises(ConfigError, match=r"spotMaxPrice|spot_max_price"):
        validate_sections({"gpu_pools": pools}, "component args")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!!binary aGVsbG8=", "!!binary is not allowed"),
        ("!!set {a, b}", "!!set is not allowed"),
        ("!!omap [a: 1]", "!!omap is not allowed"),
        ("!Ref something", "tag '!Ref' is not allowed"),
        ("{1: a}", "a key must be a string"),
        ("9" * 400, "64-bit"),
        ("!!bool maybe", "not a boolean"),
    ],
)
def test_values_json_cannot_carry_are_refused_even_under_foreign_keys(value: str, expected: str, tmp_path, capsys) -> None:
    refused(written(tmp_path, config_text(f"  kubernetes:someKey: {value}\n")), tmp_path, capsys, "kubernetes:someKey", expected)


def test_dates_and_yaml_1_1_oddities_read_as_pulumi_reads_them(tmp_path) -> None:
    text = config_text("  kubernetes:when: 2025-01-01\n  kubernetes:at: 13:30\n  kubernetes:flag: yes\n  kubernetes:mode: 0777\n")
    raw = load_stack_file(written(tmp_path, text))
    # yaml.v3 (Pulumi) reads these as the text written; PyYAML as a date, 810, True and 511.
    assert (raw["kubernetes:when"], raw["kubernetes:at"], raw["kubernetes:flag"], raw["kubernetes:mode"]) == (
        "2025-01-01",
        "13:30",
        "yes",
        "0777",
    )
    assert _config_values(raw)["kubernetes:when"] == "2025-01-01"  # the plan hands it to Pulumi as JSON text


def test_an_unquoted_maintenance_time_is_the_time_not_a_number(tmp_path) -> None:
    text = PROD_TEXT.replace('startTime: "02:00"', "startTime: 13:30")
    assert text != PROD_TEXT
    validated = validate_stack(load_stack_file(written(tmp_path, text)), "x")
    windows = validated.config.cluster.maintenance
    assert "13:30" in {w.start_time for w in (windows.node_os, windows.auto_upgrade) if w is not None}


# ---------------------------------------------------------------- alias bombs


def alias_bomb(levels: int, width: int = 10) -> str:
    lines = [f"  b0: &b0 [{', '.join(['x'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"  b{level}: &b{level} [{', '.join([f'*b{level - 1}'] * width)}]")
    return "\n".join(lines)


def test_an_alias_bomb_under_a_foreign_key_is_refused_not_expanded(tmp_path, capsys) -> None:
    # 10^8 values in about 600 bytes
    body = "  kubernetes:bomb:\n" + "\n".join("  " + line for line in alias_bomb(8).splitlines()) + "\n"
    started = time.monotonic()
    stderr = refused(written(tmp_path, config_text(body)), tmp_path, capsys, f"more than {MAX_NODES:,} values", "aliases")
    assert time.monotonic() - started < 5
    assert len(stderr) < 2_000


def test_an_alias_bomb_under_our_key_prints_a_bounded_message(tmp_path, capsys) -> None:
    body = "  kubernetes:bombs:\n" + "\n".join("  " + line for line in alias_bomb(3).splitlines()) + "\n"
    body += "  aks-gpu:admission:\n    exemptNamespaces: *b2\n"
    stderr = refused(
        written(tmp_path, config_text(body).replace("  aks-gpu:admission:\n    validationActions: [Deny]\n", "")),
        tmp_path,
        capsys,
    )
    assert "aks-gpu:admission" in stderr
    assert len(stderr) < 10_000, len(stderr)


def test_a_self_referencing_alias(tmp_path, capsys) -> None:
    refused(written(tmp_path, config_text("  kubernetes:loop: &loop [*loop]\n")), tmp_path, capsys, "contains itself")


def test_a_huge_value_is_shown_cut(tmp_path, capsys) -> None:
    huge = "x" * 500_000
    stderr = refused(written(tmp_path, PROD_TEXT.replace("name: aks-gpu-prod", f"name: {huge}")), tmp_path, capsys)
    assert "aks-gpu:cluster.name" in stderr and len(stderr) < 3_000


def test_runtime_json_config_gets_the_same_limits() -> None:
    raw = minimal_raw()
    raw["aks-gpu:workloads"] = "[" * 5_000 + "]" * 5_000  # deeper than Python's JSON decoder goes
    raw["aks-gpu:cluster"] = '{"resourceGroup": "rg", "name": "aks", "tags": {"n": ' + "9" * 5_000 + "}}"
    with pytest.raises(ConfigError) as error:
        validate_stack(raw, "stacks/Pulumi.x.yaml")
    text = str(error.value)
    assert "aks-gpu:workloads" in text and "nested" in text
    assert "aks-gpu:cluster" in text and len(text) < 3_000


def test_values_past_the_limit_are_refused_as_they_are_read_not_after_the_whole_file(tmp_path, capsys) -> None:
    # 1 MiB of `1,` is 500,000 values: composing them all took 21 s before the limit was checked. Refused while
    # reading, the YAML error at the very end of the file is never reached, and the message says what the limit is.
    values = ",".join("1" for _ in range(MAX_NODES + 10))
    body = f"  kubernetes:many: [{values}]\n  broken: [\n"
    stderr = refused(written(tmp_path, config_text(body)), tmp_path, capsys, f"more than {MAX_NODES:,} values")
    assert "not valid YAML" not in stderr and "aliases" not in stderr
