"""The operator checks its settings and keyring before kopf starts: one line naming the problem,
exit 2 (a crash loop that says why), never a start-up handler retried with a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gatehouse_contract.keyring import Keyring
from gatehouse_dev.pki import CertificateAuthority


def start(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gatehouse_operator", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PATH": "/usr/bin:/bin", **env},
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "set exactly one of GATEHOUSE_KEYRING_FILE and GATEHOUSE_KEYRING_SECRET"),
        (
            {"GATEHOUSE_KEYRING_FILE": "{tmp}/good.json", "GATEHOUSE_KEYRING_SECRET": "a/b"},
            "set exactly one of GATEHOUSE_KEYRING_FILE and GATEHOUSE_KEYRING_SECRET",
        ),
        (
            {"GATEHOUSE_KEYRING_SECRET": "gatehouse-keyring"},
            "GATEHOUSE_KEYRING_SECRET must be namespace/name, not 'gatehouse-keyring'",
        ),
        ({"GATEHOUSE_KEYRING_FILE": "{tmp}/absent.json"}, "cannot read the keyring file"),
        ({"GATEHOUSE_KEYRING_FILE": "{tmp}/bad.json"}, "the keyring must be JSON"),
        (
            {"GATEHOUSE_KEYRING_FILE": "{tmp}/good.json", "GATEHOUSE_API_PORT": "http"},
            "GATEHOUSE_API_PORT must be a port number (1 to 65535), not 'http'",
        ),
        (
            {"GATEHOUSE_KEYRING_FILE": "{tmp}/good.json", "GATEHOUSE_ALLOW_HTTP_UPSTREAMS": "si"},
            "GATEHOUSE_ALLOW_HTTP_UPSTREAMS must be true or false",
        ),
    ],
)
def test_bad_settings_stop_the_operator_in_one_line(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "good.json").write_text(Keyring.generate().dump())
    env = {name: value.format(tmp=tmp_path) for name, value in settings.items()}
    done = start(env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"gatehouse-operator: {message}"), done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"GATEHOUSE_WEBHOOK_CLIENT_NAMES": "kube-apiserver"},
            "GATEHOUSE_WEBHOOK_CLIENT_NAMES needs GATEHOUSE_WEBHOOK_CLIENT_CA_FILE",
        ),
        (
            {
                "GATEHOUSE_WEBHOOK_CLIENT_CA_FILE": "{tmp}/ca.pem",
                "GATEHOUSE_WEBHOOK_CLIENT_SECRET": "gatehouse/gatehouse-webhook-client",
            },
            "GATEHOUSE_WEBHOOK_CLIENT_CA_FILE and GATEHOUSE_WEBHOOK_CLIENT_SECRET: give one source",
        ),
        (
            {"GATEHOUSE_WEBHOOK_CLIENT_SECRET": "gatehouse-webhook-client"},
            "GATEHOUSE_WEBHOOK_CLIENT_SECRET must be namespace/name",
        ),
        (
            {"GATEHOUSE_WEBHOOK_CLIENT_CA_FILE": "{tmp}/absent.pem"},
            "GATEHOUSE_WEBHOOK_CLIENT_CA_FILE: cannot read CA certificates from {tmp}/absent.pem",
        ),
        (
            {"GATEHOUSE_WEBHOOK_CLIENT_CA_FILE": "{tmp}/bad.pem"},
            "GATEHOUSE_WEBHOOK_CLIENT_CA_FILE: cannot read CA certificates from {tmp}/bad.pem",
        ),
    ],
)
def test_a_bad_client_authentication_setting_stops_the_webhook_in_one_line(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    """A webhook that cannot authenticate its callers as asked does not start answering anyone."""
    (tmp_path / "bad.pem").write_text("not a certificate")
    (tmp_path / "ca").mkdir()
    (tmp_path / "ca.pem").write_bytes(CertificateAuthority(tmp_path / "ca").cert_path.read_bytes())
    env = {name: value.format(tmp=tmp_path) for name, value in settings.items()}
    done = start(env, "--role=webhook")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"gatehouse-operator: {message.format(tmp=tmp_path)}"), (
        done.stderr
    )
    assert done.stderr.count("\n") == 1
