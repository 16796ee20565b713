"""The README is the front page: short, and every link in it leads somewhere (the site's strict
build checks the pages under docs/, not the README)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.dev import headings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 300
# [text](target), the target without spaces; images too.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(markdown: str) -> list[str]:
    return [
        target
        for target in LINK.findall(headings.FENCE.sub("", markdown))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)
    ]


def test_the_front_page_is_short() -> None:
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_every_relative_link_in_the_readme_resolves() -> None:
    text = README.read_text()
    links = _relative_links(text)
    assert links, "the front page links into docs/"
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = (ROOT / path) if path else README
        if not target.is_file():
            broken.append(f"{link}: no file {path}")
        elif anchor and anchor not in headings.anchors(target.read_text()):
            broken.append(f"{link}: no heading #{anchor} in {path or 'README.md'}")
    assert broken == []


def test_a_broken_link_is_caught() -> None:
    page = "# Title\n\n## A `code`: section\n\n```\n# not a heading\n```\n"
    assert headings.anchors(page) == {"title", "a-code-section"}
    links = _relative_links("[a](docs/x.md#y) [b](https://example.com) [c](#z)")
    assert links == ["docs/x.md#y", "#z"]
