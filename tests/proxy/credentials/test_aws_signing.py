"""The SigV4 signer held to AWS's own test suite (aws-c-auth's 38 cases, carried unchanged in
aws_sigv4_vectors/), and to the path rules the suite does not reach (S3's)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gatehouse_contract.aws_keys import AwsKeys
from gatehouse_proxy.credentials.aws_signing import (
    UNSIGNED_PAYLOAD,
    Scope,
    Signed,
    SigningRequest,
    canonical_path,
    payload_hash,
    sign,
    signing_key,
)

VECTORS = Path(__file__).parent / "aws_sigv4_vectors"
CASES = sorted(path.name for path in VECTORS.iterdir() if path.is_dir())


@dataclass
class Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes


def parse_request(text: bytes) -> Request:
    """A request.txt: its request line, headers (a line starting with white space continues the
    one before), a blank line and its body. The target is as sent, spaces and all."""
    head, _, body = text.partition(b"\n\n")
    lines = head.decode().split("\n")
    method, _, rest = lines[0].partition(" ")
    target = rest.rpartition(" ")[0]
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t"):
            name, value = headers[-1]
            headers[-1] = (name, f"{value} {line}")
        elif line:
            name, _, value = line.partition(":")
            headers.append((name, value))
    return Request(method, target, headers, body)


def _case(name: str, file: str) -> bytes:
    return (VECTORS / name / file).read_bytes()


def _signed(name: str) -> tuple[Request, Signed]:
    context = json.loads(_case(name, "context.json"))
    request = parse_request(_case(name, "request.txt"))
    credentials = context["credentials"]
    keys = AwsKeys(
        credentials["access_key_id"], credentials["secret_access_key"], credentials.get("token", "")
    )
    scope = Scope(
        context["region"],
        context["service"],
        normalize_path=context["normalize"],
        content_sha256_header=context["sign_body"],
        sign_session_token=not context.get("omit_session_token", False),
    )
    host = next(value for header, value in request.headers if header.lower() == "host")
    path, _, query = request.target.partition("?")
    signing = SigningRequest(
        request.method,
        host,
        path,
        query,
        [(header, value) for header, value in request.headers if header.lower() != "host"],
        payload_hash([request.body]),
    )
    when = datetime.fromisoformat(context["timestamp"])
    return request, sign(signing, keys, scope, when)


def test_every_case_of_the_suite_is_carried() -> None:
    assert len(CASES) == 38


@pytest.mark.parametrize("name", CASES)
def test_aws_signing_test_suite(name: str) -> None:
    request, signed = _signed(name)
    assert signed.canonical_request == _case(name, "header-canonical-request.txt").decode()
    assert signed.string_to_sign == _case(name, "header-string-to-sign.txt").decode()
    assert signed.signature == _case(name, "header-signature.txt").decode().strip()
    expected = parse_request(_case(name, "header-signed-request.txt"))
    added = expected.headers[len(request.headers) :]
    assert expected.headers[: len(request.headers)] == request.headers
    assert {name.lower(): value for name, value in signed.headers} == {
        name.lower(): value for name, value in added
    }


def test_the_signing_key_is_the_published_example() -> None:
    """AWS's worked example of the key derivation (the 2015-08-30 us-east-1 iam key)."""
    key = signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1", "iam")
    assert key.hex() == "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"


@pytest.mark.parametrize(
    ("service", "sent", "canonical"),
    [
        # Encoded once more: AWS encodes the path it receives, as sent.
        ("execute-api", "/a%20b/./c/../d", "/a%2520b/d"),
        ("execute-api", "/", "/"),
        # S3: no dot segments removed, each segment's bytes encoded once.
        ("s3", "/a%20b/./c//d", "/a%20b/./c//d"),
        ("s3", "/key!'()*", "/key%21%27%28%29%2A"),
        ("s3", "/a%2Fb", "/a%2Fb"),
    ],
)
def test_paths_per_service(service: str, sent: str, canonical: str) -> None:
    assert canonical_path(sent, Scope.for_service("us-east-1", service)) == canonical


def test_unsigned_payload_and_a_session_token_are_signed_as_sent() -> None:
    keys = AwsKeys("ASIAEXAMPLEEXAMPLE", "secret", "token/with+chars")
    request = SigningRequest("PUT", "bucket.example:8443", "/k", "", (), UNSIGNED_PAYLOAD)
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    signed = sign(request, keys, Scope.for_service("eu-west-1", "s3"), when)
    added = dict(signed.headers)
    assert added["X-Amz-Content-Sha256"] == UNSIGNED_PAYLOAD
    assert added["X-Amz-Security-Token"] == "token/with+chars"
    assert added["X-Amz-Date"] == "20260102T030405Z"
    assert signed.canonical_request.endswith(
        "host;x-amz-content-sha256;x-amz-date;x-amz-security-token\nUNSIGNED-PAYLOAD"
    )
    assert "host:bucket.example:8443\n" in signed.canonical_request
    assert added["Authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLEEXAMPLE/20260102/eu-west-1/s3/aws4_request, "
    )
