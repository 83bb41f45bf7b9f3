"""The front page and the reference: every relative link and #anchor in README.md, docs/*.md, the changelog and
the examples' READMEs resolves (anchors as GitHub makes them from headings); the README stays a front page (under
250 lines) whose first screen takes a newcomer from a clone to an audit in two commands, and whose aksgpu commands
are ones the command line accepts."""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path

import pytest

from aks_gpu.cli import build_parser, main
from tests.conftest import PROJECT_DIR

README = PROJECT_DIR / "README.md"
DOCUMENTS = sorted(
    {README, PROJECT_DIR / "CHANGELOG.md", *(PROJECT_DIR / "docs").glob("*.md"), *(PROJECT_DIR / "examples").glob("*/README.md")}
)
README_LINES = 250
# What fits a terminal or a browser window before scrolling.
FIRST_SCREEN_LINES = 30

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target): the text may hold one level of brackets ([`x`] or [a [b] c]).
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
# GitHub's heading ids (github-slugger, as github.com renders Markdown): lower case, every character that is not a
# letter, digit, underscore, hyphen or space dropped, each space a hyphen; a repeated id gets -1, -2, ...
_NOT_IN_SLUG = re.compile(r"[^\w\- ]")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1, with inline code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, _INLINE_CODE.sub("``", line)))
    return lines


def github_slug(heading: str) -> str:
    text = _INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading shows its text
    text = re.sub(r"<[^>]+>", "", text)
    return _NOT_IN_SLUG.sub("", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The ids GitHub gives the headings of a Markdown file, and its explicit HTML anchors."""
    seen: Counter[str] = Counter()
    found: set[str] = set()
    text = path.read_text(encoding="utf-8")
    for _, line in prose_lines_keep_code(text):
        heading = _HEADING.match(line)
        if heading:
            slug = github_slug(heading.group(2))
            found.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
            seen[slug] += 1
        found.update(_HTML_ANCHOR.findall(line))
    return found


def prose_lines_keep_code(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, inline code kept (a heading's id is made from its code too)."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def links(path: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        found += [(number, target) for target in _INLINE_LINK.findall(line)]
        definition = _REFERENCE_DEFINITION.match(line)
        if definition:
            found.append((number, definition.group(1)))
    return found


def broken_links(path: Path, root: Path = PROJECT_DIR) -> list[str]:
    """Every relative link of ``path`` whose file or #anchor does not exist, as ``file:line: target (why)``."""
    problems = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto: ... are not checked here
            continue
        where = f"{path.relative_to(root)}:{number}: {target}"
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{where} (no such file)")
        elif not linked.is_relative_to(root.resolve()):
            problems.append(f"{where} (outside the repository)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{where} (no heading #{anchor} in {linked.name})")
    return problems


def test_the_checker_finds_a_missing_file_and_a_missing_anchor_and_follows_githubs_rules(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## The `aksgpu admission check`: C++ & you\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#the-aksgpu-admission-check-c--you) [dup](other.md#twice-1) [self](#page)\n"
        "[gone](missing.md) [bad](other.md#nowhere) [web](https://example.com/x#y) `[code](not-a-link.md)`\n\n"
        "```\n[fenced](also-not-a-link.md)\n```\n\n[ref]: other.md#twice-2\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "page.md:4: missing.md (no such file)",
        "page.md:4: other.md#nowhere (no heading #nowhere in other.md)",
        "page.md:10: other.md#twice-2 (no heading #twice-2 in other.md)",
    ]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(PROJECT_DIR)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_every_reference_page_is_reachable_from_the_front_page() -> None:
    index = PROJECT_DIR / "docs" / "README.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for _, target in links(index) if "://" not in target}
    pages = {page.resolve() for page in (PROJECT_DIR / "docs").glob("*.md")} - {index.resolve()}
    assert not sorted(str(p.relative_to(PROJECT_DIR)) for p in pages - linked), "add them to docs/README.md"
    assert "docs/README.md" in README.read_text(encoding="utf-8")


# ---------------------------------------------------------------- the front page


def readme_commands() -> list[str]:
    """Every aksgpu command the README shows: in its shell blocks and in inline code."""
    text = README.read_text(encoding="utf-8")
    found, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        candidates = [line.split("#", 1)[0]] if fenced else [m.group(2) for m in _INLINE_CODE.finditer(line)]
        found += [c.strip() for c in candidates if re.match(r"\s*(\.venv/bin/)?aksgpu\s", c)]
    return found


def test_the_readme_is_a_front_page() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < README_LINES


def test_every_aksgpu_command_in_the_readme_is_one_the_command_line_accepts() -> None:
    commands = readme_commands()
    assert {shlex.split(c)[1] for c in commands} >= {"plan", "audit", "admission"}
    parser = build_parser()
    for command in commands:
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"README: `{command}` is refused by the command line")


def test_the_first_screen_goes_from_a_clone_to_an_audit_and_says_it_exits_1_by_design() -> None:
    first_screen = "\n".join(README.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN_LINES])
    [block] = re.findall(r"```sh\n(.*?)```", first_screen, re.DOTALL)
    lines = block.splitlines()
    commands = [line.split("#", 1)[0].strip() for line in lines]
    # The environment, aksgpu on the PATH (said once: every later section runs a bare `aksgpu`), the audit.
    setup, path, audit = commands
    assert setup == "make setup"
    assert re.search(r"^setup:", (PROJECT_DIR / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert path == "source .venv/bin/activate"
    words = shlex.split(audit)
    assert words[:3] == ["aksgpu", "audit", "--snapshot"]
    snapshot = PROJECT_DIR / words[3]
    assert snapshot.is_dir(), f"the first screen audits {words[3]}, which is not in the checkout"
    assert main(words[1:]) == 1, "the faulty example should fail the audit"
    assert "exits 1" in lines[2] and "by design" in lines[2], "the first screen should say the exit status 1 is meant"
    healthy = snapshot.parent / "healthy"
    assert main(["audit", "--snapshot", str(healthy)]) == 0, "the healthy example should pass"
    assert "examples/snapshots/healthy` passes (exit 0)" in first_screen


def test_the_readme_runs_aksgpu_one_way() -> None:
    """Once aksgpu is on the PATH, every command says `aksgpu`, never `.venv/bin/aksgpu` beside a bare one."""
    commands = readme_commands()
    assert commands and all(shlex.split(command)[0] == "aksgpu" for command in commands), commands
