"""A small OpenID Connect issuer on 127.0.0.1, for the page's "Sign in with ..." in tests.

Discovery, a JWKS of one RSA key, an authorization endpoint whose consent is a form (the test
types the user and clicks Allow), and a token endpoint that issues RS256 ID tokens for the
authorization code flow with PKCE (S256 only) and a client secret. Codes are single-use and live
a minute; the nonce the page sent comes back in the ID token.

``python -m gatehouse_dev.oidc_issuer --port PORT --client-id ID --client-secret SECRET``
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import uvicorn
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

KEY_ID = "dev-1"
CODE_SECONDS = 60


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True)
class Grant:
    client_id: str
    redirect_uri: str
    nonce: str
    challenge: str
    user: str
    groups: tuple[str, ...]
    expires: float


class Issuer:
    def __init__(self, url: str, client_id: str, client_secret: str) -> None:
        self.url = url
        self.client_id = client_id
        self.client_secret = client_secret
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.grants: dict[str, Grant] = {}

    def jwk(self) -> dict[str, str]:
        numbers = self.key.public_key().public_numbers()
        return {
            "kty": "RSA",
            "kid": KEY_ID,
            "use": "sig",
            "alg": "RS256",
            "n": _b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
            "e": _b64url(numbers.e.to_bytes(3, "big")),
        }

    def id_token(self, claims: dict[str, Any]) -> str:
        header = _b64url(json.dumps({"alg": "RS256", "kid": KEY_ID, "typ": "JWT"}).encode())
        payload = _b64url(json.dumps(claims).encode())
        signed = f"{header}.{payload}".encode()
        signature = self.key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{payload}.{_b64url(signature)}"

    async def discovery(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.url,
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "jwks_uri": f"{self.url}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def jwks(self, request: Request) -> Response:
        return JSONResponse({"keys": [self.jwk()]})

    async def consent(self, request: Request) -> Response:
        """The scripted consent: a form that carries the request on, with the user to be."""
        query = request.query_params
        if query.get("client_id") != self.client_id or query.get("response_type") != "code":
            return HTMLResponse("unknown client or response type", status_code=400)
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return HTMLResponse("PKCE with S256 is required", status_code=400)
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(name)}" value="{html.escape(value)}">'
            for name, value in query.items()
        )
        return HTMLResponse(
            "<!doctype html><title>Dev issuer</title><form method=post>"
            f"{hidden}<label>User <input name=user id=user></label>"
            "<label>Groups <input name=groups id=groups></label>"
            "<button id=allow type=submit>Allow</button></form>"
        )

    async def allow(self, request: Request) -> Response:
        form = await request.form()
        code = secrets.token_urlsafe(24)
        self.grants[code] = Grant(
            client_id=str(form["client_id"]),
            redirect_uri=str(form["redirect_uri"]),
            nonce=str(form.get("nonce", "")),
            challenge=str(form["code_challenge"]),
            user=str(form["user"]),
            groups=tuple(g for g in str(form.get("groups", "")).split(",") if g),
            expires=time.time() + CODE_SECONDS,
        )
        state = str(form.get("state", ""))
        return RedirectResponse(
            f"{form['redirect_uri']}?{urlencode({'code': code, 'state': state})}", 303
        )

    async def token(self, request: Request) -> Response:
        form = await request.form()
        grant = self.grants.pop(str(form.get("code", "")), None)  # single use
        if grant is None or grant.expires < time.time():
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        secret = str(form.get("client_secret", ""))
        verifier = str(form.get("code_verifier", ""))
        challenge = _b64url(hashlib.sha256(verifier.encode()).digest())
        if (
            form.get("client_id") != grant.client_id
            or not secrets.compare_digest(secret, self.client_secret)
            or form.get("redirect_uri") != grant.redirect_uri
            or not secrets.compare_digest(challenge, grant.challenge)
        ):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        now = int(time.time())
        claims = {
            "iss": self.url,
            "sub": grant.user,
            "aud": grant.client_id,
            "iat": now,
            "exp": now + 300,
            "nonce": grant.nonce,
            "email": grant.user,
            "email_verified": True,
            "groups": list(grant.groups),
        }
        return JSONResponse(
            {"access_token": "unused", "token_type": "Bearer", "id_token": self.id_token(claims)}
        )

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self.discovery),
                Route("/jwks", self.jwks),
                Route("/authorize", self.consent, methods=["GET"]),
                Route("/authorize", self.allow, methods=["POST"]),
                Route("/token", self.token, methods=["POST"]),
                Route("/healthz", lambda _: Response("ok")),
            ]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    args = parser.parse_args()
    issuer = Issuer(f"http://127.0.0.1:{args.port}", args.client_id, args.client_secret)
    uvicorn.run(issuer.app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
