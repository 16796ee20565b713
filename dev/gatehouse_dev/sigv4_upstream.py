"""An API on 127.0.0.1 that only AWS Signature Version 4 opens, checked as AWS checks it.

Every request, whatever its method and path, is verified by :mod:`gatehouse_dev.sigv4_verifier`
against the one :class:`Account` it serves, from the request line's target exactly as sent (the
aiohttp server keeps it undecoded) and the body as received. A verified request gets 200 and a
JSON echo of what was signed; any other an AWS-like error body with the code that failed
(``SignatureDoesNotMatch`` with the canonical request and string to sign the service expected,
as S3 gives them), in JSON as AWS's JSON services answer. Its secret is never in an answer. The
clock is the caller's (AWS's test vectors were signed in 2015).
"""

from __future__ import annotations

import collections
import hashlib
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

from aiohttp import web

from gatehouse_dev.sigv4_verifier import Account, Received, verify

# Large enough for the tests' bodies past the proxy's streaming threshold.
MAX_BODY_BYTES = 16 * 1024 * 1024


class SigV4Upstream:
    """``create_app()`` serves ``account``; ``answers`` counts the codes answered (``"OK"``
    for each request verified)."""

    def __init__(self, account: Account, clock: Callable[[], float] = time.time) -> None:
        self.account = account
        self.clock = clock
        self.answers: collections.Counter[str] = collections.Counter()

    def create_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        received = Received(request.method, request.raw_path, list(request.headers.items()), body)
        verdict = verify(received, self.account, datetime.fromtimestamp(self.clock(), UTC))
        self.answers[verdict.code or "OK"] += 1
        if not verdict.verified:
            error = {"__type": verdict.code, "message": verdict.message}
            if verdict.canonical_request:
                error["CanonicalRequest"] = verdict.canonical_request
                error["StringToSign"] = verdict.string_to_sign
            return web.json_response(
                error, status=verdict.status, headers={"x-amzn-ErrorType": verdict.code}
            )
        path, _, query = request.raw_path.partition("?")
        try:
            parsed = json.loads(body) if request.content_type == "application/json" else None
        except ValueError:
            parsed = None
        return web.json_response(
            {
                "verified": True,
                "method": request.method,
                "path": path,
                "query": query,
                "signedHeaders": list(verdict.signed_headers),
                "unsignedPayload": verdict.unsigned_payload,
                "bodyBytes": len(body),
                "bodySha256": hashlib.sha256(body).hexdigest(),
                "json": parsed,
            }
        )
