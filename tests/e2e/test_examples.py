"""Every example applies cleanly: the API server's own validation (server-side dry run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatehouse_dev.cluster import Cluster
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.e2e

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").rglob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_example_is_valid(cluster: Cluster, stack: Stack, namespace: str, example: Path) -> None:
    done = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", str(example), check=False
    )
    assert done.returncode == 0, done.stderr
