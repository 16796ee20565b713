"""The proxy's installation settings: defaults, and a clear refusal naming a bad setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gatehouse_proxy.observation.tracing import TraceSettings
from gatehouse_proxy.settings import ProxySettings

REQUIRED = {"GATEHOUSE_KEYRING_FILE": "/k/keyring.json", "GATEHOUSE_OPERATOR_URL": "https://op/"}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def test_defaults_are_the_strict_ones(env: pytest.MonkeyPatch) -> None:
    settings = ProxySettings.from_env()
    assert settings.operator_url == "https://op"
    assert settings.allow_http is False
    assert settings.allowed_private_networks == ()
    assert settings.request_read_timeout_seconds == 15
    assert settings.max_token_chars == 8192
    assert (settings.shares.namespace_bytes, settings.shares.namespace_keys) == (1048576, 2048)
    assert settings.shares.reserve == 0.25
    # An app's trace context decides neither sampling nor what is exported.
    assert settings.traces == TraceSettings(follow_app_sampling=False, keep_app_tracestate=False)


def test_the_apps_trace_context_is_trusted_only_when_the_installation_says(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv("GATEHOUSE_TRACES_FOLLOW_APP_SAMPLING", "true")
    env.setenv("GATEHOUSE_TRACES_KEEP_APP_TRACESTATE", "on")
    traces = ProxySettings.from_env().traces
    assert traces == TraceSettings(follow_app_sampling=True, keep_app_tracestate=True)


def test_missing_required_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in REQUIRED:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="GATEHOUSE_KEYRING_FILE, GATEHOUSE_OPERATOR_URL"):
        ProxySettings.from_env()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GATEHOUSE_REQUEST_READ_TIMEOUT_SECONDS", "0"),
        ("GATEHOUSE_REQUEST_READ_TIMEOUT_SECONDS", "soon"),
        ("GATEHOUSE_REQUEST_READ_TIMEOUT_SECONDS", "7200"),
        ("GATEHOUSE_ALLOW_HTTP_UPSTREAMS", "maybe"),
        ("GATEHOUSE_TRACES_FOLLOW_APP_SAMPLING", "sometimes"),
        ("GATEHOUSE_TRACES_KEEP_APP_TRACESTATE", "2"),
        ("GATEHOUSE_OPERATOR_URL", "http://op"),
        ("GATEHOUSE_MAX_TOKEN_CHARS", "16385"),
        ("GATEHOUSE_MAX_TOKEN_CHARS", "100"),
        ("GATEHOUSE_STORE_NAMESPACE_BYTES", "1024"),
        ("GATEHOUSE_STORE_NAMESPACE_KEYS", "a lot"),
        ("GATEHOUSE_STORE_RESERVE", "0.95"),
    ],
)
def test_bad_values_are_refused_naming_the_setting(
    env: pytest.MonkeyPatch, name: str, value: str
) -> None:
    env.setenv(name, value)
    with pytest.raises(ValueError, match=f"^{name} must be .*{value!r}"):
        ProxySettings.from_env()


def test_the_proxy_will_not_start_without_a_readable_keyring(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("[]")
    for keyring, message in (("absent.json", "cannot read the keyring file"), ("bad.json", "")):
        done = subprocess.run(
            [sys.executable, "-m", "gatehouse_proxy", "--port", "0"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={
                "PATH": "/usr/bin:/bin",
                "GATEHOUSE_KEYRING_FILE": str(tmp_path / keyring),
                "GATEHOUSE_OPERATOR_URL": "https://127.0.0.1:1",
            },
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"gatehouse-proxy: {message or 'the keyring must be'}")
        assert done.stderr.count("\n") == 1
