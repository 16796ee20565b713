"""The webhook's self-signed certificate (names, its own CA, a life longer than the process), who
its server answers (the client certificates it demands when given a client CA), and the chart's
webhook list generated from the registered handlers."""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import logging
import ssl
from collections.abc import AsyncGenerator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import aiohttp
import httpx
import kopf
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from kubernetes.aio import client

from gatehouse_dev.pki import CertificateAuthority, KeyPair
from gatehouse_dev.processes import free_port
from gatehouse_operator.access import webhook_clients
from gatehouse_operator.access.webhook_server import WebhookServer
from gatehouse_operator.connections import runs
from gatehouse_operator.controllers import admission
from gatehouse_operator.controllers import webhook_configuration as webhooks
from gatehouse_operator.kube.errors import translated
from tests.operator.kube_fakes import kube_of

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
        "sign-in-request.gatehouse.dev",
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
        (translated(refused), "HTTP 403 Forbidden: the webhook's ServiceAccount lacks a right"),
        (aiohttp.ClientConnectionError("refused"), "cannot reach the API server"),
    ):
        memo = SimpleNamespace(kube=kube_of(Unanswered(error)))
        check: Any = admission.check_project_config
        with pytest.raises(kopf.AdmissionError) as caught:
            asyncio.run(check(body=body, memo=memo, old=None))
        assert words in str(caught.value)
        assert caught.value.code == 503
        assert "secret-ish" not in str(caught.value)
        assert "Audit-Id" not in str(caught.value)


async def _no_ca_bundle(_: str) -> None:
    pass


async def _allow(
    request: Any,
    *,
    webhook: str | None = None,
    headers: kopf.Headers | None = None,
    sslpeer: kopf.SSLPeer | None = None,
) -> Any:
    """Stands in for kopf's review handling (the real one answers the API server end to end,
    tests/e2e/test_webhook_clients.py): what matters here is whether it is reached."""
    return {"response": {"uid": request["request"]["uid"], "allowed": True}}


REVIEW = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}


def _calls(server: WebhookServer, clients: dict[str, KeyPair | None]) -> dict[str, int | str]:
    """Each client's POST of a review to ``server``: the HTTP status, or the transport error's
    type when the connection failed (the TLS handshake refused)."""

    async def run() -> dict[str, int | str]:
        served = cast(AsyncGenerator[kopf.WebhookClientConfig], server(_allow))
        config = await anext(served)
        trusted = base64.b64decode(config["caBundle"] or "").decode()
        answers: dict[str, int | str] = {}
        try:
            for name, certificate in clients.items():
                tls = ssl.create_default_context(cadata=trusted)
                if certificate is not None:
                    tls.load_cert_chain(certificate.cert_path, certificate.key_path)
                async with httpx.AsyncClient(verify=tls, timeout=10) as http:
                    try:
                        reply = await http.post(f"{config['url']}/link-policy", json=REVIEW)
                        answers[name] = reply.status_code
                    except httpx.TransportError as error:
                        answers[name] = type(error).__name__
        finally:
            await served.aclose()
        return answers

    return asyncio.run(run())


def test_with_a_client_ca_only_the_named_clients_it_signed_are_answered(tmp_path: Path) -> None:
    (tmp_path / "callers").mkdir()
    (tmp_path / "others").mkdir()
    callers = CertificateAuthority(tmp_path / "callers", "webhook-callers")
    others = CertificateAuthority(tmp_path / "others", "someone-else")
    server = WebhookServer(
        addr="127.0.0.1",
        port=free_port(),
        on_ca_bundle=_no_ca_bundle,
        client_ca_file=callers.cert_path,
        client_names=["kube-apiserver"],
    )
    answers = _calls(
        server,
        {
            "api server": callers.issue("apiserver", "kube-apiserver", client=True),
            "no certificate": None,
            "another CA": others.issue("stranger", "kube-apiserver", client=True),
            "another name": callers.issue("pod", "some-pod", client=True),
        },
    )
    assert answers.pop("api server") == 200
    assert answers.pop("another name") == 403
    # Refused in the handshake: no HTTP answer at all.
    assert all(isinstance(answer, str) for answer in answers.values()), answers


def test_without_a_client_ca_anyone_is_answered(tmp_path: Path) -> None:
    """The chart's off switch, for clusters whose API server presents no certificate (managed
    control planes): docs/security/who-may-do-what.md, "Who may call the admission webhook", says
    what the port then tells whoever reaches it."""
    server = WebhookServer(addr="127.0.0.1", port=free_port(), on_ca_bundle=_no_ca_bundle)
    assert _calls(server, {"no certificate": None}) == {"no certificate": 200}


class _Seen:
    """A namespace with one connection, ``vendor``, that every requester may test."""

    async def get_custom(self, *_: Any) -> dict[str, Any]:
        return {"metadata": {"name": "vendor"}, "spec": {"allowedMethods": ["GET"]}}

    async def allowed(self, *_: Any, **__: Any) -> bool:
        return True


def _review_test(path: str) -> None:
    seen = _Seen()
    memo = SimpleNamespace(kube=kube_of(seen), access=seen)
    body = {
        "metadata": {"name": "typed", "namespace": "shop"},
        "spec": {"connection": "vendor", "method": "GET", "path": path},
    }
    check: Any = admission.check_connection_test  # the handler, as kopf registered it
    asyncio.run(check(body=body, userinfo={"username": "tester"}, memo=memo))


