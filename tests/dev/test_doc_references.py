"""Pointers from the code, the chart, the build files and the tests into the documentation lead
somewhere, so that moving a section cannot leave a comment or a message pointing at nothing.

A reference is written one of these ways (it may run over line breaks and comment leaders):

- ``docs/<page>.md`` (in a message, ``the docs, <page>.md``), with ``#anchor`` or
  ``, "Heading"`` when it means one section: the page exists and has that heading;
- ``<folder>/README.md`` the same way, for a README elsewhere (the chart's);
- ``README, "Heading"`` (or ``README's "Heading"``): the front page has that heading. It keeps few
  sections, so any other mention of it ("see README", "the README's Troubleshooting") fails: such
  a pointer named a section that may since have moved, and does not say which.

The documentation itself, the changelog (history) and the tests about the front page are not
scanned.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.dev import headings

ROOT = Path(__file__).resolve().parents[2]
NOT_SCANNED = {
    "README.md",
    "CHANGELOG.md",
    "tests/dev/test_front_page.py",
    "tests/dev/test_doc_references.py",
}

# A line break with the next line's indentation and comment leader (#, //, *): a reference may
# run over it.
_LINE_BREAK = re.compile(r"\s*\n\s*(?:#+|//|\*)?\s*")
_SECTION = r'(?:#(?P<anchor>[\w-]+)|,\s*"(?P<heading>[^"]+)")?'
_NOT_WITHIN_A_PATH = r"(?<![\w/.-])"
DOCS_PAGE = re.compile(
    _NOT_WITHIN_A_PATH + r"docs(?:/|,\s+)(?P<page>(?:[\w-]+/)*[\w-]+\.md)" + _SECTION
)
OTHER_README = re.compile(_NOT_WITHIN_A_PATH + r"(?P<page>(?:[\w-]+/)+README\.md)" + _SECTION)
FRONT_PAGE = re.compile(
    _NOT_WITHIN_A_PATH + r"""README\b(?!\.md)(?:(?:'s|,|:)?\s*"(?P<heading>[^"]+)")?"""
)


def _scanned_files() -> Iterator[tuple[str, str]]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    for name in sorted(filter(None, listed.split("\0"))):
        if name in NOT_SCANNED or name.startswith("docs/"):
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # an image, or deleted in the work tree and not yet committed
        yield name, text


def _section_problem(page: Path, anchor: str | None, heading: str | None) -> str | None:
    if not page.is_file():
        return f"no page {page.relative_to(ROOT)}"
    wanted = anchor if anchor is not None else headings.slug(heading) if heading else None
    if wanted is not None and wanted not in headings.anchors(page.read_text()):
        return f"{page.relative_to(ROOT)} has no heading {heading or '#' + str(anchor)!r}"
    return None


def problems(text: str) -> list[str]:
    """What is wrong with each reference in the text: a page or heading that is not there, or a
    mention of the front page that names no heading."""
    flat = _LINE_BREAK.sub(" ", text)
    found: list[str] = []
    for pattern, folder in ((DOCS_PAGE, ROOT / "docs"), (OTHER_README, ROOT)):
        for match in pattern.finditer(flat):
            page = folder / match["page"]
            problem = _section_problem(page, match["anchor"], match["heading"])
            if problem:
                found.append(f"{match[0]!r}: {problem}")
    for match in FRONT_PAGE.finditer(flat):
        if match["heading"] is None:
            context = flat[max(0, match.start() - 40) : match.end() + 40]
            found.append(f'{context!r}: name the heading, README, "..." or the docs page')
        else:
            problem = _section_problem(ROOT / "README.md", None, match["heading"])
            if problem:
                found.append(f"{match[0]!r}: {problem}")
    return found


def test_every_reference_to_the_docs_leads_to_its_heading() -> None:
    found = [f"{name}: {problem}" for name, text in _scanned_files() for problem in problems(text)]
    assert found == [], "\n".join(found)


def test_the_forms_are_read() -> None:
    good = (
        "# the profile (see docs/development/performance.md, \"Where a request's time goes\n"
        '# (the profile)"), the workers\n'
        "# (docs/operating/workers.md#workers-more-than-one-core-per-pod), a message's form\n"
        '    ("see the docs, concepts/sealing.md"), the chart\'s (charts/gatehouse/README.md,\n'
        '    "The shared store") and README, "Layout"; README.md'
    )
    assert problems(good) == []
    workers = "docs/operating/workers.md"
    assert problems(
        f'see docs/no/such.md; {workers}, "Quotas"; README\'s "Quotas"; {workers}#quotas'
    ) == [
        "'docs/no/such.md': no page docs/no/such.md",
        f"'{workers}, \"Quotas\"': {workers} has no heading 'Quotas'",
        f"'{workers}#quotas': {workers} has no heading '#quotas'",
        "'README\\'s \"Quotas\"': README.md has no heading 'Quotas'",
    ]
    bare = problems("slower (see README). Then the README's Troubleshooting.")
    assert len(bare) == 2
    assert all("name the heading" in problem for problem in bare)
