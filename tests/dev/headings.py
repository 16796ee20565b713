"""A Markdown page's headings as anchors, the way GitHub and the site make them from these
headings, so that a link or a reference to a heading can be checked without building the site."""

from __future__ import annotations

import re

FENCE = re.compile(r"^```.*?^```", re.M | re.S)
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


def slug(heading: str) -> str:
    """A heading's anchor: lower case, punctuation and backticks dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """The anchors of the page's headings; a line starting with # in a code block is none."""
    prose = FENCE.sub("", markdown)
    return {slug(m.group(1)) for m in HEADING.finditer(prose)}
