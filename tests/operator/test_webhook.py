"""The webhook's self-signed certificate (names, its own CA, a life longer than the process), and
the chart's webhook list generated from the registered handlers."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import kopf
import pytest
from cryptography import x509
from kubernetes.aio import client

from gatehouse_operator.controllers import admission
from gatehouse_operator.controllers import webhook_configuration as webhooks
from gatehouse_operator.webhook import WebhookServer

ROOT = Path(__file__).resolve().parents[2]


def test_the_charts_webhooks_match_the_handlers() -> None:
    assert webhooks.output_file(ROOT).read_text() == webhooks.render(), (
        "the chart's webhooks differ from the handlers: run `make crds`"
    )


def test_every_validating_handler_has_a_webhook_that_fails_closed() -> None:
    by_name = {webhook["name"]: webhook for webhook in webhooks.chart_webhooks()}
    assert set(by_name) == {
        "connection-test.gatehouse.dev",
        "link-policy.gatehouse.dev",
        "project-config.gatehouse.dev",
        "secret-use.gatehouse.dev",
    }
    for webhook in by_name.values():
        assert webhook["failurePolicy"] == "Fail"
        assert webhook["rules"], webhook["name"]


def test_the_certificate_names_the_service_and_outlives_the_operator() -> None:
    pem, key = WebhookServer.build_certificate(
        ["gatehouse-operator.gatehouse-system.svc", "127.0.0.1", "0.0.0.0"]  # noqa: S104
    )
    certificate = x509.load_pem_x509_certificate(pem)
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["gatehouse-operator.gatehouse-system.svc"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    life = certificate.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert life > datetime.timedelta(days=9 * 365)
    assert key.startswith(b"-----BEGIN PRIVATE KEY-----")


def test_a_stored_config_that_breaks_a_rule_stays_editable_until_its_spec_changes() -> None:
    stored = {"spotlight": {}, "defaults": {"case_sensitve": False}}
    metadata = {"name": "project", "namespace": "shop", "labels": {"team": "a"}}
    memo = SimpleNamespace(kube=None)

    def review(spec: dict[str, Any], old_spec: dict[str, Any] | None) -> None:
        old = None if old_spec is None else {"metadata": metadata, "spec": old_spec}
        body = {"metadata": {**metadata, "labels": {"team": "b"}}, "spec": spec}
        check: Any = admission.check_project_config  # the handler, as kopf registered it
        asyncio.run(check(body=body, memo=memo, old=old))

    review(stored, stored)  # a label changed, the spec did not: kopf's annotations, a relabel
    changed: list[dict[str, Any] | None] = [None, {"spotlight": {}}]
    for old_spec in changed:
        with pytest.raises(kopf.AdmissionError, match="case_sensitve: unknown key"):
            review(stored, old_spec)


def test_a_check_the_api_server_cannot_answer_refuses_with_the_cause_alone() -> None:
    """A missing right (403) or an unreachable API server: the refusal says which, and carries
    none of the API server's response (headers, body)."""

    class Unanswered:
        def __init__(self, error: Exception) -> None:
            self.error = error

        async def list_custom(self, *_: Any) -> list[dict[str, Any]]:
            raise self.error

    refused = client.ApiException(status=403, reason="Forbidden")
    refused.body = '{"message": "secret-ish detail"}'
    refused.headers = {"Audit-Id": "abc"}
    body = {"metadata": {"name": "project", "namespace": "shop"}, "spec": {"spotlight": {}}}
    for error, words in (
        (refused, "HTTP 403 Forbidden: the webhook's ServiceAccount lacks a right"),
        (aiohttp.ClientConnectionError("refused"), "cannot reach the API server"),
    ):
        memo = SimpleNamespace(kube=Unanswered(error))
        check: Any = admission.check_project_config
        with pytest.raises(kopf.AdmissionError) as caught:
            asyncio.run(check(body=body, memo=memo, old=None))
        assert words in str(caught.value)
        assert caught.value.code == 503
        assert "secret-ish" not in str(caught.value)
        assert "Audit-Id" not in str(caught.value)
