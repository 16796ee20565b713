"""The SigV4 verifier against AWS's own vectors: each signed request verifies as AWS would, and
one byte changed anywhere the signature covers is refused with the error AWS answers."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from datetime import datetime, timedelta

import pytest

from gatehouse_dev.sigv4_verifier import (
    UNSIGNED_PAYLOAD,
    Account,
    Received,
    Verdict,
    canonical_query,
    canonical_uri,
    signing_key,
    verify,
)
from tests.dev.sigv4_vectors import CASES, Vector, vector

WITH_QUERY = [case for case in CASES if "?" in vector(case).received.target]


def _header(received: Received, wanted: str) -> str:
    return next(value for name, value in received.headers if name.lower() == wanted)


def _with_header(received: Received, wanted: str, value: str | None) -> Received:
    """``received`` with the field ``wanted`` set to ``value`` (None: without it), in place."""
    headers = [
        (name, old if name.lower() != wanted else value)
        for name, old in received.headers
        if name.lower() != wanted or value is not None
    ]
    if value is not None and all(name.lower() != wanted for name, _ in received.headers):
        headers.append((wanted, value))
    return dataclasses.replace(received, headers=headers)  # type: ignore[arg-type]


def _changed(text: str) -> str:
    """``text`` with its last character replaced by another."""
    return text[:-1] + ("y" if text[-1] == "x" else "x")


def _verdict(given: Vector, received: Received | None = None, **account: object) -> Verdict:
    changed = dataclasses.replace(given.account, **account)  # type: ignore[arg-type]
    return verify(received or given.received, changed, given.now)


def _signed_as_expected(received: Received, account: Account, now: datetime) -> Received:
    """``received`` signed over the string the verifier expects, as a signer that agrees with
    it would sign (the vectors prove that string; this proves what is done with it)."""
    string_to_sign = verify(received, account, now).string_to_sign
    date, region, service, _ = string_to_sign.split("\n")[2].split("/")
    key = signing_key(account.secret_access_key, date, region, service)
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = _header(received, "authorization").rpartition("Signature=")[0]
    return _with_header(received, "authorization", f"{authorization}Signature={signature}")


@pytest.mark.parametrize("case", CASES)
def test_each_of_awss_signed_requests_verifies(case: str) -> None:
    given = vector(case)
    verdict = verify(given.received, given.account, given.now)
    assert (verdict.status, verdict.code, verdict.message) == (200, "", "verified")


@pytest.mark.parametrize("case", CASES)
def test_a_byte_added_to_the_path_is_refused(case: str) -> None:
    given = vector(case)
    path, mark, query = given.received.target.partition("?")
    received = dataclasses.replace(given.received, target=f"{path}x{mark}{query}")
    verdict = _verdict(given, received)
    assert (verdict.status, verdict.code) == (403, "SignatureDoesNotMatch")
    # As AWS answers it: what the service signed, for the client to compare with its own.
    assert verdict.canonical_request.split("\n")[1].endswith("x")


@pytest.mark.parametrize("case", WITH_QUERY)
def test_a_changed_query_parameter_is_refused(case: str) -> None:
    given = vector(case)
    received = dataclasses.replace(given.received, target=_changed(given.received.target))
    assert _verdict(given, received).code == "SignatureDoesNotMatch"


@pytest.mark.parametrize("case", CASES)
def test_a_changed_signed_header_is_refused(case: str) -> None:
    given = vector(case)
    host = _header(given.received, "host")
    received = _with_header(given.received, "host", _changed(host))
    assert _verdict(given, received).code == "SignatureDoesNotMatch"


@pytest.mark.parametrize("case", CASES)
def test_a_changed_body_is_refused(case: str) -> None:
    """A byte more in the body: where the request declares its body's hash, the hash does not
    match it (S3's 400); elsewhere, the signature does not."""
    given = vector(case)
    received = dataclasses.replace(given.received, body=given.received.body + b"x")
    verdict = _verdict(given, received)
    declared = any(name.lower() == "x-amz-content-sha256" for name, _ in received.headers)
    if declared:
        assert (verdict.status, verdict.code) == (400, "XAmzContentSHA256Mismatch")
    else:
        assert (verdict.status, verdict.code) == (403, "SignatureDoesNotMatch")


@pytest.mark.parametrize("case", CASES)
def test_a_changed_date_is_refused(case: str) -> None:
    given = vector(case)
    received = _with_header(given.received, "x-amz-date", "20150830T123601Z")
    assert _verdict(given, received).code == "SignatureDoesNotMatch"
    # A day later, within the five minutes: the credential's scope names another day.
    later = _with_header(given.received, "x-amz-date", "20150831T123600Z")
    verdict = verify(later, given.account, given.now + timedelta(days=1))
    assert (verdict.code, verdict.message[:30]) == (
        "SignatureDoesNotMatch",
        "Date in Credential scope does ",
    )


def test_a_request_signed_more_than_five_minutes_away_has_expired() -> None:
    given = vector("get-vanilla")
    for seconds in (-299, 299):
        assert verify(
            given.received, given.account, given.now + timedelta(seconds=seconds)
        ).verified
    late = verify(given.received, given.account, given.now + timedelta(seconds=301))
    early = verify(given.received, given.account, given.now - timedelta(seconds=301))
    assert (late.status, late.code) == (early.status, early.code) == (403, "RequestExpired")
    assert late.message == (
        "Signature expired: 20150830T123600Z is now earlier than 20150830T123601Z."
    )
    assert early.message.startswith("Signature not yet current: 20150830T123600Z is still later")


def test_another_secret_or_scope_is_refused_without_revealing_the_secret() -> None:
    given = vector("get-vanilla")
    wrong_secret = _verdict(given, secret_access_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYOTHERKEY")
    assert (wrong_secret.status, wrong_secret.code) == (403, "SignatureDoesNotMatch")
    assert wrong_secret.canonical_request.startswith("GET\n/\n\nhost:example.amazonaws.com\n")
    assert wrong_secret.string_to_sign.startswith("AWS4-HMAC-SHA256\n20150830T123600Z\n")
    assert "wJalr" not in repr(wrong_secret)
    assert "wJalr" not in repr(given.account)
    region = _verdict(given, region="eu-west-1")
    assert (region.code, region.message) == (
        "SignatureDoesNotMatch",
        "Credential should be scoped to a valid region, not 'us-east-1'.",
    )
    service = _verdict(given, service="execute-api")
    assert service.message == "Credential should be scoped to correct service: 'execute-api'."


def test_an_unknown_access_key_or_session_token_is_refused() -> None:
    given = vector("get-vanilla-with-session-token")
    assert _verdict(given, access_key_id="AKIDOTHER").code == "InvalidClientTokenId"
    token = _header(given.received, "x-amz-security-token")
    for sent in (_changed(token), None):
        received = _with_header(given.received, "x-amz-security-token", sent)
        verdict = _verdict(given, received)
        assert (verdict.status, verdict.code) == (403, "InvalidClientTokenId")
        assert verdict.message == "The security token included in the request is invalid."
    # A token the service did not issue with these keys, though the keys need none.
    assert _verdict(given, session_token="").code == "InvalidClientTokenId"


def test_a_signature_that_leaves_out_host_or_date_or_a_part_is_incomplete() -> None:
    given = vector("get-vanilla")
    authorization = _header(given.received, "authorization")
    refusals = {
        "SignedHeaders=x-amz-date,": "SignedHeaders must include 'host' and 'x-amz-date'.",
        "SignedHeaders=host,": "SignedHeaders must include 'host' and 'x-amz-date'.",
        "SignedHeaders=host;my-header1;x-amz-date,": (
            "Signed header 'my-header1' is not in the request."
        ),
        "": "Authorization header requires 'SignedHeaders' parameter.",
    }
    for signed, message in refusals.items():
        changed = authorization.replace("SignedHeaders=host;x-amz-date,", signed)
        verdict = _verdict(given, _with_header(given.received, "authorization", changed))
        assert (verdict.status, verdict.code, verdict.message) == (
            403,
            "IncompleteSignature",
            message,
        )
    unsigned = _verdict(given, _with_header(given.received, "authorization", None))
    assert (unsigned.status, unsigned.code) == (403, "MissingAuthenticationToken")
    undated = _verdict(given, _with_header(given.received, "x-amz-date", "2015-08-30"))
    assert undated.code == "IncompleteSignature"
    not_utf8 = _with_header(given.received, "host", "example.amazonaws.com\udce9")
    assert _verdict(given, not_utf8).message == "The request has a field that is not UTF-8."


def test_unsigned_payload_verifies_only_where_the_service_accepts_it() -> None:
    given = vector("post-vanilla")
    account = dataclasses.replace(given.account, allow_unsigned_payload=True)
    streamed = dataclasses.replace(
        _with_header(given.received, "x-amz-content-sha256", UNSIGNED_PAYLOAD), body=b"x" * 70_000
    )
    signed = _signed_as_expected(streamed, account, given.now)
    verdict = verify(signed, account, given.now)
    assert (verdict.verified, verdict.unsigned_payload) == (True, True)
    assert verdict.canonical_request.endswith(f"\n{UNSIGNED_PAYLOAD}")
    # A service that hashes every body wants the body's hash signed.
    refused = verify(signed, given.account, given.now)
    assert (refused.status, refused.code, refused.message) == (
        400,
        "XAmzContentSHA256Mismatch",
        "This service signs the body's hash: UNSIGNED-PAYLOAD is not accepted.",
    )


def test_s3_requires_the_body_hash_header() -> None:
    given = vector("get-vanilla")
    authorization = _header(given.received, "authorization").replace("/service/", "/s3/")
    received = _with_header(given.received, "authorization", authorization)
    verdict = _verdict(given, received, service="s3")
    assert (verdict.status, verdict.code) == (400, "InvalidRequest")
    assert verdict.message.endswith("x-amz-content-sha256.")


def test_a_path_as_sent_is_resolved_and_encoded_again_except_s3s_keys() -> None:
    sent = "/a%20b/./c/../%E1%88%B4//d~/"
    assert canonical_uri(sent, normalize=True, s3=False) == "/a%2520b/%25E1%2588%25B4/d~/"
    assert canonical_uri(sent, normalize=False, s3=False) == (
        "/a%2520b/./c/../%25E1%2588%25B4//d~/"
    )
    assert canonical_uri(sent, normalize=False, s3=True) == "/a%20b/./c/../%E1%88%B4//d~/"
    assert canonical_uri("", normalize=True, s3=False) == "/"
    assert canonical_uri("/a/..", normalize=True, s3=False) == "/"


def test_a_query_is_decoded_encoded_again_and_sorted() -> None:
    # ``+`` is a plus sign (AWS's own signer reads it so), ``%7e`` and ``~`` the same character.
    assert canonical_query("b=2&a=%7e+&a=1&c&&d=%2F x") == "a=1&a=~%2B&b=2&c=&d=%2F%20x"
