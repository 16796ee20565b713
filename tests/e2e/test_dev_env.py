"""The file `make up` writes: sourced in a bare shell, it gives kubectl, helm and Gatehouse's own
commands, pointed at the stack."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.stack import RunningStack, StackPaths, write_env

pytestmark = pytest.mark.e2e


def test_the_env_file_puts_every_command_on_path(cluster: Cluster, tmp_path: Path) -> None:
    paths = StackPaths(tmp_path)
    write_env(paths, RunningStack(cluster, "http://127.0.0.1:1", "http://127.0.0.1:2"))
    script = (
        f"source {paths.env_file} && "
        "for c in kubectl helm gatehouse gatehouse-service; do command -v $c >/dev/null "
        "|| { echo missing $c; exit 1; }; done && "
        "gatehouse-service validate --help >/dev/null && "
        'kubectl get namespace default -o name && echo "$GATEHOUSE_PROXY_URL $GATEHOUSE_API_URL" '
        # The CLIs read the names the file exports (issue 50: "no server" with it sourced).
        "&& { gatehouse requests vendor 2>&1 | grep 'no server' || true; }"
    )
    done = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "namespace/default",
        "http://127.0.0.1:1 http://127.0.0.1:2",
    ]
