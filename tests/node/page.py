"""The operator's page reached from the host as the chart's NOTES tell a user to: ``kubectl
port-forward`` to its Service, then ``gatehouse open --server`` with that address."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.processes import Server, free_port
from tests.node.release import RELEASE, SYSTEM

OPERATOR_SERVICE = f"service/{RELEASE}-operator"


def _signs_in(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ui/sign-in", timeout=2) as answer:  # noqa: S310
            return bool(answer.status == 200)
    except OSError:
        return False


@contextmanager
def forwarded(cluster: Cluster, folder: Path) -> Iterator[str]:
    """The page at ``http://localhost:PORT`` for as long as the block runs."""
    port = free_port()
    server = Server(
        "port-forward",
        [
            str(cluster.binaries.kubectl), f"--kubeconfig={cluster.kubeconfig}", "-n", SYSTEM,
            "port-forward", OPERATOR_SERVICE, f"{port}:8082",
        ],
        folder / "port-forward.log",
    )  # fmt: skip
    server.start(detached=False)
    url = f"http://localhost:{port}"
    try:
        server.wait_until(lambda: _signs_in(url), timeout=30)
        yield url
    finally:
        server.stop()


def gatehouse_open(kubeconfig: Path, namespace: str, server: str) -> str:
    """``gatehouse open --no-browser --server SERVER`` as ``kubeconfig``'s user: the link."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GATEHOUSE_")}
    opened = subprocess.run(
        [
            sys.executable, "-m", "gatehouse_operator.cli.gatehouse", "open", "--no-browser",
            "-n", namespace, "--server", server, "--timeout", "30",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "KUBECONFIG": str(kubeconfig)},
    )  # fmt: skip
    assert opened.returncode == 0, opened.stderr
    link = opened.stdout.strip().splitlines()[-1]
    assert link.startswith(f"{server}/ui/sign-in/link#code="), link
    return link
