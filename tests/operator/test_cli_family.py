"""The CLI family's conventions (cmctl's): version, completion, --kubeconfig, the Pod's own
ServiceAccount when there is no kubeconfig, and output as text, JSON or YAML.

The kubectl plugin form runs against a real kubectl and API server in tests/e2e/test_cli.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.config import incluster_config

from gatehouse_contract.observability import version
from gatehouse_operator.cli import kubeconfig


def gatehouse(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gatehouse_operator.cli.gatehouse", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def test_version_needs_no_cluster_and_prints_text_json_or_yaml() -> None:
    empty = {"PATH": os.environ["PATH"], "KUBECONFIG": "/nonexistent"}
    text = gatehouse("version", env=empty)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"gatehouse {version()} (Python ")
    assert json.loads(gatehouse("version", "-o", "json").stdout)["gatehouse"] == version()
    assert yaml.safe_load(gatehouse("version", "-o", "yaml").stdout)["gatehouse"] == version()


def _offered(script: Path, *words: str) -> list[str]:
    """What bash offers after ``words`` (the last one being completed)."""
    line = " ".join(f"'{word}'" for word in words)
    shown = subprocess.run(
        [
            "bash",
            "-c",
            f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _gatehouse; "
            'printf "%s\\n" "${COMPREPLY[@]}"',
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return shown.stdout.split()


def test_bash_completes_commands_nested_commands_and_options(tmp_path: Path) -> None:
    script = tmp_path / "gatehouse.bash"
    script.write_text(gatehouse("completion", "bash").stdout)
    assert _offered(script, "gatehouse", "") == [
        "--help",
        "test",
        "save-sample",
        "service",
        "seal",
        "reseal",
        "sealing-key",
        "requests",
        "open",
        "connect",
        "cache",
        "version",
        "completion",
    ]
    assert _offered(script, "gatehouse", "cache", "") == ["--help", "purge"]
    assert _offered(script, "gatehouse", "cache", "purge", "--s") == ["--server"]
    assert _offered(script, "gatehouse", "s") == ["save-sample", "service", "seal", "sealing-key"]
    assert _offered(script, "gatehouse", "sealing-key", "") == [
        "--help",
        "public",
        "rotate",
        "retire",
    ]
    assert _offered(script, "gatehouse", "service", "d") == ["deploy"]
    assert _offered(script, "gatehouse", "-n", "x", "test", "--kube") == ["--kubeconfig"]
    assert _offered(script, "gatehouse", "service", "deploy", "--d") == ["--dry-run"]
    assert _offered(script, "gatehouse", "completion", "") == ["--help", "bash", "zsh", "fish"]
    assert "complete -F _gatehouse gatehouse kubectl-gatehouse" in script.read_text()


def test_kubectl_completes_the_plugin_by_cobras_protocol() -> None:
    answer = subprocess.run(
        [sys.executable, "-c",
         "from gatehouse_operator.cli.gatehouse import kubectl_completion as c; c()",
         "service", "deploy", "--d"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert answer.stdout == "--dry-run\n:4\n"


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_every_command(shell: str) -> None:
    done = gatehouse("completion", shell)
    assert done.returncode == 0
    for word in ("save-sample", "deploy", "kubeconfig"):
        assert word in done.stdout


def test_without_a_kubeconfig_in_a_pod_the_service_account_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI job's Pod: no $KUBECONFIG, no ~/.kube/config, the ServiceAccount's files mounted."""
    (tmp_path / "token").write_text("the-pods-token")
    (tmp_path / "ca.crt").write_text("the cluster's CA (read by the client when it connects)")
    (tmp_path / "namespace").write_text("analytics\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "namespace")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    try:
        assert kubeconfig.load(None, None) == "analytics"
        configured = client.Configuration.get_default_copy()
        assert configured.host == "https://10.96.0.1:443"
        assert configured.api_key["BearerToken"].endswith(" the-pods-token")
        assert kubeconfig.load(None, "given") == "given"
        # A kubeconfig named on the line wins over the Pod's account.
        with pytest.raises(kubeconfig.ClusterError, match="Invalid kube-config file"):
            kubeconfig.load(None, None, str(tmp_path / "absent"))
    finally:
        client.Configuration.set_default(None)


def _token_kubeconfig(path: Path, token: str) -> Path:
    """A kubeconfig whose user is a bearer token, as a ServiceAccount's or an exec plugin's."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.mark.parametrize("name", ["GATEHOUSE_API_URL", "GATEHOUSE_SERVER"])
def test_requests_finds_the_service_api_and_token_the_env_file_and_kubeconfig_give(
    tmp_path: Path, name: str
) -> None:
    """What ``source .gatehouse/dev/env`` exports (GATEHOUSE_API_URL; the older GATEHOUSE_SERVER
    is still read) and the kubeconfig's token are enough: the command goes as far as calling
    the service API (nothing listens on port 1 here), with no "no server" nor "no token"."""
    kubeconfig_file = _token_kubeconfig(tmp_path / "kubeconfig", "kubeconfig-token-1")
    env = {"PATH": os.environ["PATH"], "KUBECONFIG": str(kubeconfig_file), "HOME": str(tmp_path)}
    done = gatehouse("requests", "vendor", env={**env, name: "http://127.0.0.1:1"})
    assert done.returncode == 2
    assert "cannot reach http://127.0.0.1:1/api/v1/namespaces/default/" in done.stderr
    assert "kubeconfig-token-1" not in done.stderr
    missing = gatehouse("requests", "vendor", env=env)
    assert "no server: give --server URL or set $GATEHOUSE_API_URL" in missing.stderr


def test_the_kubeconfigs_bearer_token_is_read_whatever_its_source(tmp_path: Path) -> None:
    try:
        kubeconfig.load(None, None, str(_token_kubeconfig(tmp_path / "k", "the-users-token")))
        assert kubeconfig.bearer_token() == "the-users-token"
    finally:
        client.Configuration.set_default(None)