@pytest.mark.parametrize(
    ("path", "keys"),
    [
        ("/v1/items?api_key=typed-by-me&page=2", "api_key"),
        (
            "/v1/items?page=2&Access-Token=typed-by-me&clientSecret=typed-too",
            "Access-Token, clientSecret",
        ),
    ],
)
def test_a_test_whose_path_gives_a_credential_key_a_value_is_refused_naming_it(
    path: str, keys: str
) -> None:
    """Written with kubectl, the path is not scrubbed by the page or the CLI: the test is
    refused, so the value never reaches the stored spec, and the refusal does not repeat it."""
    with pytest.raises(kopf.AdmissionError) as refused:
        _review_test(path)
    message = str(refused.value)
    assert message.startswith(f"spec.path: the query gives a value to {keys}; a ConnectionTest")
    assert "`gatehouse test`" in message
    assert "typed-by-me" not in message
    assert "typed-too" not in message
    assert refused.value.code == 422


def test_a_path_as_the_page_and_the_cli_keep_it_is_admitted() -> None:
    for path in (
        "/v1/items?page=2&tokens_used=3",
        runs.new_test("vendor", {"path": "/v1/items?api_key=typed-by-me&page=2"}).body()["spec"][
            "path"
        ],
    ):
        _review_test(path)


class _Secrets:
    """The API server's Secrets, as the webhook's start reads and makes them."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, bytes]] = {}
        self.types: dict[tuple[str, str], str] = {}

    async def secret_data(self, namespace: str, name: str) -> dict[str, bytes] | None:
        return self.stored.get((namespace, name))

    async def create_secret_if_absent(
        self,
        namespace: str,
        name: str,
        string_data: dict[str, str],
        *,
        type_: str = "Opaque",
        owner: object = None,
    ) -> bool:
        assert owner is None  # kept by helm uninstall: the API server's copy outlives a release
        if (namespace, name) in self.stored:
            return False
        self.stored[namespace, name] = {key: value.encode() for key, value in string_data.items()}
        self.types[namespace, name] = type_
        return True


def test_the_webhook_makes_the_api_servers_client_certificate_once_and_signs_no_other() -> None:
    """The chart's default: the first replica makes the CA and the one certificate it signs,
    for the API server; every later start trusts the same CA. The CA's key is kept nowhere."""
    secrets = _Secrets()
    kube = kube_of(secrets)
    ref = "gatehouse-system/gatehouse-webhook-client"
    first = asyncio.run(webhook_clients.client_certificate_authority(kube, ref))
    again = asyncio.run(webhook_clients.client_certificate_authority(kube, ref))
    assert first == again
    stored = secrets.stored["gatehouse-system", "gatehouse-webhook-client"]
    assert set(stored) == {"ca.crt", "tls.crt", "tls.key"}
    assert secrets.types["gatehouse-system", "gatehouse-webhook-client"] == "kubernetes.io/tls"
    assert stored["ca.crt"] == first
    assert stored["tls.key"].count(b"PRIVATE KEY-----") == 2  # the client's key alone
    ca = x509.load_pem_x509_certificate(first)
    certificate = x509.load_pem_x509_certificate(stored["tls.crt"])
    certificate.verify_directly_issued_by(ca)
    assert certificate.subject.rfc4514_string() == "CN=kube-apiserver"
    usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    life = certificate.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert life > datetime.timedelta(days=9 * 365)

    # A Secret of that name without the three is not overwritten: the webhook says so.
    secrets.stored["gatehouse-system", "other"] = {"ca.crt": first}
    with pytest.raises(ValueError, match=r"holds no ca\.crt, tls\.crt and tls\.key: delete it"):
        asyncio.run(webhook_clients.client_certificate_authority(kube, "gatehouse-system/other"))


def test_a_caller_refused_in_the_handshake_is_said_in_the_log_once_a_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """R4-10: with client authentication on by default, an API server not yet configured has
    every checked write refused ("failed calling webhook ...: EOF", the connection closed in the
    handshake); the webhook says what the caller presented and what to do, not once per
    connection whoever floods its port."""
    made = webhook_clients.build_client_certificate()
    (tmp_path / "ca.crt").write_bytes(made.ca)
    (tmp_path / "tls.crt").write_bytes(made.certificate)
    (tmp_path / "tls.key").write_bytes(made.key)
    (tmp_path / "others").mkdir()
    others = CertificateAuthority(tmp_path / "others", "someone-else")
    server = WebhookServer(
        addr="127.0.0.1",
        port=free_port(),
        on_ca_bundle=_no_ca_bundle,
        client_ca_file=tmp_path / "ca.crt",
        client_ca_source="from Secret gatehouse-system/gatehouse-webhook-client",
    )
    with caplog.at_level(logging.WARNING, logger="gatehouse.webhook"):
        answers = _calls(
            server,
            {
                "api server": KeyPair(tmp_path / "tls.crt", tmp_path / "tls.key"),
                "no certificate": None,
                "again none": None,
                "another CA": others.issue("stranger", "kube-apiserver", client=True),
            },
        )
    assert answers.pop("api server") == 200
    assert all(isinstance(answer, str) for answer in answers.values()), answers
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 2, said  # the second "none" is counted, not said
    none, other = said
    assert none.startswith("refused a caller in the TLS handshake: it presented no client cert")
    assert "from Secret gatehouse-system/gatehouse-webhook-client" in none
    assert "'failed calling webhook ...: EOF'" in none
    assert "point its AdmissionConfiguration at that certificate" in none
    assert "turn client authentication off" in none
    assert "a client certificate the webhook's CA did not sign" in other
