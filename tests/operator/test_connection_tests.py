"""A connection test's result: bounded by construction, and read into what people see."""

from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import quote, quote_plus

import pytest
from pydantic import ValidationError

from gatehouse_contract.connection_tests import (
    MAX_ANSWER_BODY_BYTES,
    MAX_CONTENT_TYPE_CHARS,
    Answered,
    ConnectionTestAnswer,
    Failed,
    Problem,
    ProxyRefused,
    ReplicaTestOutcome,
    ReplicaTestRequest,
)
from gatehouse_contract.errors import RefusalReason
from gatehouse_contract.frames import ConnectionTestResult, Unreadable, read_replica_message
from gatehouse_dev.echoes import leaks
from gatehouse_operator.api.connection import ExternalConnectionSpec
from gatehouse_operator.api.meta import first_problem
from gatehouse_operator.connections import models, runs
from gatehouse_operator.connections.testing import (
    Finished,
    Waiting,
    ask,
    result,
    secret_texts,
)
from gatehouse_operator.table.channel import MAX_REPLICA_MESSAGE_BYTES, _Session
from gatehouse_operator.table.replicas import Replica


@pytest.mark.parametrize("byte", [b"\x01", b"\xff", b'"', "\u2028".encode()])
def test_the_largest_result_fits_the_channel_whatever_the_upstream_sent(byte: bytes) -> None:
    """Every byte the body may hold, at its worst JSON escaping (\\u0001 is six bytes for one),
    fills the prefix the replica keeps; the message is still far under the channel's limit."""
    body = (byte * MAX_ANSWER_BODY_BYTES)[:MAX_ANSWER_BODY_BYTES].decode(errors="replace")
    answer = ConnectionTestAnswer(
        status_code=200,
        content_type="\x01" * MAX_CONTENT_TYPE_CHARS,
        body=body,
        size_bytes=26_214_400,
        truncated=True,
    )
    message = ConnectionTestResult(id="f" * 100, result=Answered(answered=answer)).model_dump_json()
    assert len(message.encode()) < MAX_REPLICA_MESSAGE_BYTES / 2


class _Channel:
    def __init__(self, outcome: ReplicaTestOutcome) -> None:
        self.outcome = outcome

    async def run_test(self, request: ReplicaTestRequest, within: float) -> ReplicaTestOutcome:
        return self.outcome


class _Runtime:
    def __init__(self, outcome: ReplicaTestOutcome) -> None:
        self.channel = _Channel(outcome)


REQUEST = ReplicaTestRequest(connection="a/c", method="GET", path="/")


def _ask(outcome: ReplicaTestOutcome) -> ConnectionTestAnswer:
    runtime: object = _Runtime(outcome)
    return asyncio.run(ask(runtime, REQUEST, within=1))  # type: ignore[arg-type]


def test_a_busy_replica_is_a_reason_to_wait_and_an_unreadable_answer_a_failure() -> None:
    # Sent again only when the request was not sent: turned away, or dropped before it started.
    for code in ("tests_busy", "test_not_started"):
        with pytest.raises(Waiting) as waiting:
            _ask(ProxyRefused(refused=Problem(code=code, message="a has 20 tests")))
        assert waiting.value.reason == "ProxyBusy"
    # Sent, and no answer by the deadline: the test's result. An earlier replica's expiry does
    # not say whether it was sent: final too.
    for code, reason in (("test_timed_out", "TestTimedOut"), ("test_expired", "TestExpired")):
        with pytest.raises(Finished) as finished:
            _ask(ProxyRefused(refused=Problem(code=code, message="stopped")))
        assert finished.value.verdict.reason == reason
        assert "not sent again" in finished.value.verdict.message or code == "test_timed_out"
    # An answer that breaks the contract (a body past the bound) ends its test, with why.
    outcome = _unreadable_outcome(
        {"answered": {"statusCode": 200, "body": "x" * (MAX_ANSWER_BODY_BYTES + 1)}}
    )
    assert outcome == Failed(
        error=Problem(code="unreadable", message="the proxy's answer could not be read")
    )
    with pytest.raises(Finished) as finished:
        _ask(outcome)
    assert finished.value.verdict.reason == "ProxyError"


