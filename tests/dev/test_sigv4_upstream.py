"""The SigV4 upstream on a real socket: AWS's signed requests sent byte for byte (a target with
double slashes, repeated fields, as they are) verify, and a refusal names what failed. (A
folded field, a space or raw UTF-8 in the target is no HTTP/1.1 a server accepts: those cases
are the verifier's alone.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gatehouse_dev.sigv4_upstream import SigV4Upstream
from tests.dev.sigv4_vectors import VECTORS, vector
from tests.proxy.serving import upstream


async def _send(origin: str, request: bytes) -> tuple[int, dict[str, Any]]:
    """``request`` as it is written (the head's line ends made CRLF), on a connection of its
    own; the answer's status and JSON body."""
    head, _, body = request.partition(b"\n\n")
    host, port = origin.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.replace(b"\n", b"\r\n") + b"\r\nConnection: close\r\n\r\n" + body)
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
        await writer.wait_closed()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def _request(case: str) -> bytes:
    return (VECTORS / case / "header-signed-request.txt").read_bytes()


def test_awss_requests_sent_as_signed_verify_and_a_changed_one_names_what_failed() -> None:
    cases = {
        "get-vanilla-query-order-encoded": "/",
        "get-slashes-unnormalized": "//example//",
        "get-header-key-duplicate": "/",
        "get-vanilla-with-session-token": "/",
        "post-x-www-form-urlencoded": "/",
    }

    async def scenario() -> None:
        for case, path in cases.items():
            given = vector(case)
            verifier = SigV4Upstream(given.account, clock=given.now.timestamp)
            async with upstream(verifier.create_app()) as origin:
                status, echo = await _send(origin, _request(case))
                assert (status, echo["verified"], echo["path"]) == (200, True, path), case
                assert echo["bodyBytes"] == len(given.received.body)
                changed = _request(case).replace(b"example.amazonaws.com", b"example.amazonaws.co")
                status, error = await _send(origin, changed)
                assert (status, error["__type"]) == (403, "SignatureDoesNotMatch")
                assert "host:example.amazonaws.co\n" in error["CanonicalRequest"]
                assert error["StringToSign"].startswith("AWS4-HMAC-SHA256\n20150830T123600Z\n")
                assert given.account.secret_access_key not in json.dumps(error)
                assert dict(verifier.answers) == {"OK": 1, "SignatureDoesNotMatch": 1}

    asyncio.run(scenario())


def test_a_request_signed_long_ago_is_refused_as_expired() -> None:
    given = vector("get-vanilla")

    async def scenario() -> None:
        verifier = SigV4Upstream(given.account)  # the clock on the wall: 2015 was long ago
        async with upstream(verifier.create_app()) as origin:
            status, error = await _send(origin, _request("get-vanilla"))
            assert (status, error["__type"]) == (403, "RequestExpired")
            assert error["message"].startswith("Signature expired: 20150830T123600Z is now")

    asyncio.run(scenario())


def test_the_path_is_verified_as_sent_not_as_decoded() -> None:
    """get-utf8 was signed for ``/ሴ`` (its canonical URI ``/%E1%88%B4``). Sent as ``/%E1%88%B4``
    it is another request to a service that encodes the path again: were the path decoded
    before the verifier saw it, this would verify."""
    given = vector("get-utf8")
    sent = _request("get-utf8").replace("/ሴ ".encode(), b"/%E1%88%B4 ")

    async def scenario() -> None:
        verifier = SigV4Upstream(given.account, clock=given.now.timestamp)
        async with upstream(verifier.create_app()) as origin:
            status, error = await _send(origin, sent)
            assert (status, error["__type"]) == (403, "SignatureDoesNotMatch")
            assert error["CanonicalRequest"].startswith("GET\n/%25E1%2588%25B4\n")

    asyncio.run(scenario())
