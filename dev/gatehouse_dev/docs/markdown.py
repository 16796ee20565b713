"""Markdown pieces the reference pages share: a table, a code span, a cell's text."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence


def cell(text: str) -> str:
    """One line, with the pipes a table would split on escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _span(text: str) -> str:
    # Python-Markdown's tables leave pipes inside a code span alone; a backtick in the text
    # needs a longer fence.
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code(value: object) -> str:
    """A value as JSON in a code span (strings bare), or empty for none."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
    return _span(" ".join(text.split())) if text else '`""`'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    return "\n".join(lines) + "\n"


def generated(source: str) -> str:
    """The first line of every generated page: where it comes from, and not to edit it."""
    return (
        f"<!-- Generated from {source} by `python -m gatehouse_dev docs` (make docs-pages). "
        "Do not edit. -->\n\n"
    )
