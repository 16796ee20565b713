"""The pages the suite runs are marked so it can run them (tests/dev/doc_blocks.py), every auth
kind has a page among them and one example under examples/connections/, and the runner catches
a stale command or printed line (tests/e2e/test_docs_run.py runs the pages on the real stack)."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from gatehouse_operator.api.auth_kinds import AUTH_KINDS
from gatehouse_operator.api.connection import ExternalConnectionSpec
from tests.dev import doc_blocks

EXAMPLES = doc_blocks.ROOT / "examples" / "connections"


def _auth_types(documents: list[Any]) -> list[str]:
    return [
        str(document["spec"]["auth"]["type"])
        for document in documents
        if isinstance(document, dict) and document.get("kind") == "ExternalConnection"
    ]


@pytest.mark.parametrize("page", doc_blocks.run_pages(), ids=lambda page: page.stem)
def test_every_block_of_a_run_page_is_marked(page: Path) -> None:
    page_blocks = doc_blocks.blocks(page)
    assert any(block.role == "run" for block in page_blocks)
    for block in page_blocks:
        if block.role == "file" and block.language == "yaml":
            list(yaml.safe_load_all(block.text))  # a YAML file that is not YAML fails here


def test_every_auth_kind_has_a_page_the_suite_runs() -> None:
    """A kind's page is one whose files (the YAML it applies) hold a connection of that kind."""
    shown: dict[str, list[str]] = {}
    for page in doc_blocks.run_pages():
        for block in doc_blocks.blocks(page):
            if block.role == "file" and block.language == "yaml":
                for kind in _auth_types(list(yaml.safe_load_all(block.text))):
                    shown.setdefault(kind, []).append(page.name)
    assert sorted(set(AUTH_KINDS) - set(shown)) == []


def test_examples_hold_one_valid_connection_per_auth_kind() -> None:
    """One file per kind, each a connection the operator's model accepts (the suite also applies
    each with the API server's dry run: tests/e2e/test_examples.py)."""
    kinds: Counter[str] = Counter()
    for example in sorted(EXAMPLES.glob("*.yaml")):
        documents = list(yaml.safe_load_all(example.read_text()))
        types = _auth_types(documents)
        assert len(types) == 1, f"{example.name}: one ExternalConnection per file"
        (connection,) = [d for d in documents if d.get("kind") == "ExternalConnection"]
        ExternalConnectionSpec.model_validate(connection["spec"])
        kinds.update(types)
    assert {kind: kinds[kind] for kind in AUTH_KINDS} == dict.fromkeys(AUTH_KINDS, 1)
    assert sorted(set(kinds) - set(AUTH_KINDS)) == []


# --- The runner itself -------------------------------------------------------------------------


PAGE = """# A page

<!-- file: hello.txt -->
```text
hello from 127.0.0.1:18080
```

```sh
cat hello.txt
```

<!-- output -->
```text
hello from 127.0.0.1:18080
```

```sh
printf 'NAME   READY   AGE\\nthing  True    3s'
```

<!-- output -->
```text
NAME READY AGE
thing True ...
```

<!-- not run: never -->
```sh
exit 3
```
"""


def _run(tmp_path: Path, text: str) -> tuple[list[doc_blocks.Block], int, dict[int, str]]:
    page = tmp_path / "page.md"
    page.write_text(text)
    page_blocks = doc_blocks.blocks(page)
    script = doc_blocks.script(page_blocks, {doc_blocks.UPSTREAM: "127.0.0.1:5"})
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=10,
        check=False,
    )
    return page_blocks, done.returncode, doc_blocks.outputs(done.stdout)


def test_a_page_runs_and_its_outputs_match(tmp_path: Path) -> None:
    page_blocks, code, printed = _run(tmp_path, PAGE)
    assert code == 0
    roles = [block.role for block in page_blocks]
    assert roles == ["file", "run", "output", "run", "output", "not run"]
    # The page's address is the suite's, in a file as in an output.
    assert printed[1].strip() == "hello from 127.0.0.1:5"
    said = doc_blocks.localised(page_blocks[2].text, {doc_blocks.UPSTREAM: "127.0.0.1:5"})
    assert doc_blocks.unmatched(said, printed[1]) == []
    assert doc_blocks.unmatched(page_blocks[4].text, printed[3]) == []


def test_a_stale_command_or_output_fails(tmp_path: Path) -> None:
    _, code, printed = _run(tmp_path, PAGE.replace("cat hello.txt", "cat goodbye.txt"))
    assert code != 0
    assert max(printed) == 1  # the block that failed
    page_blocks, code, printed = _run(tmp_path, PAGE.replace("thing True ...", "thing False ..."))
    assert code == 0
    assert doc_blocks.unmatched(page_blocks[4].text, printed[3]) == ["thing False ..."]


@pytest.mark.parametrize(
    ("marked", "complaint"),
    [
        ("```yaml\na: 1\n```\n", "needs a marker"),
        ("<!-- file: -->\n```yaml\na: 1\n```\n", "needs its file name"),
        ("<!-- not run -->\n```sh\ntrue\n```\n", "needs its reason"),
        ("<!-- output -->\n```text\nx\n```\n", "follows no block that runs"),
    ],
    ids=["unmarked", "file-without-name", "not-run-without-reason", "output-alone"],
)
def test_a_block_marked_wrongly_is_refused(tmp_path: Path, marked: str, complaint: str) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n" + marked)
    with pytest.raises(doc_blocks.MarkerError, match=complaint):
        doc_blocks.blocks(page)
