"""The code blocks of the pages the suite runs (the tutorial and the how-tos), read from the pages
themselves, so that a stale command, example or printed line fails a test
(tests/e2e/test_docs_run.py runs them; tests/dev/test_doc_blocks.py checks the markers).

The blocks stay in the page's own Markdown, not in snippet files included into it: the page is
read on GitHub as well as on the site, where an include line would show instead of the command,
and a reviewer sees prose and command change together. A marker is an HTML comment on the line
before a block (shown neither on the site nor on GitHub):

- a ``sh`` block runs, unmarked: every one, in page order, in one bash session
  (``set -euo pipefail``) in a scratch folder, so a variable set in one is there in the next;
- ``<!-- file: NAME -->`` before a block: its text is written to NAME in that folder, where it is
  in the page (a YAML file the next command applies);
- ``<!-- output -->`` before a ``text`` block: what the ``sh`` block before it prints. Each of its
  lines must be one of the printed lines, runs of spaces alike and ``...`` standing for anything
  (an age, a generated name, a sealed value);
- ``<!-- not run: WHY -->`` before a block: shown, never run (a step the suite takes itself, such as
  starting the stack, or one that needs a cluster that runs Pods), and the reason is required.

Any other block on a run page without a marker is an error: a block nobody decided about is one
nobody checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# The runnable pages: the tutorial, and each how-to.
TUTORIAL = DOCS / "tutorial.md"
HOW_TO = DOCS / "how-to"

# The local stack's addresses the pages name, which the suite's stack has on ports of its own:
# the example upstream (`make up` starts it on 127.0.0.1:18080, GATEHOUSE_DEMO_UPSTREAM_PORT) and
# the dev authorization server a how-to starts on 127.0.0.1:18090.
UPSTREAM = "127.0.0.1:18080"
AUTHORIZATION_SERVER = "127.0.0.1:18090"

Role = Literal["run", "file", "output", "not run"]

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
_MARKER = re.compile(r"<!--\s*(file|output|not run)\s*(?::\s*(.*?))?\s*-->\s*$")


class MarkerError(ValueError):
    """A block on a run page marked wrongly, or not at all."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # the fence's line in the page, from 1
    language: str
    text: str
    role: Role
    argument: str = ""  # the file's name, or why the block is not run

    @property
    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}"


def _shown(page: Path) -> Path:
    return page.relative_to(ROOT) if page.is_relative_to(ROOT) else page


def run_pages() -> list[Path]:
    return [TUTORIAL, *sorted(HOW_TO.glob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks with their roles, in order; raises MarkerError for a block whose
    marker is missing, unknown or incomplete."""
    text = page.read_text()
    found: list[Block] = []
    for fence in _FENCE.finditer(text):
        line = text.count("\n", 0, fence.start()) + 1
        language, body = fence.group(1), fence.group(2)
        before = text[: fence.start()].rstrip("\n").rpartition("\n")[2]
        marker = _MARKER.search(before)
        where = f"{_shown(page)}:{line}"
        if marker is None:
            if language != "sh":
                raise MarkerError(
                    f"{where}: a {language or 'plain'} block needs a marker on the line before "
                    "(<!-- file: NAME -->, <!-- output --> or <!-- not run: WHY -->)"
                )
            found.append(Block(page, line, language, body, "run"))
            continue
        role, argument = marker.group(1), (marker.group(2) or "").strip()
        if role in ("file", "not run") and not argument:
            raise MarkerError(f"{where}: <!-- {role}: ... --> needs its {_NEEDS[role]}")
        if role == "output" and not (found and found[-1].role == "run"):
            raise MarkerError(f"{where}: <!-- output --> follows no block that runs")
        found.append(Block(page, line, language, body, role, argument))  # type: ignore[arg-type]
    return found


_NEEDS = {"file": "file name", "not run": "reason"}


def script(page_blocks: list[Block], addresses: dict[str, str]) -> str:
    """One bash script for the page: files written and commands run in page order, each block
    after a line ``@@block N`` on its output (N: its index in ``page_blocks``). ``addresses``:
    the local stack's addresses the page names, each replaced with the suite's."""
    lines = ["set -euo pipefail"]
    for index, block in enumerate(page_blocks):
        text = localised(block.text, addresses)
        if block.role == "file":
            delimiter = "GATEHOUSE_DOC_FILE"
            assert delimiter not in text
            lines += [f"cat > {_quoted(block.argument)} <<'{delimiter}'", text + delimiter]
        elif block.role == "run":
            # On a line of its own, whether or not the block before ended its last line.
            lines += [f"echo; echo '@@block {index}'", text]
    return "\n".join(lines) + "\n"


def localised(text: str, addresses: dict[str, str]) -> str:
    for page_address, suite_address in addresses.items():
        text = text.replace(page_address, suite_address)
    return text


def outputs(printed: str) -> dict[int, str]:
    """What each block printed, by its index, from the script's output."""
    by_block: dict[int, str] = {}
    current: int | None = None
    for line in printed.splitlines(keepends=True):
        started = re.fullmatch(r"@@block (\d+)\n?", line)
        if started:
            current = int(started.group(1))
            by_block[current] = ""
        elif current is not None:
            by_block[current] += line
    return by_block


def unmatched(expected: str, printed: str) -> list[str]:
    """The lines of an output block that no printed line matches."""
    printed_lines = [" ".join(line.split()) for line in printed.splitlines()]
    missing = []
    for line in expected.splitlines():
        if not line.strip():
            continue
        parts = [re.escape(part) for part in re.split(r"\.{3,}", " ".join(line.split()))]
        pattern = re.compile(".*".join(part.replace(r"\ ", " ") for part in parts))
        if not any(pattern.fullmatch(candidate) for candidate in printed_lines):
            missing.append(line)
    return missing


def _quoted(name: str) -> str:
    if not re.fullmatch(r"[\w.-]+", name):
        raise MarkerError(f"a file block's name is a plain file name, not {name!r}")
    return name