def test_a_refusal_fails_the_test_with_its_typed_reason_and_an_unknown_one_still_named() -> None:
    refused = read_replica_message(
        json.dumps(
            {
                "type": "probeResult",
                "id": "t1",
                "result": {"refused": {"code": "path_not_allowed", "message": "not /admin"}},
            }
        )
    )
    assert isinstance(refused, ConnectionTestResult)
    with pytest.raises(Finished) as finished:
        _ask(refused.result)
    assert finished.value.verdict.reason is RefusalReason.PATH_NOT_ALLOWED
    assert finished.value.verdict.message == "not /admin"
    # A newer replica's code, during a rolling upgrade: final, and named as a known one would be.
    with pytest.raises(Finished) as finished:
        _ask(ProxyRefused(refused=Problem(code="quota_exhausted", message="over quota")))
    assert (finished.value.verdict.reason, finished.value.verdict.message) == (
        "QuotaExhausted",
        "over quota",
    )


def _unreadable_outcome(result: dict[str, object]) -> ReplicaTestOutcome:
    """What a replica's session makes of a result that is not the contract's."""

    async def scenario() -> ReplicaTestOutcome:
        session = _Session.__new__(_Session)
        session.replica = Replica("proxy-a")
        future: asyncio.Future[ReplicaTestOutcome] = asyncio.get_running_loop().create_future()
        session._tests = {"t1": future}
        message = json.dumps({"type": "probeResult", "id": "t1", "result": result})
        try:
            read_replica_message(message)
        except Unreadable as unreadable:
            session._unreadable(unreadable)
        return await future

    return asyncio.run(scenario())


def test_a_cut_answer_is_shown_as_cut() -> None:
    whole = json.dumps({"items": [{"id": n, "access_token": "t"} for n in range(5_000)]})
    answer = ConnectionTestAnswer(
        status_code=200,
        content_type="application/json",
        body=whole[:MAX_ANSWER_BODY_BYTES],
        size_bytes=len(whole),
        truncated=True,
    )
    shown = asyncio.run(result(answer, "GET", "/items", []))
    assert shown.passed
    assert shown.response["truncated"] is True
    assert shown.response["sizeBytes"] == len(whole)
    assert shown.response["body"].startswith('{"items": [{"id": 0, "access_token": "[redacted]"}')
    assert shown.sample_body["truncated"] is True


@pytest.mark.parametrize("model", [models.DraftTestRequest, models.ConnectionTestRequest])
def test_a_get_with_a_body_is_refused_as_connection_test_admission_refuses_it(
    model: type[models.DraftTestRequest] | type[models.ConnectionTestRequest],
) -> None:
    body = {"method": "GET", "path": "/v1/items", "body": {"q": 1}}
    document = (
        {"name": "vendor", "spec": {}, "request": body}
        if model is models.DraftTestRequest
        else body
    )
    with pytest.raises(ValidationError) as refused:
        model.model_validate(document)
    where, rule = first_problem(refused.value)
    assert where.endswith("body")
    assert rule == "Value error, a GET test cannot have a body"
    posted = {**body, "method": "POST"}
    model.model_validate(
        {**document, "request": posted} if model is models.DraftTestRequest else posted
    )


def test_what_the_tester_typed_is_redacted_in_the_result() -> None:
    answer = ConnectionTestAnswer(
        status_code=200, content_type="application/json", body="{}", size_bytes=2, truncated=False
    )
    path = "/v1/items?token=abc123&page=2&key=sk-live-9"
    shown = asyncio.run(result(answer, "GET", path, ["sk-live-9"]))
    message = shown.verdict.message
    assert message == "GET /v1/items?token=[redacted]&page=2&key=[redacted] answered 200"


