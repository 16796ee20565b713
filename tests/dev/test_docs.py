"""The documentation site: its reference pages match the code, and it builds strictly, so a
broken link or anchor fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gatehouse_dev import docs

ROOT = Path(__file__).resolve().parents[2]
PAGES = docs.pages(ROOT)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_committed_reference_page_matches_the_code(name: str) -> None:
    committed = ROOT / docs.DOCS / name
    assert committed.exists(), f"{name} is missing: run `make docs-pages` and commit the result"
    assert committed.read_text() == PAGES[name], (
        f"{committed} is stale: run `make docs-pages` and commit the result"
    )


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )


def _checkout(tmp_path: Path) -> Path:
    """The site's sources alone, to break a copy of them."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / docs.DOCS, copy / docs.DOCS)
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    return copy


def test_site_builds_strictly(tmp_path: Path) -> None:
    built = _build(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "reference" / "reasons" / "index.html").exists()


@pytest.mark.parametrize(
    ("link", "complaint"),
    [
        ("[gone](reference/no-such-page.md)", "no-such-page.md"),
        ("[gone](reference/metrics.md#no-such-anchor)", "no-such-anchor"),
    ],
    ids=["page", "anchor"],
)
def test_a_broken_link_fails_the_build(tmp_path: Path, link: str, complaint: str) -> None:
    copy = _checkout(tmp_path)
    index = copy / docs.DOCS / "index.md"
    index.write_text(index.read_text() + f"\nSee {link}.\n")

    built = _build(copy, tmp_path / "site")
    assert built.returncode != 0
    assert complaint in built.stderr


def test_a_page_left_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    """A generated page for a new kind must be linked, not left where no reader finds it."""
    copy = _checkout(tmp_path)
    (copy / docs.DOCS / "reference" / "newkind.md").write_text("# NewKind\n")

    built = _build(copy, tmp_path / "site")
    assert built.returncode != 0
    assert "reference/newkind.md" in built.stderr
