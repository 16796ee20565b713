"""A real OAuth 2.0 token endpoint for the JWT-bearer grant, as Google's works, on 127.0.0.1.

It verifies each assertion's RS256 signature with the service account's public key and checks its
claims (issuer, audience, scope, expiry) before it issues a short-lived access token. ``/stats``
counts exchanges, so a test can show that many concurrent requests cause one exchange;
``/tokeninfo`` tells an upstream whether a token is one it issued and for which scopes.

``python -m gatehouse_dev.token_endpoint --port P --public-key KEY.pem --client-email E``
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class TokenEndpoint:
    def __init__(
        self, public_key: rsa.RSAPublicKey, client_email: str, audience: str, lifetime: int
    ) -> None:
        self.public_key = public_key
        self.client_email = client_email
        self.audience = audience
        self.lifetime = lifetime
        self.exchanges = 0
        self.issued: dict[str, dict[str, Any]] = {}

    def verify(self, assertion: str) -> dict[str, Any]:
        try:
            header_b64, payload_b64, signature_b64 = assertion.split(".")
            header = json.loads(_b64url(header_b64))
            claims: dict[str, Any] = json.loads(_b64url(payload_b64))
            if header.get("alg") != "RS256":
                raise ValueError("alg must be RS256")
            self.public_key.verify(
                _b64url(signature_b64),
                f"{header_b64}.{payload_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (ValueError, InvalidSignature) as error:
            raise web.HTTPBadRequest(
                text=json.dumps({"error": "invalid_grant", "error_description": str(error)}),
                content_type="application/json",
            ) from None
        now = time.time()
        problems = [
            claims.get("iss") != self.client_email and "iss",
            claims.get("aud") != self.audience and "aud",
            not claims.get("scope") and "scope",
            not (claims.get("iat", 0) - 60 <= now < claims.get("exp", 0)) and "exp",
        ]
        if any(problems):
            raise web.HTTPBadRequest(
                text=json.dumps({"error": "invalid_grant", "error_description": str(problems)}),
                content_type="application/json",
            )
        return claims

    async def token(self, request: web.Request) -> web.Response:
        form = await request.post()
        if form.get("grant_type") != JWT_BEARER:
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        claims = self.verify(str(form.get("assertion", "")))
        self.exchanges += 1
        value = "ya29.test-" + secrets.token_urlsafe(24)
        self.issued[value] = {"scope": claims["scope"], "exp": time.time() + self.lifetime}
        return web.json_response(
            {"access_token": value, "expires_in": self.lifetime, "token_type": "Bearer"}
        )

    async def tokeninfo(self, request: web.Request) -> web.Response:
        info = self.issued.get(request.query.get("access_token", ""))
        if info is None or info["exp"] < time.time():
            return web.json_response({"error": "invalid_token"}, status=400)
        return web.json_response(info)

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({"exchanges": self.exchanges})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--public-key", type=Path, required=True)
    parser.add_argument("--client-email", required=True)
    parser.add_argument("--lifetime", type=int, default=3600)
    args = parser.parse_args()
    public_key = serialization.load_pem_public_key(args.public_key.read_bytes())
    if not isinstance(public_key, rsa.RSAPublicKey):
        parser.error("--public-key must be an RSA public key")
    endpoint = TokenEndpoint(
        public_key, args.client_email, f"http://127.0.0.1:{args.port}/token", args.lifetime
    )
    app = web.Application()
    app.router.add_post("/token", endpoint.token)
    app.router.add_get("/tokeninfo", endpoint.tokeninfo)
    app.router.add_get("/stats", endpoint.stats)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
