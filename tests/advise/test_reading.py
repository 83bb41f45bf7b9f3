"""Reading query_range responses a piece at a time (issue 42, speed and memory): the same series as decoding the whole
document, wherever the pieces are cut, the samples of kube_pod_owner and kube_node_labels never read, and anything not
in Prometheus's compact shape read whole, with the same messages."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from aks_gpu.advise import series as reader
from aks_gpu.advise.series import AdviceInputError, Series, parse_query_range
from aks_gpu.advise.sources import read_metrics_dir
from tests.advise.histories import query_range

RESULT: list[dict[str, Any]] = [
    {
        "metric": {"__name__": "DCGM_FI_DEV_FB_USED", "pod": 'a "quoted" pod', "UUID": "GPU-1", "note": "{braces} [x]"},
        "values": [[1_764_547_200, "1000"], [1_764_547_500, "NaN"], [1_764_547_800.5, "1e3"], [1_764_548_100, "+Inf"]],
    },
    {"metric": {}, "values": []},
    {"metric": {"UUID": "GPU-2"}, "values": [[1_764_547_200, "-0.5"]]},
]


def compact(result: list[dict[str, Any]]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}, separators=(",", ":")).encode()


def plain(found: list[Series]) -> list[tuple[object, ...]]:
    return [(dict(one.labels), one.start, one.end, list(one.values), one.step) for one in found]


def test_pieces_cut_anywhere_read_as_the_whole_document() -> None:
    data = compact(RESULT)
    expected = plain(reader._read_whole("m", data, labels_only=False))
    assert expected[0][3] == [1000.0, 1000.0] and (expected[0][1], expected[0][2], expected[0][4]) == (
        1_764_547_200,
        1_764_548_100,
        299.5,
    )
    for size in (1, 2, 7, 64, len(data)):
        pieces = [data[at : at + size] for at in range(0, len(data), size)]
        assert plain(parse_query_range("m", pieces)) == expected, size


def test_the_compact_reader_is_the_one_that_reads_prometheus_output(monkeypatch: pytest.MonkeyPatch) -> None:
    def whole(*_: object) -> list[Series]:
        raise AssertionError("read whole")

    monkeypatch.setattr(reader, "_read_whole", whole)
    assert len(parse_query_range("m", compact(RESULT))) == 3


def test_labels_only_keeps_no_samples() -> None:
    (first, _, _) = parse_query_range("kube_pod_owner", compact(RESULT), labels_only=True)
    assert first.labels["pod"] == 'a "quoted" pod' and len(first.values) == 0 and math.isnan(first.start)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"status": "success", "data": {"resultType": "matrix", "result": RESULT}}, indent=2),  # pretty
        compact(RESULT).decode().replace('[1764547200,"1000"]', '[1764547200, "1000"]'),  # a space
        compact(RESULT).decode().replace('"values"', '"histograms":[],"values"'),  # another key
    ],
)
def test_other_shapes_are_read_whole_to_the_same_series(text: str) -> None:
    assert plain(parse_query_range("m", text)) == plain(parse_query_range("m", compact(RESULT)))


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (compact(RESULT)[:-40], "not JSON"),
        (compact(RESULT).replace(b'"1000"', b'"lots"'), 'series 0 has a sample that is not [time, "value"]'),
        (compact(RESULT).replace(b"1764547500,", b"x,"), "not JSON"),
        (compact(RESULT).replace(b'"UUID":"GPU-1",', b'"UUID":"GPU-1"'), "not JSON"),  # labels without a comma
        (compact(RESULT).replace(b'"success"', b'"error"'), "did not succeed"),
        (compact(RESULT).replace(b'"matrix"', b'"vector"'), "expected 'matrix'"),
    ],
)
def test_a_broken_response_says_what_is_wrong(data: bytes, said: str) -> None:
    with pytest.raises(AdviceInputError, match=f"^m: .*{re.escape(said)}"):
        parse_query_range("m", data)


def test_a_folder_reads_the_owner_and_node_labels_for_their_labels(tmp_path: Path) -> None:
    gpu = {"metric": {"UUID": "GPU-1"}, "values": [[1_764_547_200, "5"], [1_764_547_500, "6"]]}
    (tmp_path / "DCGM_FI_DEV_FB_USED.json").write_text(query_range([gpu]), encoding="utf-8")
    owner = {"metric": {"namespace": "t", "pod": "p", "owner_kind": "Job", "owner_name": "j"}, "values": [[1, "1"]] * 3}
    (tmp_path / "kube_pod_owner.json").write_text(query_range([owner]), encoding="utf-8")
    (tmp_path / "kube_node_labels.json").write_text(query_range([{"metric": {"node": "n"}, "values": [[1, "1"]]}]), "utf-8")
    found = read_metrics_dir(tmp_path)
    assert list(found["DCGM_FI_DEV_FB_USED"][0].values) == [5.0, 6.0]
    assert [len(one.values) for name in ("kube_pod_owner", "kube_node_labels") for one in found[name]] == [0, 0]
    assert found["kube_pod_owner"][0].labels["owner_name"] == "j"


def test_samples_with_gaps_read_to_the_same_series_and_runs_by_both_readers() -> None:
    # A 5-minute step with samples missing (a scrape lost, a pod restarted), left out (NaN, +Inf) at the start, in the
    # middle and at the end, and series with none of that: both readers give equal series, runs and times included.
    t = 1_764_547_200
    result: list[dict[str, Any]] = [
        {"metric": {"UUID": "GPU-1"}, "values": [[t, "1"], [t + 300, "2"], [t + 1200, "3"], [t + 1500, "4"], [t + 3000, "5"]]},
        {"metric": {"UUID": "GPU-2"}, "values": [[t, "NaN"], [t + 300, "2"], [t + 600, "+Inf"], [t + 900, "4"], [t + 1200, "5"]]},
        {
            "metric": {"UUID": "GPU-3"},
            "values": [[t, "1"], [t + 300, "2"], [t + 900, "NaN"], [t + 1200, "4"], [t + 1500, "-Inf"]],
        },
        {"metric": {"UUID": "GPU-4"}, "values": [[t + n * 300, str(n)] for n in range(20)]},
        {"metric": {"UUID": "GPU-5"}, "values": [[t, "NaN"], [t + 300, "2"], [t + 600, "3"]]},
        {"metric": {"UUID": "GPU-6"}, "values": [[t + 600, "7"]]},
        {"metric": {"UUID": "GPU-7"}, "values": [[t, "1"], [t + 300, "2"], [t + 600, "NaN"]]},
    ]
    data = compact(result)
    whole = reader._read_whole("m", data, labels_only=False)
    piecewise = reader._read_compact("m", iter([data[at : at + 50] for at in range(0, len(data), 50)]), False)
    assert piecewise == whole
    assert [list(one.times()) for one in piecewise] == [list(one.times()) for one in whole]
    runs = {one.labels["UUID"]: one.runs for one in whole}
    assert runs["GPU-1"] == ((t, 2), (t + 1200, 2), (t + 3000, 1))
    assert runs["GPU-2"] == ((t + 300, 1), (t + 900, 2))
    assert runs["GPU-3"] == ((t, 2), (t + 1200, 1))
    assert runs["GPU-5"] == ((t + 300, 2),)
    # One step apart from the start (the last sample left out, or none): each value's time is start + n steps, no runs.
    assert runs["GPU-4"] == runs["GPU-6"] == runs["GPU-7"] == ()
    assert list(whole[2].times()) == [t, t + 300, t + 1200]
