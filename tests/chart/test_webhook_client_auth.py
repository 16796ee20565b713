"""R4-10: who the admission webhook answers, as the chart ships it. On by default: the webhook
makes the CA and the API server's client certificate at its first start (the render holds no
key, so a GitOps sync or an upgrade never changes them), may read and create that one Secret,
and trusts nothing else; a CA of the installer's replaces it; off renders none of it.
tests/e2e/test_chart.py holds the rights and the Secret policy against a real API server, and
tests/operator/test_webhook.py what the webhook makes and whom it answers."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from gatehouse_operator.settings import WebhookSettings
from tests.chart.rendered import notes, of_kind, render

SECRET = "gh-gatehouse-webhook-client"


def _named(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [doc for doc in of_kind(documents, kind) if doc["metadata"]["name"] == name]
    return found


def _webhook_env(documents: list[dict[str, Any]]) -> dict[str, str]:
    pod = _named(documents, "Deployment", "gh-gatehouse-webhook")["spec"]["template"]["spec"]
    return {item["name"]: item["value"] for item in pod["containers"][0]["env"] if "value" in item}


def _readable(documents: list[dict[str, Any]]) -> list[str]:
    """The Secrets the webhook may get, by name."""
    role = _named(documents, "Role", "gh-gatehouse-webhook")
    return [
        name for rule in role["rules"] if "get" in rule["verbs"] for name in rule["resourceNames"]
    ]


def _creatable(documents: list[dict[str, Any]]) -> str:
    """What the Secret policy lets the webhook create, as its CEL says it."""
    policy = _named(documents, "ValidatingAdmissionPolicy", "gh-gatehouse-default-secrets")
    variables = {item["name"]: str(item["expression"]) for item in policy["spec"]["variables"]}
    return variables["webhooksOwn"]


def test_by_default_the_webhook_answers_only_the_certificate_it_makes_for_the_api_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    documents = render()
    env = _webhook_env(documents)
    assert env["GATEHOUSE_WEBHOOK_CLIENT_SECRET"] == f"default/{SECRET}"
    assert "GATEHOUSE_WEBHOOK_CLIENT_CA_FILE" not in env
    assert "GATEHOUSE_WEBHOOK_CLIENT_NAMES" not in env
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = WebhookSettings.from_env()
    assert (settings.client_secret, settings.client_ca_file) == (f"default/{SECRET}", None)
    assert _readable(documents) == ["gh-gatehouse-webhook-tls", SECRET]
    assert f'"{SECRET}"' in _creatable(documents)
    # Made at the first start, not rendered: nothing a re-render or an upgrade would change.
    assert render() == documents
    assert not [doc for doc in documents if doc["metadata"]["name"] == SECRET]
    assert "PRIVATE KEY" not in str(documents)


def test_a_ca_of_the_installers_or_off_renders_no_secret_of_the_webhooks() -> None:
    for values in (
        ("webhook.clientAuthentication.existingSecret=apiserver-ca",),
        ("webhook.clientAuthentication.enabled=false",),
    ):
        documents = render(*values)
        assert _readable(documents) == ["gh-gatehouse-webhook-tls"], values
        assert SECRET not in _creatable(documents), values
        assert "GATEHOUSE_WEBHOOK_CLIENT_SECRET" not in _webhook_env(documents), values
    assert "GATEHOUSE_WEBHOOK_CLIENT" not in str(
        _webhook_env(render("webhook.clientAuthentication.enabled=false"))
    )


def test_notes_say_how_to_point_the_api_server_at_the_certificate_or_the_risk_of_off() -> None:
    shipped = notes()
    assert f"get secret {SECRET} -o jsonpath='{{.data.tls\\.crt}}'" in shipped
    assert "- name: gh-gatehouse-webhook.gatehouse-system.svc:9443" in shipped
    assert 'failed to call webhook: Post "https://...": EOF' in shipped
    assert "webhook.clientAuthentication.enabled=false" in shipped
    assert "The accepted risk" in shipped
    off = notes("webhook.clientAuthentication.enabled=false")
    assert off.count("WARNING: webhook.clientAuthentication is off") == 1
    assert SECRET not in off


def test_a_ca_bundle_and_a_secret_at_once_are_refused() -> None:
    with pytest.raises(subprocess.CalledProcessError) as failed:
        render(
            "webhook.clientAuthentication.caBundle=x",
            "webhook.clientAuthentication.existingSecret=y",
        )
    assert "set caBundle or existingSecret, not both" in str(failed.value.stderr)
