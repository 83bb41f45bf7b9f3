"""The ``--html`` page in a real browser: headless Chromium (Debian's ``chromium``, which ``make test`` installs)
parses it and lays it out. The DOM it builds holds one row per finding, the hostile pod name as text and no element
the name tried to smuggle in; the screenshot shows the chart's bars in their colours.

Without Chromium this test fails with the command to install it; ``AKSGPU_SKIP_BROWSER_TESTS=1`` skips it on
purpose, and says so. Chromium runs with no network features and a throwaway profile.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.html import render_html
from aks_gpu.cluster.snapshot import read_snapshot
from tests.audit.clusters import TRAIN_0, clean_snapshot, edited, find_node, workload_pod
from tests.examples.example_snapshots import EXAMPLES_DIR

SKIP_ENV = "AKSGPU_SKIP_BROWSER_TESTS"
HOSTILE_POD = '<script>document.title="owned"</script><img src=x onerror="document.title=1">'
REQUESTED_BAR = (0x2E, 0x90, 0xFA)  # --req in components/aks_gpu/audit/html.py
# Tall enough that the screenshot reaches the chart below the header, the verdicts and the top actions.
WINDOW = (1000, 1600)
MADE_AT = datetime(2025, 10, 20, 9, 30, tzinfo=UTC)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get(SKIP_ENV) == "1":
            pytest.skip(f"{SKIP_ENV}=1: the HTML report is not opened in a browser")
        pytest.fail(
            "chromium is not installed: `make test` installs it as root (apt-get install --no-install-recommends chromium); "
            f"set {SKIP_ENV}=1 to skip this test on purpose"
        )
    return found


def browse(page: Path, profile: Path, *mode: str, window: tuple[int, int] = WINDOW) -> subprocess.CompletedProcess[bytes]:
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={window[0]},{window[1]}",
        *mode,
        page.as_uri(),
    ]
    return subprocess.run(command, capture_output=True, timeout=120, check=True)


class _Dom(HTMLParser):
    """Tags, the rows of findings (their cells' text), and the title, from the DOM Chromium serialised."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.rows: list[list[str]] = []
        self.title = ""
        self._in_title = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "tr" and ("class", "finding") in attrs:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_title:
            self.title += data


def pixels_with(png: bytes, colour: tuple[int, int, int]) -> int:
    """How many pixels of a non-interlaced 8-bit RGB(A) PNG have ``colour`` (PNG spec, filter types 0-4)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks, header = 8, [], b""
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        data = png[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            chunks.append(data)
        position += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, "Chromium writes 8-bit RGB(A)"
    channels = 3 if colour_type == 2 else 4
    stride = width * channels
    raw = zlib.decompress(b"".join(chunks))
    previous = bytearray(stride)
    found = 0
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                corner = previous[i - channels] if i >= channels else 0
                estimate = left + up - corner
                near = min((abs(estimate - left), 0, left), (abs(estimate - up), 1, up), (abs(estimate - corner), 2, corner))
                line[i] = (line[i] + near[2]) & 0xFF
        found += sum(1 for i in range(0, stride, channels) if tuple(line[i : i + 3]) == colour)
        previous = line
    return found


def test_chromium_renders_the_findings_the_chart_and_the_hostile_name_as_text(tmp_path: Path) -> None:
    snapshot = edited(clean_snapshot())
    find_node(snapshot, TRAIN_0)["spec"]["taints"] = []  # gpu-node-untainted
    squatter = workload_pod("web", HOSTILE_POD, TRAIN_0, {}, owner=("ReplicaSet", "web"))
    squatter["spec"]["containers"][0]["resources"] = {}
    snapshot.pods.append(squatter)  # gpu-squatter, with a name that tries to be markup
    snapshot.pods[:] = [p for p in snapshot.pods if p["metadata"]["namespace"] != "gpu-inference"]  # gpu-idle
    report = run_audit(snapshot)
    page = tmp_path / "audit.html"
    page.write_text(render_html(report, made_at=MADE_AT, version="0.1.0", source="snapshot test"), encoding="utf-8")

    dom = _Dom()
    dom.feed(browse(page, tmp_path / "profile-dom", "--dump-dom").stdout.decode("utf-8"))

    assert [(row[1], row[0]) for row in dom.rows] == [(f.id, f.severity) for f in report.findings]
    assert {row[1] for row in dom.rows} == {"gpu-node-untainted", "gpu-squatter", "gpu-idle"}
    squat = next(row for row in dom.rows if row[1] == "gpu-squatter")
    assert squat[4] == HOSTILE_POD  # the name is text in its cell...
    assert "script" not in dom.tags and "img" not in dom.tags  # ...and became no element
    assert dom.title == "aksgpu audit: snapshot test"  # no script ran to change it

    browse(page, tmp_path / "profile-shot", f"--screenshot={tmp_path / 'shot.png'}")
    assert pixels_with((tmp_path / "shot.png").read_bytes(), REQUESTED_BAR) > 200  # the requested-GPU bars are drawn


# The page as shipped, in a frame `width` px wide (headless Chromium's window is at least 500 px wide), measured by
# the frame's parent (the page runs no script: its policy forbids it): the frame's viewport width, the document's, and
# where each finding's "found" and "what to do" cell lies, with the text it shows.
MEASURE = """<!DOCTYPE html><html><body style="margin: 0">
<iframe id="page" style="border: 0; width: %dpx; height: 900px" srcdoc="%s"></iframe>
<script>
document.getElementById("page").addEventListener("load", (event) => {
  const root = event.target.contentDocument.documentElement;
  const cells = [...root.querySelectorAll("tr.finding td.message, tr.finding td.remedy")].map((cell) => {
    const box = cell.getBoundingClientRect();
    return {kind: cell.className, left: box.left, right: box.right, width: box.width, height: box.height,
            overflow: cell.scrollWidth - cell.clientWidth, text: cell.innerText};
  });
  const measured = document.createElement("pre");
  measured.id = "measured";
  measured.textContent = JSON.stringify({viewport: root.clientWidth, document: root.scrollWidth, cells});
  document.body.append(measured);
});
</script></body></html>"""


def measured(page: Path, profile: Path, width: int) -> dict[str, object]:
    probe = page.with_name(f"measure-{page.name}")
    probe.write_text(MEASURE % (width, html.escape(page.read_text(encoding="utf-8"), quote=True)), encoding="utf-8")
    dom = browse(probe, profile, "--dump-dom", window=(max(width, 500) + 40, 1000)).stdout.decode("utf-8")
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    return dict(json.loads(html.unescape(found[1])))


@pytest.mark.parametrize("width", [390, 1280])
def test_the_page_fits_a_phone_and_a_desktop_with_every_found_and_what_to_do_on_screen(tmp_path: Path, width: int) -> None:
    report = run_audit(read_snapshot(EXAMPLES_DIR / "faulty"))
    page = tmp_path / "audit.html"
    page.write_text(render_html(report, made_at=MADE_AT, version="0.4.0"), encoding="utf-8")
    layout = measured(page, tmp_path / "profile", width)
    viewport, document, cells = layout["viewport"], layout["document"], layout["cells"]
    assert isinstance(viewport, int) and isinstance(document, int) and isinstance(cells, list)
    assert width - 20 <= viewport <= width  # the window less a scrollbar
    assert document <= viewport, f"the page is {document} px wide in a {viewport} px window"
    expected = [text for finding in report.findings for text in (finding.found, finding.remedy)]
    assert len(cells) == len(expected) >= 10
    for cell, text in zip(cells, expected, strict=True):
        assert cell["width"] > 0 and cell["height"] > 0, cell
        assert cell["left"] >= 0 and cell["right"] <= viewport, cell  # on screen, not off to the right
        assert cell["overflow"] <= 0, cell  # nothing inside it runs past its edge
        assert " ".join(cell["text"].split()) == " ".join(text.replace("`", "").split())  # `a command` shows as code
