"""The ``--html`` page as the person it is handed to reads it, parsed (html.parser) for the example snapshots: when it
was made and by which aksgpu, Microsoft's article as a link, a verdict per practice with its count of findings, what
the idle GPUs cost a month at the top, actions that are things to do, and no link a reader without the repository
cannot follow."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from aks_gpu import __version__
from aks_gpu.audit.engine import run_audit
from aks_gpu.audit.html import render_html
from aks_gpu.audit.registry import ARTICLE_URL, PRACTICES
from aks_gpu.cli import main
from aks_gpu.cli.common import aksgpu_version
from aks_gpu.cluster.snapshot import read_snapshot
from aks_gpu.naming import PACKAGE_NAME
from tests.examples.example_snapshots import EXAMPLES_DIR

FAULTY, HEALTHY = EXAMPLES_DIR / "faulty", EXAMPLES_DIR / "healthy"
MADE_AT = datetime(2025, 10, 21, 7, 5, tzinfo=timezone(timedelta(hours=2)))  # 05:05 UTC
# How every remedy starts: a verb a person acts on.
IMPERATIVES = {"Taint", "Move", "Deploy", "Check", "Upgrade", "Let", "Give", "Run", "Cordon", "Lower", "Prove"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""
    children: list[Element] = field(default_factory=list)

    def all(self, tag: str | None = None, **attrs: str) -> list[Element]:
        """Every element below this one with ``tag`` and the attribute values given (``class_`` for class)."""
        found = []
        for child in self.children:
            wanted = {key.rstrip("_"): value for key, value in attrs.items()}
            if (tag is None or child.tag == tag) and all(
                value in child.attrs.get(key, "").split() if key == "class" else child.attrs.get(key) == value
                for key, value in wanted.items()
            ):
                found.append(child)
            found.extend(child.all(tag, **attrs))
        return found

    def one(self, tag: str | None = None, **attrs: str) -> Element:
        (found,) = self.all(tag, **attrs)
        return found


class _Page(HTMLParser):
    """The page as a tree of elements, each with the text inside it."""

    VOID = frozenset({"meta", "br", "img", "link", "input", "hr"})

    def __init__(self) -> None:
        super().__init__()
        self.root = Element("document", {})
        self._open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {key: value or "" for key, value in attrs})
        self._open[-1].children.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while len(self._open) > 1:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text += data


def parsed(html: str) -> Element:
    page = _Page()
    page.feed(html)
    return page.root


def page_of(folder: Path, **edits: object) -> tuple[str, Element]:
    snapshot = replace(read_snapshot(folder), **edits)  # type: ignore[arg-type]
    html = render_html(run_audit(snapshot), made_at=MADE_AT, version="9.8.7")
    return html, parsed(html)


# ---------------------------------------------------------------- when, by what, against what


@pytest.mark.parametrize("folder", [FAULTY, HEALTHY], ids=["faulty", "healthy"])
def test_the_page_says_when_it_was_made_by_which_aksgpu_against_which_article(folder: Path) -> None:
    _, page = page_of(folder)

    made = page.one(id="made")
    assert made.one("time").attrs["datetime"] == "2025-10-21T05:05:00+00:00"
    assert "2025-10-21 05:05 UTC" in made.text and made.one(id="version").text == "9.8.7"
    assert [a.attrs["href"] for a in made.all("a")] == [ARTICLE_URL]


def test_the_cli_dates_the_page_now_and_names_the_installed_version(tmp_path: Path) -> None:
    page = tmp_path / "audit.html"
    before = datetime.now(UTC).replace(microsecond=0)
    assert main(["audit", "--snapshot", str(HEALTHY), "--html", str(page)]) == 0

    made = parsed(page.read_text(encoding="utf-8")).one(id="made")
    assert before <= datetime.fromisoformat(made.one("time").attrs["datetime"]) <= datetime.now(UTC)
    assert made.one(id="version").text == importlib.metadata.version(PACKAGE_NAME)


def test_a_source_tree_never_installed_names_the_version_its_source_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert aksgpu_version() == __version__


# ---------------------------------------------------------------- a verdict per practice


def verdicts(page: Element) -> dict[str, tuple[str, int]]:
    rows = page.one("section", id="verdicts").all("tr", class_="verdict")
    return {row.attrs["data-practice"]: (row.attrs["data-verdict"], int(row.one("td", class_="findings").text)) for row in rows}


def test_the_faulty_example_has_a_verdict_and_a_count_for_every_practice() -> None:
    _, page = page_of(FAULTY)

    assert verdicts(page) == {
        "automatic": ("pass", 0),
        "placement": ("fail", 2),
        "validation": ("pass", 0),
        "node-image": ("warn", 1),
        "isolation": ("warn", 3),
        "utilisation": ("warn", 1),
        "health": ("fail", 3),
        "disruption": ("warn", 1),
        "queueing": ("warn", 1),
    }
    # Each row leads to the practice's section on the page.
    for row in page.one("section", id="verdicts").all("tr", class_="verdict"):
        anchor = row.all("a")[0].attrs["href"]
        assert page.all(id=anchor.removeprefix("#"))


def test_the_healthy_example_passes_every_practice_health_only_in_what_was_checked() -> None:
    _, page = page_of(HEALTHY)

    assert verdicts(page) == {practice.id: ("pass", 0) for practice in PRACTICES}
    health = page.one("tr", class_="verdict", **{"data-practice": "health"})
    assert "in what was checked" in health.text and "not checked" in health.text  # nvidia-smi -q -x shows no Xid


def test_a_practice_nothing_of_which_could_be_judged_is_not_checked_never_passed() -> None:
    _, page = page_of(FAULTY, resourcequotas=None, networkpolicies=None)

    assert verdicts(page)["isolation"] == ("not checked", 0)


# ---------------------------------------------------------------- the idle cost at the top


def test_the_idle_gpus_monthly_cost_is_in_the_header() -> None:
    _, faulty = page_of(FAULTY)
    _, healthy = page_of(HEALTHY)

    # 730 hours of the idle Standard_NC24ads_A100_v4 at the eastus list price (components/aks_gpu/data/gpu_prices.yaml).
    assert faulty.one("header").one(id="idle-cost-total").text == "about USD 2,681 a month at list price"
    assert healthy.one("header").one(id="idle-cost-total").text == "USD 0 a month"
    assert "no GPU node is idle" in healthy.one(id="idle-total").text


# ---------------------------------------------------------------- actions that are actions


def test_every_action_is_something_to_do_not_the_problem_again() -> None:
    _, page = page_of(FAULTY)

    actions = [item.one(class_="action").text for item in page.one("section", id="top-actions").all("li")]
    rows = page.all("tr", class_="finding")
    assert len(actions) == 5 and len(rows) == 12
    for row in rows:
        found, remedy = row.one("td", class_="message").text, row.one("td", class_="remedy").text
        assert remedy.split()[0] in IMPERATIVES, remedy
        assert remedy not in found and found not in remedy
    for action in actions:
        assert action.split()[0] in IMPERATIVES, action
    # Every "what to do" box is one too (no "each message says what to do").
    for todo in page.all("div", class_="todo"):
        assert todo.text.removeprefix("What to do: ").split()[0] in IMPERATIVES, todo.text


def test_the_unfenced_namespace_is_asked_only_for_what_its_row_says_it_lacks() -> None:
    _, page = page_of(FAULTY)

    row = page.one("section", id="namespaces").one("tr", **{"data-namespace": "gpu-training"})
    assert (row.one("td", class_="deny-all").text, row.one("td", class_="quota").text) == ("yes", "none")
    remedies = {r.one("td", class_="remedy").text for r in page.all("tr", class_="finding", **{"data-id": "gpu-pod-unfenced"})}
    assert remedies == {"Give the namespace a ResourceQuota on requests.nvidia.com/gpu (no scopes)"}


# ---------------------------------------------------------------- nothing to follow but public pages


@pytest.mark.parametrize("folder", [FAULTY, HEALTHY], ids=["faulty", "healthy"])
def test_every_link_leads_to_a_public_page_or_within_the_page(folder: Path) -> None:
    html, page = page_of(folder)

    links = [a.attrs["href"] for a in page.all("a")]
    assert ARTICLE_URL in links
    for link in links:
        if link.startswith("#"):
            assert page.all(id=link[1:]), link
        else:
            assert link.startswith("https://learn.microsoft.com/"), link
    # No path into a repository the reader does not have, linked or not.
    assert "docs/" not in html and "components/" not in html and ".md" not in html
    for loads in ("<script", "<link", "src=", "@import", "url("):
        assert loads not in html, loads
