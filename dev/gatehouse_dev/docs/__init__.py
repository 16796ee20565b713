"""The documentation site's reference pages, generated from the code so they cannot drift.

``python -m gatehouse_dev docs`` writes them into ``docs/reference/``; a test fails when the
committed pages differ from what this writes.
"""

from __future__ import annotations

from pathlib import Path

from gatehouse_dev.docs import crd_fields, helm_values, metrics, reasons

DOCS = "docs"


def pages(root: Path) -> dict[str, str]:
    """Each generated page's path under ``docs/``, and its text."""
    return {
        **crd_fields.pages(),
        **metrics.pages(),
        **helm_values.pages(root),
        **reasons.pages(),
    }


def write(root: Path) -> list[Path]:
    written = []
    for name, text in pages(root).items():
        path = root / DOCS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
