"""The file `make up` writes: sourced in a bare shell, it gives kubectl, helm and Gatehouse's own
commands, pointed at the stack."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gatehouse_dev.cluster import Cluster
from gatehouse_dev.newcomer import newcomer_token
from gatehouse_dev.stack import RunningStack, StackPaths, write_env
from gatehouse_operator.api.roles import ADMIN_ROLE

pytestmark = pytest.mark.e2e


def _in_a_bare_shell(script: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``script`` in bash with nothing of this process's environment but a minimal PATH."""
    return subprocess.run(
        ["bash", "-c", script],
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
    done = _in_a_bare_shell(script, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "namespace/default",
        "http://127.0.0.1:1 http://127.0.0.1:2",
    ]


def test_the_env_files_token_is_a_gatehouse_admins_for_the_service_apis_clis(
    cluster: Cluster, tmp_path: Path
) -> None:
    """`gatehouse requests` sends a bearer token, which the newcomer's client certificate
    cannot give it: the env file carries the newcomer ServiceAccount's (issue 50: "no token" with
    the env sourced), readable by its user alone."""
    paths = StackPaths(tmp_path)
    token = newcomer_token(cluster)
    write_env(paths, RunningStack(cluster, "http://127.0.0.1:1", "http://127.0.0.1:2", token))
    assert paths.env_file.stat().st_mode & 0o077 == 0
    # A copy of the kubeconfig with a user holding that token alone (no client certificate).
    copy = tmp_path / "kubeconfig"
    shutil.copy(cluster.kubeconfig, copy)
    script = (
        f"source {paths.env_file} && export KUBECONFIG={copy} && "
        'kubectl config set-credentials token-only --token="$GATEHOUSE_TOKEN" >/dev/null && '
        "kubectl --user=token-only auth whoami -o jsonpath='{.status.userInfo.username}' 2>&1 "
        "&& echo; "
        # Past "no server" and "no token": it calls the (absent) service API with the token.
        "gatehouse requests vendor 2>&1 | grep -c 'no token\\|no server' || true"
    )
    done = _in_a_bare_shell(script, tmp_path)
    account = "system:serviceaccount:default:gatehouse-newcomer"
    assert done.stdout.splitlines() == [account, "0"], done.stdout + done.stderr
    binding = cluster.kubectl(
        "get", "clusterrolebinding", "gatehouse-newcomer-account", "-o", "jsonpath={.roleRef.name}"
    )
    assert binding.stdout == ADMIN_ROLE