def test_a_redirect_and_an_answer_over_the_limit_are_shown_and_fail_as_an_apps_fetch_would() -> (
    None
):
    redirect = ConnectionTestAnswer(
        status_code=302,
        content_type="text/html",
        body="<a href=/x?api_key=k-1>moved</a>",
        size_bytes=34,
        location="https://elsewhere.example/login?api_key=k-1&next=/",
    )
    shown = asyncio.run(result(redirect, "GET", "/v1", ["k-1"]))
    assert (shown.passed, shown.verdict.reason) == (False, "UpstreamRedirect")
    assert shown.response["statusCode"] == 302
    assert shown.response["location"] == "https://elsewhere.example/login?api_key=[redacted]&next=/"
    assert "a redirect to https://elsewhere.example/login?api_key=[redacted]" in (
        shown.verdict.message
    )
    assert shown.sample_body is None
    large = ConnectionTestAnswer(
        status_code=200,
        content_type="application/json",
        body='{"items": [1, 2, 3',
        size_bytes=30_000_000,
        truncated=True,
        over_limit=True,
    )
    shown = asyncio.run(result(large, "GET", "/v1", []))
    assert (shown.passed, shown.verdict.reason) == (False, "ResponseTooLarge")
    assert shown.response["truncated"] is True
    assert shown.response["sizeBytes"] == 30_000_000
    assert "location" not in shown.response


def test_a_redirect_or_an_answer_over_the_limit_is_sent_only_when_there_is_one() -> None:
    plain = ConnectionTestAnswer(status_code=200, content_type="", body="", size_bytes=0)
    # An operator of the release before reads every other answer as it did.
    assert set(json.loads(plain.model_dump_json())) == {
        "statusCode",
        "contentType",
        "body",
        "sizeBytes",
        "truncated",
    }


def test_a_new_test_keeps_the_typed_path_scrubbed() -> None:
    body = runs.new_test("vendor", {"method": "GET", "path": "/v1?api_key=typed-k&page=2"}).body()
    assert body["spec"]["path"] == "/v1?api_key=[redacted]&page=2"
    assert "typed-k" not in json.dumps(body)


CLIENT_SECRET = "Sx9+kQ/7vZ=m2Lp+Wr4/Tn8="


@pytest.mark.parametrize(
    ("auth", "echo"),
    [
        (
            {"type": "apiKey", "apiKey": {"name": "key", "in": "query"}},
            # The key as sent (percent-encoded), in a link that embeds the request's URL.
            "/login?return_to=%2Fv1%3Fkey%3D" + quote(quote(CLIENT_SECRET, safe=""), safe=""),
        ),
        (
            {
                "type": "oauth2ClientCredentials",
                "oauth2ClientCredentials": {
                    "tokenURL": "https://auth.example.com/token",
                    "clientId": "gh-client",
                },
            },
            # HTTP Basic's base64 of the form-encoded pair (RFC 6749 2.3.1).
            "Basic " + base64.b64encode(f"gh-client:{quote_plus(CLIENT_SECRET)}".encode()).decode(),
        ),
    ],
    ids=["query key", "client secret"],
)
def test_a_result_is_scrubbed_of_every_form_the_proxy_sends_the_secret_in(
    auth: dict[str, object], echo: str
) -> None:
    spec = ExternalConnectionSpec.model_validate(
        {
            "displayName": "Example",
            "baseURL": "https://api.example.com",
            "auth": {**auth, "secretRef": {"name": "s", "key": "k"}},
            "linkPolicy": "AdminsOnly",
        }
    )
    answer = ConnectionTestAnswer(
        status_code=400,
        content_type="application/json",
        body=json.dumps({"detail": echo}),
        size_bytes=100,
        truncated=False,
    )
    secrets = secret_texts(spec, CLIENT_SECRET.encode())
    shown = asyncio.run(result(answer, "GET", "/v1", secrets))
    assert "[redacted]" in shown.response["body"]
    assert not leaks(json.dumps(shown.response).encode(), CLIENT_SECRET), shown.response
