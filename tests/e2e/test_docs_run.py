"""The tutorial and every how-to run as written, against the real stack: each page's commands in
one bash session with the file `make up` writes sourced, its YAML written where it says, and each
line it says a command prints checked against what the command printed (the conventions:
tests/dev/doc_blocks.py). A command, example or printed line that goes stale fails here.

The pages name the local stack's addresses (the example API on 127.0.0.1:18080, the dev
authorization server on 127.0.0.1:18090); the suite's stack has them on ports of its own, and
only those addresses are replaced. Each page works in a namespace of its own, named in it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.newcomer import newcomer_token
from gatehouse_dev.stack import RunningStack, StackPaths, write_env
from tests.dev import doc_blocks
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e

# What a reader brings to the page: the Google service account's key file (the suite's dev
# authorization server, which the proxies here ask for Google's tokens, trusts its account).
SERVICE_ACCOUNT_KEY_FILE = "reader-key.json"
PAGE_SECONDS = 120


def _address(url: str) -> str:
    return urlsplit(url).netloc


@pytest.mark.parametrize("page", doc_blocks.run_pages(), ids=lambda page: page.stem)
def test_the_page_runs_as_written(
    cluster: Cluster, stack: Stack, tmp_path: Path, page: Path
) -> None:
    page_blocks = doc_blocks.blocks(page)
    addresses = {
        doc_blocks.UPSTREAM: _address(stack.upstream),
        doc_blocks.AUTHORIZATION_SERVER: _address(stack.token_endpoint),
    }
    paths = StackPaths(tmp_path / "stack")
    paths.root.mkdir()
    # As `make up` writes it: the newcomer's token is what `gatehouse connect` sends.
    running = RunningStack(cluster, stack.proxy, stack.local.api_url, newcomer_token(cluster))
    write_env(paths, running)
    work = tmp_path / "work"
    work.mkdir()
    (work / SERVICE_ACCOUNT_KEY_FILE).write_bytes(stack.service_account_key)

    script = f"source {paths.env_file}\n" + doc_blocks.script(page_blocks, addresses)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=PAGE_SECONDS,
        check=False,
    )
    printed = doc_blocks.outputs(done.stdout)
    if done.returncode != 0:
        last = max(printed, default=0)
        block = page_blocks[last]
        pytest.fail(
            f"{block.where}: the block exited {done.returncode}:\n{block.text}\n"
            f"it printed:\n{printed.get(last, done.stdout)}"
        )
    stale = []
    for index, block in enumerate(page_blocks):
        if block.role != "output":
            continue
        said = doc_blocks.localised(block.text, addresses)
        missing = doc_blocks.unmatched(said, printed.get(index - 1, ""))
        if missing:
            stale.append(
                f"{block.where}: {page_blocks[index - 1].where} printed no line like\n  "
                + "\n  ".join(missing)
                + f"\nit printed:\n{printed.get(index - 1, '')}"
            )
    assert stale == [], "\n".join(stale)
